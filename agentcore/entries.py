"""The history entries the library writes: stamped, and shaped the same wherever they are made.

append_to(history, entry)        # stamps `id` and `created_at`, then appends
write_input(history, entries, session)   # a run's first entries: all committed, or none written
tool_message(calls, results)     # one tool message with every result in call order
close_open_calls(history)        # interrupted results for calls a loaded history left open
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ._utils.ids import random_hex
from .call_ids import open_calls
from .history import Message, tool_result_part
from .protocols.base import LLMResult, ToolCall, tool_call_part
from .store.journal import NO_DECISION, CallRecord, Journal
from .tools.shape import denied_result, interrupted_result
from .usage import Usage

if TYPE_CHECKING:
    from .store import Session


def close_open_calls(history: list[Message], journal: Journal | None = None) -> list[Message]:
    """Answer calls a loaded history left without a result (a process died mid-tool) as interrupted.

    A call without its result makes the vendors reject the conversation on every later request;
    appending the missing results keeps history append-only and valid. With a `journal`, a call
    waiting for a decision is denied ("no decision was made before the conversation moved on"),
    a denied one keeps its reason, and the journal closes them first — a later decision finds
    nothing to decide. Returns what was appended.
    """
    pending = open_calls(history)
    if not pending:
        return []
    results = [interrupted_result() for _ in pending]
    if journal is not None:
        ids = [str(call["tool_call_id"]) for call in pending]
        records = journal.records(ids)
        results = [_closing_result(records.get(i)) for i in ids]
        journal.close(ids)
    message = tool_message(pending, results)
    append_to(history, message)
    return [message]


def _closing_result(record: CallRecord | None) -> dict[str, Any]:
    if record is not None and record.state in ("pending", "closed"):
        return denied_result(NO_DECISION)
    if record is not None and record.state == "denied":
        return denied_result(record.reason)
    return interrupted_result()


def write_input(
    history: list[Message],
    entries: list[Message],
    session: Session | None,
    journal: Journal | None = None,
    *,
    resume: bool = False,
) -> list[Message]:
    """Close open calls, append `entries`; with a session, commit all of it or write nothing.

    A resume continues the open calls instead (loop.py). The caller has brought `history` up to
    date with the session first (`Session.sync`, which also checks it). Returns what was
    appended (the closing results first, when calls were left open).
    """
    start = len(history)
    appended = [] if resume else close_open_calls(history, journal)
    for entry in entries:
        append_to(history, entry)
        appended.append(entry)
    if session is not None:
        try:
            session.commit(history)
        except BaseException:
            del history[start:]
            raise
    return appended


def call_part(call: ToolCall) -> dict[str, Any]:
    return tool_call_part(call.id, call.name, call.arguments)


def tool_message(calls: list[dict[str, Any]], results: list[dict[str, Any]]) -> Message:
    message: Message = {
        "role": "tool",
        "content": [_result_part(c, r) for c, r in zip(calls, results, strict=True)],
    }
    delegated = [Usage.of(**r["sub_agent_usage"]) for r in results if r.get("sub_agent_usage")]
    if delegated:
        message["sub_agent_usage"] = sum(delegated, Usage()).to_dict()
    return message


def _result_part(call: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    part = tool_result_part(str(call["tool_call_id"]), str(call["tool_name"]), result["output"])
    if result.get("interrupted"):
        # Stored results say what happened: a UI can show an interrupted call after a reload.
        part["interrupted"] = True
    return part


def append_to(history: list[Message], message: Message) -> None:
    """Append an entry the library created, stamped with `id` and `created_at`."""
    message.setdefault("id", random_hex())
    message.setdefault("created_at", time.time())
    history.append(message)


def assistant_message(result: LLMResult) -> Message:
    message = dict(result.message)
    message["usage"] = result.usage.to_dict()
    return message
