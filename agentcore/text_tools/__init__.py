"""Tool calls written as plain text, for models (or servers) without native tools.

    spec = prepare(toolset.schema)                    # the tool manual
    messages = wrap(messages, spec)                   # manual on the system side, results as text
    reply = llm.chat(..., messages=messages)          # no `tools` field
    found = read(reply.text, spec)                    # found.tool_calls, found.invalid, found.text

A call is `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`; results go back as
`<tool_result name="...">...</tool_result>` in a user message. History always keeps the standard
tool-call parts and tool messages: this package only translates on the way in and out, so one
conversation can move between a text-only and a native-tools model.

    manual.py    the spec, its manual, history written as text messages
    markup.py    where a reply holds call markup, and the text left around it
    calls.py     what a block of markup calls (names, arguments, the shapes models write)
    reader.py    read(): markup -> calls, never raising, never letting a call pass as text
    lenient.py   JSON as a model meant it
    coercion.py  string arguments turned into the types the schema asks for
    mode.py      native / text / auto for the loop; auto's refusal wordings and memory

Every name loads on first use, so the loop's `mode.py` costs only itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .manual import TextToolSpec, format_call, prepare, to_text_messages, wrap, wrap_system
    from .mode import forget, is_refusal, remember, remembered
    from .reader import TextToolRead, read, strip_calls

_NAMES = {
    "TextToolSpec": "manual",
    "format_call": "manual",
    "prepare": "manual",
    "to_text_messages": "manual",
    "wrap": "manual",
    "wrap_system": "manual",
    "TextToolRead": "reader",
    "read": "reader",
    "strip_calls": "reader",
    "forget": "mode",
    "is_refusal": "mode",
    "remember": "mode",
    "remembered": "mode",
}
__all__ = [
    "TextToolRead",
    "TextToolSpec",
    "forget",
    "format_call",
    "is_refusal",
    "prepare",
    "read",
    "remember",
    "remembered",
    "strip_calls",
    "to_text_messages",
    "wrap",
    "wrap_system",
]


def __getattr__(name: str) -> object:
    import importlib

    if name in _NAMES:
        value = getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_NAMES})
