"""What a ToolSet keeps, per tool, to run it: a memory tool or a file tool.

Users never build these; they come from `adopt()` / `scan()` and travel inside a ToolSet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


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
