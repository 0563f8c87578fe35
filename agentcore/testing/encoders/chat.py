"""OpenAI chat completions wire format for scripted replies.

    status, headers, body = encode_json(reply, request)   # a "chat.completion"
    for chunk in encode_stream(reply, request): ...       # "chat.completion.chunk" events, [DONE]

Shapes follow recorded OpenAI traffic: a first delta with `role`, then reasoning
(`reasoning_content`), text and tool-call deltas, a finish chunk, a usage-only chunk
(`choices: []`) only when `stream_options.include_usage` is true, and `data: [DONE]`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

from ...usage import Usage
from ..script import Recorded, Reply
from . import sse

OVERFLOW_MESSAGE = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens."
)
_DONE = b"data: [DONE]\n\n"
# status -> (error type, error code) as OpenAI sends them
_ERROR_KINDS: dict[int, tuple[str, str | None]] = {
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


def is_stream(request: Recorded) -> bool:
    return isinstance(request.body, dict) and request.body.get("stream") is True


def encode_json(reply: Reply, request: Recorded) -> tuple[int, dict[str, str], dict[str, Any]]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.text if reply.text or not reply.tool_calls else None,
        "refusal": None,
    }
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in reply.tool_calls
        ]
    body = {
        **_envelope(request, "chat.completion"),
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish_reason}],
        "usage": _usage(reply.usage),
    }
    return reply.status, {}, body


def encode_stream(reply: Reply, request: Recorded) -> Iterator[bytes]:
    include_usage = _include_usage(request)
    envelope = _envelope(request, "chat.completion.chunk")
    if include_usage:
        envelope["usage"] = None

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return sse({**envelope, "choices": [choice]})

    yield chunk({"role": "assistant", "content": ""})
    for piece in reply.pieces(reply.reasoning or ""):
        yield chunk({"reasoning_content": piece})
    for piece in reply.pieces(reply.text):
        yield chunk({"content": piece})
    for index, call in enumerate(reply.tool_calls):
        start = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        yield chunk({"tool_calls": [start]})
        for piece in reply.pieces(call.arguments):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    if reply.stream_error is not None:
        yield sse({"error": {"message": reply.stream_error, "type": "server_error", "code": None}})
        return
    if reply.truncate:
        return
    yield chunk({}, reply.finish_reason)
    if include_usage:
        yield sse({**envelope, "choices": [], "usage": _usage(reply.usage)})
    yield _DONE


def error_body(status: int, message: str) -> dict[str, Any]:
    fallback = ("server_error" if status >= 500 else "invalid_request_error", None)
    kind, code = _ERROR_KINDS.get(status, fallback)
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def overflow_body() -> dict[str, Any]:
    return {
        "error": {
            "message": OVERFLOW_MESSAGE,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def _envelope(request: Recorded, kind: str) -> dict[str, Any]:
    model = request.body.get("model") if isinstance(request.body, dict) else None
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": kind,
        "created": int(time.time()),
        "model": model if isinstance(model, str) else "scripted-model",
    }


def _include_usage(request: Recorded) -> bool:
    options = request.body.get("stream_options") if isinstance(request.body, dict) else None
    return isinstance(options, dict) and options.get("include_usage") is True


def _usage(usage: Usage) -> dict[str, Any]:
    prompt_details: dict[str, int] = {"cached_tokens": usage.cache_read_tokens}
    if usage.cache_write_tokens:
        # OpenAI never reports cache writes; OpenAI-compatible gateways (OpenRouter) use this name.
        prompt_details["cache_write_tokens"] = usage.cache_write_tokens
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": prompt_details,
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
