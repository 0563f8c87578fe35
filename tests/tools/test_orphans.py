"""No tool process, nor any program a tool started, outlives its call's kill or this process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from proc_checks import alive, gone

from agentcore.tools.handlers import FileTool
from agentcore.tools.runner import ToolPool
from agentcore.tools.scan import scan
from agentcore.tools.toolset import ToolSet

REPO = str(Path(__file__).resolve().parents[2])

# Each tool starts a grandchild (`sleep`) and writes "<tool pid> <grandchild pid>" to input["pids"].
TOOLS = """
import os, subprocess, time

def _start_grandchild(input):
    child = subprocess.Popen(["sleep", "60"])
    with open(input["pids"] + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {child.pid}")
    os.replace(input["pids"] + ".tmp", input["pids"])
    return child

def _hang(input):
    _start_grandchild(input)
    time.sleep(60)

def _background(input):
    _start_grandchild(input)
    return "left a grandchild running"

hang = {"name": "hang", "execute": _hang}
# 2 s, not less: the tool must have started its grandchild and written the pids before the timeout
# hits, and on a busy machine (2 cores beside a CPU hog) starting a process can take a second.
hang_timeout = {"name": "hang_timeout", "execute": _hang, "timeout": 2.0}
background = {"name": "background", "execute": _background}
"""

PARENT = """
import sys, threading, time
sys.path.insert(0, {repo!r})
from agentcore.tools.runner import ToolPool
from agentcore.tools.scan import scan

tools = scan({folder!r})
pool = ToolPool()
args = (tools.handlers[{tool!r}], {{"pids": {pids!r}}})
if {background!r}:
    threading.Thread(target=pool.run, args=args, kwargs={{"tool_call_id": "c"}}, daemon=True).start()
    time.sleep(60)
print(pool.run(*args, tool_call_id="c")["output"]["value"], flush=True)
sys.stdin.readline()
"""


def file_tool(tools: ToolSet, name: str) -> FileTool:
    handler = tools.handlers[name]
    assert isinstance(handler, FileTool)
    return handler


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> ToolSet:
    folder = tmp_path_factory.mktemp("orphan_tools")
    (folder / "spawning.py").write_text(TOOLS)
    return scan(folder)


def read_pids(path: Path, within_s: float = 30.0) -> list[int]:
    deadline = time.monotonic() + within_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError("the tool never reported its pids")
        time.sleep(0.01)
    pids = [int(part) for part in path.read_text().split()]
    assert all(alive(pid) for pid in pids)
    return pids


def in_thread(fn: Any) -> tuple[threading.Thread, list[Any]]:
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(fn()))
    thread.start()
    return thread, results


def test_nothing_survives_a_timeout(tools: ToolSet, tmp_path: Path) -> None:
    pool = ToolPool()
    try:
        # Warm first: a cold start on a busy machine could outlast the 2 s timeout before the
        # tool reports its pids. The reused process then also holds the first grandchild.
        pool.run(file_tool(tools, "background"), {"pids": str(tmp_path / "w")}, tool_call_id="w")
        earlier = read_pids(tmp_path / "w")
        handler, pids_file = file_tool(tools, "hang_timeout"), str(tmp_path / "p")
        thread, results = in_thread(lambda: pool.run(handler, {"pids": pids_file}, tool_call_id="t"))
        pids = read_pids(tmp_path / "p")
        thread.join(30)
        assert not thread.is_alive() and results[0]["error"] == "timeout"
        # SIGKILLed, they die once scheduled; their 60 s sleeps mean only the kill ends them in 30 s.
        assert gone([*earlier, *pids])
    finally:
        pool.close()


def test_nothing_survives_kill_running(tools: ToolSet, tmp_path: Path) -> None:
    pool = ToolPool()
    try:
        thread, results = in_thread(
            lambda: pool.run(file_tool(tools, "hang"), {"pids": str(tmp_path / "p")}, tool_call_id="c")
        )
        pids = read_pids(tmp_path / "p")
        pool.kill_running()
        assert gone(pids)
        thread.join(30)
        assert not thread.is_alive() and results[0]["interrupted"] is True
    finally:
        pool.close()


def test_close_kills_idle_processes_and_what_they_left_running(tools: ToolSet, tmp_path: Path) -> None:
    pool = ToolPool()
    result = pool.run(file_tool(tools, "background"), {"pids": str(tmp_path / "p")}, tool_call_id="c")
    assert result["output"]["value"] == "left a grandchild running"
    pids = read_pids(tmp_path / "p")
    pool.close()
    assert gone(pids)


def start_parent(tools: ToolSet, tool: str, pids: Path, *, background: bool) -> subprocess.Popen[str]:
    folder = file_tool(tools, tool).folder
    script = PARENT.format(repo=REPO, folder=folder, tool=tool, pids=str(pids), background=background)
    command = [sys.executable, "-c", textwrap.dedent(script)]
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_nothing_survives_the_parent_being_sigkilled(tools: ToolSet, tmp_path: Path) -> None:
    parent = start_parent(tools, "hang", tmp_path / "p", background=True)
    try:
        pids = read_pids(tmp_path / "p")
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.communicate()
    assert gone(pids)


def test_nothing_survives_the_parent_exiting_normally(tools: ToolSet, tmp_path: Path) -> None:
    parent = start_parent(tools, "background", tmp_path / "p", background=False)
    pids = read_pids(tmp_path / "p")
    out, _ = parent.communicate("exit now\n", timeout=20)
    assert parent.returncode == 0 and "left a grandchild running" in out
    assert gone(pids)
