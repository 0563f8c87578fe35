"""The demo model: what `python -m agentcore.testing` and `agentcore chat --demo` talk to.

    ModelServer(default=demo.reply)         # every request answered by the demo model

It reads the request in whichever of the four protocols it came, and answers like a small
agent would: a message gets a call of the tool that the request declares (the one named in the
message, else the first), with arguments made from the tool's schema; the tool's result gets a
streamed sentence quoting it; a message asking for a story (or anything long or slow) gets a
long, slow reply to try Ctrl-C on. Without tools it answers in words; asked to go on, it says its
last answer again; asked for a summary (compaction), it writes one. No key, no network.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from . import encoders
from .script import Recorded

STORY = (
    "Once upon a time, a small agent lived in a terminal. Every morning it read the history, "
    "every word of it, from the first user message to the last tool result, and it never "
    "changed a line: history only grows. One day the user asked for a long story. The agent "
    "began to stream it, piece by piece, so the user could read while it wrote. Halfway "
    "through, the user pressed Ctrl-C. The agent stopped at once, kept the words it had "
    "already written, and waited for the next message. The end."
)
STREAM = {"chunk_size": 4, "chunk_delay": 0.02}
SLOW_STREAM = {"chunk_size": 3, "chunk_delay": 0.06}
_SLOW_WORDS = ("story", "long", "slow")
_QUOTED = re.compile(r"'([^']+)'|\"([^\"]+)\"|“([^”]+)”")

Message = dict[str, Any]  # {"role": "user" | "assistant" | "tool", "text": str, "tool"?: name}


def reply(recorded: Recorded) -> dict[str, Any]:
    """The demo model's answer to one request (a ModelServer script item)."""
    protocol = encoders.protocol_for(recorded.path) or "chat"
    body = recorded.body if isinstance(recorded.body, Mapping) else {}
    tools = _TOOLS[protocol](body)
    messages = _MESSAGES[protocol](body)
    last = messages[-1] if messages else {"role": "user", "text": ""}
    if last["role"] == "tool":
        return {"text": f"{last.get('tool', 'The tool')} returned {last['text']}.", **STREAM}
    if _is_summary_request(last) and not tools:
        return {"text": "Summary: the user talked with the agentcore demo model.", **STREAM}
    if last["role"] != "user" or _is_reminder(last):
        # Asked to go on (a run that keeps going until the model stops calling tools): the
        # answer stays what it was.
        return {"text": _last_answer(messages), **STREAM}
    text = last["text"]
    if any(word in text.lower() for word in _SLOW_WORDS):
        return {"text": STORY, **SLOW_STREAM}
    if not tools:
        return {"text": f"(demo model) You said: {text}", **STREAM}
    name, schema = _pick(tools, text)
    return {
        "text": f"Let me use {name}.",
        "tool_calls": [{"name": name, "arguments": arguments(schema, text)}],
    }


def arguments(schema: Mapping[str, Any], text: str) -> dict[str, Any]:
    """Arguments for a tool's input schema, made from the user's message: its required properties
    (every property when none is required), each a value of its type. A string is the quoted
    part of the message when it has one ("count the words of 'to be or not to be'")."""
    quoted = _QUOTED.search(text)
    text = next(group for group in quoted.groups() if group is not None) if quoted else text
    properties = schema.get("properties") if isinstance(schema.get("properties"), Mapping) else {}
    assert isinstance(properties, Mapping)
    required = [name for name in schema.get("required") or [] if name in properties]
    return {name: _value(properties[name], text) for name in required or list(properties)}


def _value(prop: Any, text: str) -> Any:
    prop = prop if isinstance(prop, Mapping) else {}
    if isinstance(prop.get("enum"), list) and prop["enum"]:
        return prop["enum"][0]
    kind = prop.get("type")
    kind = str(kind[0] if isinstance(kind, list) and kind else kind or "string").lower()
    if kind == "integer":
        return len(text.split())
    if kind == "number":
        return float(len(text.split()))
    if kind == "boolean":
        return True
    if kind == "array":
        return [_value(prop.get("items"), text)]
    if kind == "object":
        return arguments(prop, text)
    if kind == "null":
        return None
    return text


def _pick(tools: list[tuple[str, dict[str, Any]]], text: str) -> tuple[str, dict[str, Any]]:
    lowered = text.lower()
    for name, schema in tools:
        if name.lower() in lowered:
            return name, schema
    return tools[0]


def _is_reminder(message: Message) -> bool:
    from ..config import NO_TOOL_PROMPT  # loaded only when a demo reply is built

    return str(message["text"]).strip() == NO_TOOL_PROMPT


