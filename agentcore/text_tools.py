"""Tool calls written as plain text, for models (or servers) without native tools.

    spec = prepare(toolset.schema)                    # the tool manual
    messages = wrap(messages, spec)                   # manual on the system side, results as text
    reply = llm.chat(..., messages=messages)          # no `tools` field
    found = read(reply.text, spec)                    # found.tool_calls, found.invalid, found.text

A call is `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`; results go back as
`<tool_result name="...">...</tool_result>` in a user message. History always keeps the standard
tool-call parts and tool messages: this module only translates on the way in and out, so one
conversation can move between a text-only and a native-tools model.

`read` never raises and never lets a call through silently as text: every block it cannot
use becomes an `invalid` entry (raw text kept) for the loop to answer "please rewrite".
Every returned `tool_calls` entry names a tool of the spec.
"""

from __future__ import annotations

import ast
import hashlib
import html
import json
import math
import re
import threading
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from .protocols.base import ToolCall, is_error_output, output_value_text

# ---------------------------------------------------------------- spec and manual


@dataclass(frozen=True, slots=True)
class TextToolSpec:
    """The tools a model may call through text, and the manual that explains how.

    `tools` maps each name to `{"name", "description", "input_schema"}`. `manual` is the text
    appended to the system prompt ("" when there are no tools, so nothing is injected).
    """

    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    manual: str = ""


@dataclass(frozen=True, slots=True)
class TextToolRead:
    """What `read` found in one reply.

    `text` is the reply with the call markup removed (and cut where the model began to invent
    a `<tool_result>`). `tool_calls` are the usable calls in reply order. `invalid` are the
    blocks that could not be used: `raw_arguments` holds the block text, `name` the best guess
    (or ""). `reasons` maps an invalid call's id to a short explanation for the model.
    """

    text: str
    tool_calls: list[ToolCall]
    invalid: list[ToolCall]
    reasons: dict[str, str] = field(default_factory=dict)


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


# ---------------------------------------------------------------- history -> text messages


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


# ---------------------------------------------------------------- reading a reply

# Markup recognised around calls. Loose mode also takes `<tool-call>` / `<tool_calls>`.
_STRICT_OPEN = r"<tool_call>"
_LOOSE_OPEN = r"<tool[_-]?calls?(?=[\s>/])[^<>]*>"
_STRICT_CLOSE = re.compile(r"</tool_call>")
_LOOSE_CLOSE = re.compile(r"</tool[_-]?calls?\s*>", re.IGNORECASE)
# A model that writes its own result is inventing it; everything from there on is dropped.
_CUT = r"<tool[_-]?(?:results?|responses?|outputs?)(?![\w-])"
_FENCE_OPEN = re.compile(r"\s*```[\w+.-]*[ \t]*\n?")
_FENCE_TAIL = re.compile(r"```[\w+.-]*[ \t]*\n?\s*$")
_FENCE_HEAD = re.compile(r"^\s*```[ \t]*(?=\n|$)")
_NAME_IN_RAW = re.compile(r"""["']?(?:name|tool_name|tool|function)["']?\s*[:=]\s*["']([^"'\n]{1,200})["']""")
_NAME_ATTR = re.compile(r"""\bname\s*=\s*["']([^"']+)["']""")


@lru_cache(maxsize=64)
def _scanner(names: tuple[str, ...], loose: bool) -> re.Pattern[str]:
    """One pattern finding the next call opener, invented result, or (loose) XML-style call."""
    branches = [f"(?P<call>{_LOOSE_OPEN if loose else _STRICT_OPEN})", f"(?P<cut>{_CUT})"]
    if loose and names:
        alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
        branches.append(f"(?P<xml><(?P<tag>{alternatives})(?=[\\s>])[^<>]*>)")
    return re.compile("|".join(branches), 0 if not loose else re.IGNORECASE)


@dataclass
class _Block:
    """One piece of call markup found in the reply."""

    start: int
    end: int
    raw: str
    values: list[Any] | None = None
    name_hint: str = ""
    xml_tool: str = ""
    closed: bool = True


