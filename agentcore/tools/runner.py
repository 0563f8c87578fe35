"""Parent half of tool processes: a pool of killable, reusable Python children.

    pool = ToolPool(max_concurrency=8)
    result = pool.run(handler, {"a": 1}, tool_call_id="call_1", cancel=signal,
                      on_output=print, agent_id=agent.id)
    pool.kill_running()      # stop() / a new send: busy processes die, their calls are interrupted
    pool.close()             # ... and the idle ones too

A call has its process to itself. A process that finished a call cleanly goes back to the
idle list, its tool modules still imported; one that was killed or crashed is never reused.
Killing means: ask the child to set ctx.cancel, SIGTERM its process group, SIGKILL the group
once the process is gone or after 0.2 s. The child kills its own group when our end of its
command pipe closes, and on Linux also when the kernel reports our death, so no tool outlives
this process. The worker (worker.py) is read as text and run with `python -c`, never imported
by package name, so a vendored copy of the package starts it the same way.
"""

from __future__ import annotations

import codecs
import json
import os
import queue
import select
import selectors
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._utils.cancel import Signal, child
from .._utils.notify import notify
from .._utils.tracecontext import traceparent
from ..errors import AgentError
from .handlers import FileTool
from .shape import error_result, interrupted_result, timeout_result

OnOutput = Callable[[dict[str, Any]], Any]

# These three names are shared with worker.py (tests check they match).
SOURCE_ENV = "_AGENTCORE_TOOL_WORKER"
CONF_ENV = "_AGENTCORE_TOOL_WORKER_CONF"
SOURCE_NAME = "<agentcore-tool-worker>"
# The worker travels compiled (marshal, base64): the child runs the same interpreter as this
# process, and skipping the compile saves ~10 ms of every cold start.
BOOTSTRAP = (
    f"import os,marshal,binascii;exec(marshal.loads(binascii.a2b_base64(os.environ.pop({SOURCE_ENV!r}))))"
)

KILL_GRACE_S = 0.2
MAX_OUTPUT_BYTES = 8 << 20
MAX_IDLE = 16
SHARED_CONCURRENCY = 8
OUTPUT_DROPPED_NOTICE = "\n[agentcore: the tool wrote more than 8 MiB; the rest of its output was dropped]\n"

