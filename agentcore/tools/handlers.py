"""The values tools travel in: a ToolSet, and per tool what runs it (a memory tool or a file tool).

Users never build handlers; they come from `adopt()` / `scan()` and travel inside a ToolSet.
These are plain values, so every part of `tools/` (gathering, running, warming processes)
imports them from here and none of those parts imports another to know them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import AgentError
from .decorator import check_name


@dataclass(frozen=True)
class MemoryTool:
    """A tool object living in this process; runs on a thread."""

    name: str
    execute: Callable[..., Any]
    takes_context: bool = False
    timeout: float | None = None
    to_model_output: Callable[..., Any] | None = None


@dataclass(frozen=True)
class FileTool:
    """A tool defined in a .py file; runs in a tool process (see tools/runner.py).

    Attributes:
        name: the tool's name.
        path: absolute path of the file that defines it (imported in the tool process).
        folder: the scanned folder (on `sys.path` in the tool process, with the file's own folder).
        timeout: seconds after which the call is killed and reported as timed out.
        stamp: `(relative path, mtime_ns, size)` of every .py file of `folder` at scan time.
        version: a digest of `stamp`; a tool process holding another version re-imports the folder.
    """

    name: str
    path: str
    folder: str
    timeout: float | None = None
    stamp: tuple[Any, ...] = field(default=(), compare=False)
    version: str = ""


Handler = MemoryTool | FileTool


@dataclass(frozen=True)
class ToolSet:
    """A named set of tools.

    Attributes:
        schema: name → `{"name", "description", "input_schema", "source": "memory" | "file",
            ...extra keys of the tool}`; what the model is told.
        handlers: name → `MemoryTool` | `FileTool`; what runs a call.
    """

    schema: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    handlers: Mapping[str, Handler] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Own copies, so that a new set never changes when another is built from it.
        object.__setattr__(self, "schema", dict(self.schema))
        object.__setattr__(self, "handlers", dict(self.handlers))
        if set(self.schema) != set(self.handlers):
            raise AgentError("a ToolSet needs the same names in schema and handlers", kind="config")
        for name in self.handlers:
            check_name(name, f"tool {name!r}")

    def __contains__(self, name: object) -> bool:
        return name in self.handlers

    def __iter__(self) -> Iterator[str]:
        return iter(self.schema)

    def __len__(self) -> int:
        return len(self.schema)

    def __repr__(self) -> str:
        return f"ToolSet({list(self.schema)!r})"
