"""The chat adapter against real recorded traffic (`tests/fixtures/recorded/chat/`).

Replies: every fixture goes through our parser (SSE through `SSEParser` + `stream()`, JSON
through `parse`, errors through `error()`) and must match `expect`, computed by OpenAI's SDK.
Requests: every recorded request is turned back into a neutral request, rebuilt, and our body
must have the recorded shape and validate against OpenAI's `CreateChatCompletionRequest`.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from recorded import OPENAPI, RECORDED

from agentcore import output
from agentcore._utils.sse import SSEParser
from agentcore.protocols.base import DEFAULT_CAPABILITIES, LLMResult, Request
from agentcore.protocols.chat import adapter

FIXTURES = RECORDED / "chat"
SCHEMAS = OPENAPI

FIXTURE_FILES = sorted(FIXTURES.glob("*.json"))
FILE_LABEL = re.compile(r"^This is file ([0-9a-f]+):$")
FILE_ID = re.compile(r"\b(See|This is) file [0-9a-f]{6}\b")


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_the_fixture_folder_is_not_empty() -> None:
    assert len(FIXTURE_FILES) >= 20


# ---------------------------------------------------------------- replies


def parse_reply(fixture: dict[str, Any]) -> LLMResult:
    body = fixture["response"]["body"]
    if not fixture["stream"]:
        return adapter.parse(json.loads(body))
    sse, parser = SSEParser(), adapter.stream()
    for event in sse.feed(body.encode("utf-8")) + sse.flush():
        parser.feed(event)
    assert parser.done, "the recorded stream ends with [DONE]"
    return parser.result()


def as_expect(result: LLMResult) -> dict[str, Any]:
    return {
        "text": result.text,
        "reasoning": result.reasoning,
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": c.raw_arguments or c.arguments}
            for c in result.tool_calls
        ],
        "finish_reason": result.finish_reason,
        "usage": result.usage.to_dict() if result.usage_reported else None,
    }


def expected_usage(usage: dict[str, Any] | None) -> dict[str, int] | None:
    """Fixture nulls compare as 0 (our Usage has ints only)."""
    return None if usage is None else {key: value or 0 for key, value in usage.items()}


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.stem)
def test_reply_matches_the_sdk_oracle(path: Path) -> None:
    fixture = load(path)
    expect, response = fixture["expect"], fixture["response"]
    if response["status"] >= 400:
        message, overflow = adapter.error(response["status"], response["body"])
        assert expect["error"]["message_contains"] in message
        assert overflow is False
        return
    got = as_expect(parse_reply(fixture))
    assert got["text"] == expect["text"]
    assert got["reasoning"] == expect["reasoning"]
    assert got["tool_calls"] == expect["tool_calls"]
    assert got["finish_reason"] == expect["finish_reason"]
    usage = expected_usage(expect["usage"])
    assert got["usage"] is not None if usage else got["usage"] is None
    if usage and got["usage"]:
        assert {key: got["usage"][key] for key in usage} == usage


@pytest.mark.parametrize("path", [p for p in FIXTURE_FILES if load(p)["stream"]], ids=lambda p: p.stem)
def test_stream_events_add_up_to_the_result(path: Path) -> None:
    """What on_llm_event sees (deltas, then whole calls) tells the same story as the result."""
    fixture = load(path)
    sse, parser = SSEParser(), adapter.stream()
    events: list[dict[str, Any]] = []
    # Byte by byte in uneven slices: the result must not depend on how the bytes arrive.
    raw = fixture["response"]["body"].encode("utf-8")
    for start in range(0, len(raw), 7):
        for event in sse.feed(raw[start : start + 7]):
            events += parser.feed(event)
    result = parser.result()
    assert "".join(e["text"] for e in events if e["type"] == "text-delta") == result.text
    calls = [e for e in events if e["type"] == "tool-call"]
    assert [(e["tool_call_id"], e["tool_name"], e["input"]) for e in calls] == [
        (c.id, c.name, c.arguments) for c in result.tool_calls
    ]
    for call in result.tool_calls:
        pieces = [
            e["delta"] for e in events if e["type"] == "tool-call-delta" and e["tool_call_id"] == call.id
        ]
        assert json.loads("".join(pieces) or "{}") == call.arguments


# ---------------------------------------------------------------- requests: recorded body -> neutral request


def neutral_part(part: dict[str, Any]) -> dict[str, Any]:
    kind = part["type"]
    if kind == "text":
        return {"type": "text", "text": part["text"]}
    if kind == "image_url":
        return {"type": "image", "image": part["image_url"]["url"]}
    if kind == "input_audio":
        audio = part["input_audio"]
        media_type = "audio/mpeg" if audio["format"] == "mp3" else "audio/wav"
        return {"type": "file", "media_type": media_type, "data": audio["data"]}
    if kind == "file":
        header, _, data = part["file"]["file_data"].partition(",")
        media_type = header.removeprefix("data:").split(";")[0]
        return {"type": "file", "media_type": media_type, "data": data, "filename": part["file"]["filename"]}
    raise AssertionError(f"unexpected recorded part {kind}")


def labelled_files(message: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
    """{file id: part} when a user message is only "This is file X:" labels each before one media part."""
    parts = message["content"]
    if not isinstance(parts, list) or len(parts) % 2:
        return None
    files = {}
    for label, media in zip(parts[::2], parts[1::2], strict=True):
        match = FILE_LABEL.match(label.get("text", "")) if label["type"] == "text" else None
        if match is None or media["type"] == "text":
            return None
        files[match.group(1)] = neutral_part(media)
    return files


def tool_output(text: str, files: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A recorded tool text whose "See file X." lines point at media, back to a content block."""
    if not any(f"See file {file_id}." in text for file_id in files):
        return {"type": "text", "value": text}
    value = []
    for line in text.split("\n"):
        match = re.fullmatch(r"See file ([0-9a-f]+)\.", line)
        value.append(files[match.group(1)] if match else {"type": "text", "text": line})
    return {"type": "content", "value": value}


