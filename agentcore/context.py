"""Build the messages that a single model request carries.

    ctx = build(history, system="Be brief.", tools=tool_schemas, max_context_tokens=100_000)
    ctx.messages, ctx.system, ctx.tokens

Turns are kept or dropped whole: a tool call never travels without its result. With a
summary (a compact message) in history: the first ≤3 user turns (≤20 % of the budget), the
latest summary folded into `system`, the ≤3 turns before it (≤30 %; the latest user turn
before it always) and every turn after it. History itself is never changed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from ._utils import tokens as _tokens
from .fold import CONTINUE_PROMPT, Fold, Reuse, Shape, Turn
from .history import Message

__all__ = ["CONTINUE_PROMPT", "Context", "Reuse", "build", "excerpted_input", "fold_summary"]

HEAD_TURNS, HEAD_SHARE = 3, 0.2
TAIL_TURNS, TAIL_SHARE = 3, 0.3
SUMMARY_INTRO = (
    "Summary of your own earlier work in this conversation (written by you; the facts in it were "
    "confirmed by tools). Continue from where it leaves off; do not start the task over."
)


@dataclass
class Context:
    messages: list[Message]
    system: str
    tokens: int
    chars: int = 0
    summary: str | None = None
    shape: Shape | None = None  # which of the fold's messages `messages` are (fold.Shape)


def build(
    history: Sequence[Mapping[str, Any]],
    system: str = "",
    tools: Any = None,
    max_context_tokens: float = 128000,
    ratio: float | None = None,
    *,
    protocol: str | None = None,
    reasoning: bool = False,
    reuse: Reuse | None = None,
) -> Context:
    """Select turns from `history` for one request and estimate its tokens.

    Args:
        history: history-format messages.
        system: the system prompt.
        tools: tool schemas (a ToolSet's `schema` mapping or a list of dicts), counted in the estimate.
        max_context_tokens: the budget the 20 % / 30 % shares are taken from.
        ratio: tokens per character (default 0.6).
        protocol: keep reasoning parts whose provider state belongs to this protocol.
        reasoning: keep readable reasoning text too (capabilities.reasoning).
        reuse: the fold earlier builds of this history made, extended (see `fold.Reuse`).
    """
    ratio = _tokens.DEFAULT_RATIO if ratio is None else ratio
    fold = reuse.fold(history, protocol, reasoning) if reuse is not None else None
    if fold is None:
        fold = Fold.whole(history, protocol, reasoning)
    messages, chars, summary, shape = _selected(fold, max_context_tokens, ratio)
    full_system = fold_summary(system, summary)
    chars += len(full_system) + _tokens.tools_chars(_tool_list(tools))
    return Context(messages, full_system, _tokens.estimate(chars, ratio), chars, summary, shape)


def fold_summary(system: str, summary: str | None) -> str:
    if not summary:
        return system
    block = f"{SUMMARY_INTRO}\n\n{summary}"
    return f"{system}\n\n{block}" if system else block


def _selected(fold: Fold, budget: float, ratio: float) -> tuple[list[Message], int, str | None, Shape]:
    """(messages, their characters, the latest summary, their shape) of one request.

    Without a summary, every turn. With one: the first ≤3 user turns (≤20 % of the budget) and the
    ≤3 turns before the summary (≤30 %) from the turns before it, then every turn after it.
    """
    s = fold.summary
    if s is None:  # a copy: callers may append to theirs
        return list(fold.messages), fold.chars, None, Shape(fold, (), 0, len(fold.messages))
    summary = str(fold.turns[s].messages[0].get("content") or "")
    head = _head(fold.turns, s, budget * HEAD_SHARE, ratio)
    keep = sorted(head | _tail(fold.turns, s, budget * TAIL_SHARE, ratio, exclude=head))
    messages = [m for i in keep for m in fold.turns[i].reduced]
    chars = sum(fold.turn_chars(i) for i in keep)
    # After the latest summary there is no other: every later turn, as the fold holds them.
    start = fold.starts[s + 1] if s + 1 < len(fold.turns) else len(fold.messages)
    messages += fold.messages[start:]
    chars += fold.chars - (fold.char_starts[s + 1] if s + 1 < len(fold.turns) else fold.chars)
    opens = not messages or messages[0]["role"] != "user"
    if opens:
        # Anthropic and Gemini need the conversation to open with the user: when the selection
        # starts mid-task, a short request-only user line (never in history) opens it.
        opener = fold.continue_message()
        messages.insert(0, opener)
        chars += _tokens.message_chars(opener)
    return messages, chars, summary, Shape(fold, (s, opens, *keep), start, len(fold.messages))


def _head(turns: Sequence[Turn], count: int, budget: float, ratio: float) -> set[int]:
    """The first ≤3 user turns of `turns[:count]` that fit in the head share: the user's original goal."""
    chosen: set[int] = set()
    used = 0.0
    user_turns = islice((i for i in range(count) if turns[i].role == "user"), HEAD_TURNS)
    for i in user_turns:
        cost = turns[i].tokens(ratio)
        if used + cost <= budget:
            chosen.add(i)
            used += cost
    return chosen


def _tail(turns: Sequence[Turn], count: int, budget: float, ratio: float, exclude: set[int]) -> set[int]:
    """The ≤3 turns ending `turns[:count]` that fit in the tail share, and the latest user turn."""
    chosen: set[int] = set()
    used = 0.0
    candidates = (i for i in range(count - 1, -1, -1) if not turns[i].compact)
    for i in islice(candidates, TAIL_TURNS):
        if i in exclude:
            continue
        cost = turns[i].tokens(ratio)
        if used + cost > budget:
            break
        chosen.add(i)
        used += cost
    # The user's latest instruction before the summary stays, even past the 3-turn count —
    # but never past the budget: a 200k-character paste must not pin every later request.
    latest_user = next((i for i in range(count - 1, -1, -1) if turns[i].role == "user"), None)
    if (
        latest_user is not None
        and latest_user not in exclude
        and latest_user not in chosen
        and used + turns[latest_user].tokens(ratio) <= budget
    ):
        chosen.add(latest_user)
    return chosen


def excerpted_input(
    history: Sequence[Mapping[str, Any]], max_context_tokens: float = 128000, ratio: float | None = None
) -> int | None:
    """Characters of the latest user turn that a summary written now must cover instead, else None.

    A user turn newer than the latest summary is kept in later requests only when it fits its
    share of the budget (see `_tail`); one that does not (a pasted 5 MB log) reaches the model only
    as the summary's excerpt, which the caller must make visible.
    """
    ratio = _tokens.DEFAULT_RATIO if ratio is None else ratio
    fold = Fold.whole(history, None, False)
    folded = fold.turns
    start = -1 if fold.summary is None else fold.summary
    latest_user = next((i for i in range(len(folded) - 1, start, -1) if folded[i].role == "user"), None)
    if latest_user is None:
        return None
    # The selection the next request makes once the summary is appended after everything.
    head = _head(folded, len(folded), max_context_tokens * HEAD_SHARE, ratio)
    tail = _tail(folded, len(folded), max_context_tokens * TAIL_SHARE, ratio, exclude=head)
    if latest_user in head or latest_user in tail:
        return None
    messages = folded[latest_user].messages
    content = messages[0].get("content")
    return len(content) if isinstance(content, str) else _tokens.messages_chars(messages)


def latest_summary(folded: list[list[Message]]) -> int | None:
    for i in range(len(folded) - 1, -1, -1):
        if is_compact_turn(folded[i]):
            return i
    return None


def is_compact_turn(turn: list[Message]) -> bool:
    return bool(turn) and turn[0].get("role") == "compact"


def _tool_list(tools: Any) -> list[dict[str, Any]]:
    if not tools:
        return []
    schema = getattr(tools, "schema", tools)
    if isinstance(schema, Mapping):
        return [dict(v) for v in schema.values()]
    return [dict(t) for t in schema]


def over_threshold(ctx: Context, max_context_tokens: float, threshold: float) -> bool:
    return not math.isinf(max_context_tokens) and ctx.tokens >= max_context_tokens * threshold
