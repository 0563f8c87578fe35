"""The history entries the library writes: stamped, and shaped the same wherever they are made.

append_to(history, entry)        # stamps `id` and `created_at`, then appends
tool_message(calls, results)     # one tool message with every result in call order
close_open_calls(history)        # interrupted results for calls a loaded history left open
"""

from __future__ import annotations

import time
from typing import Any

from ._utils.ids import random_hex
from .call_ids import open_calls
from .history import Message, tool_result_part
from .protocols.base import LLMResult, ToolCall, tool_call_part
from .tools.shape import interrupted_result
from .usage import Usage


def close_open_calls(history: list[Message], known: Any = None) -> list[Message]:
    """Answer calls a loaded history left without a result (a process died mid-tool) as interrupted.

    A call without its result makes the vendors reject the conversation on every later request;
    appending the missing results keeps history append-only and valid. Returns what was appended.
    `known` (a `fold.Reuse`) tells the open calls from the entries its fold has not seen, when it can.
    """
    pending = known.open_calls(history) if known is not None else None
    if pending is None:
        pending = open_calls(history)
    if not pending:
        return []
    message = tool_message(pending, [interrupted_result() for _ in pending])
    append_to(history, message)
    return [message]


def call_part(call: ToolCall) -> dict[str, Any]:
    return tool_call_part(call.id, call.name, call.arguments)


def tool_message(calls: list[dict[str, Any]], results: list[dict[str, Any]]) -> Message:
    message: Message = {
        "role": "tool",
        "content": [
            tool_result_part(str(c["tool_call_id"]), str(c["tool_name"]), r["output"])
            for c, r in zip(calls, results, strict=True)
        ],
    }
    delegated = [Usage.of(**r["sub_agent_usage"]) for r in results if r.get("sub_agent_usage")]
    if delegated:
        message["sub_agent_usage"] = sum(delegated, Usage()).to_dict()
    return message


def append_to(history: list[Message], message: Message) -> None:
    """Append an entry the library created, stamped with `id` and `created_at`."""
    message.setdefault("id", random_hex())
    message.setdefault("created_at", time.time())
    history.append(message)


def assistant_message(result: LLMResult) -> Message:
    message = dict(result.message)
    message["usage"] = result.usage.to_dict()
    return message
