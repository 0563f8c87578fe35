"""One run of the loop: context → model → tools → repeat, until a reason to stop.

    result = run(RunState(agent_id, history, config, tools, events, cancel))
    result.reason   # "finished" | "no-tool" | "tool-stop" | "step-limit" | "ended" | "approval"

Invariants, whatever happens (cancel at any instant, tool crash, model error mid-stream):
history only grows, and every tool call in it gets exactly one result.
Every fact of the run is announced at a named point of `state.events` (events.py), which feeds
both the callbacks and the event listeners; the loop itself never calls a callback.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import compact as _compact
from ._utils import tokens as _tokens
from ._utils.cancel import Signal
from ._utils.memo import Memo, activated, copied
from ._utils.retry import RetryPolicy, over_chain
from ._utils.threads import Workers, reusing
from .batch import Batch, failure_error, reply_claims
from .budget import Budget, Reached, model_name
from .call_ids import open_calls, unique_part, unique_reply, used_ids
from .config import Config
from .connection import Connection
from .context import Context, Reuse, build, over_threshold
from .errors import AgentError
from .events import Emitter
from .fallback import Member, members
from .history import (
    Message,
    Spent,
    append_to,
    assistant_message,
    call_part,
    compact_entry,
    cut_reply,
    tool_message,
)
from .hooks import HookFailed, Hooks
from .llm import complete, tool_schemas
from .protocols.base import DEFAULT_CAPABILITIES, LLMResult, ToolCall, tool_call_part
from .protocols.errors import context_limit
from .queues import Queue, Queues
from .result import SendResult
from .store.journal import Journal
from .text_tools import mode as text_mode
from .text_tools.mode import as_text, effective_mode, from_text, refused_tools
from .tools.handlers import ToolSet
from .tools.shape import interrupted_result
from .usage import Usage

MAX_OVERFLOW_COMPACTIONS = 3


@dataclass
class RunState:
    """The state of one run: what it needs, and what it has done so far.

    The loop appends to `history` and changes nothing else of the agent's. (The public handle
    on a run, what `agent.stream` returns, is `events.Run`.)
    """

    agent_id: str
    history: list[Message]
    config: Config
    tools: ToolSet
    events: Emitter
    cancel: Signal
    # The model the run asks: the connection keys of `config`.
    connection: Connection = field(default_factory=Connection)
    pool: Any = None
    hooks: Hooks = field(default_factory=lambda: Hooks({}))
    queues: Queues | None = None
    appended: list[Message] = field(default_factory=list)
    # Entries appended before the run started (the input, delivered steers): announced by the
    # first round, after its `turn_start` (API.md "Order of a run").
    unannounced: list[Message] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    steps: int = 0
    partial: _Partial | None = None
    # Called after each entry the loop appends (a session commits it there); raising fails the run.
    on_append: Callable[[Message], None] | None = None
    # Where each call is recorded as started, and deferred calls wait (store/journal.py).
    journal: Journal | None = None
    # A resume: the calls history holds without results are continued first (API.md §Durable
    # sessions), and the queued steers are delivered after their results.
    resume: bool = False
    # True once a resume took this run over: the calls it never started are left open for it.
    handover: Callable[[], bool] | None = None
    # The context of the current history length (and connection): the budget check and the request
    # of a round (and its retries) share one build, since history only grows during a run.
    context_cache: tuple[tuple[int, Any], Context] | None = None
    # The fold of history so far, extended each round by what was appended, and the wire forms of
    # the latest request: the agent's own (`Kept`), kept from run to run.
    reuse: Reuse = field(default_factory=Reuse)
    memo: Memo = field(default_factory=Memo)
    # What the run has spent, checked against config["limits"] before each request (budget.py).
    budget: Budget = field(default_factory=lambda: Budget(None, None))
    # The round in progress: its HTTP attempts and the usage they reported (what its entry records).
    round: _Round | None = None
    # The models a request may go to, in order: the primary, then config["fallback"].
    chain: list[Member] = field(default_factory=list)
    # The reply the run ended on, and who wrote it (`SendResult.text` / `.model`).
    last: LLMResult | None = None
    last_model: str | None = None


@dataclass
class _Round:
    """The HTTP attempts of one round so far, the usage they reported, and who answered."""

    attempts: int = 0
    usage: Usage = field(default_factory=Usage)
    # The model of the latest attempt (the one that answered, once the round has its reply).
    member: Member | None = None

    def spent(self, result: LLMResult | None, fallback_name: str) -> Spent:
        """What the round's entry records; `result` is its reply (None: a reply a cancel cut)."""
        retried = self.usage - result.usage if result is not None and result.usage_reported else self.usage
        member = self.member
        name = member.name if member is not None else fallback_name
        primary = member is None or member.primary
        return Spent(name, not primary, max(1, self.attempts), retried)


