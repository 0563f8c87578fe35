"""Names and shapes rejected early (API.md §Details): a clear config error where the mistake is
made, never a failed send later (or a request nobody meant).

Before: `config="not a dict"` was a bare TypeError; a `base_url` ending in `/chat/completions`
was accepted (every request then went to `/chat/completions/chat/completions`); `model: ""`,
tool names with spaces and two tools of one name were accepted silently; a read-only SQLite file
failed only at the first send, as kind `unknown`; `send()` after `close()` made a request.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentcore import Agent, AgentError, tool
from agentcore.store import SQLiteStore
from agentcore.testing import ModelServer
from agentcore.tools import load


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _config_error(call: Callable[[], Any]) -> AgentError:
    with pytest.raises(AgentError) as caught:
        call()
    assert caught.value.kind == "config", caught.value
    return caught.value


# ---------------------------------------------------------------- config


@pytest.mark.parametrize("config", ["not a dict", ["base_url"], 5])
def test_config_that_is_not_a_mapping_is_a_config_error(config: Any) -> None:
    error = _config_error(lambda: Agent(config=config))
    assert isinstance(error, TypeError)  # also a TypeError, like every wrong type given to Agent()
    assert "config must be a dict" in str(error)
    agent = Agent(config={"base_url": "http://127.0.0.1:9/v1", "model": "m"})
    _config_error(lambda: agent.send("hi", config=config))
    assert agent.history == []


ENDPOINTS = [
    ("http://127.0.0.1:8080/v1/chat/completions", "http://127.0.0.1:8080/v1"),
    ("https://api.openai.com/v1/responses", "https://api.openai.com/v1"),
    ("https://api.anthropic.com/v1/messages/", "https://api.anthropic.com/v1"),
    (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent",
        "https://generativelanguage.googleapis.com/v1beta",
    ),
    (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        "https://generativelanguage.googleapis.com/v1beta",
    ),
]


@pytest.mark.parametrize(("url", "root"), ENDPOINTS, ids=[u.rsplit("/", 1)[-1][:30] for u, _ in ENDPOINTS])
def test_a_base_url_ending_with_an_endpoint_path_names_the_root_to_use(url: str, root: str) -> None:
    error = _config_error(lambda: Agent(config={"base_url": url, "model": "m"}))
    assert f"use the API root {root!r}" in str(error)
    agent = Agent(config={"model": "m"})
    _config_error(lambda: agent.send("hi", config={"base_url": url}))
    assert agent.history == []
    Agent(config={"base_url": root, "model": "m"})  # the root itself is fine


@pytest.mark.parametrize("model", ["", "   "])
def test_an_empty_model_name_is_a_config_error_at_send(server: ModelServer, model: str) -> None:
    agent = Agent(config={"base_url": server.base_url, "model": model})  # fine until a send needs it
    error = _config_error(lambda: agent.send("hi"))
    assert "model is empty" in str(error)
    assert agent.history == [] and server.requests == []


# ---------------------------------------------------------------- tool names


@pytest.mark.parametrize("name", ["has space", "dotted.name", "café", "x" * 65, "slash/name"])
def test_a_tool_name_outside_the_strictest_vendor_rule_is_a_config_error(name: str) -> None:
    def fn() -> str:
        """A tool."""
        return "x"

    error = _config_error(lambda: tool(name=name)(fn))
    assert repr(name) in str(error) and "^[a-zA-Z0-9_-]{1,64}$" in str(error)
    as_dict = {"name": name, "execute": lambda input: "x"}
    _config_error(lambda: Agent(tools=[as_dict]))
    _config_error(lambda: load([as_dict]))


def test_names_at_the_edge_of_the_rule_are_fine() -> None:
    for name in ("a", "x" * 64, "read_file", "get-weather", "Tool2"):
        assert name in load([{"name": name, "execute": lambda input: "x"}])


def test_a_tool_file_with_a_bad_name_fails_load_as_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text('bad = {"name": "bad name", "execute": lambda input: "x"}\n')
    error = _config_error(lambda: load(tmp_path))
    assert "bad.py" in str(error) and "'bad name'" in str(error)
    decorated = '@tool(name="has space")\ndef f() -> str:\n    """x"""\n    return "y"\n'
    (tmp_path / "bad.py").write_text("from agentcore import tool\n\n" + decorated)
    error = _config_error(lambda: load(tmp_path))
    assert "bad.py" in str(error) and "'has space'" in str(error)


def test_two_tools_of_one_name_in_one_list_are_a_config_error_naming_both() -> None:
    @tool(name="add")
    def other_add(a: int, b: int) -> int:
        """Add, again."""
        return a + b

    error = _config_error(lambda: Agent(tools=[add, other_add]))
    text = str(error)
    assert "two tools named 'add'" in text
    assert f"{__name__}.add" in text and "other_add" in text
    _config_error(lambda: Agent(tools=[add, {"name": "add", "execute": lambda input: 0}]))
    _config_error(lambda: load([add, other_add]))
    # Across the sources of load(), the later one still wins.
    assert load([add], [other_add]).handlers["add"].execute.__self__ is other_add  # type: ignore[attr-defined]


# ---------------------------------------------------------------- stores


def _unprivileged(fn: Callable[[], Any]) -> Any:
    """`fn()` as an unprivileged user when this process is root (root writes read-only files).

    A forked child (the interpreter is already loaded, so nothing needs to be read as that
    user) drops to `nobody`, runs `fn` and sends back what it returned, as JSON.
    """
    if os.getuid() != 0:
        return fn()
    nobody = pwd.getpwnam("nobody")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            out = json.dumps(fn())
        except BaseException as exc:
            out = json.dumps({"crashed": repr(exc)})
        os.write(write, out.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(text)


def _open(path: Path) -> dict[str, Any]:
    try:
        SQLiteStore(path).close()
        return {"opened": True}
    except AgentError as error:
        return {"kind": error.kind, "message": error.message}


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder under /tmp the unprivileged user can reach (pytest's tmp_path is root-only)."""
    path = Path(tempfile.mkdtemp(prefix="agentcore-readonly-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_read_only_sqlite_file_is_a_config_error_when_the_store_is_made(shared_dir: Path) -> None:
    path = shared_dir / "chats.db"
    store = SQLiteStore(path)
    store.append("me", [{"role": "user", "content": "hi"}], expected_length=0)
    store.close()
    path.chmod(0o444)
    got = _unprivileged(lambda: _open(path))
    assert got["kind"] == "config", got
    assert str(path) in got["message"] and "cannot be opened for writing" in got["message"]


@pytest.mark.parametrize("what", ["file", "folder"])
def test_a_read_only_mode_is_respected_by_any_user(shared_dir: Path, what: str) -> None:
    """chmod 444 on the file (555 on its folder): a config error also for root, which SQLite
    would let write (the suite runs as root in CI)."""
    path = shared_dir / "chats.db"
    SQLiteStore(path).close()
    (path if what == "file" else shared_dir).chmod(0o444 if what == "file" else 0o555)
    try:
        error = _config_error(lambda: SQLiteStore(path))
    finally:
        shared_dir.chmod(0o755)
    assert str(path) in str(error) and "read-only" in str(error)


def test_a_folder_that_cannot_be_written_is_a_config_error_when_the_store_is_made(shared_dir: Path) -> None:
    folder = shared_dir / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    got = _unprivileged(lambda: _open(folder / "chats.db"))
    assert got["kind"] == "config", got
    assert str(folder / "chats.db") in got["message"]


def test_a_folder_that_does_not_exist_is_a_config_error_when_the_store_is_made(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    for path in (tmp_path / "missing" / "chats.db", tmp_path / "a-file" / "chats.db"):
        error = _config_error(lambda path=path: SQLiteStore(path))
        assert str(path) in str(error)


def test_a_writable_store_made_twice_is_fine_and_writes_nothing_to_check(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "chats.db").close()
    with SQLiteStore(tmp_path / "chats.db") as store:
        assert store.sessions() == []
    with sqlite3.connect(tmp_path / "chats.db") as connection:
        assert connection.execute("SELECT COUNT(*) FROM agentcore_sessions").fetchone() == (0,)


# ---------------------------------------------------------------- a closed agent


def test_send_resume_stream_and_compact_after_close_are_request_errors(server: ModelServer) -> None:
    agent = Agent(config={"base_url": server.base_url, "model": "m"})
    agent.history.append({"role": "user", "content": "from before"})
    agent.close()
    for call in (
        lambda: agent.send("hi"),
        lambda: agent.resume(),
        lambda: agent.stream("hi"),
        lambda: agent.stream_resume(),
        lambda: agent.compact(),
    ):
        with pytest.raises(AgentError) as caught:
            call()
        assert caught.value.kind == "request" and "the agent is closed" in str(caught.value)
    assert server.requests == [] and agent.history == [{"role": "user", "content": "from before"}]


def test_leaving_a_with_block_closes_the_agent(server: ModelServer) -> None:
    server.add("inside")
    with Agent(config={"base_url": server.base_url, "model": "m"}) as agent:
        assert agent.send("hi").text == "inside"
    with pytest.raises(AgentError, match="the agent is closed"):
        agent.send("again")
    assert len(server.requests) == 1
