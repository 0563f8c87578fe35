"""A run's state in the store, on SQLite and PostgreSQL: journal, lease, queues, event log.

API.md §Durable sessions, at the store's level; the agent's side is tests/test_durable_*.py.
The second processes are real (`run_state_workers.py`), each with its own connection.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from children import Child
from store_workers import Spec, open_store

from agentcore import AgentError
from agentcore.store.journal import INPUT_CHANGED, MemoryJournal, input_hash

WORKERS = Path(__file__).with_name("run_state_workers.py")
LONG_S = 60.0  # bounds that only a hang reaches


def start(command: str, args: dict[str, Any]) -> Child:
    return Child([sys.executable, str(WORKERS), command, json.dumps(args)])


def line(child: Child) -> str:
    return child.line()


def finish(child: Child) -> None:
    child.finish()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The journal of an agent without a session, and a session's journal (SQLite and PostgreSQL)."""
    if request.param == "memory":
        yield MemoryJournal()
        return
    if request.param == "sqlite":
        spec: Spec = ("sqlite", str(tmp_path / "j.db"))
    else:
        spec = ("postgres", request.getfixturevalue("postgres_dsn"))
    store = open_store(spec)
    yield store.session("j").journal()
    store.close()


# ---------------------------------------------------------------- the call journal


def test_a_call_is_claimed_once_and_started_again_only_when_replayable(journal: Any) -> None:
    h = input_hash({"x": 1})
    assert journal.claim("c1", "t", h, replay=False) == ("run", None)
    assert journal.claim("c1", "t", h, replay=False) == ("started", None)
    assert journal.claim("c1", "t", h, replay=True) == ("run", None)
    assert journal.pending() == []


def test_a_deferred_call_waits_and_its_approval_is_consumed_by_one_claim(journal: Any) -> None:
    h = input_hash({"path": "a.txt"})
    journal.defer("c2", "rm", {"path": "a.txt"}, h)
    assert [r.pending_view() for r in journal.pending()] == [
        {"tool_call_id": "c2", "tool_name": "rm", "input": {"path": "a.txt"}, "input_hash": h}
    ]
    assert journal.claim("c2", "rm", h, replay=False) == ("pending", None)
    journal.decide("c2", True, None, h)
    assert journal.pending() == []
    assert journal.claim("c2", "rm", h, replay=False) == ("run", None)
    assert journal.claim("c2", "rm", h, replay=False) == ("started", None)


def test_a_denial_carries_its_reason_and_an_approval_binds_the_input(journal: Any) -> None:
    journal.defer("d", "rm", {"p": 1}, input_hash({"p": 1}))
    journal.decide("d", False, "not that file", None)
    assert journal.claim("d", "rm", input_hash({"p": 1}), replay=False) == ("denied", "not that file")
    journal.defer("e", "rm", {"p": 1}, input_hash({"p": 1}))
    journal.decide("e", True, None, None)
    assert journal.claim("e", "rm", input_hash({"p": 2}), replay=False) == ("changed", INPUT_CHANGED)


def test_a_stale_input_hash_is_a_conflict_and_an_unknown_or_decided_id_a_request_error(journal: Any) -> None:
    h = input_hash({"p": 1})
    journal.defer("c", "rm", {"p": 1}, h)
    with pytest.raises(AgentError) as stale:
        journal.decide("c", True, None, input_hash({"p": 2}))
    assert stale.value.kind == "conflict"
    assert len(journal.pending()) == 1, "a refused decision writes nothing"
    with pytest.raises(AgentError) as unknown:
        journal.decide("nope", True, None, None)
    assert unknown.value.kind == "request"
    journal.decide("c", True, None, h)
    with pytest.raises(AgentError) as twice:
        journal.decide("c", False, None, None)
    assert twice.value.kind == "request"
    with pytest.raises(AgentError) as bad:
        journal.decide("c", "yes", None, None)
    assert bad.value.kind == "request"


def test_the_input_hash_is_sha256_of_the_canonical_json() -> None:
    import hashlib

    value = {"b": [1, 2], "a": "é"}
    canonical = '{"a":"é","b":[1,2]}'
    assert input_hash(value) == hashlib.sha256(canonical.encode()).hexdigest()


def test_two_processes_claiming_one_decided_call_at_once_start_it_once(store_spec: Spec) -> None:
    """Each round a fresh approved call; both claimers are released together: one runs it."""
    store = open_store(store_spec)
    journal = store.session("race").journal()
    h = input_hash({})
    claimers = [start("claim", {"spec": list(store_spec), "session": "race", "hash": h}) for _ in range(2)]
    try:
        for process in claimers:
            assert line(process) == "ready"
        for round_ in range(30):
            call_id = f"c{round_}"
            journal.defer(call_id, "tool", {}, h)
            journal.decide(call_id, True, None, h)
            for process in claimers:
                process.write(call_id)
            outcomes = sorted(line(p) for p in claimers)
            assert outcomes == ["run", "started"], f"round {round_}: {outcomes}"
    finally:
        for process in claimers:
            finish(process)
        store.close()


