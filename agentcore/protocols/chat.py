"""OpenAI chat completions (`POST {base_url}/chat/completions`) and the servers that copy it.

    from .chat import adapter
    wire = adapter.build(request)        # WireRequest(url, headers, body)
    result = adapter.parse(json_body)    # non-streaming reply -> LLMResult
    parser = adapter.stream()            # streaming: parser.feed(sse_event) -> events; parser.result()
    message, overflow = adapter.error(400, body_text)

Pure translation, no I/O. Choices made for compatible servers (vLLM, llama.cpp, Ollama, DeepSeek):
the output limit travels as `max_tokens` (all of them read it; `max_completion_tokens` is newer and
not read everywhere); `top_k` is sent as is (vLLM and llama.cpp read it, OpenAI rejects it, so it
is only sent when set); text-only user content travels as a plain string; video goes as a
`video_url` part (vLLM / Qwen style; OpenAI has no video input).
"""

from __future__ import annotations

import json
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
    generated_call_id,
    merge_body,
    rendered_all,
    short_hash,
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
    output_value_text,
    parse_arguments,
    request_parts,
    split_data,
    text_of,
    tool_call_part,
)
from .errors import http_error, reply_error

PROTECTED_KEYS = ("model", "messages", "stream")
# Provider keys sent under their own name; `top_k` is not OpenAI's but vLLM and llama.cpp read it.
_SAME_NAME_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "stop",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "reasoning_effort",
)
_FINISH = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}
_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/vnd.wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
    "audio/mpeg3": "mp3",
    "audio/x-mp3": "mp3",
}
_ERROR_CODE_KINDS = {
    "rate_limit_exceeded": "limit",
    "rate_limit_error": "limit",
    "insufficient_quota": "limit",
    "invalid_api_key": "auth",
    "authentication_error": "auth",
    "permission_error": "auth",
    "timeout": "timeout",
    "invalid_request_error": "request",
}


class ChatAdapter:
    """The chat completions protocol: see the module docstring."""

    name = "chat"

    def build(self, request: Request) -> WireRequest:
        """Translate a neutral request into the chat completions URL, headers and body.

        Raises:
            AgentError: kind "config" for bad provider/cache settings, kind "request" for
                media the capabilities forbid while `media_fallback` is "error".
        """
        provider = request.provider
        check_provider(provider)
        choice = tool_choice(provider["tool_choice"]) if provider.get("tool_choice") is not None else None
        body: dict[str, Any] = {
            "model": request.model,
            "messages": _messages(request),
            "stream": request.stream,
        }
        if request.stream and request.capabilities.get("usage", True):
            body["stream_options"] = {"include_usage": True}
        tools = _tools(request)
        if tools:
            # OpenAI rejects tool_choice / parallel_tool_calls without tools.
            body["tools"] = tools
            if choice is not None and request.capabilities.get("tool_choice", True):
                mode, name = choice
                body["tool_choice"] = {"type": "function", "function": {"name": name}} if name else mode
            if provider.get("parallel_tool_calls") is not None:
                body["parallel_tool_calls"] = provider["parallel_tool_calls"]
        response_format = _response_format(request)
        if response_format is not None:
            body["response_format"] = response_format
        max_tokens = provider.get("max_output_tokens")
        if max_tokens is None:
            max_tokens = request.max_tokens
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        body.update({key: provider[key] for key in _SAME_NAME_KEYS if provider.get(key) is not None})
        _apply_cache(body, request)
        merge_body(body, provider.get("body"), source="provider['body']", protected=PROTECTED_KEYS)
        auth = {"Authorization": f"Bearer {request.api_key}"} if request.api_key else {}
        return WireRequest(
            join_url(request.base_url, "/chat/completions"), base_headers(provider, auth), body
        )

    def parse(self, body: Any, request: Request | None = None) -> LLMResult:
        """Read a non-streaming reply (the parsed JSON body).

        Raises:
            AgentError: an `error` object in the body, or kind "unknown" for a body without choices.
        """
        if not isinstance(body, dict):
            raise AgentError(
                "the chat reply is not a JSON object", kind="unknown", status=200, body=repr(body)
            )
        if body.get("error") and not body.get("choices"):
            raise reply_error(body["error"], json.dumps(body), _ERROR_CODE_KINDS)
        choice = _first_choice(body.get("choices"))
        if choice is None:
            raise AgentError(
                "the chat reply has no choices", kind="unknown", status=200, body=json.dumps(body)
            )
        message = choice.get("message") or {}
        drafts = []
        for position, call in enumerate(_function_calls(message)):
            draft = _new_draft(call, position, body)
            draft.arguments.append(_arguments_text((call.get("function") or {}).get("arguments")))
            drafts.append(draft)
        return _result(
            reasoning=_reasoning_of(message),
            text=_message_text(message),
            drafts=drafts,
            usage=_usage(body.get("usage")),
            finish=choice.get("finish_reason"),
            raw=body,
        )

    def stream(self, request: Request | None = None) -> ChatStream:
        return ChatStream()

    def error(self, status: int, body_text: str) -> tuple[str, bool]:
        """The vendor's error message, and whether it reports a context overflow.

        A 429 is never an overflow: "Request too large ... tokens per min" is a rate limit.
        """
        return http_error(status, body_text)


