"""Sessions: histories kept in a database, so a conversation survives its process.

    from agentcore.store import SQLiteStore
    store = SQLiteStore("chats.db")
    agent = Agent(config=..., session=store.session("user-42"))

A stored session only grows: `append(id, entries, expected_length)` writes only when the stored
length is exactly `expected_length` (checked and written in one transaction), else it raises
`AgentError(kind="conflict")` and writes nothing. That one rule is what keeps two writers of a
session from interleaving or overwriting each other. Entries are stored as `json.dumps(entry)`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import AgentError

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

    def _append_texts(self, id: str, texts: list[str], expected_length: int) -> int:
        raise NotImplementedError

    def __enter__(self) -> TextStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError


class Session:
    """One conversation of a store, kept in step with an agent's history.

    The session remembers the text of every entry it has seen stored, so that at each send it can
    tell entries appended by hand (committed then) from stored entries edited or removed (a
    conflict). One session object serves one agent.
    """

    def __init__(self, store: TextStore, id: str) -> None:
        self.store = store
        self.id = id
        self._stored: list[str] = []

    def __repr__(self) -> str:
        return f"Session({self.id!r}, {len(self._stored)} stored entries)"

    def load(self) -> list[Message]:
        """The stored history (a fresh list), remembered as the agent's starting point."""
        self._stored = self.store._load_texts(self.id)
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

    def commit(self, history: Sequence[Message]) -> None:
        """Store the entries of `history` past the stored ones, stating the length they follow.

        Raises:
            AgentError: kind "conflict" when another writer appended meanwhile (nothing written).
        """
        new = history[len(self._stored) :]
        if not new:
            return
        texts = encode(new, start=len(self._stored))
        self.store._append_texts(self.id, texts, len(self._stored))
        self._stored.extend(texts)


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
