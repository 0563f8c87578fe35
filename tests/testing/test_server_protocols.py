"""The scripted model server speaking Responses, Anthropic Messages and Gemini.

Every reply is read back with the project's own adapters (`agentcore.protocols`), as the
library reads a real vendor, and its wire shape is checked against the recorded vendor
traffic in tests/fixtures/recorded.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from recorded import RECORDED

from agentcore import protocols
from agentcore._utils.sse import SSEParser
from agentcore.errors import AgentError
from agentcore.protocols.base import LLMResult, Request
from agentcore.testing import ModelServer
from agentcore.testing.encoders import anthropic as anthropic_wire
from agentcore.testing.encoders import gemini as gemini_wire
from agentcore.testing.encoders import responses as responses_wire

FIXTURES = RECORDED
PROTOCOLS = ("responses", "anthropic", "gemini")
STREAM = pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
EACH = pytest.mark.parametrize("protocol", PROTOCOLS)

REPLY: dict[str, Any] = {
    "text": "Let me add and look it up.",
    "reasoning": "The user wants a sum; add is the tool for it.",
    "tool_calls": [
        {"name": "add", "arguments": {"a": 1, "b": 2}, "id": "call_add"},
        {"name": "lookup", "arguments": '{"query": "pi", "exact": true}'},
    ],
    "usage": {"input_tokens": 120, "output_tokens": 40, "cache_read_tokens": 30, "cache_write_tokens": 10},
}


# ---------------------------------------------------------------- a client per protocol


def post(server: ModelServer, protocol: str, *, stream: bool, model: str = "test-model") -> requests.Response:
    """One model request as the library would send it (minimal body)."""
    if protocol == "gemini":
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
        return requests.post(
            f"{server.base_url}/models/{model}:{method}", json=body, timeout=30, stream=stream
        )
    path, messages = ("/responses", "input") if protocol == "responses" else ("/messages", "messages")
    body = {"model": model, messages: [{"role": "user", "content": "hi"}], "stream": stream}
    if protocol == "anthropic":
        body["max_tokens"] = 1024
    return requests.post(server.base_url + path, json=body, timeout=30, stream=stream)


def read(protocol: str, response: requests.Response, *, stream: bool) -> tuple[LLMResult, bool]:
    """The adapter's result and whether the stream ended properly (always True for JSON)."""
    adapter = protocols.get(protocol)
    assert response.status_code == 200, response.text
    if not stream:
        assert response.headers["Content-Type"] == "application/json"
        return adapter.parse(response.json()), True
    assert response.headers["Content-Type"].startswith("text/event-stream")
    parser = adapter.stream()
    for event in sse_events(response):
        parser.feed(event)
    return parser.result(), parser.done


def sse_events(response: requests.Response) -> Iterator[Any]:
    parser = SSEParser()
    for chunk in response.iter_content(None):
        yield from parser.feed(chunk)
    yield from parser.flush()


def ask(protocol: str, item: Any, *, stream: bool) -> tuple[LLMResult, bool]:
    with ModelServer([item]) as server:
        return read(protocol, post(server, protocol, stream=stream), stream=stream)


# ---------------------------------------------------------------- replies


@EACH
@STREAM
def test_text_reasoning_calls_usage_and_finish_survive_the_wire(protocol: str, stream: bool) -> None:
    result, done = ask(protocol, REPLY, stream=stream)
    assert done
    assert result.text == REPLY["text"]
    assert result.reasoning == REPLY["reasoning"]
    assert [(c.name, c.arguments) for c in result.tool_calls] == [
        ("add", {"a": 1, "b": 2}),
        ("lookup", {"query": "pi", "exact": True}),
    ]
    if protocol != "gemini":  # Gemini sends no call ids; the adapter makes its own
        assert [c.id for c in result.tool_calls] == ["call_add", "call_1"]
    assert result.finish_reason == "tool_calls"
    usage = result.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (120, 40, 160)
    assert usage.cache_read_tokens == 30
    # Gemini reports no cache writes at all.
    assert usage.cache_write_tokens == (0 if protocol == "gemini" else 10)


@EACH
@STREAM
def test_plain_text_reply_stops(protocol: str, stream: bool) -> None:
    result, done = ask(protocol, "Just text, nothing else.", stream=stream)
    assert done and result.text == "Just text, nothing else."
    assert result.reasoning is None and result.tool_calls == [] and result.finish_reason == "stop"
    assert result.usage.input_tokens > 0


