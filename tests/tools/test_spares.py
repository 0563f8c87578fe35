"""`agentcore.tools.warm(n)`: tool processes started ahead of need keep every kill guarantee.

The spares are taken by the first calls of any pool (a new agent's first round, execute()),
are that pool's from then on, and never outlive warm(0), interpreter exit or a SIGKILL of
this process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from proc_checks import gone

from agentcore import Agent, AgentError
from agentcore.testing import ModelServer
from agentcore.tools import load, warm

MakeAgent = Callable[..., Agent]
REPO = str(Path(__file__).resolve().parents[2])

TOOLS = """
import os

def _whoami(input):
    return os.getpid()

whoami = {"name": "whoami", "execute": _whoami}
"""


@pytest.fixture(autouse=True)
def no_spares_left() -> Iterator[None]:
    yield
    warm(0)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "who.py").write_text(TOOLS)
    return tmp_path / "tools"


def children() -> set[int]:
    """Live child processes of this process (from /proc)."""
    found = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            found.add(int(name))
    return found


def spawned_by(action: Callable[[], Any]) -> set[int]:
    before = children()
    action()
    return children() - before


def test_a_new_agents_first_round_runs_in_the_spares(
    folder: Path, server: ModelServer, make_agent: MakeAgent
) -> None:
    tools = load(folder)
    spares = spawned_by(lambda: warm(2, tools))
    assert len(spares) == 2
    server.add({"tool_calls": [{"name": "whoami"}, {"name": "whoami"}]}, "done")
    agent = make_agent(server, tools=tools, no_tool_rounds=1)
    assert agent.send("who").reason == "no-tool"
    pids = {part["output"]["value"] for part in agent.history[2]["content"]}
    assert pids <= spares and pids
    # They are the agent's now: close() ends them.
    agent.close()
    assert gone(pids)
    assert warm(0) == 0


def test_warm_zero_stops_the_spares_and_warm_n_tops_up() -> None:
    first = spawned_by(lambda: warm(2))
    assert len(first) == 2
    more = spawned_by(lambda: warm(3))
    assert len(more) == 1
    assert warm(1) == 1
    assert warm(0) == 0
    assert gone(first | more)


def test_bad_arguments_are_config_errors(folder: Path) -> None:
    for n in (-1, True, 1.5, "2"):
        with pytest.raises(AgentError) as info:
            warm(n)  # type: ignore[arg-type]
        assert info.value.kind == "config"
    with pytest.raises(AgentError) as info:
        warm(1, [folder])  # type: ignore[arg-type]
    assert info.value.kind == "config"


def test_a_tool_file_that_fails_to_import_fails_warm_and_leaves_no_process(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("ok = {'name': 'ok', 'execute': lambda input: 1}\n")
    tools = load(tmp_path)
    (tmp_path / "ok.py").write_text("raise RuntimeError('broken now')\n")
    os.utime(tmp_path / "ok.py")

    def attempt() -> None:
        with pytest.raises(AgentError) as info:
            warm(2, tools)
        assert info.value.kind == "tool" and "broken now" in str(info.value)

    started = spawned_by(attempt)
    assert not started or gone(started)
    assert warm(0) == 0


SPARES = """
import os, sys
sys.path.insert(0, {repo!r})
from agentcore.tools import warm
before = set(os.listdir("/proc"))
warm(2)
print(" ".join(p for p in os.listdir("/proc") if p not in before and p.isdigit()), flush=True)
sys.stdin.readline()
"""


@pytest.mark.parametrize("how", ["exit", "sigkill"])
def test_spares_never_outlive_this_process(how: str) -> None:
    code = textwrap.dedent(SPARES.format(repo=REPO))
    parent = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    line = parent.stdout.readline()
    pids = {int(pid) for pid in line.split()}
    spares = {pid for pid in pids if _parent_of(pid) == parent.pid}
    assert len(spares) == 2
    if how == "sigkill":
        os.kill(parent.pid, signal.SIGKILL)
        parent.communicate()
    else:
        parent.communicate("exit\n", timeout=30)
        assert parent.returncode == 0
    assert gone(spares)


def _parent_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        return -1


def test_stop_kills_a_spare_taken_by_a_call(folder: Path, server: ModelServer, make_agent: MakeAgent) -> None:
    (folder / "hang.py").write_text(
        "import os, time\n"
        "def _hang(input):\n"
        "    open(input['marker'], 'w').write(str(os.getpid()))\n"
        "    time.sleep(60)\n"
        "hang = {'name': 'hang', 'execute': _hang}\n"
    )
    tools = load(folder)
    spares = spawned_by(lambda: warm(1, tools))
    marker = folder.parent / "marker"
    server.add({"tool_calls": [{"name": "hang", "arguments": {"marker": str(marker)}}]}, "never")
    agent = make_agent(server, tools=tools)
    errors: list[BaseException] = []

    def send() -> None:
        try:
            agent.send("hang")
        except AgentError as exc:
            errors.append(exc)

    thread = threading.Thread(target=send)
    thread.start()
    deadline = time.monotonic() + 30
    while not marker.exists() or not marker.read_text():
        assert time.monotonic() < deadline, "the tool never started"
        time.sleep(0.01)
    assert {int(marker.read_text())} == spares
    agent.stop()
    thread.join(30)
    assert errors and getattr(errors[0], "kind", None) == "aborted"
    assert gone(spares)
