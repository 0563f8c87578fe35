"""Nothing a file tool starts outlives its kill: not even programs that left its group or session.

API.md §Details "Tool processes and their descendants". Before the fix a program that called
setsid() (or double-forked into a daemon) kept running after a timeout, stop(), close() and
the agent's own death, and a program started by importing a tool file outlived the scan.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from proc_checks import alive, gone

from agentcore import Agent, AgentError
from agentcore.testing import ModelServer
from agentcore.tools import load, scan

MakeAgent = Callable[..., Agent]
REPO = str(Path(__file__).resolve().parents[2])

# Run as `python escape.prog MODE OUT`: starts processes that leave the tool's group and
# session, each appending its pid to OUT; the last one creates OUT.ready.
ESCAPE = """
import os, subprocess, sys, time

mode, out = sys.argv[1], sys.argv[2]

def note():
    with open(out, "a") as f:
        f.write(f"{os.getpid()}\\n")

def ready():
    open(out + ".ready", "w").close()

if mode == "setsid":
    # A grandchild in a session (and group) of its own.
    os.setsid()
    note()
    ready()
    time.sleep(60)
elif mode == "daemon":
    # The classic double fork: the daemon's parent is gone before the tool goes on.
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            note()
            ready()
            time.sleep(60)
        os._exit(0)
    os.wait()
else:
    # chainN: N links, each in a new session, each starting the next.
    links = int(mode[len("chain"):])
    os.setsid()
    note()
    if links > 1:
        subprocess.Popen([sys.executable, __file__, f"chain{links - 1}", out])
    else:
        ready()
    time.sleep(60)
"""

TOOLS = """
import os, signal, subprocess, sys, time

def _escape(input):
    subprocess.Popen([sys.executable, input["prog"], input["mode"], input["pids"]])
    deadline = time.monotonic() + 30
    while not os.path.exists(input["pids"] + ".ready") and time.monotonic() < deadline:
        time.sleep(0.01)

def _hang(input):
    _escape(input)
    time.sleep(60)

def _stubborn(input):
    # The tool process itself ignores SIGTERM: only the parent's SIGKILL path is left.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _hang(input)

def _background(input):
    _escape(input)
    return "left them running"

def _crash(input):
    # A program in a group of its own (same session), then the tool process dies at once.
    child = subprocess.Popen(["sleep", "60"], process_group=0)
    with open(input["pids"], "w") as f:
        f.write(str(child.pid))
    os._exit(3)

escape_crash = {"name": "escape_crash", "execute": _crash}
escape_hang = {"name": "escape_hang", "execute": _hang}
sleep_timeout = {"name": "sleep_timeout", "execute": lambda input: time.sleep(60), "timeout": 0.5}
escape_stubborn = {"name": "escape_stubborn", "execute": _stubborn}
escape_background = {"name": "escape_background", "execute": _background}
"""

# The agent in a process of its own, so the test can SIGKILL it mid-call.
AGENT = """
import sys, threading
sys.path.insert(0, {repo!r})
from agentcore import Agent
from agentcore import Agent, AgentError
from agentcore.testing import ModelServer
from agentcore.tools import load