def test_a_run_that_lost_its_lease_can_neither_start_a_call_nor_append(store: Any) -> None:
    first = store.session("fenced")
    first.load()
    lease = first.acquire("a", lease_s=0.3, cancel=threading.Event(), on_lost=lambda _handover: None)
    history: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    first.commit(history)
    # The holder freezes past its lease (its keeper stops renewing), and another process takes over.
    store.keeper.drop(lease)
    deadline = time.monotonic() + LONG_S
    while store.lease_state("fenced").live:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    other = open_store_like(store)
    second = other.session("fenced")
    second.load()
    taken = second.acquire("b", lease_s=10, cancel=threading.Event(), on_lost=lambda _handover: None)
    assert taken.generation == lease.generation + 1
    history.append({"role": "user", "content": "late"})
    with pytest.raises(AgentError) as appended:
        first.commit(history)
    assert appended.value.kind == "aborted"
    with pytest.raises(AgentError) as claimed:
        first.journal().claim("c", "t", input_hash({}), replay=False)
    assert claimed.value.kind == "aborted"
    assert store.load("fenced") == [{"role": "user", "content": "hi"}]
    assert second.journal().claim("c", "t", input_hash({}), replay=False) == ("run", None)
    second.release()
    other.close()


def open_store_like(store: Any) -> Any:
    from agentcore.store import SQLiteStore

    if isinstance(store, SQLiteStore):
        return SQLiteStore(store.path)
    from agentcore.store import PostgresStore

    return PostgresStore(store.dsn)


# ---------------------------------------------------------------- the lease across processes


def test_a_second_holder_stops_the_first_and_takes_over_once_it_released(
    store_spec: Spec, store: Any
) -> None:
    holder = start("hold", {"spec": list(store_spec), "session": "s", "lease_s": 10.0})
    try:
        generation = int(line(holder).split()[1])
        session = store.session("s")
        session.load()
        taken = session.acquire(
            "parent", lease_s=10.0, cancel=threading.Event(), on_lost=lambda _handover: None
        )
        assert line(holder).startswith("lost ")
        assert line(holder) == "released"
        assert taken.generation == generation + 1
        assert store.lease_state("s").owner.endswith(taken.owner[-8:])
        session.release()
        assert not store.lease_state("s").live
    finally:
        finish(holder)


def test_a_holder_killed_with_sigkill_is_replaced_once_its_lease_lapsed(store_spec: Spec, store: Any) -> None:
    holder = start("hold", {"spec": list(store_spec), "session": "k", "lease_s": 0.5, "keep": True})
    try:
        generation = int(line(holder).split()[1])
        assert store.lease_state("k").live
        holder.process.send_signal(signal.SIGKILL)
        holder.process.wait(timeout=LONG_S)
        session = store.session("k")
        session.load()
        cancel = threading.Event()
        timer = threading.Timer(LONG_S, cancel.set)
        timer.start()
        try:
            taken = session.acquire("heir", lease_s=10.0, cancel=cancel, on_lost=lambda _handover: None)
        finally:
            timer.cancel()
        assert taken.generation == generation + 1
        session.release()
    finally:
        finish(holder)


def test_store_stop_from_another_process_returns_once_the_run_has_ended(store_spec: Spec, store: Any) -> None:
    stopper = start("stop", {"spec": list(store_spec), "session": "idle"})
    assert json.loads(line(stopper))["stopped"] is False, "nothing runs: False at once"
    finish(stopper)
    holder = start("hold", {"spec": list(store_spec), "session": "busy", "lease_s": 10.0})
    try:
        line(holder)
        stopper = start("stop", {"spec": list(store_spec), "session": "busy"})
        assert line(holder).startswith("lost ")
        assert line(holder) == "released"
        assert json.loads(line(stopper))["stopped"] is True
        finish(stopper)
        assert not store.lease_state("busy").live
    finally:
        finish(holder)


def test_store_stop_with_a_timeout_raises_when_the_run_does_not_end(store: Any) -> None:
    session = store.session("stuck")
    session.load()
    session.acquire("a", lease_s=10.0, cancel=threading.Event(), on_lost=lambda _handover: None)
    try:
        with pytest.raises(TimeoutError):
            store.stop("stuck", timeout=0.2)
    finally:
        session.release()


