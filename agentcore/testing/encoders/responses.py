"""OpenAI Responses wire format for scripted replies.

    status, headers, body = encode_json(reply, request)   # a "response" object
    for chunk in encode_stream(reply, request): ...       # `event: response.*` SSE events

Shapes follow recorded OpenAI traffic. Output items come in the order reasoning, message,
function calls. A stream sends `response.created` and `response.in_progress`, then for each
item `response.output_item.added`, its part and delta events and `response.output_item.done`,
then the terminal `response.completed` (`response.incomplete` for a `length` or
`content_filter` finish) carrying the whole response object; `stream_error` sends an `error`
event instead. Every event has `type` and a `sequence_number`.

Reasoning items carry a fake `encrypted_content`, `fake_encrypted_content(text)`, so a test
can check that the client sends it back.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Callable, Iterator
from itertools import count
from typing import Any

from ...usage import Usage
from ..script import Recorded, Reply, ScriptedCall
from . import chat, sse

OVERFLOW_MESSAGE = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)
# neutral finish -> incomplete_details.reason; any other finish completes the response
_INCOMPLETE_REASONS = {"length": "max_output_tokens", "content_filter": "content_filter"}


def is_stream(request: Recorded) -> bool:
    return isinstance(request.body, dict) and request.body.get("stream") is True


def encode_json(reply: Reply, request: Recorded) -> tuple[int, dict[str, str], dict[str, Any]]:
    ids = _Ids.new()
    items = [item for _, item in _items(reply, ids)]
    return reply.status, {}, _response(reply, request, ids, items, final=True)


def encode_stream(reply: Reply, request: Recorded) -> Iterator[bytes]:
    ids = _Ids.new()
    counter = count()

    def event(kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, **fields, "sequence_number": next(counter)}, event=kind)

    started = _response(reply, request, ids, [], final=False)
    yield event("response.created", response=started)
    yield event("response.in_progress", response=started)
    done_items: list[dict[str, Any]] = []
    for index, (pieces, item) in enumerate(_items(reply, ids)):
        yield from _item_events(event, index, item, pieces)
        done_items.append(item)
    if reply.stream_error is not None:
        yield event("error", code="server_error", message=reply.stream_error, param=None)
        return
    if reply.truncate:
        return
    final = _response(reply, request, ids, done_items, final=True)
    yield event(f"response.{final['status']}", response=final)


def error_body(status: int, message: str) -> dict[str, Any]:
    # Same vendor, same error envelope as chat completions.
    return chat.error_body(status, message)


def overflow_body() -> dict[str, Any]:
    return {
        "error": {
            "message": OVERFLOW_MESSAGE,
            "type": "invalid_request_error",
            "param": "input",
            "code": "context_length_exceeded",
        }
    }


def fake_encrypted_content(text: str) -> str:
    """The `encrypted_content` sent with a reasoning item whose summary is `text`."""
    return base64.b64encode(f"encrypted:{text}".encode("utf-8", "surrogatepass")).decode()


# ---------------------------------------------------------------- output items


class _Ids:
    """The ids of one reply: the response's and one per output item, shared by JSON and stream."""

    def __init__(self, stem: str) -> None:
        self.stem = stem
        self.response = f"resp_{stem}"

    @classmethod
    def new(cls) -> _Ids:
        return cls(uuid.uuid4().hex)

    def item(self, prefix: str, index: int) -> str:
        return f"{prefix}_{self.stem}{index:02d}"


def _items(reply: Reply, ids: _Ids) -> list[tuple[list[str], dict[str, Any]]]:
    """The reply's output items as they end, each with the deltas that stream its text."""
    items: list[tuple[list[str], dict[str, Any]]] = []
    if reply.reasoning is not None:
        items.append((reply.pieces(reply.reasoning), _reasoning_item(reply.reasoning, ids.item("rs", 0))))
    if reply.text or not reply.tool_calls:
        # A reply cut short leaves its message item incomplete too.
        status = "incomplete" if reply.finish_reason in _INCOMPLETE_REASONS else "completed"
        items.append((reply.pieces(reply.text), _message_item(reply.text, ids.item("msg", 1), status)))
    for index, call in enumerate(reply.tool_calls):
        items.append((reply.pieces(call.arguments), _call_item(call, ids.item("fc", index + 2))))
    return items


