"""How the loop talks tools with a model: native tool fields, or the text protocol; "auto" mode.

    mode = effective_mode(config["tool_mode"], connection)  # "native" or "text"
    system, messages, spec = as_text(system, messages, tools)
    result = from_text(result, spec, salt="step-3")          # calls read back from the reply text
    refused_tools(error, "auto", connection)                # this server refuses `tools`: remember

`tool_mode="text"` sends no tools field and appends a manual to the system prompt;
`"auto"` starts native, switches to text for good (per base_url + model, process-wide) when
the server refuses the tools field, and also reads calls a model wrote as text. History
always keeps the standard tool-call parts, whichever way a call travelled. This module is the
one home of "auto": the decision, the wordings of a refusal and the memory of who refused.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import AgentError
from ..protocols.base import LLMResult, ToolCall, make_result, tool_call_part

if TYPE_CHECKING:
    from ..connection import Connection
    from .manual import TextToolSpec

# The rest of the text protocol is imported on first use: most agents never need it, and the
# loop (which imports this module) stays cheap to load.


def effective_mode(tool_mode: str, connection: Connection) -> str:
    """ "native" or "text": config `tool_mode`, with "auto" text once this connection refused tools."""
    if tool_mode == "text":
        return "text"
    if tool_mode == "auto" and remembered(connection.base_url, connection.model_id):
        return "text"
    return "native"


def refused_tools(error: AgentError, tool_mode: str, connection: Connection) -> bool:
    """An auto-mode server said it does not take the tools field: remember and switch."""
    if tool_mode != "auto" or error.status is None:
        return False
    if not is_refusal(error.status, (error.body or "") + " " + error.message):
        return False
    remember(connection.base_url, connection.model_id)
    return True


def as_text(
    system: str, messages: list[dict[str, Any]], schema: Mapping[str, Any]
) -> tuple[str, list[dict[str, Any]], TextToolSpec]:
    """The system prompt with the tool manual, and messages with calls and results written as text."""
    from .manual import prepare, to_text_messages, wrap_system

    spec = prepare(schema)
    return wrap_system(system, spec), to_text_messages(messages), spec


def prepare(schema: Mapping[str, Any]) -> TextToolSpec:
    from . import manual

    return manual.prepare(schema)


def strip(text: str, spec: TextToolSpec) -> str:
    from .reader import strip_calls

    return strip_calls(text, spec)


def from_text(result: LLMResult, spec: TextToolSpec, *, salt: str) -> LLMResult:
    """The reply with calls written in its text turned into tool calls, and the markup removed."""
    from .reader import read

    found = read(result.text, spec, id_salt=salt)
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


# ---------------------------------------------------------------- servers that refuse `tools`

# Error bodies seen from servers or models that will not take the `tools` / `tool_choice`
# fields (collected from public issue threads):
#   OpenAI      400 "tools is not supported in this model. For a list of supported models, ..."
#   Ollama      400 "registry.ollama.ai/library/gemma3:27b does not support tools"
#   DeepSeek    400 "deepseek-reasoner does not support Function Calling"
#               400 "Thinking mode does not support this tool_choice"
#   xAI         400 "The model does not support tool use or function calling but tools or
#                    tool_choice have been specified on the request."
#   Groq        400 "tool calling is not supported with this model" (param "tool calling")
#   Gemini      400 "Function calling is not enabled for models/gemma-3-12b-it"
#   vLLM        400 "\"auto\" tool choice requires --enable-auto-tool-choice and
#                    --tool-call-parser to be set"
#   llama.cpp   500 (some builds 400) "tools param requires --jinja flag";
#               "Unsupported param: tools" / "Unsupported param: tool_choice"
#   OpenRouter  404 "No endpoints found that support tool use." /
#                   "No endpoints found that support the provided 'tool_choice' value."
#   pydantic    422/400 [{"type": "extra_forbidden", "loc": ["body", "tools"],
#                        "msg": "Extra inputs are not permitted"}]
#   serde       400 "unknown field `tools`, expected one of ..."
# Not refusals (the server takes tools; something else is wrong): Groq "tool_use_failed",
# "Invalid schema for function ...", "messages.1.content.0.tool_use.text: Extra inputs are not
# permitted", context-length errors that mention tools.
# `tool_calls` / `function_call` are left out on purpose: they name message fields, and
# "property 'tool_calls' is unsupported" (Groq) is a malformed message, not a refusal.
_TOOLS = r"(?:tools?|tool[ _]use|tool calls?|tool[ _]calling|tool[ _]choice|functions?|function[ _]calling)"


@functools.lru_cache(maxsize=1)
def _refusal_patterns() -> tuple[list[re.Pattern[str]], re.Pattern[str], re.Pattern[str]]:
    """The wordings above, pydantic's "extra" error and where it points: compiled once, when first needed."""
    wordings = [
        re.compile(p, re.IGNORECASE)
        for p in (
            rf"\b{_TOOLS}['\"`]? (?:is|are) not (?:supported|enabled|allowed|available|permitted)",
            rf"\b{_TOOLS}['\"`]? (?:is|are) unsupported",
            rf"(?:does not|doesn't|do not|don't|cannot|can't) (?:support|use|accept) "
            rf"(?:this |the )?{_TOOLS}\b",
            r"--enable-auto-tool-choice",
            r"tool[ _]choice requires --",
            r"tools? param(?:eter)? requires --jinja",
            r"unsupported param(?:eter)?s?:?\s*['\"`]?(?:tools|tool_choice|functions)\b",
            r"unrecognized (?:request )?arguments? supplied:?\s*['\"`]?(?:tools|tool_choice|functions)\b",
            r"unknown (?:field|parameter|argument|key|name)s?:?\s*['\"`]?(?:tools|tool_choice|functions)"
            r"['\"`]?(?![\w.\[])",
            r"no endpoints found that support (?:tool use|the provided ['\"`]?tool_choice)",
        )
    ]
    extra_forbidden = re.compile(
        r"extra inputs are not permitted|extra_forbidden|extra fields not permitted", re.IGNORECASE
    )
    tools_location = re.compile(
        r"""[\[(]\s*['"]body['"]\s*,\s*['"](?:tools|tool_choice|functions)['"]\s*[\])]"""
        r"""|body\s*->\s*(?:tools|tool_choice|functions)\b(?![.\[])"""
        r"""|(?:^|[\s"'{,])(?:tools|tool_choice|functions)\s*:\s*extra""",
        re.IGNORECASE,
    )
    return wordings, extra_forbidden, tools_location


