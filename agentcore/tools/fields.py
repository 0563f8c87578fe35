"""How a tool object reads, in this process and in a tool process alike: its fields and its call form.

    field_of(tool, "name")          # a dict's key, or an object's attribute (None when absent)
    takes_context(execute)          # True: execute(input, ctx); False: execute(input)

Standard library only: the tool worker runs this file's source too (tools/process.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def field_of(obj: Any, key: str) -> Any:
    """`obj[key]` for a mapping, else `obj.key`; None when it has none."""
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def takes_context(fn: Callable[..., Any]) -> bool:
    """Whether `fn(input, ctx)` is the call form: two positional parameters (or *args)."""
    import inspect

    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)
