"""The Agent: config + history + tools, and the calls that run the loop.

    agent = Agent(config={"base_url": url, "model": "small"}, tools=[add])
    result = agent.send("What is 2 + 3?")
    agent.stop(); agent.resume(); agent.compact(); agent.close()

One agent runs one task at a time: a new `send` (from any thread) stops the running one
first — "latest instruction wins" — because an agent has one history and two runs writing
to it would interleave.
"""

from __future__ import annotations

import os
import threading
import uuid
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import config as _config
from ._utils.cancel import Signal, follow
from ._utils.capabilities import media_kind
from ._utils.threads import owned_by, owner, spawn
from .errors import AgentError
from .result import SendResult
from .store import Session
from .tools.handlers import FileTool
from .tools.toolset import ToolSet, load

if TYPE_CHECKING:
    from . import loop as _loop

# The loop (and with it the HTTP layer, protocols, compaction) loads on the first send, so that
# `import agentcore` stays cheap for scripts that only build agents or tools.
Message = dict[str, Any]

__all__ = ["Agent", "SendResult"]

CALLBACKS = frozenset(
    {
        "on_start",
        "on_llm_start",
        "on_llm_finish",
        "on_llm_event",
        "on_permission",
        "on_tool_call",
        "on_tool_output",
        "on_tool_result",
        "on_step",
        "on_retry",
        "on_compact",
    }
)
_PART_TYPES = ("text", "image", "file")


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
        session: Session | None = None,
    ) -> None:
        if config is not None and not isinstance(config, Mapping):
            raise TypeError(f"config must be a dict, got {type(config).__name__}")
        if callbacks is not None and not isinstance(callbacks, Mapping):
            raise TypeError(f"callbacks must be a dict, got {type(callbacks).__name__}")
        if history is not None and not isinstance(history, list):
            raise TypeError(f"history must be a list, got {type(history).__name__}")
        if id is not None and not isinstance(id, str):
            raise TypeError(f"id must be a str, got {type(id).__name__}")
        if tools is not None and isinstance(tools, (int, float, bool, bytes)):
            raise TypeError(f"tools must be a ToolSet, a list or a dict of tools, got {type(tools).__name__}")
        if session is not None and not isinstance(session, Session):
            raise TypeError(f"session must come from store.session(id), got {type(session).__name__}")
        if session is not None and history is not None:
            raise AgentError(
                "pass history= or session=, not both: a session loads its history", kind="config"
            )
        self._config = _config.resolve(config)
        self.tools: ToolSet = _initial_tools(tools)
        self._callbacks: dict[str, Callable[..., Any]] = _check_callbacks(callbacks)
        self.session = session
        if session is not None:
            history = session.load()
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
        cancel: threading.Event | None = None,
    ) -> SendResult:
        """Append `input` as a user message and run the loop until it ends (blocking).

        Raises:
            AgentError: bad config or input (nothing written), cancellation (`aborted`),
                model errors that were not retried.
        """
        self._refuse_inside_run("send")
        merged = _config.merge(self._config, config)
        message = _user_message(input, merged)
        overrides = _Overrides(
            merged, _check_history(history), _send_tools(tools), _check_callbacks(callbacks, config=True)
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

        Raises:
            AgentError: kind "request" when history does not end with an assistant or tool message.
        """
        self._refuse_inside_run("resume")
        merged = _config.merge(self._config, config)
        overrides = _Overrides(merged, None, None, _check_callbacks(callbacks, config=True))
        last = self.history[-1].get("role") if self.history else None
        if last not in ("assistant", "tool"):
            raise AgentError(
                "resume() needs a history that ends with an assistant or tool message; "
                "use send() for new input",
                kind="request",
            )
        return self._run(overrides, None, cancel)

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
        running, state = self._start(_Overrides(self._config, None, None, {}), None, None)
        state.callbacks = callbacks

        def body() -> Any:
            return _loop.compact_now(
                state, on_compact=callbacks.get("on_compact"), on_retry=callbacks.get("on_retry")
            )

        return str(self._drive(running, body))

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

    def _run(
        self, overrides: _Overrides, message: Message | None, cancel: threading.Event | None
    ) -> SendResult:
        if cancel is not None and cancel.is_set():
            raise AgentError("the send was cancelled before it started", kind="aborted")
        from . import loop as _loop

        running, state = self._start(overrides, message, cancel)
        result: SendResult = self._drive(running, lambda: _loop.run(state), cancel)
        return result

    def _start(
        self, overrides: _Overrides, message: Message | None, cancel: threading.Event | None
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
                appended = self._write_input(history, message)
                overrides.apply(self)
            state = _loop.Run(
                agent_id=self.id,
                history=self.history,
                config=self._config,
                tools=self._effective_tools(),
                callbacks=dict(self._callbacks),
                cancel=running.cancel,
                pool=self._pool(),
                appended=appended,
                on_append=self._committer(self.history),
            )
        except BaseException:
            # Superseded, Ctrl-C while the previous run was ending, or a failure before the worker
            # exists: this task never runs, so it must not stay in `agent.running` (a later
            # send or stop() would wait for it forever).
            self._release(running)
            raise
        return running, state

    def _write_input(self, history: list[Message], message: Message | None) -> list[Message]:
        """Answer open calls, append the input; with a session, commit all of it or write nothing."""
        from . import loop as _loop

        if self.session is not None:
            self.session.check(history)
        start = len(history)
        appended = _loop.close_open_calls(history)
        if message is not None:
            _loop._append_to(history, message)
            appended.append(message)
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


def _close_pools(box: list[Any]) -> None:
    while box:
        pool = box.pop()
        try:
            pool.close()
        except Exception:
            pass


def _initial_tools(tools: Any) -> ToolSet:
    if tools is None:
        return ToolSet()
    if isinstance(tools, ToolSet):
        return tools
    if _has_folder(tools):
        raise AgentError(
            "Agent(tools=) does no I/O: scan folders with agentcore.tools.load(folder) "
            "or pass them to send(tools=)",
            kind="config",
        )
    return load(tools)


def _has_folder(tools: Any) -> bool:
    if isinstance(tools, (str, os.PathLike)):
        return True
    if isinstance(tools, (list, tuple)):
        return any(isinstance(t, (str, os.PathLike)) for t in tools)
    return False


def _send_tools(tools: Any) -> ToolSet | None:
    if tools is None:
        return None
    return tools if isinstance(tools, ToolSet) else load(tools)


def _check_history(history: Any) -> list[Message] | None:
    if history is not None and not isinstance(history, list):
        raise AgentError(f"history must be a list of messages, got {type(history).__name__}", kind="config")
    return history


def _check_callbacks(callbacks: Any, *, config: bool = False) -> dict[str, Callable[..., Any]]:
    if callbacks is None:
        return {}
    if not isinstance(callbacks, Mapping):
        if config:
            raise AgentError(f"callbacks must be a dict, got {type(callbacks).__name__}", kind="config")
        raise TypeError(f"callbacks must be a dict, got {type(callbacks).__name__}")
    checked = {}
    for name, callback in callbacks.items():
        if name not in CALLBACKS:
            raise AgentError(
                f"unknown callback {name!r}; known: {', '.join(sorted(CALLBACKS))}", kind="config"
            )
        if callback is not None and not callable(callback):
            raise AgentError(
                f"callback {name} must be callable, got {type(callback).__name__}", kind="config"
            )
        checked[name] = callback
    return checked


def _user_message(input: Any, config: Mapping[str, Any]) -> Message:
    """Validate send input; nothing is written when it is rejected."""
    if isinstance(input, str):
        if not input.strip():
            raise AgentError("the input is empty", kind="request")
        return {"role": "user", "content": input}
    if not isinstance(input, list):
        raise AgentError(
            f"input must be a str or a list of content parts, got {type(input).__name__}", kind="request"
        )
    if not input:
        raise AgentError("the input is empty (no content parts)", kind="request")
    for index, part in enumerate(input):
        _check_part(index, part, config)
    if not any(p.get("type") != "text" or str(p.get("text", "")).strip() for p in input):
        raise AgentError("the input is empty (only blank text parts)", kind="request")
    return {"role": "user", "content": [dict(p) for p in input]}


def _check_part(index: int, part: Any, config: Mapping[str, Any]) -> None:
    where = f"input part {index}"
    if not isinstance(part, dict):
        raise AgentError(f"{where} must be a dict, got {type(part).__name__}", kind="request")
    kind = part.get("type")
    if kind not in _PART_TYPES:
        raise AgentError(f"{where} has type {kind!r}; allowed: text, image, file", kind="request")
    if kind == "text" and not isinstance(part.get("text"), str):
        raise AgentError(f"{where} (text) needs a str 'text'", kind="request")
    if kind == "image" and (not isinstance(part.get("image"), str) or not part["image"]):
        raise AgentError(f"{where} (image) needs 'image': a data URL, a URL or base64 text", kind="request")
    if kind == "file":
        if not isinstance(part.get("media_type"), str) or not part["media_type"]:
            raise AgentError(f"{where} (file) needs a 'media_type' such as 'application/pdf'", kind="request")
        if not isinstance(part.get("data"), str) or not part["data"]:
            raise AgentError(f"{where} (file) needs 'data': base64 text or a URL", kind="request")
    media = media_kind(part)
    if (
        media is not None
        and not config["capabilities"].get(media, True)
        and config["media_fallback"] == "error"
    ):
        raise AgentError(
            f"{where} is {media} content, which capabilities.{media}=False forbids "
            '(set media_fallback="strip" to drop it instead)',
            kind="request",
        )
