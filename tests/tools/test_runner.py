"""Tool processes: reuse, output forwarding, every way a tool fails, kills and the concurrency cap."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import enum
import os
import resource
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from background import returns_within
from proc_checks import alive, gone

from agentcore._utils.cancel import Signal
from agentcore.tools import shape as shape_py
from agentcore.tools.handlers import FileTool
from agentcore.tools.runner import MAX_OUTPUT_BYTES, SOURCE_NAME, ToolPool
from agentcore.tools.scan import scan
from agentcore.tools.toolset import ToolSet

TOOLS = '''
import ctypes, os, signal, subprocess, sys, threading, time
from enum import Enum

from agentcore.tools import ToolContext, tool


class Color(Enum):
    RED = "red"
    BLUE = "blue"


@tool
def whoami(color: Color, ctx: ToolContext) -> dict:
    """Say which process runs the call, and what it was given."""
    return {"pid": os.getpid(), "is_enum": isinstance(color, Color), "ctx": type(ctx).__name__,
            "call": ctx.tool_call_id, "name": ctx.tool_name, "agent": ctx.agent_id}


COUNT = [0]


def _bump(input):
    COUNT[0] += 1
    return COUNT[0]


def _with_ctx(input, ctx):
    return [ctx.tool_call_id, ctx.tool_name, ctx.agent_id, ctx.cancel.is_set()]


def _talk(input):
    print("printed line")
    print("warned", file=sys.stderr)
    subprocess.run(["echo", "hi from echo"], check=True)
    return "talked"


def _wait_for(path):
    deadline = time.monotonic() + 30
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _stream(input):
    yield "a"
    # "b" only once the parent has received "a": a batching runner never gets there
    yield "b" if _wait_for(input["got_a"]) else "a was not delivered while the tool ran"


def _late(input):
    def later():
        if _wait_for(input["returned"]):
            print("LATE OUTPUT", flush=True)
            open(input["printed"], "w").close()
    threading.Thread(target=later).start()
    return "early"


def _raise(input):
    def deeper():
        raise ValueError("bad value " + str(input.get("x")))
    deeper()


def _fork_then_crash(input):
    child = os.fork()
    if child == 0:
        time.sleep(60)  # holds the pipes far longer than the test waits for the result
        os._exit(0)
    print(child, flush=True)
    os._exit(3)


def _cyclic(input):
    items = []
    items.append(items)
    return items


class Thing:
    pass


def _boom(output, input):
    raise RuntimeError("cannot show")


def _ignore_term(input):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(os.getpid(), flush=True)
    time.sleep(60)


def _sleeper(input):
    print(os.getpid(), flush=True)
    time.sleep(input.get("seconds", 30))
    return "slept"


def _window(input):
    start = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process of the machine
    time.sleep(0.3)
    return [start, time.monotonic()]


def _flood(input):
    chunk = "x" * (1 << 20)
    for _ in range(100):
        sys.stdout.write(chunk)
    return "flooded"


def _finish(input):
    return {"stop": True, "output": {"type": "text", "value": "all done"}}


def _image(input):
    return {"output": {"type": "content", "value": [
        {"type": "text", "text": "screen:"},
        {"type": "image", "image": "iVBORw0KGgo=", "media_type": "image/png"}]}}


def _audio_part(input):
    return {"output": {"type": "content", "value": [{"type": "media", "data": "x"}]}}


tools = [
    {"name": "bump", "execute": _bump},
    {"name": "with_ctx", "execute": _with_ctx},
    {"name": "talk", "execute": _talk},
    {"name": "stream", "execute": _stream},
    {"name": "late", "execute": _late},
    {"name": "raise", "execute": _raise},
    {"name": "sys_exit", "execute": lambda input: sys.exit(3)},
    {"name": "os_exit", "execute": lambda input: os._exit(7)},
    {"name": "segfault", "execute": lambda input: ctypes.string_at(0)},
    {"name": "fork_then_crash", "execute": _fork_then_crash},
    {"name": "cyclic", "execute": _cyclic},
    {"name": "function", "execute": lambda input: _cyclic},
    {"name": "thing", "execute": lambda input: Thing()},
    {"name": "bad_model_output", "execute": lambda input: 1, "to_model_output": _boom},
    # 2 s: the tool must have ignored SIGTERM and printed its pid before the timeout, even on a
    # busy machine where starting a process takes a second.
    {"name": "ignore_term", "execute": _ignore_term, "timeout": 2.0},
    {"name": "sleeper", "execute": _sleeper},
    {"name": "sleeper_timeout", "execute": _sleeper, "timeout": 0.3},
    {"name": "window", "execute": _window},
    {"name": "flood", "execute": _flood},
    {"name": "finish", "execute": _finish},
    {"name": "image", "execute": _image},
    {"name": "audio_part", "execute": _audio_part},
]
'''


def file_tool(tools: ToolSet, name: str) -> FileTool:
    handler = tools.handlers[name]
    assert isinstance(handler, FileTool)
    return handler


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> ToolSet:
    folder = tmp_path_factory.mktemp("runner_tools")
    (folder / "many.py").write_text(TOOLS)
    return scan(folder)


@pytest.fixture(scope="module")
def pool() -> Iterator[ToolPool]:
    pool = ToolPool()
    yield pool
    pool.close()


def run(
    pool: ToolPool, tools: ToolSet, name: str, input: dict[str, Any] | None = None, **options: Any
) -> Any:
    options.setdefault("tool_call_id", "call_1")
    return pool.run(file_tool(tools, name), input or {}, **options)


def wait_gone(pid: int, within_s: float = 30.0) -> bool:
    return gone([pid], within_s)


class Collect:
    """An on_output callback that remembers payloads."""

    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []

    def __call__(self, payload: dict[str, Any]) -> None:
        self.payloads.append(payload)

    def text(self, stream: str) -> str:
        return "".join(p["data"] for p in self.payloads if p["stream"] == stream)

    def first_pid(self) -> int:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            text = self.text("stdout")
            if "\n" in text:
                return int(text.split()[0])
            time.sleep(0.01)
        raise AssertionError("the tool never printed its pid")


# ---------------------------------------------------------------- reuse and context


def test_a_clean_process_is_reused_with_its_module_still_imported(pool: ToolPool, tools: ToolSet) -> None:
    first = run(pool, tools, "bump")["output"]["value"]
    second = run(pool, tools, "bump")["output"]["value"]
    assert second == first + 1
    pids = {run(pool, tools, "whoami", {"color": "red"})["output"]["value"]["pid"] for _ in range(3)}
    assert len(pids) == 1 and os.getpid() not in pids


def test_tool_function_gets_its_tool_context_and_enum_members(pool: ToolPool, tools: ToolSet) -> None:
    value = run(pool, tools, "whoami", {"color": "blue"}, tool_call_id="call_9", agent_id="agent_7")
    assert value["output"]["value"] | {"pid": 0} == {
        "pid": 0,
        "is_enum": True,
        "ctx": "ToolContext",
        "call": "call_9",
        "name": "whoami",
        "agent": "agent_7",
    }


def test_dict_tool_taking_two_parameters_gets_the_context(pool: ToolPool, tools: ToolSet) -> None:
    result = run(pool, tools, "with_ctx", tool_call_id="call_3", agent_id="a1")
    assert result == {"output": {"type": "json", "value": ["call_3", "with_ctx", "a1", False]}}


# ---------------------------------------------------------------- output


def test_stdout_stderr_and_programs_started_by_the_tool_reach_on_output(
    pool: ToolPool, tools: ToolSet
) -> None:
    seen = Collect()
    result = run(pool, tools, "talk", on_output=seen, tool_call_id="call_t")
    assert result == {"output": {"type": "text", "value": "talked"}}
    assert seen.text("stdout") == "printed line\nhi from echo\n"
    assert seen.text("stderr") == "warned\n"
    assert all(p["tool_call_id"] == "call_t" and p["tool_name"] == "talk" for p in seen.payloads)
    assert all(isinstance(p["data"], str) for p in seen.payloads)


def test_generator_yields_arrive_as_they_happen(pool: ToolPool, tools: ToolSet, tmp_path: Path) -> None:
    got_a = tmp_path / "got_a"

    class TellTheTool(Collect):
        def __call__(self, payload: dict[str, Any]) -> None:
            super().__call__(payload)
            if payload["stream"] == "yield" and payload["data"] == "a":
                got_a.touch()  # the tool yields "b" only after this

    seen = TellTheTool()
    result = run(pool, tools, "stream", {"got_a": str(got_a)}, on_output=seen)
    assert [p["data"] for p in seen.payloads if p["stream"] == "yield"] == ["a", "b"]
    assert result == {"output": {"type": "text", "value": "ab"}}


def test_output_written_after_the_call_returned_is_dropped(
    pool: ToolPool, tools: ToolSet, tmp_path: Path
) -> None:
    returned, printed = tmp_path / "returned", tmp_path / "printed"
    first, second = Collect(), Collect()
    paths = {"returned": str(returned), "printed": str(printed)}
    assert run(pool, tools, "late", paths, on_output=first)["output"]["value"] == "early"
    returned.touch()  # the tool's thread prints only now, after the call returned ...
    deadline = time.monotonic() + 30
    while not printed.exists():  # ... and before the next call starts
        assert time.monotonic() < deadline, "the late thread never printed"
        time.sleep(0.01)
    run(pool, tools, "bump", on_output=second)
    assert "LATE" not in first.text("stdout") + second.text("stdout")


def test_a_flood_of_output_is_bounded(pool: ToolPool, tools: ToolSet) -> None:
    seen = Collect()
    peak_before_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = run(pool, tools, "flood", on_output=seen)
    assert result == {"output": {"type": "text", "value": "flooded"}}
    forwarded = seen.text("stdout")
    assert MAX_OUTPUT_BYTES <= len(forwarded) < MAX_OUTPUT_BYTES + 200
    assert forwarded.endswith("output was dropped]\n")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before_kib < 100 * 1024


# ---------------------------------------------------------------- results


def test_stop_and_content_results_pass_through(pool: ToolPool, tools: ToolSet) -> None:
    assert run(pool, tools, "finish") == {"output": {"type": "text", "value": "all done"}, "stop": True}
    image = run(pool, tools, "image")["output"]
    assert image["type"] == "content" and image["value"][1]["media_type"] == "image/png"
    rejected = run(pool, tools, "audio_part")
    assert "only text, image and file parts" in rejected["error"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("raise", ["ValueError: bad value 5", "many.py", "in deeper", 'raise ValueError("bad value "']),
        ("sys_exit", ["sys.exit(3)"]),
        ("os_exit", ["exited with code 7"]),
        ("segfault", ["SIGSEGV", "Segmentation fault", "many.py"]),
        ("cyclic", ["cannot be sent to the model", "cyclic"]),
        ("function", ["cannot be sent to the model", "function"]),
        ("thing", ["cannot be sent to the model", "Thing"]),
        ("bad_model_output", ["to_model_output failed: RuntimeError: cannot show"]),
    ],
)
def test_every_failure_becomes_a_readable_result_and_the_pool_goes_on(
    pool: ToolPool, tools: ToolSet, name: str, expected: list[str]
) -> None:
    result = run(pool, tools, name, {"x": 5})
    assert result["output"]["type"] == "error-text"
    for text in expected:
        assert text in result["output"]["value"]
    assert "error" in result and SOURCE_NAME not in result["output"]["value"]
    assert run(pool, tools, "bump")["output"]["type"] == "json"


def test_a_crash_is_seen_at_once_even_when_a_forked_child_lives_on(pool: ToolPool, tools: ToolSet) -> None:
    # The child holds the process's pipes for 60 s; the call must end with the crash, not with
    # the pipes, so it returns well within returns_within's 30 s.
    seen = Collect()
    try:
        result = returns_within(lambda: run(pool, tools, "fork_then_crash", on_output=seen))
        assert "exited with code 3" in result["error"]
    finally:
        text = seen.text("stdout")
        if text.strip():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(text.split()[0]), signal.SIGKILL)


# ---------------------------------------------------------------- killing


def test_a_tool_ignoring_sigterm_is_killed_at_its_timeout(pool: ToolPool, tools: ToolSet) -> None:
    # Warm, so the tool runs (and prints its pid) well before its 2 s timeout even on a busy machine.
    run(pool, tools, "bump")
    seen = Collect()
    start = time.monotonic()
    # The tool sleeps 60 s after ignoring SIGTERM: returning within 30 s means it was killed.
    result = returns_within(lambda: run(pool, tools, "ignore_term", on_output=seen))
    assert time.monotonic() - start >= 2.0, "not before its timeout (the runner waits 2 s)"
    assert result == {
        "output": {"type": "error-text", "value": "The tool timed out after 2 s and was stopped."},
        "error": "timeout",
    }
    assert wait_gone(seen.first_pid())


def test_cancel_interrupts_the_call_at_once(pool: ToolPool, tools: ToolSet) -> None:
    cancel, seen = Signal(), Collect()

    def cancel_once_running() -> None:
        seen.first_pid()  # the tool is inside its 120 s sleep
        cancel.set()

    threading.Thread(target=cancel_once_running, daemon=True).start()
    result = returns_within(
        lambda: run(pool, tools, "sleeper", {"seconds": 120}, cancel=cancel, on_output=seen)
    )
    assert result["interrupted"] is True and result["output"]["type"] == "error-text"
    assert wait_gone(seen.first_pid())


def test_kill_running_interrupts_every_busy_call(pool: ToolPool, tools: ToolSet) -> None:
    results: list[Any] = []
    outputs = [Collect(), Collect()]
    threads = [
        threading.Thread(
            target=lambda c=c: results.append(run(pool, tools, "sleeper", {"seconds": 120}, on_output=c))
        )
        for c in outputs
    ]
    for thread in threads:
        thread.start()
    pids = [c.first_pid() for c in outputs]
    returns_within(pool.kill_running)
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads), "a call outlived kill_running()"
    assert [r.get("interrupted") for r in results] == [True, True]
    assert not any(alive(pid) for pid in pids)
    assert run(pool, tools, "bump")["output"]["type"] == "json"


def test_close_kills_idle_processes(tools: ToolSet) -> None:
    own = ToolPool()
    pid = run(own, tools, "whoami", {"color": "red"})["output"]["value"]["pid"]
    assert alive(pid)
    own.close()
    assert not alive(pid)


def test_calls_beyond_max_concurrency_queue(tools: ToolSet) -> None:
    capped = ToolPool(max_concurrency=2)
    windows: list[list[float]] = []
    threads = [
        threading.Thread(target=lambda: windows.append(run(capped, tools, "window")["output"]["value"]))
        for _ in range(4)
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        capped.close()
    assert len(windows) == 4
    for start, _ in windows:
        overlapping = sum(1 for s, e in windows if s <= start < e)
        assert overlapping <= 2


def test_a_queued_call_is_interrupted_by_its_cancel(tools: ToolSet) -> None:
    capped = ToolPool(max_concurrency=1)
    stop_blocker, seen = Signal(), Collect()
    blocker = threading.Thread(
        target=lambda: run(capped, tools, "sleeper", {"seconds": 120}, cancel=stop_blocker, on_output=seen)
    )
    blocker.start()
    cancel = Signal()

    def cancel_once_queued() -> None:
        seen.first_pid()  # the blocker holds the only slot
        deadline = time.monotonic() + 30
        while True:  # the queued call is registered: it waits on the pool's condition
            with capped._lock:
                if len(capped._tickets) == 2:
                    break
            assert time.monotonic() < deadline, "the second call never queued"
            time.sleep(0.01)
        cancel.set()

    threading.Thread(target=cancel_once_queued, daemon=True).start()
    try:
        result = returns_within(lambda: run(capped, tools, "bump", cancel=cancel))
        assert blocker.is_alive(), "the queued call returned while the slot was still taken"
    finally:
        stop_blocker.set()
        blocker.join(30)
        capped.close()
    assert result.get("interrupted") is True


def test_crashed_and_killed_processes_leave_no_open_pipes_behind(tools: ToolSet) -> None:
    own = ToolPool()

    def crash_and_kill() -> None:
        for name in ("os_exit", "segfault", "raise"):
            run(own, tools, name)
        cancel = Signal()  # set by the sleeper's first output: it is killed while it runs
        run(own, tools, "sleeper", {"seconds": 120}, cancel=cancel, on_output=lambda _: cancel.set())

    try:
        crash_and_kill()
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(3):
            crash_and_kill()
        assert len(os.listdir("/proc/self/fd")) == before
    finally:
        own.close()


# ---------------------------------------------------------------- the rules the worker shares


class Mood(enum.Enum):
    GOOD = "good"


# The values below, built in the tool process: each reaches the model shaped as shape.py shapes it.
VALUES_TOOL = """
import datetime as dt, decimal, enum, uuid
from pathlib import Path