def _reasoning_item(text: str, item_id: str) -> dict[str, Any]:
    summary = [{"type": "summary_text", "text": text}] if text else []
    return {
        "id": item_id,
        "type": "reasoning",
        "encrypted_content": fake_encrypted_content(text),
        "summary": summary,
    }


def _message_item(text: str, item_id: str, status: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [_output_text(text)],
    }


def _output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def _call_item(call: ScriptedCall, item_id: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "function_call",
        "status": "completed",
        "arguments": call.arguments,
        "call_id": call.id,
        "name": call.name,
    }


# ---------------------------------------------------------------- stream events


def _item_events(
    event: Callable[..., bytes], index: int, item: dict[str, Any], pieces: list[str]
) -> Iterator[bytes]:
    """added, the item's part/delta events, done: the order OpenAI streams one item in."""
    where = {"item_id": item["id"], "output_index": index}
    kind = item["type"]
    if kind == "reasoning":
        yield event("response.output_item.added", output_index=index, item={**item, "summary": []})
        if item["summary"]:
            part, at = item["summary"][0], {**where, "summary_index": 0}
            yield event("response.reasoning_summary_part.added", **at, part={**part, "text": ""})
            for piece in pieces:
                yield event("response.reasoning_summary_text.delta", **at, delta=piece)
            yield event("response.reasoning_summary_text.done", **at, text=part["text"])
            yield event("response.reasoning_summary_part.done", **at, part=part)
    elif kind == "message":
        added = {**item, "status": "in_progress", "content": []}
        yield event("response.output_item.added", output_index=index, item=added)
        part, at = item["content"][0], {**where, "content_index": 0}
        yield event("response.content_part.added", **at, part=_output_text(""))
        for piece in pieces:
            yield event("response.output_text.delta", **at, delta=piece, logprobs=[])
        yield event("response.output_text.done", **at, text=part["text"], logprobs=[])
        yield event("response.content_part.done", **at, part=part)
    else:
        added = {**item, "status": "in_progress", "arguments": ""}
        yield event("response.output_item.added", output_index=index, item=added)
        for piece in pieces:
            yield event("response.function_call_arguments.delta", **where, delta=piece)
        yield event("response.function_call_arguments.done", **where, arguments=item["arguments"])
    yield event("response.output_item.done", output_index=index, item=item)


# ---------------------------------------------------------------- response object


def _response(
    reply: Reply, request: Recorded, ids: _Ids, output: list[dict[str, Any]], *, final: bool
) -> dict[str, Any]:
    """The response object: in progress (stream start) or final, echoing the request's settings."""
    body = request.body if isinstance(request.body, dict) else {}
    reason = _INCOMPLETE_REASONS.get(reply.finish_reason) if final else None
    status = "in_progress" if not final else "incomplete" if reason else "completed"
    created = int(time.time())
    return {
        "id": ids.response,
        "object": "response",
        "created_at": created,
        "status": status,
        "background": False,
        "completed_at": created if final else None,
        "error": None,
        "incomplete_details": {"reason": reason} if reason else None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": body.get("model") if isinstance(body.get("model"), str) else "scripted-model",
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "prompt_cache_key": body.get("prompt_cache_key"),
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "store": body.get("store", True),
        "temperature": body.get("temperature", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools", []),
        "top_p": body.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": _usage(reply.usage, reply) if final else None,
        "user": None,
        "metadata": {},
    }


def _usage(usage: Usage, reply: Reply) -> dict[str, Any]:
    input_details: dict[str, int] = {"cached_tokens": usage.cache_read_tokens}
    if usage.cache_write_tokens:
        input_details["cache_write_tokens"] = usage.cache_write_tokens
    # Reasoning tokens are part of output_tokens; estimated like the script's own counts.
    reasoning_tokens = min(len(reply.reasoning or "") // 4, usage.output_tokens)
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": input_details,
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": usage.total_tokens,
    }