def test_the_keeper_thread_ends_when_nothing_is_held(store: Any) -> None:
    session = store.session("t")
    session.load()
    session.acquire("a", lease_s=10.0, cancel=threading.Event(), on_lost=lambda _handover: None)
    assert any(t.name == "agentcore-store-keeper" for t in threading.enumerate())
    session.release()
    deadline = time.monotonic() + LONG_S
    while any(t.name == "agentcore-store-keeper" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the keeper thread outlived its last lease"
        time.sleep(0.01)


# ---------------------------------------------------------------- queues


def test_a_steer_from_another_process_leaves_its_queue_with_the_commit_that_delivers_it(
    store_spec: Spec, store: Any
) -> None:
    for kind, text in (("steer", "go left"), ("follow_up", "then sum up"), ("steer", "and hurry")):
        child = start("steer", {"spec": list(store_spec), "session": "q", "queue": kind, "message": text})
        finish(child)
        assert child.process.returncode == 0
    session = store.session("q")
    history = session.load()
    queues = session.queues()
    assert queues.queued() == {
        "steer": [{"role": "user", "content": "go left"}, {"role": "user", "content": "and hurry"}],
        "follow_up": [{"role": "user", "content": "then sum up"}],
    }
    taken = queues.take("steer", "one-at-a-time")
    assert taken == [{"role": "user", "content": "go left"}]
    # Taken but not committed (the process dies here): another process still finds it queued.
    assert store.session("q").queues().queued()["steer"][0] == {"role": "user", "content": "go left"}
    history.extend(taken)
    session.commit(history)
    assert store.session("q").queues().queued()["steer"] == [{"role": "user", "content": "and hurry"}]
    assert session.queues().clear() == {
        "steer": [{"role": "user", "content": "and hurry"}],
        "follow_up": [{"role": "user", "content": "then sum up"}],
    }
    assert session.queues().queued() == {"steer": [], "follow_up": []}


def test_a_queued_message_is_checked_before_it_is_queued(store: Any) -> None:
    for bad in ("", "   ", 42, [{"type": "nope"}], {"role": "assistant", "content": "x"}):
        with pytest.raises(AgentError) as refused:
            store.steer("v", bad)
        assert refused.value.kind == "request"
    assert store.session("v").queues().queued() == {"steer": [], "follow_up": []}


# ---------------------------------------------------------------- the event log and watch


def run_with_events(store: Any, session_id: str, events: list[dict[str, Any]]) -> None:
    session = store.session(session_id)
    session.load()
    session.acquire("w", lease_s=10.0, cancel=threading.Event(), on_lost=lambda _handover: None)
    for event in events:
        session.record(event)
    session.release()


def events_of(run: str, count: int) -> list[dict[str, Any]]:
    return [{"type": "message_update", "run_id": run, "agent_id": "a", "n": n} for n in range(count)]


def test_watch_from_another_process_sees_every_event_in_order_and_resumes_after_a_seq(
    store_spec: Spec, store: Any
) -> None:
    watcher = start("watch", {"spec": list(store_spec), "session": "w", "timeout": 120})
    try:
        assert line(watcher) == "ready"
        sent = events_of("r1", 300)
        run_with_events(store, "w", sent)
        seen = [json.loads(line(watcher)) for _ in sent]
    finally:
        watcher.process.terminate()
        finish(watcher)
    assert [{k: v for k, v in e.items() if k != "seq"} for e in seen] == sent
    seqs = [e["seq"] for e in seen]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    with store.watch("w", after=seqs[99], timeout=0.2) as rest:
        assert [e["n"] for e in rest] == list(range(100, 300))


def test_watch_starts_at_the_moment_of_the_call_and_ends_after_its_timeout(store: Any) -> None:
    run_with_events(store, "m", events_of("old", 5))
    watch = store.watch("m", timeout=0.3)
    run_with_events(store, "m", events_of("new", 3))
    with watch:
        assert [(e["run_id"], e["n"]) for e in watch] == [("new", 0), ("new", 1), ("new", 2)]


def test_watch_closed_from_another_thread_ends_its_iteration(store: Any) -> None:
    watch = store.watch("c")
    threading.Timer(0.2, watch.close).start()
    assert list(watch) == []


def test_the_events_of_the_current_and_the_previous_run_are_kept(store: Any) -> None:
    for run in ("r1", "r2", "r3"):
        run_with_events(store, "keep", events_of(run, 4))
    kept = list(store.watch("keep", after=0, timeout=0.1))
    assert {e["run_id"] for e in kept} >= {"r2", "r3"}
    # Starting the next run drops r1's (never the previous run's).
    session = store.session("keep")
    session.load()
    session.acquire("x", lease_s=10.0, cancel=threading.Event(), on_lost=lambda _handover: None)
    session.release()
    assert {e["run_id"] for e in store.watch("keep", after=0, timeout=0.1)} == {"r3"}


def test_delete_removes_the_run_state_too(store: Any) -> None:
    run_with_events(store, "gone", events_of("r", 2))
    store.steer("gone", "hi")
    store.session("gone").journal().defer("c", "t", {}, input_hash({}))
    store.delete("gone")
    assert store.session("gone").journal().pending() == []
    assert store.session("gone").queues().queued() == {"steer": [], "follow_up": []}
    assert list(store.watch("gone", after=0, timeout=0.1)) == []
    assert not store.lease_state("gone").live