class Mood(enum.Enum):
    GOOD = "good"


VALUES = [
    None, "text", 3, 2.5, float("nan"), True, [1, (2, 3)], {"b": {1, 2}}, {1: "x", None: "y"},
    dt.datetime(2024, 1, 2, 3, 4, 5), dt.date(2024, 1, 2), b"\\x00\\xff", decimal.Decimal("1.5"),
    Mood.GOOD, Path("/tmp/x"), uuid.UUID(int=1), object(), {"output": "plain"},
    {"output": {"type": "json", "value": {"a": (1,)}}}, {"stop": True}, {"stop": True, "output": 4},
    {"output": {"type": "nope", "value": 1}}, {"output": {"type": "content", "value": [{"type": "audio"}]}},
    {"output": {"type": "text", "value": 3}}, {"output": 1, "extra": 2}, {(1, 2): 3},
]

tool = {"name": "value", "execute": lambda input: VALUES[input["i"]]}
"""

VALUES = [
    None,
    "text",
    3,
    2.5,
    float("nan"),
    True,
    [1, (2, 3)],
    {"b": {1, 2}},
    {1: "x", None: "y"},
    dt.datetime(2024, 1, 2, 3, 4, 5),
    dt.date(2024, 1, 2),
    b"\x00\xff",
    decimal.Decimal("1.5"),
    Mood.GOOD,
    Path("/tmp/x"),
    uuid.UUID(int=1),
    object(),
    {"output": "plain"},
    {"output": {"type": "json", "value": {"a": (1,)}}},
    {"stop": True},
    {"stop": True, "output": 4},
    {"output": {"type": "nope", "value": 1}},
    {"output": {"type": "content", "value": [{"type": "audio"}]}},
    {"output": {"type": "text", "value": 3}},
    {"output": 1, "extra": 2},
    {(1, 2): 3},
]


def test_a_tool_process_shapes_values_exactly_like_shape_py(pool: ToolPool, tmp_path: Path) -> None:
    """The worker once carried a copy of shape.py, kept equal by a sampled test; now it runs the
    file's own source, so a value shaped in a tool process is shaped as in this one."""
    (tmp_path / "values.py").write_text(VALUES_TOOL)
    values = scan(tmp_path)
    for index, value in enumerate(VALUES):
        result = run(pool, values, "value", {"i": index})
        assert result == shape_py.shape(value), (index, value)