def neutral_history(wire: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    system: list[str] = []
    history: list[dict[str, Any]] = []
    i = 0
    while i < len(wire):
        message = wire[i]
        role, content = message["role"], message.get("content")
        if role in ("system", "developer"):
            system.append(str(content))
        elif role == "user":
            user_content = content if isinstance(content, str) else [neutral_part(p) for p in content or []]
            history.append({"role": "user", "content": user_content})
        elif role == "assistant":
            parts: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
            for call in message.get("tool_calls") or []:
                arguments = json.loads(call["function"]["arguments"])
                parts.append(
                    {
                        "type": "tool-call",
                        "tool_call_id": call["id"],
                        "tool_name": call["function"]["name"],
                        "input": arguments,
                    }
                )
            history.append({"role": "assistant", "content": parts})
        elif role == "tool":
            tools = []
            while i < len(wire) and wire[i]["role"] == "tool":
                tools.append(wire[i])
                i += 1
            files = labelled_files(wire[i]) if i < len(wire) and wire[i]["role"] == "user" else None
            if files:
                i += 1
            results = [
                {
                    "type": "tool-result",
                    "tool_call_id": t["tool_call_id"],
                    "tool_name": "recorded",
                    "output": tool_output(t["content"], files or {}),
                }
                for t in tools
            ]
            history.append({"role": "tool", "content": results})
            continue
        i += 1
    return "\n\n".join(system), history


def neutral_request(body: dict[str, Any]) -> Request:
    system, history = neutral_history(body["messages"])
    tools = [
        {"name": f["name"], "description": f.get("description", ""), "input_schema": f["parameters"]}
        for f in (t["function"] for t in body.get("tools", []))
    ]
    provider: dict[str, Any] = {}
    if "tool_choice" in body:
        provider["tool_choice"] = body["tool_choice"]
    if "reasoning_effort" in body:
        provider["reasoning_effort"] = body["reasoning_effort"]
    extra = {key: body[key] for key in ("n", "moderation") if key in body}
    if extra:
        provider["body"] = extra
    spec = None
    response_format = body.get("response_format")
    if response_format and response_format["type"] == "json_schema":
        spec = output.object(
            response_format["json_schema"]["schema"], name=response_format["json_schema"]["name"]
        )
    elif response_format:
        spec = output.json()
    return Request(
        model=body["model"],
        messages=history,
        system=system,
        tools=tools,
        base_url="https://api.openai.com/v1",
        provider=provider,
        stream=body.get("stream", False),
        cache=False,
        capabilities=dict(DEFAULT_CAPABILITIES),
        output=spec,
    )


# ---------------------------------------------------------------- requests: shape comparison


def normalised(text: Any) -> Any:
    return FILE_ID.sub(r"\1 file ID", text) if isinstance(text, str) else text


def message_shape(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, list):
        content = [{k: normalised(v) if k == "text" else v for k, v in part.items()} for part in content]
    shape = {"role": message["role"], "content": normalised(content)}
    if "tool_call_id" in message:
        shape["tool_call_id"] = message["tool_call_id"]
    if message.get("tool_calls"):
        shape["tool_calls"] = [
            (c["id"], c["type"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in message["tool_calls"]
        ]
    return shape


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.stem)
def test_request_body_has_the_recorded_shape(path: Path) -> None:
    recorded = load(path)["request"]["body"]
    ours = adapter.build(neutral_request(recorded)).body
    assert set(ours) == set(recorded)
    ours_messages, recorded_messages = ours["messages"], recorded["messages"]
    assert [m["role"] for m in ours_messages] == [m["role"] for m in recorded_messages]
    for mine, theirs in zip(ours_messages, recorded_messages, strict=True):
        if theirs["role"] == "system" and "response_format" in recorded:
            # Structured output adds our own instruction text after the recorded system prompt.
            assert mine["content"].startswith(theirs["content"])
            continue
        assert message_shape(mine) == message_shape(theirs)
    for mine, theirs in zip(ours.get("tools", []), recorded.get("tools", []), strict=True):
        assert mine["type"] == theirs["type"] == "function"
        assert mine["function"] == {k: v for k, v in theirs["function"].items() if k != "strict"}
    for key in ("stream", "stream_options", "tool_choice", "reasoning_effort", "n", "moderation"):
        assert ours.get(key) == recorded.get(key), key
    if "response_format" in recorded:
        recorded_format, our_format = recorded["response_format"], ours["response_format"]
        assert our_format["type"] == recorded_format["type"]
        if "json_schema" in recorded_format:
            recorded_schema, our_schema = recorded_format["json_schema"], our_format["json_schema"]
            assert (our_schema["name"], our_schema["schema"]) == (
                recorded_schema["name"],
                recorded_schema["schema"],
            )
            assert our_schema["strict"] is False


# ---------------------------------------------------------------- requests: OpenAI's schema


def with_nullable(node: Any) -> Any:
    """OpenAPI `nullable: true` as JSON Schema: the same schema, or null."""
    if isinstance(node, list):
        return [with_nullable(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {
        key: with_nullable(value) for key, value in node.items() if not (key == "nullable" and value is True)
    }
    if node.get("nullable") is True:
        return {"anyOf": [converted, {"type": "null"}]}
    return converted


@cache
def request_validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    components = with_nullable(json.loads(SCHEMAS.read_text(encoding="utf-8"))["components"])
    schema = {"$ref": "#/components/schemas/CreateChatCompletionRequest", "components": components}
    return jsonschema.Draft202012Validator(schema)


def schema_errors(body: dict[str, Any]) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}"
        for e in request_validator().iter_errors(body)
    ]


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.stem)
def test_rebuilt_request_validates_against_openai_schema(path: Path) -> None:
    body = adapter.build(neutral_request(load(path)["request"]["body"])).body
    assert schema_errors(body) == []


def test_a_request_using_every_feature_validates_against_openai_schema() -> None:
    png = "iVBORw0KGgo="
    history: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Compare these."},
                {"type": "image", "image": png},
                {"type": "image", "image": "https://example.com/a.png"},
                {"type": "file", "media_type": "audio/wav", "data": "UklGR"},
                {"type": "file", "media_type": "application/pdf", "data": "JVBER", "filename": "a.pdf"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "reasoning", "text": "Use the tool."},
                {"type": "text", "text": "Reading."},
                {"type": "tool-call", "tool_call_id": "c1", "tool_name": "read", "input": {"path": "a"}},
                {"type": "tool-call", "tool_call_id": "c2", "tool_name": "read", "input": {"path": "b"}},
            ],
        },
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool-result",
                    "tool_call_id": "c1",
                    "tool_name": "read",
                    "output": {
                        "type": "content",
                        "value": [{"type": "text", "text": "a:"}, {"type": "image", "image": png}],
                    },
                },
                {
                    "type": "tool-result",
                    "tool_call_id": "c2",
                    "tool_name": "read",
                    "output": {"type": "error-text", "value": "no"},
                },
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        {"role": "user", "content": "Thanks"},
    ]
    request = Request(
        model="gpt-4o",
        messages=history,
        system="Be brief.",
        tools=[
            {
                "name": "read",
                "description": "Read a file",
                "input_schema": {"type": "object", "properties": {}},
            }
        ],
        base_url="https://api.openai.com/v1",
        api_key="sk-test",
        provider={
            "temperature": 0.2,
            "top_p": 0.9,
            "max_output_tokens": 500,
            "stop": ["END"],
            "presence_penalty": 0.1,
            "frequency_penalty": 0.1,
            "seed": 1,
            "tool_choice": {"name": "read"},
            "parallel_tool_calls": True,
            "reasoning_effort": "low",
        },
        stream=True,
        cache={"key": "k", "retention": "24h"},
        capabilities={**DEFAULT_CAPABILITIES, "reasoning": True},
        output=output.array({"type": "object", "properties": {"name": {"type": "string"}}}),
    )
    body = adapter.build(request).body
    assert schema_errors(body) == []
    assert [m["role"] for m in body["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "assistant",
        "user",
    ]


def test_the_schema_check_can_fail() -> None:
    """Guard against a validator that accepts anything (e.g. a broken $ref)."""
    assert schema_errors({"model": "m", "messages": [{"role": "user"}]})
    assert schema_errors({"model": "m", "messages": [], "temperature": "hot"})
