"""Google Gemini wire format for scripted replies.

    status, headers, body = encode_json(reply, request)   # a GenerateContentResponse
    for chunk in encode_stream(reply, request): ...       # one GenerateContentResponse per `data:`

Shapes follow recorded Gemini traffic. Parts come in the order thought (`"thought": true`),
text, function calls. A stream (`:streamGenerateContent?alt=sse`, `\\r\\n` line endings as
Gemini sends them) carries the reasoning and text in pieces, one part per chunk, all function
calls whole in one chunk, and a last chunk with an empty text part, `finishReason` and the full
`usageMetadata`. Gemini has no terminator, so `truncate` ends the stream before that chunk; an
in-stream error is a chunk holding only an `error` object.

Gemini sends no call ids unless the script item sets `gemini_call_ids: True` (newer models
send `functionCall.id`). A fake `thoughtSignature`, `fake_signature(name)`, rides on the first
function-call part, or without calls on the first text part after reasoning, as Gemini 2.5 and
3 place them, so a test can check that the client sends it back.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from typing import Any

from ...usage import Usage
from ..script import Recorded, Reply, ScriptedCall
from . import sse

EXTRA_KEYS = frozenset({"gemini_call_ids"})
OVERFLOW_MESSAGE = "The input token count (1500000) exceeds the maximum number of tokens allowed (1048576)."
_STREAM_SUFFIX = ":streamGenerateContent"
_CRLF = "\r\n"
_FINISH_REASONS = {
    "stop": "STOP",
    "tool_calls": "STOP",
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
    "other": "OTHER",
}
_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def is_stream(request: Recorded) -> bool:
    return request.path.endswith(_STREAM_SUFFIX)


def encode_json(reply: Reply, request: Recorded) -> tuple[int, dict[str, str], dict[str, Any]]:
    parts = _thought_parts([reply.reasoning or ""])
    parts += _text_parts(reply, [reply.text] if reply.text else [])
    parts += _call_parts(reply)
    content: dict[str, Any] = {"parts": parts, "role": "model"} if parts else {"role": "model"}
    candidate = {"content": content, "finishReason": _finish_reason(reply), "index": 0}
    return reply.status, {}, _chunk(request, candidate, _usage(reply.usage, reply), _response_id())


def encode_stream(reply: Reply, request: Recorded) -> Iterator[bytes]:
    response_id = _response_id()
    running = _prompt_usage(reply.usage)

    def chunk(parts: list[dict[str, Any]]) -> bytes:
        candidate = {"content": {"parts": parts, "role": "model"}, "index": 0}
        return _data(_chunk(request, candidate, running, response_id))

    for part in _thought_parts(reply.pieces(reply.reasoning or "")):
        yield chunk([part])
    text_parts = _text_parts(reply, reply.pieces(reply.text))
    for part in text_parts:
        yield chunk([part])
    calls = _call_parts(reply)
    if calls:
        yield chunk(calls)
    if reply.stream_error is not None:
        yield _data({"error": {"code": 500, "message": reply.stream_error, "status": "INTERNAL"}})
        return
    if reply.truncate:
        return
    last: dict[str, Any] = {"text": ""}
    if _signs_text(reply) and not text_parts:
        last["thoughtSignature"] = fake_signature("")
    candidate = {
        "content": {"parts": [last], "role": "model"},
        "finishReason": _finish_reason(reply),
        "index": 0,
    }
    yield _data(_chunk(request, candidate, _usage(reply.usage, reply), response_id))


def error_body(status: int, message: str) -> dict[str, Any]:
    name = _STATUSES.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT")
    return {"error": {"code": status, "message": message, "status": name}}


def overflow_body() -> dict[str, Any]:
    return error_body(400, OVERFLOW_MESSAGE)


def fake_signature(name: str) -> str:
    """The `thoughtSignature` sent on the part that starts a reply: a call of `name`, or text ("")."""
    return base64.b64encode(f"thought_signature:{name}".encode("utf-8", "surrogatepass")).decode()


# ---------------------------------------------------------------- parts


def _thought_parts(pieces: list[str]) -> list[dict[str, Any]]:
    return [{"text": piece, "thought": True} for piece in pieces if piece]


def _text_parts(reply: Reply, pieces: list[str]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"text": piece} for piece in pieces]
    if parts and _signs_text(reply):
        parts[0]["thoughtSignature"] = fake_signature("")
    return parts


def _signs_text(reply: Reply) -> bool:
    """Without calls, a thinking reply's signature rides on its first text part."""
    return reply.reasoning is not None and not reply.tool_calls


def _call_parts(reply: Reply) -> list[dict[str, Any]]:
    send_ids = reply.item.get("gemini_call_ids") is True
    parts = [_call_part(call, send_ids) for call in reply.tool_calls]
    if parts:
        parts[0]["thoughtSignature"] = fake_signature(reply.tool_calls[0].name)
    return parts


def _call_part(call: ScriptedCall, send_id: bool) -> dict[str, Any]:
    # `args` must be an object: a raw argument text that is not one cannot be sent by Gemini.
    function_call: dict[str, Any] = {"name": call.name, "args": call.input or {}}
    if send_id:
        function_call["id"] = call.id
    return {"functionCall": function_call}


# ---------------------------------------------------------------- envelope


def _chunk(
    request: Recorded, candidate: dict[str, Any], usage: dict[str, Any], response_id: str
) -> dict[str, Any]:
    return {
        "candidates": [candidate],
        "usageMetadata": usage,
        "modelVersion": _model(request),
        "responseId": response_id,
    }


def _model(request: Recorded) -> str:
    """The model named in the path: `.../models/{model}:generateContent`."""
    name = request.path.rsplit("/models/", 1)[-1].split(":", 1)[0]
    return name or "scripted-model"


def _finish_reason(reply: Reply) -> str:
    return _FINISH_REASONS.get(reply.finish_reason, reply.finish_reason)


def _usage(usage: Usage, reply: Reply) -> dict[str, Any]:
    """usageMetadata: thoughts are counted apart from candidates, and zero counts are left out."""
    thoughts = min(len(reply.reasoning or "") // 4, usage.output_tokens) if reply.reasoning else 0
    meta: dict[str, Any] = _prompt_usage(usage)
    if usage.output_tokens - thoughts:
        meta["candidatesTokenCount"] = usage.output_tokens - thoughts
    if thoughts:
        meta["thoughtsTokenCount"] = thoughts
    meta["totalTokenCount"] = usage.total_tokens
    return meta


def _prompt_usage(usage: Usage) -> dict[str, Any]:
    """What chunks before the last report: the prompt only."""
    meta: dict[str, Any] = {
        "promptTokenCount": usage.input_tokens,
        "totalTokenCount": usage.input_tokens,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": usage.input_tokens}],
    }
    if usage.cache_read_tokens:
        meta["cachedContentTokenCount"] = usage.cache_read_tokens
    return meta


def _data(payload: dict[str, Any]) -> bytes:
    return sse(payload, newline=_CRLF)


def _response_id() -> str:
    return uuid.uuid4().hex[:23]
