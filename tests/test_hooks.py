"""Hooks (API.md §Hooks): deciding about calls and requests; sequential execution barriers."""

from __future__ import annotations

import copy
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from event_checks import collect

from agentcore import Agent, AgentError, ToolContext, tool
from agentcore.testing import ModelServer
from agentcore.tools import load

MakeAgent = Callable[..., Agent]


def make(server: ModelServer, *, hooks: Any = None, tools: Any = None, **config: Any) -> Agent:
    return Agent(
        config={"base_url": server.base_url, "model": "m", "retry_base_delay": 0.01, **config},
        tools=tools,
        hooks=hooks,
    )


ran: list[dict[str, Any]] = []


def _record(input: dict[str, Any]) -> str:
    ran.append(dict(input))
    return f"ran with {input['n']}"


RECORDER = {
    "name": "record",
    "description": "Record a number.",
    "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    "execute": _record,
}


def calls(*pairs: tuple[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments} for name, arguments in pairs]}


def results(agent: Agent) -> list[dict[str, Any]]:
    return [part["output"] for m in agent.history if m["role"] == "tool" for part in m["content"]]


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    ran.clear()


# ---------------------------------------------------------------- before_tool_call


def test_before_tool_call_blocks_with_a_reason(server: ModelServer) -> None:
    server.add(calls(("record", {"n": 1})), "ok")
    hooks = {"before_tool_call": lambda call: {"block": "not on Fridays"}}
    with make(server, hooks=hooks, tools=[RECORDER], no_tool_rounds=1) as agent:
        events = collect(agent.stream("go"))
    assert ran == []
    assert results(agent) == [{"type": "execution-denied", "value": "not on Fridays"}]
    assert "tool_execution_start" not in [e["type"] for e in events]


def test_before_tool_call_rewrites_the_input_and_it_is_validated_again(server: ModelServer) -> None:
    server.add(calls(("record", {"n": 1}), ("record", {"n": 2})), "ok")

    def rewrite(call: dict[str, Any]) -> dict[str, Any]:
        return {"input": {"n": 10}} if call["input"]["n"] == 1 else {"input": {"n": "two"}}

    reported: list[dict[str, Any]] = []
    agent = make(server, hooks={"before_tool_call": rewrite}, tools=[RECORDER], no_tool_rounds=1)
    with agent:
        events = collect(agent.stream("go", callbacks={"on_tool_result": reported.append}))
    assert ran == [{"n": 10}]
    first, second = results(agent)
    assert first == {"type": "text", "value": "ran with 10"}
    assert second["type"] == "error-text" and "input.n" in second["value"]
    starts = [e["input"] for e in events if e["type"] == "tool_execution_start"]
    assert starts == [{"n": 10}]
    # The result reports the input the tool ran with.
    assert sorted(str(r["input"]) for r in reported) == ["{'n': 'two'}", "{'n': 10}"]
    # History keeps what the model asked for: it is append-only.
    assert agent.history[1]["content"][0]["input"] == {"n": 1}


def test_before_tool_call_sees_validated_calls_before_on_permission(server: ModelServer) -> None:
    order: list[str] = []
    server.add(calls(("record", {"n": "bad"}), ("record", {"n": 3})), "ok")
    seen_history: list[int] = []

    def before(call: dict[str, Any]) -> None:
        order.append(f"before {call['input']['n']}")
        seen_history.append(len(call["history"]))
        with pytest.raises(AttributeError):
            call["history"].append({})

    def permission(payload: dict[str, Any]) -> bool:
        order.append(f"permission {payload['input']['n']}")
        return True

    agent = Agent(
        config={"base_url": server.base_url, "model": "m", "no_tool_rounds": 1},
        tools=[RECORDER],
        hooks={"before_tool_call": before},
        callbacks={"on_permission": permission},
    )
    with agent:
        agent.send("go")
    assert order == ["before 3", "permission 3"]
    assert seen_history == [2]  # the assistant reply is in history before its calls are decided


