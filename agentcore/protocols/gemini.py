"""Google Gemini (`POST {base_url}/models/{model}:generateContent`, `:streamGenerateContent?alt=sse`).

    from .gemini import adapter
    wire = adapter.build(request)        # WireRequest(url, headers, body)
    result = adapter.parse(json_body)    # non-streaming reply -> LLMResult
    parser = adapter.stream()            # streaming: parser.feed(sse_event) -> events; parser.result()
    message, overflow = adapter.error(400, body_text)

What the request carries (API.md §Wire):

| neutral                      | Gemini wire                                                          |
|------------------------------|----------------------------------------------------------------------|
| auth                         | `x-goog-api-key` header (never `?key=`)                              |
| system (+ output instructions)| `systemInstruction: {"parts": [{"text"}]}`                          |
| user text / image / file     | `text` / `inlineData {mimeType, data}` / `fileData {mimeType, fileUri}`|
|                              | (for URLs)                                                           |
| assistant text               | `text` (+ its `thoughtSignature`), role `model`                      |
| reasoning part               | with a Gemini signature: `{"text", "thought": true, "thoughtSignature"}`; |
|                              | without one only when capabilities.reasoning; other state dropped   |
| tool-call part               | `functionCall {name, args, id}` + its `thoughtSignature`. A call that |
|                              | did not come from Gemini gets the documented placeholder signature  |
|                              | "skip_thought_signature_validator" on the first call of its turn    |
|                              | (Gemini 3 rejects unsigned calls)                                   |
| tool results                 | one user content of `functionResponse {name, id, response}` with     |
|                              | `response` = `{"output": value}` or `{"error": text}`; media of       |
|                              | `content` results follow in a user content ("This is file <id>:")   |
| tools                        | `[{"functionDeclarations": [{name, description, parametersJsonSchema}]}]` |
|                              | (full JSON Schema; the older `parameters` field rejects keywords such |
|                              | as additionalProperties, const, $schema); top-level `$schema` is dropped |
| provider tool_choice         | `toolConfig.functionCallingConfig` mode AUTO / NONE / ANY, a named   |
|                              | tool as ANY + `allowedFunctionNames`                                 |
| provider temperature, top_p, | `generationConfig`: temperature, topP, topK, maxOutputTokens (else   |
| top_k, max_output_tokens,    | `max_tokens`), stopSequences, seed, presencePenalty, frequencyPenalty |
| stop, seed, penalties        |                                                                      |
| provider reasoning_effort    | `generationConfig.thinkingConfig`: `thinkingBudget` minimal 512, low |
|                              | 2048, medium 8192, high 24576, xhigh/max -1 (dynamic), none 0; with  |
|                              | `includeThoughts: true` unless "none"                               |
| provider parallel_tool_calls | Gemini has no such switch: dropped with a warning                    |
| output (object/array/json)   | `responseMimeType: application/json` (+ `responseJsonSchema`), unless |
|                              | functions are declared and the model name is not Gemini 3 or later  |
|                              | (Gemini 2.x rejects JSON mode with function calling): then the       |
|                              | instructions join the system instruction                             |
| cache                        | nothing (Gemini caches implicitly); a cache dict's `body` is merged  |

Replies: parts of `candidates[0]` only; `thought: true` parts are reasoning; a `thoughtSignature`
is kept as `provider_metadata={"protocol": "gemini", "thought_signature": ...}` on the part it came
with (tool-call parts always carry `{"protocol": "gemini"}`). Consecutive text (or thought) pieces
merge into one part, so a stream and a whole reply give the same parts.

Call ids: Gemini 3 sends `functionCall.id` and it is used as is. Otherwise the id is
`call_<n>_<hash>` where n is the call's position in the response and the hash covers the
response's `responseId`, the name, the arguments and the signature: deterministic for one
response (streamed or whole), and unique in a history because every response has its own
`responseId`. Results are matched back by that id (sent as `functionCall.id` /
`functionResponse.id`) and, as Gemini requires, by name and order.

Streaming: each SSE `data:` is a GenerateContentResponse chunk. Gemini sends no terminator event,
so `done` turns True when a chunk carries a `finishReason` (or a `promptFeedback.blockReason`);
chunks after it (a late usage report) are still read.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from .._utils.memo import active
from .._utils.sse import SSEEvent
from ..errors import AgentError
from ..usage import Usage
from ._common import (
    base_headers,
    cache_settings,
    check_provider,
    generated_call_id,
    merge_body,
    rendered_all,
    short_hash,
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
    join_url,
    make_result,
    media_kind,
    metadata_for,
    output_value_text,
    request_parts,
    split_data,
    text_of,
    tool_call_part,
)
from .errors import http_error, reply_error

log = logging.getLogger("agentcore")

NAME = "gemini"
PROTECTED_KEYS = ("model", "contents", "stream")
# Documented by Google for calls whose signature is unknown (e.g. history from another model).
SKIP_SIGNATURE = "skip_thought_signature_validator"
_THINKING_BUDGETS = {
    "none": 0,
    "minimal": 512,
    "low": 2048,
    "medium": 8192,
    "high": 24576,
    "xhigh": -1,
    "max": -1,
}
_GENERATION_KEYS = {
    "temperature": "temperature",
    "top_p": "topP",
    "top_k": "topK",
    "seed": "seed",
    "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty",
}
_CONTENT_FILTER = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
    }
)
_STATUS_KINDS = {
    "RESOURCE_EXHAUSTED": "limit",
    "UNAVAILABLE": "server",
    "INTERNAL": "server",
    "DEADLINE_EXCEEDED": "timeout",
    "INVALID_ARGUMENT": "request",
    "FAILED_PRECONDITION": "request",
    "NOT_FOUND": "request",
    "PERMISSION_DENIED": "auth",
    "UNAUTHENTICATED": "auth",
}


class GeminiAdapter:
    """The Gemini generateContent protocol: see the module docstring."""

    name = NAME

    def build(self, request: Request) -> WireRequest:
        """Translate a neutral request into the Gemini URL, headers and body.

        Raises:
            AgentError: kind "config" for bad provider/cache settings, kind "request" for media
                the capabilities forbid while `media_fallback` is "error".
        """
        provider = request.provider
        check_provider(provider)
        body: dict[str, Any] = {"contents": _contents(request)}
        declarations = _declarations(request)
        native_output = _native_output(request, declarations)
        system = _system_text(request, native_output)
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        if declarations:
            body["tools"] = [{"functionDeclarations": declarations}]
            tool_config = _tool_config(request)
            if tool_config is not None:
                body["toolConfig"] = tool_config
        generation = _generation_config(request, native_output)
        if generation:
            body["generationConfig"] = generation
        cache = cache_settings(
            request.cache, base_url=request.base_url, model=request.model, system=request.system
        )
        if cache is not None:
            merge_body(body, cache.body, source="cache['body']", protected=PROTECTED_KEYS)
        merge_body(body, provider.get("body"), source="provider['body']", protected=PROTECTED_KEYS)
        model = request.model.removeprefix("models/")
        path = (
            f"/models/{model}:streamGenerateContent?alt=sse"
            if request.stream
            else f"/models/{model}:generateContent"
        )
        auth = {"x-goog-api-key": request.api_key} if request.api_key else {}
        return WireRequest(join_url(request.base_url, path), base_headers(provider, auth), body)

    def parse(self, body: Any, request: Request | None = None) -> LLMResult:
        """Read a non-streaming reply (one GenerateContentResponse).

        `request` is accepted so every adapter can be called alike; Gemini needs none.

        Raises:
            AgentError: an `error` object in the body, or kind "unknown" for a body that is no response.
        """
        if isinstance(body, list) and len(body) == 1:
            body = body[0]
        if not isinstance(body, dict):
            raise AgentError("the gemini reply is not a JSON object", kind="unknown", status=200)
        reply = _Reply()
        reply.add(body, json.dumps(body))
        return reply.result(body)

    def stream(self, request: Request | None = None) -> GeminiStream:
        return GeminiStream()

    def error(self, status: int, body_text: str) -> tuple[str, bool]:
        """The vendor's error message, and whether it reports a context overflow (never for a 429)."""
        return http_error(status, body_text)


