"""Run events (API.md §Run events): order, keys and plain JSON on every path; `Run` and `subscribe`.

Every scenario goes through `collect()` (tests/event_checks.py), which json.dumps every event
and checks the whole sequence against the order rules, so each path is checked twice: by its own
assertions and by the general grammar.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from agentcore import Agent, AgentError, ToolContext, output, tool
from agentcore.testing import ModelServer

Event = dict[str, Any]
MakeAgent = Callable[..., Agent]

from event_checks import check_order, collect, compressed, types  # noqa: E402

# ---------------------------------------------------------------- tools used below


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: first.
        b: second.
    """
    return a + b


def _gate_tools(gates: dict[str, threading.Event]) -> list[dict[str, Any]]:
    def wait_for(input: dict[str, Any], ctx: ToolContext) -> str:
        gate = gates.get(input["name"])
        if gate is not None:
            assert gate.wait(30)
        return f"{input['name']} done"

    return [
        {
            "name": "job",
            "description": "A job that waits for its gate.",
            "input_schema": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
            "execute": wait_for,
        }
    ]


# ---------------------------------------------------------------- order on the main paths


def test_a_text_reply_run_has_the_documented_order(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add({"text": "Hello there, friend.", "chunk_size": 4})
    agent = make_agent(server)
    with agent.stream("hi") as run:
        events = collect(run)
    assert compressed(events) == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_update*",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert events[2]["message"]["content"] == "hi"
    assert events[4]["message"] == {"role": "assistant", "content": []}
    text = "".join(e["delta"]["text"] for e in events if e["type"] == "message_update")
    assert text == "Hello there, friend."
    end = events[-1]
    assert end["reason"] == "finished" and end["steps"] == 1 and end["text"] == "Hello there, friend."
    assert end["usage"] == run.result.usage.to_dict()
    assert "error" not in end
    assert all(e["agent_id"] == agent.id for e in events)
    assert events[-2]["message"] is agent.history[-1]


def test_a_tool_round_appends_the_reply_before_its_calls_run(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(
        {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]},
        "The sum is 3.",
    )
    agent = make_agent(server, tools=[add], no_tool_rounds=1)
    events = collect(agent.stream("add 1 and 2"))
    assert compressed(events) == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_update*",
        "message_end",
        "tool_execution_start",
        "tool_execution_end",
        "message_start",
        "message_end",
        "turn_end",
        "turn_start",
        "message_start",
        "message_update*",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    start = next(e for e in events if e["type"] == "tool_execution_start")
    end = next(e for e in events if e["type"] == "tool_execution_end")
    assert (start["tool_name"], start["input"]) == ("add", {"a": 1, "b": 2})
    assert end["result"] == {"output": {"type": "json", "value": 3}}
    turn_end = next(e for e in events if e["type"] == "turn_end")
    assert turn_end["step"] == 1
    assert turn_end["message"]["content"][0]["type"] == "tool-call"
    assert turn_end["tool_results"][0]["output"] == {"type": "json", "value": 3}
    assert [e["step"] for e in events if e["type"] == "turn_start"] == [1, 2]


def test_parallel_calls_end_in_completion_order_and_the_tool_message_keeps_call_order(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    gates = {"first": threading.Event()}
    server.add(
        {
            "tool_calls": [
                {"name": "job", "arguments": {"name": "first"}},
                {"name": "job", "arguments": {"name": "second"}},
            ]
        },
        "done",
    )
    agent = make_agent(server, tools=_gate_tools(gates), no_tool_rounds=1)

    def release_first_after_second(event: Event) -> None:
        # The second call ends first; only then may the first one finish.
        if event["type"] == "tool_execution_end" and event["result"]["output"]["value"] == "second done":
            gates["first"].set()

    agent.subscribe(release_first_after_second)
    events = collect(agent.stream("run both"))
    ends = [e["result"]["output"]["value"] for e in events if e["type"] == "tool_execution_end"]
    assert ends == ["second done", "first done"]
    tool_message = next(e for e in events if e["type"] == "message_end" and e["message"]["role"] == "tool")
    assert [p["output"]["value"] for p in tool_message["message"]["content"]] == ["first done", "second done"]


def test_denied_invalid_and_unknown_calls_end_without_starting(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(
        {
            "tool_calls": [
                {"name": "add", "arguments": {"a": 1, "b": 2}},
                {"name": "ghost", "arguments": {}},
                {"name": "add", "arguments": '{"a": 1'},
                {"name": "add", "arguments": {"a": "one", "b": 2}},
            ]
        },
        "ok",
    )
    agent = make_agent(
        server, tools=[add], no_tool_rounds=1, callbacks={"on_permission": lambda payload: False}
    )
    events = collect(agent.stream("go"))
    assert "tool_execution_start" not in types(events)
    results = [e["result"]["output"]["type"] for e in events if e["type"] == "tool_execution_end"]
    assert sorted(results) == ["error-text", "error-text", "error-text", "execution-denied"]


def test_tool_output_streams_as_tool_execution_update(server: ModelServer, make_agent: MakeAgent) -> None:
    def ticks(input: dict[str, Any]) -> Any:
        yield "one "
        yield "two"

    tools = [{"name": "ticks", "description": "Tick.", "input_schema": {"type": "object"}, "execute": ticks}]
    server.add({"tool_calls": [{"name": "ticks", "arguments": {}}]}, "ok")
    agent = make_agent(server, tools=tools, no_tool_rounds=1)
    events = collect(agent.stream("tick"))
    updates = [e for e in events if e["type"] == "tool_execution_update"]
    assert [(u["stream"], u["data"]) for u in updates] == [("yield", "one "), ("yield", "two")]
    assert set(updates[0]) == {"type", "run_id", "agent_id", "tool_call_id", "tool_name", "stream", "data"}


# ---------------------------------------------------------------- retries and failures


def test_a_retried_reply_gets_a_retry_event_and_no_message_end(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(
        {"text": "this reply is cut off by a dropped connection", "chunk_size": 5, "drop_after": 3},
        {"status": 500, "error": "overloaded"},
        "the whole reply",
    )
    retries: list[dict[str, Any]] = []
    agent = make_agent(server, callbacks={"on_retry": retries.append})
    events = collect(agent.stream("hi"))
    retry_events = [e for e in events if e["type"] == "retry"]
    assert [e["attempt"] for e in retry_events] == [1, 2] == [r["attempt"] for r in retries]
    assert retry_events[1]["error"]["status"] == 500
    assert retry_events[1]["error"]["kind"] == "server"
    ends = [e for e in events if e["type"] == "message_end" and e["message"]["role"] == "assistant"]
    assert len(ends) == 1
    assert ends[0]["message"]["content"] == [{"type": "text", "text": "the whole reply"}]
    # The cut attempt opened a reply that the retry closed; the final attempt opened its own.
    opened = [i for i, e in enumerate(events) if e["type"] == "message_start" and not e["message"]["content"]]
    assert len(opened) == 2
    assert [e["type"] for e in events[opened[0] :]].index("retry") > 0


def test_a_failed_run_ends_with_agent_end_carrying_the_error_then_raises(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add({"status": 400, "error": "bad request body"})
    agent = make_agent(server, retry=lambda error: False)
    run = agent.stream("hi")
    with pytest.raises(AgentError) as caught:
        collect(run)
    assert caught.value.kind == "request"
    assert run.result is None
    with pytest.raises(AgentError):
        run.wait()


def test_agent_end_error_has_kind_status_message(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add({"status": 400, "error": "bad request body"})
    agent = make_agent(server, retry=lambda error: False)
    events: list[Event] = []
    agent.subscribe(events.append)
    with pytest.raises(AgentError):
        agent.send("hi")
    assert check_order(events) == []
    error = events[-1]["error"]
    assert (error["kind"], error["status"]) == ("request", 400)
    assert "bad request body" in error["message"]
    assert events[-1]["reason"] is None


# ---------------------------------------------------------------- compaction


def test_threshold_compaction_is_announced_inside_its_round(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    history = [
        {"role": "user", "content": "x" * 4000},
        {"role": "assistant", "content": [{"type": "text", "text": "y" * 4000}]},
    ]
    server.add("A summary of the work.", "Next reply.")
    agent = make_agent(server, history=history, max_context_tokens=3000)
    events = collect(agent.stream("go on"))
    kinds = compressed(events)
    assert kinds[:8] == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "compaction_start",
        "message_start",
        "message_end",
        "compaction_end",
    ]
    start = next(e for e in events if e["type"] == "compaction_start")
    end = next(e for e in events if e["type"] == "compaction_end")
    assert start["reason"] == end["reason"] == "threshold"
    assert end["summary"] == "A summary of the work."
    assert set(end["usage"]) == set(run_usage_keys())
    compact_entry = events[kinds.index("compaction_end") - 1]["message"]
    assert compact_entry["role"] == "compact"


def run_usage_keys() -> list[str]:
    return ["input_tokens", "output_tokens", "total_tokens", "cache_read_tokens", "cache_write_tokens"]


def test_overflow_compaction_has_reason_overflow(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add({"overflow": True}, "Summary.", "Answer after compaction.")
    agent = make_agent(
        server, history=[{"role": "user", "content": "old"}, {"role": "assistant", "content": []}]
    )
    events = collect(agent.stream("hi"))
    assert [e["reason"] for e in events if e["type"] == "compaction_start"] == ["overflow"]
    assert events[-1]["text"] == "Answer after compaction."


def test_manual_compaction_is_a_run_of_its_own(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add("Summary of everything.")
    agent = make_agent(server, history=[{"role": "user", "content": "hello"}])
    events: list[Event] = []
    agent.subscribe(events.append)
    agent.compact()
    assert check_order(events) == []
    assert types(events) == [
        "agent_start",
        "compaction_start",
        "message_start",
        "message_end",
        "compaction_end",
        "agent_end",
    ]
    assert events[1]["reason"] == "manual"
    assert events[-1]["reason"] is None


# ---------------------------------------------------------------- other modes


def test_structured_output_run(server: ModelServer, make_agent: MakeAgent) -> None:
    schema = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}
    server.add('{"total": 4}')
    agent = make_agent(server, output=output.object(schema))
    with agent.stream("count") as run:
        events = collect(run)
    assert events[-1]["reason"] == "finished"
    assert run.result.output == {"total": 4}


def test_an_invalid_structured_reply_is_retried_without_message_end(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    schema = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}
    server.add("not json at all", '{"total": 4}')
    agent = make_agent(server, output=output.object(schema))
    events = collect(agent.stream("count"))
    assert "retry" in types(events)
    replies = [e for e in events if e["type"] == "message_end" and e["message"]["role"] == "assistant"]
    assert [r["message"]["content"][0]["text"] for r in replies] == ['{"total": 4}']


def test_text_tool_mode_run(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add('<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>', "It is 5.")
    agent = make_agent(server, tools=[add], tool_mode="text", no_tool_rounds=1)
    events = collect(agent.stream("add 2 and 3"))
    assert [e["result"]["output"]["value"] for e in events if e["type"] == "tool_execution_end"] == [5]
    reply = next(e for e in events if e["type"] == "message_end" and e["message"]["role"] == "assistant")
    assert [p["type"] for p in reply["message"]["content"]] == ["tool-call"]


# ---------------------------------------------------------------- stopping


def test_stop_during_a_tool_still_ends_the_stream_with_agent_end(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    started = threading.Event()

    def hang(input: dict[str, Any], ctx: ToolContext) -> str:
        started.set()
        ctx.cancel.wait(60)
        return "late"

    tools = [{"name": "hang", "description": "Hang.", "input_schema": {"type": "object"}, "execute": hang}]
    server.add({"tool_calls": [{"name": "hang", "arguments": {}}]})
    agent = make_agent(server, tools=tools)
    run = agent.stream("go")
    assert started.wait(30)
    agent.stop()
    with pytest.raises(AgentError) as caught:
        collect(run)
    assert caught.value.kind == "aborted"
    assert run.done


def test_stop_mid_stream_closes_the_open_reply(server: ModelServer, make_agent: MakeAgent) -> None:
    # The stream stalls after a few chunks until the client leaves: it cannot end before the stop.
    server.add({"text": "a long reply " * 50, "chunk_size": 5, "stall_after": 4})
    agent = make_agent(server)
    run = agent.stream("talk")
    events: list[Event] = []
    for event in run:
        events.append(event)
        if event["type"] == "message_update":
            agent.stop()
            break
    with pytest.raises(AgentError):
        for event in run:
            events.append(event)
    assert check_order(events) == []
    assert events[-1]["error"]["kind"] == "aborted"
    partial = [e for e in events if e["type"] == "message_end" and e["message"]["role"] == "assistant"]
    assert partial and partial[0]["message"] is agent.history[-1]


# ---------------------------------------------------------------- the Run object


def test_bad_input_and_config_raise_at_once(server: ModelServer, make_agent: MakeAgent) -> None:
    agent = make_agent(server)
    with pytest.raises(AgentError) as caught:
        agent.stream("   ")
    assert caught.value.kind == "request"
    with pytest.raises(AgentError) as caught:
        agent.stream("hi", config={"no_such_key": 1})
    assert caught.value.kind == "config"
    with pytest.raises(AgentError) as caught:
        agent.stream_resume()
    assert caught.value.kind == "request"
    assert agent.history == []
    assert agent.running is None


def test_wait_returns_the_result_and_times_out_without_stopping(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    gate = threading.Event()
    server.add({"tool_calls": [{"name": "job", "arguments": {"name": "g"}}]}, "finished now")
    agent = make_agent(server, tools=_gate_tools({"g": gate}), no_tool_rounds=1)
    run = agent.stream("go")
    assert run.result is None
    with pytest.raises(TimeoutError):
        run.wait(timeout=0.05)
    gate.set()
    result = run.wait()
    assert result.text == "finished now"
    assert run.result is result
    assert list(run)[-1]["type"] == "agent_end"


def test_a_reader_that_never_reads_does_not_hold_the_run(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add({"text": "many small pieces " * 40, "chunk_size": 2})
    agent = make_agent(server)
    run = agent.stream("hi")
    result = run.wait(30)
    assert result.reason == "finished"
    events = collect(run)
    assert len(events) > 300


def test_leaving_the_with_block_stops_the_run(server: ModelServer, make_agent: MakeAgent) -> None:
    started = threading.Event()

    def hang(input: dict[str, Any], ctx: ToolContext) -> str:
        started.set()
        ctx.cancel.wait(60)
        return "late"

    tools = [{"name": "hang", "description": "Hang.", "input_schema": {"type": "object"}, "execute": hang}]
    server.add({"tool_calls": [{"name": "hang", "arguments": {}}]})
    agent = make_agent(server, tools=tools)
    with agent.stream("go") as run:
        assert started.wait(30)
    assert run.done and agent.running is None
    assert agent.history[-1]["content"][0]["output"]["type"] == "error-text"  # interrupted


def test_a_garbage_collected_run_stops(server: ModelServer, make_agent: MakeAgent) -> None:
    started = threading.Event()
    ended = threading.Event()

    def hang(input: dict[str, Any], ctx: ToolContext) -> str:
        started.set()
        ctx.cancel.wait(60)
        ended.set()
        return "late"

    tools = [{"name": "hang", "description": "Hang.", "input_schema": {"type": "object"}, "execute": hang}]
    server.add({"tool_calls": [{"name": "hang", "arguments": {}}]})
    agent = make_agent(server, tools=tools)
    run = agent.stream("go")
    assert started.wait(30)
    del run
    gc.collect()
    assert ended.wait(30)
    running = agent.running
    if running is not None:
        assert running.done.wait(30)


def test_close_stops_a_run(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add({"text": "slow " * 100, "chunk_size": 5, "stall_after": 2})  # cannot end on its own
    agent = make_agent(server)
    run = agent.stream("hi")
    run.close()
    assert run.done and run.result is None
    with pytest.raises(AgentError) as caught:
        run.wait()
    assert caught.value.kind == "aborted"
    events: list[Event] = []
    with pytest.raises(AgentError):
        for event in run:
            events.append(event)
    assert check_order(events) == []


def _wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.001)


def test_a_run_superseded_before_it_started_still_ends_with_agent_end(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    """A holds its agent_end in a listener; B waits for A; C supersedes B before B starts."""
    in_tool, release_a = threading.Event(), threading.Event()

    def hang(input: dict[str, Any], ctx: ToolContext) -> str:
        in_tool.set()
        ctx.cancel.wait(60)
        return "late"

    def hold_the_end(event: Event) -> None:
        if event["type"] == "agent_end" and event["run_id"] == first.run_id:
            assert release_a.wait(30)

    tools = [{"name": "hang", "description": "Hang.", "input_schema": {"type": "object"}, "execute": hang}]
    server.add({"tool_calls": [{"name": "hang", "arguments": {}}]}, "third")
    agent = make_agent(server, tools=tools, no_tool_rounds=1)
    agent.subscribe(hold_the_end)
    first = agent.stream("a")
    assert in_tool.wait(30)
    running_a = agent.running
    second = agent.stream("b")
    _wait_until(lambda: agent.running is not running_a)
    running_b = agent.running
    third = agent.stream("c")
    _wait_until(lambda: agent.running is not running_b)
    release_a.set()
    events: list[Event] = []
    with pytest.raises(AgentError) as caught:
        for event in second:
            events.append(event)
    assert caught.value.kind == "aborted"
    assert types(events) == ["agent_start", "agent_end"]
    assert check_order(events) == []
    assert third.wait(30).text == "third"
    assert [m["content"] for m in agent.history if m["role"] == "user"] == ["a", "c"]
    with pytest.raises(AgentError):
        first.wait()


def test_each_run_has_its_own_run_id(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add("one", "two")
    agent = make_agent(server)
    first = collect(agent.stream("a"))
    second = collect(agent.stream("b"))
    assert first[0]["run_id"] != second[0]["run_id"]


# ---------------------------------------------------------------- subscribe and callbacks


def test_subscribe_hears_every_kind_of_run_on_the_producing_thread(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add({"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 1}}]}, "two", "again", "Summary.")
    agent = make_agent(server, tools=[add], no_tool_rounds=1)
    heard: list[tuple[Event, threading.Thread]] = []
    unsubscribe = agent.subscribe(lambda event: heard.append((event, threading.current_thread())))
    agent.send("add")
    agent.history.append({"role": "assistant", "content": [{"type": "text", "text": "go on"}]})
    agent.resume()
    collect(agent.stream("more"))
    agent.compact()
    runs = [e["run_id"] for e, _ in heard if e["type"] == "agent_start"]
    assert len(runs) == 4
    for run_id in runs:
        assert check_order([e for e, _ in heard if e["run_id"] == run_id]) == []
    assert all(thread is not threading.main_thread() for _, thread in heard)
    unsubscribe()
    count = len(heard)
    server.add("quiet")
    agent.send("unheard")
    assert len(heard) == count


def test_a_listener_that_raises_is_logged_and_the_run_goes_on(
    server: ModelServer, make_agent: MakeAgent, caplog: pytest.LogCaptureFixture
) -> None:
    server.add("fine")
    agent = make_agent(server)

    def broken(event: Event) -> None:
        raise RuntimeError("listener bug")

    agent.subscribe(broken)
    with caplog.at_level(logging.WARNING, logger="agentcore"):
        assert agent.send("hi").text == "fine"
    assert any("listener" in r.getMessage() and r.exc_info for r in caplog.records)


def test_callbacks_and_events_report_the_same_facts(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add(
        {"status": 500, "error": "boom"},
        {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "ghost", "arguments": {}}]},
        "three",
    )
    seen: dict[str, list[Any]] = {
        name: [] for name in ("on_retry", "on_tool_result", "on_step", "on_llm_event")
    }
    callbacks = {name: seen[name].append for name in seen}
    agent = make_agent(server, tools=[add], no_tool_rounds=1, callbacks=callbacks)
    events = collect(agent.stream("go"))
    assert len(seen["on_retry"]) == types(events).count("retry")
    assert [r["tool_call_id"] for r in seen["on_tool_result"]] == [
        e["tool_call_id"] for e in events if e["type"] == "tool_execution_end"
    ]
    assert [p["step"] for p in seen["on_step"]] == [e["step"] for e in events if e["type"] == "turn_end"]
    deltas = [e for e in seen["on_llm_event"] if e["type"] != "finish"]
    assert deltas == [e["delta"] for e in events if e["type"] == "message_update"]


def test_agent_id_and_run_id_on_every_event(server: ModelServer) -> None:
    server.add("hi")
    with Agent(config={"base_url": server.base_url, "model": "m"}, id="agent-7") as agent:
        events = collect(agent.stream("hello"))
    assert {e["agent_id"] for e in events} == {"agent-7"}
    assert len({e["run_id"] for e in events}) == 1


def test_closing_a_run_from_inside_it_only_stops_it(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add({"text": "a long reply " * 40, "chunk_size": 4})
    agent = make_agent(server)
    runs: list[Any] = []
    have_run = threading.Event()

    def close_on_first_delta(event: Event) -> None:
        # The run may reach its first delta before stream() returned: wait for the Run object.
        if event["type"] == "message_update" and have_run.wait(30) and not runs[0].done:
            runs[0].close()  # on the run's own thread: must not wait for itself

    agent.subscribe(close_on_first_delta)
    runs.append(agent.stream("hi"))
    have_run.set()
    with pytest.raises(AgentError) as caught:
        runs[0].wait(30)
    assert caught.value.kind == "aborted"


def test_on_start_is_called_once_per_send_and_not_for_compact(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    started: list[int] = []
    server.add("hi", "Summary.")
    agent = make_agent(server, callbacks={"on_start": lambda: started.append(1)})
    agent.send("hello")
    agent.compact()
    assert started == [1]
