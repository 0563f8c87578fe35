"""One run of the loop: context → model → tools → repeat, until a reason to stop.

    result = run(Run(agent_id, history, config, tools, callbacks, cancel))
    result.reason   # "finished" | "no-tool" | "tool-stop" | "step-limit"

Invariants, whatever happens (cancel at any instant, tool crash, model error mid-stream):
history only grows, and every tool call in it gets exactly one result.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import compact as _compact
from . import tool_mode
from ._utils import tokens as _tokens
from ._utils.cancel import Signal, child
from ._utils.notify import notify
from ._utils.retry import RetryPolicy
from ._utils.retry import call as with_retries
from ._utils.threads import spawn
from .config import Config
from .context import Context, build, over_threshold
from .errors import AgentError
from .history import Message, open_calls, tool_result_part
from .history import compact as compact_message
from .llm import complete, tool_schemas
from .protocols.base import LLMResult, Request, ToolCall, tool_call_part
from .result import SendResult
from .tool_mode import as_text, effective_mode, from_text, is_refusal
from .tools.execute import run_call
from .tools.shape import error_result, interrupted_result
from .tools.toolset import ToolSet
from .usage import Usage

MAX_OVERFLOW_COMPACTIONS = 3


@dataclass
class Run:
    """Everything one run needs; the loop appends to `history` and nothing else."""

    agent_id: str
    history: list[Message]
    config: Config
    tools: ToolSet
    callbacks: Mapping[str, Callable[..., Any]]
    cancel: Signal
    pool: Any = None
    appended: list[Message] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    steps: int = 0
    partial: _Partial | None = None
    # Called after each entry the loop appends (a session commits it there); raising fails the run.
    on_append: Callable[[Message], None] | None = None
    # The context of the current history length: the budget check and the request of a round
    # (and its retries) share one build, since history only grows during a run.
    context_cache: tuple[int, Context] | None = None


@dataclass
class _Partial:
    """What a streamed reply has delivered so far, kept in case the run is cancelled mid-stream."""

    text: list[str] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    spec: Any = None

    def on_event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "text-delta":
            self.text.append(str(event.get("text", "")))
        elif kind == "tool-call":
            arguments = event.get("input")
            self.calls.append(
                tool_call_part(
                    str(event.get("tool_call_id")),
                    str(event.get("tool_name")),
                    arguments if isinstance(arguments, dict) else {},
                )
            )


# ---------------------------------------------------------------- the loop


def run(state: Run) -> SendResult:
    """Run rounds until a reason to stop. Raises AgentError (aborted when cancelled)."""
    notify(state.callbacks.get("on_start"))
    config = state.config
    no_tool_rounds = config["no_tool_rounds"]
    max_steps = config["max_steps"]
    skipped = 0
    while True:
        result, output = _model_round(state, reminder=_needs_reminder(state, skipped))
        state.steps += 1
        if result.tool_calls:
            skipped = 0
            _append(state, _assistant_message(result))
            results = _run_tools(state, result.tool_calls)
            notify(state.callbacks.get("on_step"), _step_payload(state, result, results))
            if any(r.get("stop") for r in results):
                return _finish(state, result, "tool-stop")
            if max_steps is not None and state.steps >= max_steps:
                return _finish(state, result, "step-limit")
            continue
        _append(state, _assistant_message(result))
        notify(state.callbacks.get("on_step"), _step_payload(state, result, []))
        if output is not _NO_OUTPUT or not state.tools:
            return _finish(state, result, "finished", None if output is _NO_OUTPUT else output)
        if max_steps is not None and state.steps >= max_steps:
            return _finish(state, result, "step-limit")
        skipped += 1
        if skipped >= no_tool_rounds:
            return _finish(state, result, "no-tool")


def _needs_reminder(state: Run, skipped: int) -> bool:
    rounds = state.config["no_tool_rounds"]
    prompt = state.config["no_tool_prompt"]
    if not state.tools or not prompt or math.isinf(rounds) or rounds <= 1:
        return False
    return bool(skipped == rounds - 1)


def _finish(state: Run, result: LLMResult, reason: str, output: Any = None) -> SendResult:
    return SendResult(result.text, state.steps, state.usage, reason, output, state.appended)


_NO_OUTPUT = object()


# ---------------------------------------------------------------- one model round


def _model_round(state: Run, *, reminder: bool) -> tuple[LLMResult, Any]:
    """One model reply for this round: compacting first when over budget, resending after an overflow."""
    config = state.config
    if _over_budget(state):
        _compact_history(state)
    policy = RetryPolicy.from_config(config)
    first_overflow: AgentError | None = None
    compactions = 0
    while True:
        try:
            return with_retries(
                lambda: _attempt(state, reminder),
                policy,
                cancel=state.cancel,
                on_retry=lambda payload: notify(state.callbacks.get("on_retry"), payload),
            )
        except AgentError as error:
            if error.kind == "aborted":
                _close_partial_reply(state)
                raise
            if not error.overflow:
                raise
            first_overflow = first_overflow or error
            if compactions >= MAX_OVERFLOW_COMPACTIONS:
                raise first_overflow from None
            compactions += 1
            _compact_history(state)


def _attempt(state: Run, reminder: bool) -> tuple[LLMResult, Any]:
    """One HTTP attempt; a structured-output reply that does not validate fails it (and is retried).

    In tool_mode "auto", a server that refuses the tools field is answered at once by the same
    attempt in the text protocol (remembered for this base_url + model), not by a backoff.
    """
    mode = effective_mode(state.config) if state.tools else "native"
    try:
        return _attempt_in(state, reminder, mode)
    except AgentError as error:
        if mode == "native" and state.tools and is_refusal(error, state.config):
            return _attempt_in(state, reminder, "text")
        raise


def _attempt_in(state: Run, reminder: bool, mode: str) -> tuple[LLMResult, Any]:
    config = state.config
    ctx = _context(state)
    messages = list(ctx.messages)
    if reminder:
        messages.append({"role": "user", "content": config["no_tool_prompt"]})
    system, tools, spec = ctx.system, tool_schemas(state.tools), None
    chars = ctx.chars + _tokens.messages_chars(messages[len(ctx.messages) :])
    if mode == "text":
        system, messages, spec = as_text(system, messages, state.tools.schema)
        tools = []
        chars = len(system) + _tokens.messages_chars(messages)
    request = _request(state, system, messages, tools)
    notify(state.callbacks.get("on_llm_start"), {"messages": messages, "tools": tools, "system": system})
    partial = _Partial(spec=spec)
    state.partial = partial
    try:
        result = complete(
            request,
            config["protocol"],
            cancel=state.cancel,
            on_event=_event_sink(state, partial),
            timeout=config["request_timeout"],
            adapter=config["model"],
        )
    except AgentError as error:
        if error.kind != "aborted":
            state.partial = None
        raise
    state.partial = None
    if result.usage_reported:
        state.usage.add(result.usage)
        _tokens.ratios.learn(_ratio_key(config), chars, result.usage.input_tokens)
    if spec is None and config["tool_mode"] == "auto" and state.tools and not result.tool_calls:
        # The model may write a call as text even though native tools were offered: run it too.
        spec = tool_mode.prepare(state.tools.schema)
    if spec is not None:
        result = from_text(result, spec, salt=str(len(state.history)))
    notify(state.callbacks.get("on_llm_finish"), result)
    output = _NO_OUTPUT
    if config["output"] is not None and not result.tool_calls:
        output = config["output"].parse(result.text)
    return result, output


def _event_sink(state: Run, partial: _Partial) -> Callable[[dict[str, Any]], None]:
    on_llm_event = state.callbacks.get("on_llm_event")

    def sink(event: dict[str, Any]) -> None:
        partial.on_event(event)
        notify(on_llm_event, event)

    return sink


def _context(state: Run) -> Context:
    cached = state.context_cache
    if cached is not None and cached[0] == len(state.history):
        return cached[1]
    config = state.config
    ctx = build(
        state.history,
        system=config["system"],
        tools=state.tools,
        max_context_tokens=config["max_context_tokens"],
        ratio=_tokens.ratios.get(_ratio_key(config)),
        protocol=config["protocol"],
        reasoning=config["capabilities"].get("reasoning", False),
    )
    state.context_cache = (len(state.history), ctx)
    return ctx


def _request(state: Run, system: str, messages: list[Message], tools: list[dict[str, Any]]) -> Request:
    config = state.config
    model = config["model"]
    return Request(
        model=model if isinstance(model, str) else "",
        messages=messages,
        system=system,
        tools=tools,
        base_url=config["base_url"],
        api_key=config["api_key"],
        provider=config["provider"],
        stream=config["stream"],
        cache=config["cache"],
        capabilities=config["capabilities"],
        media_fallback=config["media_fallback"],
        output=config["output"],
        max_tokens=config["max_tokens"],
    )


def _ratio_key(config: Mapping[str, Any]) -> tuple[str, str, Any]:
    model = config["model"]
    return (config["protocol"], config["base_url"], model if isinstance(model, str) else id(model))


def _over_budget(state: Run) -> bool:
    config = state.config
    if math.isinf(config["max_context_tokens"]):
        return False
    return over_threshold(_context(state), config["max_context_tokens"], config["compact_threshold"])


def _close_partial_reply(state: Run) -> None:
    """Cancelled mid-stream: keep the text that arrived, with its complete calls answered as interrupted."""
    partial, state.partial = state.partial, None
    if partial is None or not "".join(partial.text):
        return
    text = "".join(partial.text)
    if partial.spec is not None:
        # Text-protocol markup never reaches history; a half-written call is dropped with it.
        text = tool_mode.strip(text, partial.spec)
        if not text:
            return
    content: list[dict[str, Any]] = [{"type": "text", "text": text}, *partial.calls]
    # A cut stream reports no usage; the entry still carries the key every assistant entry has.
    _append(state, {"role": "assistant", "content": content, "usage": Usage().to_dict()})
    if partial.calls:
        results = [interrupted_result() for _ in partial.calls]
        _append(state, _tool_message(partial.calls, results))


# ---------------------------------------------------------------- compaction


def compact_now(
    state: Run, *, on_compact: Callable[..., Any] | None = None, on_retry: Callable[..., Any] | None = None
) -> str:
    """Write a summary, append it as a compact message and return its text."""
    config = state.config
    result = _compact.run(
        history=state.history,
        system=config["system"],
        tools=state.tools,
        connection=compact_connection(config),
        on_compact=on_compact,
        cancel=state.cancel,
        max_context_tokens=config["max_context_tokens"],
        retry=RetryPolicy.from_config(config),
        on_retry=on_retry,
    )
    state.usage.add(result["usage"])
    message = compact_message(result["content"])
    message["usage"] = result["usage"].to_dict()
    _append(state, message)
    return str(result["content"])


def _compact_history(state: Run) -> None:
    compact_now(state, on_compact=state.callbacks.get("on_compact"), on_retry=state.callbacks.get("on_retry"))


def compact_connection(config: Mapping[str, Any]) -> dict[str, Any]:
    overrides = config.get("compact") or {}
    connection = {
        "base_url": config["base_url"],
        "api_key": config["api_key"],
        "model": config["model"],
        "protocol": config["protocol"],
        "provider": config["provider"],
        "stream": config["stream"],
        "cache": config["cache"],
        "capabilities": config["capabilities"],
        "request_timeout": config["request_timeout"],
    }
    connection.update({k: v for k, v in overrides.items() if v is not None})
    return connection


# ---------------------------------------------------------------- tools


def _run_tools(state: Run, calls: list[ToolCall]) -> list[dict[str, Any]]:
    """Run every call in parallel; return results in call order; always append the tool message."""
    batch = _Batch(state, calls)
    try:
        batch.start()
        batch.wait()
    finally:
        results = batch.close()
        _append(state, _tool_message([_call_part(c) for c in calls], results))
    if batch.permission_error is not None:
        raise AgentError(
            f"on_permission raised: {type(batch.permission_error).__name__}: {batch.permission_error}",
            kind="tool",
            cause=batch.permission_error,
        ) from batch.permission_error
    if state.cancel.is_set():
        raise AgentError("the run was stopped", kind="aborted")
    return [dict(r) for r in results]


_PER_CALL_CALLBACKS = ("on_tool_call", "on_permission", "on_tool_output", "on_tool_result")


class _Batch:
    """The calls of one round, each on its own thread; results land in call order."""

    def __init__(self, state: Run, calls: list[ToolCall]) -> None:
        self.state = state
        self.calls = calls
        self.results: list[dict[str, Any] | None] = [None] * len(calls)
        self.cancel, self._unfollow = child(state.cancel)
        self.permission_error: BaseException | None = None
        self._done = threading.Condition()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self._unwake = self.cancel.on_set(self._wake)
        if len(self.calls) == 1 and not any(self.state.callbacks.get(name) for name in _PER_CALL_CALLBACKS):
            # One call and no per-call callback (they run on tool threads, API.md §Callbacks): run
            # it here. run_call itself returns at once on cancel, so nothing needs a thread of its
            # own to stay interruptible.
            self._work(0, self.calls[0])
            return
        for index, call in enumerate(self.calls):
            self._threads.append(spawn(self._worker(index, call), name="agentcore-tool-call"))

    def _worker(self, index: int, call: ToolCall) -> Callable[[], None]:
        return lambda: self._work(index, call)

    def wait(self) -> None:
        with self._done:
            while not self.cancel.is_set() and any(r is None for r in self.results):
                self._done.wait()

    def close(self) -> list[dict[str, Any]]:
        """Answer every unfinished call as interrupted; later results are dropped."""
        self._unfollow()
        unanswered = []
        with self._done:
            for index, result in enumerate(self.results):
                if result is None:
                    self.results[index] = interrupted_result()
                    unanswered.append(index)
        for index in unanswered:
            self._notify_result(index)
        # A call that stored its own result only has its on_tool_result left to fire: wait for
        # it, so no callback of this round arrives after the round (or the send) has ended.
        for index, thread in enumerate(self._threads):
            if index not in unanswered:
                thread.join()
        return [r for r in self.results if r is not None]

    def _wake(self) -> None:
        with self._done:
            self._done.notify_all()

    def _work(self, index: int, call: ToolCall) -> None:
        try:
            result = self._execute(call)
        except BaseException as exc:  # a bug in a callback path must still answer the call
            result = error_result(f"the tool call failed: {type(exc).__name__}: {exc}")
        with self._done:
            if self.results[index] is not None:
                return
            self.results[index] = result
            self._done.notify_all()
        if self.permission_error is not None:
            # Cancel only once the failed call's error result is stored: cancelling first would
            # let close() answer it as interrupted.
            self.cancel.set()
        self._notify_result(index)

    def _execute(self, call: ToolCall) -> dict[str, Any]:
        state = self.state
        callbacks = state.callbacks
        notify(
            callbacks.get("on_tool_call"),
            {"tool_call_id": call.id, "tool_name": call.name, "input": call.arguments},
        )
        runnable = call.name in state.tools and call.raw_arguments is None
        on_permission = callbacks.get("on_permission")
        if runnable and on_permission is not None:
            denied = self._ask(on_permission, call)
            if denied is not None:
                return denied
        return run_call(
            state.tools,
            call,
            cancel=self.cancel,
            on_output=lambda payload: notify(callbacks.get("on_tool_output"), payload),
            limit=state.config["max_tool_output"],
            agent_id=state.agent_id,
            pool=state.pool,
        )

    def _ask(self, on_permission: Callable[..., Any], call: ToolCall) -> dict[str, Any] | None:
        """None when allowed; else the result to give (denied, interrupted, or an error)."""
        from .tools.shape import denied_result

        payload = {
            "tool_name": call.name,
            "input": call.arguments,
            "tool_call_id": call.id,
            "cancel": self.cancel,
        }
        try:
            allowed = on_permission(payload)
        except BaseException as exc:
            self.permission_error = exc
            return error_result(f"the permission check failed: {type(exc).__name__}: {exc}")
        if self.cancel.is_set():
            return interrupted_result()
        return None if allowed is True else denied_result()

    def _notify_result(self, index: int) -> None:
        call = self.calls[index]
        result = self.results[index] or {}
        payload = {**result, "tool_call_id": call.id, "tool_name": call.name, "input": call.arguments}
        notify(self.state.callbacks.get("on_tool_result"), payload)


def close_open_calls(history: list[Message]) -> list[Message]:
    """Answer calls a loaded history left without a result (a process died mid-tool) as interrupted.

    A call without its result makes the vendors reject the conversation on every later request;
    appending the missing results keeps history append-only and valid. Returns what was appended.
    """
    pending = open_calls(history)
    if not pending:
        return []
    message = _tool_message(pending, [interrupted_result() for _ in pending])
    _append_to(history, message)
    return [message]


def _call_part(call: ToolCall) -> dict[str, Any]:
    return tool_call_part(call.id, call.name, call.arguments)


def _tool_message(calls: list[dict[str, Any]], results: list[dict[str, Any]]) -> Message:
    return {
        "role": "tool",
        "content": [
            tool_result_part(str(c["tool_call_id"]), str(c["tool_name"]), r["output"])
            for c, r in zip(calls, results, strict=True)
        ],
    }


def _step_payload(state: Run, result: LLMResult, results: list[dict[str, Any]]) -> dict[str, Any]:
    payloads = [
        {**r, "tool_call_id": c.id, "tool_name": c.name, "input": c.arguments}
        for c, r in zip(result.tool_calls, results, strict=True)
    ]
    return {
        "step": state.steps,
        "result": result,
        "tool_calls": list(result.tool_calls),
        "tool_results": payloads,
    }


# ---------------------------------------------------------------- history


def _assistant_message(result: LLMResult) -> Message:
    message = dict(result.message)
    message["usage"] = result.usage.to_dict()
    return message


def _append(state: Run, message: Message) -> None:
    _append_to(state.history, message)
    state.appended.append(message)
    if state.on_append is not None:
        state.on_append(message)


def _append_to(history: list[Message], message: Message) -> None:
    """Append an entry the library created, stamped with `id` and `created_at`."""
    message.setdefault("id", uuid.uuid4().hex)
    message.setdefault("created_at", time.time())
    history.append(message)
