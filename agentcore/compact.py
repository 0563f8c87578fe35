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

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .context import build
from .errors import AgentError
from .history import render
from .protocols.base import DEFAULT_CAPABILITIES, LLMResult, Request
from .usage import Usage
from ._utils import tokens as _tokens
from ._utils.cancel import Signal, child
from ._utils.notify import notify
from ._utils.retry import RetryPolicy
from ._utils.retry import call as with_retries

SUMMARY_SYSTEM = (
    "You write the working memory of an AI agent. The agent will continue the task with only your "
    "summary and the latest messages, so the summary must let it carry on without redoing work."
)
SUMMARY_INSTRUCTION = """Summarise the conversation above for the agent itself. Keep, in this order:
1. The user's original goal and every explicit requirement or constraint, in the user's words where it matters.
2. Decisions made, and why.
3. Facts confirmed by tools (file paths, values, results, errors) — exact, not paraphrased.
4. What has been done so far.
5. What is still to do, with the next concrete step.
Write plain text, concise but complete. Do not invent anything. Do not address the user."""
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
) -> dict[str, Any]:
    """Write a summary of `history`. Returns `{"content": str, "usage": Usage}`.

    Args:
        connection: `base_url`, `api_key`, `model`, and optionally `protocol`, `provider`,
            `stream`, `request_timeout`, `capabilities`, `cache`.
        previous: the previous summary; defaults to the latest compact entry of `history`.

    Raises:
        AgentError: the request failed, or the summary came back empty (kind "unknown").
    """
    signal, unfollow = child(cancel)
    try:
        return _run(history, system, tools, connection, previous, on_compact, signal, max_context_tokens, retry, on_retry)
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
) -> dict[str, Any]:
    from .llm import complete

    protocol = str(connection.get("protocol") or "chat")
    model = connection.get("model", "")
    key = (protocol, connection.get("base_url", ""), model if isinstance(model, str) else id(model))
    ratio = _tokens.ratios.get(key)
    ctx = build(history, system="", tools=tools, max_context_tokens=max_context_tokens, ratio=ratio)
    previous = previous if previous is not None else ctx.summary
    request = Request(
        model=model if isinstance(model, str) else "",
        messages=[{"role": "user", "content": summary_prompt(ctx.messages, system, previous)}],
        system=SUMMARY_SYSTEM,
        base_url=str(connection.get("base_url", "")),
        api_key=str(connection.get("api_key", "")),
        provider=_without_tool_choice(connection.get("provider") or {}),
        stream=bool(connection.get("stream", True)),
        cache=connection.get("cache", True),
        capabilities={**DEFAULT_CAPABILITIES, **(connection.get("capabilities") or {})},
        max_tokens=connection.get("max_tokens"),
    )
    notify(on_compact, {"type": "compact-start"})

    def on_event(event: dict[str, Any]) -> None:
        notify(on_compact, {**event, "request": "compact"})

    def attempt() -> LLMResult:
        return complete(
            request,
            protocol,
            cancel=cancel,
            on_event=on_event,
            timeout=connection.get("request_timeout"),
            adapter=model,
        )

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
    notify(on_compact, {"type": "compact-finish", "content": content, "usage": usage})
    return {"content": content, "usage": usage}


def summary_prompt(messages: Sequence[Mapping[str, Any]], system: str, previous: str | None) -> str:
    parts = []
    if system:
        parts.append(f"The agent's instructions (system prompt):\n{system}")
    if previous:
        parts.append(f"{PREVIOUS_INTRO}\n{previous}")
    transcript = render(messages) or "(no messages)"
    parts.append(f"The conversation:\n{transcript}")
    parts.append(SUMMARY_INSTRUCTION)
    return "\n\n".join(parts)


def _without_tool_choice(provider: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in provider.items() if k != "tool_choice"}
