"""Anthropic Messages (`POST {base_url}/messages`).

    from .anthropic import adapter
    wire = adapter.build(request)                  # WireRequest(url, headers, body)
    result = adapter.parse(json_body, request)     # non-streaming reply -> LLMResult
    parser = adapter.stream(request)               # streaming: parser.feed(sse_event); parser.result()
    message, overflow = adapter.error(400, body_text)

Pass the `Request` to `parse` / `stream` when it may carry structured output: the forced
output tool is recognised by the name the request gave it.

What the request carries (API.md §Wire):

| neutral                        | Anthropic wire                                                     |
|--------------------------------|--------------------------------------------------------------------|
| auth                           | `x-api-key` + `anthropic-version: 2023-06-01`                      |
| system                         | top-level `system` (a text block carrying `cache_control` with cache) |
| user text / image / file       | `text` / `image` (base64 or url source) / `document` (PDF base64 or |
|                                | url, text/* as a text source); audio and video: AgentError(request)|
| assistant text / tool call     | `text` / `tool_use` blocks                                         |
| reasoning (anthropic metadata) | `thinking` with its `signature`, or `redacted_thinking` with `data`,|
|                                | sent back intact; other protocols' reasoning is dropped            |
| tool results                   | `tool_result` blocks (`content` text or text/image/document blocks,|
|                                | `is_error`) grouped into one user turn, placed first               |
| consecutive same-role messages | merged into one message (the API rejects them)                     |
| provider max_output_tokens     | `max_tokens` (else config `max_tokens`, else 8192)                 |
| provider temperature/top_p/top_k | same name                                                        |
| provider stop                  | `stop_sequences`                                                   |
| provider reasoning_effort      | `thinking: {"type": "enabled", "budget_tokens": N}`: minimal 1024, |
|                                | low 2048, medium 8192, high 16384, xhigh/max 24576; "none" sends   |
|                                | nothing. Without an explicit max_tokens it becomes N + 8192 (≤32000)|
| provider tool_choice           | auto / none / required→any / {"name"}→{"type": "tool", "name"}     |
| provider parallel_tool_calls   | False → `tool_choice.disable_parallel_tool_use`                    |
| provider seed, presence/       | not part of the Messages API: dropped with a warning on the        |
| frequency_penalty              | "agentcore" logger                                                 |
| cache                          | `cache_control: {"type": "ephemeral"[, "ttl": retention]}` on the  |
|                                | system block and the last block of the last message; body merged  |

Structured output (object / array): when tools, structured_output and tool_choice are all
enabled, no thinking is requested and no tool already has the name, a tool named `spec.name` with
`input_schema = spec.wire_schema()` is declared and forced (`{"type": "tool"}`; `{"type": "any"}`
when other tools exist, so the model may still call them first). The reply's call of that tool
becomes text: `LLMResult.text` (and the message's text part) is the JSON of its input
(`json.dumps(input, ensure_ascii=False)`), it is not in `tool_calls`, and a stream reports it as
one `text-delta` when the block completes. Otherwise (and for `output.json()`) the instructions
are appended to the system prompt.

Replies: `thinking` → reasoning part `provider_metadata={"protocol": "anthropic", "signature"}`,
`redacted_thinking` → reasoning part with empty text and `{"protocol": "anthropic", "redacted":
data}`; server-tool blocks are ignored. Usage: `input_tokens` = input + cache read + cache write.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from .._utils.memo import active
from .._utils.sse import SSEEvent
from ..errors import AgentError
from ..usage import Usage
from ._common import (
    base_headers,
    cache_settings,
    check_provider,
    merge_body,
    rendered_all,
    stream_object,
    tool_choice,
)
from .base import (
    CONTINUE_TEXT,
    LLMResult,
    Request,
    ToolCall,
    WireRequest,
    image_data,
    is_error_output,
    join_url,
    make_result,
    media_kind,
    metadata_for,
    output_value_text,
    parse_arguments,
    request_parts,
    split_data,
    text_of,
    tool_call_part,
)
from .errors import http_error, reply_error

log = logging.getLogger("agentcore")

NAME = "anthropic"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192
PROTECTED_KEYS = ("model", "messages", "stream")
_UNSUPPORTED_KEYS = ("presence_penalty", "frequency_penalty", "seed")
_THINKING_BUDGETS = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 24576,
    "max": 24576,
}
_MIN_THINKING_BUDGET = 1024
# Every Claude model with extended thinking accepts at least this many output tokens.
_THINKING_MAX_TOKENS_CAP = 32000
_UNCACHEABLE = ("thinking", "redacted_thinking")
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
_ERROR_TYPE_KINDS = {
    "overloaded_error": "server",
    "api_error": "server",
    "rate_limit_error": "limit",
    "authentication_error": "auth",
    "permission_error": "auth",
    "invalid_request_error": "request",
    "not_found_error": "request",
    "request_too_large": "request",
    "timeout_error": "timeout",
}


class AnthropicAdapter:
    """The Anthropic Messages protocol: see the module docstring."""

    name = NAME

    def build(self, request: Request) -> WireRequest:
        """Translate a neutral request into the Messages URL, headers and body.

        Raises:
            AgentError: kind "config" for bad provider/cache settings or a max_tokens too small for
                the thinking budget, kind "request" for media the capabilities forbid or Anthropic
                cannot carry.
        """
        provider = request.provider
        check_provider(provider)
        thinking = _thinking(request)
        output_tool = _output_name(request)
        body: dict[str, Any] = {
            "model": request.model,
            "max_tokens": _max_tokens(request, thinking),
            "messages": _messages(request),
            "stream": request.stream,
        }
        if thinking is not None:
            body["thinking"] = thinking
        system = _system_text(request, output_tool)
        if system:
            body["system"] = system
        _apply_tools(body, request, output_tool)
        _apply_generation(body, request)
        _apply_cache(body, request)
        merge_body(body, provider.get("body"), source="provider['body']", protected=PROTECTED_KEYS)
        auth = {"anthropic-version": API_VERSION}
        if request.api_key:
            auth["x-api-key"] = request.api_key
        return WireRequest(join_url(request.base_url, "/messages"), base_headers(provider, auth), body)

    def parse(self, body: Any, request: Request | None = None) -> LLMResult:
        """Read a non-streaming reply (the parsed message object).

        Raises:
            AgentError: an error object in the body, or kind "unknown" for a body that is no message.
        """
        if not isinstance(body, dict):
            raise AgentError("the anthropic reply is not a JSON object", kind="unknown", status=200)
        if body.get("type") == "error" or isinstance(body.get("error"), dict):
            raise reply_error(body.get("error"), json.dumps(body), _ERROR_TYPE_KINDS, kind_keys=("type",))
        if not isinstance(body.get("content"), list):
            raise AgentError(
                "the anthropic reply has no content", kind="unknown", status=200, body=json.dumps(body)
            )
        blocks = [_Block(b, complete=True) for b in body["content"] if isinstance(b, dict)]
        return _result(
            blocks, body.get("stop_reason"), _usage(body.get("usage")), body, _output_name(request)
        )

    def stream(self, request: Request | None = None) -> AnthropicStream:
        return AnthropicStream(_output_name(request))

    def error(self, status: int, body_text: str) -> tuple[str, bool]:
        """The vendor's error message, and whether it reports a context overflow (never for a 429)."""
        return http_error(status, body_text)


