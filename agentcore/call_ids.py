"""Tool-call ids: the calls and results of a history paired by id, and ids unique whatever the server sends.

    tool_calls_of(message), tool_results_of(message)          # an entry's call / result parts
    result = unique_reply(result, history, protocol="chat")   # a reply about to become history
    messages = paired(history)                                 # a loaded history, as it must travel
    open_calls(history)                                        # calls still waiting for a result

Many OpenAI-compatible servers number every reply's calls from `call_0`, and Gemini sends no
ids at all, so the same id comes back in later rounds (or twice in one reply). Results are
paired with calls by id, so a repeated id pairs both results with one call and leaves the
other unanswered, which vendors reject on every later request. A reply's calls therefore get
a fresh id when theirs is missing or taken; the server's id stays in the part's
`provider_metadata["wire_id"]`. A history that already holds duplicates (saved by an older
version, or written by hand) is renamed on the way out only: history itself is never edited.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ._utils.ids import random_hex

if TYPE_CHECKING:
    from .protocols.base import LLMResult, ToolCall

Message = dict[str, Any]


def tool_calls_of(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tool-call parts of an assistant message."""
    content = message.get("content")
    if message.get("role") != "assistant" or not isinstance(content, list):
        return []
    return [p for p in content if isinstance(p, dict) and p.get("type") == "tool-call"]


