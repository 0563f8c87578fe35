"""Anthropic Messages wire format for scripted replies.

    status, headers, body = encode_json(reply, request)   # a "message"
    for chunk in encode_stream(reply, request): ...       # `event: message_start` ... `message_stop`

Shapes follow recorded Anthropic traffic. Content blocks come in the order thinking,
redacted thinking, text, tool use. A stream sends `message_start`, then per block
`content_block_start`, its deltas (`thinking_delta` + `signature_delta`, `text_delta`,
`input_json_delta`) and `content_block_stop` (a `ping` follows the first block start), then
`message_delta` with the stop reason and usage, and `message_stop`.

Thinking blocks carry a fake `signature`, `fake_signature(text)`, so a test can check that the
client sends it back. The script key `redacted_thinking` (a str, or a list of them) adds
`redacted_thinking` blocks with that `data`.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from typing import Any

from ...usage import Usage
from ..script import Recorded, Reply, ScriptedCall
from . import sse

EXTRA_KEYS = frozenset({"redacted_thinking"})
OVERFLOW_MESSAGE = "prompt is too long: 210000 tokens > 200000 maximum"
_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
    "other": "pause_turn",
}
# usage fields that message_start reports and message_delta does not repeat
_START_ONLY_USAGE = ("cache_creation", "service_tier")
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def is_stream(request: Recorded) -> bool:
    return isinstance(request.body, dict) and request.body.get("stream") is True


def encode_json(reply: Reply, request: Recorded) -> tuple[int, dict[str, str], dict[str, Any]]:
    body = {
        **_message(reply, request),
        "content": [block for block, _ in _blocks(reply)],
        "stop_reason": _stop_reason(reply),
        "usage": _usage(reply.usage),
    }
    return reply.status, {}, body


def encode_stream(reply: Reply, request: Recorded) -> Iterator[bytes]:
    start_usage = {**_usage(reply.usage), "output_tokens": min(1, reply.usage.output_tokens)}
    started = {**_message(reply, request), "content": [], "stop_reason": None, "usage": start_usage}
    yield _event("message_start", message=started)
    for index, (block, deltas) in enumerate(_blocks(reply)):
        yield _event("content_block_start", index=index, content_block=_opening(block))
        if index == 0:
            yield _event("ping")
        for delta in deltas:
            yield _event("content_block_delta", index=index, delta=delta)
        yield _event("content_block_stop", index=index)
    if reply.stream_error is not None:
        yield _event("error", error={"type": "overloaded_error", "message": reply.stream_error})
        return
    if reply.truncate:
        return
    delta = {"stop_reason": _stop_reason(reply), "stop_sequence": None}
    usage = {key: value for key, value in _usage(reply.usage).items() if key not in _START_ONLY_USAGE}
    yield _event("message_delta", delta=delta, usage=usage)
    yield _event("message_stop")


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": _request_id()}


def overflow_body() -> dict[str, Any]:
    return error_body(400, OVERFLOW_MESSAGE)


def fake_signature(text: str) -> str:
    """The `signature` sent with a thinking block whose text is `text`."""
    return base64.b64encode(f"signature:{text}".encode("utf-8", "surrogatepass")).decode()


# ---------------------------------------------------------------- content blocks


def _message(reply: Reply, request: Recorded) -> dict[str, Any]:
    model = request.body.get("model") if isinstance(request.body, dict) else None
    return {
        "id": f"msg_01{uuid.uuid4().hex[:22]}",
        "type": "message",
        "role": "assistant",
        "model": model if isinstance(model, str) else "scripted-model",
        "stop_sequence": None,
    }


def _blocks(reply: Reply) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each content block as it ends, with the deltas that stream it."""
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    if reply.reasoning is not None:
        signature = fake_signature(reply.reasoning)
        deltas = [{"type": "thinking_delta", "thinking": piece} for piece in reply.pieces(reply.reasoning)]
        deltas.append({"type": "signature_delta", "signature": signature})
        blocks.append(({"type": "thinking", "thinking": reply.reasoning, "signature": signature}, deltas))
    for data in _redacted(reply):
        blocks.append(({"type": "redacted_thinking", "data": data}, []))
    if reply.text or not reply.tool_calls:
        deltas = [{"type": "text_delta", "text": piece} for piece in reply.pieces(reply.text)]
        blocks.append(({"type": "text", "text": reply.text}, deltas))
    for call in reply.tool_calls:
        blocks.append((_tool_use(call), _input_deltas(reply, call)))
    return blocks


def _redacted(reply: Reply) -> list[str]:
    value = reply.item.get("redacted_thinking")
    if value is None:
        return []
    values = [value] if isinstance(value, str) else list(value)
    if not all(isinstance(data, str) for data in values):
        raise TypeError("script item key 'redacted_thinking' must be a str or a list of str")
    return values


def _tool_use(call: ScriptedCall) -> dict[str, Any]:
    # A non-object argument text cannot be a tool_use `input`; it only exists as streamed JSON.
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": call.input or {}}


def _input_deltas(reply: Reply, call: ScriptedCall) -> list[dict[str, Any]]:
    # Anthropic opens every tool input with an empty piece, and sends only that one for `{}`.
    pieces = [""] + ([] if call.input == {} else reply.pieces(call.arguments))
    return [{"type": "input_json_delta", "partial_json": piece} for piece in pieces]


def _opening(block: dict[str, Any]) -> dict[str, Any]:
    """A block as `content_block_start` announces it: empty, except redacted data."""
    kind = block["type"]
    if kind == "thinking":
        return {"type": "thinking", "thinking": "", "signature": ""}
    if kind == "text":
        return {"type": "text", "text": ""}
    if kind == "tool_use":
        return {**block, "input": {}}
    return block


def _stop_reason(reply: Reply) -> str:
    return _STOP_REASONS.get(reply.finish_reason, reply.finish_reason)


def _usage(usage: Usage) -> dict[str, Any]:
    # Neutral input_tokens counts cached prompt tokens; Anthropic reports the three apart.
    uncached = max(0, usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens)
    return {
        "input_tokens": uncached,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.cache_write_tokens,
            "ephemeral_1h_input_tokens": 0,
        },
        "output_tokens": usage.output_tokens,
        "service_tier": "standard",
    }


def _event(kind: str, **fields: Any) -> bytes:
    return sse({"type": kind, **fields}, event=kind)


def _request_id() -> str:
    return f"req_011C{uuid.uuid4().hex[:20]}"
