"""Summarise the conversation into one compact entry, so later requests stay small.

    summary = run(history=agent.history, system=system, tools=tool_schemas,
                  connection={"base_url": ..., "api_key": ..., "model": "small-model"})
    history.append(agentcore.history.compact(summary["content"]))

The summary request carries the same turn selection as a normal request, rendered as a
transcript (so it needs no tool declarations and works on every protocol), with the previous
summary as background so still-valid facts survive, and asks to keep the user's original goal.
Nothing is ever removed from history: the caller appends the summary.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._utils import tokens as _tokens
from ._utils.cancel import Signal, child
from ._utils.notify import notify
from ._utils.retry import RetryPolicy
from ._utils.retry import call as with_retries
from .context import HEAD_SHARE, HEAD_TURNS, TAIL_SHARE, excerpted_input, is_compact_turn, latest_summary
from .errors import AgentError
from .events import error_info
from .history import paired, render, turns
from .protocols.base import DEFAULT_CAPABILITIES, LLMResult, Request
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
    connection: Mapping[str, Any],
    previous: str | None = None,
    on_compact: Callable[[dict[str, Any]], None] | None = None,
    cancel: threading.Event | None = None,
    max_context_tokens: float = 128000,
    retry: RetryPolicy | None = None,
    on_retry: Callable[[dict[str, Any]], None] | None = None,
    observe: Observe | None = None,
) -> dict[str, Any]:
    """Write a summary of `history`. Returns `{"content": str, "usage": Usage, "input_excerpted": bool}`.

    `input_excerpted` is True when the latest user turn is too large for its share of the
    budget, so later requests carry only the summary's excerpt of it (also logged at WARNING).

    Args:
        connection: `base_url`, `api_key`, `model`, and optionally `protocol`, `provider`,
            `stream`, `request_timeout`, `capabilities`, `cache`.
        previous: the previous summary; defaults to the latest compact entry of `history`.
        observe: hears `chat_start` / `chat_end` / `chat_error` around each HTTP attempt
            (`events.Emitter.note`: a compaction's requests get their telemetry spans).

    Raises:
        AgentError: the request failed, or the summary came back empty (kind "unknown").
    """
    signal, unfollow = child(cancel)
    try:
        return _run(
            history,
            system,
            tools,
            connection,
            previous,
            on_compact,
            signal,
            max_context_tokens,
            retry,
            on_retry,
            observe,
        )
    finally:
        unfollow()


def _run(
    history: Sequence[Mapping[str, Any]],
    system: str,
    tools: Any,
    connection: Mapping[str, Any],
    previous: str | None,
    on_compact: Callable[[dict[str, Any]], None] | None,
    cancel: Signal,
    max_context_tokens: float,
    retry: RetryPolicy | None,
    on_retry: Callable[[dict[str, Any]], None] | None,
    observe: Observe | None,
) -> dict[str, Any]:
    from .llm import complete

    protocol = str(connection.get("protocol") or "chat")
    model = connection.get("model", "")
    key = (protocol, connection.get("base_url", ""), model if isinstance(model, str) else id(model))
    ratio = _tokens.ratios.get(key)
    budget_chars = _budget_chars(max_context_tokens, ratio, system, previous)
    transcript, latest = select_transcript(history, budget_chars)
    previous = previous if previous is not None else latest
    request = Request(
        model=model if isinstance(model, str) else "",
        messages=[{"role": "user", "content": summary_prompt(transcript, system, previous)}],
        system=SUMMARY_SYSTEM,
        base_url=str(connection.get("base_url", "")),
        api_key=_key(connection.get("api_key")),
        provider=_without_tool_choice(connection.get("provider") or {}),
        stream=bool(connection.get("stream", True)),
        cache=connection.get("cache", True),
        capabilities={**DEFAULT_CAPABILITIES, **(connection.get("capabilities") or {})},
        max_tokens=connection.get("max_tokens"),
    )
    notify(on_compact, {"type": "compact-start"})

    def on_event(event: dict[str, Any]) -> None:
        notify(on_compact, {**event, "request": "compact"})

    def send() -> LLMResult:
        return complete(
            request,
            protocol,
            cancel=cancel,
            on_event=on_event,
            timeout=connection.get("request_timeout"),
            adapter=model,
            idle_timeout=connection.get("stream_idle_timeout"),
        )

    attempt = send if observe is None else _observed(send, observe, request, connection)

    if retry is None:
        result = attempt()
    else:
        result = with_retries(attempt, retry, cancel=cancel, on_retry=lambda p: notify(on_retry, p))
    chars = len(request.system) + _tokens.messages_chars(request.messages)
    if result.usage_reported:
        _tokens.ratios.learn(key, chars, result.usage.input_tokens)
    content = result.text.strip()
    usage = result.usage if result.usage_reported else Usage()
    if not content:
        raise AgentError("the compaction request returned an empty summary", kind="unknown")
    excerpted = _warn_if_input_excerpted(history, max_context_tokens, ratio)
    finish = {"type": "compact-finish", "content": content, "usage": usage, "input_excerpted": excerpted}
    notify(on_compact, finish)
    return {"content": content, "usage": usage, "input_excerpted": excerpted}


def _observed(
    send: Callable[[], LLMResult], observe: Observe, request: Request, connection: Mapping[str, Any]
) -> Callable[[], LLMResult]:
    """`send` announcing each attempt as the loop's requests do (one chat span per attempt)."""
    start = {
        "messages": request.messages,
        "system": request.system,
        "tools": [],
        "request": "compact",
        # The compaction may use another model than the run's (config["compact"]).
        "connection": {k: connection.get(k) for k in ("model", "protocol", "base_url")},
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


def select_transcript(history: Sequence[Mapping[str, Any]], budget_chars: int) -> tuple[str, str | None]:
    """The conversation the summary must cover, rendered, within `budget_chars`.

    The same turn selection as a request: the first ≤3 user turns (≤20 %), then the turns since
    the latest summary, newest first, until the budget is used; older ones are left to the
    previous summary. A single turn larger than its share is shown as head and tail (an excerpt
    for the summariser only — history is untouched). Returns (transcript, latest summary or None).
    """
    folded = turns(paired([m if isinstance(m, dict) else dict(m) for m in history]))
    found = latest_summary(folded)
    summary_at = -1 if found is None else found
    latest = None if found is None else str(folded[found][0].get("content") or "")
    head_cap = int(budget_chars * HEAD_SHARE)
    head_ids = [i for i, t in enumerate(folded) if t[0].get("role") == "user"][:HEAD_TURNS]
    head: dict[int, str] = {}
    used = 0
    for i in head_ids:
        text = _excerpt(render(folded[i]), max(head_cap - used, 0))
        if text:
            head[i] = text
            used += len(text)
    recent: dict[int, str] = {}
    remaining = budget_chars - used
    candidates = [
        i for i in range(len(folded) - 1, summary_at, -1) if i not in head and not is_compact_turn(folded[i])
    ]
    for i in candidates:
        text = render(folded[i])
        if len(text) > remaining:
            if recent:
                break
            text = _excerpt(text, remaining)
        if text:
            recent[i] = text
            remaining -= len(text)
    chosen = sorted({**head, **recent}.items())
    lines, previous_index = [], -1
    for index, text in chosen:
        skipped = sum(1 for j in range(previous_index + 1, index) if not is_compact_turn(folded[j]))
        if skipped:
            lines.append(f"[{skipped} earlier turns omitted: covered by the previous summary]")
        lines.append(text)
        previous_index = index
    return "\n".join(lines), latest


def _excerpt(text: str, limit: int) -> str:
    """Head and tail of a text longer than `limit` characters, with the cut marked."""
    if len(text) <= limit:
        return text
    if limit < 200:
        return ""
    marker = f"\n[... {len(text) - limit} characters omitted ...]\n"
    keep = max(limit - len(marker), 0)
    return text[: keep * 2 // 3] + marker + text[len(text) - keep // 3 :]


def _key(api_key: Any) -> Any:
    """A key function stays a function: `llm.complete` calls it before every attempt."""
    return api_key if callable(api_key) else str(api_key or "")


def _budget_chars(max_context_tokens: float, ratio: float, system: str, previous: str | None) -> int:
    """Characters the transcript may take: the main model's budget less what else the request holds."""
    if max_context_tokens == float("inf"):
        max_context_tokens = 128000
    total = int(max_context_tokens * 0.8 / max(ratio, 0.1))
    fixed = len(SUMMARY_SYSTEM) + len(SUMMARY_INSTRUCTION) + len(system) + len(previous or "") + 400
    return max(total - fixed, 2000)


def _without_tool_choice(provider: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in provider.items() if k != "tool_choice"}


def connection_of(config: Mapping[str, Any]) -> dict[str, Any]:
    """The connection `run` uses for an agent config: the main model, or `config["compact"]` overrides."""
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
        "stream_idle_timeout": config["stream_idle_timeout"],
    }
    connection.update({k: v for k, v in overrides.items() if v is not None})
    return connection
