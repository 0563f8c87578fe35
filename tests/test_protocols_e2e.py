"""The loop end to end on every protocol: chat, responses, anthropic and gemini.

    def test_x(protocol, server, make_agent):
        server.add("Hello!")
        agent = make_agent(server, protocol=protocol)

Every test runs once per protocol (and per stream mode where that is cheap) against the
scripted model server, which answers the same neutral script in each vendor's wire format.
Tests assert protocol-neutral things — SendResult, history, callbacks, request counts — and
read request bodies only through the small wire readers below, one per question.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentcore import Agent, AgentError, ToolContext, output, tool
from agentcore.compact import SUMMARY_SYSTEM
from agentcore.config import NO_TOOL_PROMPT
from agentcore.context import SUMMARY_INTRO
from agentcore.protocols.base import CONTINUE_TEXT
from agentcore.protocols.gemini import SKIP_SIGNATURE
from agentcore.testing import ModelServer, Recorded, encoders
from agentcore.testing.encoders import anthropic as anthropic_wire
from agentcore.testing.encoders import gemini as gemini_wire
from agentcore.testing.encoders import responses as responses_wire
from agentcore.testing.script import build as build_reply

pytestmark = pytest.mark.usefixtures("no_thread_leak")
MakeAgent = Callable[..., Agent]
Body = dict[str, Any]

PROTOCOLS = ("chat", "responses", "anthropic", "gemini")
USER_IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAE="
TOOL_IMAGE = "R0lGODlhAQABAIAAAP///wAAACw="
CALL_TEXT = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'


# ---------------------------------------------------------------- wire readers


def _texts(content: Any) -> str:
    """The text of wire content: a str, or the `text` of its parts (thought parts left out)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(
        str(p["text"]) for p in content if isinstance(p, dict) and "text" in p and not p.get("thought")
    )


def _walk(value: Any) -> Iterator[dict[str, Any]]:
    """Every dict nested in a request body."""
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def system_text(protocol: str, body: Body) -> str:
    """The system prompt a request carried, whatever the protocol calls it."""
    if protocol == "chat":
        return "".join(_texts(m["content"]) for m in body["messages"] if m["role"] == "system")
    if protocol == "responses":
        return str(body.get("instructions") or "")
    if protocol == "anthropic":
        return _texts(body.get("system") or "")
    return _texts((body.get("systemInstruction") or {}).get("parts") or [])


def tool_names(protocol: str, body: Body) -> list[str]:
    """Names of the tools a request declared."""
    tools = body.get("tools") or []
    if protocol == "chat":
        return [t["function"]["name"] for t in tools]
    if protocol == "gemini":
        return [d["name"] for t in tools for d in t.get("functionDeclarations", [])]
    return [t["name"] for t in tools]


def wire_messages(protocol: str, body: Body) -> list[tuple[str, str]]:
    """The conversation a request carried as (role, text): roles user / assistant / tool.

    Function calls count as assistant entries and function results as tool entries (Anthropic
    and Gemini carry results inside a user turn: that turn reads as "tool").
    """
    if protocol == "chat":
        return [(m["role"], _texts(m.get("content"))) for m in body["messages"] if m["role"] != "system"]
    if protocol == "responses":
        entries = []
        for item in body["input"]:
            kind = item.get("type", "message")
            if "role" in item and kind == "message":
                entries.append((str(item["role"]), _texts(item.get("content"))))
            elif kind == "function_call":
                entries.append(("assistant", ""))
            elif kind == "function_call_output":
                entries.append(("tool", _texts(item["output"])))
        return entries
    if protocol == "anthropic":
        entries = []
        for message in body["messages"]:
            blocks = message["content"] if isinstance(message["content"], list) else []
            results = any(b.get("type") == "tool_result" for b in blocks)
            role = "tool" if results else str(message["role"])
            entries.append((role, _texts(message["content"])))
        return entries
    entries = []
    for content in body["contents"]:
        parts = content.get("parts") or []
        results = any("functionResponse" in p for p in parts)
        role = "tool" if results else "assistant" if content["role"] == "model" else "user"
        entries.append((role, _texts(parts)))
    return entries