def read(text: str, spec: TextToolSpec, loose: bool = True, *, id_salt: str = "") -> TextToolRead:
    """Read the tool calls a model wrote as text.

    Args:
        text: The model's reply text.
        spec: From `prepare`.
        loose: Accept the common near-misses (wrappers, fences, trailing commas, Python
            literals, unclosed blocks, Roo-style XML for known tools). With False only
            well-formed `<tool_call>{json}</tool_call>` blocks are calls.
        id_salt: Mixed into the generated call ids, e.g. to keep them unique across the
            replies of one history.

    Returns:
        A `TextToolRead`. Never raises.
    """
    blocks, cut = _scan(text, spec, loose)
    calls: list[ToolCall] = []
    invalid: list[ToolCall] = []
    reasons: dict[str, str] = {}
    position = 0
    for block in blocks:
        for name, arguments, reason in _entries(block, spec, loose):
            call_id = _call_id(id_salt, position, name, block.raw)
            position += 1
            if reason is None:
                calls.append(ToolCall(call_id, name, arguments))
            else:
                invalid.append(ToolCall(call_id, name, {}, raw_arguments=block.raw))
                reasons[call_id] = reason
    if not blocks and cut == len(text):
        return TextToolRead(text, calls, invalid, reasons)
    return TextToolRead(_remaining_text(text, blocks, cut), calls, invalid, reasons)


def strip_calls(text: str, spec: TextToolSpec | None = None) -> str:
    """The reply text without call markup (what `result.text` and history show)."""
    return read(text, spec or TextToolSpec()).text


def _call_id(salt: str, position: int, name: str, raw: str) -> str:
    digest = hashlib.sha256(f"{salt}\x00{position}\x00{name}\x00{raw}".encode("utf-8", "replace"))
    return "call_" + digest.hexdigest()[:16]


