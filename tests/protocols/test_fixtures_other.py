"""Recorded real traffic for the responses, anthropic and gemini adapters.

Every fixture in `tests/fixtures/recorded/{responses,anthropic,gemini}/` (see its README) is
checked twice:

* its response goes through our parser (SSE through `SSEParser`, then `stream()`; JSON through
  `parse()`) and must give what the vendor's official SDK gave (`expect`): text, reasoning, tool
  calls, finish reason, usage (nulls read as 0) and, for HTTP errors, the vendor's message;
* its request is turned back into the equivalent neutral conversation, our adapter builds that
  conversation, and the result must have the vendor's shape: top-level keys, item / block / part
  types in order, roles. Vendor features the library does not model (built-in server tools and
  their history blocks, background mode, compaction items, ...) are left out of both sides.
  Our Responses bodies are also validated against `CreateResponse` of OpenAI's OpenAPI file.

A fixture we believe is wrong would be listed in `WRONG_FIXTURES` with the reason; none is.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from openapi_check import validate_create_response
from recorded import RECORDED

from agentcore import output as output_specs
from agentcore._utils.sse import SSEParser
from agentcore.errors import AgentError
from agentcore.protocols import get
from agentcore.protocols.base import DEFAULT_CAPABILITIES, LLMResult, Request

PROTOCOLS = ("responses", "anthropic", "gemini")

# fixture id -> why we believe the recorded expectation is wrong (each one skipped, with its reason).
WRONG_FIXTURES: dict[str, str] = {}


def _fixture_paths() -> list[Any]:
    paths = [p for protocol in PROTOCOLS for p in sorted((RECORDED / protocol).glob("*.json"))]
    assert paths, f"no recorded fixtures under {RECORDED}"
    return [pytest.param(p, id=p.stem) for p in paths]


FIXTURES = _fixture_paths()


def _load(path: Path) -> dict[str, Any]:
    fixture: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if fixture["id"] in WRONG_FIXTURES:
        pytest.skip("not applicable: " + WRONG_FIXTURES[fixture["id"]])
    return fixture


# ---------------------------------------------------------------- replies


def _parse(fixture: dict[str, Any]) -> LLMResult:
    adapter = get(fixture["protocol"])
    body = fixture["response"]["body"]
    if not fixture["stream"]:
        return adapter.parse(json.loads(body))
    parser = adapter.stream()
    sse = SSEParser()
    for event in sse.feed(body.encode("utf-8")) + sse.flush():
        parser.feed(event)
    assert parser.done, "the stream's terminator was not recognised"
    return parser.result()


@pytest.mark.parametrize("path", FIXTURES)
def test_reply_parses_like_the_vendor_sdk(path: Path) -> None:
    fixture = _load(path)
    expect = fixture["expect"]
    status = fixture["response"]["status"]
    adapter = get(fixture["protocol"])
    if status >= 400:
        message, overflow = adapter.error(status, fixture["response"]["body"])
        assert expect["error"]["message_contains"] in message
        assert overflow is False
        return
    result = _parse(fixture)
    assert result.text == expect["text"]
    assert result.reasoning == expect["reasoning"]
    calls: list[dict[str, Any]] = [
        {"id": c.id, "name": c.name, "arguments": c.arguments} for c in result.tool_calls
    ]
    wanted = copy.deepcopy(expect["tool_calls"])
    for call, want in zip(calls, wanted, strict=False):
        if want["id"] is None:
            # Gemini before version 3 sends no call id; ours is generated (checked elsewhere).
            assert str(call["id"]).startswith("call_")
            want["id"] = call["id"]
    assert calls == wanted
    assert result.finish_reason == expect["finish_reason"]
    usage = expect["usage"] or {}
    assert result.usage_reported is (expect["usage"] is not None)
    for key in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
        assert getattr(result.usage, key) == (usage.get(key) or 0), key
    # The history message holds the same calls, so the next request can carry them.
    parts = [p for p in result.message["content"] if p["type"] == "tool-call"]
    assert [p["tool_call_id"] for p in parts] == [c.id for c in result.tool_calls]


# ---------------------------------------------------------------- requests: the equivalent conversation


def _request(protocol: str, body: dict[str, Any], path: str) -> Request:
    """The neutral request whose wire form the fixture's request body is."""
    convert = {"responses": _from_responses, "anthropic": _from_anthropic, "gemini": _from_gemini}[protocol]
    fields = convert(body)
    if protocol == "gemini":
        # Gemini names the model in the path: `.../models/gemini-2.5-flash:generateContent`.
        fields["model"] = path.split("/models/")[1].split(":")[0]
    fields.setdefault("capabilities", dict(DEFAULT_CAPABILITIES))
    return Request(base_url="https://api.example.test/v1", api_key="sk-test", **fields)


