"""Approvals that wait, without a session: the same API in memory, for the life of the agent.

API.md §Durable sessions "Approvals that wait", §Tools (`needs_approval`), SendResult.pending,
the `approval_required` event. The cross-process half is tests/store/test_durable_approvals.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentcore import Agent, AgentError, tool
from agentcore.history import tool_calls_of, tool_results_of
from agentcore.store.journal import input_hash
from agentcore.testing import ModelServer

MakeAgent = Callable[..., Agent]
ran: list[str] = []


@tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: the file.
    """
    ran.append(path)
    return f"deleted {path}"


@tool
def look(path: str) -> str:
    """Look at a file.

    Args:
        path: the file.
    """
    return f"looked at {path}"


@pytest.fixture(autouse=True)
def fresh_effects() -> None:
    ran.clear()


def calls(*names_and_paths: tuple[str, str]) -> dict[str, Any]:
    return {"tool_calls": [{"name": n, "arguments": {"path": p}} for n, p in names_and_paths]}


def results(history: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p["tool_call_id"]: p for m in history for p in tool_results_of(m)}


def test_a_needs_approval_call_waits_while_the_rounds_other_calls_run(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(calls(("delete_file", "a.txt"), ("look", "b.txt")))
    agent = make_agent(server, tools=[delete_file, look], no_tool_rounds=1)
    events: list[dict[str, Any]] = []
    agent.subscribe(events.append)
    result = agent.send("clean up")
    assert result.reason == "approval"
    call_id = tool_calls_of(agent.history[1])[0]["tool_call_id"]
    expected = {
        "tool_call_id": call_id,
        "tool_name": "delete_file",
        "input": {"path": "a.txt"},
        "input_hash": input_hash({"path": "a.txt"}),
    }
    assert result.pending == [expected]
    assert agent.pending() == [expected]
    assert ran == [], "a deferred call does not run"
    assert [m["role"] for m in agent.history] == ["user", "assistant", "tool"]
    assert [p["tool_name"] for p in results(agent.history).values()] == ["look"], "no result for it yet"
    approvals = [e for e in events if e["type"] == "approval_required"]
    assert [{k: e[k] for k in expected} for e in approvals] == [expected]
    types = [e["type"] for e in events]
    assert types.index("approval_required") < types.index("agent_end")
    assert events[-1]["reason"] == "approval"
    assert len(server.requests) == 1


def test_an_approved_call_runs_once_on_resume_and_the_loop_goes_on(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(calls(("delete_file", "a.txt")))
    server.add("done")
    agent = make_agent(server, tools=[delete_file], no_tool_rounds=1)
    pending = agent.send("clean up").pending[0]
    agent.decide(pending["tool_call_id"], True, input_hash=pending["input_hash"])
    assert agent.pending() == []
    result = agent.resume()
    assert (result.reason, result.text, result.pending) == ("no-tool", "done", [])
    assert ran == ["a.txt"]
    assert results(agent.history)[pending["tool_call_id"]]["output"] == {
        "type": "text",
        "value": "deleted a.txt",
    }
    # Resuming again finds nothing to run: the approval was consumed.
    server.add("still done")
    agent.resume()
    assert ran == ["a.txt"]


def test_a_denied_call_gets_execution_denied_with_the_reason(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(calls(("delete_file", "a.txt")))
    server.add("ok, I will not")
    agent = make_agent(server, tools=[delete_file], no_tool_rounds=1)
    call_id = agent.send("clean up").pending[0]["tool_call_id"]
    agent.decide(call_id, False, reason="keep that file")
    assert agent.resume().text == "ok, I will not"
    assert ran == []
    assert results(agent.history)[call_id]["output"] == {
        "type": "execution-denied",
        "value": "keep that file",
    }


def test_with_some_calls_still_undecided_resume_runs_the_decided_and_asks_no_model(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(calls(("delete_file", "a.txt"), ("delete_file", "b.txt")))
    server.add("both handled")
    agent = make_agent(server, tools=[delete_file], no_tool_rounds=1)
    first, second = agent.send("clean up").pending
    agent.decide(first["tool_call_id"], True)
    again = agent.resume()
    assert again.reason == "approval" and again.pending == [second]
    assert again.steps == 0 and len(server.requests) == 1, "no model request while a call waits"
    assert ran == ["a.txt"]
    agent.decide(second["tool_call_id"], True)
    assert agent.resume().text == "both handled"
    assert ran == ["a.txt", "b.txt"]
    history = agent.history
    assert set(results(history)) == {p["tool_call_id"] for m in history for p in tool_calls_of(m)}


def test_on_permission_may_defer_and_decides_for_a_needs_approval_tool(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(calls(("look", "x"), ("delete_file", "y")))
    asked: list[str] = []

    def on_permission(request: dict[str, Any]) -> Any:
        asked.append(request["tool_name"])
        return "defer" if request["tool_name"] == "look" else True

    agent = make_agent(server, tools=[delete_file, look], callbacks={"on_permission": on_permission})
    result = agent.send("go")
    assert sorted(asked) == ["delete_file", "look"]
    assert [p["tool_name"] for p in result.pending] == ["look"]
    assert ran == ["y"], "on_permission returning True lets a needs_approval tool run"


def test_a_new_send_closes_a_waiting_call_as_denied_and_a_late_decision_is_refused(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(calls(("delete_file", "a.txt")))
    server.add("moving on")
    agent = make_agent(server, tools=[delete_file], no_tool_rounds=1)
    call_id = agent.send("clean up").pending[0]["tool_call_id"]
    assert agent.send("never mind").text == "moving on"
    assert results(agent.history)[call_id]["output"] == {
        "type": "execution-denied",
        "value": "no decision was made before the conversation moved on",
    }
    assert agent.pending() == []
    with pytest.raises(AgentError) as late:
        agent.decide(call_id, True)
    assert late.value.kind == "request"
    assert ran == []


def test_decide_checks_its_arguments_and_the_input_hash(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add(calls(("delete_file", "a.txt")))
    agent = make_agent(server, tools=[delete_file], no_tool_rounds=1)
    call_id = agent.send("clean up").pending[0]["tool_call_id"]
    with pytest.raises(AgentError) as stale:
        agent.decide(call_id, True, input_hash=input_hash({"path": "b.txt"}))
    assert stale.value.kind == "conflict"
    for bad in (("nope", True), (call_id, "yes"), ("", True)):
        with pytest.raises(AgentError) as refused:
            agent.decide(*bad)  # type: ignore[arg-type]
        assert refused.value.kind == "request"
    assert len(agent.pending()) == 1, "refused decisions write nothing"


def test_pending_is_empty_for_every_other_reason(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add(calls(("look", "a")))
    server.add("done")
    agent = make_agent(server, tools=[look], no_tool_rounds=1)
    result = agent.send("go")
    assert (result.reason, result.pending) == ("no-tool", [])
    assert agent.pending() == []


def test_resume_without_a_session_gives_an_open_call_it_never_met_the_interrupted_result(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    """A history loaded from elsewhere may hold a call that ran in a process now gone: only a
    session's journal can tell it never started, so in memory it is not run again."""
    from agentcore import history as h

    loaded = [
        h.user("go"),
        h.assistant("", tool_calls=[{"id": "c1", "name": "delete_file", "arguments": {"path": "z"}}]),
    ]
    server.add("recovered")
    agent = make_agent(server, tools=[delete_file], history=loaded, no_tool_rounds=1)
    assert agent.resume().text == "recovered"
    assert ran == []
    part = results(agent.history)["c1"]
    assert part["interrupted"] is True and part["output"]["type"] == "error-text"


def test_tool_flags_are_checked_and_shown_in_the_schema() -> None:
    from agentcore.tools import adopt

    @tool(replay="safe")
    def again(x: int) -> int:
        """Idempotent."""
        return x

    schema = adopt([again, delete_file, {"name": "d", "execute": lambda i: 1, "needs_approval": True}]).schema
    assert schema["again"]["replay"] == "safe" and "needs_approval" not in schema["again"]
    assert schema["delete_file"]["needs_approval"] is True
    assert schema["d"]["needs_approval"] is True
    for bad in ({"replay": "sometimes"}, {"needs_approval": "yes"}):
        with pytest.raises(AgentError) as refused:
            adopt([{"name": "e", "execute": lambda i: 1, **bad}])
        assert refused.value.kind == "config"
    with pytest.raises(AgentError):
        tool(replay="always")(lambda: None)


def test_a_steer_queued_while_a_call_waits_is_delivered_after_its_result_on_resume(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(calls(("delete_file", "a.txt")))
    server.add("done, and noted")
    agent = make_agent(server, tools=[delete_file], no_tool_rounds=1)
    call_id = agent.send("clean up").pending[0]["tool_call_id"]
    agent.steer("also keep a backup")
    agent.decide(call_id, True)
    result = agent.resume()
    assert [m["role"] for m in result.messages] == ["tool", "user", "assistant"]
    assert result.messages[1]["content"] == "also keep a backup"
    assert server.requests[-1]["messages"][-1] == {"role": "user", "content": "also keep a backup"}
    assert agent.queued() == {"steer": [], "follow_up": []}