class _Finder:
    """Pattern searches over one reply, memoised per pattern.

    Many unclosed openers would otherwise each search to the end of the text for a closing
    tag (quadratic); reusing the last answer keeps a scan linear.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._last: dict[re.Pattern[str], tuple[int, re.Match[str] | None]] = {}

    def search(self, pattern: re.Pattern[str], pos: int) -> re.Match[str] | None:
        last = self._last.get(pattern)
        if last is not None:
            searched_from, found = last
            if searched_from <= pos and (found is None or found.start() >= pos):
                return found
        found = pattern.search(self.text, pos)
        self._last[pattern] = (pos, found)
        return found


def _scan(text: str, spec: TextToolSpec, loose: bool) -> tuple[list[_Block], int]:
    """Find the call blocks in reading order, and where the text is cut (len(text) if not)."""
    scanner = _scanner(tuple(spec.tools), loose)
    finder = _Finder(text)
    blocks: list[_Block] = []
    pos = 0
    while True:
        match = finder.search(scanner, pos)
        if match is None:
            return blocks, len(text)
        if match.group("cut") is not None:
            return blocks, match.start()
        block: _Block | None
        if match.group("call") is not None:
            block = _call_block(finder, match, loose)
        else:
            block = _xml_block(finder, match, scanner, spec)
        if block is None:
            pos = match.end()
            continue
        blocks.append(block)
        pos = max(block.end, match.end())


def _call_block(finder: _Finder, match: re.Match[str], loose: bool) -> _Block:
    text = finder.text
    start, body_start = match.start(), match.end()
    close = _LOOSE_CLOSE if loose else _STRICT_CLOSE
    # Inside a call block, XML-style tool tags are part of the body: only calls and cuts end it.
    following = _scanner((), loose)
    hint = _attr_name(match.group(0)) if loose else ""
    decoded = _decode_json_run(text, body_start, loose)
    if decoded is not None:
        values, json_end = decoded
        closing = close.match(text, _skip_fence_and_space(text, json_end))
        if closing is not None:
            raw = text[body_start : closing.start()].strip()
            return _Block(start, closing.end(), raw, values, hint)
        if loose:
            _, block_end = _boundary(finder, json_end, close, following)
            if block_end is not None:
                # Junk between the JSON and the closing tag: the JSON is the call.
                return _Block(start, block_end, text[body_start:json_end].strip(), values, hint)
            # Unclosed: the call is the JSON; whatever follows stays text.
            end = _skip_fence_and_space(text, json_end)
            return _Block(start, end, text[body_start:json_end].strip(), values, hint)
    body_end, block_end = _boundary(finder, body_start, close, following)
    raw = text[body_start:body_end].strip()
    if block_end is None:
        return _Block(start, body_end, raw, None, hint, closed=False)
    return _Block(start, block_end, raw, None, hint)


def _boundary(
    finder: _Finder, pos: int, close: re.Pattern[str], following: re.Pattern[str]
) -> tuple[int, int | None]:
    """Where a block's body ends: (body end, block end after the closing tag or None if unclosed).

    An unclosed block runs to the next match of `following` (an opener or an invented
    result), or to the end of the text.
    """
    closing = finder.search(close, pos)
    after = finder.search(following, pos)
    if closing is not None and (after is None or closing.start() <= after.start()):
        return closing.start(), closing.end()
    return (after.start() if after is not None else len(finder.text)), None


@lru_cache(maxsize=256)
def _xml_closer(tag: str) -> re.Pattern[str]:
    return re.compile(f"</{re.escape(tag)}\\s*>", re.IGNORECASE)


def _xml_block(
    finder: _Finder, match: re.Match[str], scanner: re.Pattern[str], spec: TextToolSpec
) -> _Block | None:
    """A Roo-style `<read_file><path>a</path></read_file>` call of a known tool."""
    tag = match.group("tag")
    name = next((n for n in spec.tools if n.lower() == tag.lower()), tag)
    body_start = match.end()
    body_end, block_end = _boundary(finder, body_start, _xml_closer(tag.lower()), scanner)
    body = finder.text[body_start:body_end]
    if block_end is None and not re.match(r"\s*(?:<[A-Za-z_][\w.-]*\s*>|\{)", body):
        # An unclosed tag followed by prose is a mention of the tool, not a call.
        return None
    end = block_end if block_end is not None else body_end
    return _Block(match.start(), end, body.strip(), xml_tool=name)


def _attr_name(opener: str) -> str:
    found = _NAME_ATTR.search(opener)
    return found.group(1) if found else ""


def _skip_fence_and_space(text: str, pos: int) -> int:
    fence = _FENCE_HEAD.match(text, pos)
    if fence is not None:
        pos = fence.end()
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _decode_json_run(text: str, pos: int, loose: bool) -> tuple[list[Any], int] | None:
    """Decode the JSON value(s) starting at `pos` (after spaces and, loose, a fence).

    Decoding knows JSON strings, so a `</tool_call>` inside an argument does not end the block.
    Loose mode reads several values in a row (separated by spaces or commas).
    """
    fence = _FENCE_OPEN.match(text, pos) if loose else None
    pos = fence.end() if fence is not None else pos
    while pos < len(text) and text[pos].isspace():
        pos += 1
    if pos >= len(text) or text[pos] not in "{[":
        return None
    decoder = _decoder(strict=not loose)
    values: list[Any] = []
    end = pos
    while True:
        try:
            value, end = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            break
        values.append(value)
        if not loose:
            break
        pos = end
        while pos < len(text) and (text[pos].isspace() or text[pos] == ","):
            pos += 1
        if pos >= len(text) or text[pos] != "{":
            break
    return (values, end) if values else None


# ---------------------------------------------------------------- block -> calls

_NAME_KEYS = ("name", "tool_name", "toolName", "tool", "function", "function_name", "functionName", "action")
_ARG_KEYS = ("arguments", "parameters", "input", "args", "params", "action_input", "tool_input")
_META_KEYS = ("type", "id", "call_id", "tool_call_id", "index")
_WRAPPER_KEYS = ("function", "tool", "tool_call", "function_call", "call")

_Entry = tuple[str, dict[str, Any], str | None]


def _entries(block: _Block, spec: TextToolSpec, loose: bool) -> list[_Entry]:
    """The (name, arguments, reason-if-invalid) entries one block yields."""
    if block.xml_tool:
        return [_xml_entry(block, spec)]
    if loose and block.values is None and block.raw.startswith("<"):
        inner = _scan(block.raw, spec, loose)[0]
        if len(inner) == 1 and inner[0].xml_tool:
            return [_xml_entry(inner[0], spec)]
    if not loose and not block.closed:
        return [(_guess_name(block.raw, ""), {}, "the block is not closed with </tool_call>")]
    values = block.values
    if values is None and loose:
        values = _parse_lenient(block.raw)
    elif values is None:
        values = _parse_strict(block.raw)
    if values is None:
        guess = _guess_name(block.raw, block.name_hint)
        return [(guess, {}, "the call is not valid JSON")]
    entries: list[_Entry] = []
    for value in _flatten_calls(values) if loose else values:
        entries.append(_entry_from_value(value, spec, loose, block.name_hint))
    if not entries:
        return [(block.name_hint, {}, "the block holds no call")]
    return entries


def _parse_strict(raw: str) -> list[Any] | None:
    try:
        return [_decoder(strict=True).decode(raw)]
    except (ValueError, RecursionError):
        return None


def _flatten_calls(values: list[Any], depth: int = 0) -> list[Any]:
    """Lists of calls (and `{"tool_calls": [...]}`) become one call per item."""
    flat: list[Any] = []
    for value in values:
        if isinstance(value, list) and depth < 3:
            flat.extend(_flatten_calls(value, depth + 1))
        elif isinstance(value, dict) and isinstance(value.get("tool_calls"), list) and depth < 3:
            flat.extend(_flatten_calls(value["tool_calls"], depth + 1))
        else:
            flat.append(value)
    return flat


def _entry_from_value(value: Any, spec: TextToolSpec, loose: bool, hint: str) -> _Entry:
    if not isinstance(value, dict):
        return (hint, {}, "a call must be a JSON object with name and arguments")
    if not loose:
        return _strict_entry(value, spec)
    call = _unwrap(value)
    name, name_key = _pick_name(call, spec, hint)
    if not name:
        return ("", {}, 'the call has no "name"')
    resolved = _resolve_name(name, spec)
    if resolved is None:
        return (name, {}, f"unknown tool {name!r}")
    input_schema = spec.tools[resolved]["input_schema"]
    arguments, problem = _arguments_of(call, name_key, input_schema)
    if problem is not None:
        return (resolved, {}, problem)
    return (resolved, _coerce_arguments(arguments, input_schema), None)


def _strict_entry(value: dict[str, Any], spec: TextToolSpec) -> _Entry:
    name = value.get("name")
    arguments = value.get("arguments", {})
    if not isinstance(name, str) or not name:
        return ("", {}, 'the call has no "name"')
    if set(value) - {"name", "arguments"}:
        return (name, {}, 'a call has only "name" and "arguments"')
    if name not in spec.tools:
        return (name, {}, f"unknown tool {name!r}")
    if not isinstance(arguments, dict):
        return (name, {}, '"arguments" must be a JSON object')
    return (name, arguments, None)


def _unwrap(call: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """`{"type": "function", "function": {...}}` and similar wrappers -> the inner call."""
    if depth >= 4:
        return call
    for key in _WRAPPER_KEYS:
        inner = call.get(key)
        if isinstance(inner, dict) and any(isinstance(inner.get(k), str) for k in _NAME_KEYS):
            merged = dict(inner)
            # `{"function": {"name": ...}, "arguments": {...}}`: the arguments sit outside.
            for arg_key in _ARG_KEYS:
                if arg_key in call and not any(k in inner for k in _ARG_KEYS):
                    merged[arg_key] = call[arg_key]
            return _unwrap(merged, depth + 1)
    return call


def _pick_name(call: dict[str, Any], spec: TextToolSpec, hint: str) -> tuple[str, str | None]:
    """The tool name and the key it came from. A key naming a known tool wins."""
    present = [(k, call[k]) for k in _NAME_KEYS if isinstance(call.get(k), str) and call[k].strip()]
    for key, value in present:
        if _resolve_name(value, spec) is not None:
            return value.strip(), key
    if present:
        return present[0][1].strip(), present[0][0]
    return hint, None


def _resolve_name(name: str, spec: TextToolSpec) -> str | None:
    """The spec's tool name for what the model wrote: exact, then without a `functions.`
    prefix, then case-insensitive when that is unambiguous."""
    name = name.strip()
    if name in spec.tools:
        return name
    for prefix in ("functions.", "function.", "tools.", "tool."):
        if name.startswith(prefix) and name[len(prefix) :] in spec.tools:
            return name[len(prefix) :]
    folded = [n for n in spec.tools if n.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


def _arguments_of(
    call: dict[str, Any], name_key: str | None, input_schema: Mapping[str, Any]
) -> tuple[dict[str, Any], str | None]:
    """(arguments, problem). Arguments may sit under an arguments-like key, as a JSON string,
    or flattened beside the name."""
    properties = _properties(input_schema)
    rest = {k: v for k, v in call.items() if k != name_key}
    for key in _ARG_KEYS:
        if key not in rest:
            continue
        value = rest[key]
        # A tool parameter literally called "input" (etc.) written flat beside the name.
        if key in properties and not isinstance(value, dict):
            continue
        if value is None:
            return {}, None
        if isinstance(value, dict):
            return value, None
        if isinstance(value, str):
            if not value.strip():
                return {}, None
            parsed = _parse_lenient(value)
            if parsed is not None and len(parsed) == 1 and isinstance(parsed[0], dict):
                return parsed[0], None
            return {}, f'"{key}" is not a JSON object'
        return {}, f'"{key}" must be a JSON object'
    ignored = set(_NAME_KEYS) | set(_META_KEYS)
    return {k: v for k, v in rest.items() if k in properties or k not in ignored}, None


def _xml_entry(block: _Block, spec: TextToolSpec) -> _Entry:
    name = block.xml_tool
    input_schema = spec.tools[name]["input_schema"]
    body = block.raw
    if not body:
        return (name, {}, None)
    if body.startswith("{"):
        parsed = _parse_lenient(body)
        if parsed is not None and len(parsed) == 1 and isinstance(parsed[0], dict):
            return (name, _coerce_arguments(parsed[0], input_schema), None)
        return (name, {}, "the call's arguments are not valid JSON")
    params = _xml_params(body)
    if params:
        return (name, _coerce_arguments(params, input_schema), None)
    properties = _properties(input_schema)
    if len(properties) == 1 and "<" not in body:
        # `<read_file>a.js</read_file>` for a tool with a single parameter.
        only = next(iter(properties))
        return (name, _coerce_arguments({only: body}, input_schema), None)
    return (name, {}, "write each parameter as <parameter_name>value</parameter_name>")


_XML_PARAM = re.compile(r"<([A-Za-z_][\w.-]*)\s*>")


def _xml_params(body: str) -> dict[str, Any]:
    """Top-level `<key>value</key>` pairs; a value may hold other tags."""
    params: dict[str, Any] = {}
    # Tags with no closing tag at all are remembered, so many of them stay linear.
    unclosed: set[str] = set()
    pos = 0
    while True:
        match = _XML_PARAM.search(body, pos)
        if match is None:
            return params
        key = match.group(1)
        end = -1 if key in unclosed else body.find(f"</{key}>", match.end())
        if end < 0:
            unclosed.add(key)
            pos = match.end()
            continue
        params[key] = _xml_value(body[match.end() : end])
        pos = end + len(key) + 3


def _xml_value(value: str) -> str:
    if "\n" not in value.strip():
        return value.strip()
    # Multi-line values (file contents) keep their inner whitespace; drop the tag's own newlines.
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def _guess_name(raw: str, hint: str) -> str:
    if hint:
        return hint
    found = _NAME_IN_RAW.search(raw)
    return found.group(1).strip() if found else ""


# ---------------------------------------------------------------- lenient JSON


def _parse_lenient(raw: str) -> list[Any] | None:
    """Parse what a model meant as JSON: one value, or several in a row. None if hopeless."""
    text = _strip_fences(raw).strip()
    if not text:
        return None
    for candidate in (text, _drop_trailing_commas(text)):
        try:
            return [_decoder(strict=False).decode(candidate)]
        except (ValueError, RecursionError):
            pass
    run = _decode_json_run(text, 0, loose=True)
    if run is not None and not text[run[1] :].strip(" \t\r\n,"):
        return run[0]
    python = _python_literal(text)
    if python is not None:
        return [python]
    closed = _close_brackets(_drop_trailing_commas(text))
    if closed is not None:
        try:
            return [_decoder(strict=False).decode(closed)]
        except (ValueError, RecursionError):
            python = _python_literal(closed)
            if python is not None:
                return [python]
    return None


@lru_cache(maxsize=2)
def _decoder(strict: bool) -> json.JSONDecoder:
    """A decoder that refuses NaN, Infinity and 1e999: arguments must stay plain JSON."""
    return json.JSONDecoder(strict=strict, parse_constant=_no_constant, parse_float=_finite_float)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is out of range")
    return number


def _strip_fences(text: str) -> str:
    text = text.strip()
    if text.startswith("```"):
        newline = text.find("\n")
        text = text[newline + 1 :] if newline >= 0 else text[3:]
    if text.rstrip().endswith("```"):
        text = text.rstrip()[:-3]
    return text


def _drop_trailing_commas(text: str) -> str:
    """Remove commas that directly precede `}` or `]`, outside strings."""
    out: list[str] = []
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            escaped = char == "\\" and not escaped
            if char == '"' and not escaped:
                in_string = False
        elif char == '"':
            in_string = True
        elif char == ",":
            after = index + 1
            while after < len(text) and text[after].isspace():
                after += 1
            if after < len(text) and text[after] in "}]":
                continue
        out.append(char)
    return "".join(out)


def _close_brackets(text: str) -> str | None:
    """Close an unterminated string and the brackets left open (a reply cut off mid-call)."""
    stack: list[str] = []
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]" and (not stack or stack.pop() != char):
            return None
    if not stack and not in_string:
        return None
    tail = '"' if in_string else ""
    return text + tail + "".join(reversed(stack))


_LITERAL_NAMES: dict[str, Any] = {
    "true": True,
    "false": False,
    "null": None,
    "True": True,
    "False": False,
    "None": None,
}


def _python_literal(text: str) -> Any:
    """A Python-literal reading (single quotes, True/None, trailing commas); None if it is not one."""
    if len(text) > 1_000_000:
        return None
    try:
        # Model text like '\\<' would make the compiler warn on the user's stderr.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text, mode="eval")
        return _literal(tree.body)
    except Exception:  # untrusted model text: any failure means "not a literal"
        return None


def _literal(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool, type(None))):
        if isinstance(node.value, float) and not math.isfinite(node.value):
            raise ValueError("not a finite number")
        return node.value
    if isinstance(node, ast.Name) and node.id in _LITERAL_NAMES:
        return _LITERAL_NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _literal(node.operand)
        if isinstance(operand, (int, float)) and not isinstance(operand, bool):
            return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.Dict):
        result: dict[str, Any] = {}
        for key, item in zip(node.keys, node.values, strict=True):
            if key is None:
                raise ValueError("** in a literal")
            key_value = _literal(key)
            if not isinstance(key_value, str):
                raise ValueError("non-string key")
            result[key_value] = _literal(item)
        return result
    raise ValueError("not a literal")


# ---------------------------------------------------------------- schema coercion


def _properties(input_schema: Mapping[str, Any]) -> dict[str, Any]:
    properties = input_schema.get("properties") if isinstance(input_schema, Mapping) else None
    return properties if isinstance(properties, dict) else {}


def _coerce_arguments(arguments: dict[str, Any], input_schema: Mapping[str, Any]) -> dict[str, Any]:
    """String values turned into the type the schema asks for ("7" -> 7), where that is
    unambiguous; anything that does not convert is left for schema validation to report."""
    properties = _properties(input_schema)
    coerced: dict[str, Any] = {}
    for key, value in arguments.items():
        schema = properties.get(key)
        coerced[str(key)] = (
            _coerce(value, schema) if isinstance(value, str) and isinstance(schema, dict) else value
        )
    return coerced


def _schema_types(schema: Mapping[str, Any]) -> set[str]:
    types: set[str] = set()
    declared = schema.get("type")
    if isinstance(declared, str):
        types.add(declared)
    elif isinstance(declared, list):
        types.update(t for t in declared if isinstance(t, str))
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or []:
            if isinstance(option, dict):
                types |= _schema_types(option)
    return types


def _coerce(value: str, schema: Mapping[str, Any]) -> Any:
    types = _schema_types(schema)
    if not types or "string" in types:
        return value
    text = value.strip()
    for kind in ("integer", "number", "boolean", "null", "array", "object"):
        if kind in types:
            converted = _convert(text, kind)
            if converted is not _NO_VALUE:
                return converted
    return value


_NO_VALUE = object()


def _convert(text: str, kind: str) -> Any:
    try:
        if kind == "integer" and re.fullmatch(r"[+-]?\d+(?:\.0*)?", text):
            return int(text.split(".")[0])
        if kind == "number" and re.fullmatch(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", text):
            number = float(text)
            if not math.isfinite(number):
                return _NO_VALUE
            return int(number) if re.fullmatch(r"[+-]?\d+", text) else number
    except (ValueError, OverflowError):
        return _NO_VALUE
    if kind == "boolean" and text.lower() in ("true", "false", "yes", "no", "1", "0"):
        return text.lower() in ("true", "yes", "1")
    if kind == "null" and text.lower() in ("null", "none", ""):
        return None
    if kind in ("array", "object"):
        parsed = _parse_lenient(text)
        wanted = list if kind == "array" else dict
        if parsed is not None and len(parsed) == 1 and isinstance(parsed[0], wanted):
            return parsed[0]
    return _NO_VALUE


# ---------------------------------------------------------------- text left for the user


def _remaining_text(text: str, blocks: list[_Block], cut: int) -> str:
    """The reply without the blocks (and without a fence that only wrapped them)."""
    pieces: list[str] = []
    pos = 0
    for block in blocks:
        between = text[pos : block.start]
        # Only spaces between two blocks: one removed run, not a separate piece.
        if pieces and not between.strip():
            pos = block.end
            continue
        pieces.append(between)
        pos = block.end
    pieces.append(text[pos:cut] if pos <= cut else "")
    if not blocks:
        return text[:cut].rstrip()
    for index in range(len(pieces) - 1):
        # A fence right before the calls opens a block only if the piece has an odd count.
        opens = pieces[index].count("```") % 2 == 1
        if opens and _FENCE_TAIL.search(pieces[index]) and _FENCE_HEAD.match(pieces[index + 1]):
            pieces[index] = _FENCE_TAIL.sub("", pieces[index])
            pieces[index + 1] = _FENCE_HEAD.sub("", pieces[index + 1], count=1)
    cleaned = [_LOOSE_CLOSE.sub("", piece) for piece in pieces]
    kept = [_trim_edges(piece) for piece in cleaned]
    return "\n\n".join(piece for piece in kept if piece.strip())


def _trim_edges(piece: str) -> str:
    """Drop the blank lines and spaces a removed block leaves; keep the next line's indentation."""
    leading_lines = re.match(r"\s*\n", piece)
    piece = piece[leading_lines.end() :] if leading_lines else piece.lstrip(" \t")
    return piece.rstrip()


