"""Fault injection over the four protocols: each fault gives its kind, is retried (a WARNING per
retry on logger "agentcore"), stays bounded by retry_max_elapsed, and leaves a valid history.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

import pytest
from phases import history_problems

from agentcore import Agent, AgentError
from agentcore.testing import ModelServer

PROTOCOLS = ["chat", "responses", "anthropic", "gemini"]
LONG = "A reply long enough to be cut into several stream chunks. " * 4
IDLE_S = 1.0  # generous: a healthy local stream never goes quiet this long

# name -> (script item, config extras, expected kind)
FAULTS: dict[str, tuple[dict[str, Any], dict[str, Any], str]] = {
    "reset-before-headers": ({"reset_before_headers": True}, {}, "network"),
    "drop-mid-stream": ({"text": LONG, "drop_after": 2}, {}, "network"),
    "stall-mid-stream": ({"text": LONG, "stall_after": 2}, {"stream_idle_timeout": IDLE_S}, "timeout"),
    "5xx": ({"status": 503, "error": "overloaded"}, {}, "server"),
    "429-retry-after": ({"status": 429, "headers": {"Retry-After": "0"}}, {}, "limit"),
    "429-retry-after-ms": ({"status": 429, "headers": {"retry-after-ms": "5"}}, {}, "limit"),
    "malformed-json": (
        {"status": 200, "body": "this { is not json", "content_type": "application/json"},
        {"stream": False},
        "unknown",
    ),
    "truncated-stream": ({"text": LONG, "truncate": True}, {}, "network"),
    "in-stream-error": ({"text": LONG, "stream_error": "overloaded"}, {}, "server"),
}


def _retry_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "agentcore" and r.levelno == logging.WARNING and "retry" in r.getMessage()
    ]


def _agent(base_url: str, protocol: str, extra: dict[str, Any], seen: list[dict[str, Any]]) -> Agent:
    config = {
        "base_url": base_url,
        "model": "m",
        "protocol": protocol,
        "retry_base_delay": 0.01,
        "retry_max_delay": 0.05,
        **extra,
    }
    return Agent(config=config, callbacks={"on_retry": seen.append})


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_fault_is_retried_with_a_warning_and_the_send_recovers(
    protocol: str, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agentcore")
    item, extra, kind = FAULTS[fault]
    seen: list[dict[str, Any]] = []
    if fault.startswith("429"):
        extra = {**extra, "retry_base_delay": 30.0, "retry_max_delay": 60.0}  # only the header is short
    with ModelServer([item, item, "recovered"]) as server:
        agent = _agent(server.base_url, protocol, extra, seen)
        try:
            assert agent.send("hi").text == "recovered"
        finally:
            agent.close()
        assert len(server.requests) == 3
    assert [payload["error"].kind for payload in seen] == [kind, kind]
    if fault == "429-retry-after":
        assert [payload["delay"] for payload in seen] == [0.0, 0.0]
    if fault == "429-retry-after-ms":
        assert [payload["delay"] for payload in seen] == [0.005, 0.005]
    warnings = _retry_warnings(caplog)
    assert len(warnings) == 2
    assert all(f"kind={kind}" in w.getMessage() for w in warnings)
    assert [m["role"] for m in agent.history] == ["user", "assistant"]
    assert history_problems(agent.history, "hi") == []


@pytest.mark.parametrize("fault", ["refused", *FAULTS])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_lasting_fault_gives_up_within_retry_max_elapsed(
    protocol: str, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agentcore")
    item, extra, kind = FAULTS.get(fault, ({}, {}, "network"))
    seen: list[dict[str, Any]] = []
    with ModelServer(default=item) as server, _refusing_port() as refused:
        base_url = f"http://127.0.0.1:{refused}/v1" if fault == "refused" else server.base_url
        agent = _agent(base_url, protocol, {**extra, "retry_max_elapsed": 0.3}, seen)
        try:
            with pytest.raises(AgentError) as info:
                agent.send("hi")
        finally:
            agent.close()
        attempts = len(server.requests) if fault != "refused" else len(seen) + 1
    assert info.value.kind == kind
    assert len(seen) == attempts - 1  # every failure but the last was retried
    assert len(_retry_warnings(caplog)) == len(seen)
    assert agent.history == [agent.history[0]] and agent.history[0]["content"] == "hi"
    assert history_problems(agent.history, "hi") == []


class _refusing_port:
    """A bound, never-listening port: connect() is refused at once (and no one else can take it)."""

    def __enter__(self) -> int:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        port: int = self._sock.getsockname()[1]
        return port

    def __exit__(self, *exc: object) -> None:
        self._sock.close()
