"""Summarise the conversation into one compact entry, so later requests stay small.

    summary = run(history=agent.history, system=system, tools=tool_schemas,
                  connection={"base_url": ..., "api_key": ..., "model": "small-model"})
    connection_of(config)    # the Connection an agent's compaction uses (config["compact"] applied)
    history.append(agentcore.history.compact(summary["content"]))

The summary request carries the same turn selection as a normal request, rendered as a
transcript (so it needs no tool declarations and works on every protocol), with the previous
summary as background so still-valid facts survive, and asks to keep the user's original goal.
It fits the model's context (the smaller limit a server named in an overflow error included)
and its output is bounded. Nothing is ever removed from history: the caller appends the summary.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._utils import tokens as _tokens
from ._utils.cancel import Signal, child
from ._utils.notify import notify
from ._utils.retry import RetryPolicy
from ._utils.retry import call as with_retries
from .connection import Connection
from .context import HEAD_SHARE, HEAD_TURNS, TAIL_SHARE, excerpted_input, is_compact_turn, latest_summary
from .errors import AgentError
from .events import error_info
from .history import Message, paired, render, turns
from .protocols.base import LLMResult, Request
from .protocols.errors import context_limit
from .usage import Usage

SUMMARY_SYSTEM = (
    "You write the working memory of an AI agent. The agent will continue the task with only your "
    "summary and the latest messages, so the summary must let it carry on without redoing work."
)
SUMMARY_INSTRUCTION = "\n".join(
    [
        "Summarise the conversation above for the agent itself. Keep, in this order:",
        "1. The user's original goal and every explicit requirement or constraint, "
        "in the user's words where it matters.",
        "2. Decisions made, and why.",
        "3. Facts confirmed by tools (file paths, values, results, errors) — exact, not paraphrased.",
        "4. What has been done so far.",
        "5. What is still to do, with the next concrete step.",
        "Write plain text, concise but complete. Do not invent anything. Do not address the user.",
    ]
)
# The output bound of a summary request unless `compact.provider.max_output_tokens` sets one:
# room for a thorough summary; a model with a small context gets an eighth of it (1024 tokens
# for 8k), since the summary then travels in every later request, and a local model writes it
# in a minute or two instead of generating until its context is full.
SUMMARY_MAX_TOKENS = 2048
MIN_SUMMARY_TOKENS = 256
# Of the context a summary request may fill, the share its estimated input may take.
INPUT_SHARE = 0.9
# The context assumed when max_context_tokens is infinite and no server has named its limit.
UNBOUNDED_ROOM = 128000
log = logging.getLogger("agentcore")

# `events.Emitter.note`: an internal point's type and keys.
Observe = Callable[[str, dict[str, Any]], None]

PREVIOUS_INTRO = (
    "Background: your previous summary of the earlier part of this conversation. Keep every fact in it "
    "that is still valid, and update what changed:"
)


def run(
    *,
    history: Sequence[Mapping[str, Any]],
    system: str = "",
    tools: Any = None,
    connection: Mapping[str, Any] | Connection,
    previous: str | None = None,
    on_compact: Callable[[dict[str, Any]], None] | None = None,
    cancel: threading.Event | None = None,
    max_context_tokens: float = 128000,
    retry: RetryPolicy | None = None,
    on_retry: Callable[[dict[str, Any]], None] | None = None,
    observe: Observe | None = None,
    agent_max_tokens: int | None = None,
) -> dict[str, Any]:
    """Write a summary of `history`. Returns `{"content": str, "usage": Usage, "input_excerpted": bool}`.

    The summary request fits the model's context: `max_context_tokens`, or the smaller limit
    the server named in an overflow error (`_utils/tokens.limits`), less the request's output
    bound (see `summary_max_tokens`); what it carries is chosen by `select_transcript`.
    `input_excerpted` is True when the latest user turn is too large for its share of the
    budget, so later requests carry only the summary's excerpt of it (also logged at WARNING).

    Args:
        connection: `base_url`, `api_key`, `model`, and optionally `protocol`, `provider`,
            `stream`, `request_timeout`, `capabilities`, `cache`, `max_tokens` (the output
            bound of each summary request), or a `Connection` (`connection_of(config)`).
        agent_max_tokens: the agent's own output limit, a cap on the default bound (`summary_max_tokens`).
        previous: the previous summary; defaults to the latest compact entry of `history`.
        observe: hears `chat_start` / `chat_end` / `chat_error` around each HTTP attempt
            (`events.Emitter.note`: a compaction's requests get their telemetry spans).

    Raises:
        AgentError: a request failed (an overflow of a summary request included: its limit is
            remembered for the next try), or the summary came back empty (kind "unknown").
    """
    if not isinstance(connection, Connection):
        connection = Connection.of(connection)
    signal, unfollow = child(cancel)
    try:
        send = _Sender(connection, signal, on_compact, retry, on_retry, observe)
        plan = _plan(history, system, connection, previous, max_context_tokens, agent_max_tokens)
        notify(on_compact, {"type": "compact-start"})
        content, usage = _summarise(plan, send)
    finally:
        unfollow()
    excerpted = _warn_if_input_excerpted(history, max_context_tokens, _tokens.ratios.get(send.key))
    finish = {"type": "compact-finish", "content": content, "usage": usage, "input_excerpted": excerpted}
    notify(on_compact, finish)
    return {"content": content, "usage": usage, "input_excerpted": excerpted}


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What the summary request carries: its prompt, and its output bound."""

    prompt: str
    max_tokens: int


def _plan(
    history: Sequence[Mapping[str, Any]],
    system: str,
    connection: Connection,
    previous: str | None,
    max_context_tokens: float,
    agent_max_tokens: int | None,
) -> _Plan:
    key = connection.model_key
    ratio = _tokens.ratios.get(key)
    room = _room(max_context_tokens, key)
    max_tokens = summary_max_tokens(connection.max_tokens, agent_max_tokens, room)
    background = previous if previous is not None else latest_summary_text(history)
    budget = _budget_chars(room - max_tokens, ratio, system, len(background or ""))
    prompt = summary_prompt(select_transcript(history, budget), system, background)
    # Never more than the context leaves once the prompt is in (a long system prompt or previous
    # summary can take more than its share), but never a bound too small to summarise anything.
    left = int(room) - _tokens.estimate(len(SUMMARY_SYSTEM) + len(prompt), ratio)
    return _Plan(prompt, min(max_tokens, max(left, MIN_SUMMARY_TOKENS)))


def _summarise(plan: _Plan, send: _Sender) -> tuple[str, Usage]:
    result = send(plan.prompt, plan.max_tokens)
    content = result.text.strip()
    if not content:
        raise AgentError("the compaction request returned an empty summary", kind="unknown")
    if result.finish_reason == "length":
        log.warning(
            "the summary reached its output bound of %d tokens and may be cut short; "
            "config['compact']['provider']['max_output_tokens'] sets the bound",
            plan.max_tokens,
        )
    return content, result.usage if result.usage_reported else Usage()


class _Sender:
    """One summary request: the connection's model, retries, telemetry, and what it learns."""

    def __init__(
        self,
        connection: Connection,
        cancel: Signal,
        on_compact: Callable[[dict[str, Any]], None] | None,
        retry: RetryPolicy | None,
        on_retry: Callable[[dict[str, Any]], None] | None,
        observe: Observe | None,
    ) -> None:
        self.connection = connection
        self.key = connection.model_key
        self.cancel = cancel
        self.on_compact = on_compact
        self.retry = retry
        self.on_retry = on_retry
        self.observe = observe

    def __call__(self, prompt: str, max_tokens: int) -> LLMResult:
        summariser = summary_connection(self.connection, max_tokens)
        request = summariser.request(system=SUMMARY_SYSTEM, messages=[{"role": "user", "content": prompt}])
        attempt: Callable[[], LLMResult] = functools.partial(self._attempt, summariser, request)
        if self.observe is not None:
            attempt = _observed(attempt, self.observe, request, summariser)
        try:
            if self.retry is None:
                result = attempt()
            else:
                on_retry = functools.partial(notify, self.on_retry)
                result = with_retries(attempt, self.retry, cancel=self.cancel, on_retry=on_retry)
        except AgentError as error:
            _tokens.limits.learn(self.key, context_limit(error))
            raise
        if result.usage_reported:
            chars = len(request.system) + _tokens.messages_chars(request.messages)
            _tokens.ratios.learn(self.key, chars, result.usage.input_tokens)
        return result

    def _attempt(self, connection: Connection, request: Request) -> LLMResult:
        from .llm import complete

        def on_event(event: dict[str, Any]) -> None:
            notify(self.on_compact, {**event, "request": "compact"})

        return complete(connection, request, cancel=self.cancel, on_event=on_event)


def summary_connection(connection: Connection, max_tokens: int) -> Connection:
    """The connection a summary is written through: no forced tool_choice, output bounded.

    The bound travels as `max_tokens`; a provider `max_output_tokens` would win over it.
    """
    dropped = ("tool_choice", "max_output_tokens")
    provider = {k: v for k, v in connection.provider.items() if k not in dropped}
    return dataclasses.replace(connection, provider=provider, max_tokens=max_tokens)


def summary_max_tokens(wanted: int | None, agent_max_tokens: int | None, room: float) -> int:
    """The output bound of a summary request in a context of `room` tokens.

    `wanted` when given; else `SUMMARY_MAX_TOKENS`, at most an eighth of the context (never
    under `MIN_SUMMARY_TOKENS`) and at most the agent's own output limit. Never more than half
    the context, so the transcript keeps the other half.
    """
    if wanted is not None:
        bound = int(wanted)
    else:
        bound = min(SUMMARY_MAX_TOKENS, max(int(room) // 8, MIN_SUMMARY_TOKENS))
        if agent_max_tokens is not None:
            bound = min(bound, int(agent_max_tokens))
    return max(1, min(bound, int(room) // 2))


def _room(max_context_tokens: float, key: tuple[str, str, Any]) -> float:
    """The context (tokens) of the compaction model: the budget, or the limit its server named."""
    if math.isinf(max_context_tokens):
        return float(_tokens.limits.get(key) or UNBOUNDED_ROOM)
    return _tokens.limits.budget(key, max_context_tokens)


def _observed(
    send: Callable[[], LLMResult], observe: Observe, request: Request, connection: Connection
) -> Callable[[], LLMResult]:
    """`send` announcing each attempt as the loop's requests do (one chat span per attempt)."""
    start = {
        "messages": request.messages,
        "system": request.system,
        "tools": [],
        "request": "compact",
        # The compaction may use another model than the run's (config["compact"]).
        "connection": connection,
    }

    def attempt() -> LLMResult:
        observe("chat_start", start)
        try:
            result = send()
        except AgentError as error:
            observe("chat_error", {"error": error_info(error)})
            raise
        observe("chat_end", {"result": result})
        return result

    return attempt


def _warn_if_input_excerpted(
    history: Sequence[Mapping[str, Any]], max_context_tokens: float, ratio: float
) -> bool:
    """Never silently: an input the model will only see through the summary is logged."""
    chars = excerpted_input(history, max_context_tokens, ratio)
    if chars is None:
        return False
    log.warning(
        "the latest user input (%d characters, about %d tokens) does not fit its share of the context "
        "budget (%d of max_context_tokens=%d tokens): the model gets the summary's excerpt of it instead",
        chars,
        _tokens.estimate(chars, ratio),
        int(max_context_tokens * TAIL_SHARE),
        int(max_context_tokens),
    )
    return True


def summary_prompt(transcript: str, system: str, previous: str | None) -> str:
    parts = []
    if system:
        parts.append(f"The agent's instructions (system prompt):\n{system}")
    if previous:
        parts.append(f"{PREVIOUS_INTRO}\n{previous}")
    parts.append(f"The conversation:\n{transcript or '(no messages)'}")
    parts.append(SUMMARY_INSTRUCTION)
    return "\n\n".join(parts)


def latest_summary_text(history: Sequence[Mapping[str, Any]]) -> str | None:
    """The content of the latest compact entry of `history`, or None."""
    for message in reversed(history):
        if message.get("role") == "compact":
            return str(message.get("content") or "")
    return None


def select_transcript(history: Sequence[Mapping[str, Any]], budget_chars: int) -> str:
    """The conversation the summary must cover, rendered, within `budget_chars`.

    The same turn selection as a request: the first ≤3 user turns (≤20 %), then the turns since
    the latest summary, newest first and whole, until the budget is used; older ones are left to
    the previous summary. A single turn larger than its share is shown as head and tail (an
    excerpt for the summariser only — history is untouched). Turns since the latest summary that
    do not fit are marked as such in the transcript and logged at WARNING.
    """
    folded = turns(paired([m if isinstance(m, dict) else dict(m) for m in history]))
    found = latest_summary(folded)
    summary_at = -1 if found is None else found
    head = _head(folded, int(budget_chars * HEAD_SHARE))
    remaining = budget_chars - sum(len(text) for text in head.values())
    recent: dict[int, str] = {}
    for i in range(len(folded) - 1, summary_at, -1):
        if i in head or is_compact_turn(folded[i]):
            continue
        text = render(folded[i])
        if len(text) > remaining:
            if recent:
                break
            text = _excerpt(text, remaining)
        if text:
            recent[i] = text
            remaining -= len(text)
    return _transcript(folded, sorted({**head, **recent}.items()), summary_at, budget_chars)


def _head(folded: list[list[Message]], cap: int) -> dict[int, str]:
    """The first ≤3 user turns, within `cap` characters: the user's original goal."""
    head: dict[int, str] = {}
    used = 0
    for i in [i for i, t in enumerate(folded) if t[0].get("role") == "user"][:HEAD_TURNS]:
        text = _excerpt(render(folded[i]), max(cap - used, 0))
        if text:
            head[i] = text
            used += len(text)
    return head


def _transcript(
    folded: list[list[Message]], chosen: list[tuple[int, str]], summary_at: int, budget_chars: int
) -> str:
    """The chosen turns, each gap marked with what covers it (the previous summary, or nothing)."""
    lines: list[str] = []
    previous_index, uncovered = -1, 0
    for index, text in chosen:
        gap = [j for j in range(previous_index + 1, index) if not is_compact_turn(folded[j])]
        covered = sum(1 for j in gap if j < summary_at)
        if covered:
            lines.append(f"[{covered} earlier turns omitted: covered by the previous summary]")
        if len(gap) > covered:
            lines.append(f"[{len(gap) - covered} earlier turns omitted: they did not fit in this request]")
            uncovered += len(gap) - covered
        lines.append(text)
        previous_index = index
    if uncovered:
        log.warning(
            "compaction: %d turns since the latest summary do not fit the summary request (%d characters "
            "for the conversation) and no summary covers them; history keeps them",
            uncovered,
            budget_chars,
        )
    return "\n".join(lines)


def _excerpt(text: str, limit: int) -> str:
    """Head and tail of a text longer than `limit` characters, with the cut marked."""
    if len(text) <= limit:
        return text
    if limit < 200:
        return ""
    marker = f"\n[... {len(text) - limit} characters omitted ...]\n"
    keep = max(limit - len(marker), 0)
    return text[: keep * 2 // 3] + marker + text[len(text) - keep // 3 :]


def _budget_chars(room_tokens: float, ratio: float, system: str, background_chars: int) -> int:
    """Characters the transcript may take: `room_tokens` of input less what else the request holds.

    Only `INPUT_SHARE` of the room is used: the estimate is characters × a learned ratio.
    """
    total = int(room_tokens * INPUT_SHARE / max(ratio, 0.1))
    fixed = len(SUMMARY_SYSTEM) + len(SUMMARY_INSTRUCTION) + len(system) + background_chars + 400
    return max(total - fixed, 2000)


def connection_of(config: Mapping[str, Any]) -> Connection:
    """The connection `run` uses for an agent config: the main model, or `config["compact"]` overrides.

    Each summary is bounded by `compact.provider.max_output_tokens` when set (its `max_tokens`),
    else by the default of `summary_max_tokens`, which never exceeds `agent_max_tokens(config)`.
    A summary is text: the agent's `media_fallback` does not apply to it.
    """
    overrides = {k: v for k, v in (config.get("compact") or {}).items() if v is not None}
    compaction = dataclasses.replace(Connection.of(config), media_fallback="error", **overrides)
    wanted = (overrides.get("provider") or {}).get("max_output_tokens")
    return dataclasses.replace(compaction, max_tokens=wanted)


def agent_max_tokens(config: Mapping[str, Any]) -> int | None:
    """The agent's own output limit: `provider.max_output_tokens`, else `max_tokens` (API.md §Wire)."""
    limit: int | None = config["provider"].get("max_output_tokens") or config["max_tokens"]
    return limit
