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
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._utils import tokens as _tokens
from .call_ids import used_ids
from .history import Message, paired, tool_calls_of, tool_results_of, turns

CONTINUE_PROMPT = "Continue the task from where the summary in the system prompt leaves off."
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
        reuse: what earlier builds of this history computed (one per run; see `Reuse`).
    """
    ratio = _tokens.DEFAULT_RATIO if ratio is None else ratio
    tool_list = _tool_list(tools)
    if reuse is not None:
        found = reuse.messages(history, protocol, reasoning)
        if found is not None:
            messages, chars = found
            chars += len(system) + _tokens.tools_chars(tool_list)
            return Context(messages, system, _tokens.estimate(chars, ratio), chars, None)
    # Duplicate call ids (a loaded history) are renamed first, so turns pair each result with its call.
    folded = turns(paired([m if isinstance(m, dict) else dict(m) for m in history]))
    summary_index = latest_summary(folded)
    summary: str | None = None
    if summary_index is None:
        chosen = folded
    else:
        summary = str(folded[summary_index][0].get("content") or "")
        chosen = _select(folded, summary_index, max_context_tokens, ratio)
    messages = [
        m for turn in chosen for m in (_reduce(msg, protocol, reasoning) for msg in turn) if m is not None
    ]
    if summary is not None and (not messages or messages[0]["role"] != "user"):
        # Anthropic and Gemini need the conversation to open with the user: when the selection
        # starts mid-task, a short request-only user line (never in history) opens it.
        messages.insert(0, {"role": "user", "content": CONTINUE_PROMPT})
    full_system = fold_summary(system, summary)
    chars = len(full_system) + _tokens.messages_chars(messages) + _tokens.tools_chars(tool_list)
    return Context(messages, full_system, _tokens.estimate(chars, ratio), chars, summary)


def fold_summary(system: str, summary: str | None) -> str:
    if not summary:
        return system
    block = f"{SUMMARY_INTRO}\n\n{summary}"
    return f"{system}\n\n{block}" if system else block


def _select(
    folded: list[list[Message]], summary_index: int, budget: float, ratio: float
) -> list[list[Message]]:
    before = folded[:summary_index]
    after = [t for t in folded[summary_index + 1 :] if not is_compact_turn(t)]
    head = _head(before, budget * HEAD_SHARE, ratio)
    tail = _tail(before, budget * TAIL_SHARE, ratio, exclude=head)
    keep = head | tail
    return [turn for i, turn in enumerate(before) if i in keep] + after


def _head(before: list[list[Message]], budget: float, ratio: float) -> set[int]:
    """The first ≤3 user turns that fit in the head share: the user's original goal."""
    chosen: set[int] = set()
    used = 0.0
    user_turns = [i for i, t in enumerate(before) if t[0].get("role") == "user"][:HEAD_TURNS]
    for i in user_turns:
        cost = _turn_tokens(before[i], ratio)
        if used + cost <= budget:
            chosen.add(i)
            used += cost
    return chosen


