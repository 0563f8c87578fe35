"""A run's state in the store, in SQL both stores share: journal, lease, queues, event log.

    store.stop("user-42")                   # ends the session's run wherever it runs
    store.steer("user-42", "Only fix the bug.");  store.follow_up("user-42", "Then summarise.")
    with store.watch("user-42", after=120) as events:
        for event in events: ...            # every event of its runs, in order, with "seq"

Four tables beside the history (created with it, on first use):

- `agentcore_calls`   the call journal (store/journal.py says the states): one row per call id;
- `agentcore_runs`    one row per session: the lease (`owner`, `generation`, `expires_at`), a stop
                      asked of one generation (`stop_generation`), the event counter;
- `agentcore_queue`   steer and follow-up messages waiting for delivery, in order;
- `agentcore_events`  the event log `watch` reads: the current run's and the previous run's.

`generation` grows by one at every acquire and is the run's fencing token: the history appends
and call claims of a run carry it, and are refused once another process holds the session — so
a holder that froze past its lease and woke up can never write after its successor.

Every method here is one transaction. The SQL is written once with `?` placeholders; a store
supplies `_db(write)` (a connection, in a write transaction when asked: SQLite `BEGIN
IMMEDIATE`, PostgreSQL `BEGIN` + `FOR UPDATE` row locks), `_NOW` (the database's clock, in
epoch seconds: one clock for every machine that shares a PostgreSQL) and the lock clauses.

Two faces: the contract (`stop`, `steer`, `follow_up`, `watch`; API.md §Durable sessions), and
the run-state interface the session, the keeper and watch are built on (`claim_call` …
`last_seq`, `store/session.RunStore` lists them) — public so that those modules need no private
access, but not part of API.md: an application uses `Agent` and the contract.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Sequence
from typing import Any

from ..errors import AgentError
from .base import TextStore, check_id
from .journal import CallRecord, Outcome, check_decision, claim_step, decide_step
from .keeper import WAIT_POLL_S, Acquired, Holder, Keeper

Fence = tuple[str, int]  # (owner, generation) of the lease a write is made under

# Calls recorded as started in the transaction of the entry that carries them (`Along.claims`).
CLAIM_WITH_APPEND = (
    "INSERT INTO agentcore_calls (session, call_id, tool_name, input_hash, state, attempts, updated_at) "
    "VALUES (?, ?, ?, ?, 'started', 1, {now}) ON CONFLICT (session, call_id) DO NOTHING"
)
_keepers_lock = threading.Lock()


def durable_schema(real: str, bigint: str, serial: str) -> tuple[str, ...]:
    """CREATE statements of the run-state tables, in the store's types."""
    return (
        "CREATE TABLE IF NOT EXISTS agentcore_runs (session TEXT PRIMARY KEY, "
        f"owner TEXT NOT NULL DEFAULT '', generation {bigint} NOT NULL DEFAULT 0, "
        f"expires_at {real} NOT NULL DEFAULT 0, stop_generation {bigint} NOT NULL DEFAULT 0, "
        "stop_handover INTEGER NOT NULL DEFAULT 0, "
        f"event_seq {bigint} NOT NULL DEFAULT 0, run_seq {bigint} NOT NULL DEFAULT 1)",
        "CREATE TABLE IF NOT EXISTS agentcore_calls (session TEXT NOT NULL, call_id TEXT NOT NULL, "
        "tool_name TEXT NOT NULL, input_hash TEXT NOT NULL, state TEXT NOT NULL, input TEXT, reason TEXT, "
        f"attempts INTEGER NOT NULL DEFAULT 0, updated_at {real} NOT NULL, PRIMARY KEY (session, call_id))",
        f"CREATE TABLE IF NOT EXISTS agentcore_queue (qid {serial}, session TEXT NOT NULL, "
        "kind TEXT NOT NULL, entry TEXT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS agentcore_queue_session ON agentcore_queue (session, qid)",
        # One row per batch the keeper writes: the events numbered seq .. last_seq, as a JSON array.
        f"CREATE TABLE IF NOT EXISTS agentcore_events (session TEXT NOT NULL, seq {bigint} NOT NULL, "
        f"last_seq {bigint} NOT NULL, events TEXT NOT NULL, PRIMARY KEY (session, seq))",
    )


