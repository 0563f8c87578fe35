"""Details §File tools and §Tool processes: scanning folders, tool processes, edits between scans.

Fixtures and the contract's conventions: tests/contract/conftest.py.
"""

from __future__ import annotations

import functools
import json
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from api_helpers import FAST, _wait_for, make, tool_file, tool_results
from background import returns_within as _returns

import agentcore
from agentcore import Agent, AgentError
from agentcore.testing import ModelServer


def test_file_tools_scan(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "helper.py").write_text("VALUE = 1\n")
    (first / "calc.py").write_text(
        tool_file("calc", "x: int", "int", "x + 1")
        + "\nother = {'name': 'other', 'description': 'o', 'execute': lambda i: 'first'}\n"
    )
    (second / "other.py").write_text("other = {'name': 'other', 'execute': lambda i: 'second'}\n")
    tools = agentcore.tools.scan(str(first), str(second))
    assert sorted(tools) == ["calc", "other"]
    assert tools.schema["calc"]["source"] == "file"
    assert agentcore.tools.execute("calc", {"x": 1}, tools)["output"] == {"type": "json", "value": 2}
    assert agentcore.tools.execute("other", {}, tools)["output"]["value"] == "second"
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "bad_file.py").write_text("raise RuntimeError('nope')\n")
    with pytest.raises(Exception, match="bad_file"):
        agentcore.tools.scan(str(broken))


def test_file_tools_details(tmp_path: Path, srv: ModelServer, agents: list[Agent]) -> None:
    import os

    folder = tmp_path / "tools"
    folder.mkdir()
    marker = tmp_path / "imported.txt"
    (folder / "sibling.py").write_text(
        f"import os\nopen({str(marker)!r}, 'a').write(str(os.getpid()) + '\\n')\nBASE = 100\n"
    )
    (folder / "pair.py").write_text(
        textwrap.dedent(
            """\
            import os, sys, time

            import sibling
            from agentcore import tool

            __all__ = ["TOOLS"]


            @tool
            def plus(x: int) -> int:
                \"\"\"Plus.\"\"\"
                return sibling.BASE + x


            @tool
            def shout(text: str) -> str:
                \"\"\"Shout.\"\"\"
                print("to stdout", flush=True)
                sys.stderr.write("to stderr\\n")
                sys.stderr.flush()
                return text.upper()


            @tool(timeout=0.3)
            def hang() -> str:
                \"\"\"Hang.\"\"\"
                time.sleep(120)
                return "never"


            @tool
            def die() -> str:
                \"\"\"Die.\"\"\"
                os._exit(3)


            @tool
            def hidden() -> str:
                \"\"\"Not exported.\"\"\"
                return "no"


            TOOLS = [plus, shout, hang, die]
            """
        )
    )
    tools = agentcore.tools.scan(folder)
    assert sorted(tools) == ["die", "hang", "plus", "shout"]
    pids = marker.read_text().split()
    assert pids and str(os.getpid()) not in pids  # imported in a tool process, never here
    assert agentcore.tools.execute("plus", {"x": 1}, tools)["output"] == {"type": "json", "value": 101}
    output: list[dict[str, Any]] = []
    shouted = agentcore.tools.execute("shout", {"text": "hi"}, tools, on_output=output.append)
    assert shouted["output"] == {"type": "text", "value": "HI"}
    streams = {e["stream"]: "".join(x["data"] for x in output if x["stream"] == e["stream"]) for e in output}
    assert "to stdout" in streams["stdout"] and "to stderr" in streams["stderr"]
    assert all(isinstance(e["data"], str) for e in output)
    hung = _returns(lambda: agentcore.tools.execute("hang", {}, tools))  # not the 120 s sleep
    assert hung["error"] == "timeout" and "timed out after 0.3 s" in hung["output"]["value"]
    died = agentcore.tools.execute("die", {}, tools)
    assert died["output"]["type"] == "error-text"
    # The agent goes on after a crash.
    srv.add(
        {
            "tool_calls": [
                {"name": "die", "id": "d1", "arguments": {}},
                {"name": "plus", "id": "p1", "arguments": {"x": 2}},
            ]
        },
        "ok",
    )
    agent = make(agents, srv, tools=tools, no_tool_rounds=1)
    assert agent.send("go").text == "ok"
    died_result, plus_result = tool_results(agent.history)
    assert died_result["output"]["type"] == "error-text" and plus_result["output"]["value"] == 102


def test_file_tool_edited_between_scans(tmp_path: Path) -> None:
    path = tmp_path / "version.py"
    path.write_text(tool_file("version", "", "str", "'v1'"))
    first = agentcore.tools.scan(tmp_path)
    assert agentcore.tools.execute("version", {}, first)["output"]["value"] == "v1"
    path.write_text(tool_file("version", "", "str", "'v2!'"))
    second = agentcore.tools.load(str(tmp_path))
    assert agentcore.tools.execute("version", {}, second)["output"]["value"] == "v2!"


def _pid_alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie counts as gone
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_agent_file_tool_processes(tmp_path: Path, srv: ModelServer) -> None:
    import gc

    (tmp_path / "proc.py").write_text(
        textwrap.dedent(
            """\
            import os, time

            from agentcore import tool


            @tool
            def pid(wait: float = 0) -> dict:
                \"\"\"Pid.\"\"\"
                start = time.time()
                time.sleep(wait)
                return {"pid": os.getpid(), "start": start}


            @tool
            def hang() -> str:
                \"\"\"Hang.\"\"\"
                time.sleep(60)
                return "never"
            """
        )
    )
    tools = agentcore.tools.scan(tmp_path)
    srv.add(
        {
            "tool_calls": [
                {"name": "pid", "id": "p1", "arguments": {"wait": 0.3}},
                {"name": "pid", "id": "p2", "arguments": {"wait": 0.3}},
            ]
        },
        "ok",
    )
    agent = Agent(
        config={
            "base_url": srv.base_url,
            "model": "m",
            "no_tool_rounds": 1,
            "max_tool_concurrency": 1,
            **FAST,
        },
        tools=tools,
    )
    agent.send("go")
    first, second = (r["output"]["value"] for r in tool_results(agent.history))
    assert abs(second["start"] - first["start"]) >= 0.25  # one process at a time
    # stop() kills a running tool process and returns once the run has ended.
    srv.add({"tool_calls": [{"name": "hang", "id": "h1", "arguments": {}}]})
    pids = {first["pid"], second["pid"]}

    def stop_once_hang_runs(target: Agent) -> None:
        # The call h1 is written (its round's tools start right after): stop mid-call.
        _wait_for(lambda: "h1" in json.dumps(target.history[-1:]), timeout=30)
        target.stop()

    stopper = threading.Thread(target=stop_once_hang_runs, args=(agent,))
    stopper.start()
    with pytest.raises(AgentError):
        _returns(functools.partial(agent.send, "hang"), 45)  # never the tool's 60 s sleep
    stopper.join(30)
    assert "interrupt" in tool_results(agent.history)[-1]["output"]["value"].lower()
    # Garbage collection closes the agent: its idle tool processes go away.
    del agent
    gc.collect()
    deadline = time.monotonic() + 30
    while any(_pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(_pid_alive(p) for p in pids)


def test_same_file_names_in_two_folders(tmp_path: Path) -> None:
    for folder, name in (("one", "alpha"), ("two", "beta")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "common.py").write_text(tool_file(name, "", "str", repr(name)))
    tools = agentcore.tools.scan(tmp_path / "one", tmp_path / "two")
    assert sorted(tools) == ["alpha", "beta"]
    assert agentcore.tools.execute("beta", {}, tools)["output"]["value"] == "beta"
