"""API.md §Errors and retries and Details §Retries: kinds, statuses, backoff, Retry-After, no key leaks.

Fixtures and the contract's conventions: tests/contract/conftest.py.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import pytest
from api_helpers import KEY, free_port, make
from background import returns_within as _returns

import agentcore
from agentcore import Agent, AgentError
from agentcore.testing import ModelServer


def test_on_retry_payload(srv: ModelServer, agents: list[Agent]) -> None:
    retries: list[dict[str, Any]] = []
    srv.add({"status": 500, "error": "e1"}, {"status": 400, "error": "e2"}, "ok")
    agent = make(
        agents, srv, retry_base_delay=0.01, retry_max_delay=1, callbacks={"on_retry": retries.append}
    )
    assert agent.send("q").text == "ok"
    assert all(set(r) == {"attempt", "error", "delay"} for r in retries)
    assert [r["attempt"] for r in retries] == [1, 2]
    assert [r["delay"] for r in retries] == [0.01, 0.02]
    assert [r["error"].kind for r in retries] == ["server", "request"]


def test_retry_after_replaces_the_wait_capped(srv: ModelServer, agents: list[Agent]) -> None:
    retries: list[dict[str, Any]] = []
    srv.add(
        {"status": 429, "error": "slow", "headers": {"Retry-After": "0"}},
        {"status": 429, "error": "slow", "headers": {"Retry-After": "100"}},
        "ok",
    )
    agent = make(
        agents, srv, retry_base_delay=3, retry_max_delay=0.05, callbacks={"on_retry": retries.append}
    )
    agent.send("q")
    assert [r["delay"] for r in retries] == [0.0, 0.05]


def test_retry_max_elapsed_and_filters(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"status": 500, "error": "e"})
    agent = make(agents, srv, retry_base_delay=1, retry_max_delay=5, retry_max_elapsed=0.5)
    with pytest.raises(AgentError) as info:
        agent.send("q")
    assert info.value.kind == "server" and len(srv.requests) == 1
    srv.add({"status": 503, "error": "Overloaded now"})
    skip = make(agents, srv, retry={"skip_text": "overloaded"})
    with pytest.raises(AgentError):
        skip.send("q")
    srv.add({"status": 502, "error": "bad gateway"})
    codes = make(agents, srv, retry={"skip_codes": [502]})
    with pytest.raises(AgentError):
        codes.send("q")
    srv.add({"status": 401, "error": "who"})
    fn = make(agents, srv, retry=lambda error: error.kind != "auth")
    with pytest.raises(AgentError) as info:
        fn.send("q")
    assert info.value.kind == "auth"
    assert len(srv.requests) == 4


def test_agent_error_attributes() -> None:
    cause = ValueError("root")
    error = AgentError("msg", kind="server", status=503, retryable=True, cause=cause)
    assert (error.message, error.kind, error.status, error.retryable, error.cause) == (
        "msg",
        "server",
        503,
        True,
        cause,
    )
    assert hasattr(error, "body") and isinstance(error, Exception)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, "auth"),
        (403, "auth"),
        (429, "limit"),
        (408, "timeout"),
        (500, "server"),
        (503, "server"),
        (400, "request"),
        (404, "request"),
    ],
)
def test_status_kinds(srv: ModelServer, status: int, kind: str) -> None:
    srv.add({"status": status, "error": "vendor says no"})
    with pytest.raises(AgentError) as info:
        agentcore.llm.chat(
            base_url=srv.base_url, api_key="", model="m", messages=[{"role": "user", "content": "q"}]
        )
    assert info.value.kind == kind and info.value.status == status
    assert "vendor says no" in info.value.message
    assert len(srv.requests) == 1  # exactly one request, no retries


def test_malformed_2xx_is_unknown_with_status_200(srv: ModelServer) -> None:
    srv.add({"body": "this is not json", "status": 200, "content_type": "application/json"})
    with pytest.raises(AgentError) as info:
        agentcore.llm.chat(
            base_url=srv.base_url, model="m", messages=[{"role": "user", "content": "q"}], stream=False
        )
    assert info.value.kind == "unknown" and info.value.status == 200


def test_network_and_timeout_kinds(srv: ModelServer) -> None:
    messages = [{"role": "user", "content": "q"}]
    with pytest.raises(AgentError) as info:
        agentcore.llm.chat(base_url=f"http://127.0.0.1:{free_port()}/v1", model="m", messages=messages)
    assert info.value.kind == "network"
    srv.add({"text": "late", "delay": 60})  # returning at all proves the 60 s stall was cut
    with pytest.raises(AgentError) as info:
        _returns(
            lambda: agentcore.llm.chat(
                base_url=srv.base_url, model="m", messages=messages, request_timeout=0.2
            )
        )
    assert info.value.kind == "timeout"


def test_long_healthy_stream_is_not_cut_by_request_timeout(srv: ModelServer) -> None:
    # The stream outlasts request_timeout (30 gaps of at least 0.1 s = 3 s > 2 s); each gap is far
    # below it (a 20x, 1.9 s margin for a busy machine's scheduling).
    srv.add({"text": "a" * 120, "chunk_size": 4, "chunk_delay": 0.1})
    result = agentcore.llm.chat(
        base_url=srv.base_url, model="m", messages=[{"role": "user", "content": "q"}], request_timeout=2.0
    )
    assert result.text == "a" * 120


def test_api_key_never_leaks(srv: ModelServer, agents: list[Agent], caplog: pytest.LogCaptureFixture) -> None:
    srv.add({"status": 401, "error": f"invalid key {KEY}"})
    agent = make(agents, srv, api_key=KEY, retry=lambda e: False)
    with caplog.at_level(logging.DEBUG), pytest.raises(AgentError) as info:
        agent.send("q")
    error = info.value
    for text in (
        error.message,
        str(error),
        repr(error),
        error.body or "",
        caplog.text,
        json.dumps(agent.history),
    ):
        assert KEY not in text
    assert KEY not in repr(agent) and KEY not in repr(agent.config)


def test_mid_stream_failures_are_retried(srv: ModelServer, agents: list[Agent]) -> None:
    retries: list[dict[str, Any]] = []
    starts: list[Any] = []
    srv.add(
        {"text": "one two three", "stream_error": "overloaded"},
        {"text": "one two three", "truncate": True},
        "final",
    )
    agent = make(agents, srv, callbacks={"on_retry": retries.append, "on_llm_start": starts.append})
    result = agent.send("q")
    assert result.text == "final" and result.steps == 1
    assert [r["attempt"] for r in retries] == [1, 2]
    assert all(r["error"].kind in ("network", "timeout", "server", "unknown") for r in retries)
    assert len(starts) == 3  # on_llm_start per HTTP attempt
    assert [m["role"] for m in agent.history] == ["user", "assistant"]


def test_retry_after_ms_and_pattern_skip_text(srv: ModelServer, agents: list[Agent]) -> None:
    retries: list[dict[str, Any]] = []
    srv.add({"status": 429, "error": "slow", "headers": {"retry-after-ms": "20"}}, "ok")
    agent = make(agents, srv, retry_base_delay=3, retry_max_delay=10, callbacks={"on_retry": retries.append})
    agent.send("q")
    assert [r["delay"] for r in retries] == [pytest.approx(0.02)]
    srv.add({"status": 503, "error": "Quota EXCEEDED for today"})
    skip = make(agents, srv, retry={"skip_text": re.compile(r"quota \w+", re.IGNORECASE)})
    with pytest.raises(AgentError) as info:
        skip.send("q")
    assert info.value.kind == "server"
    assert srv.remaining == 0 and len(srv.requests) == 3


def test_401_and_400_are_retried_by_default(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"status": 401, "error": "who"}, {"status": 400, "error": "bad"}, "ok")
    assert make(agents, srv).send("q").text == "ok"
    assert len(srv.requests) == 3


def test_stall_mid_stream_is_timeout(srv: ModelServer) -> None:
    srv.add({"text": "a long reply that stalls", "stall_after": 2})
    with pytest.raises(AgentError) as info:
        agentcore.llm.chat(
            base_url=srv.base_url, model="m", messages=[{"role": "user", "content": "q"}], request_timeout=0.2
        )
    assert info.value.kind == "timeout"


def test_retry_after_http_date(srv: ModelServer, agents: list[Agent]) -> None:
    retries: list[dict[str, Any]] = []
    srv.add(
        {"status": 503, "error": "later", "headers": {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}},
        "ok",
    )
    agent = make(agents, srv, retry_base_delay=3, retry_max_delay=10, callbacks={"on_retry": retries.append})
    assert agent.send("q").text == "ok"
    assert [r["delay"] for r in retries] == [0.0]  # a date in the past: no wait