adapter = ChatAdapter()


# ---------------------------------------------------------------- request: messages


def _messages(request: Request) -> list[dict[str, Any]]:
    system = _system_text(request)
    lead = [{"role": "system", "content": system}] if system else []
    return rendered_all("chat", _render_entry, request, active(), lead)


def _render_entry(role: Any, content: Any, request: Request) -> list[dict[str, Any]]:
    """The wire messages of one history entry (computed once per run, see `_utils/memo.py`)."""
    if role in ("user", "compact"):
        return [{"role": "user", "content": _user_content(content, request)}]
    if role == "system":
        return [{"role": "system", "content": content if isinstance(content, str) else text_of(content)}]
    if role == "assistant":
        assistant = _assistant_message(content, request)
        # An empty reply is stored in history but never sent (API.md §Details).
        return [] if assistant is None else [assistant]
    if role == "tool":
        return _tool_messages(content or [], request)
    raise AgentError(f"cannot send a history message with role {role!r}", kind="request", retryable=False)


def _system_text(request: Request) -> str:
    spec = request.output
    native = request.capabilities.get("structured_output", True)
    # json_object mode also needs the word "JSON" in the prompt, so it gets the instructions too.
    if spec is None or (native and spec.kind != "json"):
        return request.system
    instructions = str(spec.instructions())
    return f"{request.system}\n\n{instructions}" if request.system else instructions


def _user_content(content: Any, request: Request) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts = request_parts(content, request)
    wire = [w for w in (_content_part(p) for p in parts) if w is not None]
    # A lone text part goes as a plain string: some compatible servers take only strings.
    if len(wire) == 1 and wire[0]["type"] == "text":
        return str(wire[0]["text"])
    return wire or ""


def _assistant_message(content: Any, request: Request) -> dict[str, Any] | None:
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    text = text_of(parts)
    calls = [
        {
            "id": p["tool_call_id"],
            "type": "function",
            "function": {
                "name": p["tool_name"],
                "arguments": json.dumps(p.get("input") or {}, ensure_ascii=False),
            },
        }
        for p in parts
        if p.get("type") == "tool-call"
    ]
    if not text and not calls:
        return None
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    reasoning = "".join(str(p.get("text", "")) for p in parts if p.get("type") == "reasoning")
    if reasoning and request.capabilities.get("reasoning", False):
        message["reasoning_content"] = reasoning
    return message


def _tool_messages(results: list[dict[str, Any]], request: Request) -> list[dict[str, Any]]:
    """One tool message per result; their images and files follow in one user message.

    Chat tool messages carry text only, so each media part is named in the tool text
    ("See file <id>.") and sent after the tool messages, labelled "This is file <id>:"
    (the shape pydantic-ai sends, see the recorded `multimodal_tool_return` fixtures).
    """
    messages: list[dict[str, Any]] = []
    attachments: list[dict[str, Any]] = []
    for result in results:
        text, media = _tool_output(result.get("output") or {}, request)
        messages.append({"role": "tool", "tool_call_id": result.get("tool_call_id", ""), "content": text})
        attachments.extend(media)
    if attachments:
        messages.append({"role": "user", "content": attachments})
    return messages


def _tool_output(output: dict[str, Any], request: Request) -> tuple[str, list[dict[str, Any]]]:
    value = output.get("value")
    if output.get("type") != "content" or not isinstance(value, list):
        return output_value_text(output), []
    lines: list[str] = []
    media: list[dict[str, Any]] = []
    parts = request_parts(value, request)
    for part in parts:
        wire = _content_part(part)
        if wire is None:
            continue
        if wire["type"] == "text":
            lines.append(str(wire["text"]))
            continue
        file_id = short_hash(json.dumps(wire, sort_keys=True), length=6)
        lines.append(f"See file {file_id}.")
        media += [{"type": "text", "text": f"This is file {file_id}:"}, wire]
    return "\n".join(lines), media


# ---------------------------------------------------------------- request: content parts


