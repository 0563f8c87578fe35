"""One conversation of a store, kept in step with an agent's history — and its runs, across processes.

    session = store.session("user-42")
    history = session.load()
    lease = session.acquire(owner, lease_s=10.0, cancel=running.cancel, on_lost=running.cancel.set)
    session.sync(history)              # brought up to date with the store (or a conflict)
    session.commit(history)            # each appended entry, fenced by the lease
    session.journal(), session.queues(), session.record(event)
    session.release()

A run holds the session's lease from before it writes its input until its last event is
written (`acquire` / `release`). Taking the lease from a live holder means asking it to stop
and waiting until it has: "latest instruction wins" across processes, and never two writers.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .._utils.ids import random_hex
from ..errors import AgentError
from .journal import CallRecord, Outcome, closing_result
from .keeper import WAIT_POLL_S, Acquired, Holder, Keeper, Lease

Message = dict[str, Any]
Fence = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Along:
    """What a run writes in the transaction of an append (store/session.py, store/sql.py).

    Attributes:
        fence: (owner, generation) of the run's lease; the append is refused once it is not held.
        dequeue: queued steer / follow-up messages the entries deliver: they leave their queue.
        claims: (call_id, tool_name, input_hash) of calls the entry carries that start right after
            it: recorded as started with it (the journal's claim, in the same transaction).
    """

    fence: tuple[str, int] | None = None
    dequeue: tuple[int, ...] = ()
    claims: tuple[tuple[str, str, str], ...] = ()


class RowStore(Protocol):
    """What a session asks of its store: the text rows (every store), the run state (store/sql.py)."""

    def load_texts(self, id: str) -> list[str]: ...

    def append_texts(
        self, id: str, texts: list[str], expected_length: int, along: Along | None = None
    ) -> int: ...


class RunStore(RowStore, Protocol):
    """A store that keeps run state too (SQLiteStore, PostgresStore)."""

    @property
    def keeper(self) -> Keeper: ...

    def acquire_lease(self, id: str, owner: str, lease_s: float) -> Acquired | Holder: ...

    def request_stop(self, id: str, generation: int, handover: bool = False) -> None: ...

    def release_lease(self, id: str, owner: str, generation: int) -> None: ...

    def claim_call(
        self, id: str, call_id: str, tool_name: str, hash: str, replay: bool, fence: Fence | None
    ) -> tuple[Outcome, str | None]: ...

    def defer_call(
        self, id: str, call_id: str, tool_name: str, input: Any, hash: str, fence: Fence | None
    ) -> None: ...

    def call_records(self, id: str, call_ids: Sequence[str]) -> dict[str, CallRecord]: ...

    def pending_calls(self, id: str) -> list[CallRecord]: ...

    def decide_call(
        self, id: str, call_id: str, allow: bool, reason: str | None, hash: str | None
    ) -> None: ...

    def close_calls(self, id: str, call_ids: Sequence[str], fence: Fence | None) -> None: ...

    def queue_add(self, id: str, kind: str, text: str) -> None: ...

    def queue_rows(self, id: str, kind: str | None = None) -> list[tuple[int, str, str]]: ...

    def queue_remove(self, id: str, qids: Sequence[int]) -> list[tuple[int, str, str]]: ...


class Session:
    """One conversation of a store, kept in step with an agent's history.

    The session remembers the text of every entry it has seen stored, so that at each send it can
    tell entries appended by hand (committed then) from stored entries edited or removed (a
    conflict). One session object serves one agent.
    """

    def __init__(self, store: RowStore, id: str) -> None:
        self.store = store
        self.id = id
        self._stored: list[str] = []
        self._lease: Lease | None = None
        # Queued messages taken for delivery and not yet committed: entry object id -> queue row.
        self._taken: dict[int, int] = {}
        # Calls to record as started with the next commit (the entry that carries them).
        self._claims: tuple[tuple[str, str, str], ...] = ()

    def __repr__(self) -> str:
        return f"Session({self.id!r}, {len(self._stored)} stored entries)"

    # ------------------------------------------------------------ history

    def load(self) -> list[Message]:
        """The stored history (a fresh list), remembered as the agent's starting point."""
        self._stored = self.store.load_texts(self.id)
        return [json.loads(text) for text in self._stored]

    def check(self, history: Sequence[Message]) -> None:
        """Raise conflict if a stored entry was edited or removed from `history`; writes nothing."""
        if len(history) < len(self._stored):
            raise AgentError(
                f"session {self.id!r}: {len(self._stored) - len(history)} stored entries were removed "
                "from agent.history; history is append-only (agent.reload() restores it)",
                kind="conflict",
            )
        for index, text in enumerate(self._stored):
            if _dumps(history[index], index) != text:
                raise AgentError(
                    f"session {self.id!r}: stored entry {index} of agent.history was edited; "
                    "history is append-only (agent.reload() restores it)",
                    kind="conflict",
                )

    def sync(self, history: list[Message]) -> None:
        """Bring `history` up to the store's before a run writes; conflict only if the two diverged.

        Entries another writer appended since are added to `history` (the same list), as
        `reload()` would; entries appended here by hand stay to be committed — unless the store
        holds others meanwhile, which is a real divergence.
        """
        self.check(history)
        lease = self._lease
        if lease is not None and lease.length == len(self._stored):
            return
        texts = self.store.load_texts(self.id)
        known = len(self._stored)
        if texts[:known] != self._stored:
            raise AgentError(
                f"session {self.id!r}: the store no longer holds the entries this agent loaded "
                "(deleted or rewritten); agent.reload() fetches what it holds",
                kind="conflict",
            )
        if len(texts) > known and len(history) > known:
            raise AgentError(
                f"session {self.id!r}: {len(history) - known} entries appended to agent.history are not "
                f"in the store, which holds {len(texts) - known} others since; agent.reload() fetches them",
                kind="conflict",
            )
        history.extend(json.loads(text) for text in texts[known:])
        self._stored = texts

    def commit(self, history: Sequence[Message]) -> None:
        """Store the entries of `history` past the stored ones, stating the length they follow.

        Under a lease the append carries its fence; queued messages among the entries leave
        their queue in the same transaction.

        Raises:
            AgentError: kind "conflict" when another writer appended meanwhile (nothing written);
                kind "aborted" when another run holds the session now.
        """
        new = history[len(self._stored) :]
        if not new:
            return
        texts = encode(new, start=len(self._stored))
        fence = self._lease.fence if self._lease is not None else None
        taken = self._taken
        dequeue = tuple(taken[id(e)] for e in new if id(e) in taken) if taken else ()
        claims, self._claims = self._claims, ()
        along = Along(fence, dequeue, claims) if fence is not None or dequeue or claims else None
        self.store.append_texts(self.id, texts, len(self._stored), along)
        self._stored.extend(texts)
        if dequeue:
            for entry in new:
                taken.pop(id(entry), None)

    # ------------------------------------------------------------ the lease (one run at a time)

    def acquire(
        self,
        agent_id: str,
        *,
        lease_s: float,
        cancel: threading.Event,
        on_lost: Callable[[bool], None],
        handover: bool = False,
    ) -> Lease:
        """Hold the session for a run, first stopping the run that holds it (wherever it runs).

        Waits until that run has ended, or its holder's lease lapsed (a dead process). `on_lost`
        cancels this run when another asks it to stop; `handover` (this run is a resume) asks
        the run it stops to leave the calls it never started for this one.

        Raises:
            AgentError: kind "aborted" when `cancel` is set while waiting.
        """
        store = self._durable()
        owner = f"{socket.gethostname()}/{os.getpid()}/{agent_id[:12]}/{random_hex()[:8]}"
        asked = -1
        while True:
            got = store.acquire_lease(self.id, owner, lease_s)
            if isinstance(got, Acquired):
                lease = Lease(self.id, owner, got.generation, lease_s, on_lost, got.length)
                self._lease = lease
                store.keeper.hold(lease)
                return lease
            if got.generation != asked:
                store.request_stop(self.id, got.generation, handover)
                asked = got.generation
            if cancel.wait(min(WAIT_POLL_S, max(got.remaining_s, 0.001))):
                raise AgentError("the send was superseded or stopped before it started", kind="aborted")

    def release(self) -> None:
        """The run has ended: write its last events, then let the next run take the session."""
        lease, self._lease = self._lease, None
        self._taken.clear()
        if lease is None:
            return
        store = self._durable()
        holder = store.keeper
        holder.drop(lease)
        try:
            holder.flush(self.id)
        finally:
            store.release_lease(self.id, lease.owner, lease.generation)

    @property
    def lease(self) -> Lease | None:
        return self._lease

    # ------------------------------------------------------------ the run's durable parts

    def journal(self) -> SessionJournal:
        """The session's call journal; a run's claims are fenced by its lease."""
        return SessionJournal(self, self._lease.fence if self._lease else None)

    def queues(self) -> StoreQueues:
        return StoreQueues(self)

    def record(self, event: dict[str, Any]) -> None:
        """An event of this session's run, for `store.watch` (buffered; written by the keeper)."""
        self._durable().keeper.record(self.id, event)

    def recorder(self) -> Callable[[dict[str, Any]], None]:
        """`record` as a held run's event sink (cheaper per event: see `Keeper.recorder`)."""
        return self._durable().keeper.recorder(self.id)

    def _durable(self) -> RunStore:
        store = self.store
        if not hasattr(store, "acquire_lease"):
            raise AgentError(
                f"{type(store).__name__} keeps histories only: "
                "durable runs need SQLiteStore or PostgresStore",
                kind="config",
            )
        return store  # type: ignore[return-value]


class SessionJournal:
    """A session's call journal (store/journal.py), in its store; `fence` is the run's lease."""

    def __init__(self, session: Session, fence: Fence | None) -> None:
        self.session = session
        self.store, self.id, self.fence = session._durable(), session.id, fence

    def stage(self, claims: Sequence[tuple[str, str, str]]) -> None:
        """Record these calls as started with the next commit: the entry that carries them."""
        self.session._claims = tuple(claims)

    def claim(self, call_id: str, tool_name: str, hash: str, *, replay: bool) -> tuple[Outcome, str | None]:
        return self.store.claim_call(self.id, call_id, tool_name, hash, replay, self.fence)

    def defer(self, call_id: str, tool_name: str, input: Any, hash: str) -> None:
        self.store.defer_call(self.id, call_id, tool_name, input, hash, self.fence)

    def records(self, call_ids: Sequence[str]) -> dict[str, CallRecord]:
        return self.store.call_records(self.id, call_ids)

    def pending(self) -> list[CallRecord]:
        return self.store.pending_calls(self.id)

    def decide(self, call_id: str, allow: bool, reason: str | None, hash: str | None) -> None:
        self.store.decide_call(self.id, call_id, allow, reason, hash)

    def close(self, call_ids: Sequence[str]) -> list[dict[str, Any]]:
        # The results are known before the calls are closed; closed first, then written.
        records = self.store.call_records(self.id, call_ids)
        self.store.close_calls(self.id, call_ids, self.fence)
        return [closing_result(records.get(call_id)) for call_id in call_ids]

    def settle(self, call_ids: Iterable[str]) -> None:
        """Nothing to forget: the rows are the record of what started."""


class StoreQueues:
    """A session's steer and follow-up queues, in its store (the interface of `queues.Queues`).

    A message leaves its queue in the transaction that commits the entry delivering it
    (`Session.commit`): until then it is only taken, and a crash leaves it queued.
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self.store = session._durable()

    def add(self, queue: str, entry: Message) -> None:
        self.store.queue_add(self.session.id, queue, json.dumps(entry))
        lease = self.session.lease
        if lease is not None:
            lease.queued = True

    def take(self, queue: str, mode: str) -> list[Message]:
        # A delivery point of a running session reads the queue only when a message may wait
        # (`Lease.queued`): the store is read once per keeper tick at most, not once per round.
        lease = self.session.lease
        if lease is not None and not lease.queued:
            return []
        waiting = self._waiting(None)
        if lease is not None:
            lease.queued = bool(waiting)
        rows = [row for row in waiting if row[1] == queue]
        count = len(rows) if mode == "all" else min(1, len(rows))
        taken = []
        for qid, _kind, text in rows[:count]:
            entry = json.loads(text)
            self.session._taken[id(entry)] = qid
            taken.append(entry)
        return taken

    def give_back(self, queue: str, entries: list[Message]) -> None:
        for entry in entries:
            self.session._taken.pop(id(entry), None)

    def has(self, queue: str) -> bool:
        return bool(self._waiting(queue))

    def __bool__(self) -> bool:
        return bool(self._waiting(None))

    def queued(self) -> dict[str, list[Message]]:
        return _shaped(self._waiting(None))

    def clear(self) -> dict[str, list[Message]]:
        rows = self._waiting(None)
        return _shaped(self.store.queue_remove(self.session.id, [qid for qid, _, _ in rows]))

    def _waiting(self, queue: str | None) -> list[tuple[int, str, str]]:
        taken = set(self.session._taken.values())
        return [row for row in self.store.queue_rows(self.session.id, queue) if row[0] not in taken]


def _shaped(rows: list[tuple[int, str, str]]) -> dict[str, list[Message]]:
    shaped: dict[str, list[Message]] = {"steer": [], "follow_up": []}
    for _qid, kind, text in rows:
        shaped[kind].append(json.loads(text))
    return shaped


def encode(entries: Sequence[Message], *, start: int = 0) -> list[str]:
    """`json.dumps` of each entry, which must be a dict of plain JSON values."""
    if isinstance(entries, (str, bytes, dict)) or not isinstance(entries, Sequence):
        raise AgentError(f"entries must be a list of dicts, got {type(entries).__name__}", kind="request")
    return [_dumps(entry, start + offset) for offset, entry in enumerate(entries)]


def _dumps(entry: Any, index: int) -> str:
    if not isinstance(entry, dict):
        raise AgentError(f"history entry {index} must be a dict, got {type(entry).__name__}", kind="request")
    try:
        return json.dumps(entry)
    except (TypeError, ValueError) as exc:
        raise AgentError(f"history entry {index} is not plain JSON: {exc}", kind="request") from exc
