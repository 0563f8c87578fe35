"""The Agent: config + history + tools, and the calls that run the loop.

    agent = Agent(config={"base_url": url, "model": "small"}, tools=[add])
    result = agent.send("What is 2 + 3?")
    agent.stop(); agent.resume(); agent.compact(); agent.close()
    with agent.stream("Fix the test") as run: ...       # the same run, as events (events.py)
    agent.steer("Only fix the bug."); agent.follow_up("Then summarise.")   # queues.py

One agent runs one task at a time: a new `send` (from any thread) stops the running one
first — "latest instruction wins" — because an agent has one history and two runs writing
to it would interleave.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import config as _config
from ._utils.cancel import Signal, follow
from ._utils.ids import random_hex
from ._utils.threads import owned_by, owner, spawn
from .errors import AgentError
from .events import Emitter, Listener, Listeners, Run, start_stream
from .hooks import Hooks, check_hooks
from .inputs import Overrides, check_callbacks, check_types, initial_tools, prepare_resume, prepare_send
from .queues import Queues, queued_entry
from .result import SendResult
from .tools.handlers import FileTool
from .tools.toolset import ToolSet

if TYPE_CHECKING:
    from . import loop as _loop
    from .store import Session

# The loop (and with it the HTTP layer, protocols, compaction) loads on the first send, so that
# `import agentcore` stays cheap for scripts that only build agents or tools.
Message = dict[str, Any]

__all__ = ["Agent", "SendResult"]


@dataclass
class Running:
    """`agent.running` while a send / resume / compact runs: `.cancel` stops it, `.thread` runs it."""

    cancel: Signal = field(default_factory=Signal)
    thread: threading.Thread | None = None
    done: threading.Event = field(default_factory=threading.Event)


class Agent:
    """An LLM agent: `send()` runs "ask the model → run its tools in parallel → ask again".

    Args:
        config: config dict (see API.md §Config); validated here and again at each send.
        tools: a ToolSet, or tools / lists / records `agentcore.tools.load()` accepts (no folders:
            `Agent()` does no I/O; scan them with `load()` or pass them to `send(tools=)`).
        callbacks: `on_*` callables.
        history: the initial history list, kept by reference.
        id: the agent id (a uuid4 hex when omitted).
        hooks: deciding hooks (API.md §Hooks).
        session: a store session (`store.session(id)`): history is loaded from it here, and every
            entry appended to it is committed to the store (API.md §Sessions).
    """

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        tools: Any = None,
        callbacks: Mapping[str, Callable[..., Any]] | None = None,
        history: list[Message] | None = None,
        id: str | None = None,
        hooks: Mapping[str, Callable[..., Any]] | None = None,
        session: Session | None = None,
    ) -> None:
        check_types(config=config, callbacks=callbacks, history=history, id=id, tools=tools)
        if session is not None:
            from .store import check_session  # loaded only with a session: import stays cheap

            check_session(session, history)
        self._config = _config.resolve(config)
        self.tools: ToolSet = initial_tools(tools)
        self._callbacks: dict[str, Callable[..., Any]] = check_callbacks(callbacks)
        self._hooks = {k: v for k, v in check_hooks(hooks).items() if v is not None}
        self._listeners = Listeners()
        self._queues = Queues()
        self.session = session
        if session is not None:
            history = session.load()
        self.history: list[Message] = history if history is not None else []
        self.id: str = id if id is not None else random_hex()
        self.running: Running | None = None
        self._lock = threading.Lock()
        self._generation = 0
        self._pool_box: list[Any] = []
        self._kept: Any = None  # loop.Kept: what one run keeps for the next (made at the first run)
        self._finalizer = weakref.finalize(self, _close_pools, self._pool_box)

    # ------------------------------------------------------------ public attributes

    @property
    def config(self) -> _config.Config:
        """A copy of the merged config (editing it changes nothing; pass overrides to send)."""
        return _config.Config(_config.copy_config(dict(self._config)))

    @property
    def callbacks(self) -> dict[str, Callable[..., Any]]:
        return dict(self._callbacks)

    def __repr__(self) -> str:
        state = "running" if self.running is not None else "idle"
        return (
            f"Agent(id={self.id!r}, model={self._config['model']!r}, {state}, {len(self.history)} messages)"
        )

    # ------------------------------------------------------------ running

    def send(
        self,
        input: Any,
        *,
        config: Mapping[str, Any] | None = None,
        history: list[Message] | None = None,
        tools: Any = None,
        callbacks: Mapping[str, Callable[..., Any]] | None = None,
        hooks: Mapping[str, Callable[..., Any]] | None = None,
        cancel: threading.Event | None = None,
    ) -> SendResult:
        """Append `input` as a user message and run the loop until it ends (blocking).

        Raises:
            AgentError: bad config or input (nothing written), cancellation (`aborted`),
                model errors that were not retried.
        """
        overrides, message = self._prepare_send(
            input, config=config, history=history, tools=tools, callbacks=callbacks, hooks=hooks
        )
        return self._run(overrides, message, cancel)

    def resume(
        self,
        *,
        config: Mapping[str, Any] | None = None,
        callbacks: Mapping[str, Callable[..., Any]] | None = None,
        cancel: threading.Event | None = None,
    ) -> SendResult:
        """Run on from the end of history without appending anything.

        A history ending with a user message (the input of a send that failed or was stopped
        before the model answered) is sent as it is: the input travels once, never twice.

        Raises:
            AgentError: kind "request" when history is empty or ends with a compact message.
        """
        return self._run(self._prepare_resume(config=config, callbacks=callbacks), None, cancel)

    def stream(self, input: Any, *, cancel: threading.Event | None = None, **kwargs: Any) -> Run:
        """Start the run `send(input, **kwargs)` would, and return at once with its `Run` of events.

        Bad input or config raise here, before anything starts (API.md §Run events).
        """
        overrides, message = self._prepare_send(input, **kwargs)
        return self._stream(overrides, message, cancel)

    def stream_resume(self, *, cancel: threading.Event | None = None, **kwargs: Any) -> Run:
        """Start the run `resume(**kwargs)` would, and return at once with its `Run` of events."""
        return self._stream(self._prepare_resume(**kwargs), None, cancel)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(event)` for every event of every run of this agent; returns unsubscribe."""
        return self._listeners.add(listener)

    # ------------------------------------------------------------ steering (queues.py)

    def steer(self, message: Any) -> None:
        """Queue a user message for the next point where the model can take it (from any thread)."""
        self._queues.add("steer", queued_entry(message, self._config))

    def follow_up(self, message: Any) -> None:
        """Queue a user message delivered only when the run would otherwise end."""
        self._queues.add("follow_up", queued_entry(message, self._config))

    def queued(self) -> dict[str, list[Message]]:
        """`{"steer": [...], "follow_up": [...]}`: copies of the entries delivery will append."""
        return self._queues.queued()

    def clear_queues(self) -> dict[str, list[Message]]:
        """Empty both queues; returns what was removed, shaped like `queued()`."""
        return self._queues.clear()

    def as_tool(
        self,
        name: str,
        description: str,
        *,
        input_schema: Mapping[str, Any] | None = None,
        output: Any = None,
    ) -> dict[str, Any]:
        """This agent as a memory tool: each call runs a fresh copy on the call's task (subagent.py)."""
        from . import subagent

        return subagent.as_tool(self, name, description, input_schema=input_schema, output=output)

    # ------------------------------------------------------------ async callers (aio.py)

    # Thin doors into aio.py, imported on first use: nothing else in the package imports asyncio.

    def asend(self, input: Any, **kwargs: Any) -> Coroutine[Any, Any, SendResult]:
        from . import aio

        return aio.asend(self, input, **kwargs)

    def aresume(self, **kwargs: Any) -> Coroutine[Any, Any, SendResult]:
        from . import aio

        return aio.aresume(self, **kwargs)

    def astream(self, input: Any, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        from . import aio

        return aio.astream(self, input, **kwargs)

    def compact(
        self,
        *,
        on_compact: Callable[[dict[str, Any]], None] | None = None,
        on_retry: Callable[[dict[str, Any]], None] | None = None,
    ) -> str:
        """Stop what is running, write a summary, append it as a compact message, return its text."""
        self._refuse_inside_run("compact")
        from . import loop as _loop

        callbacks = dict(self._callbacks)
        if on_compact is not None:
            callbacks["on_compact"] = on_compact
        if on_retry is not None:
            callbacks["on_retry"] = on_retry
        overrides = Overrides(self._config, None, None, callbacks={}, hooks={})
        running, state = self._start(overrides, None, None, deliver=False, callbacks=callbacks)
        return str(self._drive(running, lambda: _loop.compact_run(state)))

    def reload(self) -> None:
        """Refill `agent.history` (the same list) from the session's store; stops what is running first."""
        self._refuse_inside_run("reload")
        if self.session is None:
            raise AgentError("reload() needs an agent made with session=", kind="request")
        self.stop()
        self.history[:] = self.session.load()

    def stop(self) -> bool:
        """Stop the running send / resume / compact; returns once it has ended.

        Returns True if something was running. From inside the run (a callback or a memory
        tool) it only sets the cancel event.
        """
        running = self.running
        if running is None:
            return False
        running.cancel.set()
        if self._inside_run():
            return True
        running.done.wait()
        pool = self._pool_box[0] if self._pool_box else None
        if pool is not None:
            pool.kill_running()
        return True

    def close(self) -> None:
        """Stop what is running and kill the agent's idle tool processes."""
        if self._inside_run():
            if self.running is not None:
                self.running.cancel.set()
            return
        self.stop()
        _close_pools(self._pool_box)

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ internals

    def _prepare_send(self, input: Any, **kwargs: Any) -> tuple[Overrides, Message]:
        """Check everything a send was given; nothing is written when something is wrong."""
        self._refuse_inside_run("send")
        return prepare_send(self._config, input, **kwargs)

    def _prepare_resume(self, **kwargs: Any) -> Overrides:
        self._refuse_inside_run("resume")
        return prepare_resume(self._config, self.history, **kwargs)

    def _run(
        self,
        overrides: Overrides,
        message: Message | None,
        cancel: threading.Event | None,
        sinks: Sequence[Listener] = (),
        run_id: str | None = None,
    ) -> SendResult:
        if cancel is not None and cancel.is_set():
            raise AgentError("the send was cancelled before it started", kind="aborted")
        from . import loop as _loop

        running, state = self._start(overrides, message, cancel, sinks=sinks, run_id=run_id)
        result: SendResult = self._drive(running, lambda: _loop.run(state), cancel)
        return result

    def _stream(
        self,
        overrides: Overrides,
        message: Message | None,
        cancel: threading.Event | None,
        launch: Callable[[Callable[[], None], str], Any] | None = None,
    ) -> Run:
        """The run of `_run`, driven from a thread of its own; its events go to the Run's feed.

        `launch(drive, name)` starts that thread (aio.py hands it to a starter thread, so that an
        event loop never waits for a thread to start).
        """
        if cancel is not None and cancel.is_set():
            raise AgentError("the send was cancelled before it started", kind="aborted")

        def run(own: Signal, sink: Listener, run_id: str) -> SendResult:
            return self._run(overrides, message, own, sinks=(sink,), run_id=run_id)

        return start_stream(self, run, cancel, launch or _spawn, f"agentcore-stream-{self.id[:8]}")

    def _start(
        self,
        overrides: Overrides,
        message: Message | None,
        cancel: threading.Event | None,
        *,
        deliver: bool = True,
        callbacks: Mapping[str, Callable[..., Any]] | None = None,
        sinks: Sequence[Listener] = (),
        run_id: str | None = None,
    ) -> tuple[Running, _loop.Run]:
        """Supersede the running task, then apply overrides and the input — unless superseded meanwhile."""
        from . import loop as _loop

        running = Running()
        with self._lock:
            self._generation += 1
            generation = self._generation
            previous, self.running = self.running, running
        try:
            if previous is not None:
                previous.cancel.set()
                previous.done.wait()
            with self._lock:
                superseded = self._generation != generation or running.cancel.is_set()
                superseded = superseded or (cancel is not None and cancel.is_set())
                if superseded:
                    raise AgentError("the send was superseded or stopped before it started", kind="aborted")
                history = overrides.history if overrides.history is not None else self.history
                entries = self._first_entries(message, deliver, superseding=previous is not None)
                kept = self._kept = self._kept or _loop.Kept()
                kept.new_run()  # history may have been edited since the last run
                try:
                    appended = self._write_input(history, entries, kept.reuse)
                except BaseException:
                    # A session conflict writes nothing: the steers taken for delivery go back.
                    self._queues.give_back("steer", [e for e in entries if e is not message])
                    raise
                overrides.apply(self)
            events = Emitter(
                self.id,
                run_id or random_hex(),
                dict(callbacks or self._callbacks),
                self._listeners,
                sinks,
                config=self._config,
            )
            state = _loop.Run(
                agent_id=self.id,
                history=self.history,
                config=self._config,
                tools=self._effective_tools(),
                events=events,
                cancel=running.cancel,
                pool=self._pool(),
                hooks=Hooks(self._hooks),
                queues=self._queues,
                appended=appended,
                unannounced=list(appended),
                on_append=self._committer(self.history),
                reuse=kept.reuse,
                memo=kept.memo,
            )
        except BaseException:
            # Superseded, Ctrl-C while the previous run was ending, or a failure before the worker
            # exists: this task never runs, so it must not stay in `agent.running` (a later
            # send or stop() would wait for it forever).
            self._release(running)
            raise
        return running, state

    def _first_entries(self, message: Message | None, deliver: bool, *, superseding: bool) -> list[Message]:
        """The input and the queued steers: steers follow the input, or precede it when superseding."""
        entries = [message] if message is not None else []
        steers = self._queues.take("steer", "all") if deliver else []
        return steers + entries if superseding else entries + steers

    def _write_input(
        self, history: list[Message], entries: list[Message], known: Any = None
    ) -> list[Message]:
        """Answer open calls, append the input; with a session, commit all of it or write nothing."""
        from .entries import append_to, close_open_calls

        if self.session is not None:
            self.session.check(history)
        start = len(history)
        appended = close_open_calls(history, known)
        for entry in entries:
            append_to(history, entry)
            appended.append(entry)
        if self.session is not None:
            try:
                self.session.commit(history)
            except BaseException:
                del history[start:]
                raise
        return appended

    def _committer(self, history: list[Message]) -> Callable[[Message], None] | None:
        session = self.session
        if session is None:
            return None
        return lambda _message: session.commit(history)

    def _drive(self, running: Running, body: Callable[[], Any], cancel: threading.Event | None = None) -> Any:
        """Run `body` on a worker thread and wait for it; Ctrl-C stops the run, then re-raises."""
        box: dict[str, Any] = {}
        unfollow = follow(cancel, running.cancel) if cancel is not None else None
        # Ctrl-C can land before the thread exists (inside `Thread.start`): then the send is
        # abandoned and a thread that starts afterwards must not run it.
        gate = threading.Lock()

        def work() -> None:
            with gate:
                if box.get("abandoned"):
                    return
                box["begun"] = True
            with owned_by(self):
                try:
                    box["result"] = body()
                except BaseException as exc:
                    box["error"] = exc
                finally:
                    self._release(running)

        # Set before the thread starts: its own callbacks may read `agent.running.thread`.
        running.thread = spawn(work, name=f"agentcore-run-{self.id[:8]}", start=False)
        try:
            # Inside the `try`: on a busy machine the run can reach the model before `start()`
            # returns here, and a Ctrl-C in that moment must still stop it.
            running.thread.start()
            running.done.wait()
        except KeyboardInterrupt:
            running.cancel.set()
            self._await_interrupted(running, box, gate)
            raise
        finally:
            if unfollow is not None:
                unfollow()
        if "error" in box:
            error = box["error"]
            if isinstance(error, AgentError):
                raise error
            raise AgentError(
                f"the run failed: {type(error).__name__}: {error}", kind="unknown", cause=error
            ) from error
        return box["result"]

    def _await_interrupted(self, running: Running, box: dict[str, Any], gate: threading.Lock) -> None:
        """After Ctrl-C: wait for a run that has begun to close its history; abandon one that has not."""
        with gate:
            begun = bool(box.get("begun"))
            box["abandoned"] = not begun
        if begun:
            running.done.wait()
        else:
            self._release(running)

    def _release(self, running: Running) -> None:
        """End `running`: clear `agent.running` if it is still this one, and wake its waiters."""
        with self._lock:
            if self.running is running:
                self.running = None
        running.done.set()

    def _effective_tools(self) -> ToolSet:
        if not self._config["capabilities"].get("tools", True):
            return ToolSet()
        return self.tools

    def _pool(self) -> Any:
        if not any(isinstance(h, FileTool) for h in self.tools.handlers.values()):
            return self._pool_box[0] if self._pool_box else None
        from .tools.runner import ToolPool

        limit = self._config["max_tool_concurrency"]
        if not self._pool_box:
            self._pool_box.append(ToolPool(max_concurrency=limit))
        pool = self._pool_box[0]
        if getattr(pool, "max_concurrency", limit) != limit:
            pool.max_concurrency = limit
        return pool

    def _inside_run(self) -> bool:
        return owner() is self

    def _refuse_inside_run(self, what: str) -> None:
        if self._inside_run():
            raise AgentError(f"{what}() cannot be called from inside this agent's own run", kind="request")


def _spawn(target: Callable[[], None], name: str) -> None:
    spawn(target, name=name)


def _close_pools(box: list[Any]) -> None:
    while box:
        pool = box.pop()
        try:
            pool.close()
        except Exception:
            pass