@dataclass
class Kept:
    """What the runs of one agent keep for the next: the fold of its history, the memo of requests.

    Both check that history is still what they were made from (`fold.Reuse`, `_utils/memo.py`);
    `new_run()` before each run makes them compare it again, since history may have been edited.
    """

    reuse: Reuse = field(default_factory=Reuse)
    memo: Memo = field(default_factory=Memo)

    def new_run(self) -> None:
        self.reuse.new_run()
        self.memo.new_run()


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
                    str(event.get("tool_call_id") or ""),  # none sent: unique_part gives one
                    str(event.get("tool_name")),
                    arguments if isinstance(arguments, dict) else {},
                )
            )


# ---------------------------------------------------------------- the loop


def run(state: RunState) -> SendResult:
    """Run rounds until a reason to stop. Raises AgentError (aborted when cancelled)."""
    state.events.agent_start()
    try:
        state.budget = _budget_of(state)
        state.chain = members(state.config)
        with activated(state.memo), reusing(Workers()):
            try:
                result = (_continue_open_calls(state) if state.resume else None) or _rounds(state)
            except Reached as reached:
                state.events.budget_reached(reached.limit)
                result = _finish(state, state.last, "budget", limit=reached.limit)
            finally:
                state.memo.new_run()  # between sends the agent keeps only what the next one reuses
    except HookFailed as failed:
        error = failed.to_error()
        state.events.agent_end(error=error, steps=state.steps, usage=state.usage)
        raise error from failed.cause
    except BaseException as error:
        state.events.agent_end(error=error, steps=state.steps, usage=state.usage)
        raise
    state.events.agent_end(result)
    return result


def _rounds(state: RunState) -> SendResult:
    config = state.config
    no_tool_rounds = config["no_tool_rounds"]
    max_steps = config["max_steps"]
    skipped = 0
    while True:
        state.events.turn_start(state.steps + 1)
        _announce_start(state)
        result, output = _model_round(state, reminder=_needs_reminder(state, skipped))
        state.steps += 1
        message = assistant_message(result, _answered(state, result))
        state.budget.used_calls(len(result.tool_calls))
        claimed = _stage_claims(state, result.tool_calls)
        _append(state, message, reply=True)
        calls, results, pending = (
            _run_tools(state, result.tool_calls, claimed=claimed) if result.tool_calls else ([], [], [])
        )
        if pending:
            state.events.turn_end(state.steps, result, message, _payloads(calls, results))
            return _finish(state, result, "approval", pending=pending)
        decision = _end_turn(state, result, message, results)
        at_limit = max_steps is not None and state.steps >= max_steps
        if decision == "end":
            return _finish(state, result, "ended")
        if result.tool_calls or decision == "continue":
            skipped = 0 if result.tool_calls else skipped
            if any(r.get("stop") for r in results):
                return _finish(state, result, "tool-stop")
            if at_limit:
                return _finish(state, result, "step-limit")
            _deliver(state, "steer")
            continue
        if output is not _NO_OUTPUT or not state.tools:
            if _deliver_at_end(state):
                skipped = 0
                continue
            return _finish(state, result, "finished", None if output is _NO_OUTPUT else output)
        if at_limit:
            return _finish(state, result, "step-limit")
        skipped += 1
        if skipped >= no_tool_rounds:
            if _deliver_at_end(state):
                skipped = 0
                continue
            return _finish(state, result, "no-tool")
        _deliver(state, "steer")


