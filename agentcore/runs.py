"""Run supervision: an agent runs one task at a time, each on a worker thread of its own.

    runs = Runs("1a2b3c4d")
    running, state = runs.begin(admit, cancel)    # supersede what runs; admit(running, superseding)
    result = runs.drive(running, body, cancel)    # body() on a worker thread; Ctrl-C stops it
    runs.stop(); runs.inside(); runs.release(running)

A new `begin` supersedes the task that runs ("latest instruction wins"): it cancels that task and
waits for its end, then admits itself — unless a still newer one began meanwhile (the generation
tells) or it was cancelled first. `admit` writes what the task starts with (the input) under the
lock, so two tasks never write at once. What still holds after an exception, wherever raised:

- `begin` that raises (superseded, cancelled, `admit` failed, Ctrl-C while the previous task
  was ending) has released its task: it is not `runs.running`, its `done` is set, and `admit`
  either did not run or raised (and wrote nothing: it rolls back what it wrote).
- `drive` releases its task whatever `body` does. A KeyboardInterrupt in the caller cancels the
  task; a body that has begun is waited for (it closes its history first), one that has not is
  abandoned (its thread then does nothing); then the KeyboardInterrupt is re-raised.
- `running` is cleared only by the task that set it: releasing an older task leaves a newer one.

Supervision is per process. A hold on a session across processes (the store lease of durable
sessions, durable.py) is taken in `begin` by `hold(running)`, between the local supersede and
`admit` — outside the lock, since it may wait for a run elsewhere to end — and given back in
`release`; a stop arriving from another process sets the task's `cancel`, as `stop()` does here.
A task begun by a resume hands over: the task it supersedes leaves the calls it never started
for it (`running.handover`, read by the batch).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ._utils.cancel import Signal, follow
from ._utils.threads import owned_by, owner, spawn
from .errors import AgentError

T = TypeVar("T")
Launch = Callable[[Callable[[], None], str], Any]


@dataclass
class Running:
    """`agent.running` while a send / resume / compact runs: `.cancel` stops it, `.thread` runs it."""

    cancel: Signal = field(default_factory=Signal)
    thread: threading.Thread | None = None
    done: threading.Event = field(default_factory=threading.Event)
    # The task's hold on its session (durable.py), given back by `release`.
    hold: Any = None
    # Set with `cancel` when a resume takes over: the task leaves the calls it never started open.
    handover: bool = False


class Runs:
    """The tasks of one agent: which one runs, and the threads they run on (see the module docstring).

    Threads working for a task (the worker, tool threads, callbacks on them) are owned by this
    object (`_utils.threads.owner()`), which is how `inside()` tells a call from inside a run.
    """

    def __init__(self, name: str) -> None:
        self.running: Running | None = None
        self.name = name
        self._lock = threading.Lock()
        self._generation = 0

    def begin(
        self,
        admit: Callable[[Running, bool], T],
        cancel: threading.Event | None,
        *,
        hold: Callable[[Running], Any] | None = None,
        handover: bool = False,
    ) -> tuple[Running, T]:
        """Supersede the running task, then `admit(running, superseding)` — unless superseded meanwhile.

        `hold(running)`, when given, runs between the two and its value becomes `running.hold`
        (the session's lease). `handover`: the superseded task leaves its never-started calls.

        Raises:
            AgentError: kind "aborted" when a newer task began, or this one (or `cancel`) was
                cancelled, before it was admitted. Whatever `admit` raises.
        """
        running = Running()
        with self._lock:
            self._generation += 1
            generation = self._generation
            previous, self.running = self.running, running
        try:
            if previous is not None:
                previous.handover = handover
                previous.cancel.set()
                previous.done.wait()
            if hold is not None:
                running.hold = hold(running)
            with self._lock:
                stopped = running.cancel.is_set() or (cancel is not None and cancel.is_set())
                if self._generation != generation or stopped:
                    raise AgentError("the send was superseded or stopped before it started", kind="aborted")
                admitted = admit(running, previous is not None)
        except BaseException:
            self.release(running)
            raise
        return running, admitted

    def drive(self, running: Running, body: Callable[[], T], cancel: threading.Event | None = None) -> T:
        """Run `body` on a worker thread and wait for it; Ctrl-C stops the run, then re-raises.

        Raises:
            AgentError: what `body` raised (another exception is wrapped, kind "unknown").
        """
        outcome: dict[str, Any] = {}
        gate = _Gate()
        unfollow = follow(cancel, running.cancel) if cancel is not None else None

        def work() -> None:
            if not gate.enter():
                return
            with owned_by(self):
                try:
                    outcome["result"] = body()
                except BaseException as exc:
                    outcome["error"] = exc
                finally:
                    self.release(running)

        # Set before the thread starts: its own callbacks may read `agent.running.thread`.
        running.thread = spawn(work, name=f"agentcore-run-{self.name}", start=False)
        try:
            # Inside the `try`: on a busy machine the run can reach the model before `start()`
            # returns here, and a Ctrl-C in that moment must still stop it.
            running.thread.start()
            running.done.wait()
        except KeyboardInterrupt:
            running.cancel.set()
            if gate.abandon():
                self.release(running)
            else:
                running.done.wait()
            raise
        finally:
            if unfollow is not None:
                unfollow()
        if "error" in outcome:
            error = outcome["error"]
            if isinstance(error, AgentError):
                raise error
            raise AgentError(
                f"the run failed: {type(error).__name__}: {error}", kind="unknown", cause=error
            ) from error
        result: T = outcome["result"]
        return result

    def release(self, running: Running) -> None:
        """End `running`: give back its hold, clear `running` if it is still this one, wake its waiters."""
        hold, running.hold = running.hold, None
        try:
            if hold is not None:
                hold.release()
        finally:
            self._clear(running)

    def _clear(self, running: Running) -> None:
        with self._lock:
            if self.running is running:
                self.running = None
        running.done.set()

    def stop(self) -> bool:
        """Cancel the running task and wait for its end (from inside it: only cancel); True if one ran."""
        running = self.running
        if running is None:
            return False
        running.cancel.set()
        if not self.inside():
            running.done.wait()
        return True

    def inside(self) -> bool:
        """True on a thread working for one of these tasks (a callback, a memory tool)."""
        return owner() is self


class _Gate:
    """Ctrl-C in the caller against the worker thread's first step: exactly one of them goes first.

    Ctrl-C can land before the thread exists (inside `Thread.start`): the task is then abandoned,
    and a thread that starts afterwards must not run it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._begun = False
        self._abandoned = False

    def enter(self) -> bool:
        """The worker's first step: False when the caller abandoned the task first."""
        with self._lock:
            self._begun = not self._abandoned
            return self._begun

    def abandon(self) -> bool:
        """The caller's, after Ctrl-C: True when the worker had not begun (now it never will)."""
        with self._lock:
            self._abandoned = not self._begun
            return self._abandoned


# ---------------------------------------------------------------- where a stream's thread starts

_launcher: contextvars.ContextVar[Launch | None] = contextvars.ContextVar("agentcore_launcher", default=None)


@contextlib.contextmanager
def launched_by(launch_thread: Launch) -> Iterator[None]:
    """Streams started in this block start their thread through `launch_thread(target, name)`.

    aio.py hands the start to a starter thread of its own, so that an event loop never waits
    for a thread to start.
    """
    token = _launcher.set(launch_thread)
    try:
        yield
    finally:
        _launcher.reset(token)


def launch(target: Callable[[], None], name: str) -> None:
    """Start `target` on a new thread, through the launcher of `launched_by` when one is set."""
    chosen = _launcher.get()
    if chosen is None:
        spawn(target, name=name)
    else:
        chosen(target, name)