def _tail(before: list[list[Message]], budget: float, ratio: float, exclude: set[int]) -> set[int]:
    """The ≤3 turns just before the summary that fit in the tail share, and the latest user turn."""
    chosen: set[int] = set()
    used = 0.0
    candidates = [i for i in range(len(before) - 1, -1, -1) if not is_compact_turn(before[i])]
    for i in candidates[:TAIL_TURNS]:
        if i in exclude:
            continue
        cost = _turn_tokens(before[i], ratio)
        if used + cost > budget:
            break
        chosen.add(i)
        used += cost
    # The user's latest instruction before the summary stays, even past the 3-turn count —
    # but never past the budget: a 200k-character paste must not pin every later request.
    latest_user = next((i for i in candidates if before[i][0].get("role") == "user"), None)
    if (
        latest_user is not None
        and latest_user not in exclude
        and latest_user not in chosen
        and used + _turn_tokens(before[latest_user], ratio) <= budget
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
    folded = turns(paired([m if isinstance(m, dict) else dict(m) for m in history]))
    summary_at = latest_summary(folded)
    start = -1 if summary_at is None else summary_at
    latest_user = next(
        (i for i in range(len(folded) - 1, start, -1) if folded[i][0].get("role") == "user"), None
    )
    if latest_user is None:
        return None
    # The selection the next request makes once the summary is appended after everything.
    head = _head(folded, max_context_tokens * HEAD_SHARE, ratio)
    tail = _tail(folded, max_context_tokens * TAIL_SHARE, ratio, exclude=head)
    if latest_user in head or latest_user in tail:
        return None
    content = folded[latest_user][0].get("content")
    return len(content) if isinstance(content, str) else _tokens.messages_chars(folded[latest_user])


def _turn_tokens(turn: list[Message], ratio: float) -> float:
    return _tokens.messages_chars(turn) * ratio


def latest_summary(folded: list[list[Message]]) -> int | None:
    for i in range(len(folded) - 1, -1, -1):
        if is_compact_turn(folded[i]):
            return i
    return None


def is_compact_turn(turn: list[Message]) -> bool:
    return bool(turn) and turn[0].get("role") == "compact"


def _reduce(message: Mapping[str, Any], protocol: str | None, reasoning: bool) -> Message | None:
    """Keep role and content only; drop reasoning the request must not carry and empty replies."""
    role = message.get("role")
    content = message.get("content")
    if role == "compact":
        return None
    if role == "assistant" and isinstance(content, list):
        content = [p for p in content if _keep_part(p, protocol, reasoning)]
        if not content:
            return None
    elif role == "assistant" and isinstance(content, str) and not content:
        return None
    return {"role": role, "content": content}


def _keep_part(part: Any, protocol: str | None, reasoning: bool) -> bool:
    if not isinstance(part, Mapping):
        return False
    kind = part.get("type")
    if kind == "text":
        return bool(part.get("text"))
    if kind != "reasoning":
        return True
    meta = part.get("provider_metadata")
    if protocol is not None and isinstance(meta, Mapping) and meta.get("protocol") == protocol:
        return True
    return reasoning and bool(part.get("text"))


def _tool_list(tools: Any) -> list[dict[str, Any]]:
    if not tools:
        return []
    schema = getattr(tools, "schema", tools)
    if isinstance(schema, Mapping):
        return [dict(v) for v in schema.values()]
    return [dict(t) for t in schema]


def over_threshold(ctx: Context, max_context_tokens: float, threshold: float) -> bool:
    return not math.isinf(max_context_tokens) and ctx.tokens >= max_context_tokens * threshold


# ---------------------------------------------------------------- one run's builds, extended


class Reuse:
    """The selected messages of a history prefix, extended by what a later build finds after it.

        reuse = Reuse()                      # one per run
        build(history, ..., reuse=reuse)     # the same as without `reuse`, entry for entry

    During a run history grows at its end, and without a summary a request carries every turn:
    the messages of `history[:k]` followed by those of `history[k:]`, as long as the cut at k
    splits no turn (no result after it for a call before it, no assistant reply continuing one
    before it) and no call id repeats. So each build folds only the entries after the prefix.

    Trust rule: within one run the loop is history's only writer (API.md: `agent.history` is
    read and written freely *between* sends), so the prefix is reused while history still opens
    with the very entry objects it was built from — a replaced, shortened or reordered list fails
    that check and the build starts over from the whole history. An entry edited in place is seen
    by the next run, whose first build folds everything (`Reuse` lives as long as one run). The
    check compares identities only: it costs next to nothing however long history grows. Anything
    else — a summary in history, a repeated call id, an entry that is not a dict — also takes the
    whole-history path, exactly as without `reuse`.
    """

    def __init__(self) -> None:
        self._prefix: _Prefix | None = None
        self._checked: tuple[Sequence[Mapping[str, Any]], int] | None = None  # what `_prefix` holds for

    def call_ids(self, history: Sequence[Mapping[str, Any]]) -> set[str] | None:
        """The tool-call ids in `history` (`call_ids.used_ids`), from the latest build's check.

        None unless that build was of this very list at this length and reused a prefix.
        """
        prefix, checked = self._prefix, self._checked
        if prefix is None or checked is None or checked[0] is not history or checked[1] != len(history):
            return None
        return prefix.calls | used_ids(history[len(prefix.entries) :])

    def messages(
        self, history: Sequence[Mapping[str, Any]], protocol: str | None, reasoning: bool
    ) -> tuple[list[Message], int] | None:
        """(messages, their characters) for `history`, or None when it must be built whole."""
        prefix = self._prefix
        if prefix is None or prefix.settings != (protocol, reasoning) or not prefix.holds(history):
            prefix = _Prefix((protocol, reasoning))  # starts over: the whole history is its tail
        extended = prefix.extended(history[len(prefix.entries) :])
        if extended is None:
            self._prefix = self._checked = None
            return None
        self._checked = (history, len(history))
        if extended.open_calls:
            # A call still waiting for its result: its turn is folded again next time.
            self._prefix = prefix
            return extended.messages, extended.chars
        self._prefix = extended
        return list(extended.messages), extended.chars  # a copy: callers may append to theirs


class _Prefix:
    """The build of `history[:len(entries)]`: all of its turns, reduced, and what a cut needs."""

    def __init__(self, settings: tuple[str | None, bool]) -> None:
        self.settings = settings
        self.entries: list[Any] = []  # the entry objects it was built from
        self.messages: list[Message] = []
        self.chars = 0
        self.calls: set[str] = set()  # call ids in it
        self.unmatched: set[str] = set()  # result ids in it with no call in it
        self.last_role: Any = None
        self.open_calls = False  # a call in it has no result in it

    def holds(self, history: Sequence[Mapping[str, Any]]) -> bool:
        if len(history) < len(self.entries):
            return False
        return all(map(operator.is_, self.entries, history))

    def extended(self, tail: Sequence[Any]) -> _Prefix | None:
        """This prefix followed by `tail`, or None when the cut before `tail` splits a turn."""
        if any(type(m) is not dict or m.get("role") == "compact" for m in tail):
            return None
        calls = [str(p.get("tool_call_id")) for m in tail for p in tool_calls_of(m)]
        results = {str(p.get("tool_call_id")) for m in tail for p in tool_results_of(m)}
        joins = bool(tail) and self.last_role == "assistant" and tail[0].get("role") == "assistant"
        unique = len(set(calls)) == len(calls) and self.calls.isdisjoint(calls)
        if joins or not unique or not self.calls.isdisjoint(results) or not self.unmatched.isdisjoint(calls):
            return None
        protocol, reasoning = self.settings
        added = [
            m
            for turn in turns(list(tail))
            for m in (_reduce(msg, protocol, reasoning) for msg in turn)
            if m is not None
        ]
        grown = _Prefix(self.settings)
        grown.entries = self.entries + list(tail)
        grown.messages = self.messages + added
        grown.chars = self.chars + _tokens.messages_chars(added)
        grown.calls = self.calls | set(calls)
        grown.unmatched = self.unmatched | (results - grown.calls)
        grown.last_role = tail[-1].get("role") if tail else self.last_role
        grown.open_calls = not set(calls) <= results
        return grown
