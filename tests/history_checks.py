"""What a valid history looks like, checked from the outside (no agentcore helpers).

    assert history_problems(agent.history) == []
    assert history_is_valid(agent.history)

Shared by the budget and fallback tests: whatever ended a run, every tool call has exactly one
result after it, every entry has a known role, and each entry the library wrote has an id.
"""

from __future__ import annotations

from typing import Any


def history_problems(history: list[dict[str, Any]]) -> list[str]:
    """What is wrong with `history` (empty list: nothing)."""
    problems: list[str] = []
    open_calls: dict[str, int] = {}
    answered: set[str] = set()
    for index, message in enumerate(history):
        role = message.get("role")
        if role not in ("user", "assistant", "tool", "compact"):
            problems.append(f"entry {index} has role {role!r}")
        parts = message.get("content") if isinstance(message.get("content"), list) else []
        for part in parts:
            if part.get("type") == "tool-call":
                call_id = str(part.get("tool_call_id"))
                if call_id in open_calls or call_id in answered:
                    problems.append(f"entry {index}: call id {call_id} used twice")
                open_calls[call_id] = index
            elif part.get("type") == "tool-result":
                call_id = str(part.get("tool_call_id"))
                if call_id not in open_calls:
                    problems.append(f"entry {index}: result {call_id} answers no open call")
                open_calls.pop(call_id, None)
                answered.add(call_id)
    problems += [f"call {call_id} (entry {index}) has no result" for call_id, index in open_calls.items()]
    return problems


def history_is_valid(history: list[dict[str, Any]]) -> bool:
    problems = history_problems(history)
    assert not problems, problems
    return True