class SQLStore(TextStore):
    """The run-state half of SQLiteStore and PostgresStore (see the module docstring)."""

    _NOW = ""
    _FOR_UPDATE = ""
    _FOR_SHARE = ""

    def _db(self, write: bool) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    @property
    def keeper(self) -> Keeper:
        """This store object's keeper in this process (keeper.py), made on first use."""
        with _keepers_lock:
            found: Keeper | None = getattr(self, "_keeper", None)
            if found is None:
                found = self._keeper = Keeper(self)
            return found

    def maintain(self) -> None:
        """Upkeep the keeper does off the runs' threads, once per tick (SQLite: checkpoints)."""

    def _close_keeper(self) -> None:
        """`close()`'s share: write what is buffered, end the keeper's thread."""
        found: Keeper | None = getattr(self, "_keeper", None)
        if found is not None:
            found.close()

    def _check_fence(self, db: Any, id: str, fence: Fence | None) -> None:
        """Raise `aborted` when the lease `fence` names is no longer held: the run was superseded.

        Inside a write transaction; PostgreSQL reads the row FOR SHARE, so a takeover waits for
        the transaction to end.
        """
        if fence is None:
            return
        row = db.execute(
            "SELECT 1 FROM agentcore_runs WHERE session = ? AND owner = ? "
            f"AND generation = ?{self._FOR_SHARE}",
            (id, *fence),
        ).fetchone()
        if row is None:
            raise superseded_error(id)

    # ------------------------------------------------------------ the contract

    def stop(self, session_id: str, timeout: float | None = None) -> bool:
        """Stop the session's run wherever it runs; return once it has ended (True if one ran).

        Raises:
            TimeoutError: `timeout` seconds passed first (the request stays: the run still stops).
        """
        id = check_id(session_id)
        holder = self.lease_state(id)
        if not holder.live:
            return False
        self.request_stop(id, holder.generation)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            now = self.lease_state(id)
            if not now.live or now.generation != holder.generation:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"the run of session {id!r} did not end within {timeout} s")
            time.sleep(WAIT_POLL_S)

    def steer(self, session_id: str, message: Any) -> None:
        """Queue a steer message durably; the process running the session delivers it (§Steering)."""
        self.queue_add(check_id(session_id), "steer", _queued_text(message))

    def follow_up(self, session_id: str, message: Any) -> None:
        """Queue a follow-up message durably, delivered when the session's run would end."""
        self.queue_add(check_id(session_id), "follow_up", _queued_text(message))

    def watch(self, session_id: str, *, after: int | None = None, timeout: float | None = None) -> Any:
        """The events of the session's runs, from now (or after `seq == after`), as they are written.

        A context manager and an iterator; it ends after `timeout` seconds without an event, or
        when closed.
        """
        from .watch import Watch

        id = check_id(session_id)
        if after is not None and (isinstance(after, bool) or not isinstance(after, int)):
            raise AgentError(f"after must be an int seq or None, got {after!r}", kind="request")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)):
            raise AgentError(f"timeout must be a number of seconds or None, got {timeout!r}", kind="request")
        start = after if after is not None else self.last_seq(id)
        return Watch(self, id, start, timeout)

    # ------------------------------------------------------------ the call journal

    def claim_call(
        self, id: str, call_id: str, tool_name: str, hash: str, replay: bool, fence: Fence | None
    ) -> tuple[Outcome, str | None]:
        with self._db(write=True) as db:
            self._check_fence(db, id, fence)
            for _ in range(2):
                record = _record(db, id, call_id, self._FOR_UPDATE)
                outcome, state, reason = claim_step(record, hash, replay)
                if state is None:
                    return outcome, reason
                if record is not None:
                    db.execute(
                        f"UPDATE agentcore_calls SET state = 'started', attempts = attempts + 1, "
                        f"updated_at = {self._NOW} WHERE session = ? AND call_id = ?",
                        (id, call_id),
                    )
                    return outcome, reason
                inserted = db.execute(
                    "INSERT INTO agentcore_calls (session, call_id, tool_name, input_hash, state, attempts, "
                    f"updated_at) VALUES (?, ?, ?, ?, 'started', 1, {self._NOW}) "
                    "ON CONFLICT (session, call_id) DO NOTHING",
                    (id, call_id, tool_name, hash),
                ).rowcount
                if inserted == 1:
                    return outcome, reason
                # Another process inserted the row between our read and our insert (PostgreSQL
                # only: SQLite's write lock serialises the whole transaction): read it again.
            raise AgentError(f"tool call {call_id!r}: the journal row keeps changing", kind="unknown")

    def defer_call(
        self, id: str, call_id: str, tool_name: str, input: Any, hash: str, fence: Fence | None
    ) -> None:
        with self._db(write=True) as db:
            self._check_fence(db, id, fence)
            db.execute(
                "INSERT INTO agentcore_calls (session, call_id, tool_name, input_hash, state, input, "
                f"updated_at) VALUES (?, ?, ?, ?, 'pending', ?, {self._NOW}) "
                "ON CONFLICT (session, call_id) DO NOTHING",
                (id, call_id, tool_name, hash, json.dumps(input)),
            )

    def call_records(self, id: str, call_ids: Sequence[str]) -> dict[str, CallRecord]:
        found: dict[str, CallRecord] = {}
        with self._db(write=False) as db:
            for start in range(0, len(call_ids), 500):
                chunk = list(call_ids[start : start + 500])
                marks = ", ".join("?" * len(chunk))
                rows = db.execute(
                    f"SELECT {_RECORD_COLUMNS} FROM agentcore_calls "
                    f"WHERE session = ? AND call_id IN ({marks})",
                    (id, *chunk),
                ).fetchall()
                found.update((row[0], _record_of(row)) for row in rows)
        return found

    def pending_calls(self, id: str) -> list[CallRecord]:
        with self._db(write=False) as db:
            rows = db.execute(
                f"SELECT {_RECORD_COLUMNS} FROM agentcore_calls WHERE session = ? AND state = 'pending' "
                "ORDER BY updated_at, call_id",
                (id,),
            ).fetchall()
        return [_record_of(row) for row in rows]

    def decide_call(self, id: str, call_id: str, allow: bool, reason: str | None, hash: str | None) -> None:
        check_decision(call_id, allow, reason, hash)
        with self._db(write=True) as db:
            decide_step(_record(db, id, call_id, self._FOR_UPDATE), call_id, hash)
            db.execute(
                f"UPDATE agentcore_calls SET state = ?, reason = ?, updated_at = {self._NOW} "
                "WHERE session = ? AND call_id = ?",
                ("allowed" if allow else "denied", reason, id, call_id),
            )

    def close_calls(self, id: str, call_ids: Sequence[str], fence: Fence | None) -> None:
        """Calls a send moved on from: a decision taken later finds them closed."""
        if not call_ids:
            return
        with self._db(write=True) as db:
            self._check_fence(db, id, fence)
            for start in range(0, len(call_ids), 500):
                chunk = list(call_ids[start : start + 500])
                marks = ", ".join("?" * len(chunk))
                db.execute(
                    f"UPDATE agentcore_calls SET state = 'closed', updated_at = {self._NOW} "
                    f"WHERE session = ? AND call_id IN ({marks}) "
                    "AND state IN ('pending', 'allowed', 'denied')",
                    (id, *chunk),
                )

    # ------------------------------------------------------------ the lease

    def acquire_lease(self, id: str, owner: str, lease_s: float) -> Acquired | Holder:
        """Take the session if nobody holds it (or the holder's lease lapsed); else say who holds it.

        Taking it starts a new run: the events of runs before the previous one are dropped.
        """
        now = self._NOW
        with self._db(write=True) as db:
            db.execute(
                "INSERT INTO agentcore_runs (session) VALUES (?) ON CONFLICT (session) DO NOTHING", (id,)
            )
            row = db.execute(
                f"SELECT owner, generation, expires_at - {now}, stop_generation, event_seq, run_seq "
                f"FROM agentcore_runs WHERE session = ?{self._FOR_UPDATE}",
                (id,),
            ).fetchone()
            holder = Holder(str(row[0]), int(row[1]), float(row[2]), int(row[3]))
            if holder.live:
                return holder
            db.execute("DELETE FROM agentcore_events WHERE session = ? AND last_seq < ?", (id, int(row[5])))
            db.execute(
                f"UPDATE agentcore_runs SET owner = ?, generation = generation + 1, expires_at = {now} + ?, "
                "stop_generation = 0, stop_handover = 0, run_seq = event_seq + 1 WHERE session = ?",
                (owner, float(lease_s), id),
            )
            length = db.execute("SELECT length FROM agentcore_sessions WHERE id = ?", (id,)).fetchone()
            return Acquired(holder.generation + 1, int(length[0]) if length else 0)

    def lease_state(self, id: str) -> Holder:
        with self._db(write=False) as db:
            row = db.execute(
                f"SELECT owner, generation, expires_at - {self._NOW}, stop_generation "
                "FROM agentcore_runs WHERE session = ?",
                (id,),
            ).fetchone()
        if row is None:
            return Holder("", 0, 0.0, 0)
        return Holder(str(row[0]), int(row[1]), float(row[2]), int(row[3]))

    def request_stop(self, id: str, generation: int, handover: bool = False) -> None:
        """Ask the run of `generation` to stop (its keeper hears it at its next poll).

        `handover`: a resume takes over, so the stopped run leaves the calls it never started
        open for it, instead of answering them as interrupted.
        """
        with self._db(write=True) as db:
            db.execute(
                "UPDATE agentcore_runs SET stop_generation = ?, stop_handover = ? "
                "WHERE session = ? AND generation = ? AND owner <> ''",
                (generation, int(handover), id, generation),
            )

    def poll_leases(
        self, held: Sequence[tuple[str, str, int]]
    ) -> tuple[dict[tuple[str, int], bool], set[str]]:
        """Of the leases `(session, owner, generation)` held here: those asked to stop, or lost —
        each mapped to whether the stop is a handover to a resume (see `request_stop`) — and the
        sessions that have steer / follow-up messages waiting. One query.
        """
        if not held:
            return {}, set()
        ids = sorted({session for session, _, _ in held})
        current: dict[str, tuple[str, int, int, int]] = {}
        queued: set[str] = set()
        with self._db(write=False) as db:
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ", ".join("?" * len(chunk))
                rows = db.execute(
                    "SELECT r.session, r.owner, r.generation, r.stop_generation, r.stop_handover, "
                    "EXISTS (SELECT 1 FROM agentcore_queue q WHERE q.session = r.session) "
                    f"FROM agentcore_runs r WHERE r.session IN ({marks})",
                    tuple(chunk),
                ).fetchall()
                current.update((str(r[0]), (str(r[1]), int(r[2]), int(r[3]), int(r[4]))) for r in rows)
                queued.update(str(r[0]) for r in rows if r[5])
        ended = {}
        for session, owner, generation in held:
            now = current.get(session)
            if now is None or now[0] != owner or now[1] != generation:
                ended[session, generation] = False
            elif now[2] == generation:
                ended[session, generation] = bool(now[3])
        return ended, queued

    def renew_leases(self, held: Sequence[tuple[str, str, int, float]]) -> None:
        """Push back the expiry of each `(session, owner, generation, lease_s)` still held."""
        if not held:
            return
        with self._db(write=True) as db:
            for session, owner, generation, lease_s in held:
                db.execute(
                    f"UPDATE agentcore_runs SET expires_at = {self._NOW} + ? "
                    "WHERE session = ? AND owner = ? AND generation = ?",
                    (float(lease_s), session, owner, generation),
                )

    def release_lease(self, id: str, owner: str, generation: int) -> None:
        with self._db(write=True) as db:
            db.execute(
                "UPDATE agentcore_runs SET owner = '', expires_at = 0 "
                "WHERE session = ? AND owner = ? AND generation = ?",
                (id, owner, generation),
            )

    # ------------------------------------------------------------ steer and follow-up queues

    def queue_add(self, id: str, kind: str, text: str) -> None:
        with self._db(write=True) as db:
            db.execute(
                "INSERT INTO agentcore_queue (session, kind, entry) VALUES (?, ?, ?)", (id, kind, text)
            )

    def queue_rows(self, id: str, kind: str | None = None) -> list[tuple[int, str, str]]:
        """`(qid, kind, entry text)` of the queued messages, oldest first."""
        with self._db(write=False) as db:
            if kind is None:
                rows = db.execute(
                    "SELECT qid, kind, entry FROM agentcore_queue WHERE session = ? ORDER BY qid", (id,)
                ).fetchall()
            else:
                rows = db.execute(
                    "SELECT qid, kind, entry FROM agentcore_queue "
                    "WHERE session = ? AND kind = ? ORDER BY qid",
                    (id, kind),
                ).fetchall()
        return [(int(r[0]), str(r[1]), str(r[2])) for r in rows]

    def queue_remove(self, id: str, qids: Sequence[int]) -> list[tuple[int, str, str]]:
        """Remove queued messages; returns those that were still there (another process may race)."""
        if not qids:
            return []
        with self._db(write=True) as db:
            marks = ", ".join("?" * len(qids))
            params = (id, *qids)
            rows = db.execute(
                f"SELECT qid, kind, entry FROM agentcore_queue WHERE session = ? AND qid IN ({marks}) "
                f"ORDER BY qid{self._FOR_UPDATE}",
                params,
            ).fetchall()
            db.execute(f"DELETE FROM agentcore_queue WHERE session = ? AND qid IN ({marks})", params)
        return [(int(r[0]), str(r[1]), str(r[2])) for r in rows]

    # ------------------------------------------------------------ the event log

    def append_events(self, id: str, events: Sequence[dict[str, Any]]) -> int:
        """Number `events` on from the session's counter and store them (one row); returns the last seq."""
        if not events:
            return self.last_seq(id)
        with self._db(write=True) as db:
            db.execute(
                "INSERT INTO agentcore_runs (session) VALUES (?) ON CONFLICT (session) DO NOTHING", (id,)
            )
            row = db.execute(
                "UPDATE agentcore_runs SET event_seq = event_seq + ? WHERE session = ? RETURNING event_seq",
                (len(events), id),
            ).fetchone()
            last = int(row[0])
            first = last - len(events) + 1
            text = _events_text(events, first)
            db.execute(
                "INSERT INTO agentcore_events (session, seq, last_seq, events) VALUES (?, ?, ?, ?)",
                (id, first, last, text),
            )
        return last

    def events_after(self, id: str, seq: int, limit: int = 100) -> list[dict[str, Any]]:
        """The stored events with a seq above `seq`, in order (from up to `limit` batches)."""
        with self._db(write=False) as db:
            rows = db.execute(
                "SELECT events FROM agentcore_events WHERE session = ? AND last_seq > ? ORDER BY seq LIMIT ?",
                (id, seq, limit),
            ).fetchall()
        return [event for row in rows for event in json.loads(row[0]) if event["seq"] > seq]

    def last_seq(self, id: str) -> int:
        with self._db(write=False) as db:
            row = db.execute("SELECT event_seq FROM agentcore_runs WHERE session = ?", (id,)).fetchone()
        return int(row[0]) if row else 0

    def delete_run_state(self, db: Any, id: str) -> None:
        """`delete(id)`'s share: the session's journal, lease, queues and events go with it."""
        for table in ("agentcore_calls", "agentcore_queue", "agentcore_events", "agentcore_runs"):
            db.execute(f"DELETE FROM {table} WHERE session = ?", (id,))


