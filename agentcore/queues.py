"""Steer and follow-up queues, and the rule of what a delivery point takes from them.

    queues.steer(entry)                     # from any thread, while a run works or not
    taken = queues.take("steer", "all")     # at a delivery point: the entries to append
    queues.queued(); queues.clear()

Steer messages are delivered where the model can next take them (after a round's tool results,
before the next request; at the start of a run); follow-ups only when the run would otherwise
end with "finished" or "no-tool" (API.md §Steering and follow-up). Nothing queued is ever lost:
an entry leaves its queue only in `take`, and the caller appends what `take` returned at once.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from typing import Any, Literal

from .errors import AgentError
from .inputs import check_encodable, user_message

Queue = Literal["steer", "follow_up"]
MODES = ("one-at-a-time", "all")


def queued_entry(message: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    """The user history entry a queued message will become (str, content parts or a user entry)."""
    if isinstance(message, Mapping) and "role" in message:
        if message.get("role") != "user":
            raise AgentError(
                f"only user messages can be queued, got role {message.get('role')!r}", kind="request"
            )
        entry = copy.deepcopy(dict(message))
        entry["content"] = user_message(entry.get("content"), config)["content"]
        check_encodable(entry, "the queued message")
        return entry
    return user_message(message, config)


class Queues:
    """The two queues of one agent, safe to use from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, list[dict[str, Any]]] = {"steer": [], "follow_up": []}

    def add(self, queue: Queue, entry: dict[str, Any]) -> None:
        with self._lock:
            self._queues[queue].append(entry)

    def take(self, queue: Queue, mode: str) -> list[dict[str, Any]]:
        """Remove and return what one delivery point delivers: one entry, or all with mode "all"."""
        with self._lock:
            items = self._queues[queue]
            count = len(items) if mode == "all" else min(1, len(items))
            taken, items[:] = items[:count], items[count:]
        return taken

    def give_back(self, queue: Queue, entries: list[dict[str, Any]]) -> None:
        """Put entries taken for a delivery that did not happen back at the front, in order."""
        if entries:
            with self._lock:
                self._queues[queue][:0] = entries

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._queues["steer"] or self._queues["follow_up"])

    def has(self, queue: Queue) -> bool:
        with self._lock:
            return bool(self._queues[queue])

    def queued(self) -> dict[str, list[dict[str, Any]]]:
        with self._lock:
            return {name: copy.deepcopy(items) for name, items in self._queues.items()}

    def clear(self) -> dict[str, list[dict[str, Any]]]:
        with self._lock:
            removed = {name: list(items) for name, items in self._queues.items()}
            for items in self._queues.values():
                items.clear()
        return removed
