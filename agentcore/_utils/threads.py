"""Threads that remember which run they belong to.

    thread = spawn(work, name="agentcore-tool")     # inherits the caller's owner
    owner()                                           # the run this thread works for, or None

An agent uses this to tell a call from inside its own run (a callback, a memory tool) from
a call by its user: `stop()` from inside must not wait for itself, `send()` from inside is
refused.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_local = threading.local()


def owner() -> Any:
    return getattr(_local, "owner", None)


@contextmanager
def owned_by(value: Any) -> Iterator[None]:
    previous = owner()
    _local.owner = value
    try:
        yield
    finally:
        _local.owner = previous


def spawn(target: Callable[[], None], *, name: str, start: bool = True) -> threading.Thread:
    """A daemon thread running `target` with the caller's owner and context variables.

    The context variables carry the tool call a thread works for (events.ToolScope) and the
    caller's tracing context into tool threads.
    """
    inherited = owner()
    context = contextvars.copy_context()

    def run() -> None:
        _local.owner = inherited
        context.run(target)

    thread = threading.Thread(target=run, name=name, daemon=True)
    if start:
        thread.start()
    return thread
