"""What the end-to-end protocol tests share: wire readers (one per question), script helpers, tools."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from agentcore import Agent, ToolContext, tool
from agentcore.compact import SUMMARY_SYSTEM
from agentcore.testing.encoders import anthropic as anthropic_wire
from agentcore.testing.encoders import gemini as gemini_wire
from agentcore.testing.encoders import responses as responses_wire

MakeAgent = Callable[..., Agent]


Body = dict[str, Any]


USER_IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAE="


TOOL_IMAGE = "R0lGODlhAQABAIAAAP///wAAACw="


CALL_TEXT = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'


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