def _payloads(calls: list[ToolCall], results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {**r, "tool_call_id": c.id, "tool_name": c.name, "input": c.arguments}
        for c, r in zip(calls, results, strict=True)
    ]


def _end_turn(
    state: RunState, result: LLMResult, message: Message, results: list[dict[str, Any]]
) -> str | None:
    """The round's history is written: the `finish_turn` hook decides, then `turn_end` is announced."""
    payloads = _payloads(result.tool_calls, results)
    decision = None
    if "finish_turn" in state.hooks:
        decision = state.hooks.finish_turn(
            {"step": state.steps, "message": message, "tool_results": payloads}
        )
    state.events.turn_end(state.steps, result, message, payloads)
    return decision


def _announce_start(state: RunState) -> None:
    pending, state.unannounced = state.unannounced, []
    for entry in pending:
        state.events.message(entry)


def _deliver(state: RunState, queue: Queue, mode: str | None = None) -> bool:
    """Append what this delivery point takes from `queue`; True if anything was delivered."""
    if state.queues is None:
        return False
    mode = mode or state.config["steering_mode" if queue == "steer" else "follow_up_mode"]
    taken = state.queues.take(queue, mode)
    for entry in taken:
        _append(state, entry)
    return bool(taken)


def _deliver_at_end(state: RunState) -> bool:
    """The run would end finished / no-tool: queued steers, else follow-ups, make it go on."""
    return _deliver(state, "steer") or _deliver(state, "follow_up")


def _needs_reminder(state: RunState, skipped: int) -> bool:
    rounds = state.config["no_tool_rounds"]
    prompt = state.config["no_tool_prompt"]
    if not state.tools or not prompt or math.isinf(rounds) or rounds <= 1:
        return False
    return bool(skipped == rounds - 1)


def _budget_of(state: RunState) -> Budget:
    """The run's budget; a sub-agent's run also charges (and stops at) its caller's."""
    return Budget.of(state.config, state.history, upstream=getattr(state.events.parent, "budget", None))


def _finish(
    state: RunState,
    result: LLMResult | None,
    reason: str,
    output: Any = None,
    pending: list[dict[str, Any]] | None = None,
    limit: dict[str, Any] | None = None,
) -> SendResult:
    text = result.text if result is not None else ""
    return SendResult(
        text,
        state.steps,
        state.usage,
        reason,
        output,
        state.appended,
        pending or [],
        limit=limit,
        cost=state.budget.run_cost(),
        model=state.last_model,
    )


def _answered(state: RunState, result: LLMResult) -> Spent:
    """The reply of this round is accepted: who wrote it and what the round took."""
    spent = (state.round or _Round()).spent(result, model_name(state.config["model"]))
    state.last, state.last_model = result, spent.model
    return spent


_NO_OUTPUT = object()


# ---------------------------------------------------------------- one model round


def _model_round(state: RunState, *, reminder: bool) -> tuple[LLMResult, Any]:
    """One model reply for this round: compacting first when over budget.

    An invalid structured-output reply is asked again at once, up to `output_retries` times,
    with a request-only message saying what was wrong (never written to history).
    """
    if _over_budget(state):
        compact_now(state, "threshold")
    state.round = _Round()
    feedback: AgentError | None = None
    retries = 0
    while True:
        result, output = _model_reply(state, reminder, feedback)
        if not isinstance(output, _Invalid):
            return result, output
        feedback = output.error
        if retries >= state.config["output_retries"]:
            raise AgentError(
                f"{feedback.message} (still invalid after {retries} output_retries)",
                kind="unknown",
                retryable=False,
                cause=feedback,
            ) from feedback
        retries += 1
        # Asked again from the start of the chain, as every reply of a round is.
        first = state.chain[0].name if state.chain else model_name(state.config["model"])
        state.events.retry({"attempt": retries, "error": feedback, "delay": 0.0, "model": first})