def tool_results_of(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tool-result parts of a tool message."""
    content = message.get("content")
    if message.get("role") != "tool" or not isinstance(content, list):
        return []
    return [p for p in content if isinstance(p, dict) and p.get("type") == "tool-result"]


def fresh_id() -> str:
    """A new tool-call id (letters, digits and `_` only: Anthropic's pattern, OpenAI's 40-character limit)."""
    return f"call_{random_hex()[:24]}"


def used_ids(history: Sequence[Mapping[str, Any]]) -> set[str]:
    return {str(p.get("tool_call_id")) for m in history for p in tool_calls_of(m)}


# ---------------------------------------------------------------- a reply becoming history


def unique_reply(
    result: LLMResult, history: Sequence[Mapping[str, Any]], *, protocol: str, taken: set[str] | None = None
) -> LLMResult:
    """`result` with every call id unique in `history` and in the reply itself.

    The tool-call parts of `result.message` and `result.tool_calls` are renamed together (the
    n-th call of an id with the n-th part of that id), so the loop answers each call under the
    id that is written and sent back. `taken`, when given, is `used_ids(history)` already known
    (the loop's context build has it); it is added to.
    """
    content = result.message.get("content")
    if not isinstance(content, list) or not (result.tool_calls or any(map(_is_call, content))):
        return result
    if taken is None:
        taken = used_ids(history)
    # The id the server sent ("" when it sent none) -> the ids its parts got, in reply order: a
    # missing or empty id is renamed like a taken one, and its calls follow their parts.
    renamed: dict[str, list[str]] = {}
    parts = []
    for part in content:
        if _is_call(part):
            wire = str(part.get("tool_call_id") or "")
            part = unique_part(part, taken, protocol=protocol)
            renamed.setdefault(wire, []).append(str(part["tool_call_id"]))
        parts.append(part)
    calls = [_renamed_call(call, renamed, taken) for call in result.tool_calls]
    return replace(result, message={**result.message, "content": parts}, tool_calls=calls)


def unique_part(part: Mapping[str, Any], taken: set[str], *, protocol: str) -> dict[str, Any]:
    """A copy of tool-call `part` whose id is not in `taken` (then added to it).

    A replaced id is kept as `provider_metadata["wire_id"]`, merged into what the adapter stored
    there (Gemini's `thoughtSignature`, Responses' item id), under the adapter's protocol tag.
    """
    wire = str(part.get("tool_call_id") or "")
    copy = dict(part)
    if wire and wire not in taken:
        taken.add(wire)
        return copy
    new = fresh_id()
    while new in taken:
        new = fresh_id()
    taken.add(new)
    copy["tool_call_id"] = new
    if wire:
        meta = part.get("provider_metadata")
        meta = dict(meta) if isinstance(meta, dict) else {"protocol": protocol}
        meta["wire_id"] = wire
        copy["provider_metadata"] = meta
    return copy


def _is_call(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "tool-call"


def _renamed_call(call: ToolCall, renamed: dict[str, list[str]], taken: set[str]) -> ToolCall:
    ids = renamed.get(call.id or "")
    if ids:
        return replace(call, id=ids.pop(0))
    # A call without a part (a custom adapter's reply): still never a taken id.
    if call.id and call.id not in taken:
        taken.add(call.id)
        return call
    new = fresh_id()
    taken.add(new)
    return replace(call, id=new)


# ---------------------------------------------------------------- a loaded history travelling


def paired(history: Sequence[Message]) -> list[Message]:
    """`history` with duplicate call ids renamed so that each call travels with its own result.

    The second and later calls of an id get `<id>_2`, `<id>_3`, … (deterministic, so a prompt
    cache still matches); each result takes the id of the nearest preceding unanswered call of
    its id (the first of them when one reply holds several). Changed messages are copies.
    """
    if not _has_duplicates(history):
        return list(history)  # what the walk gives then, at a fraction of its cost (every request pairs)
    return _walk(history)[0]


def _has_duplicates(history: Sequence[Message]) -> bool:
    ids = [str(p.get("tool_call_id")) for m in history for p in tool_calls_of(m)]
    return len(ids) != len(set(ids))


def open_calls(history: Sequence[Message]) -> list[dict[str, Any]]:
    """Tool-call parts that have no result yet, in history order (duplicate ids counted apart)."""
    return _walk(history)[1]


def _walk(history: Sequence[Message]) -> tuple[list[Message], list[dict[str, Any]]]:
    ids = [str(p.get("tool_call_id")) for m in history for p in tool_calls_of(m)]
    duplicates = len(ids) != len(set(ids))
    taken = set(ids)
    seen: set[str] = set()
    # original id -> unanswered calls of it: (message index, id on the wire, part as in history)
    waiting: dict[str, list[tuple[int, str, dict[str, Any]]]] = {}
    early: dict[str, int] = {}  # results that came before any call of their id (a store's order)
    out: list[Message] = []
    for index, message in enumerate(history):
        content = message.get("content")
        if not isinstance(content, list) or message.get("role") not in ("assistant", "tool"):
            out.append(message)
            continue
        parts: list[Any] = []
        for part in content:
            if (
                isinstance(part, dict)
                and message.get("role") == "assistant"
                and part.get("type") == "tool-call"
            ):
                part = _call_on_wire(part, index, seen, taken, waiting, early)
            elif (
                isinstance(part, dict) and message.get("role") == "tool" and part.get("type") == "tool-result"
            ):
                part = _result_on_wire(part, waiting, early)
            parts.append(part)
        changed = duplicates and any(a is not b for a, b in zip(parts, content, strict=True))
        out.append({**message, "content": parts} if changed else message)
    unanswered = [original for calls in waiting.values() for _, _, original in calls]
    order = {id(p): n for n, p in enumerate(p for m in history for p in tool_calls_of(m))}
    return out, sorted(unanswered, key=lambda p: order[id(p)])


def _call_on_wire(
    part: dict[str, Any],
    index: int,
    seen: set[str],
    taken: set[str],
    waiting: dict[str, list[tuple[int, str, dict[str, Any]]]],
    early: dict[str, int],
) -> dict[str, Any]:
    original = str(part.get("tool_call_id"))
    wire = original
    if original in seen:
        n = 2
        while f"{original}_{n}" in taken:
            n += 1
        wire = f"{original}_{n}"
        taken.add(wire)
    seen.add(original)
    if early.get(original):
        early[original] -= 1  # answered by a result stored before it
    else:
        waiting.setdefault(original, []).append((index, wire, part))
    return part if wire == original else {**part, "tool_call_id": wire}


def _result_on_wire(
    part: dict[str, Any],
    waiting: dict[str, list[tuple[int, str, dict[str, Any]]]],
    early: dict[str, int],
) -> dict[str, Any]:
    original = str(part.get("tool_call_id"))
    calls = waiting.get(original)
    if not calls:
        early[original] = early.get(original, 0) + 1  # a result before its call, or an orphan
        return part
    nearest = max(index for index, _, _ in calls)
    chosen = next(c for c in calls if c[0] == nearest)
    calls.remove(chosen)
    wire = chosen[1]
    return part if wire == original else {**part, "tool_call_id": wire}
