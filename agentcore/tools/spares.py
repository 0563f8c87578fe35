"""Tool processes started ahead of need: `agentcore.tools.warm(n)`.

    from agentcore import tools
    tools.warm(16)      # at start-up: 16 ready tool processes, for every agent and execute()
    tools.warm(16, my_tools)   # ... with the files of a ToolSet's file tools already imported
    agent.send(...)     # the first file-tool calls take them instead of starting interpreters

Nothing here runs unless warm() is called: `Agent()` does no I/O. A spare belongs to no pool
until a pool takes it; from then on it is that pool's like any other (killed by its stop(),
close(), timeouts). Spares left over end at interpreter exit or with warm(0), and like every tool
process they die with this process.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any

from ..errors import AgentError

if TYPE_CHECKING:
    from .handlers import ToolSet
    from .process import Process

_lock = threading.Lock()
_spares: list[Process] = []
_owner = [os.getpid()]
_exit_hook: list[bool] = []


def warm(n: int, tools: ToolSet | None = None, *, timeout: float = 30.0) -> int:
    """Keep `n` tool processes started and ready; returns once they are (or raises).

    They carry this process's `sys.path` and environment as they are now. A first round of 16
    parallel file-tool calls then costs about the tools' own time instead of 16 interpreter
    start-ups. `warm(0)` stops the spares that were not taken.

    Args:
        n: how many spare processes to keep (more are stopped, fewer are started).
        tools: a ToolSet whose file tools the new spares import now, so that their first call
            costs what a call in a warm process does.
        timeout: seconds to wait for the new processes to be ready.

    Returns:
        How many spares are ready now.

    Raises:
        AgentError: kind "config" for a bad `n` or `tools`; kind "tool" when a process cannot
            start in time or a tool file fails to import.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise AgentError(f"tools.warm(n): n must be an int >= 0, got {n!r}", kind="config")
    roots = _roots(tools)
    from .process import stop_processes

    with _lock:
        _forget_after_fork()
        surplus = _spares[n:]
        del _spares[n:]
        missing = n - len(_spares)
    stop_processes(surplus, close=True)
    started = _started(missing, roots, timeout)
    with _lock:
        _spares.extend(started)
        if not _exit_hook:
            import atexit

            atexit.register(_stop_all)
            _exit_hook.append(True)
        return len(_spares)


def _started(count: int, roots: list[dict[str, Any]], timeout: float) -> list[Process]:
    """`count` new tool processes, ready (their `roots` imported) within `timeout`; on failure, none.

    Raises:
        AgentError: kind "tool" when one cannot start; whatever preparing them raised.
    """
    from .process import Process, stop_processes

    started: list[Process] = []
    try:
        for _ in range(count):
            started.append(Process.start())
        deadline = time.monotonic() + timeout
        for proc in started:
            proc.prepare(deadline, roots)
    except OSError as exc:
        stop_processes(started, close=True)
        raise AgentError(f"tools.warm(): a tool process did not start: {exc}", kind="tool") from exc
    except BaseException:
        stop_processes(started, close=True)
        raise
    return started


def _roots(tools: ToolSet | None) -> list[dict[str, Any]]:
    """The folders of the file tools in `tools`, as scan specs."""
    from .handlers import FileTool, ToolSet

    if tools is None:
        return []
    if not isinstance(tools, ToolSet):
        raise AgentError("tools.warm(n, tools): tools must be a ToolSet (from load())", kind="config")
    roots: dict[str, dict[str, Any]] = {}
    for handler in tools.handlers.values():
        if isinstance(handler, FileTool) and handler.folder not in roots:
            files = [os.path.join(handler.folder, entry[0]) for entry in handler.stamp]
            roots[handler.folder] = {"root": handler.folder, "version": handler.version, "files": files}
    return list(roots.values())


def take() -> Process | None:
    """A ready spare for a pool (it is the pool's from now on), or None."""
    dead: list[Process] = []
    found: Process | None = None
    with _lock:
        _forget_after_fork()
        while _spares and found is None:
            proc = _spares.pop()
            if proc.popen.poll() is None:
                found = proc
            else:
                dead.append(proc)
    if dead:
        from .process import stop_processes

        stop_processes(dead, close=True)
    return found


def _forget_after_fork() -> None:
    """After os.fork() the spares are the parent's: start with none, touch nothing."""
    if _owner[0] != os.getpid():
        _owner[0] = os.getpid()
        _spares.clear()


def _stop_all() -> None:
    with _lock:
        if _owner[0] != os.getpid():
            return
        procs = list(_spares)
        _spares.clear()
    if procs:
        from .process import stop_processes

        stop_processes(procs, close=True)
