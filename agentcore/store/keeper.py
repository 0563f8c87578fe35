"""The store's one background thread in a process: it keeps the leases of the runs held here.

    keeper = Keeper(store)
    keeper.hold(lease)            # renewed every lease_s / 4; `lease.lost()` when asked to stop
    keeper.record(id, event)      # buffered; written in batches, numbered by the store
    keeper.flush(id); keeper.drop(lease)

Every `TICK_S` it writes the buffered events (one transaction per session), reads the lease
rows of every run held here in one query — a `store.stop`, a superseding send from another
process, or a takeover after a lapse each make the run's `lost()` fire, which cancels the run —
notes which of those sessions have steer / follow-up messages waiting (so that a delivery point
reads the queue only then), and renews the leases that are due. So a stop reaches a run within a
tick plus one query, and a run's events cost it an append to a list. The thread ends when nothing
is held or buffered (a later `hold` starts it again) and at `store.close()`; after a fork the
child starts its own.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("agentcore")

TICK_S = 0.1
# How often a waiting caller (a superseding send, `store.stop`) looks at the lease again.
WAIT_POLL_S = 0.02


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a session's lease: `owner` "" when nobody; `remaining_s` ≤ 0 once it lapsed."""

    owner: str
    generation: int
    remaining_s: float
    stop_generation: int

    @property
    def live(self) -> bool:
        return bool(self.owner) and self.remaining_s > 0


@dataclass(frozen=True, slots=True)
class Acquired:
    """A lease just taken: its generation (the fence), and the stored history length."""

    generation: int
    length: int


@dataclass(eq=False)
class Lease:
    """A run's hold on a session: `fence` = (owner, generation) goes with every write it makes."""

    session_id: str
    owner: str
    generation: int
    lease_s: float
    # Cancels the run; its argument says whether a resume takes over (see SQLStore.request_stop).
    on_lost: Callable[[bool], None]
    # The stored history length when the lease was taken (the session brings history up to it).
    length: int = 0
    renewed_at: float = field(default_factory=time.monotonic)
    # Whether a steer / follow-up may wait in the store: a delivery point reads the queue only
    # then (set by the keeper when its poll sees one, and by a local add).
    queued: bool = True
    _lost: bool = False

    @property
    def fence(self) -> tuple[str, int]:
        return (self.owner, self.generation)

    def lost(self, handover: bool = False) -> None:
        """Asked to stop, or taken over: cancel the run (once)."""
        if self._lost:
            return
        self._lost = True
        try:
            self.on_lost(handover)
        except Exception:
            log.warning("the run of session %r could not be cancelled", self.session_id, exc_info=True)


class Keeper:
    """Leases and buffered events of one store object, in this process (see the module docstring)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._leases: list[Lease] = []
        self._events: dict[str, list[dict[str, Any]]] = {}
        # Held while buffered events are taken and written: two flushes never reorder a session.
        self._flushing = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._pid = os.getpid()

    def hold(self, lease: Lease) -> None:
        with self._lock:
            self._forked()
            self._leases.append(lease)
            self._start()

    def drop(self, lease: Lease) -> None:
        with self._lock:
            if lease in self._leases:
                self._leases.remove(lease)
            self._wake.notify_all()

    def record(self, session_id: str, event: dict[str, Any]) -> None:
        """Buffer one event of a run of `session_id` (the store numbers it when it is written)."""
        with self._lock:
            self._forked()
            self._events.setdefault(session_id, []).append(event)
            self._start()

    def recorder(self, session_id: str) -> Callable[[dict[str, Any]], None]:
        """`record` for one session, as a run's event sink: a lock and an append per event (the
        run's lease keeps this keeper's thread alive, so there is nothing to start)."""

        def record(event: dict[str, Any]) -> None:
            with self._lock:
                self._events.setdefault(session_id, []).append(event)

        return record

    def flush(self, session_id: str | None = None) -> None:
        """Write what is buffered (for one session, or all) before returning."""
        with self._flushing:
            with self._lock:
                if session_id is None:
                    taken, self._events = self._events, {}
                else:
                    taken = {session_id: self._events.pop(session_id, [])}
            for id, events in taken.items():
                if not events:
                    continue
                try:
                    self.store.append_events(id, events)
                except Exception:
                    log.warning(
                        "%d events of session %r could not be written", len(events), id, exc_info=True
                    )

    def close(self) -> None:
        """Write what is buffered and end the thread (the store is closing)."""
        with self._lock:
            self._closed = True
            thread = self._thread
            self._wake.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self.flush()

    # ------------------------------------------------------------ the thread

    def _forked(self) -> None:
        """After a fork, the parent's thread and runs are not ours: start afresh (lock held)."""
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._leases, self._events, self._thread = [], {}, None
            self._flushing = threading.Lock()

    def _start(self) -> None:
        if self._thread is None:
            self._closed = False
            self._thread = threading.Thread(target=self._run, name="agentcore-store-keeper", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed or (not self._leases and not self._events):
                    # Decided under the lock: a `hold` after this sees no thread and starts one.
                    self._thread = None
                    return
                self._wake.wait(TICK_S)
                leases = list(self._leases)
            self.flush()
            self._tend(leases)
            try:
                self.store.maintain()
            except Exception:
                log.warning("session store upkeep failed; retrying", exc_info=True)

    def _tend(self, leases: list[Lease]) -> None:
        if not leases:
            return
        try:
            ended, queued = self.store.poll_leases([(h.session_id, h.owner, h.generation) for h in leases])
        except Exception:
            log.warning("the session leases could not be read; retrying", exc_info=True)
            ended, queued = {}, {h.session_id for h in leases}
        for lease in leases:
            key = (lease.session_id, lease.generation)
            if key in ended:
                lease.lost(ended[key])
            if lease.session_id in queued:
                lease.queued = True
        now = time.monotonic()
        due = [h for h in leases if not h._lost and now - h.renewed_at >= h.lease_s / 4]
        if not due:
            return
        try:
            self.store.renew_leases([(h.session_id, h.owner, h.generation, h.lease_s) for h in due])
        except Exception:
            log.warning("the session leases could not be renewed; retrying", exc_info=True)
            return
        for lease in due:
            lease.renewed_at = now
