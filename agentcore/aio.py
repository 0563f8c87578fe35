"""Async callers: the runs of `send` / `resume` / `stream`, awaited without blocking the event loop.

    result = await agent.asend("Fix the failing test")
    result = await agent.aresume()
    async for event in agent.astream("Fix the failing test"): ...

The run works on the agent's worker thread, exactly as for `send`; the event loop only awaits a
future that the run's thread resolves through `call_soon_threadsafe`. Cancelling the awaiting
task stops the run (like `agent.stop()`), waits for its end, and re-raises `CancelledError`.
This is the one module of agentcore that imports asyncio (tests/test_aio.py checks it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from .events import Event, Feed, Run

__all__ = ["aresume", "asend", "astream"]


async def asend(agent: Any, input: Any, **kwargs: Any) -> Any:
    """`agent.send(input, **kwargs)` as a coroutine; bad input or config raise at once."""
    return await _result(agent.stream(input, **kwargs))


async def aresume(agent: Any, **kwargs: Any) -> Any:
    """`agent.resume(**kwargs)` as a coroutine."""
    return await _result(agent.stream_resume(**kwargs))


def astream(agent: Any, input: Any, **kwargs: Any) -> AsyncIterator[Event]:
    """The events of `agent.stream(input, **kwargs)`; the run starts (and input is checked) now."""
    return _events(agent.stream(input, **kwargs))


async def _result(run: Run) -> Any:
    feed = run._feed
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
    feed = run._feed
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
