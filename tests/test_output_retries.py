"""Structured-output retries tell the model what was wrong (API.md §Details; issue 8 defect 6).

An invalid reply used to be resent unchanged with backoff, forever. Now: each retry request
carries a request-only user message quoting the validation error, at most `output_retries`
times per round, then `AgentError(kind="unknown")`; immediate and announced through `on_retry`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agentcore import Agent, AgentError, output, tool
from agentcore.testing import ModelServer

MakeAgent = Callable[..., Agent]
SCHEMA = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}
INVALID = '{"total": "many"}'
ERROR_TEXT = "'many' is not of type 'number'"
# No backoff may be used and the retry filter must not apply: a filter that forbids every
# retry, and a base delay that would stall the test for minutes if it were waited.
NO_NETWORK_RETRIES = {"retry": lambda error: False, "retry_base_delay": 600.0}


def last_user_text(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"]) if body["messages"][-1]["role"] == "user" else ""


def test_invalid_reply_is_retried_with_the_error_then_fails_with_unknown(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(INVALID, INVALID, INVALID, INVALID, "never asked")
    retries: list[dict[str, Any]] = []
    agent = make_agent(
        server, output=output.object(SCHEMA), callbacks={"on_retry": retries.append}, **NO_NETWORK_RETRIES
    )
    with pytest.raises(AgentError) as raised:
        agent.send("count")
    assert raised.value.kind == "unknown"
    assert ERROR_TEXT in raised.value.message
    assert len(server.requests) == 4  # 1 + output_retries (3)
    assert ERROR_TEXT not in json.dumps(server.requests[0])
    for body in server.requests[1:]:
        assert ERROR_TEXT in last_user_text(body)
        assert body["messages"][0] == {"role": "user", "content": "count"}
    assert [(r["attempt"], r["delay"], r["error"].kind) for r in retries] == [
        (1, 0.0, "unknown"),
        (2, 0.0, "unknown"),
        (3, 0.0, "unknown"),
    ]
    # Neither the invalid replies nor the feedback are written.
    assert [m["role"] for m in agent.history] == ["user"]


def test_a_corrected_reply_finishes_and_only_it_is_written(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(INVALID, '{"total": 42}')
    agent = make_agent(server, output=output.object(SCHEMA), **NO_NETWORK_RETRIES)
    result = agent.send("count")
    assert result.reason == "finished" and result.output == {"total": 42}
    assert len(server.requests) == 2
    assert ERROR_TEXT in last_user_text(server.requests[1])
    assert [m["role"] for m in agent.history] == ["user", "assistant"]
    assert "many" not in json.dumps(agent.history)


def test_output_retries_zero_fails_on_the_first_invalid_reply(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add("not json at all", "never asked")
    agent = make_agent(server, output=output.object(SCHEMA), output_retries=0)
    with pytest.raises(AgentError) as raised:
        agent.send("count")
    assert raised.value.kind == "unknown" and "not valid JSON" in raised.value.message
    assert len(server.requests) == 1


def test_output_retries_are_counted_per_round(server: ModelServer, make_agent: MakeAgent) -> None:
    @tool
    def lookup() -> int:
        """Look the total up."""
        return 42

    # Round 1: one invalid reply, then a tool call. Round 2: one invalid reply, then valid.
    server.add(INVALID, {"tool_calls": [{"name": "lookup", "arguments": {}}]}, INVALID, '{"total": 42}')
    agent = make_agent(server, output=output.object(SCHEMA), output_retries=1, tools=[lookup])
    assert agent.send("count").output == {"total": 42}
    assert len(server.requests) == 4


def test_the_error_reaches_every_protocol(server: ModelServer, make_agent: MakeAgent) -> None:
    for protocol in ("chat", "responses", "anthropic", "gemini"):
        server.add(INVALID, '{"total": 1}')
        agent = make_agent(server, protocol=protocol, output=output.object(SCHEMA), cache=False)
        assert agent.send("count").output == {"total": 1}
        assert ERROR_TEXT in json.dumps(server.requests[-1]), protocol
        assert ERROR_TEXT not in json.dumps(server.requests[-2]), protocol


@pytest.mark.parametrize("value", [-1, True, 1.5, "3", None])
def test_output_retries_must_be_an_int_of_at_least_zero(value: Any, server: ModelServer) -> None:
    with pytest.raises(AgentError) as raised:
        Agent(config={"base_url": server.base_url, "model": "m", "output_retries": value})
    assert raised.value.kind == "config" and "output_retries" in raised.value.message
