"""One behaviour for every store: each test runs on SQLite and on a real PostgreSQL.

The store API (load / append / sessions / delete), the exact stored text, and an agent bound
to a session: loaded at Agent(), committed as it grows, conflicts on edits and on other writers.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from store_workers import Spec, raw_texts

from agentcore import Agent, AgentError, ToolContext, tool
from agentcore.history import open_calls
from agentcore.testing import ModelServer

MakeStore = Callable[[], Any]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def session_agent(server: ModelServer, session: Any, **kwargs: Any) -> Agent:
    config = {"base_url": server.base_url, "model": "m", "retry_base_delay": 0.01, "no_tool_rounds": 1}
    return Agent(config=config, session=session, **kwargs)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: first.
        b: second.
    """
    return a + b


# ---------------------------------------------------------------- the store API


def test_load_of_an_unknown_session_is_empty(store: Any) -> None:
    assert store.load("nobody") == []
    assert store.sessions() == []


def test_append_returns_the_new_length_and_load_gives_the_entries_back(store: Any) -> None:
    assert store.append("a", [user("one"), user("two")], expected_length=0) == 2
    assert store.append("a", [user("three")], expected_length=2) == 3
    assert store.load("a") == [user("one"), user("two"), user("three")]
    assert store.load("b") == []


def test_append_with_a_stale_length_is_a_conflict_and_writes_nothing(store: Any) -> None:
    store.append("a", [user("one")], expected_length=0)
    for stale in (0, 2, 5):
        with pytest.raises(AgentError) as caught:
            store.append("a", [user("two"), user("three")], expected_length=stale)
        assert caught.value.kind == "conflict"
        assert not caught.value.retryable
    assert store.load("a") == [user("one")]
    with pytest.raises(AgentError) as caught:
        store.append("new", [user("x")], expected_length=1)
    assert caught.value.kind == "conflict"
    assert store.load("new") == [] and [s["id"] for s in store.sessions()] == ["a"]


def test_entries_are_stored_as_exactly_json_dumps(store: Any, store_spec: Spec) -> None:
    entries = [
        {"role": "user", "content": 'héllo ✓ "quoted" \n tab\t', "b": [1, 2.5, None, True]},
        {"z": 1, "a": {"nested": {"deep": [{}]}}, "float": 0.1, "big": 10**20, "neg": -0.0},
    ]
    store.append("bytes", entries, expected_length=0)
    assert raw_texts(store_spec, "bytes") == [json.dumps(e) for e in entries]
    assert store.load("bytes") == entries


def test_entries_that_are_not_json_are_refused_before_anything_is_written(store: Any) -> None:
    with pytest.raises(AgentError) as caught:
        store.append("a", [user("fine"), {"role": "user", "content": object()}], expected_length=0)
    assert caught.value.kind == "request" and "entry 1" in str(caught.value)
    with pytest.raises(AgentError):
        store.append("a", ["not a dict"], expected_length=0)
    with pytest.raises(AgentError):
        store.append("a", [user("x")], expected_length=-1)
    assert store.load("a") == []


def test_sessions_lists_id_length_and_updated_at_and_delete_removes_one(store: Any) -> None:
    store.append("first", [user("1")], expected_length=0)
    store.append("second", [user("1"), user("2")], expected_length=0)
    listed = {s["id"]: s for s in store.sessions()}
    assert {k: v["length"] for k, v in listed.items()} == {"first": 1, "second": 2}
    assert all(isinstance(s["updated_at"], float) and s["updated_at"] > 1.6e9 for s in listed.values())
    store.delete("first")
    store.delete("never-existed")
    assert [s["id"] for s in store.sessions()] == ["second"]
    assert store.load("first") == []
    assert store.append("first", [user("again")], expected_length=0) == 1


def test_a_second_store_object_sees_the_same_sessions(make_store: MakeStore) -> None:
    one, two = make_store(), make_store()
    one.append("a", [user("x")], expected_length=0)
    assert two.load("a") == [user("x")]
    with pytest.raises(AgentError) as caught:
        two.append("a", [user("y")], expected_length=0)
    assert caught.value.kind == "conflict"


def test_threads_sharing_one_store_lose_nothing(store: Any) -> None:
    """Eight threads append to one session through one store object, retrying conflicts."""

    def writer(name: int) -> None:
        for k in range(25):
            while True:
                try:
                    store.append("t", [{"w": name, "k": k}], expected_length=len(store.load("t")))
                    break
                except AgentError as error:
                    assert error.kind == "conflict"

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stored = store.load("t")
    assert len(stored) == 200
    for name in range(8):
        assert [e["k"] for e in stored if e["w"] == name] == list(range(25))


