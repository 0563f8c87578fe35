"""One tool process seen from the parent: start it, talk to it, stop it (and all it started).

    proc = Process.start()               # python -S -c <worker.py, compiled>; ready at once
    proc.send({"op": "call", ...})
    kind, message = proc.wait_for(message["id"], Output(on_output, call_id, name), deadline)
    proc.stop(close=True)                # cancel, SIGTERM, reap: SIGKILL after 0.2 s

Killing means: ask the child to set ctx.cancel, SIGTERM its process group, SIGKILL the group
once the process is gone or after 0.2 s. On SIGTERM, when our end of its command pipe closes
and (Linux) when the kernel reports our death, the child kills all it started, then its group;
a child that did not (it ignored SIGTERM, or crashed) is frozen and its descendants are found
in /proc and killed from here, also those that left its group or session.

The worker (worker.py, after the sources it shares with this side: `WORKER_SOURCES`) is read as
text and run with `python -c`, never imported by package name, so a vendored copy of the package
starts it the same way. Its /proc walk and its names (`CONF_ENV`, `SOURCE_NAME`) are the one copy
this side uses too.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._utils.notify import notify
from .worker import CONF_ENV, SOURCE_NAME, kill_descendants, wait_dead

OnOutput = Callable[[dict[str, Any]], Any]

SOURCE_ENV = "_AGENTCORE_TOOL_WORKER"
# What a tool process runs, in this order, into one set of globals: the rules it shares with this
# process (stdlib-only files of this folder, never copied), then the worker itself.
WORKER_SOURCES = ("shape.py", "fields.py", "worker.py")
# The worker travels compiled (marshal, base64): the child runs the same interpreter as this
# process, and skipping the compile saves ~10 ms of every cold start.
BOOTSTRAP = (
    "import os,marshal,binascii\n"
    f"for code in marshal.loads(binascii.a2b_base64(os.environ.pop({SOURCE_ENV!r}))): exec(code)"
)

KILL_GRACE_S = 0.2
MAX_OUTPUT_BYTES = 8 << 20
OUTPUT_DROPPED_NOTICE = "\n[agentcore: the tool wrote more than 8 MiB; the rest of its output was dropped]\n"

_READ_SIZE = 1 << 16
_STDERR_TAIL_BYTES = 4000
# A safety net only: process death is normally seen as EOF on the message pipe.
_LIVENESS_POLL_S = 1.0
# Output a finished call left in its pipes is read up to this much, then the rest waits.
_DRAIN_LIMIT_BYTES = 4 << 20


class Output:
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


class Process:
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
    def start(cls) -> Process:
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

    def prepare(self, deadline: float, roots: list[dict[str, Any]] | None = None) -> None:
        """Return once the process answers, with the tool files of `roots` imported; else OSError.

        Args:
            deadline: `time.monotonic()` by which it must have answered.
            roots: `[{"root", "version", "files"}]` as for a scan; None: just be ready.
        """
        messages: list[dict[str, Any]] = [{"op": "ping"}]
        if roots:
            messages.append({"op": "scan", "roots": roots})
        for message in messages:
            self.send(message)
            kind, reply = self.wait_for(message["id"], Output(None, "", ""), deadline)
            if kind != "reply":
                raise OSError(f"the tool process {'did not answer in time' if kind == 'timeout' else kind}")
            if "error" in reply:
                raise OSError(str(reply["error"]))
        for spec in roots or []:
            self.loaded[str(spec["root"])] = str(spec["version"])

    def wait_for(self, call_id: int, output: Output, deadline: float | None) -> tuple[str, Any]:
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

    def drain(self, output: Output) -> None:
        """Forward what is already in the stdout/stderr pipes (written before the reply)."""
        left = _DRAIN_LIMIT_BYTES
        for fd in list(self.out_fds):
            while left > 0:
                read = self._read_output(fd, output)
                if read <= 0:
                    break
                left -= read

    def _read_messages(self, call_id: int, output: Output) -> tuple[str, Any] | None:
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

    def _read_output(self, fd: int, output: Output) -> int:
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
        ended_its_tree = False
        try:
            self.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
            # The worker's own kill_tree() ends with SIGKILL to its group, after its tree.
            ended_its_tree = self.popen.returncode == -signal.SIGKILL
        except subprocess.TimeoutExpired:
            # Frozen, it forks no more, and it is still the parent of every orphan below it.
            self._signal(signal.SIGSTOP)
        if not ended_its_tree:
            _kill_descendants(self.pid, root_alive=self.popen.returncode is None)
        self._signal_group(signal.SIGKILL)
        self.popen.wait()
        self._wait_group_dead()

    def _wait_group_dead(self) -> None:
        """Wait (bounded) until the SIGKILLed members of the group — programs the tool started — are dead."""
        wait_dead(group=self.pid)

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

    def _signal(self, signum: int) -> None:
        if self.popen.returncode is None:
            try:
                os.kill(self.pid, signum)
            except (ProcessLookupError, PermissionError):
                pass

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


def _kill_descendants(pid: int, *, root_alive: bool) -> None:
    """Kill what the tool process `pid` started, also outside its group and session (Linux).

    After a crash its orphans went to init; those still in its session or group are found.
    """
    kill_descendants(pid, frozenset({os.getpgid(0), os.getsid(0)}), root_alive=root_alive)


def stop_processes(procs: list[Process], *, close: bool) -> None:
    """Terminate all at once, give them one shared grace period, SIGKILL what is left."""
    for proc in procs:
        proc.terminate()
    deadline = time.monotonic() + KILL_GRACE_S
    for proc in procs:
        proc.reap(deadline)
        if close:
            proc.close()


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


_code: str | None = None


def worker_code() -> str:
    """The worker's sources (`WORKER_SOURCES`, read from next to this file: works installed, checked
    out or vendored) compiled, marshalled as one tuple and base64-encoded; made once per process."""
    global _code
    if _code is None:
        import binascii
        import marshal

        folder = Path(__file__).parent
        codes = tuple(
            compile((folder / name).read_text(encoding="utf-8"), SOURCE_NAME, "exec")
            for name in WORKER_SOURCES
        )
        _code = binascii.b2a_base64(marshal.dumps(codes), newline=False).decode("ascii")
    return _code


def _python() -> str:
    if not sys.executable:
        raise OSError("sys.executable is empty: no Python interpreter to run tool processes")
    return sys.executable


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