server = ModelServer().start()
server.add({{"tool_calls": [{{"name": "escape_hang", "arguments": {arguments!r}}}]}}, "never")
agent = Agent(config={{"base_url": server.base_url, "model": "m"}}, tools=load({folder!r}))
agent.send("go")
"""

MODES = ["setsid", "daemon", "chain3"]
EXPECTED = {"setsid": 1, "daemon": 1, "chain3": 3}


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("escaping")
    (base / "tools").mkdir()
    (base / "tools" / "escaping.py").write_text(TOOLS)
    (base / "escape.prog").write_text(ESCAPE)
    return base / "tools", base / "escape.prog"


def arguments(folders: tuple[Path, Path], mode: str, tmp_path: Path) -> dict[str, str]:
    return {"prog": str(folders[1]), "mode": mode, "pids": str(tmp_path / "pids")}


def escaped_pids(tmp_path: Path, mode: str, within_s: float = 30.0) -> list[int]:
    """The pids the escaping programs reported, once all are running (each outside the tool's session)."""
    ready = tmp_path / "pids.ready"
    deadline = time.monotonic() + within_s
    while not ready.exists():
        if time.monotonic() > deadline:
            raise AssertionError("the escaping programs never got ready")
        time.sleep(0.01)
    pids = [int(line) for line in (tmp_path / "pids").read_text().split()]
    assert len(pids) == EXPECTED[mode] and all(alive(pid) for pid in pids)
    assert all(os.getsid(pid) == pid for pid in pids if mode != "daemon")
    assert all(os.getsid(pid) not in (os.getsid(0), os.getpid()) for pid in pids)
    return pids


def send_in_thread(agent: Any, results: list[Any]) -> threading.Thread:
    """agent.send("go") on a thread; `results` gets its SendResult or the exception it raised."""

    def send() -> None:
        try:
            results.append(agent.send("go"))
        except Exception as exc:
            results.append(exc)

    thread = threading.Thread(target=send)
    thread.start()
    return thread


def script(server: ModelServer, tool: str, args: dict[str, str], *after: str) -> None:
    server.add({"tool_calls": [{"name": tool, "arguments": args}]}, *after)


@pytest.mark.parametrize("mode", MODES)
def test_escaped_descendants_die_at_a_timeout(
    mode: str, folders: tuple[Path, Path], tmp_path: Path, server: ModelServer, make_agent: MakeAgent
) -> None:
    """Round 1 leaves the escaped programs running under the (idle, reused) tool process; the
    call of round 2 in that process times out. Both calls need no timing: round 1 has no
    timeout, and the sleep of round 2 always outlasts its 0.5 s."""
    server.add(
        {"tool_calls": [{"name": "escape_background", "arguments": arguments(folders, mode, tmp_path)}]},
        {"tool_calls": [{"name": "sleep_timeout", "arguments": {}}]},
        "done",
    )
    agent = make_agent(server, tools=load(folders[0]), no_tool_rounds=1)
    result = agent.send("go")
    assert result.reason == "no-tool"
    assert "timed out" in str(agent.history[-2]["content"])
    pids = [int(line) for line in (tmp_path / "pids").read_text().split()]
    assert len(pids) == EXPECTED[mode]
    assert gone(pids)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool", ["escape_hang", "escape_stubborn"])
def test_escaped_descendants_die_at_stop(
    mode: str,
    tool: str,
    folders: tuple[Path, Path],
    tmp_path: Path,
    server: ModelServer,
    make_agent: MakeAgent,
) -> None:
    script(server, tool, arguments(folders, mode, tmp_path), "never")
    agent = make_agent(server, tools=load(folders[0]), no_tool_rounds=1)
    results: list[Any] = []
    thread = send_in_thread(agent, results)
    pids = escaped_pids(tmp_path, mode)
    agent.stop()
    thread.join(30)
    assert isinstance(results[0], AgentError) and results[0].kind == "aborted"
    assert gone(pids)


@pytest.mark.parametrize("mode", MODES)
def test_escaped_descendants_of_an_idle_tool_process_die_at_close(
    mode: str, folders: tuple[Path, Path], tmp_path: Path, server: ModelServer, make_agent: MakeAgent
) -> None:
    script(server, "escape_background", arguments(folders, mode, tmp_path), "done")
    agent = make_agent(server, tools=load(folders[0]), no_tool_rounds=1)
    assert agent.send("go").reason == "no-tool"
    pids = escaped_pids(tmp_path, mode)
    agent.close()
    assert gone(pids)


@pytest.mark.parametrize("mode", MODES)
def test_close_returns_only_once_the_escaped_descendants_are_dead(
    mode: str, folders: tuple[Path, Path], tmp_path: Path, server: ModelServer, make_agent: MakeAgent
) -> None:
    """API.md: nothing the agent started outlives close() — dead when it returns, not soon after.

    SIGKILL only marks a process; it dies when the kernel next runs it, so close() waits for that.
    """
    script(server, "escape_background", arguments(folders, mode, tmp_path), "done")
    agent = make_agent(server, tools=load(folders[0]), no_tool_rounds=1)
    assert agent.send("go").reason == "no-tool"
    pids = escaped_pids(tmp_path, mode)
    agent.close()
    assert [pid for pid in pids if alive(pid)] == []


@pytest.mark.parametrize("mode", MODES)
def test_escaped_descendants_die_with_the_agents_process(
    mode: str, folders: tuple[Path, Path], tmp_path: Path
) -> None:
    code = AGENT.format(repo=REPO, folder=str(folders[0]), arguments=arguments(folders, mode, tmp_path))
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)])
    try:
        pids = escaped_pids(tmp_path, mode)
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
    assert gone(pids)


def test_a_crashed_tool_process_leaves_nothing_in_its_session(
    folders: tuple[Path, Path], tmp_path: Path, server: ModelServer, make_agent: MakeAgent
) -> None:
    """A program in another process group of the tool's session outlived a crash of the tool."""
    server.add({"tool_calls": [{"name": "escape_crash", "arguments": {"pids": str(tmp_path / "p")}}]}, "done")
    agent = make_agent(server, tools=load(folders[0]), no_tool_rounds=1)
    assert agent.send("go").reason == "no-tool"
    assert "exited with code 3" in str(agent.history[2]["content"])
    (pid,) = [int(part) for part in (tmp_path / "p").read_text().split()]
    assert gone([pid])


def test_the_scanning_process_and_what_an_import_started_end_with_the_scan(
    folders: tuple[Path, Path], tmp_path: Path
) -> None:
    """The scan's process used to stay alive (idle, in the shared pool) until interpreter exit."""
    tools = tmp_path / "tools"
    tools.mkdir()
    pids = tmp_path / "pids"
    (tools / "starts_a_daemon.py").write_text(
        textwrap.dedent(
            f"""
            import os, subprocess, sys, time
            with open({str(tmp_path / "scanner")!r}, "w") as f:
                f.write(str(os.getpid()))
            subprocess.Popen([sys.executable, {str(folders[1])!r}, "daemon", {str(pids)!r}]).wait()
            while not os.path.exists({str(pids) + ".ready"!r}):
                time.sleep(0.01)
            noop = {{"name": "noop", "execute": lambda input: None}}
            """
        )
    )
    found = scan(tools)
    assert list(found.schema) == ["noop"]
    scanner = int((tmp_path / "scanner").read_text())
    assert not alive(scanner)
    (daemon,) = [int(line) for line in pids.read_text().split()]
    assert gone([daemon])