def _model_reply(state: RunState, reminder: bool, feedback: AgentError | None) -> tuple[LLMResult, Any]:
    """One reply, retried with backoff on failures, resent after compacting on an overflow."""
    policy = RetryPolicy.from_config(state.config)
    chain = state.chain or members(state.config)
    first_overflow: AgentError | None = None
    compactions = 0
    while True:
        try:
            return over_chain(
                lambda index: _attempt(state, chain[index], reminder, feedback),
                policy,
                models=[member.name for member in chain],
                cancel=state.cancel,
                on_retry=state.events.retry,
            )
        except AgentError as error:
            if error.kind == "aborted":
                _close_partial_reply(state)
                raise
            if not error.overflow:
                raise
            first_overflow = first_overflow or error
            # The context size the server named caps every later budget of this model.
            asked = state.round.member if state.round is not None else None
            _tokens.limits.learn(
                (asked.connection if asked else state.connection).model_key, context_limit(error)
            )
            if compactions >= MAX_OVERFLOW_COMPACTIONS:
                raise first_overflow from None
            compactions += 1
            compact_now(state, "overflow")


@dataclass(frozen=True)
class _Invalid:
    """A structured-output reply that did not validate, and why."""

    error: AgentError


def _output_feedback(error: AgentError) -> Message:
    text = (
        f"Your previous reply was not valid structured output: {error.message}. "
        "Reply again with only a corrected value."
    )
    return {"role": "user", "content": text}


def _attempt(
    state: RunState, member: Member, reminder: bool, feedback: AgentError | None
) -> tuple[LLMResult, Any]:
    """One HTTP attempt to `member` of the chain (its connection and tool_mode); a structured-output
    reply that does not validate fails it.

    In tool_mode "auto", a server that refuses the tools field is answered at once by the same
    attempt in the text protocol (remembered for this connection's base_url + model), not by a
    backoff.
    """
    connection, tool_mode = member.connection, member.tool_mode
    mode = effective_mode(tool_mode, connection) if state.tools else "native"
    try:
        return _attempt_in(state, member, _asked(state, connection, reminder, feedback, mode))
    except AgentError as error:
        if mode == "native" and state.tools and refused_tools(error, tool_mode, connection):
            return _attempt_in(state, member, _asked(state, connection, reminder, feedback, "text"))
        raise


@dataclass(frozen=True)
class _Asked:
    """What one attempt sends, after the `prepare_request` hook and the text protocol had their say."""

    system: str
    messages: list[Message]
    tools: list[dict[str, Any]]
    # The text protocol's spec when calls travel as text (None: native tool fields).
    spec: Any
    # Characters of the request, for the token ratio its reported usage teaches.
    chars: int
    # How many of the first `messages` are the context build's (0 once a hook or text mode remade
    # them), and which of the fold's messages they are: the adapters may reuse what they made of
    # those for an earlier request (`memo.built`).
    own: int = 0
    shape: Any = None