@EACH
@STREAM
def test_length_finish(protocol: str, stream: bool) -> None:
    result, done = ask(protocol, {"text": "cut sho", "finish_reason": "length"}, stream=stream)
    assert done and result.text == "cut sho" and result.finish_reason == "length"


@EACH
@pytest.mark.parametrize("chunk_size", [1, 1000])
def test_chunk_size_does_not_change_the_result(protocol: str, chunk_size: int) -> None:
    result, done = ask(protocol, {**REPLY, "chunk_size": chunk_size}, stream=True)
    assert done and result.text == REPLY["text"] and result.reasoning == REPLY["reasoning"]
    assert [c.arguments for c in result.tool_calls] == [{"a": 1, "b": 2}, {"query": "pi", "exact": True}]


@EACH
def test_truncated_stream_is_not_done(protocol: str) -> None:
    result, done = ask(protocol, {"text": "all the text arrives", "truncate": True}, stream=True)
    assert not done
    assert result.text == "all the text arrives"


@EACH
def test_in_stream_error_raises(protocol: str) -> None:
    with ModelServer([{"text": "partial", "stream_error": "the model fell over"}]) as server:
        response = post(server, protocol, stream=True)
        parser = protocols.get(protocol).stream()
        with pytest.raises(AgentError) as caught:
            for event in sse_events(response):
                parser.feed(event)
    assert "the model fell over" in caught.value.message
    assert caught.value.kind == "server" and caught.value.retryable


# ---------------------------------------------------------------- errors


@EACH
@pytest.mark.parametrize("status", [400, 401, 429, 500, 503])
def test_error_bodies_carry_the_message(protocol: str, status: int) -> None:
    with ModelServer([{"status": status, "error": f"scripted {status}"}]) as server:
        response = post(server, protocol, stream=False)
    assert response.status_code == status
    message, overflow = protocols.get(protocol).error(status, response.text)
    assert message == f"scripted {status}" and not overflow


@pytest.mark.parametrize(
    ("protocol", "status", "field", "expected"),
    [
        ("responses", 429, ("error", "code"), "rate_limit_exceeded"),
        ("responses", 500, ("error", "type"), "server_error"),
        ("anthropic", 529, ("error", "type"), "overloaded_error"),
        ("anthropic", 400, ("error", "type"), "invalid_request_error"),
        ("anthropic", 429, ("error", "type"), "rate_limit_error"),
        ("gemini", 400, ("error", "status"), "INVALID_ARGUMENT"),
        ("gemini", 429, ("error", "status"), "RESOURCE_EXHAUSTED"),
        ("gemini", 500, ("error", "status"), "INTERNAL"),
    ],
)
def test_error_bodies_name_the_vendors_error_type(
    protocol: str, status: int, field: tuple[str, str], expected: str
) -> None:
    with ModelServer([{"status": status}]) as server:
        body = post(server, protocol, stream=True).json()
    assert body[field[0]][field[1]] == expected
    if protocol == "anthropic":
        assert body["type"] == "error"


@EACH
@STREAM
def test_overflow_is_recognised(protocol: str, stream: bool) -> None:
    with ModelServer([{"overflow": True}]) as server:
        response = post(server, protocol, stream=stream)
        status, text = response.status_code, response.text
    assert status == 400
    message, overflow = protocols.get(protocol).error(400, text)
    assert overflow
    phrase = {
        "responses": "exceeds the context window",
        "anthropic": "prompt is too long",
        "gemini": "exceeds",
    }
    assert phrase[protocol] in message


# ---------------------------------------------------------------- opaque reasoning state


@STREAM
def test_responses_reasoning_item_carries_encrypted_content(stream: bool) -> None:
    result, _ = ask("responses", REPLY, stream=stream)
    meta = result.message["content"][0]["provider_metadata"]
    assert meta["encrypted_content"] == responses_wire.fake_encrypted_content(REPLY["reasoning"])
    wire = resend("responses", result)
    reasoning = [item for item in wire["input"] if item.get("type") == "reasoning"]
    assert reasoning and reasoning[0]["encrypted_content"] == meta["encrypted_content"]


def test_responses_empty_reasoning_is_an_encrypted_item_without_summary() -> None:
    with ModelServer([{"text": "ok", "reasoning": ""}]) as server:
        body = post(server, "responses", stream=False).json()
    item = body["output"][0]
    assert item["type"] == "reasoning" and item["summary"] == [] and item["encrypted_content"]


