"""API.md §Context and compaction, Details §Context, §Compaction and §Scope of learned state.

Fixtures and the contract's conventions: tests/contract/conftest.py.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from api_helpers import KEY, make

import agentcore
from agentcore import Agent, AgentError, Usage
from agentcore.testing import ModelServer


def test_compact_appends_summary_and_reports(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"text": "SUMMARY", "usage": {"input_tokens": 50, "output_tokens": 5}})
    events: list[dict[str, Any]] = []
    agent = make(agents, srv)
    agent.history.extend([agentcore.history.user("do it"), agentcore.history.assistant("done")])
    text = agent.compact(on_compact=events.append)
    assert text == "SUMMARY"
    assert agent.history[-1]["role"] == "compact" and agent.history[-1]["content"] == "SUMMARY"
    kinds = [e["type"] for e in events]
    assert kinds[0] == "compact-start" and kinds[-1] == "compact-finish"
    assert all(e.get("request") == "compact" for e in events[1:-1])
    assert isinstance(events[-1]["usage"], Usage) and events[-1]["usage"].input_tokens == 50


def test_empty_summary_is_unknown_and_appends_nothing(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"text": "  "})
    agent = make(agents, srv, retry_max_elapsed=0)
    agent.history.append(agentcore.history.user("hi"))
    with pytest.raises(AgentError) as info:
        agent.compact()
    assert info.value.kind == "unknown"
    assert len(agent.history) == 1


def test_context_build_shape() -> None:
    h = agentcore.history
    history = [h.user("hello"), {**h.assistant("hi"), "id": "x", "usage": {}}]
    ctx = agentcore.context.build(history, system="Be brief.")
    assert ctx.system == "Be brief."
    assert ctx.messages == [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
    ]
    assert type(ctx.tokens) is int and ctx.tokens > 0
    assert all(m["role"] != "system" for m in ctx.messages)
    default = agentcore.context.build(history, system="Be brief.", ratio=None).tokens
    assert default == agentcore.context.build(history, system="Be brief.", ratio=0.6).tokens
    assert agentcore.context.build(history, system="Be brief.", ratio=1.2).tokens > default
    with_tools = agentcore.context.build(history, tools=[{"name": "add", "description": "x"}])
    assert with_tools.tokens > agentcore.context.build(history).tokens


def test_context_strips_reasoning_without_state() -> None:
    h = agentcore.history
    history = [
        h.user("q"),
        h.assistant([{"type": "reasoning", "text": "hmm"}, {"type": "text", "text": "a"}]),
    ]
    ctx = agentcore.context.build(history)
    assert ctx.messages[1]["content"] == [{"type": "text", "text": "a"}]


def test_context_with_summary() -> None:
    h = agentcore.history
    history = [h.user("GOAL: build it")]
    for i in range(8):
        history += [h.user(f"step {i}"), h.assistant(f"did {i}")]
    history += [h.compact("SUMMARY TEXT"), h.user("after summary")]
    ctx = agentcore.context.build(history, system="SYS", max_context_tokens=100_000)
    assert "SUMMARY TEXT" in ctx.system and ctx.system.startswith("SYS")
    assert "own" in ctx.system.lower() or "you" in ctx.system.lower()
    contents = [
        m["content"] if isinstance(m["content"], str) else m["content"][0]["text"] for m in ctx.messages
    ]
    assert contents[0] == "GOAL: build it"
    assert contents[-1] == "after summary"
    assert contents[:3] == ["GOAL: build it", "step 0", "step 1"]  # the first 3 user turns
    assert "step 3" not in contents and "did 7" in contents
    assert all(m["role"] != "compact" for m in ctx.messages)


def test_compaction_triggers_at_threshold(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("SUMMARY", "answer")
    events: list[str] = []
    agent = make(
        agents, srv, max_context_tokens=1000, callbacks={"on_compact": lambda e: events.append(e["type"])}
    )
    agent.history.extend([agentcore.history.user("x" * 2000), agentcore.history.assistant("y")])
    result = agent.send("go")
    assert result.text == "answer" and events[0] == "compact-start"
    assert [m["role"] for m in result.messages] == ["user", "compact", "assistant"]
    # The input is written before the first request; the round then compacts before asking.
    assert [m["role"] for m in agent.history][-3:] == ["user", "compact", "assistant"]
    assert "go" in json.dumps(srv.requests[1]["messages"])  # the latest user turn is kept
    assert result.usage.input_tokens > 0 and result.steps == 1


def test_compact_run(srv: ModelServer) -> None:
    srv.add({"text": "NEW SUMMARY", "usage": {"input_tokens": 30, "output_tokens": 4}})
    events: list[dict[str, Any]] = []
    history = [agentcore.history.user("the goal"), agentcore.history.assistant("done half")]
    out = agentcore.compact.run(
        history=history,
        system="SYS",
        tools=None,
        connection={"base_url": srv.base_url, "model": "m", "api_key": KEY},
        previous="OLD FACT 42",
        on_compact=events.append,
    )
    assert out["content"] == "NEW SUMMARY" and isinstance(out["usage"], Usage)
    assert out["usage"].input_tokens == 30
    sent = json.dumps(srv.requests[0])
    assert "OLD FACT 42" in sent and "the goal" in sent
    assert "goal" in sent.replace("the goal", "")  # asks to keep the user's original goal
    assert events[0]["type"] == "compact-start" and events[-1]["type"] == "compact-finish"
    assert len(history) == 2  # the caller appends


def test_compaction_does_not_inherit_output_or_forced_tool_choice(
    srv: ModelServer, agents: list[Agent]
) -> None:
    srv.add("SUMMARY")
    agent = make(
        agents,
        srv,
        output=agentcore.output.json(),
        provider={"tool_choice": "required", "temperature": 0.9},
    )
    agent.history.append(agentcore.history.user("hi"))
    agent.compact()
    body = srv.requests[0]
    assert "response_format" not in body and "tool_choice" not in body
    assert body["temperature"] == 0.9
    srv.add("SUMMARY 2")
    other = make(agents, srv, provider={"temperature": 0.9}, compact={"provider": {"temperature": 0.1}})
    other.history.append(agentcore.history.user("hi"))
    other.compact()
    assert srv.requests[1]["temperature"] == 0.1


def test_compaction_uses_compact_model(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("SUMMARY")
    agent = make(agents, srv, compact={"model": "small-model"})
    agent.history.append(agentcore.history.user("hi"))
    agent.compact()
    assert srv.requests[0]["model"] == "small-model"


def test_overflow_compacts_and_resends_at_most_three_times(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"overflow": True}, "S1", "answer")
    agent = make(agents, srv)
    assert agent.send("q").text == "answer"
    assert sum(m["role"] == "compact" for m in agent.history) == 1
    srv.add({"overflow": True}, "S1", {"overflow": True}, "S2", {"overflow": True}, "S3", {"overflow": True})
    retries: list[Any] = []
    failing = make(agents, srv, callbacks={"on_retry": retries.append})
    with pytest.raises(AgentError) as info:
        failing.send("q")
    assert info.value.kind == "request" and info.value.status == 400
    assert sum(m["role"] == "compact" for m in failing.history) == 3
    assert retries == []  # overflow never goes through retries


def test_latest_user_turn_before_summary_kept() -> None:
    h = agentcore.history
    history = [h.user("GOAL"), h.assistant("ok"), h.user("a"), h.user("b"), h.user("LATEST INSTRUCTION")]
    for i in range(5):
        history += [
            h.assistant(tool_calls=[{"id": f"c{i}", "name": "t", "arguments": {}}]),
            h.tool(f"c{i}", "t", i),
        ]
    history += [h.compact("SUM"), h.user("after")]
    ctx = agentcore.context.build(history, max_context_tokens=100_000)
    assert "LATEST INSTRUCTION" in json.dumps(ctx.messages)
    assert "c0" not in json.dumps(ctx.messages) and "c4" in json.dumps(ctx.messages)
    # A call never travels without its result.
    sent = json.dumps(ctx.messages)
    for i in range(5):
        assert (f'"c{i}"' in sent) == (sent.count(f'"c{i}"') == 2)


def test_compaction_events_only_to_on_compact(srv: ModelServer, agents: list[Agent]) -> None:
    llm_events: list[Any] = []
    compact_events: list[dict[str, Any]] = []
    srv.add("SUMMARY")
    agent = make(
        agents, srv, callbacks={"on_llm_event": llm_events.append, "on_compact": compact_events.append}
    )
    agent.history.append(agentcore.history.user("hi"))
    agent.compact()
    assert llm_events == []
    assert compact_events and any(
        e["type"] == "text-delta" and e["request"] == "compact" for e in compact_events
    )


def test_overflow_of_the_compaction_request_is_raised(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"overflow": True}, {"overflow": True})
    agent = make(agents, srv)
    with pytest.raises(AgentError) as info:
        agent.send("q")
    assert info.value.status == 400 and len(srv.requests) == 2
    assert all(m["role"] != "compact" for m in agent.history)


def test_compact_on_compact_replaces_agent_callback(srv: ModelServer, agents: list[Agent]) -> None:
    agent_events: list[Any] = []
    call_events: list[Any] = []
    srv.add("SUMMARY")
    agent = make(agents, srv, callbacks={"on_compact": agent_events.append})
    agent.history.append(agentcore.history.user("hi"))
    agent.compact(on_compact=call_events.append)
    assert agent_events == [] and call_events


def test_compact_protocol_override(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("SUMMARY")
    agent = make(agents, srv, compact={"protocol": "anthropic", "model": "claude-small"})
    agent.history.append(agentcore.history.user("hi"))
    agent.compact()
    assert srv.log[-1].path == "/v1/messages" and srv.requests[-1]["model"] == "claude-small"


@pytest.mark.parametrize("protocol", ["chat", "responses", "anthropic", "gemini"])
def test_overflow_recognised_per_protocol(srv: ModelServer, agents: list[Agent], protocol: str) -> None:
    srv.add({"overflow": True}, "SUMMARY", "answer")
    agent = make(agents, srv, protocol=protocol)
    assert agent.send("q").text == "answer"
    assert [m["role"] for m in agent.history].count("compact") == 1


def test_infinite_budget_never_compacts(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("answer")
    agent = make(agents, srv, max_context_tokens=float("inf"))
    agent.history.extend([agentcore.history.user("x" * 300_000), agentcore.history.assistant("y")])
    assert agent.send("go").text == "answer"
    assert len(srv.requests) == 1 and all(m["role"] != "compact" for m in agent.history)


def test_compaction_at_most_once_per_round(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("SUMMARY", "answer")
    agent = make(agents, srv, max_context_tokens=100, system="s" * 1000)
    assert agent.send("go").text == "answer"
    assert len(srv.requests) == 2


def test_token_ratio_learned_from_usage(srv: ModelServer, agents: list[Agent]) -> None:
    model = f"ratio-{time.monotonic_ns()}"
    srv.add({"text": "ok", "usage": {"input_tokens": 5000, "output_tokens": 1}}, "SUMMARY", "answer")
    agent = make(agents, srv, model=model, max_context_tokens=3000)
    agent.send("a" * 1500)
    assert len(srv.requests) == 1  # 1500 chars x 0.6 is under the threshold
    agent.send("next")
    assert len(srv.requests) == 3  # the learned ratio (clamped to 2) now puts it over
    assert any(m["role"] == "compact" for m in agent.history)


def test_compact_api_key_redacted(srv: ModelServer, agents: list[Agent]) -> None:
    other = "sk-compact-only-987654"
    srv.add({"status": 401, "error": f"key {other} is invalid"})
    agent = make(agents, srv, compact={"api_key": other}, retry=lambda e: False)
    agent.history.append(agentcore.history.user("hi"))
    with pytest.raises(AgentError) as info:
        agent.compact()
    assert other not in info.value.message and other not in (info.value.body or "")
    assert srv.log[-1].headers["authorization"] == f"Bearer {other}"
    assert other not in repr(agent.config)