adapter = GeminiAdapter()


# ---------------------------------------------------------------- request: contents


def _contents(request: Request) -> list[dict[str, Any]]:
    contents = _joined_responses(rendered_all("gemini", _entry_contents, request, active()))
    if contents and contents[-1]["role"] == "model":
        # Gemini answers "Requests ending with a model turn are not supported"; the loop sends
        # one after a reply without tool calls.
        contents.append({"role": "user", "parts": [{"text": CONTINUE_TEXT}]})
    return contents


def _joined_responses(contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Results of one turn written in two tool messages (some calls waited for an approval) as
    the one content Gemini requires, in the order of the calls ("by name and order")."""
    merged: list[dict[str, Any]] | None = None
    for index, content in enumerate(contents):
        if index and _is_responses(content) and _is_responses(contents[index - 1]):
            merged = merged if merged is not None else list(contents[:index])
            previous = merged[-1]
            merged[-1] = {**previous, "parts": [*previous["parts"], *content["parts"]]}
        elif merged is not None:
            merged.append(content)
    if merged is None:
        return contents
    for index, content in enumerate(merged):
        if index and _is_responses(content) and merged[index - 1]["role"] == "model":
            order = {
                p["functionCall"].get("id"): n
                for n, p in enumerate(merged[index - 1]["parts"])
                if "functionCall" in p
            }
            parts = sorted(
                content["parts"], key=lambda p: order.get(p["functionResponse"].get("id"), len(order))
            )
            merged[index] = {**content, "parts": parts}
    return merged


def _is_responses(content: dict[str, Any]) -> bool:
    parts = content.get("parts")
    return content.get("role") == "user" and bool(parts) and all("functionResponse" in p for p in parts or ())


def _entry_contents(role: Any, content: Any, request: Request) -> list[dict[str, Any]]:
    """The contents of one history entry (computed once per run, see `_utils/memo.py`)."""
    if role in ("user", "compact"):
        parts = _user_parts(content, request)
        return [{"role": "user", "parts": parts}] if parts else []
    if role == "assistant":
        parts = _model_parts(content, request)
        return [{"role": "model", "parts": parts}] if parts else []
    if role == "tool":
        return list(_tool_contents(content or [], request))
    if role != "system":
        raise AgentError(f"cannot send a history message with role {role!r}", kind="request", retryable=False)
    return []


def _user_parts(content: Any, request: Request) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}] if content else []
    parts = request_parts(content, request)
    return [wire for wire in map(_content_part, parts) if wire is not None]


def _content_part(part: dict[str, Any]) -> dict[str, Any] | None:
    """A history content part as a Gemini part (None for an empty text)."""
    if part.get("type") == "text":
        text = str(part.get("text", ""))
        return {"text": text} if text else None
    kind = media_kind(part)
    if kind is None:
        return None
    if kind == "image":
        media_type, data, url = image_data(part)
    else:
        media_type, data, url = split_data(str(part.get("data", "")), str(part.get("media_type") or ""))
    if url is not None:
        return {"fileData": {"mimeType": media_type, "fileUri": url}}
    return {"inlineData": {"mimeType": media_type, "data": data or ""}}


def _model_parts(content: Any, request: Request) -> list[dict[str, Any]]:
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    wire: list[dict[str, Any]] = []
    signed_turn = False
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        meta = metadata_for(part, NAME) if isinstance(part, dict) else None
        signature = meta.get("thought_signature") if meta is not None else None
        if kind == "text" and part.get("text"):
            item: dict[str, Any] = {"text": str(part["text"])}
        elif kind == "reasoning" and (
            signature or (request.capabilities.get("reasoning") and part.get("text"))
        ):
            item = {"text": str(part.get("text") or ""), "thought": True}
        elif kind == "tool-call":
            call = {"name": str(part.get("tool_name", "")), "args": part.get("input") or {}}
            if part.get("tool_call_id"):
                call["id"] = str(part["tool_call_id"])
            item = {"functionCall": call}
            if signature is None and meta is None and not signed_turn:
                signature = SKIP_SIGNATURE
            signed_turn = True
        else:
            continue
        if signature:
            item["thoughtSignature"] = signature
        wire.append(item)
    return wire


def _tool_contents(results: list[dict[str, Any]], request: Request) -> list[dict[str, Any]]:
    """One user content of functionResponse parts; media of content results follow in another."""
    responses: list[dict[str, Any]] = []
    attachments: list[dict[str, Any]] = []
    for result in results:
        response, media = _function_response(result.get("output") or {}, request)
        function_response: dict[str, Any] = {"name": str(result.get("tool_name", "")), "response": response}
        if result.get("tool_call_id"):
            function_response["id"] = str(result["tool_call_id"])
        responses.append({"functionResponse": function_response})
        attachments.extend(media)
    contents = [{"role": "user", "parts": responses}] if responses else []
    if attachments:
        contents.append({"role": "user", "parts": attachments})
    return contents


def _function_response(
    output: dict[str, Any], request: Request
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    kind, value = output.get("type"), output.get("value")
    if kind in ("error-text", "error-json", "execution-denied"):
        return {"error": output_value_text(output)}, []
    if kind == "json":
        return {"output": value}, []
    if kind != "content" or not isinstance(value, list):
        return {"output": output_value_text(output)}, []
    lines: list[str] = []
    media: list[dict[str, Any]] = []
    parts = request_parts(value, request)
    for part in parts:
        wire = _content_part(part)
        if wire is None:
            continue
        if "text" in wire:
            lines.append(str(wire["text"]))
            continue
        # Gemini 2.x takes no media inside functionResponse: name it here, send it right after.
        file_id = short_hash(json.dumps(wire, sort_keys=True), length=6)
        lines.append(f"See file {file_id}.")
        media += [{"text": f"This is file {file_id}:"}, wire]
    return {"output": "\n".join(lines)}, media


# ---------------------------------------------------------------- request: system, tools, generation


def _native_output(request: Request, declarations: list[dict[str, Any]]) -> bool:
    """JSON mode when asked for and allowed, unless functions are declared to a model before Gemini 3.

    Gemini 2.x answers JSON mode plus function calling with a 400 ("Function calling with a
    response mime type: 'application/json' is unsupported"); Gemini 3 takes both (see the
    recorded `native_output_with_function_tools` fixtures).
    """
    if request.output is None or not request.capabilities.get("structured_output", True):
        return False
    return not declarations or _major_version(request.model) >= 3


def _major_version(model: str) -> int:
    """3 for "gemini-3-flash-preview", 0 when the name does not say (then the safe path is taken)."""
    found = re.search(r"gemini-(\d+)", model)
    return int(found.group(1)) if found else 0


def _system_text(request: Request, native_output: bool) -> str:
    parts = [request.system] if request.system else []
    parts += [text_of(m.get("content")) for m in request.messages if m.get("role") == "system"]
    if request.output is not None and not native_output:
        parts.append(str(request.output.instructions()))
    return "\n\n".join(p for p in parts if p)


def _declarations(request: Request) -> list[dict[str, Any]]:
    if not request.capabilities.get("tools", True):
        return []
    return [
        {
            "name": tool["name"],
            "description": tool.get("description") or "",
            "parametersJsonSchema": _json_schema(
                tool.get("input_schema") or {"type": "object", "properties": {}}
            ),
        }
        for tool in request.tools
    ]


def _json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in schema.items() if key != "$schema"}


def _tool_config(request: Request) -> dict[str, Any] | None:
    provider = request.provider
    if provider.get("tool_choice") is None or not request.capabilities.get("tool_choice", True):
        return None
    mode, name = tool_choice(provider["tool_choice"])
    if name:
        return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}}
    return {"functionCallingConfig": {"mode": {"auto": "AUTO", "none": "NONE", "required": "ANY"}[mode]}}


def _generation_config(request: Request, native_output: bool) -> dict[str, Any]:
    provider = request.provider
    config = {wire: provider[key] for key, wire in _GENERATION_KEYS.items() if provider.get(key) is not None}
    max_tokens = provider.get("max_output_tokens")
    if max_tokens is None:
        max_tokens = request.max_tokens
    if max_tokens is not None:
        config["maxOutputTokens"] = max_tokens
    stop = provider.get("stop")
    if stop is not None:
        config["stopSequences"] = [stop] if isinstance(stop, str) else list(stop)
    effort = provider.get("reasoning_effort")
    if effort is not None:
        if effort not in _THINKING_BUDGETS:
            raise AgentError(
                f"provider['reasoning_effort'] {effort!r} is not one of {', '.join(_THINKING_BUDGETS)}",
                kind="config",
            )
        thinking: dict[str, Any] = {"thinkingBudget": _THINKING_BUDGETS[str(effort)]}
        if effort != "none":
            thinking["includeThoughts"] = True
        config["thinkingConfig"] = thinking
    if provider.get("parallel_tool_calls") is not None:
        log.warning("provider['parallel_tool_calls'] has no gemini equivalent; it is not sent")
    spec = request.output
    if native_output and spec is not None:
        config["responseMimeType"] = "application/json"
        schema = spec.wire_schema()
        if schema is not None:
            config["responseJsonSchema"] = _json_schema(schema)
    return config


# ---------------------------------------------------------------- reply


class _Reply:
    """The parts of one response as its chunks arrive (a whole reply is one chunk)."""

    def __init__(self) -> None:
        self.parts: list[dict[str, Any]] = []
        self.calls: list[ToolCall] = []
        self.finish: str | None = None
        self.blocked = False
        self.usage: Usage | None = None
        self.response_id = ""

    def add(self, chunk: dict[str, Any], raw: str) -> list[dict[str, Any]]:
        """Read one chunk; return the neutral events it produced.

        Raises:
            AgentError: the chunk is an error object.
        """
        if isinstance(chunk.get("error"), dict):
            raise reply_error(chunk["error"], raw, _STATUS_KINDS, kind_keys=("status",))
        if isinstance(chunk.get("usageMetadata"), dict):
            self.usage = _usage(chunk["usageMetadata"])
        if isinstance(chunk.get("responseId"), str):
            self.response_id = chunk["responseId"]
        feedback = chunk.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            self.blocked = True
        candidate = _first_candidate(chunk.get("candidates"))
        if candidate is None:
            return []
        if candidate.get("finishReason"):
            self.finish = str(candidate["finishReason"])
        content = candidate.get("content")
        events: list[dict[str, Any]] = []
        for part in content.get("parts") or [] if isinstance(content, dict) else []:
            if isinstance(part, dict):
                events += self._part(part)
        return events

    @property
    def finished(self) -> bool:
        return self.finish is not None or self.blocked

    def result(self, raw: Any) -> LLMResult:
        if self.finish is not None:
            finish = _finish(self.finish)
        else:
            finish = "content_filter" if self.blocked else "other"
        return make_result(self.parts, self.usage, finish, raw, tool_calls=list(self.calls))

    def _part(self, part: dict[str, Any]) -> list[dict[str, Any]]:
        signature = part.get("thoughtSignature") or part.get("thought_signature")
        call = part.get("functionCall") or part.get("function_call")
        if isinstance(call, dict):
            return self._call(call, signature)
        text = part.get("text")
        if not isinstance(text, str):
            return []
        kind = "reasoning" if part.get("thought") is True else "text"
        last = self.parts[-1] if self.parts and self.parts[-1]["type"] == kind else None
        if last is not None and not (signature and _signature(last)):
            last["text"] += text
        elif text or signature:
            last = {"type": kind, "text": text}
            self.parts.append(last)
        if signature and last is not None:
            last["provider_metadata"] = {"protocol": NAME, "thought_signature": signature}
        if not text:
            return []
        return [{"type": "text-delta" if kind == "text" else "reasoning-delta", "text": text}]

    def _call(self, call: dict[str, Any], signature: Any) -> list[dict[str, Any]]:
        name = str(call.get("name") or "")
        args = call.get("args")
        arguments = args if isinstance(args, dict) else {}
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            seed = json.dumps(arguments, sort_keys=True, ensure_ascii=False)
            call_id = generated_call_id(len(self.calls), self.response_id, name, seed, signature or "")
        meta: dict[str, Any] = {"protocol": NAME}
        if signature:
            meta["thought_signature"] = signature
        self.parts.append(tool_call_part(call_id, name, arguments, provider_metadata=meta))
        self.calls.append(ToolCall(call_id, name, arguments))
        return [{"type": "tool-call", "tool_call_id": call_id, "tool_name": name, "input": arguments}]


def _signature(part: dict[str, Any]) -> Any:
    meta = part.get("provider_metadata")
    return meta.get("thought_signature") if isinstance(meta, dict) else None


def _first_candidate(candidates: Any) -> dict[str, Any] | None:
    if not isinstance(candidates, list):
        return None
    for candidate in candidates:
        if isinstance(candidate, dict) and candidate.get("index", 0) == 0:
            return candidate
    return None


def _finish(reason: str) -> str:
    if reason == "STOP":
        return "stop"
    if reason == "MAX_TOKENS":
        return "length"
    if reason in _CONTENT_FILTER:
        return "content_filter"
    return "other"


def _usage(meta: dict[str, Any]) -> Usage:
    output = _count(meta.get("candidatesTokenCount")) + _count(meta.get("thoughtsTokenCount"))
    return Usage.of(
        input_tokens=meta.get("promptTokenCount"),
        output_tokens=output,
        cache_read_tokens=meta.get("cachedContentTokenCount"),
        total_tokens=meta.get("totalTokenCount"),
    )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# ---------------------------------------------------------------- stream


class GeminiStream:
    """Accumulates one streamed Gemini reply (see `StreamParser` in base.py)."""

    def __init__(self) -> None:
        self.done = False
        self._chunks: list[dict[str, Any]] = []
        self._reply = _Reply()

    def feed(self, event: SSEEvent) -> list[dict[str, Any]]:
        """Take one SSE event (one response chunk); return the neutral events it produced.

        Raises:
            AgentError: an error chunk, or kind "unknown" for data that is not JSON.
        """
        data = event.data.strip()
        if not data or data == "[DONE]":
            return []
        chunk = stream_object(data, "gemini", one_item_list=True)
        self._chunks.append(chunk)
        events = self._reply.add(chunk, data)
        self.done = self.done or self._reply.finished
        return events

    def result(self) -> LLMResult:
        return self._reply.result(self._chunks)


# ---------------------------------------------------------------- errors
