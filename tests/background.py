"""Calls the tests run on a thread so that a regression fails instead of hanging the suite.

    call = Background(lambda: agent.send("hi"))   # starts at once
    ...                                           # stop it, check what the run is doing
    assert call.join().agent_error().kind == "aborted"
    value = returns_within(lambda: agent.stop())  # the call itself, joined

A passing run needs milliseconds; the tests make whatever the call must NOT wait for block far
longer than JOIN_S (a 60 s backoff, a stall that never ends), so returning at all proves it did
not wait, however slowly the machine schedules.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from agentcore import AgentError

T = TypeVar("T")
JOIN_S = 30.0


class Background:
    """Runs `fn` in a daemon thread; `join()` fails the test if it has not returned within JOIN_S."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self.result = fn()
        except BaseException as error:  # handed to the test thread
            self.error = error

    def join(self, timeout: float = JOIN_S) -> Background:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"still blocked after {timeout} s"
        return self

    def agent_error(self) -> AgentError:
        assert isinstance(self.error, AgentError), self.error or self.result
        return self.error


def returns_within(call: Callable[[], T], join_s: float = JOIN_S) -> T:
    """Run `call` in a thread and give back its result (or raise its error); fail, not hang,
    if it is still busy after `join_s`."""
    done = Background(call).join(join_s)
    if done.error is not None:
        raise done.error
    return done.result  # type: ignore[no-any-return]