_READ_SIZE = 1 << 16
_STDERR_TAIL_BYTES = 4000
# A safety net only: process death is normally seen as EOF on the message pipe.
_LIVENESS_POLL_S = 1.0
# Output a finished call left in its pipes is read up to this much, then the rest waits.
_DRAIN_LIMIT_BYTES = 4 << 20
_GROUP_EXIT_WAIT_S = 0.02


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
        self._idle: list[_Process] = []
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
        _stop_processes(idle, close=True)

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

    def _process_for(self, root: str, version: str) -> tuple[_Process, bool]:
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
            _stop_processes([proc], close=True)
        return _Process.start(), False

    def _give_back(self, proc: _Process) -> None:
        """Return a clean process to the idle list; the oldest beyond MAX_IDLE are stopped."""
        retired = [proc]
        with self._lock:
            if not proc.dirty and self._pid == os.getpid():
                self._idle.append(proc)
                retired = self._idle[:-MAX_IDLE]
                del self._idle[:-MAX_IDLE]
        _stop_processes(retired, close=True)

    def _start_job(self, ticket: _Ticket, root: str, version: str, message: dict[str, Any]) -> _Process:
        """Send `message` to a process for this ticket; a dead idle process is replaced once."""
        while True:
            proc, reused = self._process_for(root, version)
            ticket.attach(proc)
            # What a previous call's leftovers (a background thread, say) wrote is not ours.
            proc.drain(_Output(None, "", ""))
            try:
                proc.send(message)
                return proc
            except OSError:
                _stop_processes([proc], close=True)
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
        try:
            proc = self._start_job(ticket, handler.folder, handler.version, message)
        except (ValueError, TypeError) as exc:
            return error_result(f"The input of tool {handler.name!r} is not plain JSON: {exc}")
        except OSError as exc:
            return error_result(f"Could not start tool {handler.name!r} in a tool process: {exc}")
        output = _Output(on_output, tool_call_id, handler.name)
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

    def _scan(self, ticket: _Ticket, roots: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        message: dict[str, Any] = {"op": "scan", "roots": roots}
        first = roots[0] if roots else {"root": "", "version": ""}
        try:
            proc = self._start_job(ticket, str(first["root"]), str(first["version"]), message)
        except (OSError, ValueError, TypeError) as exc:
            raise AgentError(f"could not start a tool process to scan tools: {exc}", kind="tool") from exc
        output = _Output(None, "", "")
        try:
            kind, payload = proc.wait_for(message["id"], output, None)
        except BaseException:
            proc.stop(close=True)
            raise
        if kind == "reply" and "roots" in payload and not ticket.killed:
            for spec in roots:
                proc.loaded[str(spec["root"])] = str(spec["version"])
            ticket.detach()
            self._give_back(proc)
            described: list[list[dict[str, Any]]] = payload["roots"]
            return described
        proc.stop(close=False)
        proc.drain(output)
        proc.close()
        if ticket.killed:
            raise AgentError("scanning tools was interrupted (the tool pool was closed)", kind="aborted")
        if kind == "reply":
            raise AgentError(str(payload.get("error")), kind="tool")
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
        self.proc: _Process | None = None
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

    def attach(self, proc: _Process) -> None:
        with self._lock:
            self.proc = proc
            killed = self.killed
        if killed:
            proc.terminate()


class _Output:
    """One call's stdout/stderr/yields on their way to `on_output`: incremental UTF-8, at most 8 MiB."""

    def __init__(self, on_output: OnOutput | None, tool_call_id: str, tool_name: str) -> None:
        self.on_output = on_output
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name
        self.budget = MAX_OUTPUT_BYTES
        self._decoders = {
            "stdout": codecs.getincrementaldecoder("utf-8")("replace"),
            "stderr": codecs.getincrementaldecoder("utf-8")("replace"),
        }
        self._tail = b""

    def data(self, stream: str, chunk: bytes) -> None:
        if stream == "stderr":
            self._tail = (self._tail + chunk)[-_STDERR_TAIL_BYTES:]
        if self.on_output is None or self.budget <= 0:
            return
        part = chunk[: self.budget]
        self.budget -= len(part)
        text = self._decoders[stream].decode(part)
        if text:
            self._emit(stream, text)
        if self.budget <= 0:
            self._emit(stream, self._decoders[stream].decode(b"", final=True) + OUTPUT_DROPPED_NOTICE)

    def yielded(self, data: Any) -> None:
        if self.on_output is not None:
            self._emit("yield", data)

    def finish(self) -> None:
        """Flush half-received characters: the call is over, nothing more is forwarded."""
        if self.on_output is not None and self.budget > 0:
            for stream, decoder in self._decoders.items():
                text = decoder.decode(b"", final=True)
                if text:
                    self._emit(stream, text)
        self.on_output = None

    def stderr_tail(self) -> str:
        return self._tail.decode("utf-8", "replace").strip()

    def _emit(self, stream: str, data: Any) -> None:
        payload = {
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "stream": stream,
            "data": data,
        }
        notify(self.on_output, payload)


# ---------------------------------------------------------------- one process


class _Process:
    """A tool process seen from here: its pipes, and how to stop it.

    The thread running a call owns the read ends; `terminate()` may come from any thread
    and only signals (and wakes that thread through the wake pipe).
    """

    def __init__(self, popen: subprocess.Popen[bytes], fds: dict[str, int]) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.cmd_w = fds["cmd"]
        self.msg_r = fds["msg"]
        self.wake_r, self.wake_w = fds["wake_r"], fds["wake_w"]
        self.out_fds = {fds["stdout"]: "stdout", fds["stderr"]: "stderr"}
        self._all_fds = list(fds.values())
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.msg_r, selectors.EVENT_READ, "msg")
        self.selector.register(self.wake_r, selectors.EVENT_READ, "wake")
        for fd, stream in self.out_fds.items():
            self.selector.register(fd, selectors.EVENT_READ, stream)
        self.loaded: dict[str, str] = {}
        self.dirty = False
        self._pending: list[bytes] = []
        self._next_id = 0
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._closed = False
        self._terminated = False

    @classmethod
    def start(cls) -> _Process:
        """Start a tool process running worker.py; it is ready for calls at once (they queue)."""
        cmd_r, cmd_w = os.pipe()
        msg_r, msg_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        wake_r, wake_w = os.pipe()
        child_ends = [cmd_r, msg_w, out_w, err_w]
        ours = {
            "cmd": cmd_w,
            "msg": msg_r,
            "stdout": out_r,
            "stderr": err_r,
            "wake_r": wake_r,
            "wake_w": wake_w,
        }
        # The parent's sys.path: a tool file imports what the agent can (a vendored package too).
        sys_path = [str(entry) for entry in sys.path]
        conf = {
            "cmd_fd": cmd_r,
            "msg_fd": msg_w,
            "parent_pid": os.getpid(),
            "sys_path": sys_path,
            "import_hooks": _import_hooks(),
        }
        env = {**os.environ, SOURCE_ENV: worker_code(), CONF_ENV: json.dumps(conf)}
        try:
            popen = _spawn(
                lambda: subprocess.Popen(
                    # -S: no site processing (~30 ms of a cold start); the parent's sys.path and
                    # editable-install hooks are handed over instead.
                    [_python(), "-S", "-c", BOOTSTRAP],
                    stdin=subprocess.DEVNULL,
                    stdout=out_w,
                    stderr=err_w,
                    pass_fds=(cmd_r, msg_w),
                    start_new_session=True,
                    env=env,
                )
            )
        except BaseException:
            for fd in [*child_ends, *ours.values()]:
                os.close(fd)
            raise
        for fd in child_ends:
            os.close(fd)
        for fd in ours.values():
            os.set_blocking(fd, False)
        return cls(popen, ours)

    # ------------------------------------------------------------ talking

    def send(self, message: dict[str, Any]) -> None:
        """Write one command (an `id` is added); raises OSError when the process is gone."""
        with self._send_lock:
            self._next_id += 1
            message["id"] = self._next_id
            self._write(json.dumps(message).encode("utf-8") + b"\n", wait=True)

    def wait_for(self, call_id: int, output: _Output, deadline: float | None) -> tuple[str, Any]:
        """Forward output until the reply to `call_id` comes.

        Returns:
            ("reply", message), ("timeout", None) at `deadline`, ("killed", None) after
            `terminate()`, or ("died", None) when the process went away first.
        """
        while True:
            wait_s = _LIVENESS_POLL_S
            if deadline is not None:
                wait_s = min(wait_s, deadline - time.monotonic())
                if wait_s <= 0:
                    return "timeout", None
            events = self.selector.select(wait_s)
            if not events and self.popen.poll() is not None:
                return "died", None
            # Output first: what the tool printed before it returned belongs to this call.
            for key, _ in sorted(events, key=lambda event: event[0].data == "msg"):
                if key.data == "wake":
                    return "killed", None
                if key.data == "msg":
                    found = self._read_messages(call_id, output)
                    if found is not None:
                        return found
                else:
                    self._read_output(key.fd, output)

    def drain(self, output: _Output) -> None:
        """Forward what is already in the stdout/stderr pipes (written before the reply)."""
        left = _DRAIN_LIMIT_BYTES
        for fd in list(self.out_fds):
            while left > 0:
                read = self._read_output(fd, output)
                if read <= 0:
                    break
                left -= read

    def _read_messages(self, call_id: int, output: _Output) -> tuple[str, Any] | None:
        try:
            chunk = os.read(self.msg_r, _READ_SIZE)
        except BlockingIOError:
            return None
        if not chunk:
            return "died", None
        try:
            messages = self._lines(chunk)
        except ValueError:
            # Not our protocol: something in the process wrote on our pipe. Retire it.
            return "died", None
        for message in messages:
            if message.get("id") != call_id:
                continue
            if message.get("op") == "yield":
                output.yielded(message.get("data"))
            else:
                return "reply", message
        return None

    def _lines(self, chunk: bytes) -> list[dict[str, Any]]:
        pieces = chunk.split(b"\n")
        if len(pieces) == 1:
            self._pending.append(chunk)
            return []
        first = b"".join([*self._pending, pieces[0]])
        self._pending = [pieces[-1]] if pieces[-1] else []
        return [json.loads(line) for line in [first, *pieces[1:-1]] if line]

    def _read_output(self, fd: int, output: _Output) -> int:
        """Read one chunk of stdout/stderr into `output`; bytes read, 0 if none, -1 at EOF."""
        try:
            chunk = os.read(fd, _READ_SIZE)
        except BlockingIOError:
            return 0
        if not chunk:
            # The process died, or the tool closed its stdout or stderr: retire the process.
            # (The fd itself is closed with the others, in close().)
            self.dirty = True
            self.selector.unregister(fd)
            del self.out_fds[fd]
            return -1
        output.data(self.out_fds[fd], chunk)
        return len(chunk)

    # ------------------------------------------------------------ stopping

    def terminate(self) -> None:
        """Ask the tool to cancel, SIGTERM its group and wake the waiting thread. Any thread; idempotent."""
        with self._lock:
            if self._terminated:
                return
            self._terminated = True
            self.dirty = True
            if not self._closed:
                _write_quietly(self.wake_w, b"x")
        # Best effort: never wait for a send in progress or a full pipe.
        if self._send_lock.acquire(blocking=False):
            try:
                self._write(json.dumps({"op": "cancel", "id": self._next_id}).encode() + b"\n", wait=False)
            except OSError:
                pass
            finally:
                self._send_lock.release()
        self._signal_group(signal.SIGTERM)

    def reap(self, deadline: float | None = None) -> None:
        """Wait for the process until `deadline` (default 0.2 s from now), then SIGKILL its group."""
        if deadline is None:
            deadline = time.monotonic() + KILL_GRACE_S
        try:
            self.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        self._signal_group(signal.SIGKILL)
        self.popen.wait()
        self._wait_group_gone(time.monotonic() + _GROUP_EXIT_WAIT_S)

    def _wait_group_gone(self, deadline: float) -> None:
        """Give SIGKILLed members of the group (programs the tool started) a moment to die.

        A killed process dies within a millisecond or so, but it stays a member (a zombie)
        until init reaps it, which may take far longer; hence the short bound.
        """
        while time.monotonic() < deadline:
            try:
                os.killpg(self.pid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.002)

    def stop(self, *, close: bool) -> None:
        """terminate() + reap(); with `close`, also release the pipes (only their owner may)."""
        self.terminate()
        self.reap()
        if close:
            self.close()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.selector.close()
        for fd in self._all_fds:
            try:
                os.close(fd)
            except OSError:
                pass

    def death_text(self, stderr_tail: str) -> str:
        code = self.popen.returncode
        if code is None:
            how = "stopped answering"
        elif code < 0:
            how = f"was killed by signal {_signal_name(-code)}"
        else:
            how = f"exited with code {code}"
        text = f"The tool process {how} before the tool returned a result."
        # The worker's own frames (in a faulthandler dump) say nothing about the tool.
        lines = [
            line for line in stderr_tail.splitlines() if SOURCE_NAME not in line and '"<string>"' not in line
        ]
        tail = "\n".join(lines).strip()[-2000:]
        return f"{text}\nLast lines on stderr:\n{tail}" if tail else text

    def _signal_group(self, signum: int) -> None:
        try:
            os.killpg(self.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def _write(self, data: bytes, *, wait: bool) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.cmd_w, view) :]
            except BlockingIOError:
                if not wait:
                    return
                select.select([], [self.cmd_w], [], _LIVENESS_POLL_S)
                if self.popen.poll() is not None:
                    raise BrokenPipeError("the tool process is gone") from None


