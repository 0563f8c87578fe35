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
    """A tool defined in a .py file; runs in a tool process (see tools/runner.py)."""

    name: str
    path: str
    folder: str
    timeout: float | None = None
    stamp: tuple[Any, ...] = field(default=(), compare=False)


Handler = MemoryTool | FileTool
