"""OpenAI Responses (`POST {base_url}/responses`), used statelessly.

    from .responses import adapter
    wire = adapter.build(request)        # WireRequest(url, headers, body)
    result = adapter.parse(json_body)    # non-streaming reply -> LLMResult
    parser = adapter.stream()            # streaming: parser.feed(sse_event) -> events; parser.result()
    message, overflow = adapter.error(400, body_text)

Stateless: every request carries the whole input with `store: false`, and always asks for
`include: ["reasoning.encrypted_content"]`, so reasoning items can be sent back by value.

What the request carries (API.md §Wire):

| neutral                       | Responses wire                                                     |
|-------------------------------|--------------------------------------------------------------------|
| system (+ output instructions)| `instructions`                                                     |
| user text / image / file      | `input_text` / `input_image` (data URL or URL) / `input_file`     |
|                               | (`file_data` data URL + `filename`, or `file_url`); audio and video|
|                               | have no Responses input: AgentError(kind="request")               |
| user / system / assistant     | `{"type": "message", "role", "content"}`: every item names its     |
|   messages                    | type (llama.cpp rejects one without it); assistant text is a plain |
|                               | string (the schema's assistant input form)                         |
| reasoning part (responses)    | `{"type": "reasoning", "id", "encrypted_content", "summary"}`      |
|                               | (summary text only with capabilities.reasoning); others dropped    |
| tool-call part                | `function_call` (`call_id`, `name`, `arguments`, `id` = fc_ item)  |
| tool result                   | `function_call_output`: `output` string, or a list of             |
|                               | input_text / input_image / input_file for `content` results        |
| provider temperature, top_p   | same name                                                          |
| provider max_output_tokens    | `max_output_tokens` (else `max_tokens`)                            |
| provider reasoning_effort     | `reasoning: {"effort": ...}`                                       |
| provider tool_choice          | "auto" / "none" / "required" / `{"type": "function", "name"}`     |
| provider parallel_tool_calls  | same name (only with tools)                                        |
| provider top_k, stop, seed,   | not part of the Responses API: dropped with a warning on the      |
| presence/frequency_penalty    | "agentcore" logger                                                 |
| output (object / array)       | `text.format` json_schema (strict false); `json()` -> json_object  |
|                               | plus the instructions (json_object needs the word JSON)            |
| cache                         | `prompt_cache_key`, `prompt_cache_retention`, cache body merged    |

Replies: `message` items give text (a `refusal` part turns the finish into content_filter),
`reasoning` items give reasoning parts with `provider_metadata={"protocol": "responses", "id",
"encrypted_content"}`, `function_call` items give tool calls whose id is the `call_id` (the `fc_`
item id is kept in the part's provider_metadata); built-in tool items are ignored. A stream's
result is read from the `response` object of its terminal event (`response.completed`,
`.incomplete`, `.failed`), or from the accumulated items when that object has no output.
"""

