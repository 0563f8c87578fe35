"""The OpenAI Responses adapter: request building, reply parsing, streaming, errors."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from agentcore import output
from agentcore._utils.sse import SSEEvent, SSEParser
from agentcore.errors import AgentError
from agentcore.protocols import get
from agentcore.protocols._common import default_cache_key
from agentcore.protocols.base import DEFAULT_CAPABILITIES, Request
from agentcore.protocols.responses import adapter

BASE = "https://api.openai.test/v1"


def make(messages: list[Any] | None = None, **fields: Any) -> Request:
    capabilities = {**DEFAULT_CAPABILITIES, **fields.pop("capabilities", {})}
    return Request(
        model=fields.pop("model", "gpt-test"),
        messages=messages if messages is not None else [{"role": "user", "content": "hi"}],
        base_url=fields.pop("base_url", BASE),
        api_key=fields.pop("api_key", "sk-secret"),
        capabilities=capabilities,
        **fields,
    )


def body_of(request: Request) -> dict[str, Any]:
    return adapter.build(request).body


TOOL = {
    "name": "add",
    "description": "Add",
    "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}}},
}


def feed_all(text: str) -> Any:
    parser = adapter.stream()
    events: list[dict[str, Any]] = []
    sse = SSEParser()
    for event in sse.feed(text) + sse.flush():
        events += parser.feed(event)
    return parser, events


def sse_text(*payloads: Any) -> str:
    return "".join(f"event: {p['type']}\ndata: {json.dumps(p)}\n\n" for p in payloads)


# ---------------------------------------------------------------- request basics


def test_url_auth_and_stateless_fields() -> None:
    wire = adapter.build(make(system="Be brief.", stream=True))
    assert wire.url == f"{BASE}/responses"
    assert wire.headers["Authorization"] == "Bearer sk-secret"
    assert wire.body["store"] is False
    assert wire.body["include"] == ["reasoning.encrypted_content"]
    assert wire.body["instructions"] == "Be brief."
    assert wire.body["stream"] is True
    assert wire.body["input"] == [{"type": "message", "role": "user", "content": "hi"}]


def test_no_key_no_auth_header_and_no_empty_instructions() -> None:
    wire = adapter.build(make(api_key=""))
    assert "Authorization" not in wire.headers
    assert "instructions" not in wire.body


def test_registry_returns_this_adapter() -> None:
    assert get("responses") is adapter


def test_user_parts_map_to_input_content() -> None:
    parts = [
        {"type": "text", "text": "look"},
        {"type": "image", "image": "data:image/jpeg;base64,AAAA"},
        {"type": "image", "image": "https://x.test/a.png"},
        {"type": "image", "image": "QkJC", "media_type": "image/gif"},
        {"type": "file", "media_type": "application/pdf", "data": "JVBE", "filename": "r.pdf"},
        {"type": "file", "media_type": "application/pdf", "data": "https://x.test/r.pdf"},
    ]
    content = body_of(make([{"role": "user", "content": parts}]))["input"][0]["content"]
    assert content == [
        {"type": "input_text", "text": "look"},
        {"type": "input_image", "image_url": "data:image/jpeg;base64,AAAA", "detail": "auto"},
        {"type": "input_image", "image_url": "https://x.test/a.png", "detail": "auto"},
        {"type": "input_image", "image_url": "data:image/gif;base64,QkJC", "detail": "auto"},
        {"type": "input_file", "filename": "r.pdf", "file_data": "data:application/pdf;base64,JVBE"},
        {"type": "input_file", "file_url": "https://x.test/r.pdf"},
    ]


def test_audio_is_refused_before_sending() -> None:
    """Responses answers 400 for audio files (recorded fixture); the adapter refuses it locally."""
    audio = {"type": "file", "media_type": "audio/mpeg", "data": "SUQz"}
    with pytest.raises(AgentError) as caught:
        adapter.build(make([{"role": "user", "content": [audio]}]))
    assert caught.value.kind == "request"
    stripped = make(
        [{"role": "user", "content": [{"type": "text", "text": "t"}, audio]}],
        capabilities={"audio": False},
        media_fallback="strip",
    )
    assert body_of(stripped)["input"][0]["content"] == [{"type": "input_text", "text": "t"}]


def test_forbidden_media_raises_with_error_fallback() -> None:
    request = make(
        [{"role": "user", "content": [{"type": "image", "image": "AAAA"}]}], capabilities={"image": False}
    )
    with pytest.raises(AgentError) as caught:
        adapter.build(request)
    assert caught.value.kind == "request"


# ---------------------------------------------------------------- history


def _call(call_id: str = "call_1", **extra: Any) -> dict[str, Any]:
    return {"type": "tool-call", "tool_call_id": call_id, "tool_name": "add", "input": {"a": 1}, **extra}


def _result(output_block: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    return {"type": "tool-result", "tool_call_id": call_id, "tool_name": "add", "output": output_block}


def test_assistant_parts_become_items_in_order() -> None:
    reasoning = {
        "type": "reasoning",
        "text": "thinking",
        "provider_metadata": {"protocol": "responses", "id": "rs_1", "encrypted_content": "ENC"},
    }
    content = [
        {"type": "text", "text": "Let me "},
        {"type": "text", "text": "add."},
        reasoning,
        _call(provider_metadata={"protocol": "responses", "id": "fc_1"}),
        _call("call_2"),
    ]
    items = body_of(make([{"role": "user", "content": "q"}, {"role": "assistant", "content": content}]))[
        "input"
    ][1:]
    assert items == [
        {"type": "message", "role": "assistant", "content": "Let me add."},
        {"type": "reasoning", "id": "rs_1", "encrypted_content": "ENC", "summary": []},
        {"type": "function_call", "call_id": "call_1", "name": "add", "arguments": '{"a": 1}', "id": "fc_1"},
        {"type": "function_call", "call_id": "call_2", "name": "add", "arguments": '{"a": 1}'},
    ]


def test_reasoning_summary_travels_only_with_the_reasoning_capability() -> None:
    reasoning = {
        "type": "reasoning",
        "text": "why",
        "provider_metadata": {"protocol": "responses", "id": "rs_1", "encrypted_content": "E"},
    }
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [reasoning, {"type": "text", "text": "a"}]},
    ]
    item = body_of(make(messages, capabilities={"reasoning": True}))["input"][1]
    assert item["summary"] == [{"type": "summary_text", "text": "why"}]


@pytest.mark.parametrize(
    "meta",
    [
        {"protocol": "anthropic", "signature": "sig"},
        {"protocol": "responses", "id": "rs_1"},  # no encrypted content: an id alone is "not found"
        None,
    ],
)
def test_other_reasoning_is_dropped(meta: dict[str, Any] | None) -> None:
    part: dict[str, Any] = {"type": "reasoning", "text": "t"}
    if meta is not None:
        part["provider_metadata"] = meta
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [part, {"type": "text", "text": "a"}]},
    ]
    assert body_of(make(messages))["input"][1:] == [{"type": "message", "role": "assistant", "content": "a"}]


def test_reasoning_without_a_following_item_is_dropped() -> None:
    """A reply cut off while reasoning leaves an item the API rejects without its following item."""
    reasoning = {
        "type": "reasoning",
        "text": "",
        "provider_metadata": {"protocol": "responses", "id": "rs_1", "encrypted_content": "E"},
    }
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [reasoning]},
        {"role": "user", "content": "go on"},
    ]
    assert [(i["type"], i.get("role")) for i in body_of(make(messages))["input"]] == [
        ("message", "user"),
        ("message", "user"),
    ]


def test_tool_results_become_function_call_outputs() -> None:
    image = {"type": "image", "image": "data:image/png;base64,AAAA"}
    results = [
        _result({"type": "text", "value": "3"}),
        _result({"type": "json", "value": {"sum": 3}}, "call_2"),
        _result({"type": "error-text", "value": "boom"}, "call_3"),
        _result({"type": "content", "value": [{"type": "text", "text": "see"}, image]}, "call_4"),
    ]
    items = body_of(make([{"role": "user", "content": "q"}, {"role": "tool", "content": results}]))["input"][
        1:
    ]
    assert [i["type"] for i in items] == ["function_call_output"] * 4
    assert [i["call_id"] for i in items] == ["call_1", "call_2", "call_3", "call_4"]
    assert items[0]["output"] == "3"
    assert json.loads(items[1]["output"]) == {"sum": 3}
    assert items[2]["output"] == "boom"
    assert items[3]["output"] == [
        {"type": "input_text", "text": "see"},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"},
    ]


def test_unknown_role_is_a_request_error() -> None:
    with pytest.raises(AgentError) as caught:
        adapter.build(make([{"role": "robot", "content": "x"}]))
    assert caught.value.kind == "request"


# ---------------------------------------------------------------- tools and provider


def test_tools_and_tool_choice() -> None:
    body = body_of(make(tools=[TOOL]))
    assert body["tools"] == [
        {
            "type": "function",
            "name": "add",
            "description": "Add",
            "parameters": TOOL["input_schema"],
            "strict": False,
        }
    ]
    assert "tool_choice" not in body
    for choice, wire in [
        ("auto", "auto"),
        ("required", "required"),
        ("none", "none"),
        ({"name": "add"}, {"type": "function", "name": "add"}),
    ]:
        assert body_of(make(tools=[TOOL], provider={"tool_choice": choice}))["tool_choice"] == wire
    off = make(tools=[TOOL], provider={"tool_choice": "required"}, capabilities={"tool_choice": False})
    assert "tool_choice" not in body_of(off)
    assert "tools" not in body_of(make(tools=[TOOL], capabilities={"tools": False}))
    assert (
        body_of(make(tools=[TOOL], provider={"parallel_tool_calls": False}))["parallel_tool_calls"] is False
    )


def test_generation_params(caplog: pytest.LogCaptureFixture) -> None:
    provider = {
        "temperature": 0.2,
        "top_p": 0.9,
        "max_output_tokens": 99,
        "reasoning_effort": "low",
        "seed": 1,
    }
    with caplog.at_level(logging.WARNING, logger="agentcore"):
        body = body_of(make(provider=provider, max_tokens=50))
    assert (body["temperature"], body["top_p"], body["max_output_tokens"]) == (0.2, 0.9, 99)
    assert body["reasoning"] == {"effort": "low"}
    assert "seed" not in body and "seed" in caplog.text
    assert body_of(make(max_tokens=50))["max_output_tokens"] == 50


def test_unknown_provider_key_is_a_config_error() -> None:
    with pytest.raises(AgentError) as caught:
        adapter.build(make(provider={"temprature": 1}))
    assert caught.value.kind == "config"


def test_headers_and_body_pass_through(caplog: pytest.LogCaptureFixture) -> None:
    provider = {"headers": {"X-App": "a"}, "body": {"service_tier": "flex", "model": "other", "input": []}}
    with caplog.at_level(logging.WARNING, logger="agentcore"):
        wire = adapter.build(make(provider=provider))
    assert wire.headers["X-App"] == "a"
    assert wire.body["service_tier"] == "flex"
    assert wire.body["model"] == "gpt-test" and wire.body["input"]
    assert "cannot override" in caplog.text


# ---------------------------------------------------------------- structured output and cache


def test_structured_output_as_text_format() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    body = body_of(make(output=output.object(schema, name="count")))
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "count", "schema": schema, "strict": False}
    }
    assert "instructions" not in body
    wrapped = body_of(make(output=output.array({"type": "string"})))["text"]["format"]["schema"]
    assert wrapped["properties"]["items"] == {"type": "array", "items": {"type": "string"}}


def test_json_output_uses_json_object_and_instructions() -> None:
    body = body_of(make(system="S", output=output.json()))
    assert body["text"] == {"format": {"type": "json_object"}}
    assert body["instructions"].startswith("S\n\n") and "JSON" in body["instructions"]


def test_structured_output_without_capability_goes_to_instructions() -> None:
    body = body_of(make(output=output.object({"type": "object"}), capabilities={"structured_output": False}))
    assert "text" not in body
    assert "JSON Schema" in body["instructions"]


def test_cache_key_defaults_to_a_stable_hash() -> None:
    first = body_of(make(system="S"))["prompt_cache_key"]
    assert first == default_cache_key(BASE, "gpt-test", "S") == body_of(make(system="S"))["prompt_cache_key"]
    assert len(first) == 32
    assert body_of(make(system="T"))["prompt_cache_key"] != first
    assert "prompt_cache_key" not in body_of(make(cache=False))


def test_cache_dict() -> None:
    cache = {"key": "conv-1", "retention": "24h", "body": {"cache_namespace": "a", "prompt_cache_key": "x"}}
    body = body_of(make(cache=cache))
    assert body["prompt_cache_retention"] == "24h"
    assert body["cache_namespace"] == "a"
    assert body["prompt_cache_key"] == "x"  # the cache body merges after the key
    assert (
        body_of(make(cache={"key": "k"}, provider={"body": {"prompt_cache_key": "p"}}))["prompt_cache_key"]
        == "p"
    )
    with pytest.raises(AgentError):
        adapter.build(make(cache={"ttl": "1h"}))


# ---------------------------------------------------------------- replies


REPLY = {
    "id": "resp_1",
    "status": "completed",
    "output": [
        {
            "type": "reasoning",
            "id": "rs_1",
            "encrypted_content": "ENC",
            "summary": [{"type": "summary_text", "text": "Plan. "}],
            "content": [{"type": "reasoning_text", "text": "Raw."}],
        },
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Adding."}],
        },
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "add", "arguments": '{"a": 1}'},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    ],
    "usage": {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 60},
        "output_tokens": 20,
        "total_tokens": 120,
    },
}


def test_parse_reply() -> None:
    result = adapter.parse(REPLY)
    assert result.text == "Adding."
    assert result.reasoning == "Plan. Raw."
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [("call_1", "add", {"a": 1})]
    assert result.finish_reason == "tool_calls"
    usage = result.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.total_tokens) == (
        100,
        20,
        60,
        120,
    )
    reasoning, text, call = result.message["content"]
    assert reasoning["provider_metadata"] == {
        "protocol": "responses",
        "id": "rs_1",
        "encrypted_content": "ENC",
    }
    assert text == {"type": "text", "text": "Adding."}
    assert call["provider_metadata"] == {"protocol": "responses", "id": "fc_1"}


@pytest.mark.parametrize(
    ("status", "details", "finish"),
    [
        ("completed", None, "stop"),
        ("incomplete", {"reason": "max_output_tokens"}, "length"),
        ("incomplete", {"reason": "content_filter"}, "content_filter"),
        ("queued", None, "other"),
        ("in_progress", None, "other"),
    ],
)
def test_finish_reasons(status: str, details: Any, finish: str) -> None:
    reply = {"status": status, "incomplete_details": details, "output": []}
    assert adapter.parse(reply).finish_reason == finish


def test_refusal_is_a_content_filter_finish() -> None:
    reply = {
        "status": "completed",
        "output": [{"type": "message", "content": [{"type": "refusal", "refusal": "No."}]}],
    }
    result = adapter.parse(reply)
    assert (result.text, result.finish_reason) == ("", "content_filter")


def test_bad_arguments_are_kept_raw() -> None:
    reply = {
        "status": "completed",
        "output": [{"type": "function_call", "id": "fc", "call_id": "c", "name": "add", "arguments": "{bad"}],
    }
    call = adapter.parse(reply).tool_calls[0]
    assert (call.arguments, call.raw_arguments) == ({}, "{bad")


def test_error_object_in_a_reply_raises() -> None:
    with pytest.raises(AgentError) as caught:
        adapter.parse(
            {"error": {"code": "server_error", "message": "oops"}, "status": "failed", "output": []}
        )
    assert caught.value.kind == "server"
    with pytest.raises(AgentError):
        adapter.parse(["not", "an", "object"])


# ---------------------------------------------------------------- streaming


def _stream_events() -> list[dict[str, Any]]:
    return [
        {"type": "response.created", "response": {"status": "in_progress", "output": []}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "reasoning", "id": "rs_1", "summary": []},
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "output_index": 0,
            "summary_index": 0,
            "delta": "Plan",
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {
                "type": "reasoning",
                "id": "rs_1",
                "encrypted_content": "ENC",
                "summary": [{"type": "summary_text", "text": "Plan"}],
            },
        },
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {"type": "message", "id": "msg_1", "content": []},
        },
        {"type": "response.output_text.delta", "output_index": 1, "content_index": 0, "delta": "Hel"},
        {"type": "response.output_text.delta", "output_index": 1, "content_index": 0, "delta": "lo"},
        {
            "type": "response.output_item.done",
            "output_index": 1,
            "item": {"type": "message", "id": "msg_1", "content": [{"type": "output_text", "text": "Hello"}]},
        },
        {
            "type": "response.output_item.added",
            "output_index": 2,
            "item": {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "add",
                "arguments": "",
            },
        },
        {"type": "response.function_call_arguments.delta", "output_index": 2, "delta": '{"a":'},
        {"type": "response.function_call_arguments.delta", "output_index": 2, "delta": " 1}"},
        {
            "type": "response.output_item.done",
            "output_index": 2,
            "item": {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "add",
                "arguments": '{"a": 1}',
            },
        },
    ]


def test_stream_events_and_result_from_the_terminal_response() -> None:
    events = _stream_events()
    final_output = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    completed = {
        "type": "response.completed",
        "response": {
            "status": "completed",
            "output": final_output,
            "usage": {"input_tokens": 5, "output_tokens": 7},
        },
    }
    parser, neutral = feed_all(sse_text(*events, completed))
    assert parser.done
    assert neutral == [
        {"type": "reasoning-delta", "text": "Plan"},
        {"type": "text-delta", "text": "Hel"},
        {"type": "text-delta", "text": "lo"},
        {"type": "tool-call-delta", "tool_call_id": "call_1", "tool_name": "add", "delta": '{"a":'},
        {"type": "tool-call-delta", "tool_call_id": "call_1", "tool_name": "add", "delta": " 1}"},
        {"type": "tool-call", "tool_call_id": "call_1", "tool_name": "add", "input": {"a": 1}},
    ]
    result = parser.result()
    assert (result.text, result.reasoning, result.finish_reason) == ("Hello", "Plan", "tool_calls")
    assert result.usage.input_tokens == 5
    assert result.message["content"][0]["provider_metadata"]["encrypted_content"] == "ENC"
    assert isinstance(result.raw, list) and result.raw[-1]["type"] == "response.completed"


def test_stream_result_from_items_when_the_terminal_output_is_empty() -> None:
    completed = {"type": "response.completed", "response": {"status": "completed", "output": []}}
    result = feed_all(sse_text(*_stream_events(), completed))[0].result()
    assert (result.text, [c.id for c in result.tool_calls]) == ("Hello", ["call_1"])


def test_stream_cut_short_keeps_text_and_only_complete_calls() -> None:
    events = _stream_events()[:7] + _stream_events()[8:10]  # text streamed, call still open
    parser, _ = feed_all(sse_text(*events))
    assert not parser.done
    result = parser.result()
    assert (result.text, result.tool_calls, result.finish_reason) == ("Hello", [], "other")


def test_incomplete_terminal_event() -> None:
    incomplete = {
        "type": "response.incomplete",
        "response": {
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "output": [],
        },
    }
    parser, _ = feed_all(sse_text(*_stream_events()[4:8], incomplete))
    assert parser.done and parser.result().finish_reason == "length"


@pytest.mark.parametrize(
    "payload",
    [
        {
            "type": "error",
            "code": "context_length_exceeded",
            "message": "Your input exceeds the context window of this model.",
        },
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
                "message": "Your input exceeds the context window of this model.",
            },
        },
    ],
)
def test_error_event_raises_with_overflow(payload: dict[str, Any]) -> None:
    parser = adapter.stream()
    with pytest.raises(AgentError) as caught:
        parser.feed(SSEEvent(json.dumps(payload), "error"))
    assert caught.value.overflow and caught.value.kind == "request" and not caught.value.retryable


def test_error_event_rate_limit_and_failed_response() -> None:
    with pytest.raises(AgentError) as caught:
        adapter.stream().feed(
            SSEEvent(json.dumps({"type": "error", "code": "rate_limit_exceeded", "message": "slow"}), "error")
        )
    assert caught.value.kind == "limit" and caught.value.retryable
    failed = {
        "type": "response.failed",
        "response": {"status": "failed", "error": {"code": "server_error", "message": "down"}},
    }
    with pytest.raises(AgentError) as caught:
        adapter.stream().feed(SSEEvent(json.dumps(failed), "response.failed"))
    assert (caught.value.kind, caught.value.message) == ("server", "down")


def test_malformed_stream_data_is_unknown() -> None:
    with pytest.raises(AgentError) as caught:
        adapter.stream().feed(SSEEvent("{nope", "message"))
    assert caught.value.kind == "unknown"


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("status", "body", "overflow"),
    [
        (
            400,
            {
                "error": {
                    "code": "context_length_exceeded",
                    "message": "Your input exceeds the context window of this model.",
                }
            },
            True,
        ),
        (
            400,
            {
                "error": {
                    "message": "Input tokens exceed the configured limit of 272000 tokens. "
                    "Your messages resulted in 300000 tokens."
                }
            },
            True,
        ),
        (400, {"error": {"message": "Invalid value: 'x'."}}, False),
        (429, {"error": {"message": "Request too large: exceeds the context window rate"}}, False),
    ],
)
def test_error_message_and_overflow(status: int, body: dict[str, Any], overflow: bool) -> None:
    message, is_overflow = adapter.error(status, json.dumps(body))
    assert message == body["error"]["message"]
    assert is_overflow is overflow


# ---------------------------------------------------------------- provider state round trip


def test_reasoning_state_round_trips_to_responses_and_is_dropped_elsewhere() -> None:
    """The encrypted reasoning and item ids go back to Responses; other protocols never see them."""
    reply = adapter.parse(REPLY)
    history = [
        {"role": "user", "content": "add 1"},
        reply.message,
        {"role": "tool", "content": [_result({"type": "text", "value": "1"})]},
    ]
    items = body_of(make(history, tools=[TOOL]))["input"]
    assert items[1] == {"type": "reasoning", "id": "rs_1", "encrypted_content": "ENC", "summary": []}
    assert items[3]["id"] == "fc_1" and items[3]["call_id"] == "call_1"
    assert items[4] == {"type": "function_call_output", "call_id": "call_1", "output": "1"}
    request = make(history, tools=[TOOL])
    anthropic_body = json.dumps(get("anthropic").build(request).body)
    gemini_body = json.dumps(get("gemini").build(request).body)
    for other in (anthropic_body, gemini_body):
        assert "ENC" not in other and "rs_1" not in other and "fc_1" not in other
        assert "call_1" in other