def _asked(
    state: RunState, connection: Connection, reminder: bool, feedback: AgentError | None, mode: str
) -> _Asked:
    """The context build, the reminder or output feedback, then what the hook and `mode` make of it."""
    ctx = _context(state, connection)
    messages = list(ctx.messages)
    if reminder:
        messages.append({"role": "user", "content": state.config["no_tool_prompt"]})
    if feedback is not None:
        messages.append(_output_feedback(feedback))
    system, tools = ctx.system, tool_schemas(state.tools)
    chars = ctx.chars + _tokens.messages_chars(messages[len(ctx.messages) :])
    schema: Mapping[str, Any] = state.tools.schema
    if "prepare_request" in state.hooks:
        # Copies of the messages, at every depth: the hook may edit them in place, and history
        # and `state.reuse` share their parts.
        messages = copied(messages)
        asked = {"step": state.steps + 1, "system": system, "messages": messages, "tools": tools}
        system, messages, tools, schema = state.hooks.prepared(asked, state.tools.schema)
        return _text_if(mode, system, messages, tools, schema, len(system) + _tokens.messages_chars(messages))
    if mode != "text":
        return _Asked(system, messages, tools, None, chars, len(ctx.messages), ctx.shape)
    return _text_if(mode, system, messages, tools, schema, chars)


def _text_if(
    mode: str, system: str, messages: list[Message], tools: list[dict[str, Any]], schema: Any, chars: int
) -> _Asked:
    """What an attempt sends in `mode` when the messages are no longer the build's own."""
    if mode != "text":
        return _Asked(system, messages, tools, None, chars)
    system, messages, spec = as_text(system, messages, schema)
    return _Asked(system, messages, [], spec, len(system) + _tokens.messages_chars(messages))


def _attempt_in(state: RunState, member: Member, asked: _Asked) -> tuple[LLMResult, Any]:
    """Send `asked` and read the reply: calls written as text, unique ids, structured output."""
    connection = member.connection
    result = _send(state, member, asked)
    spec = asked.spec
    if spec is None and member.tool_mode == "auto" and state.tools and not result.tool_calls:
        # The model may write a call as text even though native tools were offered: run it too.
        spec = text_mode.prepare(state.tools.schema)
    if spec is not None:
        result = from_text(result, spec, salt=str(len(state.history)))
    # The one place a reply's calls get the ids they are written, run and sent back under.
    taken = state.reuse.call_ids(state.history)  # known from the build: no walk of history
    result = unique_reply(result, state.history, protocol=connection.protocol, taken=taken)
    state.events.llm_finish(result)
    output: Any = _NO_OUTPUT
    output_spec = state.config["output"]
    if output_spec is not None and not result.tool_calls:
        try:
            output = output_spec.parse(result.text)
        except AgentError as error:
            if error.kind != "unknown":
                raise
            output = _Invalid(error)
    return result, output


def _send(state: RunState, member: Member, asked: _Asked) -> LLMResult:
    """The HTTP attempt itself; what a stream delivered is kept (`state.partial`) until it ends."""
    connection = member.connection
    request = connection.request(
        system=asked.system, messages=asked.messages, tools=asked.tools, output=state.config["output"]
    )
    _admit(state, member)
    state.events.llm_start(
        {"messages": asked.messages, "tools": asked.tools, "system": asked.system}, connection
    )
    partial = _Partial(spec=asked.spec)
    state.partial = partial
    state.memo.built = (asked.messages, asked.own, asked.shape) if asked.own else None
    try:
        result = complete(
            connection, request, cancel=state.cancel, on_event=_event_sink(state.events, partial)
        )
    except AgentError as error:
        state.events.llm_failed(error)
        if error.kind != "aborted":
            state.partial = None
        raise
    finally:
        state.memo.built = None  # the request is made: nothing else may take its messages for its own
    state.partial = None
    if result.usage_reported:
        state.usage.add(result.usage)
        state.budget.used_tokens(member.name, result.usage)
        if state.round is not None:
            state.round.usage.add(result.usage)
        _tokens.ratios.learn(connection.model_key, asked.chars, result.usage.input_tokens)
    return result


def _admit(state: RunState, member: Member) -> None:
    """Before an HTTP attempt of the round: the budget may refuse it (`Reached`), else it counts."""
    state.budget.admit(member.name)
    round_ = state.round
    if round_ is not None:
        round_.attempts += 1
        round_.member = member