def tool_results_sent(protocol: str, body: Body) -> list[tuple[str, str, bool | None]]:
    """The tool results a request carried back, in order: (call id, text, is_error or None).

    Chat and Responses have no error flag (None); Anthropic sends `is_error`, Gemini an
    `error` response.
    """
    if protocol == "chat":
        return [
            (m["tool_call_id"], _texts(m["content"]), None) for m in body["messages"] if m["role"] == "tool"
        ]
    if protocol == "responses":
        return [
            (i["call_id"], _texts(i["output"]), None)
            for i in body["input"]
            if i.get("type") == "function_call_output"
        ]
    if protocol == "anthropic":
        return [
            (b["tool_use_id"], _texts(b["content"]), bool(b.get("is_error")))
            for m in body["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]
    found: list[tuple[str, str, bool | None]] = []
    for content in body["contents"]:
        for part in content.get("parts") or []:
            response = part.get("functionResponse")
            if response is not None:
                value = response["response"].get("error", response["response"].get("output"))
                text = value if isinstance(value, str) else json.dumps(value)
                found.append((str(response.get("id", "")), text, "error" in response["response"]))
    return found


def tool_calls_sent(protocol: str, body: Body) -> list[tuple[str, str]]:
    """The tool calls a request carried back, in order: (call id, name)."""
    if protocol == "chat":
        return [(c["id"], c["function"]["name"]) for m in body["messages"] for c in m.get("tool_calls") or []]
    if protocol == "responses":
        return [(i["call_id"], i["name"]) for i in body["input"] if i.get("type") == "function_call"]
    if protocol == "anthropic":
        return [(d["id"], d["name"]) for d in _walk(body["messages"]) if d.get("type") == "tool_use"]
    return [
        (str(p["functionCall"].get("id", "")), p["functionCall"]["name"])
        for c in body["contents"]
        for p in c.get("parts") or []
        if "functionCall" in p
    ]


def opaque_state(protocol: str, body: Body) -> list[str]:
    """Vendor state sent back: Responses `encrypted_content`, Anthropic thinking `signature` and
    redacted `data`, Gemini `thoughtSignature` (chat has none)."""
    found: list[str] = []
    if protocol == "responses":
        found = [d["encrypted_content"] for d in _walk(body["input"]) if d.get("type") == "reasoning"]
    elif protocol == "anthropic":
        for block in _walk(body["messages"]):
            if block.get("type") == "thinking":
                found.append(block["signature"])
            elif block.get("type") == "redacted_thinking":
                found.append(block["data"])
    elif protocol == "gemini":
        found = [d["thoughtSignature"] for d in _walk(body["contents"]) if "thoughtSignature" in d]
    return found


def images_sent(protocol: str, body: Body) -> list[str]:
    """Base64 image data a request carried, read from the protocol's own media form."""
    found: list[str] = []
    for d in _walk(body):
        if protocol == "chat" and d.get("type") == "image_url":
            found.append(d["image_url"]["url"].partition(";base64,")[2])
        elif protocol == "responses" and d.get("type") == "input_image":
            found.append(d["image_url"].partition(";base64,")[2])
        elif protocol == "anthropic" and d.get("type") == "image" and d["source"]["type"] == "base64":
            found.append(d["source"]["data"])
        elif protocol == "gemini" and "inlineData" in d and d["inlineData"]["mimeType"].startswith("image/"):
            found.append(d["inlineData"]["data"])
    return found


def native_output_schema(protocol: str, body: Body) -> dict[str, Any] | None:
    """The schema of the protocol's native structured-output field, or None when not sent."""
    if protocol == "chat":
        fmt = body.get("response_format") or {}
        return fmt.get("json_schema", {}).get("schema") if fmt.get("type") == "json_schema" else None
    if protocol == "responses":
        fmt = (body.get("text") or {}).get("format") or {}
        return fmt.get("schema") if fmt.get("type") == "json_schema" else None
    if protocol == "anthropic":
        forced = [t for t in body.get("tools") or [] if t["name"] == "output"]
        return forced[0]["input_schema"] if forced and "tool_choice" in body else None
    config = body.get("generationConfig") or {}
    return config.get("responseJsonSchema") if config.get("responseMimeType") == "application/json" else None


def is_compaction(protocol: str, body: Body) -> bool:
    return SUMMARY_SYSTEM in system_text(protocol, body)


# ---------------------------------------------------------------- script helpers


def call(name: str, arguments: Any = None, id: str | None = None) -> dict[str, Any]:
    """A scripted tool call."""
    item: dict[str, Any] = {"name": name, "arguments": {} if arguments is None else arguments}
    if id is not None:
        item["id"] = id
    return item


def object_reply(protocol: str, value: Any, *, native: bool = True) -> dict[str, Any]:
    """The model's final structured answer: Anthropic's native form is a call of the forced tool."""
    if protocol == "anthropic" and native:
        return {"tool_calls": [call("output", value)]}
    return {"text": json.dumps(value)}


def expected_state(protocol: str, reasoning: str, first_call: str) -> list[str]:
    """What the scripted server sends as opaque state for a reply with `reasoning` and
    `redacted_thinking="REDACTED"`, whose first call is `first_call`."""
    if protocol == "responses":
        return [responses_wire.fake_encrypted_content(reasoning)]
    if protocol == "anthropic":
        return [anthropic_wire.fake_signature(reasoning), "REDACTED"]
    if protocol == "gemini":
        return [gemini_wire.fake_signature(first_call)]
    return []


def assert_history_valid(history: list[dict[str, Any]]) -> None:
    """Every call answered exactly once, after it; stamped entries; output blocks well formed."""
    calls: list[str] = []
    answered: list[str] = []
    for message in history:
        assert message["role"] in ("user", "assistant", "tool", "compact")
        assert isinstance(message.get("id"), str) and isinstance(message.get("created_at"), float)
        parts = message["content"] if isinstance(message["content"], list) else []
        for part in parts:
            if part.get("type") == "tool-call":
                assert isinstance(part["input"], dict)
                calls.append(part["tool_call_id"])
            elif part.get("type") == "tool-result":
                assert part["tool_call_id"] in calls and part["tool_call_id"] not in answered
                answered.append(part["tool_call_id"])
    assert sorted(calls) == sorted(answered), f"unanswered calls: {set(calls) - set(answered)}"
    assert len(set(calls)) == len(calls), "duplicate call ids"


def parts_of(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [p for p in message["content"] if p.get("type") == kind]


# ---------------------------------------------------------------- tools


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def wait_echo(text: str, seconds: float) -> str:
    """Wait, then return the text (so parallel calls finish out of call order)."""
    time.sleep(seconds)
    return text


@tool
def explode() -> str:
    """Always fails."""
    raise RuntimeError("the disk is on fire")


@tool
def finish(summary: str) -> dict[str, Any]:
    """End the task."""
    return {"stop": True, "output": f"done: {summary}"}


@tool
def chart() -> dict[str, Any]:
    """Draw a chart and return it as an image."""
    image = {"type": "image", "image": f"data:image/gif;base64,{TOOL_IMAGE}", "media_type": "image/gif"}
    return {"output": {"type": "content", "value": [{"type": "text", "text": "the chart"}, image]}}


@tool
def sleepy(ctx: ToolContext) -> str:
    """Wait until cancelled."""
    ctx.cancel.wait(60)
    return "woke up"


class Invoice:
    """A stand-in for a pydantic model: `model_json_schema()` and `model_validate()`."""

    def __init__(self, number: str, total: float) -> None:
        self.number, self.total = number, total

    @classmethod
    def model_json_schema(cls) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"number": {"type": "string"}, "total": {"type": "number"}},
            "required": ["number", "total"],
        }

    @classmethod
    def model_validate(cls, data: Any) -> Invoice:
        return cls(data["number"], float(data["total"]))


TOTAL_SCHEMA = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}


