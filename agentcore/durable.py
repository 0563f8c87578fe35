"""A run's hold on its session across processes, and where the run keeps its calls and queues.

    hold = durable.hold(agent_id, session, config, cancel, on_lost, journal, queues, handover=resume)
    hold.sync(history)               # before the input is written: up to date with the store
    hold.journal, hold.queues, hold.sinks
    hold.release()                   # after the run's last event

With a session, a run holds the session's lease (store/session.py) from before it writes its
input until its events are written: a run of the session elsewhere — another agent, process or
machine — is stopped first ("latest instruction wins"), and a stop or supersede arriving from
elsewhere sets this run's cancel. The journal, the steer / follow-up queues and the event log
are the session's. Without a session they are the agent's own (a `MemoryJournal`, its
`Queues`), and the agent's own supersede is the only lease there is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .store import Session
    from .store.journal import Journal

Message = dict[str, Any]


@dataclass
class Hold:
    """What one run holds: its journal and queues, the event sinks for `store.watch`."""

    journal: Journal
    queues: Any
    session: Session | None = None
    sinks: tuple[Callable[[dict[str, Any]], Any], ...] = ()

    def sync(self, history: list[Message]) -> None:
        """Bring `history` up to the store's (another process appended), or raise conflict."""
        if self.session is not None:
            self.session.sync(history)

    def release(self) -> None:
        """The run has ended: its last events are written and the next run may take the session."""
        session, self.session = self.session, None
        if session is not None:
            session.release()


def hold(
    agent_id: str,
    session: Session | None,
    config: Mapping[str, Any],
    cancel: threading.Event,
    on_lost: Callable[[bool], None],
    journal: Journal,
    queues: Any,
    *,
    handover: bool = False,
) -> Hold:
    """Take the session for a run (stopping whatever run holds it, wherever it runs).

    `on_lost(handover)` stops this run when another process asks (`handover`: a resume takes
    over, and this run leaves the calls it never started open for it). `handover` here: this run
    is a resume, and asks the same of the run it stops.

    Raises:
        AgentError: kind "aborted" when `cancel` is set while the other run is ending.
    """
    if session is None:
        return Hold(journal, queues)
    session.acquire(
        agent_id, lease_s=config["session_lease"], cancel=cancel, on_lost=on_lost, handover=handover
    )
    return Hold(session.journal(), session.queues(), session, (session.recorder(),))


def pending(journal: Journal, history: list[Message]) -> list[dict[str, Any]]:
    """The calls waiting for a decision, in history order (calls this history lacks come last)."""
    from .history import tool_calls_of

    order = {
        str(p.get("tool_call_id")): i for i, p in enumerate(p for m in history for p in tool_calls_of(m))
    }
    records = sorted(journal.pending(), key=lambda r: order.get(r.tool_call_id, len(order)))
    return [r.pending_view() for r in records]