def _event_sink(events: Emitter, partial: _Partial) -> Callable[[dict[str, Any]], None]:
    def sink(event: dict[str, Any]) -> None:
        partial.on_event(event)
        events.llm_event(event)

    return sink


def _context(state: RunState, connection: Connection) -> Context:
    """The context build for the current history length and connection (its protocol and ratio)."""
    cached = state.context_cache
    key = (len(state.history), connection.model_key)
    if cached is not None and cached[0] == key:
        return cached[1]
    config = state.config
    ctx = build(
        state.history,
        system=config["system"],
        tools=state.tools,
        max_context_tokens=_budget(config, connection),
        ratio=_tokens.ratios.get(connection.model_key),
        protocol=connection.protocol,
        reasoning={**DEFAULT_CAPABILITIES, **connection.capabilities}.get("reasoning", False),
        reuse=state.reuse,
    )
    state.context_cache = (key, ctx)
    return ctx


def _budget(config: Mapping[str, Any], connection: Connection) -> float:
    """max_context_tokens, or the smaller context size `connection`'s server named in an overflow error."""
    return _tokens.limits.budget(connection.model_key, config["max_context_tokens"])


def _over_budget(state: RunState) -> bool:
    config = state.config
    if math.isinf(config["max_context_tokens"]):
        return False
    ctx = _context(state, state.connection)
    return over_threshold(ctx, _budget(config, state.connection), config["compact_threshold"])


def _close_partial_reply(state: RunState) -> None:
    """Cancelled mid-stream: keep the text that arrived, with its complete calls answered as interrupted."""
    partial, state.partial = state.partial, None
    if partial is None or not "".join(partial.text):
        return
    text = "".join(partial.text)
    if partial.spec is not None:
        # Text-protocol markup never reaches history; a half-written call is dropped with it.
        text = text_mode.strip(text, partial.spec)
        if not text:
            return
    taken = used_ids(state.history)
    round_ = state.round or _Round()
    asked = round_.member.connection if round_.member is not None else state.connection
    calls = [unique_part(call, taken, protocol=asked.protocol) for call in partial.calls]
    spent = round_.spent(None, model_name(state.config["model"]))
    _append(state, cut_reply(text, calls, spent), reply=True)
    if calls:
        results = [interrupted_result() for _ in calls]
        for part, result in zip(calls, results, strict=True):
            call = ToolCall(str(part["tool_call_id"]), str(part["tool_name"]), part["input"])
            state.events.tool_end(call, result)
        _append(state, tool_message(calls, results))


# ---------------------------------------------------------------- compaction


def compact_now(state: RunState, reason: str = "manual") -> str:
    """Write a summary, append it as a compact message and return its text.

    `reason` ("threshold", "overflow", "manual") is what `compaction_start` / `_end` carry.
    """
    config = state.config
    events = state.events
    # The fallbacks write a summary too when the compaction model fails (without `compact`'s overrides).
    fallbacks = [_compact.connection_of({**m.config, "compact": None}) for m in state.chain[1:]]
    attempts = 0

    def before_request(name: str) -> None:
        nonlocal attempts
        state.budget.admit(name)
        attempts += 1

    result = _compact.run(
        history=state.history,
        system=config["system"],
        tools=state.tools,
        connection=_compact.connection_of(config),
        agent_max_tokens=_compact.agent_max_tokens(config),
        on_compact=events.compact_sink(reason, events.callbacks.get("on_compact")),
        cancel=state.cancel,
        max_context_tokens=_budget(config, state.connection),
        retry=RetryPolicy.from_config(config),
        on_retry=events.retry,
        observe=events.observer(),
        before_request=before_request,
        fallbacks=fallbacks,
    )
    name = result["model"]
    state.usage.add(result["usage"])
    state.budget.used_tokens(name, result["usage"])
    message = compact_entry(result["content"], result["usage"], Spent(name, attempts=attempts))
    _write(state, message)
    events.compaction_end(reason, message, result)
    return str(result["content"])


