"""Child half of tool processes: import tool files and run calls for the parent. Stdlib only.

    python -c "<bootstrap>"        # started by runner.py; this source and the settings
                                   # arrive in environment variables, see runner.py

process.py reads this file as text and runs it as an anonymous program, so it works installed,
from a checkout or vendored under any package name. It must import nothing but the standard
library and never rely on its own file or package. The rules it shares with the parent are not
copied: process.py runs the sources of tools/shape.py (a return value -> the result) and
tools/fields.py (a tool object's fields and call form) first, into the same globals, so their
names are this program's own; imported as a module (the parent's kill helpers), it imports them.

Wire, one JSON object per line. The parent writes on the command pipe:
    {"op": "call", "id", "path", "root", "version", "name", "input", "tool_call_id", "agent_id", "cwd",
     "traceparent" (only when the call is traced)}
    {"op": "cancel", "id"}
    {"op": "scan", "id", "roots": [{"root", "version", "files": [...]}]}
    {"op": "ping", "id"}                          (answered when the process is ready)
and reads on the message pipe:
    {"op": "yield", "id", "data"}      {"op": "result", "id", "result": {...}}
    {"op": "scanned", "id", "roots": [[tool, ...], ...]} or {"op": "scanned", "id", "error": text}
    {"op": "pong", "id"}
Fds 1 and 2 are plain pipes the parent reads. EOF on the command pipe (the parent is gone),
the parent-death signal and SIGTERM (the parent's kill) all end in kill_tree(): everything
below this process dies, also what left its group or session (it is a child subreaper, so
orphans come back to it), then its group. No tool nor any program it started outlives the agent.
"""

from __future__ import annotations

import faulthandler
import importlib.machinery
import itertools
import json
import os
import queue
import signal
import sys
import threading
import types
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

# Every tool process pays for what is imported here, so the rest is imported where it is
# used; a value of a type from a module not yet imported (Decimal, datetime, ...) cannot exist.

if __name__ != "__main__":
    # In a tool process these are already globals here (the sources run first, see above).
    from .fields import field_of, takes_context
    from .shape import (
        NotJSON,
        describe,
        error_result,
        generator_value,
        shape,
        shape_model_output,
        to_json,
    )

# The environment variable holding this process's settings (process.py sets it).
CONF_ENV = "_AGENTCORE_TOOL_WORKER_CONF"
# The name runner.py compiles this source under; frames with it are hidden from tracebacks.
SOURCE_NAME = "<agentcore-tool-worker>"

_TOOL_KEYS = frozenset(
    {"name", "description", "input_schema", "inputSchema", "execute", "timeout", "to_model_output"}
)
_TRACEBACK_FRAMES = 3
_UNIQUE_PREFIX = "_agentcore_tool_"
_import_count = itertools.count(1)


# ---------------------------------------------------------------- entry


def main() -> None:
    """Set the process up, then serve calls until the parent goes away."""
    conf = json.loads(os.environ.pop(CONF_ENV))
    cmd_fd, msg_fd = int(conf["cmd_fd"]), int(conf["msg_fd"])
    # Programs a tool starts must not hold our pipes: the parent's EOF has to reach us.
    os.set_inheritable(cmd_fd, False)
    os.set_inheritable(msg_fd, False)
    os.register_at_fork(after_in_child=lambda: _close_quietly(cmd_fd, msg_fd))
    # Orphans below us (a tool's setsid'd or double-forked daemon) become our children, so
    # kill_tree() finds every one of them.
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    sys.path[:] = [str(entry) for entry in conf["sys_path"]]
    _install_import_hooks(conf.get("import_hooks") or [])
    # Edited tool files are re-imported from source; a stale .pyc must never win.
    sys.dont_write_bytecode = True
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            # Line by line: a printed line reaches on_tool_output at once, in one piece.
            reconfigure(encoding="utf-8", errors="backslashreplace", line_buffering=True, write_through=False)
    # A segfault prints where it happened; the crash result quotes it.
    faulthandler.enable(all_threads=False)
    _die_with_parent(int(conf["parent_pid"]))
    worker = Worker(msg_fd)
    threading.Thread(
        target=worker.read_commands, args=(cmd_fd,), name="agentcore-watchdog", daemon=True
    ).start()
    worker.serve()


