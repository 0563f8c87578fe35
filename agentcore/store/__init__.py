"""Sessions: histories kept in a database, so a conversation survives its process.

    from agentcore.store import SQLiteStore
    store = SQLiteStore("chats.db")
    agent = Agent(config=..., session=store.session("user-42"))

A stored session only grows: `append(id, entries, expected_length)` writes only when the stored
length is exactly `expected_length` (checked and written in one transaction), else it raises
`AgentError(kind="conflict")` and writes nothing. That one rule is what keeps two writers of a
session from interleaving or overwriting each other. Entries are stored as `json.dumps(entry)`.

Beside the history, a store keeps each session's run state — the call journal, the lease, the
steer / follow-up queues and the event log (store/sql.py) — so any process can stop, steer,
approve, watch and continue a run (API.md §Durable sessions).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import AgentError
from .base import Store, TextStore
from .session import Session

if TYPE_CHECKING:
    from .postgres import PostgresStore
    from .sqlite import SQLiteStore

__all__ = ["PostgresStore", "SQLiteStore", "Session", "Store", "TextStore"]


def __getattr__(name: str) -> object:
    # Both stores load on first use; PostgresStore's module imports psycopg only when constructed.
    if name == "SQLiteStore":
        from .sqlite import SQLiteStore

        return SQLiteStore
    if name == "PostgresStore":
        from .postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_session(session: Any, history: Any) -> None:
    """What `Agent(session=, history=)` accepts: a session from `store.session(id)`, and no history."""
    if not isinstance(session, Session):
        raise TypeError(f"session must come from store.session(id), got {type(session).__name__}")
    if history is not None:
        raise AgentError("pass history= or session=, not both: a session loads its history", kind="config")