def compact_run(state: RunState) -> str:
    """`agent.compact()` as a run: agent_start, the compaction's events, agent_end (reason null)."""
    state.events.agent_start(on_start=False)
    try:
        state.budget = _budget_of(state)
        state.chain = members(state.config)
        _announce_start(state)
        try:
            summary = compact_now(state, "manual")
        except Reached as reached:
            raise AgentError(
                f"{reached}: the compaction made no request (config limits)", kind="limit", retryable=False
            ) from None
    except BaseException as error:
        state.events.agent_end(error=error, usage=state.usage)
        raise
    state.events.agent_end(usage=state.usage)
    return summary


# ---------------------------------------------------------------- tools


def _stage_claims(state: RunState, calls: list[ToolCall]) -> frozenset[str]:
    """The calls to record as started with their reply's commit (batch.reply_claims)."""
    if not calls or state.journal is None:
        return frozenset()
    claims = reply_claims(state, calls)
    if claims:
        state.journal.stage(claims)
    return frozenset(call_id for call_id, _, _ in claims)


def _run_tools(
    state: RunState,
    calls: list[ToolCall],
    records: dict[str, Any] | None = None,
    claimed: frozenset[str] = frozenset(),
) -> tuple[list[ToolCall], list[dict[str, Any]], list[dict[str, Any]]]:
    """Run the round's calls (batch.py); always append the tool message of those answered.

    Returns the answered calls and their results in call order, and the deferred calls (their
    `approval_required` events announced), which wait for a decision without a result.
    """
    batch = Batch(state, calls, records, claimed)
    try:
        batch.run()
    finally:
        results = batch.close()
        answered = batch.answered
        if answered:
            _append(state, tool_message([call_part(c) for c in answered], results))
    if batch.failure is not None:
        error = failure_error(batch.failure)
        raise error from error.__cause__
    if state.cancel.is_set():
        raise AgentError("the run was stopped", kind="aborted")
    for view in batch.pending:
        state.events.approval_required(view)
    return answered, [dict(r) for r in results], batch.pending


def _continue_open_calls(state: RunState) -> SendResult | None:
    """A resume: run the calls history holds without results, by their journal records.

    Never started → run now; started → interrupted, or run again for `replay: "safe"`; approved
    → run once; denied → execution-denied; still undecided → waits again, and the run ends with
    "approval" without a model request. Then the queued steers are delivered (all of them).
    """
    parts = open_calls(state.history)
    if not parts:
        return None
    calls = [ToolCall(str(p["tool_call_id"]), str(p["tool_name"]), _input_of(p)) for p in parts]
    journal = state.journal
    records = journal.records([c.id for c in calls]) if journal is not None else {}
    _announce_start(state)
    _answered, _results, pending = _run_tools(state, calls, records)
    if pending:
        return SendResult(
            _last_text(state.history), 0, state.usage, "approval", None, state.appended, pending
        )
    _deliver(state, "steer", "all")
    return None


def _input_of(part: Mapping[str, Any]) -> dict[str, Any]:
    value = part.get("input")
    return dict(value) if isinstance(value, Mapping) else {}


def _last_text(history: list[Message]) -> str:
    """The text of the last assistant reply in history ("" when there is none)."""
    for entry in reversed(history):
        if entry.get("role") == "assistant":
            content = entry.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "".join(
                    str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text"
                )
            return ""
    return ""


# ---------------------------------------------------------------- history


def _append(state: RunState, message: Message, *, reply: bool = False) -> None:
    """Append an entry of this run and announce it (`reply`: the assistant reply's `message_end`)."""
    _write(state, message)
    if reply:
        state.events.reply(message)
    else:
        state.events.message(message)


def _write(state: RunState, message: Message) -> None:
    """Append an entry of this run to history (a session commits it here; raising fails the run)."""
    append_to(state.history, message)
    state.appended.append(message)
    if state.on_append is not None:
        state.on_append(message)
