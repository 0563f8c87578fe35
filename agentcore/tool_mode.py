"""How the loop talks tools with a model: native tool fields, or the text protocol.

    mode = effective_mode(config)                           # "native" or "text"
    system, messages, spec = as_text(system, messages, tools)
    result = from_text(result, spec, salt="step-3")          # calls read back from the reply text

`tool_mode="text"` sends no tools field and appends a manual to the system prompt;
`"auto"` starts native, switches to text for good (per base_url + model, process-wide) when
the server refuses the tools field, and also reads calls a model wrote as text. History
always keeps the standard tool-call parts, whichever way a call travelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .errors import AgentError
from .protocols.base import LLMResult, ToolCall, make_result, tool_call_part

if TYPE_CHECKING:
    from .text_tools import TextToolSpec

# text_tools is imported on first use: most agents never need it, and `import agentcore` stays cheap.


def effective_mode(config: Mapping[str, Any]) -> str:
    mode = config["tool_mode"]
    if mode == "text":
        return "text"
    if mode == "auto":
        from . import text_tools

        if text_tools.remembered(config["base_url"], _model_key(config)):
            return "text"
    return "native"


def is_refusal(error: AgentError, config: Mapping[str, Any]) -> bool:
    """An auto-mode server said it does not take the tools field: remember and switch."""
    if config["tool_mode"] != "auto" or error.status is None:
        return False
    from . import text_tools

    if not text_tools.is_refusal(error.status, (error.body or "") + " " + error.message):
        return False
    text_tools.remember(config["base_url"], _model_key(config))
    return True


def as_text(
    system: str, messages: list[dict[str, Any]], schema: Mapping[str, Any]
) -> tuple[str, list[dict[str, Any]], TextToolSpec]:
    """The system prompt with the tool manual, and messages with calls and results written as text."""
    from . import text_tools

    spec = text_tools.prepare(schema)
    return text_tools.wrap_system(system, spec), text_tools.to_text_messages(messages), spec


def prepare(schema: Mapping[str, Any]) -> TextToolSpec:
    from . import text_tools

    return text_tools.prepare(schema)


def strip(text: str, spec: TextToolSpec) -> str:
    from . import text_tools

    return text_tools.strip_calls(text, spec)


def from_text(result: LLMResult, spec: TextToolSpec, *, salt: str) -> LLMResult:
    """The reply with calls written in its text turned into tool calls, and the markup removed."""
    from . import text_tools

    found = text_tools.read(result.text, spec, id_salt=salt)
    if not found.tool_calls and not found.invalid and found.text == result.text:
        return result
    calls: list[ToolCall] = [*result.tool_calls, *found.tool_calls, *found.invalid]
    content = result.message.get("content", [])
    parts: list[dict[str, Any]] = [p for p in content if p.get("type") == "reasoning"]
    if found.text:
        parts.append({"type": "text", "text": found.text})
    parts += [p for p in content if p.get("type") == "tool-call"]
    parts += [tool_call_part(c.id, c.name, c.arguments) for c in [*found.tool_calls, *found.invalid]]
    rebuilt = make_result(parts, result.usage, result.finish_reason, result.raw, tool_calls=calls)
    rebuilt.usage_reported = result.usage_reported
    return rebuilt


def _model_key(config: Mapping[str, Any]) -> str:
    model = config["model"]
    return model if isinstance(model, str) else f"adapter:{id(model)}"
