"""`store.watch()`: the events of a session's runs, from any process, in order.

    with store.watch("user-42", after=last_seen, timeout=30) as events:
        for event in events:            # run events plus "seq", increasing per session
            last_seen = event["seq"]

The runs write their events to the store (keeper.py batches them); a watch reads the rows past
the last `seq` it gave, every `POLL_S` while there is nothing new. It ends after `timeout`
seconds without an event, or when closed — from any thread, also while it waits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

POLL_S = 0.05


class Watch:
    """An iterator over a session's events past `seq`; a context manager that closes it."""

    def __init__(self, store: Any, session_id: str, seq: int, timeout: float | None) -> None:
        self.session_id = session_id
        self.seq = seq
        self.timeout = timeout
        self._store = store
        self._closed = threading.Event()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        quiet_since = time.monotonic()
        while not self._closed.is_set():
            events = self._store.events_after(self.session_id, self.seq)
            for event in events:
                if self._closed.is_set():
                    return
                self.seq = int(event["seq"])
                yield event
            if events:
                quiet_since = time.monotonic()
                continue
            wait = POLL_S
            if self.timeout is not None:
                left = quiet_since + self.timeout - time.monotonic()
                if left <= 0:
                    return
                wait = min(wait, left)
            self._closed.wait(wait)

    def close(self) -> None:
        self._closed.set()

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Watch({self.session_id!r}, after={self.seq})"
