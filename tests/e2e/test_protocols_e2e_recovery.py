"""The loop end to end on every protocol, when things go wrong or ask for more: retries, context
overflow, structured output, the text tool mode, cancellation, media.

Shared readers and tools: e2e_helpers.py; the `protocol` and `stream` fixtures: conftest.py.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from e2e_helpers import (
    CALL_TEXT,
    TOOL_IMAGE,
    TOTAL_SCHEMA,
    USER_IMAGE,
    Invoice,
    MakeAgent,
    add,
    assert_history_valid,
    call,
    chart,
    images_sent,
    is_compaction,
    native_output_schema,
    object_reply,
    parts_of,
    sleepy,
    system_text,
    tool_calls_sent,
    tool_names,
    tool_results_sent,
    wire_messages,
)

from agentcore import Agent, AgentError, output
from agentcore.context import SUMMARY_INTRO
from agentcore.testing import ModelServer, Recorded, encoders
from agentcore.testing.script import build as build_reply

pytestmark = pytest.mark.usefixtures("no_thread_leak")

# ---------------------------------------------------------------- retries


@pytest.mark.parametrize(("status", "kind"), [(429, "limit"), (500, "server"), (529, "server")])
def test_http_errors_are_retried(
    protocol: str, status: int, kind: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    retries: list[dict[str, Any]] = []
    server.add({"status": status, "error": "busy, try later"}, "fine now")
    agent = make_agent(server, protocol=protocol, callbacks={"on_retry": retries.append})
    result = agent.send("hi")
    assert (result.text, result.steps) == ("fine now", 1)
    assert len(server.requests) == 2
    assert [(r["attempt"], r["error"].kind, r["error"].status) for r in retries] == [(1, kind, status)]
    assert "busy, try later" in retries[0]["error"].message


@pytest.mark.parametrize(
    "failure",
    [{"drop_after": 6}, {"stream_error": "overloaded, please retry"}, {"truncate": True}],
    ids=["drop", "stream_error", "truncate"],
)
def test_broken_streams_are_retried_and_leave_nothing_partial(
    protocol: str, failure: dict[str, Any], server: ModelServer, make_agent: MakeAgent
) -> None:
    events: list[dict[str, Any]] = []
    retries: list[dict[str, Any]] = []
    server.add({"text": "A partial answer that is cut off somewhere.", **failure}, "The whole answer.")
    agent = make_agent(
        server,
        protocol=protocol,
        stream=True,
        callbacks={"on_retry": retries.append, "on_llm_event": events.append},
    )
    result = agent.send("hi")
    assert (result.text, result.steps) == ("The whole answer.", 1)
    assert len(server.requests) == 2 and len(retries) == 1
    streamed = "".join(e["text"] for e in events if e["type"] == "text-delta")
    assert streamed.startswith("A partial answer"), "partial text had arrived before the failure"
    assert [m["role"] for m in agent.history] == ["user", "assistant"]
    assert "partial" not in json.dumps(agent.history)


def test_auth_errors_are_retried_by_default(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add({"status": 401, "error": "bad key"}, "in")
    assert make_agent(server, protocol=protocol).send("hi").text == "in"
    assert len(server.requests) == 2


def test_auth_errors_stop_when_skipped(protocol: str, server: ModelServer, make_agent: MakeAgent) -> None:
    server.add({"status": 401, "error": "bad key"}, "never")
    agent = make_agent(server, protocol=protocol, retry={"skip_kinds": ["auth"]})
    with pytest.raises(AgentError) as raised:
        agent.send("hi")
    assert (raised.value.kind, raised.value.status) == ("auth", 401)
    assert "bad key" in raised.value.message
    assert len(server.requests) == 1
    assert [m["role"] for m in agent.history] == ["user"]


# ---------------------------------------------------------------- context overflow


def test_overflow_compacts_once_and_resends(
    protocol: str, stream: bool, server: ModelServer, make_agent: MakeAgent
) -> None:
    compact_events: list[dict[str, Any]] = []
    usage = {"input_tokens": 10, "output_tokens": 5}
    server.add(
        {"overflow": True},
        {"text": "SUMMARY: the user wants a greeting.", "usage": usage},
        {"text": "Hello!", "usage": usage},
    )
    agent = make_agent(
        server,
        protocol=protocol,
        stream=stream,
        system="Be brief.",
        callbacks={"on_compact": compact_events.append},
    )
    result = agent.send("hi")
    assert (result.text, result.steps) == ("Hello!", 1)
    assert len(server.requests) == 3
    assert [is_compaction(protocol, r) for r in server.requests] == [False, True, False]
    assert [m["role"] for m in agent.history] == ["user", "compact", "assistant"]
    assert agent.history[1]["content"] == "SUMMARY: the user wants a greeting."
    resent = system_text(protocol, server.requests[2])
    assert resent.startswith("Be brief.") and SUMMARY_INTRO in resent and "SUMMARY: the user wants" in resent
    assert [e["type"] for e in compact_events if not e.get("request")] == ["compact-start", "compact-finish"]
    streamed = "".join(e.get("text", "") for e in compact_events if e.get("request") == "compact")
    assert streamed == ("SUMMARY: the user wants a greeting." if stream else "")
    assert result.usage.input_tokens == 20 and result.usage.output_tokens == 10


# ---------------------------------------------------------------- structured output


def test_structured_object_without_tools(
    protocol: str, stream: bool, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(object_reply(protocol, {"total": 42}))
    agent = make_agent(server, protocol=protocol, stream=stream, output=output.object(TOTAL_SCHEMA))
    result = agent.send("Sum it up")
    assert (result.reason, result.output, result.steps) == ("finished", {"total": 42}, 1)
    assert json.loads(result.text) == {"total": 42}
    assert native_output_schema(protocol, server.requests[0]) == TOTAL_SCHEMA
    assert not parts_of(agent.history[-1], "tool-call")


def test_structured_object_after_tool_rounds(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add({"tool_calls": [call("add", {"a": 40, "b": 2})]}, object_reply(protocol, {"total": 42}))
    agent = make_agent(server, protocol=protocol, tools=[add], output=output.object(TOTAL_SCHEMA))
    result = agent.send("Add 40 and 2, then report")
    assert (result.reason, result.output, result.steps) == ("finished", {"total": 42}, 2)
    first = server.requests[0]
    assert "add" in tool_names(protocol, first)
    # Gemini before version 3 rejects JSON mode together with function calling: instructions instead.
    native = native_output_schema(protocol, first)
    if protocol == "gemini":
        assert native is None and '"total"' in system_text(protocol, first)
    else:
        assert native == TOTAL_SCHEMA
    assert_history_valid(agent.history)


def test_invalid_structured_output_is_retried_not_written(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    retries: list[dict[str, Any]] = []
    server.add("not json at all", object_reply(protocol, {"total": 7}))
    agent = make_agent(
        server, protocol=protocol, output=output.object(TOTAL_SCHEMA), callbacks={"on_retry": retries.append}
    )
    result = agent.send("Sum it up")
    assert (result.reason, result.output, result.steps) == ("finished", {"total": 7}, 1)
    assert len(server.requests) == 2 and len(retries) == 1
    assert [m["role"] for m in agent.history] == ["user", "assistant"]
    assert "not json" not in json.dumps(agent.history)


def test_structured_output_without_native_support_uses_instructions(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(object_reply(protocol, {"total": 3}, native=False))
    agent = make_agent(
        server,
        protocol=protocol,
        system="Be exact.",
        output=output.object(TOTAL_SCHEMA),
        capabilities={"structured_output": False},
    )
    result = agent.send("Sum it up")
    assert (result.reason, result.output) == ("finished", {"total": 3})
    body = server.requests[0]
    assert native_output_schema(protocol, body) is None
    system = system_text(protocol, body)
    assert system.startswith("Be exact.") and json.dumps(TOTAL_SCHEMA) in system


def test_structured_array_travels_wrapped(
    protocol: str, stream: bool, server: ModelServer, make_agent: MakeAgent
) -> None:
    item = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    server.add(object_reply(protocol, {"items": [{"name": "a"}, {"name": "b"}]}))
    agent = make_agent(server, protocol=protocol, stream=stream, output=output.array(item))
    result = agent.send("List them")
    assert (result.reason, result.output) == ("finished", [{"name": "a"}, {"name": "b"}])
    wire_schema = native_output_schema(protocol, server.requests[0])
    assert wire_schema is not None and wire_schema["properties"]["items"] == {"type": "array", "items": item}


def test_structured_output_with_a_model_class_gives_an_instance(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(object_reply(protocol, {"number": "INV-7", "total": 12.5}))
    agent = make_agent(server, protocol=protocol, output=output.object(Invoice))
    result = agent.send("Read the invoice")
    assert isinstance(result.output, Invoice)
    assert (result.output.number, result.output.total) == ("INV-7", 12.5)
    assert native_output_schema(protocol, server.requests[0]) == Invoice.model_json_schema()


# ---------------------------------------------------------------- text tool mode


def test_text_tool_mode(protocol: str, stream: bool, server: ModelServer, make_agent: MakeAgent) -> None:
    server.add("Let me add. " + CALL_TEXT, "It is 5.")
    agent = make_agent(
        server,
        protocol=protocol,
        stream=stream,
        tools=[add],
        tool_mode="text",
        no_tool_rounds=1,
        system="Be brief.",
    )
    result = agent.send("2+3?")
    assert (result.text, result.steps) == ("It is 5.", 2)
    first, second = server.requests
    assert "tools" not in first and tool_names(protocol, first) == []
    assert system_text(protocol, first).startswith("Be brief.") and "<tool_call>" in system_text(
        protocol, first
    )
    # The result went back as user text, not as a native tool result.
    assert tool_results_sent(protocol, second) == [] and tool_calls_sent(protocol, second) == []
    role, text = wire_messages(protocol, second)[-1]
    assert role == "user" and '<tool_result name="add">' in text
    assert text.split('<tool_result name="add">')[1].split("</tool_result>")[0].strip() == "5"
    # History keeps the standard shapes.
    assistant, results = agent.history[1], agent.history[2]
    assert parts_of(assistant, "text") == [{"type": "text", "text": "Let me add."}]
    [call_part] = parts_of(assistant, "tool-call")
    assert (call_part["tool_name"], call_part["input"]) == ("add", {"a": 2, "b": 3})
    assert results["role"] == "tool" and results["content"][0]["output"] == {"type": "json", "value": 5}


# ---------------------------------------------------------------- cancellation


class _Stopper:
    """Calls `agent.stop()` from its own thread once the run has reached a point the test names.

    The stop is tied to an event of the run (a stream event, a tool result, the request reaching
    the server), never to a delay: on a busy machine a timer may fire before the run got there,
    or after it ended. `stopped` says `stop()` returned; `join()` fails if it has not within
    30 s — what the tests stop (a stalled stream, a held reply) would block for far longer.
    """

    def __init__(self, agent: Agent) -> None:
        self.reached = threading.Event()
        self.stopped = False
        self._thread = threading.Thread(target=self._stop, args=(agent,), name="test-stopper", daemon=True)
        self._thread.start()

    def _stop(self, agent: Agent) -> None:
        if self.reached.wait(30):
            agent.stop()
            self.stopped = True

    def join(self) -> None:
        self.reached.set()  # a run that failed early must not leave the thread waiting
        self._thread.join(30)
        assert not self._thread.is_alive(), "stop() did not return"


def held_open(item: dict[str, Any]) -> Callable[[Recorded], dict[str, Any]]:
    """`item` streamed but for its last chunk; then the stream stays open until the client leaves.

    A test that stops mid-stream needs the stream still running when it stops, however slow the
    machine: a stream that can end on its own races the stop.
    """

    def reply(recorded: Recorded) -> dict[str, Any]:
        protocol = encoders.protocol_for(recorded.path)
        encoder = encoders.get(protocol or "")
        assert encoder is not None
        built = build_reply(item, recorded, lambda: "call_x", encoders.extra_keys())
        return {**item, "stall_after": len(list(encoder.encode_stream(built, recorded))) - 1}

    return reply


def test_stop_mid_stream_keeps_the_text_that_arrived(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add({"text": "Here is the start of a long answer " * 4, "stall_after": 8})
    agent = make_agent(server, protocol=protocol, stream=True)
    stopper = _Stopper(agent)
    arrived: list[str] = []

    def on_llm_event(event: dict[str, Any]) -> None:
        if event["type"] == "text-delta":
            arrived.append(event["text"])
            if "".join(arrived).startswith("Here is the"):
                stopper.reached.set()  # the stream then stalls (stall_after) until the stop

    with pytest.raises(AgentError) as raised:
        agent.send("hi", callbacks={"on_llm_event": on_llm_event})
    stopper.join()
    assert raised.value.kind == "aborted"
    assert stopper.stopped
    assert [m["role"] for m in agent.history] == ["user", "assistant"]
    assert agent.history[1]["content"][0]["text"].startswith("Here is the")
    assert_history_valid(agent.history)


def test_stop_mid_stream_with_calls_answers_every_call(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    calls = [call("add", {"a": 1, "b": 2}), call("add", {"a": 3, "b": 4})]
    server.add(held_open({"text": "Working on it, adding twice.", "tool_calls": calls, "chunk_size": 4}))
    agent = make_agent(server, protocol=protocol, stream=True, tools=[add])
    stopper = _Stopper(agent)
    complete_calls: list[dict[str, Any]] = []

    def on_llm_event(event: dict[str, Any]) -> None:
        if event["type"] == "tool-call":
            complete_calls.append(event)
            if len(complete_calls) == 2:
                stopper.reached.set()  # both calls are in; the stream is held open

    with pytest.raises(AgentError) as raised:
        agent.send("hi", callbacks={"on_llm_event": on_llm_event})
    stopper.join()
    assert raised.value.kind == "aborted"
    assert stopper.stopped
    assert agent.history[0]["content"] == "hi"
    assert [m["role"] for m in agent.history] == ["user", "assistant", "tool"]
    assert len(parts_of(agent.history[1], "tool-call")) == 2
    assert all(r["output"]["type"] == "error-text" for r in agent.history[2]["content"])
    assert_history_valid(agent.history)


def test_stop_during_a_tool_call_answers_it_as_interrupted(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add({"tool_calls": [call("sleepy"), call("add", {"a": 1, "b": 1})]})
    agent = make_agent(server, protocol=protocol, tools=[sleepy, add])
    stopper = _Stopper(agent)

    def on_tool_result(payload: dict[str, Any]) -> None:
        if payload["tool_name"] == "add":
            stopper.reached.set()  # add is answered; sleepy waits for the cancel

    with pytest.raises(AgentError) as raised:
        agent.send("go", callbacks={"on_tool_result": on_tool_result})
    stopper.join()
    assert raised.value.kind == "aborted"
    outputs = [p["output"] for p in agent.history[2]["content"]]
    assert outputs[0]["type"] == "error-text" and "interrupted" in outputs[0]["value"]
    assert outputs[1] == {"type": "json", "value": 2}
    assert_history_valid(agent.history)


def test_stop_while_waiting_for_a_whole_reply(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    agent = make_agent(server, protocol=protocol, stream=False)
    stopper = _Stopper(agent)

    def arrived(recorded: Recorded) -> dict[str, Any]:
        stopper.reached.set()  # the request is in; the reply is held back until the client leaves
        return {"text": "too late", "delay": 60}

    server.add(arrived)
    with pytest.raises(AgentError) as raised:
        agent.send("hi")
    stopper.join()
    assert raised.value.kind == "aborted"
    assert stopper.stopped
    assert [m["role"] for m in agent.history] == ["user"]


# ---------------------------------------------------------------- media


def test_user_image_and_tool_image_reach_the_request_as_media(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add({"tool_calls": [call("chart")]}, "A bar chart.")
    agent = make_agent(server, protocol=protocol, tools=[chart], no_tool_rounds=1)
    image = {"type": "image", "image": f"data:image/png;base64,{USER_IMAGE}"}
    result = agent.send([{"type": "text", "text": "Compare with this:"}, image])
    assert result.text == "A bar chart."
    first, second = server.requests
    assert images_sent(protocol, first) == [USER_IMAGE]
    assert images_sent(protocol, second) == [USER_IMAGE, TOOL_IMAGE]
    assert "the chart" in json.dumps(second)
    assert agent.history[2]["content"][0]["output"]["type"] == "content"
