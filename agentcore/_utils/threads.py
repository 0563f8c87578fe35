"""Threads that remember which run they belong to.

    thread = spawn(work, name="agentcore-tool")     # inherits the caller's owner
    owner()                                           # the run this thread works for, or None

    with reusing(Workers()):                          # the loop, for one run
        start(work, name="agentcore-tool-x")          # on an idle thread of the run, or a new one

An agent uses this to tell a call from inside its own run (a callback, a memory tool) from
a call by its user: `stop()` from inside must not wait for itself, `send()` from inside is
refused.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_local = threading.local()
_workers: contextvars.ContextVar[Workers | None] = contextvars.ContextVar("agentcore_workers", default=None)
_IDLE_NAME = "agentcore-tool-idle"
_JOIN_S = 10.0  # idle threads end at once; the bound only guards against the unforeseen


def owner() -> Any:
    return getattr(_local, "owner", None)


@contextmanager
def owned_by(value: Any) -> Iterator[None]:
    previous = owner()
    _local.owner = value
    try:
        yield
    finally:
        _local.owner = previous


def spawn(target: Callable[[], None], *, name: str, start: bool = True) -> threading.Thread:
    """A daemon thread running `target` with the caller's owner and context variables.

    The context variables carry the tool call a thread works for (events.ToolScope) and the
    caller's tracing context into tool threads.
    """
    inherited = owner()
    context = contextvars.copy_context()

    def run() -> None:
        _local.owner = inherited
        context.run(target)

    thread = threading.Thread(target=run, name=name, daemon=True)
    if start:
        thread.start()
    return thread


# ---------------------------------------------------------------- one run's reusable threads


def start(target: Callable[[], None], *, name: str, then: Callable[[], None] | None = None) -> None:
    """Run `target` on a thread of the current run's `Workers` (see `reusing`), else a new one.

    `then()` runs after `target` on the same thread, once that thread is free for the next job:
    a caller woken by it knows the thread is idle (so a run ending then leaves none behind).
    """
    workers = _workers.get()
    if workers is None or not workers.start(target, name=name, then=then):
        spawn(target if then is None else _chained(target, then), name=name)


def _chained(target: Callable[[], None], then: Callable[[], None]) -> Callable[[], None]:
    def both() -> None:
        target()
        then()

    return both


@contextmanager
def reusing(workers: Workers) -> Iterator[Workers]:
    """`start()` uses `workers` in this context (and the threads it spawns); closes them at the end."""
    token = _workers.set(workers)
    try:
        yield workers
    finally:
        _workers.reset(token)
        workers.close()


class Workers:
    """Daemon threads that run one short job after another (memory tool calls) for one run.

    Starting a thread per tool call costs more than many tools do, most of all when many agents
    run at once; a thread that finished its call takes the next. A job that never returns (an
    abandoned tool) keeps its thread, as a spawned one would. `close()` ends the idle threads
    (joined) and makes busy ones end after their job, so none outlives the run but those.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._closed = False

    def start(self, target: Callable[[], None], *, name: str, then: Callable[[], None] | None = None) -> bool:
        """Hand `target` (then `then`) to an idle thread or a new one; False once closed."""
        with self._lock:
            if self._closed:
                return False
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            worker = _Worker(self)
        worker.jobs.put((target, then, name, owner(), contextvars.copy_context()))
        return True

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.jobs.put(None)
        for worker in idle:
            if worker.thread is not threading.current_thread():
                worker.thread.join(_JOIN_S)

    def _back(self, worker: _Worker) -> bool:
        """`worker` finished its job: idle again, or told to end (False) when closed."""
        with self._lock:
            if self._closed:
                return False
            self._idle.append(worker)
            return True


class _Worker:
    def __init__(self, workers: Workers) -> None:
        self.workers = workers
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name=_IDLE_NAME, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        thread = threading.current_thread()
        while True:
            job = self.jobs.get()
            if job is None:
                return
            target, then, name, inherited, context = job
            thread.name, _local.owner = name, inherited
            context.run(target)  # an exception ends this thread, as it would a spawned one
            thread.name, _local.owner = _IDLE_NAME, None
            going_on = self.workers._back(self)
            if then is not None:
                context.run(then)
            if not going_on:
                return