adapter = AnthropicAdapter()


# ---------------------------------------------------------------- request: structured output


def _output_name(request: Request | None) -> str | None:
    """The forced output tool's name, or None when the output travels as instructions.

    Forcing a tool is rejected together with extended thinking, so thinking falls back too.
    """
    spec = request.output if request is not None else None
    if request is None or spec is None or spec.kind == "json":
        return None
    if _thinking(request) is not None or _body_thinking(request):
        return None
    if not all(request.capabilities.get(key, True) for key in ("tools", "structured_output", "tool_choice")):
        return None
    if any(tool.get("name") == spec.name for tool in request.tools):
        return None
    return str(spec.name)


def _body_thinking(request: Request) -> bool:
    body = request.provider.get("body") or {}
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") not in (None, "disabled")


def _system_text(request: Request, output_tool: str | None) -> str:
    parts = [request.system] if request.system else []
    # System-role history messages have no place in Messages but the system prompt.
    parts += [text_of(m.get("content")) for m in request.messages if m.get("role") == "system"]
    spec = request.output
    if spec is not None and output_tool is None:
        parts.append(str(spec.instructions()))
    return "\n\n".join(p for p in parts if p)


# ---------------------------------------------------------------- request: messages


def _messages(request: Request) -> list[dict[str, Any]]:
    """History messages as Messages turns; consecutive same-role turns are merged."""
    turns: list[dict[str, Any]] = []
    for wire_role, blocks in rendered_all("anthropic", _entry_turn, request, active()):
        if not blocks:
            continue
        if turns and turns[-1]["role"] == wire_role:
            turns[-1]["content"].extend(blocks)
        else:
            # A new list: the merge above and the sort below change it, never the remembered one.
            turns.append({"role": wire_role, "content": list(blocks)})
    for turn in turns:
        # tool_result blocks must open the user turn that answers the calls.
        turn["content"].sort(key=lambda block: block.get("type") != "tool_result")
    if turns and turns[-1]["role"] == "assistant":
        # A final assistant turn is a prefill, which current models reject ("This model does not
        # support assistant message prefill"); the loop sends one after a reply without tool calls.
        turns.append({"role": "user", "content": [{"type": "text", "text": CONTINUE_TEXT}]})
    return turns


