"""Parent half of tool processes: a pool of killable, reusable Python children.

    pool = ToolPool(max_concurrency=8)
    result = pool.run(handler, {"a": 1}, tool_call_id="call_1", cancel=signal,
                      on_output=print, agent_id=agent.id)
    pool.kill_running()      # stop() / a new send: busy processes die, their calls are interrupted
    pool.close()             # ... and the idle ones too

A call has its process to itself. A process that finished a call cleanly goes back to the
idle list, its tool modules still imported; one that was killed or crashed is never reused.
How one process is started and killed is tools/process.py.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from .._utils.cancel import Signal, child
from .._utils.tracecontext import traceparent
from ..errors import AgentError
from .handlers import FileTool
from .process import (
    KILL_GRACE_S,
    MAX_OUTPUT_BYTES,
    SOURCE_ENV,
    OnOutput,
    Output,
    Process,
    stop_processes,
)
from .shape import error_result, interrupted_result, timeout_result
from .spares import take as take_spare
from .worker import CONF_ENV, SOURCE_NAME

# Re-exported: tests and the benchmark import them from here.
__all__ = ["CONF_ENV", "MAX_OUTPUT_BYTES", "SOURCE_ENV", "SOURCE_NAME", "ToolPool", "shared_pool"]

MAX_IDLE = 16
SHARED_CONCURRENCY = 8


# ---------------------------------------------------------------- the pool


class ToolPool:
    """Tool processes of one agent (or the shared pool of direct `execute()` calls and scans).

    Args:
        max_concurrency: how many calls may run at once; further calls queue. None: no cap.
    """

    def __init__(self, max_concurrency: int | None = None) -> None:
        self.max_concurrency = max_concurrency
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._idle: list[Process] = []
        self._tickets: set[_Ticket] = set()
        self._running = 0
        self._pid = os.getpid()
        self._finalizer = weakref.finalize(self, _shutdown, self._idle, self._tickets, self._pid)

    def run(
        self,
        handler: FileTool,
        input: dict[str, Any],
        *,
        tool_call_id: str,
        cancel: threading.Event | None = None,
        on_output: OnOutput | None = None,
        agent_id: str = "",
        concurrency: int | None = None,
    ) -> dict[str, Any]:
        """Run one file-tool call in a tool process and return its result dict; never raises.

        Args:
            handler: the tool (from `scan()`).
            input: the tool's arguments.
            tool_call_id: passed to the tool's context and to `on_output`.
            cancel: setting it kills the process at once; the result is then "interrupted".
            on_output: receives `{"tool_call_id", "tool_name", "stream", "data"}` for the
                tool's stdout/stderr (incremental str) and generator yields.
            agent_id: passed to the tool's context.
            concurrency: a cap for this call instead of `max_concurrency`.
        """
        signal_, unfollow_parent = _as_signal(cancel)
        ticket = _Ticket(self._wake_waiters)
        unfollow = signal_.on_set(ticket.kill)
        try:
            if not self._enter(ticket, concurrency, holds_slot=True):
                return interrupted_result()
            try:
                return self._run_call(ticket, handler, input, tool_call_id, on_output, agent_id)
            finally:
                self._leave(ticket, holds_slot=True)
        finally:
            unfollow()
            unfollow_parent()
            ticket.done.set()

    def scan(self, roots: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        """Import tool files in a tool process and describe their tools (see tools/scan.py).

        Args:
            roots: `[{"root", "version", "files": [...]}]`.

        Returns:
            Per root, the list of tool descriptions the worker sent back.

        Raises:
            AgentError: kind "tool", naming the file that failed to import and why.
        """
        ticket = _Ticket(self._wake_waiters)
        self._enter(ticket, None, holds_slot=False)
        try:
            return self._scan(ticket, roots)
        finally:
            self._leave(ticket, holds_slot=False)
            ticket.done.set()

    def kill_running(self) -> None:
        """Kill every busy process of this pool; their calls (and queued ones) return interrupted.

        Returns once the processes are dead (at most about 0.2 s for a tool ignoring SIGTERM).
        """
        with self._lock:
            tickets = list(self._tickets)
        for ticket in tickets:
            ticket.kill()
        deadline = time.monotonic() + KILL_GRACE_S
        me = threading.current_thread()
        for ticket in tickets:
            proc = ticket.proc
            if proc is not None:
                proc.reap(deadline)
            if ticket.thread is not me:
                ticket.done.wait(2.0)

    def close(self) -> None:
        """Kill every process of this pool, busy or idle. The pool can still be used afterwards."""
        self.kill_running()
        with self._lock:
            idle = list(self._idle)
            self._idle.clear()
        stop_processes(idle, close=True)

    # ------------------------------------------------------------ slots

    def _enter(self, ticket: _Ticket, concurrency: int | None, *, holds_slot: bool) -> bool:
        """Register the call and wait for a slot; False when it was killed while queued."""
        self._forget_parent_processes()
        cap = concurrency if concurrency is not None else self.max_concurrency
        with self._changed:
            self._tickets.add(ticket)
            while holds_slot and cap is not None and self._running >= max(1, cap) and not ticket.killed:
                self._changed.wait()
            if ticket.killed:
                self._tickets.discard(ticket)
                self._changed.notify_all()
                return False
            if holds_slot:
                self._running += 1
            return True

    def _leave(self, ticket: _Ticket, *, holds_slot: bool) -> None:
        with self._changed:
            if ticket in self._tickets:
                self._tickets.discard(ticket)
                if holds_slot:
                    self._running -= 1
            self._changed.notify_all()

    def _wake_waiters(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def _forget_parent_processes(self) -> None:
        """After os.fork() the processes belong to the parent: start afresh, touch nothing."""
        if self._pid == os.getpid():
            return
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._idle = []
        self._tickets = set()
        self._running = 0
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _shutdown, self._idle, self._tickets, self._pid)

    # ------------------------------------------------------------ processes

    def _process_for(self, root: str, version: str) -> tuple[Process, bool]:
        """An idle process (preferably one that has `root` imported at `version`), else a new one."""
        while True:
            with self._lock:
                if not self._idle:
                    break
                index = next(
                    (
                        i
                        for i in range(len(self._idle) - 1, -1, -1)
                        if self._idle[i].loaded.get(root) == version
                    ),
                    len(self._idle) - 1,
                )
                proc = self._idle.pop(index)
            if not proc.dirty and proc.popen.poll() is None:
                return proc, True
            stop_processes([proc], close=True)
        # A spare from tools.warm() is like an idle process that never ran a call.
        spare = take_spare()
        if spare is not None:
            return spare, True
        return Process.start(), False

    def _give_back(self, proc: Process) -> None:
        """Return a clean process to the idle list; the oldest beyond MAX_IDLE are stopped."""
        retired = [proc]
        with self._lock:
            if not proc.dirty and self._pid == os.getpid():
                self._idle.append(proc)
                retired = self._idle[:-MAX_IDLE]
                del self._idle[:-MAX_IDLE]
        stop_processes(retired, close=True)

    def _start_job(self, ticket: _Ticket, root: str, version: str, message: dict[str, Any]) -> Process:
        """Send `message` to a process for this ticket; a dead idle process is replaced once."""
        while True:
            proc, reused = self._process_for(root, version)
            ticket.attach(proc)
            # What a previous call's leftovers (a background thread, say) wrote is not ours.
            proc.drain(Output(None, "", ""))
            try:
                proc.send(message)
                return proc
            except OSError:
                stop_processes([proc], close=True)
                if not reused:
                    raise
            except BaseException:
                # The message could not be encoded: the process is as clean as before.
                ticket.detach()
                self._give_back(proc)
                raise

    def _run_call(
        self,
        ticket: _Ticket,
        handler: FileTool,
        input: dict[str, Any],
        tool_call_id: str,
        on_output: OnOutput | None,
        agent_id: str,
    ) -> dict[str, Any]:
        message = _call_message(handler, input, tool_call_id, agent_id)
        try:
            proc = self._start_job(ticket, handler.folder, handler.version, message)
        except (ValueError, TypeError) as exc:
            return error_result(f"The input of tool {handler.name!r} is not plain JSON: {exc}")
        except OSError as exc:
            return error_result(f"Could not start tool {handler.name!r} in a tool process: {exc}")
        output = Output(on_output, tool_call_id, handler.name)
        deadline = None if handler.timeout is None else time.monotonic() + handler.timeout
        try:
            kind, payload = proc.wait_for(message["id"], output, deadline)
        except BaseException:
            proc.stop(close=True)
            raise
        if kind == "reply" and not ticket.killed:
            proc.drain(output)
            output.finish()
            proc.loaded[handler.folder] = handler.version
            ticket.detach()
            self._give_back(proc)
            result: dict[str, Any] = payload["result"]
            return result
        return _failed(proc, ticket, handler, kind, output)

    def _scan(self, ticket: _Ticket, roots: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        """Scan in a process of its own, ended (with all it started) before this returns:
        importing a tools folder may start programs, and nothing a scan starts outlives it."""
        message: dict[str, Any] = {"op": "scan", "roots": roots}
        try:
            proc = Process.start()
        except OSError as exc:
            raise AgentError(f"could not start a tool process to scan tools: {exc}", kind="tool") from exc
        output = Output(None, "", "")
        try:
            ticket.attach(proc)
            try:
                proc.send(message)
            except (OSError, ValueError, TypeError) as exc:
                raise AgentError(f"could not send the scan to a tool process: {exc}", kind="tool") from exc
            kind, payload = proc.wait_for(message["id"], output, None)
            if kind != "reply":
                proc.stop(close=False)
                proc.drain(output)
        finally:
            ticket.detach()
            proc.stop(close=True)
        if ticket.killed:
            raise AgentError("scanning tools was interrupted (the tool pool was closed)", kind="aborted")
        if kind == "reply" and "roots" in payload:
            described: list[list[dict[str, Any]]] = payload["roots"]
            return described
        if kind == "reply":
            raise AgentError(
                str(payload.get("error")), kind="config" if payload.get("kind") == "config" else "tool"
            )
        raise AgentError(f"scanning tools failed: {proc.death_text(output.stderr_tail())}", kind="tool")


_shared: ToolPool | None = None
_shared_lock = threading.Lock()


def shared_pool() -> ToolPool:
    """The pool of direct `execute()` calls and scans (concurrency 8), created on first use."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = ToolPool(max_concurrency=SHARED_CONCURRENCY)
        return _shared