def _content_part(part: dict[str, Any]) -> dict[str, Any] | None:
    """A history content part as a chat content part (None for parts chat cannot carry)."""
    if part.get("type") == "text":
        return {"type": "text", "text": str(part.get("text", ""))}
    kind = media_kind(part)
    if kind == "image":
        media_type, data, url = image_data(part)
        return {"type": "image_url", "image_url": {"url": url or data_url(media_type, data or "")}}
    if kind is None:
        return None
    media_type, data, url = split_data(str(part.get("data", "")), str(part.get("media_type") or ""))
    if kind == "video":
        return {"type": "video_url", "video_url": {"url": url or data_url(media_type, data or "")}}
    if url is not None:
        # Chat has no file-by-URL input, and adapters do no I/O: the model gets the address.
        return {"type": "text", "text": f"[{kind} {media_type}: {url}]"}
    audio_format = _AUDIO_FORMATS.get(media_type.lower()) if kind == "audio" else None
    if audio_format is not None:
        return {"type": "input_audio", "input_audio": {"data": data, "format": audio_format}}
    filename = str(part.get("filename") or _default_filename(media_type))
    return {"type": "file", "file": {"file_data": data_url(media_type, data or ""), "filename": filename}}


def _default_filename(media_type: str) -> str:
    subtype = media_type.partition("/")[2].split(";")[0].split("+")[0]
    return f"file.{subtype}" if subtype.isalnum() else "file"


# ---------------------------------------------------------------- request: tools, output, cache


def _tools(request: Request) -> list[dict[str, Any]]:
    if not request.capabilities.get("tools", True):
        return []
    return [
        {
            "type": "function",
            "function": {
                "name": tool["name"],
                "description": tool.get("description") or "",
                "parameters": tool.get("input_schema") or {"type": "object", "properties": {}},
            },
        }
        for tool in request.tools
    ]


def _response_format(request: Request) -> dict[str, Any] | None:
    spec = request.output
    if spec is None or not request.capabilities.get("structured_output", True):
        return None
    if spec.kind == "json":
        return {"type": "json_object"}
    return {
        "type": "json_schema",
        "json_schema": {"name": spec.name, "schema": spec.wire_schema(), "strict": False},
    }


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


@dataclass
class _CallDraft:
    """One tool call being assembled: arguments arrive as text pieces."""

    id: str
    name: str
    arguments: list[str] = field(default_factory=list)
    id_sent: bool = True

    def finished(self) -> tuple[dict[str, Any], ToolCall]:
        arguments, raw = parse_arguments("".join(self.arguments))
        return tool_call_part(self.id, self.name, arguments), ToolCall(self.id, self.name, arguments, raw)


class ChatStream:
    """Accumulates one streamed chat reply (see `StreamParser` in base.py)."""

    def __init__(self) -> None:
        self.done = False
        self._chunks: list[dict[str, Any]] = []
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: list[_CallDraft] = []
        self._slots: dict[int, _CallDraft] = {}
        self._usage: dict[str, Any] | None = None
        self._finish: str | None = None
        self._announced = 0

    def feed(self, event: SSEEvent) -> list[dict[str, Any]]:
        """Take one SSE event; return the neutral events it produced.

        Raises:
            AgentError: an in-stream error object, or kind "unknown" for a chunk that is not JSON.
        """
        data = event.data.strip()
        if self.done or not data:
            return []
        if data == "[DONE]":
            self.done = True
            return self._announce_calls()
        chunk = _load_chunk(data, event.event)
        self._chunks.append(chunk)
        if isinstance(chunk.get("usage"), dict):
            self._usage = chunk["usage"]
        choice = _first_choice(chunk.get("choices"))
        if choice is None:
            return []
        events = self._read_delta(choice.get("delta") or {}, chunk)
        if choice.get("finish_reason") is not None:
            self._finish = choice["finish_reason"]
            events += self._announce_calls()
        return events

    def result(self) -> LLMResult:
        return _result(
            reasoning="".join(self._reasoning) if self._reasoning else None,
            text="".join(self._text),
            drafts=self._calls,
            usage=_usage(self._usage),
            finish=self._finish,
            raw=self._chunks,
        )

    def _read_delta(self, delta: dict[str, Any], chunk: dict[str, Any]) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        reasoning = _reasoning_of(delta)
        if reasoning:
            self._reasoning.append(reasoning)
            events.append({"type": "reasoning-delta", "text": reasoning})
        text = _message_text(delta)
        if text:
            self._text.append(text)
            events.append({"type": "text-delta", "text": text})
        for position, call in enumerate(_function_calls(delta)):
            started = len(self._calls)
            delta_event = self._merge_call(call, position, chunk)
            if len(self._calls) > started:
                # Calls stream one after another: a new one starting means the earlier ones are
                # complete, so a cancel from here on keeps them (API.md: "calls that were complete").
                events += self._announce(len(self._calls) - 1)
            events.append(delta_event)
        return events

    def _merge_call(self, call: dict[str, Any], position: int, chunk: dict[str, Any]) -> dict[str, Any]:
        """Merge one `delta.tool_calls` item by `index`: id and name from the first, arguments joined."""
        index = call["index"] if isinstance(call.get("index"), int) else position
        draft = self._slots.get(index)
        call_id = call.get("id")
        # A new id at a used index starts a new call (servers that number every call 0).
        if draft is None or (call_id and draft.id_sent and call_id != draft.id):
            draft = _new_draft(call, index, chunk)
            self._slots[index] = draft
            self._calls.append(draft)
        function = call.get("function") or {}
        if function.get("name") and not draft.name:
            draft.name = str(function["name"])
        piece = _arguments_text(function.get("arguments"))
        if piece:
            draft.arguments.append(piece)
        return {"type": "tool-call-delta", "tool_call_id": draft.id, "tool_name": draft.name, "delta": piece}

    def _announce_calls(self) -> list[dict[str, Any]]:
        return self._announce(len(self._calls))

    def _announce(self, upto: int) -> list[dict[str, Any]]:
        """`tool-call` events for the calls before `upto` not announced yet."""
        events = []
        for draft in self._calls[self._announced : upto]:
            part, _ = draft.finished()
            events.append(
                {
                    "type": "tool-call",
                    "tool_call_id": draft.id,
                    "tool_name": draft.name,
                    "input": part["input"],
                }
            )
        self._announced = max(self._announced, upto)
        return events