_REFUSAL_STATUSES = (400, 404, 422, 500)


def is_refusal(status: int | None, body_text: str) -> bool:
    """Whether an error response means "this server or model does not take the tools field".

    Args:
        status: The HTTP status (400/422 usually; OpenRouter answers 404, llama.cpp 500).
        body_text: The error body, or the vendor's message.
    """
    if status not in _REFUSAL_STATUSES or not body_text:
        return False
    text = body_text[:20_000]
    wordings, extra_forbidden, tools_location = _refusal_patterns()
    if any(pattern.search(text) for pattern in wordings):
        return True
    return bool(extra_forbidden.search(text) and tools_location.search(text))


# Auto tool mode: (base_url, model) pairs whose server refused native tools, for this process.
_refused: set[tuple[str, str]] = set()
_refused_lock = threading.Lock()


def _key(base_url: str, model: str) -> tuple[str, str]:
    return (base_url.rstrip("/"), model)


def remember(base_url: str, model: str) -> None:
    """Record that this endpoint refused native tools; later requests go text-first."""
    with _refused_lock:
        _refused.add(_key(base_url, model))


def remembered(base_url: str, model: str) -> bool:
    """Whether this endpoint refused native tools earlier in this process."""
    with _refused_lock:
        return _key(base_url, model) in _refused


def forget(base_url: str, model: str) -> None:
    """Drop a remembered refusal (e.g. after the server was reconfigured)."""
    with _refused_lock:
        _refused.discard(_key(base_url, model))