def _is_summary_request(message: Message) -> bool:
    from ..compact import SUMMARY_INSTRUCTION

    return SUMMARY_INSTRUCTION.splitlines()[0] in str(message["text"])


def _last_answer(messages: list[Message]) -> str:
    for message in reversed(messages):
        if message["role"] == "assistant" and message["text"]:
            return str(message["text"])
    return "Done."


# ---------------------------------------------------------------- the four wire forms


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = [str(p.get("text", "")) for p in content if isinstance(p, Mapping) and "text" in p]
        return " ".join(pieces)
    return ""


def _schema(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _dumped(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _chat_tools(body: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    functions = [t.get("function") or {} for t in body.get("tools") or [] if isinstance(t, Mapping)]
    return [(str(f["name"]), _schema(f.get("parameters"))) for f in functions if f.get("name")]


def _chat_messages(body: Mapping[str, Any]) -> list[Message]:
    names: dict[str, str] = {}
    out: list[Message] = []
    for m in body.get("messages") or []:
        role = m.get("role")
        for call in m.get("tool_calls") or []:
            names[str(call.get("id"))] = str((call.get("function") or {}).get("name"))
        if role == "tool":
            out.append(
                {
                    "role": "tool",
                    "text": _text_of(m.get("content")),
                    "tool": names.get(str(m.get("tool_call_id"))),
                }
            )
        elif role in ("user", "assistant"):
            out.append({"role": role, "text": _text_of(m.get("content"))})
    return out


def _responses_tools(body: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    tools = [t for t in body.get("tools") or [] if isinstance(t, Mapping) and t.get("name")]
    return [(str(t["name"]), _schema(t.get("parameters"))) for t in tools]


def _responses_messages(body: Mapping[str, Any]) -> list[Message]:
    items = body.get("input")
    if isinstance(items, str):
        return [{"role": "user", "text": items}]
    names: dict[str, str] = {}
    out: list[Message] = []
    for item in items or []:
        kind = item.get("type")
        if kind == "function_call":
            names[str(item.get("call_id"))] = str(item.get("name"))
        elif kind == "function_call_output":
            output = _dumped(item.get("output"))
            out.append({"role": "tool", "text": output, "tool": names.get(str(item.get("call_id")))})
        elif item.get("role") in ("user", "assistant"):
            out.append({"role": item["role"], "text": _text_of(item.get("content"))})
    return out


def _anthropic_tools(body: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    tools = [t for t in body.get("tools") or [] if isinstance(t, Mapping) and t.get("name")]
    return [(str(t["name"]), _schema(t.get("input_schema"))) for t in tools]


def _anthropic_messages(body: Mapping[str, Any]) -> list[Message]:
    names: dict[str, str] = {}
    out: list[Message] = []
    for m in body.get("messages") or []:
        content = m.get("content")
        blocks = content if isinstance(content, list) else []
        for block in blocks:
            if block.get("type") == "tool_use":
                names[str(block.get("id"))] = str(block.get("name"))
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if results:
            last = results[-1]
            text = _text_of(last.get("content"))
            out.append({"role": "tool", "text": text, "tool": names.get(str(last.get("tool_use_id")))})
        elif m.get("role") in ("user", "assistant"):
            out.append({"role": m["role"], "text": _text_of(content)})
    return out


def _gemini_tools(body: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for group in body.get("tools") or []:
        for f in group.get("functionDeclarations") or [] if isinstance(group, Mapping) else []:
            schema = f.get("parametersJsonSchema") or f.get("parameters")
            if f.get("name"):
                found.append((str(f["name"]), _schema(schema)))
    return found


def _gemini_messages(body: Mapping[str, Any]) -> list[Message]:
    out: list[Message] = []
    for content in body.get("contents") or []:
        parts = [p for p in content.get("parts") or [] if isinstance(p, Mapping)]
        responses = [p["functionResponse"] for p in parts if isinstance(p.get("functionResponse"), Mapping)]
        if responses:
            response = responses[-1].get("response") or {}
            value = (
                response.get("output", response.get("error", response))
                if isinstance(response, Mapping)
                else response
            )
            out.append({"role": "tool", "text": _dumped(value), "tool": responses[-1].get("name")})
            continue
        role = "assistant" if content.get("role") == "model" else "user"
        out.append({"role": role, "text": " ".join(str(p["text"]) for p in parts if "text" in p)})
    return out


_TOOLS = {
    "chat": _chat_tools,
    "responses": _responses_tools,
    "anthropic": _anthropic_tools,
    "gemini": _gemini_tools,
}
_MESSAGES = {
    "chat": _chat_messages,
    "responses": _responses_messages,
    "anthropic": _anthropic_messages,
    "gemini": _gemini_messages,
}