# ---------------------------------------------------------------- servers that refuse `tools`

# Error bodies seen from servers or models that will not take the `tools` / `tool_choice`
# fields (collected from public issue threads):
#   OpenAI      400 "tools is not supported in this model. For a list of supported models, ..."
#   Ollama      400 "registry.ollama.ai/library/gemma3:27b does not support tools"
#   DeepSeek    400 "deepseek-reasoner does not support Function Calling"
#               400 "Thinking mode does not support this tool_choice"
#   xAI         400 "The model does not support tool use or function calling but tools or
#                    tool_choice have been specified on the request."
#   Groq        400 "tool calling is not supported with this model" (param "tool calling")
#   Gemini      400 "Function calling is not enabled for models/gemma-3-12b-it"
#   vLLM        400 "\"auto\" tool choice requires --enable-auto-tool-choice and
#                    --tool-call-parser to be set"
#   llama.cpp   500 (some builds 400) "tools param requires --jinja flag";
#               "Unsupported param: tools" / "Unsupported param: tool_choice"
#   OpenRouter  404 "No endpoints found that support tool use." /
#                   "No endpoints found that support the provided 'tool_choice' value."
#   pydantic    422/400 [{"type": "extra_forbidden", "loc": ["body", "tools"],
#                        "msg": "Extra inputs are not permitted"}]
#   serde       400 "unknown field `tools`, expected one of ..."
# Not refusals (the server takes tools; something else is wrong): Groq "tool_use_failed",
# "Invalid schema for function ...", "messages.1.content.0.tool_use.text: Extra inputs are not
# permitted", context-length errors that mention tools.
# `tool_calls` / `function_call` are left out on purpose: they name message fields, and
# "property 'tool_calls' is unsupported" (Groq) is a malformed message, not a refusal.
_TOOLS = r"(?:tools?|tool[ _]use|tool calls?|tool[ _]calling|tool[ _]choice|functions?|function[ _]calling)"
_REFUSAL_PATTERNS = [
    re.compile(p, re.IGNORECASE)
    for p in (
        rf"\b{_TOOLS}['\"`]? (?:is|are) not (?:supported|enabled|allowed|available|permitted)",
        rf"\b{_TOOLS}['\"`]? (?:is|are) unsupported",
        rf"(?:does not|doesn't|do not|don't|cannot|can't) (?:support|use|accept) (?:this |the )?{_TOOLS}\b",
        r"--enable-auto-tool-choice",
        r"tool[ _]choice requires --",
        r"tools? param(?:eter)? requires --jinja",
        r"unsupported param(?:eter)?s?:?\s*['\"`]?(?:tools|tool_choice|functions)\b",
        r"unrecognized (?:request )?arguments? supplied:?\s*['\"`]?(?:tools|tool_choice|functions)\b",
        r"unknown (?:field|parameter|argument|key|name)s?:?\s*['\"`]?(?:tools|tool_choice|functions)"
        r"['\"`]?(?![\w.\[])",
        r"no endpoints found that support (?:tool use|the provided ['\"`]?tool_choice)",
    )
]
_EXTRA_FORBIDDEN = re.compile(
    r"extra inputs are not permitted|extra_forbidden|extra fields not permitted", re.IGNORECASE
)
_TOOLS_LOCATION = re.compile(
    r"""[\[(]\s*['"]body['"]\s*,\s*['"](?:tools|tool_choice|functions)['"]\s*[\])]"""
    r"""|body\s*->\s*(?:tools|tool_choice|functions)\b(?![.\[])"""
    r"""|(?:^|[\s"'{,])(?:tools|tool_choice|functions)\s*:\s*extra""",
    re.IGNORECASE,
)
_REFUSAL_STATUSES = (400, 404, 422, 500)


