"""The Gemini adapter: request building, reply parsing, streaming, call ids, errors."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from agentcore import output
from agentcore._utils.sse import SSEEvent, SSEParser
from agentcore.errors import AgentError
from agentcore.protocols import get
from agentcore.protocols.base import DEFAULT_CAPABILITIES, Request
from agentcore.protocols.gemini import SKIP_SIGNATURE, adapter

BASE = "https://generativelanguage.test/v1beta"
TOOL = {
    "name": "add",
    "description": "Add",
    "input_schema": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "additionalProperties": False,
    },
}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}


def make(messages: list[Any] | None = None, **fields: Any) -> Request:
    capabilities = {**DEFAULT_CAPABILITIES, **fields.pop("capabilities", {})}
    return Request(
        model=fields.pop("model", "gemini-2.5-flash"),
        messages=messages if messages is not None else [{"role": "user", "content": "hi"}],
        base_url=BASE,
        api_key=fields.pop("api_key", "AIza-test"),
        capabilities=capabilities,
        **fields,
    )


def body_of(request: Request) -> dict[str, Any]:
    return adapter.build(request).body


def call(call_id: str = "call_1", meta: dict[str, Any] | None = None) -> dict[str, Any]:
    part = {"type": "tool-call", "tool_call_id": call_id, "tool_name": "add", "input": {"a": 1}}
    if meta is not None:
        part["provider_metadata"] = meta
    return part


def result(block: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    return {"type": "tool-result", "tool_call_id": call_id, "tool_name": "add", "output": block}


def chunks_text(*chunks: dict[str, Any]) -> str:
    return "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks)


def feed_all(text: str) -> tuple[Any, list[dict[str, Any]]]:
    parser = adapter.stream()
    sse = SSEParser()
    events: list[dict[str, Any]] = []
    for event in sse.feed(text) + sse.flush():
        events += parser.feed(event)
    return parser, events


# ---------------------------------------------------------------- request basics


def test_urls_and_auth_header() -> None:
    wire = adapter.build(make(stream=False))
    assert wire.url == f"{BASE}/models/gemini-2.5-flash:generateContent"
    assert wire.headers["x-goog-api-key"] == "AIza-test"
    assert "key=" not in wire.url and "Authorization" not in wire.headers
    streamed = adapter.build(make(model="models/gemini-2.5-pro", stream=True))
    assert streamed.url == f"{BASE}/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    assert "stream" not in streamed.body
    assert get("gemini") is adapter


def test_contents_roles_and_system_instruction() -> None:
    messages = [
        {"role": "system", "content": "extra"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
        {"role": "assistant", "content": ""},
    ]
    body = body_of(make(messages, system="S"))
    assert body["systemInstruction"] == {"parts": [{"text": "S\n\nextra"}]}
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "q"}]},
        {"role": "model", "parts": [{"text": "a"}]},
        # Gemini refuses a request ending on a model turn: a continuation turn follows.
        {"role": "user", "parts": [{"text": "Continue."}]},
    ]
    assert "generationConfig" not in body and "tools" not in body


def test_user_media_parts() -> None:
    parts = [
        {"type": "image", "image": "data:image/jpeg;base64,AAAA"},
        {"type": "image", "image": "gs://bucket/a.png"},
        {"type": "file", "media_type": "audio/mpeg", "data": "SUQz"},
        {"type": "file", "media_type": "application/pdf", "data": "https://x.test/r.pdf"},
        {"type": "text", "text": "describe"},
    ]
    wire_parts = body_of(make([{"role": "user", "content": parts}]))["contents"][0]["parts"]
    assert wire_parts == [
        {"inlineData": {"mimeType": "image/jpeg", "data": "AAAA"}},
        {"fileData": {"mimeType": "image/png", "fileUri": "gs://bucket/a.png"}},
        {"inlineData": {"mimeType": "audio/mpeg", "data": "SUQz"}},
        {"fileData": {"mimeType": "application/pdf", "fileUri": "https://x.test/r.pdf"}},
        {"text": "describe"},
    ]
    with pytest.raises(AgentError):
        adapter.build(make([{"role": "user", "content": parts}], capabilities={"audio": False}))


# ---------------------------------------------------------------- history: calls, results, signatures


def test_function_results_pair_by_name_and_id() -> None:
    image = {"type": "image", "image": "data:image/png;base64,AAAA"}
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                call("call_1", {"protocol": "gemini", "thought_signature": "SIG"}),
                call("call_2", {"protocol": "gemini"}),
            ],
        },
        {
            "role": "tool",
            "content": [
                result({"type": "json", "value": {"sum": 1}}),
                result({"type": "error-text", "value": "boom"}, "call_2"),
                result({"type": "content", "value": [{"type": "text", "text": "pic"}, image]}, "call_3"),
            ],
        },
    ]
    contents = body_of(make(messages))["contents"]
    assert contents[1] == {
        "role": "model",
        "parts": [
            {"functionCall": {"name": "add", "args": {"a": 1}, "id": "call_1"}, "thoughtSignature": "SIG"},
            {"functionCall": {"name": "add", "args": {"a": 1}, "id": "call_2"}},
        ],
    }
    responses = [p["functionResponse"] for p in contents[2]["parts"]]
    assert contents[2]["role"] == "user"
    assert responses[0] == {"name": "add", "response": {"output": {"sum": 1}}, "id": "call_1"}
    assert responses[1] == {"name": "add", "response": {"error": "boom"}, "id": "call_2"}
    assert responses[2]["response"]["output"].startswith("pic\nSee file ")
    file_id = responses[2]["response"]["output"].split("See file ")[1].rstrip(".")
    assert contents[3] == {
        "role": "user",
        "parts": [
            {"text": f"This is file {file_id}:"},
            {"inlineData": {"mimeType": "image/png", "data": "AAAA"}},
        ],
    }


def test_results_of_one_turn_in_two_tool_messages_travel_as_one_content_in_call_order() -> None:
    """A call that waited for an approval gets its result in a later tool message (API.md
    §Durable sessions): Gemini wants one content with every response, matched by name and order."""
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [call("call_1"), call("call_2")]},
        {"role": "tool", "content": [result({"type": "text", "value": "second"}, "call_2")]},
        {"role": "tool", "content": [result({"type": "text", "value": "first"}, "call_1")]},
    ]
    contents = body_of(make(messages))["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert [p["functionResponse"]["id"] for p in contents[2]["parts"]] == ["call_1", "call_2"]
    assert [p["functionResponse"]["response"] for p in contents[2]["parts"]] == [
        {"output": "first"},
        {"output": "second"},
    ]


def test_text_results_and_denials() -> None:
    messages = [
        {"role": "assistant", "content": [call()]},
        {
            "role": "tool",
            "content": [
                result({"type": "text", "value": "3"}),
                result({"type": "execution-denied", "value": None}, "call_2"),
            ],
        },
    ]
    parts = body_of(make(messages))["contents"][1]["parts"]
    assert parts[0]["functionResponse"]["response"] == {"output": "3"}
    assert "denied" in parts[1]["functionResponse"]["response"]["error"]


def test_calls_from_other_protocols_get_the_placeholder_signature_once_per_turn() -> None:
    """Gemini 3 rejects unsigned function calls; Google documents a placeholder for foreign history."""
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [call("a"), call("b")]}]
    parts = body_of(make(messages))["contents"][1]["parts"]
    assert parts[0]["thoughtSignature"] == SKIP_SIGNATURE
    assert "thoughtSignature" not in parts[1]


def test_reasoning_parts() -> None:
    content = [
        {
            "type": "reasoning",
            "text": "signed",
            "provider_metadata": {"protocol": "gemini", "thought_signature": "S1"},
        },
        {"type": "reasoning", "text": "plain"},
        {
            "type": "reasoning",
            "text": "claude",
            "provider_metadata": {"protocol": "anthropic", "signature": "X"},
        },
        {
            "type": "text",
            "text": "answer",
            "provider_metadata": {"protocol": "gemini", "thought_signature": "S2"},
        },
    ]
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": content}]
    assert body_of(make(messages))["contents"][1]["parts"] == [
        {"text": "signed", "thought": True, "thoughtSignature": "S1"},
        {"text": "answer", "thoughtSignature": "S2"},
    ]
    with_text = body_of(make(messages, capabilities={"reasoning": True}))["contents"][1]["parts"]
    assert [p["text"] for p in with_text] == ["signed", "plain", "claude", "answer"]
    assert "X" not in json.dumps(with_text)


# ---------------------------------------------------------------- tools, generation config


def test_function_declarations_use_json_schema() -> None:
    body = body_of(make(tools=[TOOL]))
    declaration = body["tools"][0]["functionDeclarations"][0]
    assert declaration["name"] == "add" and declaration["description"] == "Add"
    assert declaration["parametersJsonSchema"] == {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "additionalProperties": False,
    }
    assert "toolConfig" not in body
    assert "tools" not in body_of(make(tools=[TOOL], capabilities={"tools": False}))


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("auto", {"mode": "AUTO"}),
        ("none", {"mode": "NONE"}),
        ("required", {"mode": "ANY"}),
        ({"name": "add"}, {"mode": "ANY", "allowedFunctionNames": ["add"]}),
    ],
)
def test_tool_choice(choice: Any, config: dict[str, Any]) -> None:
    body = body_of(make(tools=[TOOL], provider={"tool_choice": choice}))
    assert body["toolConfig"] == {"functionCallingConfig": config}
    assert "toolConfig" not in body_of(
        make(tools=[TOOL], provider={"tool_choice": choice}, capabilities={"tool_choice": False})
    )


def test_generation_config(caplog: pytest.LogCaptureFixture) -> None:
    provider = {
        "temperature": 0.1,
        "top_p": 0.8,
        "top_k": 4,
        "max_output_tokens": 50,
        "stop": ["X"],
        "seed": 7,
        "presence_penalty": 0.5,
        "frequency_penalty": 0.25,
        "reasoning_effort": "medium",
        "parallel_tool_calls": False,
    }
    with caplog.at_level(logging.WARNING, logger="agentcore"):
        config = body_of(make(provider=provider, max_tokens=10))["generationConfig"]
    assert config == {
        "temperature": 0.1,
        "topP": 0.8,
        "topK": 4,
        "seed": 7,
        "presencePenalty": 0.5,
        "frequencyPenalty": 0.25,
        "maxOutputTokens": 50,
        "stopSequences": ["X"],
        "thinkingConfig": {"thinkingBudget": 8192, "includeThoughts": True},
    }
    assert "parallel_tool_calls" in caplog.text
    assert body_of(make(max_tokens=10))["generationConfig"] == {"maxOutputTokens": 10}
    assert body_of(make(provider={"reasoning_effort": "none"}))["generationConfig"] == {
        "thinkingConfig": {"thinkingBudget": 0}
    }
    with pytest.raises(AgentError):
        adapter.build(make(provider={"reasoning_effort": "huge"}))


def test_body_and_cache(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agentcore"):
        body = body_of(
            make(
                cache={"key": "k", "body": {"cachedContent": "cachedContents/1"}},
                provider={"body": {"safetySettings": [], "contents": []}},
            )
        )
    assert body["cachedContent"] == "cachedContents/1" and body["safetySettings"] == []
    assert body["contents"] and "cannot override" in caplog.text
    assert set(body_of(make(cache=True))) == {"contents"}


# ---------------------------------------------------------------- structured output


def test_structured_output_uses_json_mode_without_tools() -> None:
    config = body_of(make(output=output.object(SCHEMA)))["generationConfig"]
    assert config == {"responseMimeType": "application/json", "responseJsonSchema": SCHEMA}
    assert body_of(make(output=output.json()))["generationConfig"] == {"responseMimeType": "application/json"}


def test_structured_output_with_tools_before_gemini_3_goes_to_instructions() -> None:
    body = body_of(make(system="S", tools=[TOOL], output=output.object(SCHEMA)))
    assert "generationConfig" not in body
    assert "JSON Schema" in body["systemInstruction"]["parts"][0]["text"]
    newer = body_of(make(model="gemini-3-flash-preview", tools=[TOOL], output=output.object(SCHEMA)))
    assert newer["generationConfig"]["responseJsonSchema"] == SCHEMA
    off = body_of(make(output=output.object(SCHEMA), capabilities={"structured_output": False}))
    assert "generationConfig" not in off and "JSON" in off["systemInstruction"]["parts"][0]["text"]


# ---------------------------------------------------------------- replies


def reply(parts: list[Any], **extra: Any) -> dict[str, Any]:
    body = {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {
            "promptTokenCount": 10,
            "candidatesTokenCount": 3,
            "thoughtsTokenCount": 4,
            "cachedContentTokenCount": 6,
            "totalTokenCount": 17,
        },
        "responseId": "resp-A",
    }
    body.update(extra)
    return body


def test_parse_reply_with_thoughts_signatures_and_calls() -> None:
    parts = [
        {"text": "Think", "thought": True},
        {"text": "ing.", "thought": True},
        {"text": "Answer", "thoughtSignature": "S1"},
        {"functionCall": {"name": "add", "args": {"a": 1}}, "thoughtSignature": "S2"},
        {"functionCall": {"name": "add"}},
    ]
    parsed = adapter.parse(reply(parts))
    assert (parsed.text, parsed.reasoning, parsed.finish_reason) == ("Answer", "Thinking.", "tool_calls")
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("add", {"a": 1}), ("add", {})]
    ids = [c.id for c in parsed.tool_calls]
    assert all(i.startswith("call_") for i in ids) and len(set(ids)) == 2
    content = parsed.message["content"]
    assert content[0] == {"type": "reasoning", "text": "Thinking."}
    assert content[1]["provider_metadata"] == {"protocol": "gemini", "thought_signature": "S1"}
    assert content[2]["provider_metadata"] == {"protocol": "gemini", "thought_signature": "S2"}
    assert content[3]["provider_metadata"] == {"protocol": "gemini"}
    usage = parsed.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.total_tokens) == (
        10,
        7,
        6,
        17,
    )


def test_generated_ids_are_deterministic_per_response_and_unique_across_responses() -> None:
    parts = [{"functionCall": {"name": "add", "args": {"a": 1}}}]
    first = adapter.parse(reply(parts)).tool_calls[0].id
    assert adapter.parse(reply(parts)).tool_calls[0].id == first
    assert adapter.parse(reply(parts, responseId="resp-B")).tool_calls[0].id != first
    assert adapter.parse(reply([{"functionCall": {"name": "add", "id": "v1"}}])).tool_calls[0].id == "v1"


def test_streamed_and_whole_replies_agree() -> None:
    parts = [
        {"text": "Ans"},
        {"text": "wer"},
        {"functionCall": {"name": "add", "args": {"a": 1}}, "thoughtSignature": "S"},
    ]
    whole = adapter.parse(reply(parts))
    chunk = reply([])
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [p]}, "index": 0}], "responseId": "resp-A"}
        for p in parts
    ] + [chunk]
    parser, events = feed_all(chunks_text(*chunks))
    streamed = parser.result()
    assert parser.done
    assert streamed.message == whole.message
    assert streamed.tool_calls[0].id == whole.tool_calls[0].id
    assert events == [
        {"type": "text-delta", "text": "Ans"},
        {"type": "text-delta", "text": "wer"},
        {"type": "tool-call", "tool_call_id": whole.tool_calls[0].id, "tool_name": "add", "input": {"a": 1}},
    ]


@pytest.mark.parametrize(
    ("reason", "finish"),
    [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("MODEL_ARMOR", "content_filter"),
        ("RECITATION", "content_filter"),
        ("MALFORMED_FUNCTION_CALL", "other"),
        ("UNEXPECTED_TOOL_CALL", "other"),
    ],
)
def test_finish_reasons(reason: str, finish: str) -> None:
    body = {"candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]}, "finishReason": reason}]}
    assert adapter.parse(body).finish_reason == finish


def test_blocked_prompt_is_a_content_filter() -> None:
    parsed = adapter.parse(
        {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 4}}
    )
    assert (parsed.text, parsed.finish_reason, parsed.usage.input_tokens) == ("", "content_filter", 4)
    parser, _ = feed_all(chunks_text({"promptFeedback": {"blockReason": "OTHER"}}))
    assert parser.done and parser.result().finish_reason == "content_filter"


# ---------------------------------------------------------------- streaming


def test_stream_is_done_at_the_finish_reason_and_reads_late_usage() -> None:
    first = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi"}]}, "index": 0}]}
    last = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": "", "thoughtSignature": "SIG"}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ]
    }
    usage = {"usageMetadata": {"promptTokenCount": 2, "candidatesTokenCount": 1}}
    parser = adapter.stream()
    parser.feed(SSEEvent(json.dumps(first)))
    assert not parser.done
    parser.feed(SSEEvent(json.dumps(last)))
    assert parser.done
    parser.feed(SSEEvent(json.dumps(usage)))
    parsed = parser.result()
    assert parsed.text == "Hi" and parsed.usage.input_tokens == 2
    # The signature that came on a closing empty part stays with the text it signs.
    assert parsed.message["content"] == [
        {
            "type": "text",
            "text": "Hi",
            "provider_metadata": {"protocol": "gemini", "thought_signature": "SIG"},
        }
    ]


def test_stream_cut_short_has_no_finish() -> None:
    parser, _ = feed_all(chunks_text({"candidates": [{"content": {"parts": [{"text": "Hal"}]}}]}))
    assert not parser.done
    assert (parser.result().text, parser.result().finish_reason) == ("Hal", "other")


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}, "server"),
        ({"code": 429, "message": "Quota", "status": "RESOURCE_EXHAUSTED"}, "limit"),
        (
            {
                "code": 400,
                "message": "The input token count (1200293) exceeds the maximum number of tokens "
                "allowed (1048576).",
                "status": "INVALID_ARGUMENT",
            },
            "request",
        ),
    ],
)
def test_error_chunk_raises(error: dict[str, Any], kind: str) -> None:
    with pytest.raises(AgentError) as caught:
        adapter.stream().feed(SSEEvent(json.dumps({"error": error})))
    assert caught.value.kind == kind
    assert caught.value.overflow is ("input token count" in error["message"])


def test_malformed_chunk_is_unknown() -> None:
    with pytest.raises(AgentError) as caught:
        adapter.stream().feed(SSEEvent("not json"))
    assert caught.value.kind == "unknown"


# ---------------------------------------------------------------- errors


def test_error_message_and_overflow() -> None:
    overflow = "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576)."
    listed = json.dumps([{"error": {"code": 400, "message": overflow, "status": "INVALID_ARGUMENT"}}])
    assert adapter.error(400, listed) == (overflow, True)
    plain = json.dumps(
        {"error": {"code": 400, "message": "Invalid JSON payload received.", "status": "INVALID_ARGUMENT"}}
    )
    assert adapter.error(400, plain) == ("Invalid JSON payload received.", False)
    assert adapter.error(429, listed)[1] is False


# ---------------------------------------------------------------- provider state round trip


def test_thought_signatures_round_trip_to_gemini_and_are_dropped_elsewhere() -> None:
    """Gemini 3 rejects function calls sent back without their signature."""
    parsed = adapter.parse(
        reply(
            [
                {"text": "plan", "thought": True},
                {"functionCall": {"name": "add", "args": {"a": 1}}, "thoughtSignature": "SIG"},
            ]
        )
    )
    call_id = parsed.tool_calls[0].id
    history = [
        {"role": "user", "content": "add 1"},
        parsed.message,
        {"role": "tool", "content": [result({"type": "text", "value": "1"}, call_id)]},
    ]
    contents = body_of(make(history, tools=[TOOL]))["contents"]
    assert contents[1]["parts"] == [
        {"functionCall": {"name": "add", "args": {"a": 1}, "id": call_id}, "thoughtSignature": "SIG"}
    ]
    assert contents[2]["parts"][0]["functionResponse"]["id"] == call_id
    for protocol in ("responses", "anthropic", "chat"):
        other = json.dumps(get(protocol).build(make(history, tools=[TOOL])).body)
        assert "SIG" not in other and call_id in other