# ---------------------------------------------------------------- an agent on a session


def test_history_is_loaded_at_agent_and_every_entry_is_committed(
    server: ModelServer, store: Any, store_spec: Spec
) -> None:
    server.add({"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}, "It is 3.")
    agent = session_agent(server, store.session("u"), tools=[add])
    assert agent.history == []
    result = agent.send("What is 1 + 2?")
    assert [m["role"] for m in agent.history] == ["user", "assistant", "tool", "assistant"]
    assert raw_texts(store_spec, "u") == [json.dumps(m) for m in agent.history]
    assert result.messages == agent.history
    again = session_agent(server, store.session("u"))
    assert again.history == agent.history


def test_each_entry_is_in_the_store_when_the_next_step_starts(server: ModelServer, store: Any) -> None:
    """Committed as appended: by the time a tool runs, its call is stored; by the next request, its result."""
    seen: list[list[str]] = []

    @tool
    def look() -> str:
        """Look at the stored history."""
        seen.append([m["role"] for m in store.load("live")])
        return "ok"

    def second_request(_recorded: Any) -> str:
        seen.append([m["role"] for m in store.load("live")])
        return "done"

    server.add({"tool_calls": [{"name": "look", "arguments": {}}]}, second_request)
    agent = session_agent(server, store.session("live"), tools=[look])
    agent.send("go")
    assert seen == [["user", "assistant"], ["user", "assistant", "tool"]]


def test_history_and_session_together_is_a_config_error(server: ModelServer, store: Any) -> None:
    with pytest.raises(AgentError) as caught:
        session_agent(server, store.session("u"), history=[])
    assert caught.value.kind == "config"
    with pytest.raises(TypeError):
        Agent(session="u")  # type: ignore[arg-type]


def test_hand_appended_entries_are_committed_at_the_next_send(server: ModelServer, store: Any) -> None:
    server.add("first", "second")
    agent = session_agent(server, store.session("u"))
    agent.send("one")
    agent.history.append({"role": "user", "content": "written by hand"})
    assert len(store.load("u")) == 2
    agent.send("two")
    assert [m.get("content") for m in store.load("u")][2:4] == ["written by hand", "two"]
    assert store.load("u") == agent.history


@pytest.mark.parametrize("change", ["edit", "remove", "replace"])
def test_editing_or_removing_stored_entries_is_a_conflict_that_writes_nothing(
    server: ModelServer, store: Any, change: str
) -> None:
    server.add("first", "after reload")
    agent = session_agent(server, store.session("u"))
    agent.send("one")
    before = store.load("u")
    if change == "edit":
        agent.history[0]["content"] = "rewritten"
    elif change == "remove":
        del agent.history[1]
    else:
        agent.history[:] = [user("other"), user("history")]
    agent.history.append(user("hand-appended"))
    kept = [dict(m) for m in agent.history]
    with pytest.raises(AgentError) as caught:
        agent.send("two", config={"max_steps": 7})
    assert caught.value.kind == "conflict"
    assert store.load("u") == before
    assert agent.history == kept, "the rejected send must not write its input into memory either"
    assert agent.config["max_steps"] != 7, "nor write its overrides back"
    assert len(server.requests) == 1
    agent.reload()
    assert agent.history == before
    agent.send("two")
    assert [m.get("content") for m in store.load("u")][2] == "two"


def test_a_writer_behind_the_store_is_brought_up_to_date_before_its_send(
    server: ModelServer, make_store: MakeStore
) -> None:
    """API.md §Durable sessions: behind the store (another writer appended) is not a conflict;
    the agent takes the stored entries first, as reload() does. (It used to be a conflict.)"""
    server.add("reply to a", "reply to b")
    a = session_agent(server, make_store().session("shared"))
    b = session_agent(server, make_store().session("shared"))
    a.send("from a")
    history_object = b.history
    b.send("from b")
    assert b.history is history_object
    assert [m.get("content") for m in make_store().load("shared")] == [
        "from a",
        [{"type": "text", "text": "reply to a"}],
        "from b",
        [{"type": "text", "text": "reply to b"}],
    ]
    assert b.history == make_store().load("shared")
    b.reload()
    assert b.history is history_object and b.history == make_store().load("shared")


def test_a_history_that_diverged_from_the_store_is_a_conflict_before_anything_is_written(
    server: ModelServer, make_store: MakeStore
) -> None:
    """Entries appended by hand that the store does not hold, while it holds others since."""
    server.add("reply to a")
    a = session_agent(server, make_store().session("split"))
    b = session_agent(server, make_store().session("split"))
    a.send("from a")
    b.history.append(user("written by hand in b"))
    with pytest.raises(AgentError) as caught:
        b.send("from b")
    assert caught.value.kind == "conflict"
    assert len(server.requests) == 1 and len(make_store().load("split")) == 2
    b.reload()
    assert b.history == a.history


def test_a_conflict_in_the_middle_of_a_run_fails_it_cleanly(
    server: ModelServer, make_store: MakeStore
) -> None:
    """Another writer appends while a tool runs: the run stops at its next commit, with conflict."""
    other = make_store()

    @tool
    def interfere() -> str:
        """Let someone else write to the session."""
        other.append("mid", [user("intruder")], expected_length=2)
        return "done"

    server.add({"tool_calls": [{"name": "interfere", "arguments": {}}]}, "never requested")
    agent = session_agent(server, make_store().session("mid"), tools=[interfere])
    with pytest.raises(AgentError) as caught:
        agent.send("go")
    assert caught.value.kind == "conflict"
    assert agent.running is None and len(server.requests) == 1
    assert [m["role"] for m in other.load("mid")] == ["user", "assistant", "user"]
    agent.reload()
    assert agent.history == other.load("mid")


def test_a_loaded_history_with_open_calls_gets_interrupted_results_at_the_next_send(
    server: ModelServer, store: Any
) -> None:
    crashed = [
        user("run it"),
        {
            "role": "assistant",
            "content": [
                {"type": "tool-call", "tool_call_id": "c1", "tool_name": "add", "input": {"a": 1, "b": 1}}
            ],
        },
    ]
    store.append("crashed", crashed, expected_length=0)
    server.add("carrying on")
    agent = session_agent(server, store.session("crashed"))
    assert open_calls(agent.history)
    agent.send("go on")
    stored = store.load("crashed")
    assert stored[:2] == crashed
    assert stored[2]["role"] == "tool" and stored[2]["content"][0]["tool_call_id"] == "c1"
    assert not open_calls(stored)


def test_compact_commits_its_summary(server: ModelServer, store: Any) -> None:
    server.add("hello", "a summary")
    agent = session_agent(server, store.session("c"))
    agent.send("hi")
    agent.compact()
    assert [m["role"] for m in store.load("c")] == ["user", "assistant", "compact"]


def test_reload_needs_a_session(server: ModelServer) -> None:
    with pytest.raises(AgentError) as caught:
        Agent(config={"base_url": server.base_url, "model": "m"}).reload()
    assert caught.value.kind == "request"


def test_a_stopped_run_commits_the_interrupted_results(server: ModelServer, store: Any) -> None:
    started, release = threading.Event(), threading.Event()

    @tool
    def wait_here(ctx: ToolContext) -> str:
        """Block until released or cancelled."""
        started.set()
        ctx.cancel.wait(30)
        release.wait(30)
        return "late"

    server.add({"tool_calls": [{"name": "wait_here", "arguments": {}}]})
    agent = session_agent(server, store.session("stop"), tools=[wait_here])
    errors: list[AgentError] = []

    def send() -> None:
        try:
            agent.send("go")
        except AgentError as error:
            errors.append(error)

    sender = threading.Thread(target=send)
    sender.start()
    assert started.wait(30)
    assert agent.stop()
    sender.join(30)
    release.set()
    assert [e.kind for e in errors] == ["aborted"]
    stored = store.load("stop")
    assert [m["role"] for m in stored] == ["user", "assistant", "tool"]
    assert stored[2]["content"][0]["output"]["type"] == "error-text"
    assert stored == agent.history


def test_send_history_on_a_session_agent_must_extend_the_stored_entries(
    server: ModelServer, store: Any
) -> None:
    server.add("one", "two")
    agent = session_agent(server, store.session("h"))
    agent.send("first")
    with pytest.raises(AgentError) as caught:
        agent.send("again", history=[user("a different past")])
    assert caught.value.kind == "conflict" and len(store.load("h")) == 2
    longer = [*agent.history, user("added in a copy")]
    agent.send("second", history=longer)
    assert agent.history is longer and store.load("h") == longer


def test_postgres_store_reconnects_after_losing_its_connection(postgres_dsn: str) -> None:
    import psycopg

    from agentcore.store import PostgresStore

    store = PostgresStore(postgres_dsn)
    store.append("r", [user("before")], expected_length=0)
    pid = store._connection.info.backend_pid
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(AgentError) as caught:
        store.load("r")
    assert caught.value.kind == "unknown"
    assert store.append("r", [user("after")], expected_length=1) == 2
    assert store.load("r") == [user("before"), user("after")]
    assert "dbname" not in repr(store)
    store.close()