# ---------------------------------------------------------------- fixtures


@pytest.fixture(params=PROTOCOLS)
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=[True, False], ids=["stream", "whole"])
def stream(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


# ---------------------------------------------------------------- plain replies


def test_plain_reply_finishes_and_sums_usage(
    protocol: str, stream: bool, server: ModelServer, make_agent: MakeAgent
) -> None:
    usage = {"input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 30}
    server.add({"text": "Hello there.", "usage": usage})
    agent = make_agent(server, protocol=protocol, stream=stream, system="Be brief.")
    result = agent.send("hi")
    assert (result.reason, result.text, result.steps) == ("finished", "Hello there.", 1)
    assert len(server.requests) == 1
    assert system_text(protocol, server.requests[0]) == "Be brief."
    assert wire_messages(protocol, server.requests[0]) == [("user", "hi")]
    u = result.usage
    assert (u.input_tokens, u.output_tokens, u.total_tokens, u.cache_read_tokens) == (100, 20, 120, 30)
    assert [m["role"] for m in agent.history] == ["user", "assistant"]
    assert result.messages == agent.history


def test_usage_is_summed_over_every_round(
    protocol: str, stream: bool, server: ModelServer, make_agent: MakeAgent
) -> None:
    usage = {"input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 30}
    server.add({"tool_calls": [call("add", {"a": 1, "b": 2})], "usage": usage}, {"text": "3", "usage": usage})
    agent = make_agent(server, protocol=protocol, stream=stream, tools=[add], no_tool_rounds=1)
    result = agent.send("1+2?")
    u = result.usage
    assert (u.input_tokens, u.output_tokens, u.total_tokens, u.cache_read_tokens) == (200, 40, 240, 60)
    assert agent.history[1]["usage"]["input_tokens"] == 100


def test_reasoning_is_kept_in_history_as_a_reasoning_part(
    protocol: str, stream: bool, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add({"reasoning": "The user greets me.", "text": "Hello!"})
    agent = make_agent(server, protocol=protocol, stream=stream)
    result = agent.send("hi")
    assert result.text == "Hello!"
    assistant = agent.history[-1]
    assert [p["text"] for p in parts_of(assistant, "reasoning")] == ["The user greets me."]
    assert [p["text"] for p in parts_of(assistant, "text")] == ["Hello!"]


# ---------------------------------------------------------------- tool rounds


def test_tool_round_trip(protocol: str, stream: bool, server: ModelServer, make_agent: MakeAgent) -> None:
    results: list[dict[str, Any]] = []
    server.add({"text": "Adding.", "tool_calls": [call("add", {"a": 2, "b": 3})]}, "It is 5.")
    agent = make_agent(
        server,
        protocol=protocol,
        stream=stream,
        tools=[add],
        no_tool_rounds=1,
        callbacks={"on_tool_result": results.append},
    )
    result = agent.send("2+3?")
    assert (result.reason, result.text, result.steps) == ("no-tool", "It is 5.", 2)
    first, second = server.requests
    assert tool_names(protocol, first) == ["add"]
    assert [m["role"] for m in agent.history] == ["user", "assistant", "tool", "assistant"]
    [call_part] = parts_of(agent.history[1], "tool-call")
    assert (call_part["tool_name"], call_part["input"]) == ("add", {"a": 2, "b": 3})
    [result_part] = agent.history[2]["content"]
    assert result_part["tool_call_id"] == call_part["tool_call_id"]
    assert result_part["output"] == {"type": "json", "value": 5}
    # The call and its result travel back under the same id, the result last.
    assert tool_calls_sent(protocol, second) == [(call_part["tool_call_id"], "add")]
    assert [r[:2] for r in tool_results_sent(protocol, second)] == [(call_part["tool_call_id"], "5")]
    assert wire_messages(protocol, second)[-1][0] == "tool"
    assert [(r["tool_name"], r["output"]) for r in results] == [("add", {"type": "json", "value": 5})]
    assert_history_valid(agent.history)


def test_parallel_calls_come_back_in_call_order(
    protocol: str, stream: bool, server: ModelServer, make_agent: MakeAgent
) -> None:
    results: list[dict[str, Any]] = []
    calls = [
        call("wait_echo", {"text": "slow", "seconds": 0.15}),
        call("wait_echo", {"text": "fast", "seconds": 0}),
        call("add", {"a": 1, "b": 1}),
    ]
    server.add({"tool_calls": calls}, "all done")
    agent = make_agent(
        server,
        protocol=protocol,
        stream=stream,
        tools=[add, wait_echo],
        no_tool_rounds=1,
        callbacks={"on_tool_result": results.append},
    )
    agent.send("go")
    ids = [p["tool_call_id"] for p in parts_of(agent.history[1], "tool-call")]
    assert len(set(ids)) == 3
    tool_message = agent.history[2]
    assert [p["tool_call_id"] for p in tool_message["content"]] == ids
    assert [p["output"]["value"] for p in tool_message["content"]] == ["slow", "fast", 2]
    sent = tool_results_sent(protocol, server.requests[1])
    assert [(i, text) for i, text, _ in sent] == list(zip(ids, ["slow", "fast", "2"], strict=True))
    assert sorted(r["tool_call_id"] for r in results) == sorted(ids)
    assert_history_valid(agent.history)


def test_a_failing_tool_gives_an_error_result_the_model_reads(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    results: list[dict[str, Any]] = []
    server.add({"tool_calls": [call("explode")]}, "Sorry.")
    agent = make_agent(
        server,
        protocol=protocol,
        tools=[explode],
        no_tool_rounds=1,
        callbacks={"on_tool_result": results.append},
    )
    result = agent.send("go")
    assert result.text == "Sorry."
    output_block = agent.history[2]["content"][0]["output"]
    assert output_block["type"] == "error-text" and "the disk is on fire" in output_block["value"]
    [(_, text, is_error)] = tool_results_sent(protocol, server.requests[1])
    assert "the disk is on fire" in text
    assert is_error is {"chat": None, "responses": None, "anthropic": True, "gemini": True}[protocol]
    assert results[0]["output"] == output_block


def test_unknown_tool_gets_an_invalid_call_result(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    results: list[dict[str, Any]] = []
    server.add({"tool_calls": [call("nope", {"x": 1})]}, "ok")
    agent = make_agent(
        server, protocol=protocol, tools=[add], no_tool_rounds=1, callbacks={"on_tool_result": results.append}
    )
    agent.send("go")
    output_block = agent.history[2]["content"][0]["output"]
    assert output_block["type"] == "error-text"
    assert "no tool with this name" in output_block["value"] and "add" in output_block["value"]
    assert "no tool with this name" in tool_results_sent(protocol, server.requests[1])[0][1]
    assert [r["tool_name"] for r in results] == ["nope"]
    assert_history_valid(agent.history)


def test_unparsable_arguments_get_an_invalid_call_result_quoting_them(
    protocol: str, stream: bool, server: ModelServer, make_agent: MakeAgent
) -> None:
    if protocol == "gemini":
        pytest.skip("not applicable: Gemini's functionCall.args is always a JSON object: no unparsable text")
    if protocol == "anthropic" and not stream:
        pytest.skip(
            "not applicable: a whole Anthropic tool_use carries `input` as an object (streams carry text)"
        )
    results: list[dict[str, Any]] = []
    server.add({"tool_calls": [call("add", '{"a": 1, "b": ')]}, "ok")
    agent = make_agent(
        server,
        protocol=protocol,
        stream=stream,
        tools=[add],
        no_tool_rounds=1,
        callbacks={"on_tool_result": results.append},
    )
    agent.send("go")
    [call_part] = parts_of(agent.history[1], "tool-call")
    assert call_part["input"] == {}
    output_block = agent.history[2]["content"][0]["output"]
    assert output_block["type"] == "error-text" and '{"a": 1, "b": ' in output_block["value"]
    assert '{"a": 1, "b": ' in tool_results_sent(protocol, server.requests[1])[0][1]
    assert results[0]["output"] == output_block


def test_schema_invalid_arguments_name_the_path_and_the_tool_does_not_run(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    ran: list[str] = []

    def record(input: dict[str, Any]) -> str:
        ran.append("ran")
        return "ran"

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    counter = {"name": "count", "description": "Count.", "input_schema": schema, "execute": record}
    results: list[dict[str, Any]] = []
    server.add({"tool_calls": [call("count", {"n": "seven"})]}, "ok")
    agent = make_agent(
        server,
        protocol=protocol,
        tools=[counter],
        no_tool_rounds=1,
        callbacks={"on_tool_result": results.append},
    )
    agent.send("go")
    output_block = agent.history[2]["content"][0]["output"]
    assert output_block["type"] == "error-text" and "input.n" in output_block["value"]
    assert "input.n" in tool_results_sent(protocol, server.requests[1])[0][1]
    assert ran == []
    assert results[0]["input"] == {"n": "seven"}


# ---------------------------------------------------------------- reasons


def test_no_tool_reminder_rides_once_on_the_last_allowed_round_and_never_in_history(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add("one", "two", "three", "never asked")
    agent = make_agent(server, protocol=protocol, tools=[add])
    result = agent.send("hi")
    assert (result.reason, result.text, result.steps) == ("no-tool", "three", 3)
    assert len(server.requests) == 3
    trailing = [wire_messages(protocol, r)[-1] for r in server.requests]
    assert (trailing[0], trailing[2]) == (("user", "hi"), ("user", NO_TOOL_PROMPT))
    reminded = [sum(1 for m in wire_messages(protocol, r) if m[1] == NO_TOOL_PROMPT) for r in server.requests]
    assert reminded == [0, 0, 1]
    assert all(NO_TOOL_PROMPT not in json.dumps(m) for m in agent.history)


def test_requests_end_on_a_user_turn_where_the_vendor_rejects_a_final_assistant_turn(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    """Round 2 of a no-tool run and a resume after a text reply end on an assistant turn:
    Anthropic took that as a prefill (rejected by current models), Gemini refused it."""
    server.add("one", "two", "three", "resumed")
    agent = make_agent(server, protocol=protocol, tools=[add])
    agent.send("hi")
    agent.resume(config={"no_tool_rounds": 1})
    assert len(server.requests) == 4
    needs_user_turn = protocol in ("anthropic", "gemini")
    for body in (server.requests[1], server.requests[3]):
        role, text = wire_messages(protocol, body)[-1]
        assert (role, text) == (("user", CONTINUE_TEXT) if needs_user_turn else ("assistant", text))
        assert [m for m in wire_messages(protocol, body) if m[1] == CONTINUE_TEXT] == (
            [("user", CONTINUE_TEXT)] if needs_user_turn else []
        )
    assert all(CONTINUE_TEXT not in json.dumps(m) for m in agent.history)


def test_a_send_after_a_step_limit_carries_the_results_then_the_new_input(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add({"tool_calls": [call("add", {"a": 1, "b": 2})]}, "It was 3.")
    agent = make_agent(server, protocol=protocol, tools=[add], max_steps=1, no_tool_rounds=1)
    assert agent.send("1+2?").reason == "step-limit"
    agent.send("and then?")
    body = server.requests[1]
    [call_id] = [p["tool_call_id"] for p in parts_of(agent.history[1], "tool-call")]
    assert [r[:2] for r in tool_results_sent(protocol, body)] == [(call_id, "3")]
    assert wire_messages(protocol, body)[-1][1] == "and then?"
    if protocol == "anthropic":
        # One user turn: the tool_result first, then the new text (Anthropic demands alternation).
        last = body["messages"][-1]
        assert [b["type"] for b in last["content"]] == ["tool_result", "text"]
        roles = [m["role"] for m in body["messages"]]
        assert all(a != b for a, b in itertools.pairwise(roles))


def test_tool_stop_ends_the_run(protocol: str, server: ModelServer, make_agent: MakeAgent) -> None:
    server.add({"tool_calls": [call("finish", {"summary": "all good"})]}, "never asked")
    agent = make_agent(server, protocol=protocol, tools=[finish])
    result = agent.send("go")
    assert (result.reason, result.steps) == ("tool-stop", 1)
    assert len(server.requests) == 1
    assert agent.history[-1]["content"][0]["output"] == {"type": "text", "value": "done: all good"}


def test_step_limit_keeps_the_last_rounds_results(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    for n in range(3):
        server.add({"tool_calls": [call("add", {"a": n, "b": 1})]})
    agent = make_agent(server, protocol=protocol, tools=[add], max_steps=2)
    result = agent.send("go")
    assert (result.reason, result.steps) == ("step-limit", 2)
    assert len(server.requests) == 2
    assert [m["role"] for m in agent.history] == ["user", "assistant", "tool", "assistant", "tool"]
    assert agent.history[-1]["content"][0]["output"] == {"type": "json", "value": 2}
    assert_history_valid(agent.history)


# ---------------------------------------------------------------- reasoning and provider state


def test_provider_state_goes_back_to_the_same_protocol(
    protocol: str, stream: bool, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(
        {
            "reasoning": "I need to add.",
            "redacted_thinking": "REDACTED",
            "tool_calls": [call("add", {"a": 1, "b": 2})],
        },
        "It is 3.",
    )
    agent = make_agent(server, protocol=protocol, stream=stream, tools=[add], no_tool_rounds=1)
    assert agent.send("1+2?").text == "It is 3."
    assert opaque_state(protocol, server.requests[0]) == []
    assert opaque_state(protocol, server.requests[1]) == expected_state(protocol, "I need to add.", "add")
    reasoning = parts_of(agent.history[1], "reasoning")
    assert reasoning[0]["text"] == "I need to add."
    assert all(p["provider_metadata"]["protocol"] == protocol for p in reasoning if "provider_metadata" in p)
    # Readable reasoning is not sent unless capabilities.reasoning asks for it; Anthropic's
    # signed thinking block is the exception: it must travel intact, text included.
    assert ("I need to add." in json.dumps(server.requests[1])) is (protocol == "anthropic")


def test_provider_state_of_a_text_reply_goes_back_on_the_next_send(
    protocol: str, stream: bool, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add({"reasoning": "Just greet.", "text": "Hello!"}, "Bye!")
    agent = make_agent(server, protocol=protocol, stream=stream)
    agent.send("hi")
    agent.send("bye")
    expected = {
        "chat": [],
        "responses": [responses_wire.fake_encrypted_content("Just greet.")],
        "anthropic": [anthropic_wire.fake_signature("Just greet.")],
        # Without calls, Gemini signs the first text part of the reply.
        "gemini": [gemini_wire.fake_signature("")],
    }[protocol]
    assert opaque_state(protocol, server.requests[1]) == expected
    assert ("assistant", "Hello!") in wire_messages(protocol, server.requests[1])


def test_switching_protocol_drops_the_other_vendors_state(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    other = PROTOCOLS[(PROTOCOLS.index(protocol) + 1) % len(PROTOCOLS)]
    server.add(
        {
            "reasoning": "Plan A.",
            "redacted_thinking": "REDACTED",
            "tool_calls": [call("add", {"a": 1, "b": 2})],
        },
        "It is 3.",
        {"tool_calls": [call("add", {"a": 3, "b": 4})]},
        "It is 7.",
    )
    agent = make_agent(server, protocol=protocol, tools=[add], no_tool_rounds=1)
    agent.send("1+2?")
    state = expected_state(protocol, "Plan A.", "add")
    result = agent.send("3+4?", config={"protocol": other})
    assert (result.reason, result.text) == ("no-tool", "It is 7.")
    first_other = server.requests[2]
    assert [s for s in opaque_state(other, first_other) if s != SKIP_SIGNATURE] == []
    assert all(s not in json.dumps(first_other) for s in state)
    # The earlier round still travels: its call and result, under the same ids.
    earlier = [p["tool_call_id"] for p in parts_of(agent.history[1], "tool-call")]
    assert [i for i, _ in tool_calls_sent(other, first_other)] == earlier
    # History is untouched: the first vendor's state is still there for a switch back.
    assert parts_of(agent.history[1], "reasoning")[0]["text"] == "Plan A."
    assert_history_valid(agent.history)


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