def _install_import_hooks(names: list[str]) -> None:
    """Re-install the parent's editable-install finders: the child starts without `site` (-S),
    which saves ~30 ms a process, so .pth hooks did not run here."""
    for name in names:
        try:
            __import__(name).install()
        except Exception:  # a missing hook only matters to a tool that needs that package
            pass


_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
# A tree that keeps forking while it is frozen is walked at most this often, then killed as found.
_MAX_TREE_WALKS = 100
# How long a kill waits for SIGKILLed processes to be dead: they die within milliseconds
# unless the machine is starved; the bound keeps a stuck kernel from hanging close().
_DEATH_WAIT_S = 2.0


def _prctl(option: int, value: int) -> bool:
    """prctl(2) on Linux through libc; False elsewhere or when it fails."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _die_with_parent(parent_pid: int) -> None:
    """End the whole tree on SIGTERM (the parent's kill) and, on Linux, when the parent dies.

    A thread acts on the signal at once, through the wakeup fd, whatever the tool on the main
    thread is doing. The death signal is a catchable one on purpose: SIGKILL would end this
    process at once and leave the programs a tool started running as orphans.
    """
    death_signal = int(getattr(signal, "SIGRTMIN", signal.SIGUSR2))
    ending = {int(signal.SIGTERM), death_signal}
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    for signum in ending:
        signal.signal(signum, _noted)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    os.register_at_fork(after_in_child=lambda: _forget_signals(ending, read_fd, write_fd))
    threading.Thread(
        target=_end_on_signal, args=(read_fd, ending), name="agentcore-signals", daemon=True
    ).start()
    if _prctl(_PR_SET_PDEATHSIG, death_signal) and os.getppid() != parent_pid:
        kill_tree()


def _noted(signum: int, frame: Any) -> None:
    """The main thread's half of an ending signal: nothing; the signal thread acts."""


def _end_on_signal(read_fd: int, ending: set[int]) -> None:
    while True:
        try:
            received = os.read(read_fd, 64)
        except InterruptedError:
            continue
        if not received or ending.intersection(received):
            kill_tree()


def _forget_signals(ending: set[int], *fds: int) -> None:
    """In a process a tool forks: SIGTERM kills it again, and our signal pipe is not its own."""
    try:
        signal.set_wakeup_fd(-1)
        for signum in ending:
            signal.signal(signum, signal.SIG_DFL)
    except (ValueError, OSError):
        pass
    _close_quietly(*fds)


def _close_quietly(*fds: int) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


_ending = threading.Lock()


def kill_tree() -> None:
    """Kill everything this process started, then its process group (with it, this process).

    Programs that left the group or the session are found in the process table: as a child
    subreaper, this process inherits every orphan below it. A second caller waits for the end.
    """
    _ending.acquire()
    try:
        kill_descendants(os.getpid())
        os.killpg(os.getpgid(0), signal.SIGKILL)
    finally:
        os._exit(1)


# ---------------------------------------------------------------- the process tree (Linux /proc)
# The parent (tools/process.py) uses these too: this file is their one copy.


def kill_descendants(root: int, spare: frozenset[int] = frozenset(), *, root_alive: bool = True) -> list[int]:
    """SIGKILL every live process below `root`; returns their pids.

    Below means: a child, a child's child, ..., and any member of a process group or session
    one of them is in (a double-forked daemon whose parent is gone still shares its session).
    The tree is frozen first (SIGSTOP) and walked again until a walk finds nobody new, so a
    process forking while we look cannot leave a child behind. Groups and sessions in `spare`
    are not followed (the caller's own). Processes of other users refuse the signal; skipped.
    A `root` no longer alive has no children: only its group and session are followed (a
    process now holding its pid is not its child).
    """
    frozen: set[int] = set()
    for _ in range(_MAX_TREE_WALKS):
        found = [pid for pid in descendants(root, spare, root_alive=root_alive) if pid not in frozen]
        if not found:
            break
        for pid in found:
            _signal(pid, signal.SIGSTOP)
        frozen.update(found)
    for pid in frozen:
        _signal(pid, signal.SIGKILL)
    wait_dead(frozen)
    return sorted(frozen)


def wait_dead(pids: Iterable[int] = (), *, group: int | None = None, timeout: float = _DEATH_WAIT_S) -> bool:
    """Wait until the SIGKILLed `pids` and members of `group` are dead; False if `timeout` ran out.

    SIGKILL does not kill before kill() returns: the process dies when the kernel next runs it,
    which on a busy machine can take a while. Dead means gone or a zombie — a zombie only waits
    for its parent to collect it, which the agent cannot hasten for processes it did not start.
    """
    import time

    watched = set(pids)
    if not watched and group is None:
        return True
    deadline = time.monotonic() + timeout
    while True:
        running = [
            pid
            for pid, (_, pgid, _, state) in _process_table().items()
            if state not in "ZX" and (pid in watched or pgid == group)
        ]
        if not running:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.001)


