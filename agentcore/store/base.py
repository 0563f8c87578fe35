"""The shared half of every store: the Store protocol, JSON in and out, argument checks.

    class MyStore(TextStore):           # implements load_texts, append_texts, sessions, delete, close
        ...

`TextStore` turns entries into the text rows a subclass stores (`json.dumps(entry)`) and back;
the subclass makes each append atomic (the length check and the insert in one transaction).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from ..errors import AgentError
from .session import Along, Session, encode

Message = dict[str, Any]


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

    A subclass implements `load_texts(id)`, `append_texts(id, texts, expected_length)` (atomic,
    raising `conflict_error` when the length differs), `sessions()`, `delete(id)` and `close()`.
    """

    def session(self, id: str) -> Session:
        """A handle on one conversation, for `Agent(session=...)`."""
        return Session(self, check_id(id))

    def load(self, id: str) -> list[Message]:
        """Every stored entry of session `id`, in order; `[]` for an unknown id."""
        return [json.loads(text) for text in self.load_texts(check_id(id))]

    def append(self, id: str, entries: Sequence[Message], expected_length: int) -> int:
        """Append `entries` if the session has exactly `expected_length` entries; return the new length.

        Raises:
            AgentError: kind "conflict" when the stored length differs (nothing written);
                kind "request" when an entry is not a JSON dict.
        """
        if isinstance(expected_length, bool) or not isinstance(expected_length, int) or expected_length < 0:
            raise AgentError(f"expected_length must be an int >= 0, got {expected_length!r}", kind="request")
        return self.append_texts(check_id(id), encode(entries), expected_length)

    def load_texts(self, id: str) -> list[str]:
        raise NotImplementedError

    def append_texts(
        self, id: str, texts: list[str], expected_length: int, along: Along | None = None
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


def check_id(id: Any) -> str:
    if not isinstance(id, str) or not id:
        raise AgentError(f"a session id must be a non-empty str, got {id!r}", kind="request")
    return id