@STREAM
def test_anthropic_thinking_is_signed_and_redacted_thinking_is_kept(stream: bool) -> None:
    result, _ = ask("anthropic", {**REPLY, "redacted_thinking": "opaque-bytes"}, stream=stream)
    thinking, redacted = result.message["content"][:2]
    assert thinking["provider_metadata"]["signature"] == anthropic_wire.fake_signature(REPLY["reasoning"])
    assert redacted["provider_metadata"]["redacted"] == "opaque-bytes"
    blocks = resend("anthropic", result)["messages"][1]["content"]
    assert blocks[0] == {
        "type": "thinking",
        "thinking": REPLY["reasoning"],
        "signature": anthropic_wire.fake_signature(REPLY["reasoning"]),
    }
    assert blocks[1] == {"type": "redacted_thinking", "data": "opaque-bytes"}


@STREAM
def test_gemini_signature_rides_on_the_first_function_call(stream: bool) -> None:
    result, _ = ask("gemini", REPLY, stream=stream)
    calls = [p for p in result.message["content"] if p["type"] == "tool-call"]
    assert calls[0]["provider_metadata"]["thought_signature"] == gemini_wire.fake_signature("add")
    assert "thought_signature" not in calls[1]["provider_metadata"]
    parts = resend("gemini", result)["contents"][1]["parts"]
    signed = [p for p in parts if "functionCall" in p and "thoughtSignature" in p]
    assert [p["functionCall"]["name"] for p in signed] == ["add"]
    assert signed[0]["thoughtSignature"] == gemini_wire.fake_signature("add")


@STREAM
def test_gemini_sends_call_ids_only_when_asked(stream: bool) -> None:
    with ModelServer([REPLY, {**REPLY, "gemini_call_ids": True}]) as server:
        plain, _ = read("gemini", post(server, "gemini", stream=stream), stream=stream)
        with_ids, _ = read("gemini", post(server, "gemini", stream=stream), stream=stream)
    # Without ids the adapter makes its own, so the scripted ones cannot show up.
    assert not {c.id for c in plain.tool_calls} & {"call_add", "call_1"}
    assert [c.id for c in with_ids.tool_calls] == ["call_add", "call_2"]


def resend(protocol: str, result: LLMResult) -> dict[str, Any]:
    """The wire body of a follow-up request whose history holds `result`'s message."""
    results = [
        {
            "type": "tool-result",
            "tool_call_id": c.id,
            "tool_name": c.name,
            "output": {"type": "text", "value": "3"},
        }
        for c in result.tool_calls
    ]
    messages = [
        {"role": "user", "content": "hi"},
        result.message,
        {"role": "tool", "content": results},
    ]
    request = Request(model="test-model", messages=messages, base_url="http://127.0.0.1:1/v1")
    return protocols.get(protocol).build(request).body


# ---------------------------------------------------------------- routing and recording


def test_requests_are_routed_by_path_and_recorded() -> None:
    script = ["from chat", "from responses", "from anthropic", "from gemini", "from gemini stream"]
    with ModelServer(script) as server:
        chat = requests.post(
            server.base_url + "/chat/completions", json={"model": "m", "messages": []}, timeout=30
        )
        responses, _ = read("responses", post(server, "responses", stream=False), stream=False)
        anthropic, _ = read("anthropic", post(server, "anthropic", stream=False), stream=False)
        gemini, _ = read("gemini", post(server, "gemini", stream=False, model="gem-1"), stream=False)
        streamed, _ = read("gemini", post(server, "gemini", stream=True, model="gem-2"), stream=True)
        unknown = requests.post(server.base_url + "/completions", json={}, timeout=30)
    assert chat.json()["choices"][0]["message"]["content"] == "from chat"
    texts = [responses.text, anthropic.text, gemini.text, streamed.text]
    assert texts == ["from responses", "from anthropic", "from gemini", "from gemini stream"]
    assert unknown.status_code == 404
    assert [r.path for r in server.log] == [
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/messages",
        "/v1/models/gem-1:generateContent",
        "/v1/models/gem-2:streamGenerateContent",
        "/v1/completions",
    ]
    assert server.log[4].query == {"alt": "sse"}
    assert len(server.requests) == 5  # the unknown path is logged, not a model request
    assert server.requests[1]["input"] == [{"role": "user", "content": "hi"}]
    assert server.requests[2]["max_tokens"] == 1024
    assert server.requests[3]["contents"][0]["parts"] == [{"text": "hi"}]