# ---------------------------------------------------------------- one call in flight


class _Ticket:
    """A call in flight: lets a cancel or kill_running() reach its process, even before it has one."""

    def __init__(self, on_kill: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._on_kill = on_kill
        self.proc: Process | None = None
        self.killed = False
        self.done = threading.Event()
        self.thread = threading.current_thread()

    def kill(self) -> None:
        with self._lock:
            self.killed = True
            proc = self.proc
        if proc is not None:
            proc.terminate()
        self._on_kill()

    def detach(self) -> None:
        """The call is done with its process (which may now serve others): kills no longer reach it."""
        with self._lock:
            self.proc = None

    def attach(self, proc: Process) -> None:
        with self._lock:
            self.proc = proc
            killed = self.killed
        if killed:
            proc.terminate()


def _shutdown(idle: list[Process], tickets: set[_Ticket], pid: int) -> None:
    """A pool's finalizer (garbage collection or interpreter exit): kill all its processes."""
    if os.getpid() != pid:
        return
    busy = [ticket.proc for ticket in list(tickets) if ticket.proc is not None]
    for ticket in list(tickets):
        ticket.kill()
    procs = list(idle)
    idle.clear()
    stop_processes(procs, close=True)
    # Busy pipes belong to the threads running the calls; only the processes are stopped here.
    stop_processes(busy, close=False)


def _call_message(
    handler: FileTool, input: dict[str, Any], tool_call_id: str, agent_id: str
) -> dict[str, Any]:
    """The command that runs one call of `handler` in a tool process (worker.py's wire)."""
    message: dict[str, Any] = {
        "op": "call",
        "path": handler.path,
        "root": handler.folder,
        "version": handler.version,
        "name": handler.name,
        "input": input,
        "tool_call_id": tool_call_id,
        "agent_id": agent_id,
        "cwd": _cwd(),
    }
    trace = traceparent()
    if trace is not None:
        message["traceparent"] = trace
    return message


def _failed(proc: Process, ticket: _Ticket, handler: FileTool, kind: str, output: Output) -> dict[str, Any]:
    """The result of a call that got no reply: killed, timed out, or its process died. Ends the process."""
    proc.stop(close=False)
    try:
        if ticket.killed:
            return interrupted_result()
        if kind == "timeout" and handler.timeout is not None:
            return timeout_result(handler.timeout)
        # A crash: what it printed last (a faulthandler traceback, say) explains it.
        proc.drain(output)
        output.finish()
        return error_result(proc.death_text(output.stderr_tail()))
    finally:
        proc.close()


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:
        return None


def _as_signal(cancel: threading.Event | None) -> tuple[Signal, Callable[[], None]]:
    if isinstance(cancel, Signal):
        return cancel, _noop
    return child(cancel)


def _noop() -> None:
    return None
