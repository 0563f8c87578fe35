"""What a block of call markup calls: (name, arguments, reason-if-invalid) entries.

    entries(block, spec, loose=True)
    # [("read", {"path": "a.json"}, None), ("", {}, 'the call has no "name"')]

Loose mode reads the shapes models write: wrappers (`{"type": "function", "function": {...}}`),
arguments under other keys or as a JSON string or beside the name, lists of calls, names with a
`functions.` prefix or in another case, XML parameters. A name outside the spec is never a call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .coercion import coerce_arguments, schema_properties
from .lenient import json_decoder, parse_lenient
from .markup import Block, scan

if TYPE_CHECKING:
    from .manual import TextToolSpec


_NAME_IN_RAW = re.compile(r"""["']?(?:name|tool_name|tool|function)["']?\s*[:=]\s*["']([^"'\n]{1,200})["']""")


_NAME_KEYS = ("name", "tool_name", "toolName", "tool", "function", "function_name", "functionName", "action")


_ARG_KEYS = ("arguments", "parameters", "input", "args", "params", "action_input", "tool_input")


_META_KEYS = ("type", "id", "call_id", "tool_call_id", "index")


_WRAPPER_KEYS = ("function", "tool", "tool_call", "function_call", "call")


_Entry = tuple[str, dict[str, Any], str | None]


def entries(block: Block, spec: TextToolSpec, loose: bool) -> list[_Entry]:
    """The (name, arguments, reason-if-invalid) entries one block yields."""
    if block.xml_tool:
        return [_xml_entry(block, spec)]
    if loose and block.values is None and block.raw.startswith("<"):
        inner = scan(block.raw, spec, loose)[0]
        if len(inner) == 1 and inner[0].xml_tool:
            return [_xml_entry(inner[0], spec)]
    if not loose and not block.closed:
        return [(_guess_name(block.raw, ""), {}, "the block is not closed with </tool_call>")]
    values = block.values
    if values is None and loose:
        values = parse_lenient(block.raw)
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
        return [json_decoder(strict=True).decode(raw)]
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
    return (resolved, coerce_arguments(arguments, input_schema), None)


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
    properties = schema_properties(input_schema)
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
            parsed = parse_lenient(value)
            if parsed is not None and len(parsed) == 1 and isinstance(parsed[0], dict):
                return parsed[0], None
            return {}, f'"{key}" is not a JSON object'
        return {}, f'"{key}" must be a JSON object'
    ignored = set(_NAME_KEYS) | set(_META_KEYS)
    return {k: v for k, v in rest.items() if k in properties or k not in ignored}, None


def _xml_entry(block: Block, spec: TextToolSpec) -> _Entry:
    name = block.xml_tool
    input_schema = spec.tools[name]["input_schema"]
    body = block.raw
    if not body:
        return (name, {}, None)
    if body.startswith("{"):
        parsed = parse_lenient(body)
        if parsed is not None and len(parsed) == 1 and isinstance(parsed[0], dict):
            return (name, coerce_arguments(parsed[0], input_schema), None)
        return (name, {}, "the call's arguments are not valid JSON")
    params = _xml_params(body)
    if params:
        return (name, coerce_arguments(params, input_schema), None)
    properties = schema_properties(input_schema)
    if len(properties) == 1 and "<" not in body:
        # `<read_file>a.js</read_file>` for a tool with a single parameter.
        only = next(iter(properties))
        return (name, coerce_arguments({only: body}, input_schema), None)
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
