"""Types shared by the protocol adapters, and the helpers every adapter uses.

An adapter translates between the protocol-neutral `Request` / history format and one
vendor's wire format. Adapters are pure: no I/O, no clocks, no `requests`.

    adapter = get("chat")
    wire = adapter.build(request)                 # url, headers, body
    result = adapter.parse(json_body)             # non-streaming
    parser = adapter.stream()                     # streaming
    for event in sse_events: neutral_events = parser.feed(event)
    result = parser.result()
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._utils.capabilities import DEFAULT_CAPABILITIES as DEFAULT_CAPABILITIES
from .._utils.capabilities import media_kind as media_kind
from .._utils.sse import SSEEvent
from ..errors import AgentError
from ..usage import Usage

FINISH_REASONS = ("stop", "tool_calls", "length", "content_filter", "other")

# A request-only user turn for vendors that reject a conversation ending on an assistant turn
# (Anthropic reads it as a prefill, Gemini refuses it); history-format messages never mean one.
CONTINUE_TEXT = "Continue."


@dataclass(frozen=True, eq=False)
class ToolCall(Mapping[str, Any]):
    """One function call the model asked for. Also readable as a dict (`call["name"]`).

    `raw_arguments` holds the argument text when it was not a JSON object; then
    `arguments` is `{}` and the loop answers with an invalid-call result quoting it.
    """

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str | None = None

    def __getitem__(self, key: str) -> Any:
        if key in ("id", "name", "arguments"):
            return getattr(self, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(("id", "name", "arguments"))

    def __len__(self) -> int:
        return 3

    def __repr__(self) -> str:
        return f"ToolCall(id={self.id!r}, name={self.name!r}, arguments={self.arguments!r})"


@dataclass(eq=False)
class LLMResult:
    """What one model request produced.

    `message` is the assistant history message the loop would append (without `id`,
    `created_at`, `usage`, which the loop adds). `raw` is the parsed body, or the list of
    parsed stream events.
    """

    text: str
    reasoning: str | None
    tool_calls: list[ToolCall]
    usage: Usage
    finish_reason: str
    message: dict[str, Any]
    raw: Any = None
    usage_reported: bool = True


@dataclass(frozen=True)
class Request:
    """A protocol-neutral model request.

    `messages` are history-format messages (already selected by the context builder; no
    system message). `tools` are `{"name", "description", "input_schema"}` dicts.
    `output` is an `agentcore.output` spec or None. `capabilities` is complete (defaults
    filled in).
    """

    model: str
    messages: list[dict[str, Any]]
    system: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)
    base_url: str = ""
    api_key: str = field(default="", repr=False)
    provider: dict[str, Any] = field(default_factory=dict)
    stream: bool = True
    cache: bool | dict[str, Any] = True
    capabilities: dict[str, bool] = field(default_factory=lambda: dict(DEFAULT_CAPABILITIES))
    media_fallback: str = "error"
    output: Any = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class WireRequest:
    url: str
    headers: dict[str, str] = field(repr=False)
    body: dict[str, Any]


class StreamParser(Protocol):
    """Accumulates one streamed reply.

    `feed` returns neutral events for `on_llm_event` (`text-delta`, `reasoning-delta`,
    `tool-call-delta`, `tool-call`) and raises `AgentError` on an in-stream error event.
    `done` turns True when the protocol's terminator arrived; a stream that ends
    without it is an error (kind "network"), retried by the loop.
    """

    done: bool

    def feed(self, event: SSEEvent) -> list[dict[str, Any]]: ...

    def result(self) -> LLMResult: ...


class Adapter(Protocol):
    name: str

    def build(self, request: Request) -> WireRequest: ...

    def parse(self, body: Any, request: Request | None = None) -> LLMResult:
        """A non-streamed reply. `request` is the request it answers (some adapters need it)."""
        ...

    def stream(self, request: Request | None = None) -> StreamParser: ...

    def error(self, status: int, body_text: str) -> tuple[str, bool]:
        """The vendor's error message from an error body, and whether it is a context overflow."""
        ...


# ---------------------------------------------------------------- helpers for adapters


