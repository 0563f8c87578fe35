"""The text protocol written for the model: the spec and its manual, and history as text messages.

    spec = prepare(toolset.schema)          # the tools and the manual that explains the protocol
    messages = wrap(messages, spec)         # manual on the system side, calls and results as text

A call is `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`; results go back as
`<tool_result name="...">...</tool_result>` in a user message. History itself keeps the standard
tool-call parts and tool messages: this is only how they travel.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..protocols.base import is_error_output, output_value_text


@dataclass(frozen=True, slots=True)
class TextToolSpec:
    """The tools a model may call through text, and the manual that explains how.

    `tools` maps each name to `{"name", "description", "input_schema"}`. `manual` is the text
    appended to the system prompt ("" when there are no tools, so nothing is injected).
    """

    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    manual: str = ""


_MANUAL_HEAD = """\
# Tools

You can use the tools listed below. To call one, write a block like this:

<tool_call>
{"name": "tool_name", "arguments": {"parameter": "value"}}
</tool_call>

- "arguments" is a JSON object that follows the tool's input schema.
- To call several tools, write one <tool_call> block per call.
- After your calls, stop and wait: the results come back in the next user message as \
<tool_result name="tool_name">...</tool_result> blocks. Never write <tool_result> yourself.
- When you need no tool, answer normally, without <tool_call> blocks.

Available tools:"""


def prepare(schema: Any) -> TextToolSpec:
    """Build the spec (tools and manual) from a ToolSet's schema.

    Args:
        schema: A `ToolSet.schema` mapping (name -> tool dict), a list of tool dicts
            (`{"name", "description", "input_schema"}`), or a ToolSet itself.

    Returns:
        A `TextToolSpec`; its `manual` is "" when there are no tools.
    """
    schema = getattr(schema, "schema", schema)
    entries: Iterable[Any] = schema.items() if isinstance(schema, Mapping) else ((None, t) for t in schema)
    tools: dict[str, dict[str, Any]] = {}
    for key, tool in entries:
        name = str(tool.get("name") or key or "")
        if not name:
            continue
        input_schema = tool.get("input_schema") or {"type": "object", "properties": {}}
        tools[name] = {
            "name": name,
            "description": str(tool.get("description") or ""),
            "input_schema": input_schema,
        }
    return TextToolSpec(tools=tools, manual=_manual(tools))


def _manual(tools: Mapping[str, dict[str, Any]]) -> str:
    if not tools:
        return ""
    lines = [_MANUAL_HEAD]
    for tool in tools.values():
        lines.append(f"\n## {tool['name']}")
        if tool["description"]:
            lines.append(tool["description"].strip())
        lines.append("Input schema: " + json.dumps(tool["input_schema"], ensure_ascii=False))
    return "\n".join(lines)


def wrap(messages: list[dict[str, Any]], spec: TextToolSpec) -> list[dict[str, Any]]:
    """Messages ready for a model without native tools.

    The manual is appended to a leading `{"role": "system"}` message (one is inserted when
    there is none); tool calls and results are rewritten as text (see `to_text_messages`).
    The input list and its messages are not modified.
    """
    out = to_text_messages(messages)
    if not spec.manual:
        return out
    if out and out[0].get("role") == "system":
        first = dict(out[0])
        content = first.get("content")
        if isinstance(content, list):
            first["content"] = [*content, {"type": "text", "text": "\n\n" + spec.manual}]
        else:
            first["content"] = wrap_system(str(content or ""), spec)
        return [first, *out[1:]]
    return [{"role": "system", "content": spec.manual}, *out]


def wrap_system(system: str, spec: TextToolSpec) -> str:
    """The system prompt with the manual appended (unchanged when the spec has no tools)."""
    if not spec.manual:
        return system
    return f"{system}\n\n{spec.manual}" if system else spec.manual


def to_text_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rewrite tool-call parts as `<tool_call>` text and tool messages as `<tool_result>` user text.

    Assistant messages keep their other parts in place (reasoning included); the calls follow
    their text. Each tool message becomes one user message; consecutive ones are merged.
    Other messages pass through unchanged.
    """
    out: list[dict[str, Any]] = []
    previous_was_results = False
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role == "assistant" and isinstance(content, list):
            out.append(_assistant_as_text(message, content))
        elif role == "tool" and isinstance(content, list):
            parts = _results_as_parts(content)
            if previous_was_results:
                out[-1] = {**out[-1], "content": _join_parts(out[-1]["content"], parts)}
            else:
                out.append({"role": "user", "content": parts})
            previous_was_results = True
            continue
        else:
            out.append(message)
        previous_was_results = False
    return out


def format_call(name: str, arguments: Mapping[str, Any]) -> str:
    """One call written the way the manual asks for it."""
    payload = json.dumps({"name": name, "arguments": dict(arguments)}, ensure_ascii=False)
    return f"<tool_call>\n{payload}\n</tool_call>"


def _assistant_as_text(message: dict[str, Any], content: list[Any]) -> dict[str, Any]:
    calls = [p for p in content if isinstance(p, dict) and p.get("type") == "tool-call"]
    if not calls:
        return message
    kept = [p for p in content if not (isinstance(p, dict) and p.get("type") == "tool-call")]
    written = "\n".join(format_call(str(p.get("tool_name", "")), p.get("input") or {}) for p in calls)
    last = kept[-1] if kept else None
    if isinstance(last, dict) and last.get("type") == "text" and str(last.get("text") or "").strip():
        kept[-1] = {**last, "text": str(last["text"]).rstrip() + "\n\n" + written}
    else:
        kept.append({"type": "text", "text": written})
    return {**message, "content": kept}


def _results_as_parts(results: list[Any]) -> list[dict[str, Any]]:
    """Tool results as user content parts: text inline, media as their own parts."""
    parts: list[dict[str, Any]] = []
    for result in results:
        if not isinstance(result, dict):
            continue
        output = result.get("output")
        if not isinstance(output, dict):
            output = {}
        name = html.escape(str(result.get("tool_name", "")), quote=True)
        error = ' error="true"' if is_error_output(output) else ""
        if parts:
            _add_text(parts, "\n")
        _add_text(parts, f'<tool_result name="{name}"{error}>\n')
        if output.get("type") == "content" and isinstance(output.get("value"), list):
            for item in output["value"]:
                if isinstance(item, dict) and item.get("type") == "text":
                    _add_text(parts, str(item.get("text", "")))
                elif isinstance(item, dict):
                    parts.append(item)
        else:
            _add_text(parts, output_value_text(output))
        _add_text(parts, "\n</tool_result>")
    return parts


def _add_text(parts: list[dict[str, Any]], text: str) -> None:
    if parts and parts[-1].get("type") == "text" and set(parts[-1]) == {"type", "text"}:
        parts[-1] = {"type": "text", "text": parts[-1]["text"] + text}
    else:
        parts.append({"type": "text", "text": text})


def _join_parts(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> list[dict[str, Any]]:
    joined = list(first)
    _add_text(joined, "\n")
    for part in second:
        if part.get("type") == "text":
            _add_text(joined, str(part.get("text", "")))
        else:
            joined.append(part)
    return joined
