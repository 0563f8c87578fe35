"""What one `send` / `resume` returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .usage import Usage


@dataclass
class SendResult:
    """What one `send` / `resume` produced.

    Attributes:
        text: text of the last model reply.
        steps: completed model replies of this send (one per round).
        usage: tokens of every request of this send, compaction included.
        reason: "finished", "no-tool", "tool-stop", "step-limit", "ended" (a finish_turn hook)
            or "approval" (calls wait for a decision).
        output: the validated structured output, or None.
        messages: every history entry this call appended, in order.
        pending: the calls waiting for a decision (`tool_call_id`, `tool_name`, `input`,
            `input_hash`); `[]` unless `reason == "approval"`.
    """

    text: str
    steps: int
    usage: Usage
    reason: str
    output: Any = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)