def is_refusal(status: int | None, body_text: str) -> bool:
    """Whether an error response means "this server or model does not take the tools field".

    Args:
        status: The HTTP status (400/422 usually; OpenRouter answers 404, llama.cpp 500).
        body_text: The error body, or the vendor's message.
    """
    if status not in _REFUSAL_STATUSES or not body_text:
        return False
    text = body_text[:20_000]
    if any(pattern.search(text) for pattern in _REFUSAL_PATTERNS):
        return True
    return bool(_EXTRA_FORBIDDEN.search(text) and _TOOLS_LOCATION.search(text))


# Auto tool mode: (base_url, model) pairs whose server refused native tools, for this process.
_refused: set[tuple[str, str]] = set()
_refused_lock = threading.Lock()


def _key(base_url: str, model: str) -> tuple[str, str]:
    return (base_url.rstrip("/"), model)


def remember(base_url: str, model: str) -> None:
    """Record that this endpoint refused native tools; later requests go text-first."""
    with _refused_lock:
        _refused.add(_key(base_url, model))


def remembered(base_url: str, model: str) -> bool:
    """Whether this endpoint refused native tools earlier in this process."""
    with _refused_lock:
        return _key(base_url, model) in _refused


def forget(base_url: str, model: str) -> None:
    """Drop a remembered refusal (e.g. after the server was reconfigured)."""
    with _refused_lock:
        _refused.discard(_key(base_url, model))
