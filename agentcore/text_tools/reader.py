"""Reading the tool calls a model wrote as text: `read(text, spec)`.

    found = read(reply.text, spec)     # found.tool_calls, found.invalid, found.text

`read` never raises and never lets a call through silently as text: every block it cannot
use becomes an `invalid` entry (raw text kept) for the loop to answer "please rewrite".
Every returned `tool_calls` entry names a tool of the spec.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from ..protocols.base import ToolCall
from .calls import entries
from .manual import TextToolSpec
from .markup import remaining_text, scan


@dataclass(frozen=True, slots=True)
class TextToolRead:
    """What `read` found in one reply.

    `text` is the reply with the call markup removed (and cut where the model began to invent
    a `<tool_result>`). `tool_calls` are the usable calls in reply order. `invalid` are the
    blocks that could not be used: `raw_arguments` holds the block text, `name` the best guess
    (or ""). `reasons` maps an invalid call's id to a short explanation for the model.
    """

    text: str
    tool_calls: list[ToolCall]
    invalid: list[ToolCall]
    reasons: dict[str, str] = field(default_factory=dict)


def read(text: str, spec: TextToolSpec, loose: bool = True, *, id_salt: str = "") -> TextToolRead:
    """Read the tool calls a model wrote as text.

    Args:
        text: The model's reply text.
        spec: From `prepare`.
        loose: Accept the common near-misses (wrappers, fences, trailing commas, Python
            literals, unclosed blocks, Roo-style XML for known tools). With False only
            well-formed `<tool_call>{json}</tool_call>` blocks are calls.
        id_salt: Mixed into the generated call ids, e.g. to keep them unique across the
            replies of one history.

    Returns:
        A `TextToolRead`. Never raises.
    """
    blocks, cut = scan(text, spec, loose)
    calls: list[ToolCall] = []
    invalid: list[ToolCall] = []
    reasons: dict[str, str] = {}
    position = 0
    for block in blocks:
        for name, arguments, reason in entries(block, spec, loose):
            call_id = _call_id(id_salt, position, name, block.raw)
            position += 1
            if reason is None:
                calls.append(ToolCall(call_id, name, arguments))
            else:
                invalid.append(ToolCall(call_id, name, {}, raw_arguments=block.raw))
                reasons[call_id] = reason
    if not blocks and cut == len(text):
        return TextToolRead(text, calls, invalid, reasons)
    return TextToolRead(remaining_text(text, blocks, cut), calls, invalid, reasons)


def strip_calls(text: str, spec: TextToolSpec | None = None) -> str:
    """The reply text without call markup (what `result.text` and history show)."""
    return read(text, spec or TextToolSpec()).text


def _call_id(salt: str, position: int, name: str, raw: str) -> str:
    digest = hashlib.sha256(f"{salt}\x00{position}\x00{name}\x00{raw}".encode("utf-8", "replace"))
    return "call_" + digest.hexdigest()[:16]
