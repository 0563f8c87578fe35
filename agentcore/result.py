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
        reason: "finished", "no-tool", "tool-stop", "step-limit", "ended" (a finish_turn hook),
            "approval" (calls wait for a decision) or "budget" (a limit of config["limits"] was
            reached).
        output: the validated structured output, or None.
        messages: every history entry this call appended, in order.
        pending: the calls waiting for a decision (`tool_call_id`, `tool_name`, `input`,
            `input_hash`); `[]` unless `reason == "approval"`.
        limit: `{"name", "limit", "used"}` when reason is "budget", else None.
        cost: this send's cost from config["prices"] (retries, compaction and sub-agents
            included); None without prices, or when a model that spent tokens has no price.
        model: the model that wrote the last reply (a fallback's name when one answered).
    """

    text: str
    steps: int
    usage: Usage
    reason: str
    output: Any = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)
    limit: dict[str, Any] | None = None
    cost: float | None = None
    model: str | None = None
