"""Tool sets: what the model sees (`schema`) and how each tool runs (`handlers`).

    tools = load("./tools", [add, {"name": "echo", "execute": echo}], mcp_client_tools)
    tools.schema["add"]      # {"name", "description", "input_schema", "source": "memory", ...}
    tools.handlers["add"]    # MemoryTool(...) or FileTool(...)
    safe = omit(tools, ["shell"])

`schema` and `handlers` always hold the same names: every function here filters them
together, so a tool the model cannot see can never be run, and the reverse.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import AgentError
from .decorator import FunctionTool, durable_flags, is_timeout
from .fields import field_of, takes_context
from .handlers import Handler, MemoryTool, ToolSet
from .shape import NotJSON, to_json

# ToolSet is defined with the handlers (tools/handlers.py) and named here too, where it is built.
__all__ = ["ToolSet", "adopt", "load", "merge", "omit", "pick", "scan_folders"]

EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}

# Tool fields that run the tool: kept in `handlers`, never sent to the model.
_HANDLER_KEYS = frozenset({"execute", "timeout", "to_model_output"})
_SCHEMA_KEYS = frozenset({"name", "description", "input_schema", "inputSchema"})


def adopt(obj: Any) -> ToolSet:
    """A ToolSet of memory tools from tool objects.

    Args:
        obj: a tool (dict, `@tool` function, MCP-style object with `.call(arguments)`),
            a list/tuple of tools, an object with `as_toolset()` (`agentcore.mcp.MCPTools`),
            a `{name: tool}` record (the key names a tool that has no name of its own),
            a ToolSet (returned as is) or None (empty set).

    Raises:
        AgentError: kind "config", naming the tool and what is wrong with it.
    """
    if obj is None:
        return ToolSet()
    if isinstance(obj, ToolSet):
        return obj
    as_toolset = getattr(obj, "as_toolset", None)
    if callable(as_toolset):  # a live source of tools, such as an MCP connection
        return adopt(as_toolset())
    if isinstance(obj, str | os.PathLike):
        raise AgentError(f"adopt() takes tool objects; a folder ({obj!s}) goes to load()", kind="config")
    if isinstance(obj, list | tuple):
        entries: list[tuple[str | None, Any]] = [(None, item) for item in obj]
    elif isinstance(obj, Mapping) and not _is_dict_tool(obj):
        entries = [(str(key), item) for key, item in obj.items()]
    else:
        entries = [(None, obj)]
    schema: dict[str, dict[str, Any]] = {}
    handlers: dict[str, Handler] = {}
    given: dict[str, int] = {}
    for index, (key, item) in enumerate(entries):
        entry, handler = _adopt_one(item, key, index)
        if handler.name in given and key is None:
            raise _twice(handler.name, entries[given[handler.name]][1], given[handler.name], item, index)
        given[handler.name] = index
        schema[handler.name] = entry
        handlers[handler.name] = handler
    return ToolSet(schema, handlers)


def load(*sources: Any) -> ToolSet:
    """One ToolSet from folders (str / Path, scanned), lists, records, ToolSets and tools; later wins."""
    sets: list[ToolSet] = []
    for source in sources:
        if source is None:
            continue
        if isinstance(source, str | os.PathLike):
            sets.append(scan_folders(source))
        elif isinstance(source, list | tuple):
            sets.append(_load_list(source))
        else:
            sets.append(adopt(source))
    return merge(*sets)


def _load_list(items: list[Any] | tuple[Any, ...]) -> ToolSet:
    """The tools of one list: folders and sets in it win like sources do, but two single tools
    of one name are a mistake (which of them the model gets would depend on the order)."""
    parts: list[ToolSet] = []
    given: dict[str, int] = {}
    for index, item in enumerate(items):
        part = load(item)
        if _is_single_tool(item):
            for name in part:
                if name in given:
                    raise _twice(name, items[given[name]], given[name], item, index)
                given[name] = index
        parts.append(part)
    return merge(*parts)


def _is_single_tool(item: Any) -> bool:
    if item is None or isinstance(item, str | os.PathLike | list | tuple | ToolSet):
        return False
    if callable(getattr(item, "as_toolset", None)):
        return False
    return not (isinstance(item, Mapping) and not _is_dict_tool(item))


def _twice(name: str, first: Any, first_index: int, second: Any, second_index: int) -> AgentError:
    return AgentError(
        f"two tools named {name!r} in one list: item {first_index} ({_describe(first)}) and item "
        f"{second_index} ({_describe(second)}); rename one (@tool(name=...)) or drop it",
        kind="config",
    )


def _describe(item: Any) -> str:
    if isinstance(item, Mapping):
        return "a dict tool"
    wrapped = getattr(item, "__wrapped__", item)
    module, qualname = getattr(wrapped, "__module__", None), getattr(wrapped, "__qualname__", None)
    if module and qualname:
        return f"{module}.{qualname}"
    return type(item).__name__


def merge(*sets: ToolSet | None) -> ToolSet:
    """A new ToolSet holding every tool of `sets`; a later set wins a name clash."""
    schema: dict[str, dict[str, Any]] = {}
    handlers: dict[str, Handler] = {}
    for tool_set in sets:
        if tool_set is None:
            continue
        if not isinstance(tool_set, ToolSet):
            tool_set = adopt(tool_set)
        schema.update(tool_set.schema)
        handlers.update(tool_set.handlers)
    return ToolSet(schema, handlers)


def pick(tool_set: ToolSet | None, names: Iterable[str] | None) -> ToolSet:
    """A new ToolSet with only the tools named in `names` (unknown names are ignored)."""
    wanted = _names(names)
    return _filter(tool_set, lambda name: name in wanted)


def omit(tool_set: ToolSet | None, names: Iterable[str] | None) -> ToolSet:
    """A new ToolSet without the tools named in `names`."""
    unwanted = _names(names)
    return _filter(tool_set, lambda name: name not in unwanted)


def scan_folders(*folders: str | os.PathLike[str]) -> ToolSet:
    """The file tools of `folders`, via `tools/scan.py` (imported only when folders are given)."""
    try:
        from .scan import scan  # type: ignore[import-not-found,unused-ignore]
    except ModuleNotFoundError as exc:
        if exc.name != f"{__package__}.scan":
            raise
        raise AgentError("file tools are not available", kind="tool") from exc
    result: ToolSet = scan(*folders)
    return result


def _names(names: Iterable[str] | None) -> frozenset[str]:
    if names is None:
        return frozenset()
    if isinstance(names, str):
        return frozenset({names})
    return frozenset(names)


def _filter(tool_set: ToolSet | None, keep: Callable[[str], bool]) -> ToolSet:
    if tool_set is None:
        return ToolSet()
    names = [name for name in tool_set if keep(name)]
    return ToolSet({n: tool_set.schema[n] for n in names}, {n: tool_set.handlers[n] for n in names})


# ---------------------------------------------------------------- one tool


def _is_dict_tool(obj: Mapping[Any, Any]) -> bool:
    """A dict that is one tool (its own `execute` or `name`), not a `{name: tool}` record."""
    if isinstance(obj.get("name"), str):
        return True
    return "execute" in obj and not _looks_like_tool(obj["execute"])


def _looks_like_tool(value: Any) -> bool:
    if isinstance(value, Mapping):
        return "execute" in value
    return any(hasattr(value, key) for key in ("input_schema", "inputSchema"))


def _adopt_one(item: Any, key: str | None, index: int) -> tuple[dict[str, Any], MemoryTool]:
    if isinstance(item, Mapping):
        return _from_dict(item, key, index)
    if callable(item) and not isinstance(item, FunctionTool) and not _has_runner(item):
        label = getattr(item, "__name__", None) or key or f"#{index}"
        raise AgentError(f"tool {label!r} is a plain function: decorate it with @tool", kind="config")
    return _from_object(item, key, index)


def _has_runner(item: Any) -> bool:
    return callable(getattr(item, "execute", None)) or callable(getattr(item, "call", None))


def _from_dict(item: Mapping[str, Any], key: str | None, index: int) -> tuple[dict[str, Any], MemoryTool]:
    execute = item.get("execute")
    extra = {k: v for k, v in item.items() if k not in _HANDLER_KEYS and k not in _SCHEMA_KEYS}
    return _entry(
        name=item.get("name", key),
        index=index,
        description=item.get("description"),
        input_schema=item.get("input_schema", item.get("inputSchema")),
        execute=execute,
        takes_context=callable(execute) and takes_context(execute),
        timeout=item.get("timeout"),
        to_model_output=item.get("to_model_output"),
        extra=extra,
    )


def _from_object(item: Any, key: str | None, index: int) -> tuple[dict[str, Any], MemoryTool]:
    execute = getattr(item, "execute", None)
    if callable(execute):
        with_context = isinstance(item, FunctionTool) or takes_context(execute)
    else:
        call = getattr(item, "call", None)
        execute = _mcp_execute(call) if callable(call) else None
        with_context = False
    input_schema = getattr(item, "input_schema", None)
    if input_schema is None:
        input_schema = getattr(item, "inputSchema", None)
    return _entry(
        name=getattr(item, "name", None) or key,
        index=index,
        description=getattr(item, "description", None),
        input_schema=input_schema,
        execute=execute,
        takes_context=with_context,
        timeout=getattr(item, "timeout", None),
        to_model_output=getattr(item, "to_model_output", None),
        extra=_object_extra(item),
    )


def _object_extra(item: Any) -> dict[str, Any]:
    """Schema keys an object tool carries as attributes (`@tool(sequential=True, replay="safe")`)."""
    mode = getattr(item, "execution_mode", None)
    extra: dict[str, Any] = {"execution_mode": mode} if mode == "sequential" else {}
    if getattr(item, "replay", "never") != "never":
        extra["replay"] = item.replay
    if getattr(item, "needs_approval", False) is not False:
        extra["needs_approval"] = item.needs_approval
    return extra


def _entry(
    *,
    name: Any,
    index: int,
    description: Any,
    input_schema: Any,
    execute: Any,
    takes_context: bool,
    timeout: Any,
    to_model_output: Any,
    extra: dict[str, Any],
) -> tuple[dict[str, Any], MemoryTool]:
    """Check one tool's fields and split them into its schema entry and its handler."""
    if not isinstance(name, str) or not name:
        raise AgentError(f"tool #{index} has no name (give it a non-empty str 'name')", kind="config")
    label = f"tool {name!r}"
    if not callable(execute):
        raise AgentError(f"{label} has no callable execute", kind="config")
    if description is not None and not isinstance(description, str):
        raise AgentError(f"{label}: description must be a str", kind="config")
    if not is_timeout(timeout):
        raise AgentError(f"{label}: timeout must be a number of seconds > 0", kind="config")
    if to_model_output is not None and not callable(to_model_output):
        raise AgentError(f"{label}: to_model_output must be callable", kind="config")
    durable_flags(label, extra)
    entry = {
        "name": name,
        "description": description or "",
        "input_schema": _input_schema(input_schema, label),
        **extra,
        "source": "memory",
    }
    handler = MemoryTool(
        name=name,
        execute=execute,
        takes_context=takes_context,
        timeout=float(timeout) if timeout is not None else None,
        to_model_output=to_model_output,
    )
    return entry, handler