def _stop_processes(procs: list[_Process], *, close: bool) -> None:
    """Terminate all at once, give them one shared grace period, SIGKILL what is left."""
    for proc in procs:
        proc.terminate()
    deadline = time.monotonic() + KILL_GRACE_S
    for proc in procs:
        proc.reap(deadline)
        if close:
            proc.close()


def _shutdown(idle: list[_Process], tickets: set[_Ticket], pid: int) -> None:
    """A pool's finalizer (garbage collection or interpreter exit): kill all its processes."""
    if os.getpid() != pid:
        return
    busy = [ticket.proc for ticket in list(tickets) if ticket.proc is not None]
    for ticket in list(tickets):
        ticket.kill()
    procs = list(idle)
    idle.clear()
    _stop_processes(procs, close=True)
    # Busy pipes belong to the threads running the calls; only the processes are stopped here.
    _stop_processes(busy, close=False)


# ---------------------------------------------------------------- starting processes


class _Spawner:
    """Starts tool processes from one long-lived thread.

    On Linux the child's parent-death signal fires when the *thread* that started it ends,
    so a process started from a short-lived tool thread would die with that thread.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], list[Any], threading.Event]] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pid = 0

    def run(self, fn: Callable[[], Any]) -> Any:
        with self._lock:
            if self._thread is None or self._pid != os.getpid():
                self._thread = threading.Thread(
                    target=self._serve, name="agentcore-tool-spawner", daemon=True
                )
                self._pid = os.getpid()
                self._thread.start()
        box: list[Any] = []
        done = threading.Event()
        self._jobs.put((fn, box, done))
        done.wait()
        ok, value = box
        if not ok:
            raise value
        return value

    def _serve(self) -> None:
        while True:
            fn, box, done = self._jobs.get()
            try:
                box[:] = [True, fn()]
            except BaseException as exc:  # handed back to the waiting caller
                box[:] = [False, exc]
            done.set()


_spawner = _Spawner()


def _import_hooks() -> list[str]:
    """Modules that installed import finders from .pth files (setuptools editable installs)."""
    return sorted(
        name
        for name, module in list(sys.modules.items())
        if name.startswith("__editable__") and callable(getattr(module, "install", None))
    )


def _spawn(fn: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    if sys.platform.startswith("linux"):
        popen: subprocess.Popen[bytes] = _spawner.run(fn)
        return popen
    return fn()


_source: str | None = None
_code: str | None = None


def worker_source() -> str:
    """worker.py as text, read once from next to this file (works installed, checked out or vendored)."""
    global _source
    if _source is None:
        _source = (Path(__file__).parent / "worker.py").read_text(encoding="utf-8")
    return _source


def worker_code() -> str:
    """worker.py compiled, marshalled and base64-encoded, made once per process."""
    global _code
    if _code is None:
        import binascii
        import marshal

        code = compile(worker_source(), SOURCE_NAME, "exec")
        _code = binascii.b2a_base64(marshal.dumps(code), newline=False).decode("ascii")
    return _code


def _python() -> str:
    if not sys.executable:
        raise OSError("sys.executable is empty: no Python interpreter to run tool processes")
    return sys.executable


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


def _write_quietly(fd: int, data: bytes) -> None:
    try:
        os.write(fd, data)
    except OSError:
        pass


def _signal_name(number: int) -> str:
    try:
        return f"{signal.Signals(number).name} ({number})"
    except ValueError:
        return str(number)