def _entry_turn(role: Any, content: Any, request: Request) -> list[tuple[str, list[dict[str, Any]]]]:
    """[(wire role, blocks)] of one history entry; none for a system message (it joins `system`)."""
    return [] if role == "system" else [_entry_blocks(role, content, request)]


def _entry_blocks(role: Any, content: Any, request: Request) -> tuple[str, list[dict[str, Any]]]:
    """The wire role and blocks of one history entry (computed once per run, see `_utils/memo.py`)."""
    if role in ("user", "compact"):
        return "user", _user_blocks(content, request)
    if role == "tool":
        return "user", [_tool_result(result, request) for result in content or []]
    if role == "assistant":
        return "assistant", _assistant_blocks(content)
    raise AgentError(f"cannot send a history message with role {role!r}", kind="request", retryable=False)


def _user_blocks(content: Any, request: Request) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    parts = request_parts(content, request)
    return [block for block in map(_content_block, parts) if block is not None]


def _content_block(part: dict[str, Any]) -> dict[str, Any] | None:
    """A history content part as a Messages content block (None for an empty text)."""
    if part.get("type") == "text":
        text = str(part.get("text", ""))
        return {"type": "text", "text": text} if text else None
    kind = media_kind(part)
    if kind is None:
        return None
    if kind == "image":
        media_type, data, url = image_data(part)
        source = (
            {"type": "url", "url": url} if url else {"type": "base64", "media_type": media_type, "data": data}
        )
        return {"type": "image", "source": source}
    media_type, data, url = split_data(str(part.get("data", "")), str(part.get("media_type") or ""))
    block = _document(media_type, data, url)
    if block is None:
        raise AgentError(
            f"the anthropic protocol cannot send {media_type or kind} content; set capabilities.{kind}=False "
            'and media_fallback="strip" to drop it',
            kind="request",
            retryable=False,
        )
    if part.get("filename"):
        block["title"] = str(part["filename"])
    return block