def _input_schema(schema: Any, label: str) -> dict[str, Any]:
    if schema is None:
        return copy.deepcopy(EMPTY_SCHEMA)
    to_schema = getattr(schema, "model_json_schema", None)
    if isinstance(schema, type) and callable(to_schema):
        schema = to_schema()
    if not isinstance(schema, Mapping):
        got = type(schema).__name__
        raise AgentError(f"{label}: input_schema must be a dict (a JSON Schema), got {got}", kind="config")
    return _copied_json(dict(schema))  # type: ignore[no-any-return]


def _copied_json(value: Any) -> Any:
    """`copy.deepcopy(value)`, quicker for the dicts, lists and strings a JSON Schema is made of."""
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _LEAVES else _copied_json(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _LEAVES else _copied_json(v) for v in value]
    return value if kind in _LEAVES else copy.deepcopy(value)


_LEAVES = (str, int, float, bool, type(None))


# ---------------------------------------------------------------- MCP-style objects


def _mcp_execute(call: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
    def execute(input: dict[str, Any]) -> Any:
        return mcp_value(call(input))

    return execute


def mcp_value(value: Any) -> Any:
    """Turn an MCP `CallToolResult` (dict or object) into a return value; anything else as is.

    Text items become text, images image parts, audio file parts; `isError` gives an
    error-text block.
    """
    content = field_of(value, "content")
    if not isinstance(content, list) or not all(isinstance(field_of(item, "type"), str) for item in content):
        return value
    parts = [_mcp_part(item) for item in content]
    texts = [part["text"] for part in parts if part["type"] == "text"]
    if field_of(value, "isError") or field_of(value, "is_error"):
        return {"output": {"type": "error-text", "value": "\n".join(texts) or "The tool reported an error."}}
    if not parts:
        return field_of(value, "structuredContent")
    if len(texts) == len(parts):
        return "\n".join(texts)
    return {"output": {"type": "content", "value": parts}}


def _mcp_part(item: Any) -> dict[str, Any]:
    kind = field_of(item, "type")
    media_type = field_of(item, "mimeType") or field_of(item, "mime_type")
    data = str(field_of(item, "data") or "")
    if kind == "text":
        return {"type": "text", "text": str(field_of(item, "text") or "")}
    if kind == "image":
        return {"type": "image", "image": data, "media_type": media_type or "image/png"}
    if kind == "audio":
        return {"type": "file", "data": data, "media_type": media_type or "audio/wav"}
    try:
        text = json.dumps(to_json(item), ensure_ascii=False)
    except (NotJSON, RecursionError):
        text = str(item)
    return {"type": "text", "text": text}