# ---------------------------------------------------------------- after_tool_call, unknown_tool


def test_after_tool_call_replaces_the_output(server: ModelServer) -> None:
    server.add(calls(("record", {"n": 1})), "ok")
    seen: list[Any] = []

    def after(call: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        seen.append(result["output"])
        return {"output": {"type": "text", "value": "redacted"}}

    with make(server, hooks={"after_tool_call": after}, tools=[RECORDER], no_tool_rounds=1) as agent:
        events = collect(agent.stream("go"))
    assert seen == [{"type": "text", "value": "ran with 1"}]
    assert results(agent) == [{"type": "text", "value": "redacted"}]
    end = next(e for e in events if e["type"] == "tool_execution_end")
    assert end["result"]["output"] == {"type": "text", "value": "redacted"}


def test_after_tool_call_stop_ends_the_loop(server: ModelServer) -> None:
    server.add(calls(("record", {"n": 1})), "never asked")
    hooks = {"after_tool_call": lambda call, result: {"stop": True}}
    with make(server, hooks=hooks, tools=[RECORDER]) as agent:
        result = agent.send("go")
    assert result.reason == "tool-stop"
    assert len(server.requests) == 1
    assert results(agent) == [{"type": "text", "value": "ran with 1"}]


def test_unknown_tool_answers_calls_to_missing_tools(server: ModelServer) -> None:
    server.add(calls(("ghost", {}), ("phantom", {})), "ok")

    def answer(call: dict[str, Any]) -> Any:
        return f"{call['tool_name']} is unavailable; use record" if call["tool_name"] == "ghost" else None

    with make(server, hooks={"unknown_tool": answer}, tools=[RECORDER], no_tool_rounds=1) as agent:
        agent.send("go")
    ghost, phantom = results(agent)
    assert ghost == {"type": "text", "value": "ghost is unavailable; use record"}
    assert phantom["type"] == "error-text" and "no tool" in phantom["value"]


# ---------------------------------------------------------------- prepare_request, finish_turn


def test_prepare_request_changes_the_request_only(server: ModelServer) -> None:
    server.add("first", "second")
    steps: list[int] = []

    def prepare(request: dict[str, Any]) -> dict[str, Any]:
        steps.append(request["step"])
        return {
            "system": "Prepared system.",
            "messages": [*request["messages"], {"role": "user", "content": "(injected context)"}],
        }

    with make(server, hooks={"prepare_request": prepare}, system="Original.") as agent:
        agent.send("hello")
        before = copy.deepcopy(agent.history)
        agent.send("again")
    body = server.requests[1]
    assert body["messages"][0] == {"role": "system", "content": "Prepared system."}
    assert body["messages"][-1] == {"role": "user", "content": "(injected context)"}
    assert agent.history[: len(before)] == before
    assert all(m.get("content") != "(injected context)" for m in agent.history)
    assert [m["role"] for m in agent.history] == ["user", "assistant", "user", "assistant"]
    assert steps == [1, 1]


def _edit_in_place(messages: list[dict[str, Any]]) -> None:
    """Mark every text and output at any depth, and add a part to every list content."""
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            message["content"] = f"{content} EDITED"
            continue
        for part in content:
            for key, value in list(part.items()):
                if key == "text" and isinstance(value, str):
                    part[key] = value + " EDITED"
                elif isinstance(value, dict):
                    value["edited"] = True
        content.append({"type": "text", "text": "APPENDED"})


@pytest.mark.parametrize("where", ["prepare_request", "on_llm_start"])
def test_edits_in_place_at_any_depth_touch_neither_history_nor_later_requests(
    server: ModelServer, where: str
) -> None:
    """API.md: prepare_request changes "this request only (history is not touched)". The messages
    share parts with history and with the caches that reuse rendered entries, so an in-place edit
    deep inside them must land on a copy."""
    server.add(calls(("record", {"n": 1})), calls(("record", {"n": 2})), "done")

    def prepare(request: dict[str, Any]) -> None:
        _edit_in_place(request["messages"])

    def on_llm_start(payload: dict[str, Any]) -> None:
        _edit_in_place(payload["messages"])

    hooks = {"prepare_request": prepare} if where == "prepare_request" else None
    agent = Agent(
        config={"base_url": server.base_url, "model": "m", "no_tool_rounds": 1},
        tools=[RECORDER],
        hooks=hooks,
        callbacks={"on_llm_start": on_llm_start} if where == "on_llm_start" else None,
    )
    with agent:
        agent.send([{"type": "text", "text": "hi"}])
    stored = repr(agent.history)
    assert "EDITED" not in stored and "APPENDED" not in stored and "'edited'" not in stored
    assert [m["role"] for m in agent.history] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    for body in server.requests:
        sent = repr(body["messages"])
        assert "EDITED EDITED" not in sent and "APPENDED', 'APPENDED" not in sent
        if where == "on_llm_start":  # a callback only looks: the request goes out as built
            assert "EDITED" not in sent and "APPENDED" not in sent


def test_finish_turn_end_ends_the_run_with_reason_ended(server: ModelServer) -> None:
    server.add(calls(("record", {"n": 1})), "never asked")
    turns: list[dict[str, Any]] = []

    def finish(turn: dict[str, Any]) -> str:
        turns.append(turn)
        return "end"

    with make(server, hooks={"finish_turn": finish}, tools=[RECORDER]) as agent:
        events = collect(agent.stream("go"))
    assert events[-1]["reason"] == "ended"
    assert len(server.requests) == 1
    assert turns[0]["step"] == 1
    assert turns[0]["message"] is agent.history[1]
    assert turns[0]["tool_results"][0]["output"] == {"type": "text", "value": "ran with 1"}


def test_finish_turn_continue_makes_another_request_not_counted_as_no_tool(server: ModelServer) -> None:
    server.add("one", "two", "three")
    decisions = iter(["continue", "continue", None])
    hooks = {"finish_turn": lambda turn: next(decisions)}
    with make(server, hooks=hooks) as agent:
        result = agent.send("go")
    # No tools registered: "one" would have finished the run; the hook asked twice for more.
    assert result.steps == 3 and result.reason == "finished" and result.text == "three"
    server.add("a", "b", "c")
    decisions = iter(["continue", None, None])
    with make(server, hooks=hooks, tools=[RECORDER], no_tool_rounds=2, no_tool_prompt="") as agent:
        result = agent.send("go")
    assert result.steps == 3 and result.reason == "no-tool"


# ---------------------------------------------------------------- a hook that raises


class HookBug(Exception):
    pass


def _raise(*args: Any) -> Any:
    raise HookBug("the hook is broken")


@pytest.mark.parametrize("name", ["before_tool_call", "unknown_tool"])
def test_a_raising_call_hook_fails_the_send_and_the_call_never_runs(server: ModelServer, name: str) -> None:
    tool_name = "record" if name == "before_tool_call" else "ghost"
    server.add(calls((tool_name, {"n": 1})), "never asked")
    with make(server, hooks={name: _raise}, tools=[RECORDER]) as agent:
        run = agent.stream("go")
        with pytest.raises(AgentError) as caught:
            collect(run)
    assert caught.value.kind == "tool"
    assert isinstance(caught.value.__cause__, HookBug)
    assert name in caught.value.message
    assert ran == []
    (output,) = results(agent)
    assert output["type"] == "error-text" and "broken" in output["value"]
    assert len(server.requests) == 1


def test_a_raising_after_tool_call_keeps_an_error_result(server: ModelServer) -> None:
    server.add(calls(("record", {"n": 1})), "never asked")
    agent = make(server, hooks={"after_tool_call": _raise}, tools=[RECORDER])
    with agent, pytest.raises(AgentError) as caught:
        agent.send("go")
    assert caught.value.kind == "tool" and isinstance(caught.value.__cause__, HookBug)
    assert ran == [{"n": 1}]
    (output,) = results(agent)
    assert output["type"] == "error-text"


@pytest.mark.parametrize("name", ["prepare_request", "finish_turn"])
def test_a_raising_request_hook_ends_the_run_there(server: ModelServer, name: str) -> None:
    server.add("hello", "never asked")
    with make(server, hooks={name: _raise}) as agent, pytest.raises(AgentError) as caught:
        agent.send("go")
    assert caught.value.kind == "tool" and isinstance(caught.value.__cause__, HookBug)
    expected_requests = 0 if name == "prepare_request" else 1
    assert len(server.requests) == expected_requests
    assert [m["role"] for m in agent.history] == (
        ["user"] if name == "prepare_request" else ["user", "assistant"]
    )


def test_a_hook_returning_nonsense_fails_like_a_raising_one(server: ModelServer) -> None:
    server.add(calls(("record", {"n": 1})))
    agent = make(server, hooks={"before_tool_call": lambda call: "yes"}, tools=[RECORDER])
    with agent, pytest.raises(AgentError) as caught:
        agent.send("go")
    assert caught.value.kind == "tool" and ran == []


# ---------------------------------------------------------------- hooks= on Agent() and send()


def test_send_hooks_merge_key_by_key_and_are_written_back(server: ModelServer) -> None:
    blocked: list[str] = []
    server.add(*[calls(("record", {"n": i})) for i in range(3)], "done")

    def block(call: dict[str, Any]) -> dict[str, Any]:
        blocked.append(call["tool_call_id"])
        return {"block": "no"}

    def answer(call: dict[str, Any]) -> str:
        return "answered"

    with make(server, hooks={"unknown_tool": answer}, tools=[RECORDER], max_steps=1) as agent:
        agent.send("one", hooks={"before_tool_call": block})
        agent.send("two")  # still in force
        agent.send("three", hooks={"before_tool_call": None})  # removed
    assert len(blocked) == 2
    assert ran == [{"n": 2}]


def test_hooks_are_validated(server: ModelServer) -> None:
    with pytest.raises(AgentError) as caught:
        make(server, hooks={"before_tool": lambda call: None})
    assert caught.value.kind == "config" and "before_tool" in caught.value.message
    with pytest.raises(AgentError):
        make(server, hooks={"finish_turn": "end"})
    with pytest.raises(TypeError):
        make(server, hooks=[lambda call: None])
    with make(server) as agent:
        with pytest.raises(AgentError) as caught:
            agent.send("hi", hooks={"nope": print})
        assert caught.value.kind == "config"
        assert agent.history == []


def test_per_call_hooks_run_on_tool_threads(server: ModelServer) -> None:
    threads: list[threading.Thread] = []
    server.add(calls(("record", {"n": 1})), "ok")
    hooks = {"before_tool_call": lambda call: threads.append(threading.current_thread())}
    with make(server, hooks=hooks, tools=[RECORDER], no_tool_rounds=1) as agent:
        agent.send("go")
    assert threads and threads[0].name.startswith("agentcore-tool")


# ---------------------------------------------------------------- sequential execution


def _timed(
    spans: dict[str, tuple[float, float]], lock: threading.Lock, together: dict[str, threading.Barrier]
) -> Callable[..., str]:
    def work(input: dict[str, Any], ctx: ToolContext) -> str:
        started = time.monotonic()
        if input["name"] in together:  # passes only while its partners run too (else: error result)
            together[input["name"]].wait()
        else:
            ctx.cancel.wait(0.05)  # the call's work
        with lock:
            spans[input["name"]] = (started, time.monotonic())
        return input["name"]

    return work


def _timed_tools(
    sequential_names: set[str], together: dict[str, threading.Barrier] | None = None
) -> tuple[list[dict[str, Any]], dict[str, tuple[float, float]]]:
    """Tools that record when each call ran; calls named in `together` wait for their barrier."""
    spans: dict[str, tuple[float, float]] = {}
    lock = threading.Lock()
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    tools = [
        {
            "name": name,
            "description": "Timed work.",
            "input_schema": schema,
            "execute": _timed(spans, lock, together or {}),
            **({"execution_mode": "sequential"} if name in sequential_names else {}),
        }
        for name in ("par", "seq")
    ]
    return tools, spans


def assert_barrier(
    spans: dict[str, tuple[float, float]], before: list[str], barrier: str, after: list[str]
) -> None:
    start, end = spans[barrier]
    assert all(spans[name][1] <= start for name in before), (before, barrier, spans)
    assert all(spans[name][0] >= end for name in after), (barrier, after, spans)


def test_a_sequential_tool_is_a_barrier_inside_a_parallel_round(server: ModelServer) -> None:
    # Calls on one side of the barrier still run together: a and b (c and d) meet at a rendezvous.
    before, after = threading.Barrier(2, timeout=30), threading.Barrier(2, timeout=30)
    tools, spans = _timed_tools({"seq"}, {"a": before, "b": before, "c": after, "d": after})
    names = [("par", "a"), ("par", "b"), ("seq", "S"), ("par", "c"), ("par", "d")]
    server.add(calls(*[(tool_name, {"name": n}) for tool_name, n in names]), "ok")
    with make(server, tools=tools, no_tool_rounds=1) as agent:
        agent.send("go")
    assert [o["value"] for o in results(agent)] == ["a", "b", "S", "c", "d"]  # no broken rendezvous
    assert_barrier(spans, ["a", "b"], "S", ["c", "d"])


def test_tool_execution_sequential_runs_one_call_at_a_time_in_call_order(server: ModelServer) -> None:
    tools, spans = _timed_tools(set())
    server.add(calls(*[("par", {"name": n}) for n in "abcd"]), "ok")
    with make(server, tools=tools, no_tool_rounds=1, tool_execution="sequential") as agent:
        events = collect(agent.stream("go"))
    for earlier, later in zip("abc", "bcd", strict=True):
        assert spans[earlier][1] <= spans[later][0]
    assert [e["result"]["output"]["value"] for e in events if e["type"] == "tool_execution_end"] == list(
        "abcd"
    )


@tool(sequential=True)
def decorated_barrier(name: str) -> str:
    """A barrier.

    Args:
        name: a label.
    """
    return name


def test_tool_decorator_sequential_sets_the_execution_mode() -> None:
    assert load([decorated_barrier]).schema["decorated_barrier"]["execution_mode"] == "sequential"
    assert "execution_mode" not in load([RECORDER]).schema["record"]


FILE_TOOLS = '''
import time
from agentcore import tool


def _span(name, work_s):
    started = time.monotonic()
    time.sleep(work_s)
    return {"name": name, "start": started, "end": time.monotonic()}


@tool
def par(name: str) -> dict:
    """Parallel work."""
    return _span(name, 0.1)


@tool(sequential=True)
def seq(name: str) -> dict:
    """A barrier."""
    return _span(name, 0.02)
'''


def test_file_tools_honour_the_barrier(server: ModelServer, tmp_path: Path) -> None:
    (tmp_path / "timed.py").write_text(textwrap.dedent(FILE_TOOLS))
    tools = load(str(tmp_path))
    assert tools.schema["seq"]["execution_mode"] == "sequential"
    names = [("par", "a"), ("par", "b"), ("seq", "S"), ("par", "c")]
    server.add(calls(*[(tool_name, {"name": n}) for tool_name, n in names]), "ok")
    with make(server, tools=tools, no_tool_rounds=1) as agent:
        agent.send("go")
        spans = {o["value"]["name"]: (o["value"]["start"], o["value"]["end"]) for o in results(agent)}
    assert_barrier(spans, ["a", "b"], "S", ["c"])