def make_result(
    parts: list[dict[str, Any]],
    usage: Usage | None,
    finish_reason: str,
    raw: Any,
    tool_calls: list[ToolCall] | None = None,
) -> LLMResult:
    """Build an `LLMResult` from the assistant's content parts in reply order.

    `parts` hold text, reasoning and tool-call parts (history format). Text parts are
    concatenated into `text`; `reasoning` is None when no reasoning part exists. A
    `stop` finish becomes `tool_calls` whenever there are calls (and the reverse).
    """
    text = "".join(p["text"] for p in parts if p.get("type") == "text")
    reasoning_parts = [p for p in parts if p.get("type") == "reasoning"]
    reasoning = "".join(p.get("text", "") for p in reasoning_parts) if reasoning_parts else None
    if tool_calls is None:
        tool_calls = [
            ToolCall(p["tool_call_id"], p["tool_name"], p["input"])
            for p in parts
            if p.get("type") == "tool-call"
        ]
    if finish_reason in ("stop", "tool_calls"):
        finish_reason = "tool_calls" if tool_calls else "stop"
    elif finish_reason not in FINISH_REASONS:
        finish_reason = "other"
    message = {"role": "assistant", "content": [p for p in parts if not _empty_text(p)]}
    return LLMResult(
        text=text,
        reasoning=reasoning,
        tool_calls=tool_calls,
        usage=usage if usage is not None else Usage(),
        finish_reason=finish_reason,
        message=message,
        raw=raw,
        usage_reported=usage is not None,
    )


def _empty_text(part: dict[str, Any]) -> bool:
    return part.get("type") == "text" and not part.get("text")


def parse_arguments(text: str | None) -> tuple[dict[str, Any], str | None]:
    """Parse tool-call argument text: (arguments, None), or ({}, raw text) when it is not a JSON object."""
    if text is None or not text.strip():
        return {}, None
    try:
        value = json.loads(text)
    except ValueError:
        return {}, text
    if isinstance(value, dict):
        return value, None
    return {}, text


def tool_call_part(call_id: str, name: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    part: dict[str, Any] = {
        "type": "tool-call",
        "tool_call_id": call_id,
        "tool_name": name,
        "input": arguments,
    }
    part.update(extra)
    return part


def request_parts(content: Any, request: Request) -> list[dict[str, Any]]:
    """The dict parts of `content` that `request`'s capabilities allow (see `allowed_parts`)."""
    parts = [p for p in content or [] if isinstance(p, dict)]
    return allowed_parts(parts, request.capabilities, request.media_fallback)


def allowed_parts(
    parts: list[dict[str, Any]], capabilities: Mapping[str, bool], media_fallback: str
) -> list[dict[str, Any]]:
    """Drop media parts the capabilities forbid (media_fallback="strip") or raise (="error")."""
    kept = []
    for part in parts:
        kind = media_kind(part)
        if kind is not None and not capabilities.get(kind, True):
            if media_fallback == "strip":
                continue
            raise AgentError(
                f"the model does not accept {kind} content (capabilities.{kind} is False); "
                'set media_fallback="strip" to drop it',
                kind="request",
                retryable=False,
            )
        kept.append(part)
    return kept


def image_data(part: Mapping[str, Any]) -> tuple[str, str | None, str | None]:
    """Split an image part into (media_type, base64 data or None, url or None).

    `image` may be a data URL, an http(s) URL or bare base64.
    """
    value = str(part.get("image", part.get("data", "")))
    media_type = str(part.get("media_type") or "image/png")
    return split_data(value, media_type)


def split_data(value: str, media_type: str) -> tuple[str, str | None, str | None]:
    if value.startswith("data:"):
        header, _, data = value.partition(",")
        declared = header[5:].split(";")[0]
        return declared or media_type, data, None
    if value.startswith(("http://", "https://", "gs://")):
        return media_type, None, value
    return media_type, value, None


def metadata_for(part: Mapping[str, Any], protocol: str) -> dict[str, Any] | None:
    """The part's provider_metadata if it was written by `protocol`, else None."""
    meta = part.get("provider_metadata")
    if isinstance(meta, dict) and meta.get("protocol") == protocol:
        return meta
    return None


def text_of(content: Any) -> str:
    """The text of a message's content (a str or a list of parts)."""
    if isinstance(content, str):
        return content
    return "".join(
        str(p.get("text", "")) for p in content or [] if isinstance(p, dict) and p.get("type") == "text"
    )


def output_value_text(output: Mapping[str, Any]) -> str:
    """A tool result's output block as text, for protocols that only take text results."""
    kind = output.get("type")
    value = output.get("value")
    if kind in ("text", "error-text"):
        return str(value)
    if kind in ("json", "error-json"):
        return json.dumps(value, ensure_ascii=False)
    if kind == "execution-denied":
        reason = value if isinstance(value, str) and value else "The user denied this tool call."
        return f"Tool execution denied: {reason}" if isinstance(value, str) and value else reason
    if kind == "content" and isinstance(value, list):
        return text_of(value)
    return json.dumps(value, ensure_ascii=False) if value is not None else ""


def is_error_output(output: Mapping[str, Any]) -> bool:
    return output.get("type") in ("error-text", "error-json", "execution-denied")


def join_url(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + path
