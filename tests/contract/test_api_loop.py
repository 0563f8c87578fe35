"""API.md §The loop: reasons to stop, steps, invalid calls, structured output, cancel mid-stream.

Fixtures and the contract's conventions: tests/contract/conftest.py.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from api_helpers import add, call, make, tool_results

import agentcore
from agentcore import Agent, AgentError, tool
from agentcore.testing import ModelServer


def test_no_tools_means_finished(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("answer")
    assert make(agents, srv).send("q").reason == "finished"


def test_no_tool_rounds_and_prompt(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("a", "b", "c")
    agent = make(agents, srv, tools=[add])
    result = agent.send("q")
    assert (result.reason, result.steps) == ("no-tool", 3)
    prompt = agent.config["no_tool_prompt"]
    last = [r["messages"][-1] for r in srv.requests]
    assert last[2] == {"role": "user", "content": prompt}
    assert all(m.get("content") != prompt for m in last[:2])
    assert all(m.get("content") != prompt for m in agent.history)


def test_no_tool_prompt_not_sent_for_one_round_or_empty(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("a")
    agent = make(agents, srv, tools=[add], no_tool_rounds=1)
    assert agent.send("q").reason == "no-tool"
    assert srv.requests[0]["messages"][-1]["content"] == "q"
    srv.add("a", "b", "c")
    quiet = make(agents, srv, tools=[add], no_tool_prompt="")
    assert quiet.send("q").reason == "no-tool"
    for request in srv.requests[1:]:
        assert [m["content"] for m in request["messages"] if m["role"] == "user"] == ["q"]


def test_tool_round_then_no_tool(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"tool_calls": [call(), call(id="c2", a=5, b=5)]}, "3 and 10")
    agent = make(agents, srv, tools=[add], no_tool_rounds=1)
    result = agent.send("sums")
    assert result.reason == "no-tool" and result.steps == 2 and result.text == "3 and 10"
    roles = [m["role"] for m in agent.history]
    assert roles == ["user", "assistant", "tool", "assistant"]
    results = agent.history[2]["content"]
    assert [r["tool_call_id"] for r in results] == ["c1", "c2"]
    assert [r["output"] for r in results] == [{"type": "json", "value": 3}, {"type": "json", "value": 10}]
    assert results[0]["type"] == "tool-result" and results[0]["tool_name"] == "add"
    part = agent.history[1]["content"][0]
    assert part == {"type": "tool-call", "tool_call_id": "c1", "tool_name": "add", "input": {"a": 1, "b": 2}}


def test_tool_stop(srv: ModelServer, agents: list[Agent]) -> None:
    @tool
    def finish(summary: str) -> dict[str, Any]:
        """Finish."""
        return {"stop": True, "output": {"type": "text", "value": summary}}

    srv.add({"tool_calls": [call("finish", summary="all done")]})
    agent = make(agents, srv, tools=[finish])
    result = agent.send("go")
    assert result.reason == "tool-stop"
    assert tool_results(agent.history)[0]["output"] == {"type": "text", "value": "all done"}


def test_step_limit_saves_last_results(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"tool_calls": [call()]}, {"tool_calls": [call(id="c2")]})
    agent = make(agents, srv, tools=[add], max_steps=2)
    result = agent.send("loop")
    assert (result.reason, result.steps) == ("step-limit", 2)
    assert len(tool_results(agent.history)) == 2 and agent.history[-1]["role"] == "tool"
    srv.add("x")
    plain = make(agents, srv, tools=[add], max_steps=1)
    assert plain.send("q").reason == "step-limit"


def test_capabilities_tools_false_means_empty_tool_set(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("plain")
    result = make(agents, srv, tools=[add], capabilities={"tools": False}).send("q")
    assert result.reason == "finished"
    assert not srv.requests[0].get("tools")


def test_unknown_tool_and_unparsable_arguments(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add(
        {
            "tool_calls": [
                {"name": "nope", "id": "u1", "arguments": {}},
                {"name": "add", "id": "u2", "arguments": '{"a": 1, "b": '},
            ]
        },
        "ok",
    )
    agent = make(agents, srv, tools=[add], no_tool_rounds=1)
    agent.send("q")
    calls = agent.history[1]["content"]
    assert calls[1]["input"] == {}
    unknown, broken = tool_results(agent.history)
    assert unknown["output"]["type"] == "error-text" and broken["output"]["type"] == "error-text"
    assert '{"a": 1, "b": ' in broken["output"]["value"]


def test_schema_failure_names_the_path_and_tool_does_not_run(srv: ModelServer, agents: list[Agent]) -> None:
    ran: list[Any] = []
    strict = {
        "name": "strict",
        "input_schema": {
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
        },
        "execute": ran.append,
    }
    srv.add({"tool_calls": [{"name": "strict", "id": "s1", "arguments": {"n": "seven"}}]}, "ok")
    agent = make(agents, srv, tools=[strict], no_tool_rounds=1)
    agent.send("q")
    result = tool_results(agent.history)[0]
    assert result["output"]["type"] == "error-text" and "n" in result["output"]["value"]
    assert ran == []


def test_structured_output_invalid_reply_retried(srv: ModelServer, agents: list[Agent]) -> None:
    schema = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}
    srv.add('{"wrong": 1}', '{"total": 42}')
    agent = make(agents, srv, tools=[add], output=agentcore.output.object(schema))
    result = agent.send("count")
    assert (result.reason, result.output, result.steps) == ("finished", {"total": 42}, 1)
    assert [m["role"] for m in agent.history] == ["user", "assistant"]


def test_structured_array_wrapped_on_the_wire(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add('{"items": [1, 2]}')
    result = make(agents, srv, output=agentcore.output.array({"type": "integer"})).send("list")
    assert result.output == [1, 2]
    schema = srv.requests[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["items"] == {"type": "array", "items": {"type": "integer"}}


def test_output_class_with_model_validate(srv: ModelServer, agents: list[Agent]) -> None:
    class Total:
        def __init__(self, total: float) -> None:
            self.total = total

        @classmethod
        def model_json_schema(cls) -> dict[str, Any]:
            return {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}

        @classmethod
        def model_validate(cls, data: Any) -> Total:
            return cls(data["total"])

    srv.add('{"total": 3}', '{"items": [{"total": 1}, {"total": 2}]}')
    one = make(agents, srv, output=agentcore.output.object(Total)).send("one").output
    assert isinstance(one, Total) and one.total == 3
    many = make(agents, srv, output=agentcore.output.array(Total)).send("many").output
    assert [t.total for t in many] == [1, 2]
    srv.add("[1, 2]")
    assert make(agents, srv, output=agentcore.output.json()).send("any").output == [1, 2]


def test_cancel_mid_stream_keeps_arrived_text(srv: ModelServer, agents: list[Agent]) -> None:
    # The stream stalls after a few chunks until the client leaves: the stop always lands mid-stream.
    srv.add({"text": "partial words then more", "chunk_size": 4, "stall_after": 3})
    agent = make(agents, srv)
    arrived = threading.Event()
    stopper = threading.Thread(target=lambda: arrived.wait(30) and agent.stop())
    stopper.start()

    def on_llm_event(event: dict[str, Any]) -> None:
        if event["type"] == "text-delta":
            arrived.set()

    with pytest.raises(AgentError) as info:
        agent.send("talk", callbacks={"on_llm_event": on_llm_event})
    arrived.set()
    stopper.join()
    assert info.value.kind == "aborted"
    assert agent.history[-1]["role"] == "assistant"
    text = agent.history[-1]["content"][0]["text"]
    assert text and "partial words then more".startswith(text)


def test_retried_stream_error_leaves_nothing(srv: ModelServer, agents: list[Agent]) -> None:
    retries: list[dict[str, Any]] = []
    srv.add({"text": "broken reply", "drop_after": 2}, "whole reply")
    agent = make(agents, srv, callbacks={"on_retry": retries.append})
    assert agent.send("q").text == "whole reply"
    assert [m["role"] for m in agent.history] == ["user", "assistant"]
    assert len(retries) == 1


def test_steps_and_usage_exclude_retries_but_include_compaction(
    srv: ModelServer, agents: list[Agent]
) -> None:
    srv.add(
        {"status": 500, "error": "e"},
        {"text": "SUMMARY", "usage": {"input_tokens": 100, "output_tokens": 7}},
        {"text": "answer", "usage": {"input_tokens": 10, "output_tokens": 2}},
    )
    agent = make(agents, srv, max_context_tokens=1000)
    agent.history.extend([agentcore.history.user("x" * 2000), agentcore.history.assistant("y")])
    result = agent.send("go")
    assert result.steps == 1 and result.text == "answer"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (110, 9)
    assert result.usage.total_tokens == 119


def test_no_tool_rounds_two_and_infinite(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("a", "b")
    agent = make(agents, srv, tools=[add], no_tool_rounds=2)
    assert agent.send("q").reason == "no-tool"
    prompt = agent.config["no_tool_prompt"]
    assert srv.requests[1]["messages"][-1] == {"role": "user", "content": prompt}
    assert srv.requests[0]["messages"][-1]["content"] == "q"
    srv.add("a", "b", "c", "d")
    endless = make(agents, srv, tools=[add], no_tool_rounds=float("inf"), max_steps=4)
    assert endless.send("q").reason == "step-limit"
    assert all(prompt not in json.dumps(r) for r in srv.requests[2:])


def test_reason_precedence(srv: ModelServer, agents: list[Agent]) -> None:
    @tool
    def done() -> dict[str, Any]:
        """Done."""
        return {"stop": True, "output": "bye"}

    srv.add({"tool_calls": [{"name": "done", "id": "d1", "arguments": {}}]})
    assert make(agents, srv, tools=[done], max_steps=1).send("q").reason == "tool-stop"
    srv.add("plain")
    assert make(agents, srv, max_steps=1).send("q").reason == "finished"
    srv.add("plain")
    assert make(agents, srv, tools=[add], max_steps=1, no_tool_rounds=1).send("q").reason == "step-limit"


def test_max_steps_counts_replies_not_attempts(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"status": 500, "error": "e"}, {"tool_calls": [call()]}, {"overflow": True}, "SUM", "final")
    agent = make(agents, srv, tools=[add], max_steps=2, no_tool_rounds=1)
    result = agent.send("q")
    assert result.steps == 2 and result.text == "final" and result.reason == "step-limit"


def test_tool_calls_of_a_round_run_in_parallel(srv: ModelServer, agents: list[Agent]) -> None:
    together = threading.Barrier(4, timeout=30)

    def nap(input: dict[str, Any]) -> str:
        together.wait()  # passes only when all four calls run at the same time
        return "rested"

    calls = [{"name": "nap", "id": f"n{i}", "arguments": {}} for i in range(4)]
    srv.add({"tool_calls": calls}, "ok")
    agent = make(agents, srv, tools=[{"name": "nap", "execute": nap}], no_tool_rounds=1)
    agent.send("go")  # a broken barrier (calls not together) gives error results below
    assert [r["tool_call_id"] for r in tool_results(agent.history)] == ["n0", "n1", "n2", "n3"]
    assert [r["output"] for r in tool_results(agent.history)] == [{"type": "text", "value": "rested"}] * 4


@pytest.mark.parametrize("protocol", ["chat", "anthropic"])
def test_cancel_mid_stream_keeps_text_and_complete_calls(
    srv: ModelServer, agents: list[Agent], protocol: str
) -> None:
    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "tool-call":
            agent.stop()  # inside the run: only sets the cancel event

    srv.add(
        {
            "text": "Checking both.",
            "tool_calls": [call(), call(id="c2", a=30, b=40)],
            "chunk_delay": 0.03,
            "chunk_size": 4,
        }
    )
    agent = make(agents, srv, protocol=protocol, tools=[add], callbacks={"on_llm_event": on_event})
    with pytest.raises(AgentError) as info:
        agent.send("go")
    assert info.value.kind == "aborted"
    roles = [m["role"] for m in agent.history]
    assert roles == ["user", "assistant", "tool"]
    parts = agent.history[1]["content"]
    assert parts[0] == {"type": "text", "text": "Checking both."}
    calls = [p for p in parts if p["type"] == "tool-call"]
    assert [c["tool_call_id"] for c in calls] == ["c1"] and calls[0]["input"] == {"a": 1, "b": 2}
    result = agent.history[2]["content"][0]
    assert result["tool_call_id"] == "c1" and "interrupt" in result["output"]["value"].lower()