def _result(
    *,
    reasoning: str | None,
    text: str,
    drafts: list[_CallDraft],
    usage: Usage | None,
    finish: Any,
    raw: Any,
) -> LLMResult:
    """Parts in reply order: reasoning, text, then the tool calls."""
    parts: list[dict[str, Any]] = []
    if reasoning:
        parts.append({"type": "reasoning", "text": reasoning})
    parts.append({"type": "text", "text": text})
    calls: list[ToolCall] = []
    for draft in drafts:
        part, call = draft.finished()
        parts.append(part)
        calls.append(call)
    neutral = "stop" if finish is None else _FINISH.get(str(finish), "other")
    return make_result(parts, usage, neutral, raw, tool_calls=calls)


def _load_chunk(data: str, event_name: str) -> dict[str, Any]:
    chunk = stream_object(data, "chat")
    if chunk.get("error") or event_name == "error":
        raise reply_error(chunk.get("error") or chunk, data, _ERROR_CODE_KINDS)
    return chunk


def _first_choice(choices: Any) -> dict[str, Any] | None:
    """Choice index 0 (only the first choice counts)."""
    if not isinstance(choices, list):
        return None
    candidates = [c for c in choices if isinstance(c, dict)]
    for choice in candidates:
        if choice.get("index", 0) == 0:
            return choice
    return None


def _message_text(message: dict[str, Any]) -> str:
    """`content` (a string, or text parts on some servers); a refusal counts as text."""
    content = message.get("content")
    if isinstance(content, list):
        content = text_of(content)
    if not content and isinstance(message.get("refusal"), str):
        content = message["refusal"]
    return content if isinstance(content, str) else ""


def _reasoning_of(message: dict[str, Any]) -> str:
    """`reasoning_content` (DeepSeek, vLLM, llama.cpp) or else `reasoning` (Ollama, OpenRouter)."""
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _function_calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    """Function tool calls of a message or delta, including the legacy `function_call`."""
    calls = message.get("tool_calls")
    found = (
        [c for c in calls if isinstance(c, dict) and c.get("type", "function") == "function"]
        if isinstance(calls, list)
        else []
    )
    legacy = message.get("function_call")
    if not found and isinstance(legacy, dict):
        found = [{"index": 0, "function": legacy}]
    return found


def _new_draft(call: dict[str, Any], position: int, reply: dict[str, Any]) -> _CallDraft:
    """A call with its id and name; servers that send no id get a generated one."""
    index = call["index"] if isinstance(call.get("index"), int) else position
    name = str((call.get("function") or {}).get("name") or "")
    call_id = call.get("id")
    if isinstance(call_id, str) and call_id:
        return _CallDraft(call_id, name)
    # Deterministic for one response, so its streamed and whole forms agree.
    generated = generated_call_id(index, reply.get("id", ""), reply.get("created", ""), name)
    return _CallDraft(generated, name, id_sent=False)


def _arguments_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _usage(usage: Any) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    cache_read = details.get("cached_tokens")
    if cache_read is None:
        cache_read = usage.get("prompt_cache_hit_tokens")  # DeepSeek
    return Usage.of(
        input_tokens=usage.get("prompt_tokens"),
        output_tokens=usage.get("completion_tokens"),
        cache_read_tokens=cache_read,
        cache_write_tokens=details.get("cache_write_tokens"),
        total_tokens=usage.get("total_tokens"),
    )


# ---------------------------------------------------------------- errors
