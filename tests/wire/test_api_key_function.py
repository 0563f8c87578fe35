"""`api_key` may be a function `() -> str`, called before every HTTP attempt (issue 9 item 6);
the keys it returns are redacted like static ones."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agentcore import Agent, AgentError
from agentcore.testing import ModelServer

PROTOCOL_HEADERS = {
    "chat": ("authorization", "Bearer {}"),
    "responses": ("authorization", "Bearer {}"),
    "anthropic": ("x-api-key", "{}"),
    "gemini": ("x-goog-api-key", "{}"),
}


class Keys:
    """Hands out sk-expired-0001 first, then fresh keys; counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        return "sk-expired-0001" if self.calls == 1 else f"sk-fresh-000{self.calls}"


@pytest.mark.parametrize("protocol", list(PROTOCOL_HEADERS))
def test_a_rejected_key_is_replaced_by_the_function_on_the_retry(
    protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agentcore")
    keys = Keys()

    def rejects_expired(recorded: Any) -> Any:
        name, _ = PROTOCOL_HEADERS[protocol]
        if "sk-expired-0001" in recorded.headers.get(name, ""):
            return {"status": 401, "error": "key sk-expired-0001 has expired"}
        return "welcome back"

    with ModelServer([rejects_expired, rejects_expired]) as server:
        agent = Agent(
            config={"base_url": server.base_url, "model": "m", "protocol": protocol, "api_key": keys,
                    "retry_base_delay": 0}
        )  # fmt: skip
        retries: list[dict[str, Any]] = []
        assert agent.send("hi", callbacks={"on_retry": retries.append}).text == "welcome back"
        agent.close()
        name, shape = PROTOCOL_HEADERS[protocol]
        sent = [entry.headers[name] for entry in server.log]
    assert keys.calls == 2
    assert sent == [shape.format("sk-expired-0001"), shape.format("sk-fresh-0002")]
    (retry,) = retries
    error = retry["error"]
    assert error.kind == "auth" and "sk-expired-0001" not in error.message
    assert "sk-expired-0001" not in (error.body or "") and "sk-expired-0001" not in repr(error)
    assert all("sk-expired-0001" not in r.getMessage() for r in caplog.records)


def test_the_function_is_called_before_every_attempt_and_its_key_never_shows() -> None:
    keys = Keys()

    def echo(recorded: Any) -> Any:  # a server that quotes the key it was sent
        return {"status": 500, "error": f"upstream saw {recorded.headers['authorization']}"}

    with ModelServer(default=echo) as server:
        agent = Agent(
            config={"base_url": server.base_url, "model": "m", "api_key": keys, "retry_base_delay": 0,
                    "retry": lambda e: len(server.log) < 3}
        )  # fmt: skip
        with pytest.raises(AgentError) as info:
            agent.send("hi")
        agent.close()
    assert keys.calls == len(server.log) == 3
    assert "sk-fresh-0003" not in info.value.message and "sk-fresh-0003" not in (info.value.body or "")


def test_the_config_repr_masks_a_key_function() -> None:
    def secret_key_function() -> str:
        return "sk-hidden-9999"

    agent = Agent(config={"api_key": secret_key_function, "compact": {"api_key": secret_key_function}})
    shown = repr(agent.config)
    assert "secret_key_function" not in shown and "<api_key function>" in shown
    assert callable(agent.config["api_key"])


@pytest.mark.parametrize("value", [42, b"bytes", ["k"]])
def test_a_key_that_is_neither_str_nor_function_is_a_config_error(value: object) -> None:
    with pytest.raises(AgentError) as info:
        Agent(config={"api_key": value})
    assert info.value.kind == "config" and "api_key" in info.value.message


def test_a_function_returning_a_non_str_fails_as_config(server: ModelServer) -> None:
    agent = Agent(config={"base_url": server.base_url, "model": "m", "api_key": lambda: None})
    with pytest.raises(AgentError) as info:
        agent.send("hi")
    agent.close()
    assert info.value.kind == "config" and "must return a str" in info.value.message and server.log == []


def test_a_raising_function_is_an_auth_failure_that_is_retried(server: ModelServer) -> None:
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("token service down")
        return "sk-ok-1234"

    server.add("ok")
    agent = Agent(config={"base_url": server.base_url, "model": "m", "api_key": flaky, "retry_base_delay": 0})
    assert agent.send("hi").text == "ok"
    agent.close()
    assert len(calls) == 2 and server.log[0].headers["authorization"] == "Bearer sk-ok-1234"
