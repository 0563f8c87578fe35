"""A cancel event that can tell listeners the moment it is set.

    signal = Signal()
    remove = signal.on_set(lambda: sock.shutdown(socket.SHUT_RDWR))
    ...
    remove()

`Signal` is a `threading.Event`, so it can be handed to users as `ctx.cancel` or
`agent.running.cancel`. Plain events given by users are bridged with `follow()`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("agentcore")

_POLL_S = 0.005  # a plain Event cannot notify us; 5 ms keeps a cancel well inside 100 ms


class Signal(threading.Event):
    """An Event whose `set()` also runs the callbacks registered with `on_set`."""

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._next = 0
        self._lock = threading.Lock()

    def on_set(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run `callback` when set (at once if already set); returns a function that unregisters it."""
        with self._lock:
            key = self._next
            self._next += 1
            self._callbacks[key] = callback
        if self.is_set():
            self._run(key)
        return lambda: self._forget(key)

    def set(self) -> None:
        super().set()
        with self._lock:
            keys = list(self._callbacks)
        for key in keys:
            self._run(key)

    def _run(self, key: int) -> None:
        with self._lock:
            callback = self._callbacks.pop(key, None)
        if callback is None:
            return
        try:
            callback()
        except Exception:  # a listener failing must not stop the others from hearing the cancel
            log.warning("cancel listener failed", exc_info=True)

    def _forget(self, key: int) -> None:
        with self._lock:
            self._callbacks.pop(key, None)


def child(parent: threading.Event | None) -> tuple[Signal, Callable[[], None]]:
    """A new Signal that is set when `parent` is; returns it and a function to stop following."""
    signal = Signal()
    if parent is None:
        return signal, _noop
    return signal, follow(parent, signal)


def follow(source: threading.Event, target: Signal) -> Callable[[], None]:
    """Set `target` when `source` is set. Returns a function that stops following.

    A `Signal` source notifies at once; a plain Event is polled every 5 ms by a small
    thread that ends when following stops.
    """
    if isinstance(source, Signal):
        return source.on_set(target.set)
    if source.is_set():
        target.set()
        return _noop
    stop = threading.Event()

    # Wait on `stop`, not on `source`: unfollowing then ends the thread at once instead of
    # making every send that passed a plain Event wait up to one poll interval.
    def poll() -> None:
        while not stop.wait(_POLL_S):
            if source.is_set():
                target.set()
                return

    thread = threading.Thread(target=poll, name="agentcore-cancel-bridge", daemon=True)
    thread.start()

    def unfollow() -> None:
        stop.set()
        if thread is not threading.current_thread():
            thread.join()

    return unfollow


def _noop() -> None:
    return None