def _document(media_type: str, data: str | None, url: str | None) -> dict[str, Any] | None:
    """A PDF (base64 or URL) or plain-text document block; None for types Anthropic does not read."""
    if media_type == "application/pdf":
        source = (
            {"type": "url", "url": url} if url else {"type": "base64", "media_type": media_type, "data": data}
        )
        return {"type": "document", "source": source}
    if media_type.startswith("text/") and data is not None:
        try:
            text = base64.b64decode(data, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            return None
        return {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": text}}
    return None


def _assistant_blocks(content: Any) -> list[dict[str, Any]]:
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    blocks: list[dict[str, Any]] = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and part.get("text"):
            blocks.append({"type": "text", "text": str(part["text"])})
        elif kind == "reasoning":
            block = _thinking_block(part)
            if block is not None:
                blocks.append(block)
        elif kind == "tool-call":
            blocks.append(
                {
                    "type": "tool_use",
                    "id": str(part.get("tool_call_id", "")),
                    "name": str(part.get("tool_name", "")),
                    "input": part.get("input") or {},
                }
            )
    return blocks


def _thinking_block(part: dict[str, Any]) -> dict[str, Any] | None:
    """Our own signed or redacted thinking, intact; anything else cannot be verified and is dropped."""
    meta = metadata_for(part, NAME)
    if meta is None:
        return None
    if meta.get("redacted"):
        return {"type": "redacted_thinking", "data": meta["redacted"]}
    if meta.get("signature"):
        return {"type": "thinking", "thinking": str(part.get("text") or ""), "signature": meta["signature"]}
    return None


def _tool_result(result: dict[str, Any], request: Request) -> dict[str, Any]:
    output = result.get("output") or {}
    value = output.get("value")
    content: str | list[dict[str, Any]]
    if output.get("type") == "content" and isinstance(value, list):
        parts = request_parts(value, request)
        content = [block for block in map(_content_block, parts) if block is not None]
    else:
        content = output_value_text(output)
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": str(result.get("tool_call_id", "")),
        "content": content,
    }
    if is_error_output(output):
        block["is_error"] = True
    return block


# ---------------------------------------------------------------- request: tools, generation, cache


def _apply_tools(body: dict[str, Any], request: Request, output_tool: str | None) -> None:
    tools: list[dict[str, Any]] = []
    if request.capabilities.get("tools", True):
        tools = [
            {
                "name": tool["name"],
                "description": tool.get("description") or "",
                "input_schema": tool.get("input_schema") or {"type": "object", "properties": {}},
            }
            for tool in request.tools
        ]
    choice: dict[str, Any] | None = None
    if output_tool is not None and request.output is not None:
        choice = {"type": "any"} if tools else {"type": "tool", "name": output_tool}
        tools.append(
            {
                "name": output_tool,
                "description": "Give your final answer by calling this tool with it as the input.",
                "input_schema": request.output.wire_schema(),
            }
        )
    if not tools:
        return
    body["tools"] = tools
    provider = request.provider
    if not request.capabilities.get("tool_choice", True):
        return
    if choice is None and provider.get("tool_choice") is not None:
        mode, name = tool_choice(provider["tool_choice"])
        choice = {"type": "tool", "name": name} if name else {"type": "any" if mode == "required" else mode}
    if provider.get("parallel_tool_calls") is False:
        choice = {**(choice or {"type": "auto"}), "disable_parallel_tool_use": True}
    if choice is not None:
        body["tool_choice"] = choice


def _thinking(request: Request) -> dict[str, Any] | None:
    effort = request.provider.get("reasoning_effort")
    if effort is None or effort == "none":
        return None
    if effort not in _THINKING_BUDGETS:
        raise AgentError(
            f"provider['reasoning_effort'] {effort!r} is not one of {', '.join(_THINKING_BUDGETS)} or 'none'",
            kind="config",
        )
    budget = _THINKING_BUDGETS[str(effort)]
    explicit = _explicit_max_tokens(request)
    if explicit is not None:
        # Anthropic needs budget_tokens < max_tokens.
        budget = min(budget, explicit - 1)
        if budget < _MIN_THINKING_BUDGET:
            raise AgentError(
                f"max_tokens {explicit} leaves no room for thinking (Anthropic needs a budget of at least "
                f"{_MIN_THINKING_BUDGET} tokens below max_tokens)",
                kind="config",
            )
    return {"type": "enabled", "budget_tokens": budget}


def _explicit_max_tokens(request: Request) -> int | None:
    value = request.provider.get("max_output_tokens")
    if value is None:
        value = request.max_tokens
    return int(value) if value is not None else None


def _max_tokens(request: Request, thinking: dict[str, Any] | None) -> int:
    explicit = _explicit_max_tokens(request)
    if explicit is not None:
        return explicit
    if thinking is not None:
        return min(int(thinking["budget_tokens"]) + DEFAULT_MAX_TOKENS, _THINKING_MAX_TOKENS_CAP)
    return DEFAULT_MAX_TOKENS


def _apply_generation(body: dict[str, Any], request: Request) -> None:
    provider = request.provider
    for key in ("temperature", "top_p", "top_k"):
        if provider.get(key) is not None:
            body[key] = provider[key]
    stop = provider.get("stop")
    if stop is not None:
        body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    for key in _UNSUPPORTED_KEYS:
        if provider.get(key) is not None:
            log.warning("provider[%r] is not part of the anthropic protocol; it is not sent", key)


def _apply_cache(body: dict[str, Any], request: Request) -> None:
    """Breakpoints on the system prompt and the last message: Anthropic caches nothing unmarked."""
    cache = cache_settings(
        request.cache, base_url=request.base_url, model=request.model, system=request.system
    )
    if cache is None:
        return
    control: dict[str, Any] = {"type": "ephemeral"}
    if cache.retention is not None:
        control["ttl"] = cache.retention
    if body.get("system"):
        body["system"] = [{"type": "text", "text": body["system"], "cache_control": control}]
    if body["messages"]:
        blocks = body["messages"][-1]["content"]
        cacheable = [block for block in blocks if block.get("type") not in _UNCACHEABLE]
        if cacheable:
            # A copy: the block itself may be remembered for the next request (see `_utils/memo.py`).
            marked = {**cacheable[-1], "cache_control": dict(control)}
            blocks[next(i for i, block in enumerate(blocks) if block is cacheable[-1])] = marked
    merge_body(body, cache.body, source="cache['body']", protected=PROTECTED_KEYS)


# ---------------------------------------------------------------- reply


@dataclass
class _Block:
    """One content block of a reply; streamed tool input arrives as JSON text pieces."""

    data: dict[str, Any]
    complete: bool = False
    json_text: list[str] = field(default_factory=list)

    def tool_input(self) -> tuple[dict[str, Any], str | None]:
        if not self.json_text:
            value = self.data.get("input")
            return (value, None) if isinstance(value, dict) else ({}, None)
        return parse_arguments("".join(self.json_text))


def _result(
    blocks: list[_Block], stop_reason: Any, usage: Usage | None, raw: Any, output_tool: str | None
) -> LLMResult:
    parts: list[dict[str, Any]] = []
    calls: list[ToolCall] = []
    for block in blocks:
        kind = block.data.get("type")
        if kind == "text":
            parts.append({"type": "text", "text": str(block.data.get("text") or "")})
        elif kind == "thinking":
            meta = {"protocol": NAME, "signature": block.data.get("signature") or ""}
            parts.append(
                {
                    "type": "reasoning",
                    "text": str(block.data.get("thinking") or ""),
                    "provider_metadata": meta,
                }
            )
        elif kind == "redacted_thinking":
            meta = {"protocol": NAME, "redacted": block.data.get("data") or ""}
            parts.append({"type": "reasoning", "text": "", "provider_metadata": meta})
        elif kind == "tool_use" and block.complete:
            arguments, raw_arguments = block.tool_input()
            name = str(block.data.get("name") or "")
            if output_tool is not None and name == output_tool:
                parts.append({"type": "text", "text": json.dumps(arguments, ensure_ascii=False)})
                continue
            call_id = str(block.data.get("id") or "")
            parts.append(tool_call_part(call_id, name, arguments))
            calls.append(ToolCall(call_id, name, arguments, raw_arguments))
    finish = "stop" if stop_reason is None else _FINISH.get(str(stop_reason), "other")
    return make_result(parts, usage, finish, raw, tool_calls=calls)


def _usage(usage: Any) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    cache_read = _count(usage.get("cache_read_input_tokens"))
    cache_write = _count(usage.get("cache_creation_input_tokens"))
    # API.md: input_tokens counts every prompt token; Anthropic reports cached ones apart.
    return Usage.of(
        input_tokens=_count(usage.get("input_tokens")) + cache_read + cache_write,
        output_tokens=usage.get("output_tokens"),
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
    )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# ---------------------------------------------------------------- stream


class AnthropicStream:
    """Accumulates one streamed Messages reply (see `StreamParser` in base.py)."""

    def __init__(self, output_tool: str | None = None) -> None:
        self.done = False
        self._output_tool = output_tool
        self._events: list[dict[str, Any]] = []
        self._blocks: dict[int, _Block] = {}
        self._usage: dict[str, Any] = {}
        self._usage_seen = False
        self._stop_reason: Any = None

    def feed(self, event: SSEEvent) -> list[dict[str, Any]]:
        """Take one SSE event; return the neutral events it produced.

        Raises:
            AgentError: an `error` event (`overloaded_error` is a retryable server error), or kind
                "unknown" for data that is not JSON.
        """
        data = event.data.strip()
        if self.done or not data:
            return []
        payload = stream_object(data, "anthropic")
        self._events.append(payload)
        kind = str(payload.get("type") or event.event)
        if kind == "error":
            raise reply_error(payload.get("error"), data, _ERROR_TYPE_KINDS, kind_keys=("type",))
        if kind == "message_start":
            message = payload.get("message")
            self._merge_usage(message.get("usage") if isinstance(message, dict) else None)
        elif kind == "content_block_start":
            block = payload.get("content_block")
            self._blocks[_index(payload)] = _Block(dict(block) if isinstance(block, dict) else {})
        elif kind == "content_block_delta":
            return self._delta(payload)
        elif kind == "content_block_stop":
            return self._block_done(payload)
        elif kind == "message_delta":
            delta = payload.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason") is not None:
                self._stop_reason = delta["stop_reason"]
            self._merge_usage(payload.get("usage"))
        elif kind == "message_stop":
            self.done = True
        return []

    def result(self) -> LLMResult:
        """The reply so far; a tool call counts only once its block is complete."""
        blocks = [block for _, block in sorted(self._blocks.items())]
        usage = _usage(self._usage) if self._usage_seen else None
        stop_reason = self._stop_reason if self.done else "partial"
        return _result(blocks, stop_reason, usage, self._events, self._output_tool)

    def _merge_usage(self, usage: Any) -> None:
        """message_start's usage, then each non-null field of message_delta's."""
        if not isinstance(usage, dict):
            return
        self._usage_seen = True
        self._usage.update({key: value for key, value in usage.items() if value is not None})

    def _delta(self, payload: dict[str, Any]) -> list[dict[str, Any]]:
        block = self._blocks.get(_index(payload))
        delta = payload.get("delta")
        if block is None or not isinstance(delta, dict):
            return []
        kind = delta.get("type")
        if kind == "text_delta":
            text = str(delta.get("text") or "")
            block.data["text"] = str(block.data.get("text") or "") + text
            return [{"type": "text-delta", "text": text}] if text else []
        if kind == "thinking_delta":
            text = str(delta.get("thinking") or "")
            block.data["thinking"] = str(block.data.get("thinking") or "") + text
            return [{"type": "reasoning-delta", "text": text}] if text else []
        if kind == "signature_delta":
            block.data["signature"] = str(block.data.get("signature") or "") + str(
                delta.get("signature") or ""
            )
            return []
        if kind == "input_json_delta":
            piece = str(delta.get("partial_json") or "")
            block.json_text.append(piece)
            if block.data.get("type") != "tool_use" or self._is_output(block) or not piece:
                return []
            return [
                {
                    "type": "tool-call-delta",
                    "tool_call_id": str(block.data.get("id") or ""),
                    "tool_name": str(block.data.get("name") or ""),
                    "delta": piece,
                }
            ]
        return []

    def _block_done(self, payload: dict[str, Any]) -> list[dict[str, Any]]:
        block = self._blocks.get(_index(payload))
        if block is None:
            return []
        block.complete = True
        if block.data.get("type") != "tool_use":
            return []
        arguments, _ = block.tool_input()
        if self._is_output(block):
            return [{"type": "text-delta", "text": json.dumps(arguments, ensure_ascii=False)}]
        return [
            {
                "type": "tool-call",
                "tool_call_id": str(block.data.get("id") or ""),
                "tool_name": str(block.data.get("name") or ""),
                "input": arguments,
            }
        ]

    def _is_output(self, block: _Block) -> bool:
        return self._output_tool is not None and block.data.get("name") == self._output_tool


def _index(payload: dict[str, Any]) -> int:
    index = payload.get("index")
    return index if isinstance(index, int) else 0


# ---------------------------------------------------------------- errors