def test_model_names_are_echoed() -> None:
    with ModelServer(["a", "b", "c"]) as server:
        assert post(server, "responses", stream=False, model="gpt-x").json()["model"] == "gpt-x"
        assert post(server, "anthropic", stream=False, model="claude-x").json()["model"] == "claude-x"
        assert post(server, "gemini", stream=False, model="gemini-x").json()["modelVersion"] == "gemini-x"


def test_unknown_script_key_still_fails() -> None:
    with pytest.raises(ValueError, match="unknown script item key"), ModelServer([{"redacted_thinkin": "x"}]):
        pass


# ---------------------------------------------------------------- shape against recorded traffic


def test_gemini_stream_uses_crlf_and_ends_with_a_finish_chunk() -> None:
    with ModelServer([REPLY]) as server:
        raw = post(server, "gemini", stream=True).content.decode()
    assert raw.endswith("\r\n\r\n") and "\n\n" not in raw.replace("\r\n", "")
    chunks = [json.loads(line[6:]) for line in raw.split("\r\n") if line.startswith("data: ")]
    assert [c["candidates"][0].get("finishReason") for c in chunks].count("STOP") == 1
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    calls = [c for c in chunks if "functionCall" in c["candidates"][0]["content"]["parts"][0]]
    assert len(calls) == 1 and len(calls[0]["candidates"][0]["content"]["parts"]) == 2


@EACH
@STREAM
def test_every_field_sent_appears_in_recorded_traffic(protocol: str, stream: bool) -> None:
    """Each key path we emit (per event type) occurs in some recorded reply of the vendor."""
    with ModelServer([{**REPLY, "chunk_size": 4}]) as server:
        ours = payloads(post(server, protocol, stream=stream).text, stream=stream)
    recorded = recorded_paths(protocol, stream) | UNRECORDED_BUT_REAL
    unknown = sorted({path for payload in ours for path in key_paths(payload)} - recorded)
    assert unknown == []


@EACH
def test_error_bodies_have_the_recorded_shape(protocol: str) -> None:
    with ModelServer([{"status": 400, "error": "bad"}, {"overflow": True}]) as server:
        ours = [post(server, protocol, stream=False).json() for _ in range(2)]
    recorded = {
        path
        for fixture in fixtures(protocol)
        if fixture["response"]["status"] >= 400
        for path in key_paths(json.loads(fixture["response"]["body"]))
    }
    assert {path for body in ours for path in key_paths(body)} <= recorded


# Fields the vendors document and send, which the public fixtures happen not to contain.
UNRECORDED_BUT_REAL = {
    # Newer Responses usage reports cache writes (see the fixtures' README).
    ".usage.input_tokens_details.cache_write_tokens",
    "response.completed.response.usage.input_tokens_details.cache_write_tokens",
    # Recorded Gemini streams had no cache hits; JSON replies show the field.
    ".usageMetadata.cachedContentTokenCount",
}
# Keys whose value is the caller's data (tool arguments), not the vendor's shape.
DATA_KEYS = ("input", "args")


def fixtures(protocol: str) -> Iterator[dict[str, Any]]:
    for path in sorted((FIXTURES / protocol).glob("*.json")):
        yield json.loads(path.read_text())


def recorded_paths(protocol: str, stream: bool) -> set[str]:
    paths: set[str] = set()
    for fixture in fixtures(protocol):
        if fixture["stream"] == stream and fixture["response"]["status"] == 200:
            for payload in payloads(fixture["response"]["body"], stream=stream):
                paths |= key_paths(payload)
    return paths


def payloads(body: str, *, stream: bool) -> list[dict[str, Any]]:
    if not stream:
        return [json.loads(body)]
    parser = SSEParser()
    events = parser.feed(body) + parser.flush()
    return [json.loads(e.data) for e in events if e.data.strip() not in ("", "[DONE]")]


def key_paths(value: Any, prefix: str = "") -> set[str]:
    """Dotted key paths of a JSON value, list positions collapsed, rooted at its `type` if any."""
    if not prefix and isinstance(value, dict) and isinstance(value.get("type"), str):
        prefix = value["type"]
    paths: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}"
            # A typed object's fields depend on its type (text vs tool_use block...).
            if isinstance(item, dict) and isinstance(item.get("type"), str):
                path = f"{path}<{item['type']}>"
            paths.add(path)
            if key not in DATA_KEYS:
                paths |= key_paths(item, path)
    elif isinstance(value, list):
        for item in value:
            typed = (
                f"{prefix}[{item['type']}]"
                if isinstance(item, dict) and isinstance(item.get("type"), str)
                else f"{prefix}[]"
            )
            paths |= key_paths(item, typed)
    return paths
