"""Run events: the facts a run announces, who hears them, and the `Run` a stream returns.

    events = Emitter(agent_id, run_id, callbacks, listeners, sinks=(feed.push,))
    events.turn_start(1); events.message(entry); events.tool_end(call, result)
    with agent.stream("Fix the test") as run:
        for event in run: ...

One source of events (STYLE.md §11): the loop calls the named points of `Emitter`, and each
point feeds both the `on_*` callbacks and the event listeners, so the two can never drift.
This module is the only list of event shapes (API.md §Run events). Every event is a plain-JSON
dict; when nobody listens, a point costs one tuple check and builds nothing.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import logging
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._utils import surrogates
from ._utils.cancel import Signal, follow
from ._utils.ids import random_hex
from ._utils.memo import copied
from ._utils.notify import notify
from .errors import AgentError

log = logging.getLogger("agentcore")

Event = dict[str, Any]
Listener = Callable[[Event], Any]

# The stream events of a reply that reach `message_update` (a `finish` event carries objects).
DELTA_TYPES = frozenset({"text-delta", "reasoning-delta", "tool-call-delta", "tool-call"})

# An observer hears every event of every run in the process, plus the internal points
# `chat_start` / `chat_end` / `chat_error` (one HTTP attempt each, compaction's too) and
# `tool_enter` / `tool_leave` (on the thread running the call): telemetry.py is one.
Observer = Callable[["Emitter", Event], Any]
_observers: tuple[Observer, ...] = ()
_observers_lock = threading.Lock()


def observe(observer: Observer) -> Callable[[], None]:
    """Register a process-wide observer (runs started from now on); returns the remover."""
    global _observers
    with _observers_lock:
        _observers = (*_observers, observer)

    def remove() -> None:
        global _observers
        with _observers_lock:
            _observers = tuple(o for o in _observers if o is not observer)

    return remove


@dataclass
class ToolScope:
    """The tool call a thread works for: set by the batch around a call, inherited by its threads.

    A delegating tool (a sub-agent) reads it to forward its run's events to `events`, and adds
    what its runs used to `usage` (the tool message's `sub_agent_usage`).
    """

    events: Emitter
    call: Any
    cancel: threading.Event
    usage: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add_usage(self, usage: Any) -> None:
        with self._lock:
            self.usage = usage if self.usage is None else self.usage + usage


_scope: contextvars.ContextVar[ToolScope | None] = contextvars.ContextVar(
    "agentcore_tool_scope", default=None
)


def current_scope() -> ToolScope | None:
    """The tool call this thread works for, or None outside any call."""
    return _scope.get()


@contextlib.contextmanager
def tool_scope(scope: ToolScope) -> Iterator[None]:
    """The block runs `scope.call` on this thread: observers hear it enter and leave here."""
    token = _scope.set(scope)
    scope.events.tool_entered(scope.call)
    try:
        yield
    finally:
        scope.events.tool_left(scope.call)
        _scope.reset(token)


class Listeners:
    """An agent's subscribers; `items` is a tuple replaced on change, so emitters read it lock-free."""

    def __init__(self) -> None:
        self.items: tuple[Listener, ...] = ()
        self._lock = threading.Lock()

    def add(self, listener: Listener) -> Callable[[], None]:
        if not callable(listener):
            raise TypeError(f"listener must be callable, got {type(listener).__name__}")
        with self._lock:
            self.items = (*self.items, listener)
        # A token per subscription, so the same function subscribed twice unsubscribes once.
        token = self.items[-1]
        done = threading.Event()

        def unsubscribe() -> None:
            if done.is_set():
                return
            done.set()
            with self._lock:
                items = list(self.items)
                items.reverse()
                if token in items:
                    items.remove(token)
                items.reverse()
                self.items = tuple(items)

        return unsubscribe


def error_info(error: BaseException) -> dict[str, Any]:
    """`{kind, status, message}` of a failure, as events carry it."""
    if isinstance(error, AgentError):
        return {"kind": error.kind, "status": error.status, "message": error.message}
    return {"kind": "unknown", "status": None, "message": f"{type(error).__name__}: {error}"}


class Emitter:
    """The named points of one run. Each feeds its callback (if any) and its event (if anyone listens).

    Points may be called from the run's thread and from tool threads; events are delivered under
    one lock, so every listener sees them in one order. After `agent_end` nothing more is emitted
    (a memory tool abandoned on cancel cannot speak after the run ended). One method per fact a
    run announces — this class is the list of them (STYLE.md §11) — hence their number.
    """

    def __init__(
        self,
        agent_id: str,
        run_id: str,
        callbacks: Mapping[str, Callable[..., Any]],
        listeners: Listeners | None = None,
        sinks: Sequence[Listener] = (),
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.run_id = run_id
        self.callbacks = callbacks
        # Read by observers (model, protocol); `parent` is the tool call this run works for.
        self.config: Mapping[str, Any] = config or {}
        self.parent = current_scope()
        self._listeners = listeners or Listeners()
        self._sinks = tuple(sinks)
        self._observers = _observers
        self._lock = threading.RLock()
        self._ended = False
        self._reply_open = False
        # Calls whose streamed output held text UTF-8 cannot encode (warned about once each).
        self._unencodable: set[str] = set()

    # ------------------------------------------------------------ delivery

    def listening(self) -> bool:
        return bool(self._sinks or self._listeners.items or self._observers) and not self._ended

    def emit(self, type: str, keys: dict[str, Any] | None = None) -> None:
        """Deliver one event to the run's sinks, then to the agent's subscribers."""
        if not self.listening():
            return
        event = {"type": type, "run_id": self.run_id, "agent_id": self.agent_id}
        if keys:
            event.update(keys)
        with self._lock:
            if self._ended:
                return
            if type == "agent_end":
                self._ended = True
            for sink in self._sinks:
                sink(event)
            for listener in self._listeners.items:
                try:
                    listener(event)
                except Exception:
                    name = getattr(listener, "__name__", repr(listener))
                    log.warning("event listener %s raised; the run goes on", name, exc_info=True)
            self._observe(event)

    def note(self, type: str, keys: dict[str, Any]) -> None:
        """An internal point only observers hear (not part of the public event stream)."""
        if self._observers and not self._ended:
            with self._lock:
                self._observe({"type": type, "run_id": self.run_id, "agent_id": self.agent_id, **keys})

    def observer(self) -> Callable[[str, dict[str, Any]], None] | None:
        """`note`, for a lower layer to call (compact.run's attempts); None when nobody observes."""
        return self.note if self._observers else None

    def _observe(self, event: Event) -> None:
        for observer in self._observers:
            try:
                observer(self, event)
            except Exception:
                log.warning("event observer raised; the run goes on", exc_info=True)

    def _callback(self, name: str, *args: Any) -> None:
        notify(self.callbacks.get(name), *args)

    # ------------------------------------------------------------ the run

    def agent_start(self, *, on_start: bool = True) -> None:
        """The run starts (`on_start` is not called for `agent.compact()`, which it never was)."""
        if on_start:
            self._callback("on_start")
        self.emit("agent_start")

    def agent_end(
        self, result: Any = None, *, error: BaseException | None = None, steps: int = 0, usage: Any = None
    ) -> None:
        """Always the last event. `result` is the SendResult (None on failure or for a compaction)."""
        if not self.listening():
            self._ended = True
            return
        used = result.usage if result is not None else usage
        keys: dict[str, Any] = {
            "reason": getattr(result, "reason", None),
            "steps": getattr(result, "steps", steps),
            "usage": used.to_dict() if used is not None else _zero_usage(),
            "text": getattr(result, "text", ""),
        }
        if error is not None:
            keys["error"] = error_info(error)
        self.emit("agent_end", keys)

    def turn_start(self, step: int) -> None:
        self.emit("turn_start", {"step": step})

    def turn_end(
        self, step: int, result: Any, message: Mapping[str, Any], payloads: list[dict[str, Any]]
    ) -> None:
        """The round's history is written: `on_step` and `turn_end` (payloads as `on_tool_result`'s)."""
        self._callback(
            "on_step",
            {"step": step, "result": result, "tool_calls": list(result.tool_calls), "tool_results": payloads},
        )
        self.emit("turn_end", {"step": step, "message": message, "tool_results": payloads})

    def message(self, entry: Mapping[str, Any]) -> None:
        """A whole history entry was appended (input, steer, tool message, compact message)."""
        if self.listening():
            self.emit("message_start", {"message": entry})
            self.emit("message_end", {"message": entry})

    # ------------------------------------------------------------ one model reply

    def llm_start(self, payload: dict[str, Any], connection: Any = None) -> None:
        """One HTTP attempt starts on `connection` (observers hear which: a span names its model)."""
        self._reply_open = False
        if self.callbacks.get("on_llm_start") is not None or self._observers:
            # Copies: a callback may edit them in place, and the loop renders the originals again.
            payload = {**payload, "messages": copied(payload["messages"])}
        self._callback("on_llm_start", payload)
        if self._observers:
            self.note("chat_start", {**payload, "connection": connection})

    def llm_event(self, event: dict[str, Any]) -> None:
        self._callback("on_llm_event", event)
        if event.get("type") in DELTA_TYPES and self.listening():
            self._open_reply()
            self.emit("message_update", {"delta": event})

    def llm_finish(self, result: Any) -> None:
        self._callback("on_llm_finish", result)
        if self._observers:
            self.note("chat_end", {"result": result})

    def llm_failed(self, error: BaseException) -> None:
        """One HTTP attempt failed (retried or not): only observers hear it (a chat span per attempt)."""
        if self._observers:
            self.note("chat_error", {"error": error_info(error)})

    def reply(self, message: Mapping[str, Any]) -> None:
        """The assistant reply was appended (whole, or cut short by a cancel)."""
        if self.listening():
            self._open_reply()
            self.emit("message_end", {"message": message})
        self._reply_open = False

    def retry(self, payload: dict[str, Any]) -> None:
        """A failed attempt is about to be retried: its partial reply gets no `message_end`."""
        self._reply_open = False
        self._callback("on_retry", payload)
        error = payload.get("error")
        self.emit(
            "retry",
            {
                "attempt": payload.get("attempt"),
                "delay": payload.get("delay"),
                "error": error_info(error) if isinstance(error, BaseException) else error,
            },
        )

    def _open_reply(self) -> None:
        if not self._reply_open:
            self._reply_open = True
            self.emit("message_start", {"message": {"role": "assistant", "content": []}})

    # ------------------------------------------------------------ tools

    def tool_call(self, call: Any) -> None:
        """The model's call is about to be checked (`on_tool_call`; no event: it may never run)."""
        if self.callbacks.get("on_tool_call") is not None:
            self._callback(
                "on_tool_call", {"tool_call_id": call.id, "tool_name": call.name, "input": call.arguments}
            )

    def tool_start(self, call: Any, input: dict[str, Any]) -> None:
        """The call was validated and allowed, and starts now."""
        self.emit("tool_execution_start", {"tool_call_id": call.id, "tool_name": call.name, "input": input})

    def tool_entered(self, call: Any) -> None:
        """The call's code starts on this thread (internal: telemetry makes its span current here)."""
        if self._observers:
            self.note("tool_enter", {"tool_call_id": call.id, "tool_name": call.name})

    def tool_left(self, call: Any) -> None:
        """The call's code is done on this thread; heard even after `agent_end` (an abandoned call)."""
        if self._observers:
            with self._lock:
                self._observe(
                    {
                        "type": "tool_leave",
                        "run_id": self.run_id,
                        "agent_id": self.agent_id,
                        "tool_call_id": call.id,
                        "tool_name": call.name,
                    }
                )

    def tool_output(self, payload: dict[str, Any]) -> None:
        if surrogates.count(payload.get("data")):
            payload = {**payload, "data": self._encodable_output(payload)}
        self._callback("on_tool_output", payload)
        self.emit("tool_execution_update", dict(payload))

    def _encodable_output(self, payload: dict[str, Any]) -> Any:
        call_id = str(payload.get("tool_call_id"))
        if call_id in self._unencodable:
            return surrogates.fixed(payload["data"])
        self._unencodable.add(call_id)
        where = f"output streamed by tool {payload.get('tool_name')!r} (call {call_id})"
        return surrogates.replaced(payload["data"], where)

    def tool_end(self, call: Any, result: dict[str, Any]) -> None:
        if self.callbacks.get("on_tool_result") is not None:
            payload = {**result, "tool_call_id": call.id, "tool_name": call.name, "input": call.arguments}
            self._callback("on_tool_result", payload)
        self.emit("tool_execution_end", {"tool_call_id": call.id, "tool_name": call.name, "result": result})

    def approval_required(self, view: dict[str, Any]) -> None:
        """A call was deferred and waits for `agent.decide()`: its pending dict (API.md §Durable sessions)."""
        self.emit("approval_required", dict(view))

    # ------------------------------------------------------------ compaction

    def compact_sink(
        self, reason: str, on_compact: Callable[..., Any] | None
    ) -> Callable[[dict[str, Any]], None]:
        """The `on_compact` given to `compact.run`: its `compact-start` is also `compaction_start`."""

        def sink(event: dict[str, Any]) -> None:
            if event.get("type") == "compact-start":
                self.emit("compaction_start", {"reason": reason})
            notify(on_compact, event)

        return sink

    def compaction_end(self, reason: str, message: Mapping[str, Any], result: Mapping[str, Any]) -> None:
        """The compact message was appended (its own message events come first)."""
        self.message(message)
        if self.listening():
            keys: dict[str, Any] = {
                "reason": reason,
                "summary": str(result["content"]),
                "usage": result["usage"].to_dict(),
            }
            if result.get("input_excerpted"):
                keys["input_excerpted"] = True
            self.emit("compaction_end", keys)


def _zero_usage() -> dict[str, int]:
    from .usage import Usage

    return Usage().to_dict()


def unstarted(agent_id: str, run_id: str, error: BaseException) -> list[Event]:
    """The events of a run that never started (superseded or stopped first): start, then end."""
    base = {"run_id": run_id, "agent_id": agent_id}
    end = {"reason": None, "steps": 0, "usage": _zero_usage(), "text": "", "error": error_info(error)}
    return [{"type": "agent_start", **base}, {"type": "agent_end", **base, **end}]


# ---------------------------------------------------------------- the Run a stream returns


class Feed:
    """The buffer between a run's thread and its reader: never blocks the run, however slow the reader."""

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel
        self.events: collections.deque[Event] = collections.deque()
        self.ready = threading.Condition()
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.started = False
        # Called (from the run's thread) after each event and at the end: aio wakes its loop here.
        self.waker: Callable[[], None] | None = None
        # The owner of the run's threads (_utils.threads): closing from inside the run cannot wait.
        self.owner: Any = None

    def push(self, event: Event) -> None:
        if event["type"] == "agent_start":
            self.started = True
        with self.ready:
            self.events.append(event)
            self.ready.notify_all()
        waker = self.waker
        if waker is not None:
            waker()

    def finish(self, result: Any, error: BaseException | None) -> None:
        with self.ready:
            self.result, self.error = result, error
            self.done.set()
            self.ready.notify_all()
        waker = self.waker
        if waker is not None:
            waker()

    def pop(self) -> Event | None:
        """The next buffered event, or None when none is buffered right now."""
        with self.ready:
            return self.events.popleft() if self.events else None

    def next_event(self, timeout: float | None = None) -> Event | None:
        """The next event, or None once the run has ended and every event was read."""
        with self.ready:
            while not self.events and not self.done.is_set():
                self.ready.wait(timeout)
            return self.events.popleft() if self.events else None


class Run:
    """A run started by `agent.stream()` / `stream_resume()`: iterate it for its events.

    Iterating yields every event of the run in order, then stops; if the run failed, the
    iterator raises its AgentError after the final `agent_end`. Leaving the `with` block,
    `close()` or garbage collection before the end stops the run.
    """

    def __init__(self, feed: Feed, run_id: str) -> None:
        self._feed = feed
        self.run_id = run_id
        # Not `self.close`: a finalizer holding a bound method would keep the Run alive.
        self._finalizer = weakref.finalize(self, feed.cancel.set)

    @property
    def result(self) -> Any:
        """The SendResult once the run has ended; None before, or after a failure."""
        return self._feed.result if self._feed.done.is_set() else None

    @property
    def done(self) -> bool:
        return self._feed.done.is_set()

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the run ends and return its SendResult (raising like `send`).

        Raises:
            TimeoutError: `timeout` seconds passed first (the run goes on).
            AgentError: the run failed.
        """
        if not self._feed.done.wait(timeout):
            raise TimeoutError(f"the run did not end within {timeout} s")
        if self._feed.error is not None:
            raise self._feed.error
        return self._feed.result

    def close(self) -> None:
        """Stop the run (if it still runs) and wait for its end (from inside the run: only stop it)."""
        from ._utils.threads import owner

        self._feed.cancel.set()
        if self._feed.owner is None or owner() is not self._feed.owner:
            self._feed.done.wait()

    def __iter__(self) -> Iterator[Event]:
        feed = self._feed
        while True:
            event = feed.next_event()
            if event is None:
                break
            yield event
        if feed.error is not None:
            raise feed.error

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "done" if self.done else "running"
        return f"Run(run_id={self.run_id!r}, {state})"


def start_stream(
    run: Callable[[Signal, Listener, str], Any],
    cancel: threading.Event | None,
    launch: Callable[[Callable[[], None], str], Any],
    name: str,
    *,
    agent_id: str,
    owner: Any,
) -> Run:
    """Start `run(own_cancel, sink, run_id)` on a thread from `launch`; return its `Run` at once.

    The run's events go to the Run's feed; a run that never started (superseded or stopped
    first) still gives its reader `agent_start` and `agent_end` with the error. `owner` is what
    owns the run's threads (`_utils.threads.owner()`): `close()` from one of them cannot wait.
    """
    run_id = random_hex()
    own = Signal()
    feed = Feed(own)
    feed.owner = owner
    unfollow = follow(cancel, own) if cancel is not None else None

    def drive() -> None:
        result, error = None, None
        try:
            result = run(own, feed.push, run_id)
        except BaseException as exc:
            error = exc
            if not feed.started:
                for event in unstarted(agent_id, run_id, exc):
                    feed.push(event)
        finally:
            if unfollow is not None:
                unfollow()
        feed.finish(result, error)

    launch(drive, name)
    return Run(feed, run_id)


def feed_of(run: Run) -> Feed:
    """The buffer behind `run`, for a reader that must not block on it (aio.py's event loop)."""
    return run._feed
