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

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import AgentError
from .session import Session, encode

if TYPE_CHECKING:
    from .postgres import PostgresStore
    from .sqlite import SQLiteStore

Message = dict[str, Any]

__all__ = ["PostgresStore", "SQLiteStore", "Session", "Store"]


class Store(Protocol):
    """Where sessions live. Every method is safe to call from several threads."""

    def session(self, id: str) -> Session: ...

    def load(self, id: str) -> list[Message]: ...

    def append(self, id: str, entries: Sequence[Message], expected_length: int) -> int: ...

    def sessions(self) -> list[dict[str, Any]]: ...

    def delete(self, id: str) -> None: ...

    def close(self) -> None: ...

    # Durable sessions (API.md): the run of a session, from any process.

    def stop(self, session_id: str, timeout: float | None = None) -> bool: ...

    def steer(self, session_id: str, message: Any) -> None: ...

    def follow_up(self, session_id: str, message: Any) -> None: ...

    def watch(self, session_id: str, *, after: int | None = None, timeout: float | None = None) -> Any: ...


class TextStore:
    """The shared half of a store: JSON in and out, argument checks. Subclasses move text rows.

    A subclass implements `_load_texts(id)`, `_append_texts(id, texts, expected_length)` (atomic,
    raising `conflict_error` when the length differs), `sessions()`, `delete(id)` and `close()`.
    """

    def session(self, id: str) -> Session:
        """A handle on one conversation, for `Agent(session=...)`."""
        return Session(self, _check_id(id))

    def load(self, id: str) -> list[Message]:
        """Every stored entry of session `id`, in order; `[]` for an unknown id."""
        return [json.loads(text) for text in self._load_texts(_check_id(id))]

    def append(self, id: str, entries: Sequence[Message], expected_length: int) -> int:
        """Append `entries` if the session has exactly `expected_length` entries; return the new length.

        Raises:
            AgentError: kind "conflict" when the stored length differs (nothing written);
                kind "request" when an entry is not a JSON dict.
        """
        if isinstance(expected_length, bool) or not isinstance(expected_length, int) or expected_length < 0:
            raise AgentError(f"expected_length must be an int >= 0, got {expected_length!r}", kind="request")
        return self._append_texts(_check_id(id), encode(entries), expected_length)

    def _load_texts(self, id: str) -> list[str]:
        raise NotImplementedError

    def _append_texts(
        self,
        id: str,
        texts: list[str],
        expected_length: int,
        fence: tuple[str, int] | None = None,
        dequeue: tuple[int, ...] = (),
    ) -> int:
        raise NotImplementedError

    def __enter__(self) -> TextStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError


def conflict_error(id: str, expected_length: int, stored_length: int) -> AgentError:
    return AgentError(
        f"session {id!r} has {stored_length} stored entries, not the {expected_length} this append "
        "follows: another writer appended (agent.reload() fetches its entries)",
        kind="conflict",
    )


def _check_id(id: Any) -> str:
    if not isinstance(id, str) or not id:
        raise AgentError(f"a session id must be a non-empty str, got {id!r}", kind="request")
    return id


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
