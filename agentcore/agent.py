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
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import config as _config
from ._utils.cancel import Signal, follow
from ._utils.threads import owned_by, owner, spawn
from .errors import AgentError
from .events import Emitter, Listener, Listeners, Run, start_run
from .hooks import Hooks, check_hooks
from .inputs import check_callbacks, check_history, check_types, initial_tools, send_tools, user_message
from .queues import Queues, queued_entry
from .result import SendResult
from .tools.handlers import FileTool
from .tools.toolset import ToolSet

if TYPE_CHECKING:
    from . import loop as _loop

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
    """

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        tools: Any = None,
        callbacks: Mapping[str, Callable[..., Any]] | None = None,
        history: list[Message] | None = None,
        id: str | None = None,
        hooks: Mapping[str, Callable[..., Any]] | None = None,
    ) -> None:
        check_types(config=config, callbacks=callbacks, history=history, id=id, tools=tools)
        self._config = _config.resolve(config)
        self.tools: ToolSet = initial_tools(tools)
        self._callbacks: dict[str, Callable[..., Any]] = check_callbacks(callbacks)
        self._hooks = {k: v for k, v in check_hooks(hooks).items() if v is not None}
        self._listeners = Listeners()
        self._queues = Queues()
        self.history: list[Message] = history if history is not None else []
        self.id: str = id if id is not None else uuid.uuid4().hex
        self.running: Running | None = None
        self._lock = threading.Lock()
        self._generation = 0
        self._pool_box: list[Any] = []
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
        overrides, message = self._prepare_send(input, config, history, tools, callbacks, hooks)
        return self._run(overrides, message, cancel)

    def resume(
        self,
        *,
        config: Mapping[str, Any] | None = None,
        callbacks: Mapping[str, Callable[..., Any]] | None = None,
        cancel: threading.Event | None = None,
    ) -> SendResult:
        """Run on from the end of history without appending anything.

        Raises:
            AgentError: kind "request" when history does not end with an assistant or tool message.
        """
        return self._run(self._prepare_resume(config, callbacks), None, cancel)

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
        overrides = _Overrides(self._config, None, None, callbacks={}, hooks={})
        running, state = self._start(overrides, None, None, deliver=False, callbacks=callbacks)
        return str(self._drive(running, lambda: _loop.compact_run(state)))

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

    def _prepare_send(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        history: list[Message] | None = None,
        tools: Any = None,
        callbacks: Mapping[str, Callable[..., Any]] | None = None,
        hooks: Mapping[str, Callable[..., Any]] | None = None,
    ) -> tuple[_Overrides, Message]:
        """Check everything a send was given; nothing is written when something is wrong."""
        self._refuse_inside_run("send")
        merged = _config.merge(self._config, config)
        message = user_message(input, merged)
        overrides = _Overrides(
            merged,
            check_history(history),
            send_tools(tools),
            check_callbacks(callbacks, config=True),
            check_hooks(hooks, at_send=True),
        )
        return overrides, message

    def _prepare_resume(
        self,
        config: Mapping[str, Any] | None = None,
        callbacks: Mapping[str, Callable[..., Any]] | None = None,
    ) -> _Overrides:
        self._refuse_inside_run("resume")
        merged = _config.merge(self._config, config)
        overrides = _Overrides(merged, None, None, check_callbacks(callbacks, config=True), {})
        last = self.history[-1].get("role") if self.history else None
        if last not in ("assistant", "tool"):
            raise AgentError(
                "resume() needs a history that ends with an assistant or tool message; "
                "use send() for new input",
                kind="request",
            )
        return overrides

    def _run(
        self,
        overrides: _Overrides,
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
        overrides: _Overrides,
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

        def run(sinks: Sequence[Listener], run_id: str, own: Signal) -> SendResult:
            return self._run(overrides, message, own, sinks=sinks, run_id=run_id)

        return start_run(run, self, self.id, cancel, launch or _spawn)

    def _start(
        self,
        overrides: _Overrides,
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
                overrides.apply(self)
                appended = _loop.close_open_calls(self.history)
                for entry in self._first_entries(message, deliver, superseding=previous is not None):
                    _loop._append_to(self.history, entry)
                    appended.append(entry)
            events = Emitter(
                self.id,
                run_id or uuid.uuid4().hex,
                dict(callbacks or self._callbacks),
                self._listeners,
                sinks,
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

    def _drive(self, running: Running, body: Callable[[], Any], cancel: threading.Event | None = None) -> Any:
        """Run `body` on a worker thread and wait for it; Ctrl-C stops the run, then re-raises."""
        box: dict[str, Any] = {}
        unfollow = follow(cancel, running.cancel) if cancel is not None else None

        def work() -> None:
            with owned_by(self):
                try:
                    box["result"] = body()
                except BaseException as exc:
                    box["error"] = exc
                finally:
                    self._release(running)

        # Set before the thread starts: its own callbacks may read `agent.running.thread`.
        running.thread = spawn(work, name=f"agentcore-run-{self.id[:8]}", start=False)
        running.thread.start()
        try:
            running.done.wait()
        except KeyboardInterrupt:
            running.cancel.set()
            running.done.wait()
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


@dataclass
class _Overrides:
    """What a send writes back to the agent once it is sure to run."""

    config: Mapping[str, Any]
    history: list[Message] | None
    tools: ToolSet | None
    callbacks: dict[str, Callable[..., Any]]
    hooks: Mapping[str, Callable[..., Any] | None]

    def apply(self, agent: Agent) -> None:
        agent._config = _config.Config(self.config)
        if self.history is not None:
            agent.history = self.history
        if self.tools is not None:
            agent.tools = self.tools
        for name, callback in self.callbacks.items():
            if callback is None:
                agent._callbacks.pop(name, None)
            else:
                agent._callbacks[name] = callback
        for name, hook in self.hooks.items():
            if hook is None:
                agent._hooks.pop(name, None)
            else:
                agent._hooks[name] = hook


def _spawn(target: Callable[[], None], name: str) -> None:
    spawn(target, name=name)


def _close_pools(box: list[Any]) -> None:
    while box:
        pool = box.pop()
        try:
            pool.close()
        except Exception:
            pass