from __future__ import annotations

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
    data_url,
    merge_body,
    rendered_all,
    stream_object,
    tool_choice,
)
from .base import (
    LLMResult,
    Request,
    ToolCall,
    WireRequest,
    image_data,
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

NAME = "responses"
PROTECTED_KEYS = ("model", "input", "stream")
_UNSUPPORTED_KEYS = ("top_k", "stop", "presence_penalty", "frequency_penalty", "seed")
_TERMINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")
_ERROR_CODE_KINDS = {
    "rate_limit_exceeded": "limit",
    "insufficient_quota": "limit",
    "invalid_api_key": "auth",
    "invalid_prompt": "request",
    "invalid_request_error": "request",
    "context_length_exceeded": "request",
}


class ResponsesAdapter:
    """The OpenAI Responses protocol: see the module docstring."""

    name = NAME

    def build(self, request: Request) -> WireRequest:
        """Translate a neutral request into the Responses URL, headers and body.

        Raises:
            AgentError: kind "config" for bad provider/cache settings, kind "request" for media
                the capabilities forbid (media_fallback "error") or Responses cannot carry.
        """
        provider = request.provider
        check_provider(provider)
        body: dict[str, Any] = {
            "model": request.model,
            "input": _input_items(request),
            "stream": request.stream,
            "store": False,
            "include": ["reasoning.encrypted_content"],
        }
        instructions = _instructions(request)
        if instructions:
            body["instructions"] = instructions
        _apply_tools(body, request)
        text_format = _text_format(request)
        if text_format is not None:
            body["text"] = {"format": text_format}
        _apply_generation(body, request)
        _apply_cache(body, request)
        merge_body(body, provider.get("body"), source="provider['body']", protected=PROTECTED_KEYS)
        auth = {"Authorization": f"Bearer {request.api_key}"} if request.api_key else {}
        return WireRequest(join_url(request.base_url, "/responses"), base_headers(provider, auth), body)

    def parse(self, body: Any, request: Request | None = None) -> LLMResult:
        """Read a non-streaming reply (the parsed response object).

        `request` is accepted so every adapter can be called alike; Responses needs none.

        Raises:
            AgentError: the reply is a failed response or an error object, or is not a response.
        """
        if not isinstance(body, dict):
            raise AgentError("the responses reply is not a JSON object", kind="unknown", status=200)
        if isinstance(body.get("error"), dict):
            raise reply_error(body["error"], json.dumps(body), _ERROR_CODE_KINDS)
        if "output" not in body and "status" not in body:
            raise AgentError(
                "the responses reply has no output", kind="unknown", status=200, body=json.dumps(body)
            )
        return _result(body, body.get("output") or [], raw=body, terminal=True)

    def stream(self, request: Request | None = None) -> ResponsesStream:
        return ResponsesStream()

    def error(self, status: int, body_text: str) -> tuple[str, bool]:
        """The vendor's error message, and whether it reports a context overflow (never for a 429)."""
        return http_error(status, body_text)


adapter = ResponsesAdapter()


# ---------------------------------------------------------------- request: input items


def _instructions(request: Request) -> str:
    spec = request.output
    native = request.capabilities.get("structured_output", True)
    # json_object mode needs the word "JSON" in the prompt, so it gets the instructions too.
    if spec is None or (native and spec.kind != "json"):
        return request.system
    instructions = str(spec.instructions())
    return f"{request.system}\n\n{instructions}" if request.system else instructions


def _input_items(request: Request) -> list[dict[str, Any]]:
    return rendered_all("responses", _entry_items, request, active())


def _entry_items(role: Any, content: Any, request: Request) -> list[dict[str, Any]]:
    """The input items of one history entry (computed once per run, see `_utils/memo.py`)."""
    if role in ("user", "compact"):
        user = _user_content(content, request)
        return [{"type": "message", "role": "user", "content": user}] if user else []
    if role == "system":
        return [{"type": "message", "role": "system", "content": text_of(content)}]
    if role == "assistant":
        return list(_assistant_items(content, request))
    if role == "tool":
        return [_tool_output_item(result, request) for result in content or []]
    raise AgentError(f"cannot send a history message with role {role!r}", kind="request", retryable=False)


def _user_content(content: Any, request: Request) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts = request_parts(content, request)
    return [wire for wire in map(_input_part, parts) if wire is not None]


def _input_part(part: dict[str, Any]) -> dict[str, Any] | None:
    """A history content part as a Responses input content part."""
    if part.get("type") == "text":
        text = str(part.get("text", ""))
        return {"type": "input_text", "text": text} if text else None
    kind = media_kind(part)
    if kind is None:
        return None
    if kind == "image":
        media_type, data, url = image_data(part)
        return {"type": "input_image", "image_url": url or data_url(media_type, data or ""), "detail": "auto"}
    if kind in ("audio", "video"):
        # Responses rejects audio/video files ("unsupported MIME type 'audio/mpeg'", see the
        # recorded fixtures): fail here rather than send a request that is sure to be refused.
        raise AgentError(
            f"the responses protocol cannot send {kind} content; set capabilities.{kind}=False "
            'and media_fallback="strip" to drop it',
            kind="request",
            retryable=False,
        )
    media_type, data, url = split_data(str(part.get("data", "")), str(part.get("media_type") or ""))
    if url is not None:
        return {"type": "input_file", "file_url": url}
    filename = str(part.get("filename") or _default_filename(media_type))
    return {"type": "input_file", "filename": filename, "file_data": data_url(media_type, data or "")}


def _default_filename(media_type: str) -> str:
    subtype = media_type.partition("/")[2].split(";")[0].split("+")[0]
    return f"file.{subtype}" if subtype.isalnum() else "file"


def _assistant_items(content: Any, request: Request) -> list[dict[str, Any]]:
    """Assistant parts in order: text runs as assistant messages, reasoning and function calls as items."""
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    items: list[dict[str, Any]] = []
    text: list[str] = []

    def flush_text() -> None:
        joined = "".join(text)
        if joined:
            items.append({"type": "message", "role": "assistant", "content": joined})
        text.clear()

    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            text.append(str(part.get("text", "")))
            continue
        if kind == "reasoning":
            item = _reasoning_item(part, request)
        elif kind == "tool-call":
            item = _function_call_item(part)
        else:
            continue
        if item is not None:
            flush_text()
            items.append(item)
    flush_text()
    # A reasoning item must be followed by the output it led to ("provided without its required
    # following item"); a reply that ended while reasoning leaves one dangling.
    while items and items[-1].get("type") == "reasoning":
        items.pop()
    return items


def _reasoning_item(part: dict[str, Any], request: Request) -> dict[str, Any] | None:
    """A reasoning item sent back by value; only our own items with encrypted content travel.

    Without `encrypted_content` the id alone points at a stored item, which `store: false`
    never keeps ("Item with id 'rs_…' not found"), so such parts are dropped.
    """
    meta = metadata_for(part, NAME)
    if meta is None or not meta.get("encrypted_content") or not meta.get("id"):
        return None
    text = str(part.get("text") or "")
    summary = (
        [{"type": "summary_text", "text": text}] if text and request.capabilities.get("reasoning") else []
    )
    return {
        "type": "reasoning",
        "id": meta["id"],
        "encrypted_content": meta["encrypted_content"],
        "summary": summary,
    }


def _function_call_item(part: dict[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "function_call",
        "call_id": str(part.get("tool_call_id", "")),
        "name": str(part.get("tool_name", "")),
        "arguments": json.dumps(part.get("input") or {}, ensure_ascii=False),
    }
    meta = metadata_for(part, NAME)
    if meta is not None and meta.get("id"):
        item["id"] = meta["id"]
    return item


def _tool_output_item(result: dict[str, Any], request: Request) -> dict[str, Any]:
    output = result.get("output") or {}
    value = output.get("value")
    wire: str | list[dict[str, Any]]
    if output.get("type") == "content" and isinstance(value, list):
        parts = request_parts(value, request)
        wire = [w for w in map(_input_part, parts) if w is not None]
    else:
        wire = output_value_text(output)
    return {"type": "function_call_output", "call_id": str(result.get("tool_call_id", "")), "output": wire}


# ---------------------------------------------------------------- request: tools, generation, cache


def _apply_tools(body: dict[str, Any], request: Request) -> None:
    if not request.capabilities.get("tools", True) or not request.tools:
        return
    body["tools"] = [
        {
            "type": "function",
            "name": tool["name"],
            "description": tool.get("description") or "",
            "parameters": tool.get("input_schema") or {"type": "object", "properties": {}},
            # strict needs every property required and closed objects; user schemas rarely are.
            "strict": False,
        }
        for tool in request.tools
    ]
    provider = request.provider
    if provider.get("tool_choice") is not None and request.capabilities.get("tool_choice", True):
        mode, name = tool_choice(provider["tool_choice"])
        body["tool_choice"] = {"type": "function", "name": name} if name else mode
    if provider.get("parallel_tool_calls") is not None:
        body["parallel_tool_calls"] = provider["parallel_tool_calls"]


def _text_format(request: Request) -> dict[str, Any] | None:
    spec = request.output
    if spec is None or not request.capabilities.get("structured_output", True):
        return None
    if spec.kind == "json":
        return {"type": "json_object"}
    return {"type": "json_schema", "name": spec.name, "schema": spec.wire_schema(), "strict": False}


def _apply_generation(body: dict[str, Any], request: Request) -> None:
    provider = request.provider
    for key in ("temperature", "top_p"):
        if provider.get(key) is not None:
            body[key] = provider[key]
    max_tokens = provider.get("max_output_tokens")
    if max_tokens is None:
        max_tokens = request.max_tokens
    if max_tokens is not None:
        body["max_output_tokens"] = max_tokens
    if provider.get("reasoning_effort") is not None:
        body["reasoning"] = {"effort": provider["reasoning_effort"]}
    for key in _UNSUPPORTED_KEYS:
        if provider.get(key) is not None:
            log.warning("provider[%r] is not part of the responses protocol; it is not sent", key)


def _apply_cache(body: dict[str, Any], request: Request) -> None:
    cache = cache_settings(
        request.cache, base_url=request.base_url, model=request.model, system=request.system
    )
    if cache is None:
        return
    body["prompt_cache_key"] = cache.key
    if cache.retention is not None:
        body["prompt_cache_retention"] = cache.retention
    merge_body(body, cache.body, source="cache['body']", protected=PROTECTED_KEYS)


# ---------------------------------------------------------------- reply


def _result(response: dict[str, Any], items: list[Any], *, raw: Any, terminal: bool) -> LLMResult:
    """An LLMResult from output items and the response object's status and usage."""
    parts: list[dict[str, Any]] = []
    calls: list[ToolCall] = []
    refused = False
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            text, item_refused = _message_text(item)
            refused = refused or item_refused
            parts.append({"type": "text", "text": text})
        elif kind == "reasoning":
            parts.append(_reasoning_part(item))
        elif kind == "function_call":
            part, call = _function_call(item)
            parts.append(part)
            calls.append(call)
    finish = _finish(response) if terminal else "other"
    if refused and finish == "stop":
        finish = "content_filter"
    return make_result(parts, _usage(response.get("usage")), finish, raw, tool_calls=calls)


def _message_text(item: dict[str, Any]) -> tuple[str, bool]:
    text: list[str] = []
    refused = False
    for content in item.get("content") or []:
        if not isinstance(content, dict):
            continue
        if content.get("type") == "output_text":
            text.append(str(content.get("text") or ""))
        elif content.get("type") == "refusal":
            refused = True
    return "".join(text), refused


def _reasoning_part(item: dict[str, Any]) -> dict[str, Any]:
    """Summary text then reasoning_text content; the opaque state goes to provider_metadata."""
    pieces = [str(s.get("text") or "") for s in item.get("summary") or [] if isinstance(s, dict)]
    pieces += [
        str(c.get("text") or "")
        for c in item.get("content") or []
        if isinstance(c, dict) and c.get("type") == "reasoning_text"
    ]
    meta: dict[str, Any] = {"protocol": NAME, "id": item.get("id")}
    if item.get("encrypted_content"):
        meta["encrypted_content"] = item["encrypted_content"]
    return {"type": "reasoning", "text": "".join(pieces), "provider_metadata": meta}


def _function_call(item: dict[str, Any]) -> tuple[dict[str, Any], ToolCall]:
    call_id = str(item.get("call_id") or item.get("id") or "")
    name = str(item.get("name") or "")
    arguments, raw = parse_arguments(_arguments_text(item.get("arguments")))
    part = tool_call_part(
        call_id, name, arguments, provider_metadata={"protocol": NAME, "id": item.get("id")}
    )
    return part, ToolCall(call_id, name, arguments, raw)


def _arguments_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _finish(response: dict[str, Any]) -> str:
    status = response.get("status")
    if status == "completed":
        return "stop"
    if status == "incomplete":
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        if reason == "max_output_tokens":
            return "length"
        if reason == "content_filter":
            return "content_filter"
    return "other"


def _usage(usage: Any) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    details = usage.get("input_tokens_details")
    details = details if isinstance(details, dict) else {}
    return Usage.of(
        input_tokens=usage.get("input_tokens"),
        output_tokens=usage.get("output_tokens"),
        cache_read_tokens=details.get("cached_tokens"),
        cache_write_tokens=details.get("cache_write_tokens"),
        total_tokens=usage.get("total_tokens"),
    )


# ---------------------------------------------------------------- stream


@dataclass
class _ItemDraft:
    """One output item as it streams: the `added` item, deltas, then the `done` item."""

    item: dict[str, Any]
    text: list[str] = field(default_factory=list)
    summary: dict[int, list[str]] = field(default_factory=dict)
    reasoning_text: list[str] = field(default_factory=list)
    arguments: list[str] = field(default_factory=list)
    done: bool = False

    def current(self) -> dict[str, Any] | None:
        """The item as far as it arrived; a function call counts only once complete."""
        if self.done:
            return self.item
        kind = self.item.get("type")
        if kind == "message":
            return {**self.item, "content": [{"type": "output_text", "text": "".join(self.text)}]}
        if kind == "reasoning":
            summary = [
                {"type": "summary_text", "text": "".join(self.summary[i])} for i in sorted(self.summary)
            ]
            content = (
                [{"type": "reasoning_text", "text": "".join(self.reasoning_text)}]
                if self.reasoning_text
                else []
            )
            return {**self.item, "summary": summary, "content": content}
        return None


class ResponsesStream:
    """Accumulates one streamed Responses reply (see `StreamParser` in base.py)."""

    def __init__(self) -> None:
        self.done = False
        self._events: list[dict[str, Any]] = []
        self._drafts: dict[int, _ItemDraft] = {}
        self._response: dict[str, Any] | None = None

    def feed(self, event: SSEEvent) -> list[dict[str, Any]]:
        """Take one SSE event; return the neutral events it produced.

        Raises:
            AgentError: an `error` event or a failed response, or kind "unknown" for data that is not JSON.
        """
        data = event.data.strip()
        if self.done or not data or data == "[DONE]":
            return []
        payload = stream_object(data, "responses")
        self._events.append(payload)
        kind = str(payload.get("type") or event.event)
        if kind == "error":
            error = payload.get("error") if isinstance(payload.get("error"), dict) else payload
            raise reply_error(error, data, _ERROR_CODE_KINDS)
        if kind in _TERMINAL_EVENTS:
            return self._finish(payload, kind, data)
        if kind == "response.output_item.added":
            self._drafts[_index(payload)] = _ItemDraft(dict(payload.get("item") or {}))
            return []
        if kind == "response.output_item.done":
            return self._item_done(payload)
        return self._delta(kind, payload)

    def result(self) -> LLMResult:
        """The reply so far: the terminal response's output, else the accumulated items."""
        response = self._response or {}
        items = response.get("output")
        if not items:
            items = [d.current() for _, d in sorted(self._drafts.items())]
        return _result(
            response,
            [i for i in items if i is not None],
            raw=self._events,
            terminal=self._response is not None,
        )

    def _finish(self, payload: dict[str, Any], kind: str, data: str) -> list[dict[str, Any]]:
        response = payload.get("response")
        self._response = response if isinstance(response, dict) else {}
        self.done = True
        if kind == "response.failed" and isinstance(self._response.get("error"), dict):
            raise reply_error(self._response["error"], data, _ERROR_CODE_KINDS)
        return []

    def _item_done(self, payload: dict[str, Any]) -> list[dict[str, Any]]:
        item = payload.get("item")
        if not isinstance(item, dict):
            return []
        draft = self._drafts.setdefault(_index(payload), _ItemDraft(item))
        draft.item, draft.done = item, True
        if item.get("type") != "function_call":
            return []
        part, _ = _function_call(item)
        return [
            {
                "type": "tool-call",
                "tool_call_id": part["tool_call_id"],
                "tool_name": part["tool_name"],
                "input": part["input"],
            }
        ]

    def _delta(self, kind: str, payload: dict[str, Any]) -> list[dict[str, Any]]:
        delta = payload.get("delta")
        draft = self._drafts.get(_index(payload))
        if not isinstance(delta, str) or not delta or draft is None:
            return []
        if kind == "response.output_text.delta":
            draft.text.append(delta)
            return [{"type": "text-delta", "text": delta}]
        if kind == "response.reasoning_summary_text.delta":
            index = payload.get("summary_index")
            draft.summary.setdefault(index if isinstance(index, int) else 0, []).append(delta)
            return [{"type": "reasoning-delta", "text": delta}]
        if kind == "response.reasoning_text.delta":
            draft.reasoning_text.append(delta)
            return [{"type": "reasoning-delta", "text": delta}]
        if kind == "response.function_call_arguments.delta":
            draft.arguments.append(delta)
            call_id = str(draft.item.get("call_id") or draft.item.get("id") or "")
            return [
                {
                    "type": "tool-call-delta",
                    "tool_call_id": call_id,
                    "tool_name": str(draft.item.get("name") or ""),
                    "delta": delta,
                }
            ]
        return []


def _index(payload: dict[str, Any]) -> int:
    index = payload.get("output_index")
    return index if isinstance(index, int) else 0


# ---------------------------------------------------------------- errors
