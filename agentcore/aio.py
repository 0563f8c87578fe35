"""Async callers: the runs of `send` / `resume` / `stream`, awaited without blocking the event loop.

    result = await agent.asend("Fix the failing test")
    result = await agent.aresume()
    async for event in agent.astream("Fix the failing test"): ...

The run is `agent.stream(...)`'s, on the agent's worker thread, exactly as for `send`; the event
loop only awaits a future that the run's thread resolves through `call_soon_threadsafe`, reading
the run's buffer through `events.feed_of`, and the stream's thread is started off the loop
(`runs.launched_by`). Cancelling the awaiting task stops the run (like `agent.stop()`), waits for
its end, and re-raises `CancelledError`. This is the one module of agentcore that imports asyncio
(tests/test_aio.py checks it).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from ._utils.threads import spawn
from .events import Event, Feed, Run, feed_of
from .runs import launched_by

__all__ = ["aresume", "asend", "astream"]


async def asend(agent: Any, input: Any, *, cancel: threading.Event | None = None, **kwargs: Any) -> Any:
    """`agent.send(input, **kwargs)` as a coroutine."""
    return await _result(_start_send(agent, input, cancel, kwargs))


async def aresume(agent: Any, *, cancel: threading.Event | None = None, **kwargs: Any) -> Any:
    """`agent.resume(**kwargs)` as a coroutine."""
    with launched_by(_launch):
        run: Run = agent.stream_resume(cancel=cancel, **kwargs)
    return await _result(run)


def astream(
    agent: Any, input: Any, *, cancel: threading.Event | None = None, **kwargs: Any
) -> AsyncIterator[Event]:
    """The events of `agent.stream(input, **kwargs)`; the run starts (and input is checked) now."""
    return _events(_start_send(agent, input, cancel, kwargs))


def _start_send(agent: Any, input: Any, cancel: threading.Event | None, kwargs: dict[str, Any]) -> Run:
    """`agent.stream(...)`, its thread started off the event loop (see `_launch`)."""
    with launched_by(_launch):
        run: Run = agent.stream(input, cancel=cancel, **kwargs)
    return run


# ---------------------------------------------------------------- starting threads off the loop

# Starting a thread waits until the new thread runs, which takes a while when many threads
# compete for the interpreter: the event loop only queues the start, one starter thread does it.
_starts: queue.SimpleQueue[tuple[Callable[[], None], str]] = queue.SimpleQueue()
_starter_lock = threading.Lock()
_starter: list[threading.Thread] = []


def _launch(target: Callable[[], None], name: str) -> None:
    with _starter_lock:
        if not _starter or not _starter[0].is_alive():
            _starter[:] = [threading.Thread(target=_start_threads, name="aio-run-starter", daemon=True)]
            _starter[0].start()
    _starts.put((target, name))


def _start_threads() -> None:
    while True:
        target, name = _starts.get()
        spawn(target, name=name)


async def _result(run: Run) -> Any:
    feed = feed_of(run)
    try:
        await _ended(feed)
    except asyncio.CancelledError:
        feed.cancel.set()
        await _ended(feed)
        raise
    return run.wait()


async def _ended(feed: Feed) -> None:
    """Wait, without blocking the loop, until the run has ended."""
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = loop.create_future()

    def resolve() -> None:
        if not ended.done():
            ended.set_result(None)

    def waker() -> None:
        if feed.done.is_set():
            _call_soon(loop, resolve)

    feed.waker = waker
    if feed.done.is_set():
        resolve()
    try:
        await ended
    finally:
        feed.waker = None


async def _events(run: Run) -> AsyncIterator[Event]:
    feed = feed_of(run)
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()
    feed.waker = lambda: _call_soon(loop, woken.set)
    try:
        while True:
            woken.clear()
            # Read `done` before popping: once it is set, every event is already buffered.
            done = feed.done.is_set()
            event = feed.pop()
            if event is not None:
                yield event
                continue
            if done:
                break
            await woken.wait()
    except BaseException:
        # The reader stopped early (break, cancel, an error of its own): stop the run too.
        feed.cancel.set()
        raise
    finally:
        feed.waker = None
    if feed.error is not None:
        raise feed.error


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Any) -> None:
    try:
        loop.call_soon_threadsafe(callback)
    except RuntimeError:  # the loop was closed while the run was still ending
        pass