def descendants(root: int, spare: frozenset[int] = frozenset(), *, root_alive: bool = True) -> list[int]:
    """The live (not zombie) processes below `root` (see kill_descendants), from one /proc read."""
    children: dict[int, list[int]] = {}
    members: dict[int, list[int]] = {}
    table = _process_table()
    for pid, (ppid, pgid, sid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
        members.setdefault(pgid, []).append(pid)
        if sid != pgid:
            members.setdefault(sid, []).append(pid)
    me = os.getpid()
    seen = {root}
    todo = [root, *(pid for pid in members.get(root, []) if root not in spare)]
    while todo:
        pid = todo.pop()
        entry = table.get(pid)
        below: list[int] = []
        if entry is not None and (pid != root or root_alive):
            below.extend(children.get(pid, []))
            for group in {entry[1], entry[2]} - spare:
                below.extend(members.get(group, []))
        for other in below:
            if other not in seen:
                seen.add(other)
                todo.append(other)
    seen.discard(root)
    seen.discard(me)
    return sorted(pid for pid in seen if table.get(pid, (0, 0, 0, "Z"))[3] != "Z")


def _process_table() -> dict[int, tuple[int, int, int, str]]:
    """pid -> (ppid, process group, session, state) of every process in /proc; {} without /proc."""
    table: dict[int, tuple[int, int, int, str]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                # "pid (comm) state ppid pgrp session ...": comm may itself hold ")".
                fields = stat.read().rsplit(b")", 1)[1].split()
            table[int(name)] = (int(fields[1]), int(fields[2]), int(fields[3]), fields[0].decode())
        except (OSError, IndexError, ValueError):
            continue
    return table


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


# ---------------------------------------------------------------- serving


class Worker:
    """Commands come in on a watchdog thread; calls run one at a time on the main thread."""

    def __init__(self, msg_fd: int) -> None:
        self.msg_fd = msg_fd
        self.jobs: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.current_id: Any = None
        self.current_cancel: threading.Event | None = None
        self.cancelled: set[Any] = set()
        self.modules = Modules()

    def read_commands(self, cmd_fd: int) -> None:
        """Read the command pipe until EOF, then kill the process group (the parent is gone)."""
        pending: list[bytes] = []
        try:
            while True:
                chunk = os.read(cmd_fd, 1 << 16)
                if not chunk:
                    break
                *lines, rest = chunk.split(b"\n")
                if lines:
                    lines[0] = b"".join([*pending, lines[0]])
                    pending = []
                    for line in lines:
                        self._command(json.loads(line))
                if rest:
                    pending.append(rest)
        finally:
            kill_tree()

    def _command(self, message: dict[str, Any]) -> None:
        if message.get("op") != "cancel":
            self.jobs.put(message)
            return
        with self.lock:
            if message.get("id") == self.current_id and self.current_cancel is not None:
                self.current_cancel.set()
            else:
                self.cancelled.add(message.get("id"))

    def serve(self) -> None:
        while True:
            job = self.jobs.get()
            if job.get("op") == "ping":
                # A spare (tools.warm) imports now what the first call of any tool needs.
                import inspect  # noqa: F401

                self.send({"op": "pong", "id": job.get("id")})
            elif job.get("op") == "scan":
                try:
                    scanned = self.modules.scan(job["roots"])
                except BaseException as exc:  # the parent must hear back whatever happened
                    scanned = {"error": f"scanning failed: {_exception_text(exc)}"}
                self.send({"op": "scanned", "id": job.get("id"), **scanned})
            else:
                self.send({"op": "result", "id": job.get("id"), "result": self._call(job)})

    def _call(self, job: dict[str, Any]) -> dict[str, Any]:
        cancel = threading.Event()
        with self.lock:
            self.current_id, self.current_cancel = job.get("id"), cancel
            if job.get("id") in self.cancelled:
                self.cancelled.discard(job.get("id"))
                cancel.set()
        try:
            _follow_cwd(job.get("cwd"))
            _follow_trace(job.get("traceparent"))
            return self._run(job, cancel)
        except BaseException as exc:  # the worker must answer whatever happened
            return raised_result(exc)
        finally:
            _flush_std_streams()
            with self.lock:
                self.current_id, self.current_cancel = None, None

    def _run(self, job: dict[str, Any], cancel: threading.Event) -> dict[str, Any]:
        name = str(job["name"])
        try:
            tool = self.modules.tool(job["path"], job["root"], job["version"], name)
        except Exception as exc:
            return error_result(f"Tool {name!r} could not be loaded from {job['path']}: {describe(exc)}")
        if tool is None:
            return error_result(f"Tool {name!r} is no longer defined in {job['path']}.")
        ctx = tool.context(str(job.get("tool_call_id", "")), cancel, str(job.get("agent_id", "")))
        tool_input = job.get("input") or {}
        try:
            value = tool.invoke(tool_input, ctx)
            if isinstance(value, types.CoroutineType):
                import asyncio

                value = asyncio.run(value)
            if isinstance(value, types.GeneratorType):
                value = self._drain(value, job.get("id"), cancel)
        except SystemExit as exc:
            return error_result(f"The tool exited (sys.exit({exc.code!r})) instead of returning a value.")
        except BaseException as exc:
            return raised_result(exc)
        if tool.to_model_output is not None:
            return shape_model_output(tool.to_model_output, value, tool_input)
        return shape(value)

    def _drain(self, generator: Iterator[Any], call_id: Any, cancel: threading.Event) -> Any:
        """Send each yield to the parent as it happens; the value is what shape() needs."""
        yields: list[Any] = []
        while not cancel.is_set():
            try:
                item = next(generator)
            except StopIteration as stop:
                return generator_value(stop.value, yields)
            yields.append(item)
            try:
                data = to_json(item)
            except (NotJSON, RecursionError):
                data = repr(item)
            _flush_std_streams()
            self.send({"op": "yield", "id": call_id, "data": data})
        return None

    def send(self, message: dict[str, Any]) -> None:
        try:
            text = json.dumps(message, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            result = error_result(f"The tool's result cannot be sent to the model: {describe(exc)}")
            text = json.dumps({"op": message.get("op"), "id": message.get("id"), "result": result})
        data = memoryview((text + "\n").encode("utf-8"))
        while data:
            data = data[os.write(self.msg_fd, data) :]


def _follow_cwd(cwd: Any) -> None:
    """Run in the parent's current folder, as a tool running in the agent's process would."""
    try:
        if cwd and cwd != os.getcwd():
            os.chdir(cwd)
    except OSError:
        pass


def _follow_trace(traceparent: Any) -> None:
    """`TRACEPARENT` is the traced call's W3C trace context (telemetry), for the call's duration."""
    if isinstance(traceparent, str):
        os.environ["TRACEPARENT"] = traceparent
    else:
        os.environ.pop("TRACEPARENT", None)


def _flush_std_streams() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # a tool may have replaced or closed them
            pass


# ---------------------------------------------------------------- tools and modules


class Tool:
    """One tool found in a module: a dict with `execute`, or an `@tool` function."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.is_dict = isinstance(obj, Mapping)
        self.name: Any = field_of(obj, "name")
        self.description: Any = field_of(obj, "description")
        schema = field_of(obj, "input_schema")
        self.input_schema: Any = schema if schema is not None else field_of(obj, "inputSchema")
        self.execute: Any = field_of(obj, "execute")
        self.timeout: Any = field_of(obj, "timeout")
        self.to_model_output: Any = field_of(obj, "to_model_output")

    def invoke(self, tool_input: dict[str, Any], ctx: Any) -> Any:
        if not self.is_dict:
            # `@tool` objects convert the input (enums, the ToolContext parameter) themselves.
            return self.execute(tool_input, ctx)
        if takes_context(self.execute):
            return self.execute(tool_input, ctx)
        return self.execute(tool_input)

    def context(self, tool_call_id: str, cancel: threading.Event, agent_id: str) -> Any:
        """The package's own ToolContext when the tool came from `@tool`, else a look-alike."""
        module = sys.modules.get(type(self.obj).__module__) if not self.is_dict else None
        cls = getattr(module, "ToolContext", None) if module is not None else None
        fields: dict[str, Any] = {
            "tool_call_id": tool_call_id,
            "tool_name": str(self.name),
            "cancel": cancel,
            "agent_id": agent_id,
        }
        if isinstance(cls, type):
            try:
                return cls(**fields)
            except TypeError:
                pass
        return Context(**fields)

    def origin_file(self) -> str | None:
        """The file whose code defines the tool (its function's module)."""
        fn = self.obj if not self.is_dict else self.execute
        module = sys.modules.get(str(getattr(fn, "__module__", "")))
        file = getattr(module, "__file__", None)
        return file if isinstance(file, str) else None

    def describe(self) -> dict[str, Any]:
        """The tool's fields for the parent (plain JSON), or ValueError saying what is wrong."""
        name = self.name
        if not isinstance(name, str) or not name:
            raise ValueError("a tool needs a non-empty str 'name'")
        if not callable(self.execute):
            raise ValueError(f"tool {name!r} has no callable execute")
        if self.description is not None and not isinstance(self.description, str):
            raise ValueError(f"tool {name!r}: description must be a str")
        timeout = self.timeout
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            raise ValueError(f"tool {name!r}: timeout must be a number of seconds > 0")
        if self.to_model_output is not None and not callable(self.to_model_output):
            raise ValueError(f"tool {name!r}: to_model_output must be callable")
        return {
            "name": name,
            "description": self.description or "",
            "input_schema": self._schema(),
            "timeout": float(timeout) if timeout is not None else None,
            "extra": self._extra(),
        }

    def _schema(self) -> dict[str, Any]:
        schema = self.input_schema
        if schema is None:
            return {"type": "object", "properties": {}}
        to_schema = getattr(schema, "model_json_schema", None)
        if isinstance(schema, type) and callable(to_schema):
            schema = to_schema()
        if not isinstance(schema, Mapping):
            raise ValueError(f"tool {self.name!r}: input_schema must be a dict, got {type(schema).__name__}")
        try:
            return dict(to_json(schema))
        except (NotJSON, RecursionError) as exc:
            raise ValueError(f"tool {self.name!r}: input_schema is not plain JSON ({exc})") from None

    def _extra(self) -> dict[str, Any]:
        """Other keys of a dict tool that can travel as JSON (shown to the model like in memory tools)."""
        if not self.is_dict:
            mode = getattr(self.obj, "execution_mode", None)
            extra: dict[str, Any] = {"execution_mode": mode} if mode == "sequential" else {}
            # Checked by the parent (tools/scan.py); sent only when not the default.
            if getattr(self.obj, "replay", "never") != "never":
                extra["replay"] = to_json(self.obj.replay)
            if getattr(self.obj, "needs_approval", False) is not False:
                extra["needs_approval"] = to_json(self.obj.needs_approval)
            return extra
        extra = {}
        for key, value in self.obj.items():
            if not isinstance(key, str) or key in _TOOL_KEYS:
                continue
            try:
                extra[key] = to_json(value)
            except (NotJSON, RecursionError):
                continue
        return extra


class Context:
    """A ToolContext look-alike for dict tools: tool_call_id, tool_name, cancel, agent_id."""

    def __init__(self, *, tool_call_id: str, tool_name: str, cancel: threading.Event, agent_id: str) -> None:
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name
        self.cancel = cancel
        self.agent_id = agent_id

    def __repr__(self) -> str:
        return f"ToolContext(tool_call_id={self.tool_call_id!r}, tool_name={self.tool_name!r})"


def is_tool(value: Any) -> bool:
    """A dict with `name` and `execute`, or an object shaped like `@tool` (name, input_schema, execute)."""
    if isinstance(value, Mapping):
        return "name" in value and "execute" in value
    if isinstance(value, type | types.ModuleType):
        return False
    try:
        return (
            isinstance(getattr(value, "name", None), str)
            and isinstance(getattr(value, "input_schema", None), Mapping)
            and callable(getattr(value, "execute", None))
        )
    except Exception:  # an odd object whose attributes raise is simply not a tool
        return False


def module_tools(module: types.ModuleType) -> list[Any]:
    """The tools among a module's public values, and inside its public lists/tuples of tools."""
    names = getattr(module, "__all__", None)
    if not isinstance(names, list | tuple):
        names = [name for name in vars(module) if not name.startswith("_")]
    found: list[Any] = []
    for name in names:
        value = getattr(module, str(name), None)
        if is_tool(value):
            found.append(value)
        elif isinstance(value, list | tuple) and value and all(is_tool(item) for item in value):
            found.extend(value)
    return found


class _SourceLoader(importlib.machinery.SourceFileLoader):
    """Compile from source every time: an edit in the same second with the same size still counts."""

    def get_code(self, fullname: str) -> types.CodeType:
        return compile(self.get_data(self.path), self.path, "exec", dont_inherit=True)


class Modules:
    """The tool files this process has imported, per scanned folder and version (mtime+size stamp).

    Sibling imports (`import utils`) go through `sys.path` and `sys.modules` under plain names,
    which two folders may share; so only the folder in use has its plain names and its
    directories active, and switching folders swaps them.
    """

    def __init__(self) -> None:
        self.versions: dict[str, str] = {}
        self.by_path: dict[str, types.ModuleType] = {}
        self.tools: dict[str, dict[str, Tool]] = {}
        self.plain: dict[str, dict[str, types.ModuleType]] = {}
        self.dirs: dict[str, list[str]] = {}
        self.active: str | None = None

    def tool(self, path: str, root: str, version: str, name: str) -> Tool | None:
        self._enter(root, version)
        tools = self.tools.get(path)
        if tools is None:
            module = self._import(path, root)
            tools = {}
            for obj in module_tools(module):
                tool = Tool(obj)
                tools.setdefault(str(tool.name), tool)
            self.tools[path] = tools
        return tools.get(name)

    def scan(self, roots: list[dict[str, Any]]) -> dict[str, Any]:
        """Import every file of each root and describe its tools; the first failure is reported."""
        described: list[list[dict[str, Any]]] = []
        for spec in roots:
            root, files = str(spec["root"]), [str(file) for file in spec["files"]]
            self._enter(root, str(spec["version"]))
            found: list[tuple[str, Any]] = []
            for path in files:
                try:
                    module = self._import(path, root)
                except BaseException as exc:
                    self._forget(root)
                    # A tool the decorator refused (a bad name) is the caller's config error.
                    kind = "config" if getattr(exc, "kind", None) == "config" else "tool"
                    return {"error": f"cannot import tool file {path}: {_exception_text(exc)}", "kind": kind}
                found.extend((path, obj) for obj in module_tools(module))
            try:
                described.append(_describe_found(found))
            except ValueError as exc:
                return {"error": str(exc)}
        return {"roots": described}

    def _enter(self, root: str, version: str) -> None:
        """Make `root` the active folder, at `version` (an older import of it is dropped)."""
        if self.versions.get(root) != version:
            self._forget(root)
            self.versions[root] = version
        if self.active == root:
            return
        for other, modules in self.plain.items():
            for name, module in modules.items():
                if other != root and sys.modules.get(name) is module:
                    del sys.modules[name]
        sys.modules.update(self.plain.get(root, {}))
        for entry in reversed(self.dirs.get(root, [])):
            if entry in sys.path:
                sys.path.remove(entry)
            sys.path.insert(0, entry)
        self.active = root

    def _forget(self, root: str) -> None:
        """Drop every module loaded from under `root`, so the next use imports the files anew."""
        prefix = os.path.join(root, "")
        for name, module in list(sys.modules.items()):
            file = getattr(module, "__file__", None)
            if isinstance(file, str) and file.startswith(prefix):
                del sys.modules[name]
        for path in [path for path in self.by_path if path.startswith(prefix)]:
            del self.by_path[path]
            self.tools.pop(path, None)
        self.plain.pop(root, None)
        self.versions.pop(root, None)
        importlib.invalidate_caches()
        if "linecache" in sys.modules:
            sys.modules["linecache"].checkcache()

    def _import(self, path: str, root: str) -> types.ModuleType:
        module = self.by_path.get(path)
        if module is not None:
            return module
        dirs = self.dirs.setdefault(root, [root])
        for entry in (os.path.dirname(path), root):
            if entry not in dirs:
                dirs.append(entry)
            if entry in sys.path:
                sys.path.remove(entry)
            sys.path.insert(0, entry)
        try:
            module = _loaded_module(path) or _import_file(path)
        finally:
            self._remember_plain(root)
        self.by_path[path] = module
        return module

    def _remember_plain(self, root: str) -> None:
        """Note the modules of `root` imported under plain names (by sibling imports)."""
        prefix = os.path.join(root, "")
        plain = self.plain.setdefault(root, {})
        for name, module in list(sys.modules.items()):
            file = getattr(module, "__file__", None)
            if isinstance(file, str) and file.startswith(prefix) and not name.startswith(_UNIQUE_PREFIX):
                plain[name] = module


def _describe_found(found: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """Describe each tool once, from the file that defines it (not from files that import it)."""
    files: dict[int, list[str]] = {}
    objects: dict[int, Any] = {}
    for path, obj in found:
        files.setdefault(id(obj), []).append(path)
        objects.setdefault(id(obj), obj)
    described: list[dict[str, Any]] = []
    for key, obj in objects.items():
        tool = Tool(obj)
        origin = tool.origin_file()
        path = origin if origin in files[key] else files[key][0]
        try:
            described.append({**tool.describe(), "path": path})
        except ValueError as exc:
            raise ValueError(f"bad tool in {path}: {exc}") from None
    return described


def _loaded_module(path: str) -> types.ModuleType | None:
    """A module already imported from `path` (a sibling `import helpers`), so it is not loaded twice."""
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) == path:
            return module
    return None


def _import_file(path: str) -> types.ModuleType:
    stem = os.path.splitext(os.path.basename(path))[0]
    # A unique name per file: two folders may both hold a utils.py.
    name = f"{_UNIQUE_PREFIX}{next(_import_count)}_{stem}"
    loader = _SourceLoader(name, path)
    module = types.ModuleType(name)
    module.__file__ = path
    module.__loader__ = loader
    module.__spec__ = importlib.machinery.ModuleSpec(name, loader, origin=path)
    module.__spec__.has_location = True
    sys.modules[name] = module
    try:
        loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    # `import <stem>` from a sibling must find this same module, not a second copy.
    if stem.isidentifier() and stem not in sys.modules:
        sys.modules[stem] = module
    return module


# ---------------------------------------------------------------- errors


def _exception_text(exc: BaseException) -> str:
    """`Type: message` and the last frames of the tool's own code (the worker's are hidden)."""
    import traceback

    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if frame.filename != SOURCE_NAME]
    frames = [frame for frame in frames if not frame.filename.startswith("<frozen importlib")]
    text = describe(exc)
    if not frames:
        return text
    lines = "".join(traceback.format_list(frames[-_TRACEBACK_FRAMES:])).rstrip()
    return f"{text}\nTraceback (last lines):\n{lines}"


def raised_result(exc: BaseException) -> dict[str, Any]:
    """The result for a tool that raised: `Type: message` plus the last lines of its traceback.

    (The parent's `shape.exception_result` names only the line: a memory tool's frames are the
    caller's own code, a tool process's are a file the model cannot see.)
    """
    return error_result(_exception_text(exc), error=describe(exc))


if __name__ == "__main__":
    main()
