"""agentcore.mcp against real MCP servers (tests/mcp/server.py, the SDK's own server class).

Every test runs over stdio (a subprocess) and streamable HTTP (uvicorn on 127.0.0.1).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from agentcore import AgentError, mcp, tools
from agentcore.testing import ModelServer

SERVER = Path(__file__).parent / "mcp_server_files" / "server.py"
NAME = "test-server"
WAIT_S = 60.0  # upper bound for things that happen "soon" on a busy machine; never a sync point

Connect = Callable[..., mcp.MCPTools]


class HttpServer:
    """`python server.py http NAME` in a subprocess; its URL once it listens."""

    def __init__(self, markers: Path) -> None:
        env = {**os.environ, "MARKERS": str(markers)}
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER), "http", NAME], stdout=subprocess.PIPE, env=env, text=True
        )
        assert self.process.stdout is not None
        port = self.process.stdout.readline().strip()
        self.process.stdout.close()  # so that the fd checks below see only what the client opened
        assert port.isdigit(), f"the test server printed {port!r}"
        self.url = f"http://127.0.0.1:{port}/mcp"

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture(params=["stdio", "http"])
def connect(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Connect]:
    """`connect(**kwargs)`: a connection to a fresh test server over the parametrised transport."""
    opened: list[mcp.MCPTools] = []
    servers: list[HttpServer] = []

    def open_connection(**kwargs: Any) -> mcp.MCPTools:
        if request.param == "stdio":
            command = [sys.executable, str(SERVER), "stdio", NAME]
            conn = mcp.connect(command=command, env={"MARKERS": str(tmp_path)}, **kwargs)
        else:
            servers.append(HttpServer(tmp_path))
            conn = mcp.connect(url=servers[-1].url, **kwargs)
        opened.append(conn)
        return conn

    yield open_connection
    for conn in opened:
        conn.close()
    for server in servers:
        server.stop()


def wait_for(path: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.01)


def test_lists_the_servers_tools_with_names_descriptions_and_schemas(connect: Connect) -> None:
    conn = connect()
    assert conn.name == NAME
    assert {"add", "image", "readme", "stats", "fail", "slow", "gather", "crash"} <= set(conn.tools)
    add = conn.tools.schema["add"]
    assert add["description"] == "Add two integers."
    assert add["input_schema"]["required"] == ["a", "b"]
    assert add["input_schema"]["properties"]["a"]["type"] == "integer"


def test_results_text_image_resource_structured_and_errors(connect: Connect) -> None:
    conn = connect()
    assert tools.execute("add", {"a": 2, "b": 3}, conn.tools)["output"] == {"type": "text", "value": "5"}
    image = tools.execute("image", {}, conn.tools)["output"]
    assert image["type"] == "content"
    assert image["value"][0] == {"type": "text", "text": "a picture"}
    assert image["value"][1]["type"] == "image" and image["value"][1]["media_type"] == "image/png"
    readme = tools.execute("readme", {}, conn.tools)["output"]
    assert readme == {"type": "text", "value": "# Title\nbody"}
    stats = tools.execute("stats", {"values": [1, 2, 3]}, conn.tools)["output"]
    assert stats == {"type": "json", "value": {"count": 3, "total": 6}}
    failed = tools.execute("fail", {"reason": "no way"}, conn.tools)
    assert failed["output"]["type"] == "error-text" and "refused: no way" in failed["error"]


def test_an_agent_uses_mcp_tools(connect: Connect, server: ModelServer, make_agent: Any) -> None:
    conn = connect()
    server.add({"tool_calls": [{"name": "add", "arguments": {"a": 40, "b": 2}}]}, "It is 42.")
    agent = make_agent(server, tools=conn, no_tool_rounds=1)
    assert agent.send("40 + 2?").text == "It is 42."
    assert agent.history[2]["role"] == "tool"
    assert "42" in str(agent.history[2]["content"])
    assert "add" in tools.load(conn, [])


def test_stop_cancels_a_slow_call_and_the_server_sees_the_cancellation(
    connect: Connect, server: ModelServer, make_agent: Any, tmp_path: Path
) -> None:
    conn = connect()
    server.add({"tool_calls": [{"name": "slow", "arguments": {"tag": "stop"}}]})
    agent = make_agent(server, tools=conn, no_tool_rounds=1)
    outcome: list[Any] = []
    runner = threading.Thread(target=lambda: outcome.append(_send(agent, "wait")))
    runner.start()
    wait_for(tmp_path / "stop.started")
    assert agent.stop()
    runner.join(WAIT_S)
    assert not runner.is_alive()
    wait_for(tmp_path / "stop.cancelled")
    assert agent.history[-1]["role"] == "tool"  # the interrupted call has its result
    assert tools.execute("add", {"a": 1, "b": 1}, conn.tools)["output"]["value"] == "2"  # still usable


def test_a_call_past_its_timeout_is_an_error_result_and_is_cancelled(
    connect: Connect, tmp_path: Path
) -> None:
    conn = connect(timeout=120)  # connecting may be slow on a busy machine: keep it out of the verdict
    assert conn.tools.handlers["slow"].timeout == 120  # the connection's timeout bounds each call
    # The same tool with a short bound (what connect(timeout=3) gives each call, minus a slow connect).
    # 3 s: the call must reach the server (which records it started) before the bound cuts it, and
    # on a busy machine that can take far longer than the milliseconds it takes here; the tool
    # itself waits 60 s, so the bound is still what ends it.
    slow = {**conn.tools.schema["slow"], "execute": conn.tools.handlers["slow"].execute, "timeout": 3}
    del slow["source"]
    result = tools.execute("slow", {"tag": "timeout"}, tools.adopt([slow]))
    assert result["error"] == "timeout"
    assert (tmp_path / "timeout.started").exists()
    wait_for(tmp_path / "timeout.cancelled")


def test_eight_calls_run_concurrently_on_one_connection(connect: Connect) -> None:
    conn = connect()
    results: list[dict[str, Any]] = []
    lock = threading.Lock()

    def call() -> None:
        result = tools.execute("gather", {"n": 8}, conn.tools)
        with lock:
            results.append(result)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert [r["output"] for r in results] == [{"type": "text", "value": "together"}] * 8


def test_a_server_that_dies_mid_call_gives_an_error_naming_it(
    connect: Connect, server: ModelServer, make_agent: Any
) -> None:
    conn = connect()
    server.add({"tool_calls": [{"name": "crash", "arguments": {}}]}, "Carrying on.")
    seen: list[dict[str, Any]] = []
    agent = make_agent(server, tools=conn, no_tool_rounds=1, callbacks={"on_tool_result": seen.append})
    assert agent.send("crash it").text == "Carrying on."
    assert seen[0]["output"]["type"] == "error-text"
    assert repr(NAME) in seen[0]["error"]
    later = tools.execute("add", {"a": 1, "b": 1}, conn.tools)  # no hang on a dead connection either
    assert later["output"]["type"] == "error-text" and repr(NAME) in later["error"]


def test_close_and_with_leave_no_thread_process_or_socket(connect: Connect) -> None:
    threads, fds, children = set(threading.enumerate()), _fds(), _children()
    conn = connect()
    assert tools.execute("add", {"a": 1, "b": 1}, conn.tools)["output"]["value"] == "2"
    conn.close()
    conn.close()  # twice is fine
    with connect() as second:
        assert "add" in second.tools
    assert set(threading.enumerate()) <= threads
    assert _children() <= children
    assert _fds() <= fds
    after = tools.execute("add", {"a": 1, "b": 1}, conn.tools)
    assert "is not running" in after["error"]


def test_connecting_to_a_server_that_never_answers_times_out_and_cleans_up() -> None:
    threads, children = set(threading.enumerate()), _children()
    silent = [sys.executable, "-c", "import time; time.sleep(600)"]
    with pytest.raises(AgentError) as caught:
        mcp.connect(command=silent, timeout=1)
    assert caught.value.kind == "timeout" and "did not answer within 1 s" in caught.value.message
    assert set(threading.enumerate()) <= threads
    assert _children() <= children


def test_a_command_that_cannot_start_is_a_network_error() -> None:
    with pytest.raises(AgentError) as caught:
        mcp.connect(command=["/nonexistent/mcp-server"], timeout=10)
    assert caught.value.kind == "network" and "/nonexistent/mcp-server" in caught.value.message


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"command": ["x"], "url": "http://h"},
        {"command": "server"},
        {"url": "ftp://h"},
        {"command": ["x"], "timeout": 0},
    ],
)
def test_bad_arguments_are_config_errors(kwargs: dict[str, Any]) -> None:
    with pytest.raises(AgentError) as caught:
        mcp.connect(**kwargs)
    assert caught.value.kind == "config"


# ---------------------------------------------------------------- text that cannot be encoded


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "agentcore" and r.levelno == logging.WARNING]


def test_a_result_with_lone_surrogate_escapes_becomes_u_fffd(
    caplog: pytest.LogCaptureFixture, server: ModelServer, make_agent: Any
) -> None:
    """API.md §Details "Text that cannot be encoded". The server writes its JSON with non-ASCII as
    `\\uXXXX` escapes, so an os.listdir() name crosses the wire as `"\\udcff"`. Before: the SDK's
    parser refused the line and the call waited for its timeout; now the result arrives at once,
    with U+FFFD, and a WARNING names the server."""
    command = [sys.executable, str(SERVER), "stdio-ascii", NAME]
    with mcp.connect(command=command, timeout=WAIT_S) as conn, caplog.at_level(logging.WARNING, "agentcore"):
        assert tools.execute("listing", {}, conn.tools)["output"] == {
            "type": "text",
            "value": "report-\ufffd.txt",
        }
        structured = tools.execute("listing_json", {}, conn.tools)["output"]
        assert structured == {"type": "json", "value": {"names": ["caf\ufffd", "ok.txt"]}}
        assert any(f"a message from MCP server {NAME!r}" in w and "U+FFFD" in w for w in _warnings(caplog))
        server.add({"tool_calls": [{"name": "listing", "arguments": {}}]}, "Listed.", "Again.")
        agent = make_agent(server, tools=conn, no_tool_rounds=1)
        assert agent.send("list").text == "Listed."
        assert agent.history[2]["content"][0]["output"]["value"] == "report-\ufffd.txt"
        assert agent.send("and again").text == "Again."  # the history encodes


def test_a_server_that_cannot_send_such_text_gives_an_error_result_and_the_run_goes_on(
    tmp_path: Path, server: ModelServer, make_agent: Any
) -> None:
    """The SDK's own server cannot serialise a lone surrogate (its call fails): an error result
    naming the server, never a broken history. (Over HTTP: the SDK's stdio server stops answering
    after such a failure, so a call there ends only at its timeout.)"""
    http = HttpServer(tmp_path)
    try:
        with mcp.connect(url=http.url, timeout=WAIT_S) as conn:
            server.add({"tool_calls": [{"name": "listing", "arguments": {}}]}, "It failed.", "Fine.")
            agent = make_agent(server, tools=conn, no_tool_rounds=1)
            assert agent.send("list").text == "It failed."
            result = agent.history[2]["content"][0]
            assert result["output"]["type"] == "error-text" and NAME in result["output"]["value"]
            assert agent.send("go on").text == "Fine."
    finally:
        http.stop()


def _send(agent: Any, text: str) -> Any:
    try:
        return agent.send(text)
    except AgentError as exc:
        return exc


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _children() -> set[int]:
    """Live (non-zombie) child processes of this process, except the HTTP test servers."""
    found = set()
    for entry in os.listdir("/proc"):
        stat = _stat(entry) if entry.isdigit() else None
        if stat and int(stat[1]) == os.getpid() and stat[0] != "Z" and not _is_http_test_server(int(entry)):
            found.add(int(entry))
    return found


def _stat(pid: str) -> list[str] | None:
    """(state, ppid, ...) of a process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def _is_http_test_server(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            argv = file.read().split(b"\0")
    except FileNotFoundError:
        return False
    return str(SERVER).encode() in argv and b"http" in argv