class _History:
    """Collects history messages; consecutive assistant parts / tool results share a message."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.names: dict[str, str] = {}
        self.fresh = False

    def next_message(self) -> None:
        """The next part starts a new message (a vendor message boundary)."""
        self.fresh = True

    def add(self, role: str, part: Any) -> None:
        last = self.messages[-1] if self.messages and not self.fresh else None
        self.fresh = False
        if role in ("assistant", "tool") and last is not None and last["role"] == role:
            last["content"].append(part)
        else:
            self.messages.append({"role": role, "content": [part] if role != "user" else part})

    def call(self, call_id: str, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None) -> None:
        self.names[call_id] = name
        part: dict[str, Any] = {
            "type": "tool-call",
            "tool_call_id": call_id,
            "tool_name": name,
            "input": arguments,
        }
        if meta:
            part["provider_metadata"] = meta
        self.add("assistant", part)

    def result(self, call_id: str, output: dict[str, Any], name: str | None = None) -> None:
        name = name or self.names.get(call_id, "tool")
        self.add(
            "tool", {"type": "tool-result", "tool_call_id": call_id, "tool_name": name, "output": output}
        )


def _output_spec(schema: Any, name: str = "output") -> Any:
    return output_specs.json() if schema is None else output_specs.object(schema, name=name)


def _data_url_part(url: str, filename: str | None = None) -> dict[str, Any]:
    header, _, data = url.partition(",")
    media_type = header[5:].split(";")[0] if url.startswith("data:") else "application/octet-stream"
    if media_type.startswith("image/"):
        return {"type": "image", "image": url}
    part = {"type": "file", "media_type": media_type, "data": data if url.startswith("data:") else url}
    if filename:
        part["filename"] = filename
    return part


def _from_responses(body: dict[str, Any]) -> dict[str, Any]:
    history = _History()
    system = [body["instructions"]] if body.get("instructions") else []
    items = body["input"] if isinstance(body["input"], list) else [{"role": "user", "content": body["input"]}]
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            content = item["content"]
            if item["role"] in ("system", "developer"):
                system.append(
                    content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
                )
            elif item["role"] == "assistant":
                text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
                history.add("assistant", {"type": "text", "text": text})
            else:
                history.add(
                    "user", content if isinstance(content, str) else [_responses_part(p) for p in content]
                )
        elif kind == "reasoning":
            state = {
                "protocol": "responses",
                "id": item["id"],
                "encrypted_content": item["encrypted_content"],
            }
            history.add("assistant", {"type": "reasoning", "text": "", "provider_metadata": state})
        elif kind == "function_call":
            call_meta = {"protocol": "responses", "id": item["id"]} if item.get("id") else None
            history.call(item["call_id"], item["name"], json.loads(item["arguments"] or "{}"), call_meta)
        elif kind == "function_call_output":
            out = item["output"]
            value = (
                {"type": "text", "value": out}
                if isinstance(out, str)
                else {
                    "type": "content",
                    "value": [_responses_part(p) for p in out],
                }
            )
            history.result(item["call_id"], value)
    fields: dict[str, Any] = {
        "model": body["model"],
        "messages": history.messages,
        "system": "\n\n".join(system),
    }
    fields["stream"] = bool(body.get("stream"))
    fields["tools"] = [
        {"name": t["name"], "description": t.get("description") or "", "input_schema": t["parameters"]}
        for t in body.get("tools") or []
        if t.get("type") == "function"
    ]
    provider: dict[str, Any] = {}
    if body.get("tool_choice") is not None and fields["tools"]:
        choice = body["tool_choice"]
        provider["tool_choice"] = choice if isinstance(choice, str) else {"name": choice["name"]}
    effort = (body.get("reasoning") or {}).get("effort")
    if effort:
        provider["reasoning_effort"] = effort
    fields["provider"] = provider
    text_format = (body.get("text") or {}).get("format")
    if text_format and text_format["type"] == "json_schema":
        fields["output"] = _output_spec(text_format["schema"], text_format["name"])
    elif text_format and text_format["type"] == "json_object":
        fields["output"] = _output_spec(None)
    return fields


def _responses_part(part: dict[str, Any]) -> dict[str, Any]:
    if part["type"] == "input_text":
        return {"type": "text", "text": part["text"]}
    if part["type"] == "input_image":
        return {"type": "image", "image": part["image_url"]}
    if part.get("file_url"):
        return {"type": "file", "media_type": "application/pdf", "data": part["file_url"]}
    return _data_url_part(part["file_data"], part.get("filename"))


def _from_anthropic(body: dict[str, Any]) -> dict[str, Any]:
    history = _History()
    system = body.get("system") or ""
    if isinstance(system, list):
        system = "".join(block.get("text", "") for block in system)
    for message in body["messages"]:
        history.next_message()
        content = message["content"]
        blocks: list[dict[str, Any]] = (
            [{"type": "text", "text": content}] if isinstance(content, str) else content
        )
        user_parts: list[dict[str, Any]] = []
        for block in blocks:
            kind = block["type"]
            if message["role"] == "user" and kind == "tool_result":
                history.result(block["tool_use_id"], _anthropic_output(block))
            elif message["role"] == "user" and kind in ("text", "image", "document"):
                user_parts.append(_anthropic_part(block))
            elif kind == "text":
                history.add("assistant", {"type": "text", "text": block["text"]})
            elif kind == "thinking":
                meta = {"protocol": "anthropic", "signature": block["signature"]}
                history.add(
                    "assistant", {"type": "reasoning", "text": block["thinking"], "provider_metadata": meta}
                )
            elif kind == "redacted_thinking":
                redacted = {"protocol": "anthropic", "redacted": block["data"]}
                history.add("assistant", {"type": "reasoning", "text": "", "provider_metadata": redacted})
            elif kind == "tool_use":
                history.call(block["id"], block["name"], block["input"], None)
        if user_parts:
            history.add("user", user_parts)
    provider: dict[str, Any] = {"max_output_tokens": body["max_tokens"]}
    if body.get("temperature") is not None:
        provider["temperature"] = body["temperature"]
    tools = [
        {"name": t["name"], "description": t.get("description") or "", "input_schema": t["input_schema"]}
        for t in body.get("tools") or []
        if "input_schema" in t
    ]
    choice = body.get("tool_choice")
    if choice is not None and tools:
        modes = {"auto": "auto", "any": "required", "none": "none"}
        provider["tool_choice"] = (
            {"name": choice["name"]} if choice["type"] == "tool" else modes[choice["type"]]
        )
    thinking = body.get("thinking")
    if thinking and thinking["type"] == "enabled":
        provider["reasoning_effort"] = "minimal"
    elif thinking:
        provider["body"] = {"thinking": thinking}
    fields: dict[str, Any] = {"model": body["model"], "messages": history.messages, "system": system}
    fields.update(stream=bool(body.get("stream")), tools=tools, provider=provider)
    out_format = (body.get("output_config") or {}).get("format")
    if out_format:
        fields["output"] = _output_spec(out_format["schema"])
    return fields


def _anthropic_part(block: dict[str, Any]) -> dict[str, Any]:
    if block["type"] == "text":
        return {"type": "text", "text": block["text"]}
    source = block["source"]
    if block["type"] == "image":
        image = source["url"] if source["type"] == "url" else source["data"]
        return {"type": "image", "image": image, "media_type": source.get("media_type", "image/png")}
    if source["type"] == "text":
        data = base64.b64encode(source["data"].encode()).decode()
        return {"type": "file", "media_type": "text/plain", "data": data}
    data = source["url"] if source["type"] == "url" else source["data"]
    return {"type": "file", "media_type": "application/pdf", "data": data}


def _anthropic_output(block: dict[str, Any]) -> dict[str, Any]:
    content = block.get("content", "")
    if block.get("is_error"):
        return {"type": "error-text", "value": content if isinstance(content, str) else ""}
    if isinstance(content, str):
        return {"type": "text", "value": content}
    if all(part["type"] == "text" for part in content):
        return {"type": "text", "value": "".join(part["text"] for part in content)}
    return {"type": "content", "value": [_anthropic_part(part) for part in content]}


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(word.title() for word in rest)


def _camel_keys(value: Any) -> Any:
    """Gemini accepts snake_case field names too (one fixture uses them); compare in camelCase."""
    if isinstance(value, dict):
        return {_camel(k): (_camel_keys(v) if k not in ("args", "response") else v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel_keys(v) for v in value]
    return value


def _from_gemini(body: dict[str, Any]) -> dict[str, Any]:
    body = _camel_keys(body)
    history = _History()
    capabilities = dict(DEFAULT_CAPABILITIES)
    system = "".join(p.get("text", "") for p in (body.get("systemInstruction") or {}).get("parts", []))
    for content in body["contents"]:
        history.next_message()
        user_parts: list[dict[str, Any]] = []
        for part in content["parts"]:
            signature = part.get("thoughtSignature")
            meta = {"protocol": "gemini", "thought_signature": signature} if signature else None
            if "functionCall" in part:
                call = part["functionCall"]
                history.call(call["id"], call["name"], call.get("args") or {}, meta or {"protocol": "gemini"})
            elif "functionResponse" in part:
                response = part["functionResponse"]
                history.result(response["id"], _gemini_output(response), response["name"])
            elif content["role"] == "model":
                kind = "reasoning" if part.get("thought") else "text"
                # Thought text without a signature travels only with capabilities.reasoning.
                capabilities["reasoning"] = capabilities["reasoning"] or (
                    kind == "reasoning" and meta is None
                )
                history.add(
                    "assistant",
                    {"type": kind, "text": part["text"], **({"provider_metadata": meta} if meta else {})},
                )
            else:
                user_parts.append(_gemini_part(part))
        if user_parts:
            history.add("user", user_parts)
    provider: dict[str, Any] = {}
    generation = body.get("generationConfig") or {}
    for wire, key in (("temperature", "temperature"), ("maxOutputTokens", "max_output_tokens")):
        if generation.get(wire) is not None:
            provider[key] = generation[wire]
    if "thinkingConfig" in generation:
        provider["reasoning_effort"] = (
            "low" if generation["thinkingConfig"].get("thinkingBudget") != 0 else "none"
        )
    mode = ((body.get("toolConfig") or {}).get("functionCallingConfig") or {}).get("mode")
    if mode in ("AUTO", "ANY", "NONE"):
        provider["tool_choice"] = {"AUTO": "auto", "ANY": "required", "NONE": "none"}[mode]
    tools = [
        {
            "name": d["name"],
            "description": d.get("description") or "",
            "input_schema": d.get("parametersJsonSchema") or d.get("parameters") or {"type": "object"},
        }
        for tool in body.get("tools") or []
        for d in tool.get("functionDeclarations") or []
    ]
    fields: dict[str, Any] = {"model": "gemini-test", "messages": history.messages, "system": system}
    fields.update(tools=tools, provider=provider, capabilities=capabilities, stream=False)
    if generation.get("responseMimeType") == "application/json":
        schema = generation.get("responseJsonSchema") or generation.get("responseSchema")
        fields["output"] = _output_spec(schema)
    return fields


def _gemini_part(part: dict[str, Any]) -> dict[str, Any]:
    if "text" in part:
        return {"type": "text", "text": part["text"]}
    if "inlineData" in part:
        inline = part["inlineData"]
        if inline["mimeType"].startswith("image/"):
            return {"type": "image", "image": inline["data"], "media_type": inline["mimeType"]}
        return {"type": "file", "media_type": inline["mimeType"], "data": inline["data"]}
    file_data = part["fileData"]
    return {"type": "file", "media_type": file_data["mimeType"], "data": file_data["fileUri"]}


def _gemini_output(response: dict[str, Any]) -> dict[str, Any]:
    value = response.get("response") or {}
    if "error" in value:
        return {"type": "error-text", "value": str(value["error"])}
    media = [_gemini_part(part) for part in response.get("parts") or []]
    if media:
        return {"type": "content", "value": [{"type": "text", "text": json.dumps(value)}, *media]}
    return {"type": "json", "value": value}


# ---------------------------------------------------------------- requests: shapes


def _responses_shape(body: dict[str, Any]) -> dict[str, Any]:
    items = []
    for item in (
        body["input"] if isinstance(body["input"], list) else [{"role": "user", "content": body["input"]}]
    ):
        kind = item.get("type", "message")
        if kind == "message":
            if item["role"] in ("system", "developer"):
                continue
            content = item["content"]
            plain = "output_text" if item["role"] == "assistant" else "input_text"
            types = [plain] if isinstance(content, str) else [p["type"] for p in content]
            items.append((item["role"], *types))
        elif kind == "function_call_output":
            out = item["output"]
            items.append((kind, *(["string"] if isinstance(out, str) else [p["type"] for p in out])))
        elif kind in ("function_call", "reasoning"):
            items.append((kind, "id" in item))
    # `stream: false` is the default: sent or not, it is the same request.
    keys = {"model", "input", "tool_choice", "max_output_tokens"} & set(body) | (
        {"stream"} if body.get("stream") else set()
    )
    if any(t.get("type") == "function" for t in body.get("tools") or []):
        keys.add("tools")
    else:
        keys.discard("tool_choice")
    if body.get("instructions") or any(i.get("role") in ("system", "developer") for i in body["input"]):
        keys.add("instructions")
    if (body.get("text") or {}).get("format"):
        keys.add("text")
    if (body.get("reasoning") or {}).get("effort"):
        keys.add("reasoning")
    return {"keys": keys, "items": items}


_ANTHROPIC_BLOCKS = ("text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking")


def _anthropic_shape(body: dict[str, Any]) -> dict[str, Any]:
    messages = []
    for message in body["messages"]:
        content = message["content"]
        blocks = [{"type": "text"}] if isinstance(content, str) else content
        kinds = []
        for block in blocks:
            if block["type"] not in _ANTHROPIC_BLOCKS:
                continue
            if block["type"] == "tool_result":
                inner: Any = block.get("content", "")
                only_text = isinstance(inner, str) or all(p["type"] == "text" for p in inner)
                kinds.append(("tool_result", *(["text"] if only_text else [p["type"] for p in inner])))
            else:
                kinds.append((block["type"],))
        if kinds:
            messages.append((message["role"], *kinds))
    keys = {"model", "max_tokens", "messages", "temperature", "thinking"} & set(body)
    keys |= {"stream"} if body.get("stream") else set()
    if body.get("system"):
        keys.add("system")
    if any("input_schema" in t for t in body.get("tools") or []):
        keys.add("tools")
        if body.get("tool_choice") is not None:
            keys.add("tool_choice")
    return {"keys": keys, "messages": messages}


def _gemini_shape(body: dict[str, Any]) -> dict[str, Any]:
    body = _camel_keys(body)
    contents = []
    for content in body["contents"]:
        kinds: list[str] = []
        media: list[str] = []
        for part in content["parts"]:
            signed = "+signature" if part.get("thoughtSignature") else ""
            if "functionResponse" in part:
                kinds.append("functionResponse")
                # We send functionResponse media in a following user content (Gemini 2.x takes
                # none inside): "This is file <id>:" then the media part.
                for inner in part["functionResponse"].get("parts") or []:
                    media += ["text", next(iter(inner))]
            elif "functionCall" in part:
                kinds.append("functionCall" + signed)
            elif "text" in part:
                kinds.append(("thought" if part.get("thought") else "text") + signed)
            else:
                kinds.append(next(iter(part)))
        contents.append((content["role"], *kinds))
        if media:
            contents.append(("user", *media))
    keys = {"contents"} | ({"systemInstruction"} & set(body))
    if any("functionDeclarations" in t for t in body.get("tools") or []):
        keys.add("tools")
        mode = ((body.get("toolConfig") or {}).get("functionCallingConfig") or {}).get("mode")
        if mode in ("AUTO", "ANY", "NONE"):
            keys.add("toolConfig")
    modeled = {"temperature", "maxOutputTokens", "thinkingConfig", "responseMimeType"}
    if modeled & set(body.get("generationConfig") or {}):
        keys.add("generationConfig")
    return {"keys": keys, "contents": contents}


def _has_media(request: Request, kinds: tuple[str, ...]) -> bool:
    text = json.dumps(request.messages)
    return any(f'"media_type": "{kind}/' in text for kind in kinds)


@pytest.mark.parametrize("path", FIXTURES)
def test_request_has_the_vendor_shape(path: Path) -> None:
    fixture = _load(path)
    protocol = fixture["protocol"]
    recorded = fixture["request"]["body"]
    request = _request(protocol, recorded, fixture["request"]["path"])
    adapter = get(protocol)
    if protocol == "responses" and _has_media(request, ("audio",)):
        # The vendor answered 400 "unsupported MIME type 'audio/mpeg'": we refuse it before sending.
        with pytest.raises(AgentError) as caught:
            adapter.build(request)
        assert caught.value.kind == "request"
        return
    wire = adapter.build(request)
    shape = {"responses": _responses_shape, "anthropic": _anthropic_shape, "gemini": _gemini_shape}[protocol]
    ours, theirs = shape(wire.body), shape(recorded)
    if protocol == "anthropic" and request.output is not None:
        # Anthropic structured output travels as a forced tool (API.md §Wire), not output_config.
        theirs["keys"] |= {"tools", "tool_choice"}
        assert wire.body["tools"][-1]["name"] == request.output.name
    assert ours == theirs
    if protocol == "responses":
        validate_create_response(wire.body)


# ---------------------------------------------------------------- OpenAPI validation (responses)


def test_the_openapi_check_rejects_a_malformed_body() -> None:
    """Guards the validator itself: a function_call without call_id is not a CreateResponse."""
    with pytest.raises(AssertionError):
        validate_create_response(
            {"model": "m", "input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}
        )
    validate_create_response(
        {"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", "text": "x"}]}]}
    )
