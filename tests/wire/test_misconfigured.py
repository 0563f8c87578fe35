"""A misconfigured agent is never silent (issue 8 defect 3): retries are logged, a bad base_url
or a misplaced key is a config error naming the fix, and a stop during a retry wait says what
was being retried."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator

import pytest

from agentcore import Agent, AgentError
from agentcore.testing import ModelServer

SECRET = "sk-live-secret-4242"


class _Signal(logging.Handler):
    """Sets `heard` at the first retry WARNING on logger "agentcore"."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.heard = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "retry" in record.getMessage():
            self.heard.set()


@pytest.fixture
def first_retry() -> Iterator[threading.Event]:
    handler = _Signal()
    logger = logging.getLogger("agentcore")
    logger.addHandler(handler)
    try:
        yield handler.heard
    finally:
        logger.removeHandler(handler)


@pytest.fixture
def refused_url() -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # bound, never listening: connect() is refused
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        sock.close()


def test_nothing_listening_is_logged_and_a_stop_names_the_failure(
    refused_url: str, first_retry: threading.Event, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agentcore")
    agent = Agent(config={"base_url": refused_url, "model": "m"})  # the README's defaults: 5 s waits
    box: dict[str, BaseException] = {}

    def run() -> None:
        try:
            agent.send("hi")
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert first_retry.wait(30), "no WARNING about the retry"
        agent.stop()
        thread.join(30)
    finally:
        agent.close()
    error = box["error"]
    assert isinstance(error, AgentError) and error.kind == "aborted"
    assert "waiting to retry" in error.message and "connection refused" in error.message
    assert error.cause is not None and error.cause.kind == "network"  # type: ignore[attr-defined]
    record = next(r for r in caplog.records if "retry" in r.getMessage())
    assert record.levelno == logging.WARNING and record.name == "agentcore"
    text = record.getMessage()
    assert "kind=network" in text and "retry 1 in 5.00 s" in text and "connection refused" in text


def test_a_401_is_retried_with_a_warning_that_hides_the_key(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="agentcore")
    rejected = {"status": 401, "error": f"Incorrect API key provided: {SECRET}"}
    with ModelServer([rejected, "fine"]) as server:
        agent = Agent(
            config={"base_url": server.base_url, "model": "m", "api_key": SECRET, "retry_base_delay": 0}
        )
        assert agent.send("hi").text == "fine"
        agent.close()
    (record,) = [r for r in caplog.records if "retry" in r.getMessage()]
    text = record.getMessage()
    assert "kind=auth" in text and "status=401" in text and "retry 1 in 0.00 s" in text
    assert SECRET not in text and "***" in text


@pytest.mark.parametrize(
    "url",
    ["localhost:8080/v1", "127.0.0.1:8080", "ftp://example.com/v1", "http://", "https:///v1", "http//x/v1"],
)
def test_a_base_url_without_scheme_and_host_is_a_config_error(url: str) -> None:
    with pytest.raises(AgentError) as info:
        Agent(config={"base_url": url, "model": "m"})
    assert (
        info.value.kind == "config" and "base_url" in info.value.message and repr(url) in info.value.message
    )


def test_a_bad_base_url_at_send_writes_nothing(server: ModelServer) -> None:
    agent = Agent(config={"base_url": server.base_url, "model": "m"})
    with pytest.raises(AgentError) as info:
        agent.send("hi", config={"base_url": "localhost:8080/v1"})
    assert info.value.kind == "config" and agent.history == [] and server.requests == []
    assert agent.config["base_url"] == server.base_url


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8080/v1", "https://api.openai.com/v1", "http://[::1]:8080/v1", "HTTP://Host"]
)
def test_good_base_urls_are_accepted(url: str) -> None:
    assert Agent(config={"base_url": url, "model": "m"}).config["base_url"] == url


def test_an_empty_base_url_fails_the_send_as_config_and_writes_nothing() -> None:
    agent = Agent(config={"model": "m"})
    with pytest.raises(AgentError) as info:
        agent.send("hi")
    assert info.value.kind == "config" and "base_url" in info.value.message and agent.history == []


def test_a_provider_key_at_the_top_level_says_it_belongs_in_provider() -> None:
    with pytest.raises(AgentError) as info:
        Agent(config={"temperature": 0.2})
    assert info.value.kind == "config"
    assert "'temperature'" in info.value.message and "belongs in provider" in info.value.message


@pytest.mark.parametrize(
    ("config", "hint"),
    [
        ({"retry_max_elasped": 1.0}, "did you mean 'retry_max_elapsed'?"),
        ({"modle": "m"}, "did you mean 'model'?"),
        ({"temprature": 0.2}, "did you mean provider['temperature']?"),
        ({"provider": {"temprature": 0.2}}, "did you mean 'temperature'?"),
        ({"capabilities": {"imgae": False}}, "did you mean 'image'?"),
    ],
)
def test_unknown_keys_get_a_did_you_mean_hint(config: dict[str, object], hint: str) -> None:
    with pytest.raises(AgentError) as info:
        Agent(config=config)
    assert info.value.kind == "config" and hint in info.value.message


def test_an_unknown_key_at_send_gets_the_hint_too(server: ModelServer) -> None:
    agent = Agent(config={"base_url": server.base_url, "model": "m"})
    with pytest.raises(AgentError) as info:
        agent.send("hi", config={"max_step": 3})
    assert "did you mean 'max_steps'?" in info.value.message and agent.history == []


@pytest.mark.parametrize("value", [-1, "5", True, float("nan")])
def test_stream_idle_timeout_must_be_seconds(value: object) -> None:
    with pytest.raises(AgentError) as info:
        Agent(config={"stream_idle_timeout": value})
    assert info.value.kind == "config" and "stream_idle_timeout" in info.value.message