_RECORD_COLUMNS = "call_id, tool_name, input_hash, state, input, reason"


def _record(db: Any, id: str, call_id: str, for_update: str) -> CallRecord | None:
    row = db.execute(
        f"SELECT {_RECORD_COLUMNS} FROM agentcore_calls WHERE session = ? AND call_id = ?{for_update}",
        (id, call_id),
    ).fetchone()
    return _record_of(row) if row is not None else None


def _record_of(row: Sequence[Any]) -> CallRecord:
    return CallRecord(
        tool_call_id=str(row[0]),
        tool_name=str(row[1]),
        input_hash=str(row[2]),
        state=row[3],
        input=json.loads(row[4]) if row[4] is not None else None,
        reason=row[5],
    )


def superseded_error(id: str) -> AgentError:
    return AgentError(
        f"session {id!r} is now held by another run (superseded or stopped); this run writes nothing more",
        kind="aborted",
    )


def _queued_text(message: Any) -> str:
    from ..config import DEFAULTS
    from ..queues import queued_entry

    return json.dumps(queued_entry(message, DEFAULTS))


def _events_text(events: Sequence[dict[str, Any]], first: int) -> str:
    """The batch as one JSON array, each event with its seq (one `json.dumps`: the C encoder)."""
    numbered = [{"seq": first + offset, **event} for offset, event in enumerate(events)]
    try:
        return json.dumps(numbered)
    except (TypeError, ValueError):
        # Events are plain JSON by contract; anything else is written as its repr, never lost.
        return json.dumps(numbered, default=repr)
