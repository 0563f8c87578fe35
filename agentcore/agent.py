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

import copy
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import config as _config
from . import runs as _runs
from ._utils.cancel import Signal
from ._utils.ids import random_hex
from .errors import AgentError
from .events import Emitter, Listener, Listeners, Run, start_stream
from .hooks import Hooks, check_hooks
from .inputs import (
    Overrides,
    check_callbacks,
    check_types,
    initial_tools,
    prepare_resume,
    prepare_send,
    write_back,
)
from .queues import Queues, queued_entry
from .result import SendResult
from .runs import Running, Runs
from .tools.handlers import FileTool, ToolSet

if TYPE_CHECKING:
    from . import loop as _loop
    from .store import Session

# The loop (and with it the HTTP layer, protocols, compaction) loads on the first send, so that
# `import agentcore` stays cheap for scripts that only build agents or tools.
Message = dict[str, Any]

__all__ = ["Agent", "SendResult"]


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

    This class is the public face (API.md §Agent), one method per documented call, hence their
    number; each is a few lines over runs.py (which task runs, on which thread), inputs.py (what
    callers pass) and loop.py (the run itself).
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
        self._journal: Any = None  # a MemoryJournal, made at the first run or decision (no session)
        self.session = session
        if session is not None:
            history = session.load()
        self.history: list[Message] = history if history is not None else []
        self.id: str = id if id is not None else random_hex()
        self._runs = Runs(self.id[:8])
        self._pool_box: list[Any] = []
        self._kept: Any = None  # loop.Kept: what one run keeps for the next (made at the first run)
        self._closed = False
        self._finalizer = weakref.finalize(self, _close_pools, self._pool_box)

    # ------------------------------------------------------------ public attributes

    @property
    def config(self) -> _config.Config:
        """A copy of the merged config (editing it changes nothing; pass overrides to send)."""
        return _config.Config(_config.copy_config(dict(self._config)))

    @property
    def callbacks(self) -> dict[str, Callable[..., Any]]:
        return dict(self._callbacks)

    @property
    def running(self) -> Running | None:
        """None when idle, else the running task: `.cancel` (an Event) stops it, `.thread` runs it."""
        return self._runs.running

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

    # With a session the queues are the store's: `store.steer()` from any process feeds them too.

    def steer(self, message: Any) -> None:
        """Queue a user message for the next point where the model can take it (from any thread)."""
        self._queue_box().add("steer", queued_entry(message, self._config))

    def follow_up(self, message: Any) -> None:
        """Queue a user message delivered only when the run would otherwise end."""
        self._queue_box().add("follow_up", queued_entry(message, self._config))

    def queued(self) -> dict[str, list[Message]]:
        """`{"steer": [...], "follow_up": [...]}`: copies of the entries delivery will append."""
        result: dict[str, list[Message]] = self._queue_box().queued()
        return result

    def clear_queues(self) -> dict[str, list[Message]]:
        """Empty both queues; returns what was removed, shaped like `queued()`."""
        result: dict[str, list[Message]] = self._queue_box().clear()
        return result

    # ------------------------------------------------------------ approvals (durable.py)

    def pending(self) -> list[dict[str, Any]]:
        """The calls waiting for a decision now: `{tool_call_id, tool_name, input, input_hash}`.

        With a session, from any process that opens it.
        """
        from . import durable

        return durable.pending(self._journal_box(), self.history)

    def decide(
        self, tool_call_id: str, allow: bool, *, reason: str | None = None, input_hash: str | None = None
    ) -> None:
        """Record a decision on a waiting call (durably, with a session); `resume()` then acts on it.

        Raises:
            AgentError: kind "conflict" when `input_hash` is not the call's (a stale view);
                kind "request" for an unknown or already decided call.
        """
        self._journal_box().decide(tool_call_id, allow, reason, input_hash)

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

        return subagent.as_tool(
            self._fresh_copy, self._config, name, description, input_schema=input_schema, output=output
        )

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
        self._refuse_closed("compact")
        from . import loop as _loop

        callbacks = dict(self._callbacks)
        if on_compact is not None:
            callbacks["on_compact"] = on_compact
        if on_retry is not None:
            callbacks["on_retry"] = on_retry
        overrides = Overrides(self._config, None, None, callbacks={}, hooks={})
        running, state = self._start(overrides, None, None, deliver=False, callbacks=callbacks)
        return str(self._runs.drive(running, lambda: _loop.compact_run(state)))

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
        if not self._runs.stop():
            return False
        pool = self._pool_box[0] if self._pool_box else None
        if pool is not None and not self._runs.inside():
            pool.kill_running()
        return True

    def close(self) -> None:
        """Stop what is running and kill the agent's idle tool processes; it takes no more runs."""
        self._closed = True
        self.stop()
        if not self._runs.inside():
            _close_pools(self._pool_box)

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ internals

    def _prepare_send(self, input: Any, **kwargs: Any) -> tuple[Overrides, Message]:
        """Check everything a send was given; nothing is written when something is wrong."""
        self._refuse_inside_run("send")
        self._refuse_closed("send")
        return prepare_send(self._config, input, **kwargs)

    def _prepare_resume(self, **kwargs: Any) -> Overrides:
        self._refuse_inside_run("resume")
        self._refuse_closed("resume")
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

        running, state = self._start(
            overrides, message, cancel, sinks=sinks, run_id=run_id, resume=message is None
        )
        result: SendResult = self._runs.drive(running, lambda: _loop.run(state), cancel)
        return result

    def _stream(self, overrides: Overrides, message: Message | None, cancel: threading.Event | None) -> Run:
        """The run of `_run`, driven from a thread of its own; its events go to the Run's feed."""
        if cancel is not None and cancel.is_set():
            raise AgentError("the send was cancelled before it started", kind="aborted")

        def run(own: Signal, sink: Listener, run_id: str) -> SendResult:
            return self._run(overrides, message, own, sinks=(sink,), run_id=run_id)

        name = f"agentcore-stream-{self._runs.name}"
        return start_stream(run, cancel, _runs.launch, name, agent_id=self.id, owner=self._runs)

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
        resume: bool = False,
    ) -> tuple[Running, _loop.RunState]:
        """Supersede the running task (here, and the session's run elsewhere), then write the input
        and apply overrides — unless superseded first."""

        def admit(running: Running, superseding: bool) -> _loop.RunState:
            hold = running.hold
            kept = self._kept_for_a_run()
            appended = self._write_first(
                overrides, message, hold, kept, deliver=deliver, superseding=superseding, resume=resume
            )
            self._apply(overrides)
            return self._run_state(running, appended, kept, callbacks, sinks, run_id, resume)

        def take_session(running: Running) -> Any:
            from . import durable

            return durable.hold(
                self.id,
                self.session,
                self._config,
                running.cancel,
                lambda handover: _stop_for(running, handover),
                self._journal_box(),
                self._queues,
                handover=resume,
            )

        return self._runs.begin(admit, cancel, hold=take_session, handover=resume)

    def _write_first(
        self,
        overrides: Overrides,
        message: Message | None,
        hold: Any,
        kept: Any,
        *,
        deliver: bool,
        superseding: bool,
        resume: bool,
    ) -> list[Message]:
        """Append the input and the queued steers (with a session: all of it or nothing); returns them.

        Steers follow the input, or precede it when superseding (they were meant for the old run);
        a resume that continues open calls delivers them after their results (loop.py).
        """
        from .history import write_input

        history = overrides.history if overrides.history is not None else self.history
        hold.sync(history)
        entries = [message] if message is not None else []
        deliver = deliver and not (resume and _has_open_calls(history))
        steers = hold.queues.take("steer", "all") if deliver else []
        try:
            return write_input(
                history,
                steers + entries if superseding else entries + steers,
                self.session,
                hold.journal,
                resume=resume,
                known=kept.reuse,
            )
        except BaseException:
            hold.queues.give_back("steer", steers)  # nothing was written: they wait for the next run
            raise

    def _run_state(
        self,
        running: Running,
        appended: list[Message],
        kept: Any,
        callbacks: Mapping[str, Callable[..., Any]] | None,
        sinks: Sequence[Listener],
        run_id: str | None,
        resume: bool,
    ) -> _loop.RunState:
        """What the loop needs for the run `running` (its named points: `events`)."""
        from . import loop as _loop
        from .connection import Connection

        hold = running.hold
        events = Emitter(
            self.id,
            run_id or random_hex(),
            dict(callbacks or self._callbacks),
            self._listeners,
            (*sinks, *hold.sinks),
            config=self._config,
        )
        session, history = self.session, self.history
        return _loop.RunState(
            agent_id=self.id,
            history=history,
            config=self._config,
            tools=self._effective_tools(),
            events=events,
            cancel=running.cancel,
            connection=Connection.of(self._config),
            pool=self._pool(),
            hooks=Hooks(self._hooks),
            queues=hold.queues,
            appended=appended,
            unannounced=list(appended),
            on_append=None if session is None else lambda _entry: session.commit(history),
            journal=hold.journal,
            resume=resume,
            handover=lambda: running.handover,
            reuse=kept.reuse,
            memo=kept.memo,
        )

    def _kept_for_a_run(self) -> Any:
        """What this agent's runs keep for the next (loop.Kept), to compare with history anew."""
        from . import loop as _loop

        if self._kept is None:
            self._kept = _loop.Kept()
        self._kept.new_run()  # history may have been edited since the last run
        return self._kept

    def _apply(self, overrides: Overrides) -> None:
        """What a send was given stays in force (API.md §Agent `send`): written once it is sure to run."""
        self._config = _config.Config(overrides.config)
        if overrides.history is not None:
            self.history = overrides.history
        if overrides.tools is not None:
            self.tools = overrides.tools
        write_back(self._callbacks, overrides.callbacks)
        write_back(self._hooks, overrides.hooks)

    def _fresh_copy(self) -> Agent:
        """A new agent with this one's config, tools, hooks, callbacks and a copy of its history (as_tool)."""
        return type(self)(
            config=self._config,
            tools=self.tools,
            callbacks=self._callbacks,
            history=copy.deepcopy(self.history),
            id=self.id,
            hooks=self._hooks,
        )

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

    def _journal_box(self) -> Any:
        """The session's journal, or this agent's own (made on first use)."""
        if self.session is not None:
            return self.session.journal()
        if self._journal is None:
            from .store.journal import MemoryJournal

            self._journal = MemoryJournal()
        return self._journal

    def _queue_box(self) -> Any:
        return self.session.queues() if self.session is not None else self._queues

    def _refuse_closed(self, what: str) -> None:
        if self._closed:
            raise AgentError(f"the agent is closed: {what}() needs a new Agent", kind="request")

    def _refuse_inside_run(self, what: str) -> None:
        if self._runs.inside():
            raise AgentError(f"{what}() cannot be called from inside this agent's own run", kind="request")


def _stop_for(running: Running, handover: bool) -> None:
    """Another process asked this run to stop (`handover`: a resume takes over from it)."""
    running.handover = handover
    running.cancel.set()


def _has_open_calls(history: list[Message]) -> bool:
    from .call_ids import open_calls

    return bool(open_calls(history))


def _close_pools(box: list[Any]) -> None:
    while box:
        pool = box.pop()
        try:
            pool.close()
        except Exception:
            pass
