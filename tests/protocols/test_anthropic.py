"""The Anthropic Messages adapter: request building, reply parsing, streaming, errors."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from agentcore import output
from agentcore._utils.sse import SSEEvent, SSEParser
from agentcore.errors import AgentError
from agentcore.protocols import get
from agentcore.protocols.anthropic import adapter
from agentcore.protocols.base import DEFAULT_CAPABILITIES, Request

BASE = "https://api.anthropic.test/v1"
TOOL = {
    "name": "add",
    "description": "Add",
    "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}}},
}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def make(messages: list[Any] | None = None, **fields: Any) -> Request:
    capabilities = {**DEFAULT_CAPABILITIES, **fields.pop("capabilities", {})}
    fields.setdefault("cache", False)
    return Request(
        model=fields.pop("model", "claude-test"),
        messages=messages if messages is not None else [{"role": "user", "content": "hi"}],
        base_url=BASE,
        api_key=fields.pop("api_key", "sk-ant"),
        capabilities=capabilities,
        **fields,
    )


def body_of(request: Request) -> dict[str, Any]:
    return adapter.build(request).body


def call(call_id: str = "toolu_1", **extra: Any) -> dict[str, Any]:
    return {"type": "tool-call", "tool_call_id": call_id, "tool_name": "add", "input": {"a": 1}, **extra}


def result(block: dict[str, Any], call_id: str = "toolu_1") -> dict[str, Any]:
    return {"type": "tool-result", "tool_call_id": call_id, "tool_name": "add", "output": block}


def sse_text(*payloads: Any) -> str:
    return "".join(f"event: {p['type']}\ndata: {json.dumps(p)}\n\n" for p in payloads)


def feed_all(text: str, request: Request | None = None) -> tuple[Any, list[dict[str, Any]]]:
    parser = adapter.stream(request)
    sse = SSEParser()
    events: list[dict[str, Any]] = []
    for event in sse.feed(text) + sse.flush():
        events += parser.feed(event)
    return parser, events


# ---------------------------------------------------------------- request basics


def test_url_headers_and_defaults() -> None:
    wire = adapter.build(make(system="Be brief.", stream=True))
    assert wire.url == f"{BASE}/messages"
    assert wire.headers["x-api-key"] == "sk-ant"
    assert wire.headers["anthropic-version"] == "2023-06-01"
    assert "Authorization" not in wire.headers
    assert wire.body["max_tokens"] == 8192
    assert wire.body["system"] == "Be brief."
    assert wire.body["stream"] is True
    assert wire.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert get("anthropic") is adapter


def test_max_tokens_sources() -> None:
    assert body_of(make(max_tokens=100))["max_tokens"] == 100
    assert body_of(make(max_tokens=100, provider={"max_output_tokens": 7}))["max_tokens"] == 7


def test_user_media_blocks() -> None:
    text_file = {"type": "file", "media_type": "text/plain", "data": "aGVsbG8="}
    parts = [
        {"type": "image", "image": "data:image/jpeg;base64,AAAA"},
        {"type": "image", "image": "https://x.test/a.png"},
        {"type": "file", "media_type": "application/pdf", "data": "JVBE", "filename": "r.pdf"},
        {"type": "file", "media_type": "application/pdf", "data": "https://x.test/r.pdf"},
        text_file,
        {"type": "text", "text": ""},
        {"type": "text", "text": "what?"},
    ]
    blocks = body_of(make([{"role": "user", "content": parts}]))["messages"][0]["content"]
    assert blocks == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "AAAA"}},
        {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"},
            "title": "r.pdf",
        },
        {"type": "document", "source": {"type": "url", "url": "https://x.test/r.pdf"}},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hello"}},
        {"type": "text", "text": "what?"},
    ]


def test_audio_is_refused_and_strippable() -> None:
    audio = {"type": "file", "media_type": "audio/wav", "data": "UklG"}
    with pytest.raises(AgentError) as caught:
        adapter.build(make([{"role": "user", "content": [audio]}]))
    assert caught.value.kind == "request"
    request = make(
        [{"role": "user", "content": [audio, {"type": "text", "text": "t"}]}],
        capabilities={"audio": False},
        media_fallback="strip",
    )
    assert body_of(request)["messages"][0]["content"] == [{"type": "text", "text": "t"}]


# ---------------------------------------------------------------- history


def test_tool_results_form_one_user_turn_with_errors_flagged() -> None:
    image = {"type": "image", "image": "data:image/png;base64,AAAA"}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "text", "text": "Calling."}, call(), call("toolu_2")]},
        {
            "role": "tool",
            "content": [
                result({"type": "text", "value": "1"}),
                result({"type": "content", "value": [{"type": "text", "text": "pic"}, image]}, "toolu_2"),
            ],
        },
        {"role": "tool", "content": [result({"type": "execution-denied", "value": "no"}, "toolu_3")]},
        {"role": "user", "content": "and now?"},
    ]
    turns = body_of(make(messages))["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[1]["content"] == [
        {"type": "text", "text": "Calling."},
        {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1}},
        {"type": "tool_use", "id": "toolu_2", "name": "add", "input": {"a": 1}},
    ]
    last = turns[2]["content"]
    assert [b["type"] for b in last] == ["tool_result", "tool_result", "tool_result", "text"]
    assert last[0] == {"type": "tool_result", "tool_use_id": "toolu_1", "content": "1"}
    assert last[1]["content"] == [
        {"type": "text", "text": "pic"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
    ]
    assert last[2]["is_error"] is True and "no" in last[2]["content"]


def test_tool_results_open_a_merged_user_turn() -> None:
    messages = [
        {"role": "assistant", "content": [call()]},
        {"role": "user", "content": "reminder"},
        {"role": "tool", "content": [result({"type": "text", "value": "1"})]},
    ]
    turn = body_of(make(messages))["messages"][1]["content"]
    assert [b["type"] for b in turn] == ["tool_result", "text"]


def test_consecutive_assistant_messages_merge_and_empty_ones_vanish() -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
        {"role": "assistant", "content": ""},
        {"role": "assistant", "content": [{"type": "text", "text": "b"}]},
    ]
    turns = body_of(make(messages))["messages"]
    assert turns[1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
    }
    # A conversation never ends on an assistant turn (a prefill): a continuation turn follows.
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]


def test_thinking_blocks_go_back_intact_and_foreign_reasoning_is_dropped() -> None:
    content = [
        {
            "type": "reasoning",
            "text": "hmm",
            "provider_metadata": {"protocol": "anthropic", "signature": "SIG"},
        },
        {"type": "reasoning", "text": "", "provider_metadata": {"protocol": "anthropic", "redacted": "DATA"}},
        {
            "type": "reasoning",
            "text": "other",
            "provider_metadata": {"protocol": "gemini", "thought_signature": "G"},
        },
        {"type": "reasoning", "text": "plain"},
        call(),
    ]
    turn = body_of(
        make(
            [{"role": "user", "content": "q"}, {"role": "assistant", "content": content}],
            capabilities={"reasoning": True},
        )
    )["messages"][1]["content"]
    assert turn == [
        {"type": "thinking", "thinking": "hmm", "signature": "SIG"},
        {"type": "redacted_thinking", "data": "DATA"},
        {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1}},
    ]


def test_system_history_messages_join_the_system_prompt() -> None:
    body = body_of(
        make([{"role": "system", "content": "extra"}, {"role": "user", "content": "q"}], system="main")
    )
    assert body["system"] == "main\n\nextra"
    assert [m["role"] for m in body["messages"]] == ["user"]


# ---------------------------------------------------------------- tools, provider, thinking


def test_tools_and_tool_choice_mapping() -> None:
    body = body_of(make(tools=[TOOL]))
    assert body["tools"] == [{"name": "add", "description": "Add", "input_schema": TOOL["input_schema"]}]
    assert "tool_choice" not in body
    for choice, wire in [
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ("none", {"type": "none"}),
        ({"name": "add"}, {"type": "tool", "name": "add"}),
    ]:
        assert body_of(make(tools=[TOOL], provider={"tool_choice": choice}))["tool_choice"] == wire
    assert "tool_choice" not in body_of(
        make(tools=[TOOL], provider={"tool_choice": "auto"}, capabilities={"tool_choice": False})
    )
    serial = body_of(make(tools=[TOOL], provider={"parallel_tool_calls": False}))
    assert serial["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert "tools" not in body_of(make(tools=[TOOL], capabilities={"tools": False}))


def test_generation_params(caplog: pytest.LogCaptureFixture) -> None:
    provider = {
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 5,
        "stop": "END",
        "seed": 3,
        "headers": {"anthropic-beta": "x"},
    }
    with caplog.at_level(logging.WARNING, logger="agentcore"):
        wire = adapter.build(make(provider=provider))
    body = wire.body
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0.5, 0.9, 5)
    assert body["stop_sequences"] == ["END"]
    assert "seed" not in body and "seed" in caplog.text
    assert wire.headers["anthropic-beta"] == "x"


@pytest.mark.parametrize(
    ("effort", "budget", "max_tokens"), [("low", 2048, 10240), ("high", 16384, 24576), ("max", 24576, 32000)]
)
def test_reasoning_effort_becomes_a_thinking_budget(effort: str, budget: int, max_tokens: int) -> None:
    body = body_of(make(provider={"reasoning_effort": effort}))
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] == max_tokens


def test_thinking_budget_fits_an_explicit_max_tokens() -> None:
    body = body_of(make(provider={"reasoning_effort": "high"}, max_tokens=4000))
    assert body["thinking"]["budget_tokens"] == 3999 and body["max_tokens"] == 4000
    assert "thinking" not in body_of(make(provider={"reasoning_effort": "none"}))
    for bad in ({"reasoning_effort": "high", "max_output_tokens": 1000}, {"reasoning_effort": "extreme"}):
        with pytest.raises(AgentError) as caught:
            adapter.build(make(provider=bad))
        assert caught.value.kind == "config"


def test_body_cannot_override_messages(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agentcore"):
        body = body_of(make(provider={"body": {"messages": [], "metadata": {"user_id": "u"}}}))
    assert body["messages"] and body["metadata"] == {"user_id": "u"}
    assert "cannot override" in caplog.text


# ---------------------------------------------------------------- cache


def test_cache_breakpoints_on_system_and_last_block() -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [call()]},
        {"role": "tool", "content": [result({"type": "text", "value": "1"})]},
    ]
    body = body_of(make(messages, system="S", cache=True))
    assert body["system"] == [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}]
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in body["messages"][0]["content"][-1]
    assert json.dumps(body).count("cache_control") == 2


def test_cache_retention_and_body_and_off() -> None:
    body = body_of(make(system="S", cache={"retention": "1h", "body": {"metadata": {"user_id": "u"}}}))
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert body["metadata"] == {"user_id": "u"}
    off = body_of(make(system="S", cache=False))
    assert off["system"] == "S" and "cache_control" not in json.dumps(off)


def test_no_breakpoint_on_a_thinking_block() -> None:
    content = [
        {"type": "text", "text": "a"},
        {"type": "reasoning", "text": "t", "provider_metadata": {"protocol": "anthropic", "signature": "S"}},
    ]
    body = body_of(
        make([{"role": "user", "content": "q"}, {"role": "assistant", "content": content}], cache=True)
    )
    # The final assistant turn is followed by a continuation turn (no prefill), which takes the breakpoint.
    assistant, last = body["messages"][1]["content"], body["messages"][-1]["content"]
    assert all("cache_control" not in block for block in assistant)
    assert "cache_control" in last[-1]


# ---------------------------------------------------------------- structured output


def test_output_is_a_forced_tool() -> None:
    request = make(output=output.object(SCHEMA, name="city_info"))
    body = body_of(request)
    assert body["tools"] == [
        {
            "name": "city_info",
            "description": "Give your final answer by calling this tool with it as the input.",
            "input_schema": SCHEMA,
        }
    ]
    assert body["tool_choice"] == {"type": "tool", "name": "city_info"}
    assert "system" not in body


def test_output_with_other_tools_forces_any_tool() -> None:
    body = body_of(make(tools=[TOOL], output=output.object(SCHEMA), provider={"tool_choice": "auto"}))
    assert [t["name"] for t in body["tools"]] == ["add", "output"]
    assert body["tool_choice"] == {"type": "any"}


@pytest.mark.parametrize(
    "fields",
    [
        {"output": output.json()},
        {"output": output.object(SCHEMA), "provider": {"reasoning_effort": "low"}},
        {"output": output.object(SCHEMA), "provider": {"body": {"thinking": {"type": "adaptive"}}}},
        {"output": output.object(SCHEMA), "capabilities": {"tool_choice": False}},
        {"output": output.object(SCHEMA), "capabilities": {"structured_output": False}},
        {"output": output.object(SCHEMA, name="add"), "tools": [TOOL]},
    ],
)
def test_output_falls_back_to_system_instructions(fields: dict[str, Any]) -> None:
    body = body_of(make(system="S", **fields))
    assert body["system"].startswith("S\n\n") and "JSON" in body["system"]
    assert all(t["name"] != "output" for t in body.get("tools", []))


def test_output_tool_call_becomes_the_reply_text() -> None:
    request = make(output=output.object(SCHEMA))
    reply = {
        "type": "message",
        "role": "assistant",
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 1, "output_tokens": 1},
        "content": [{"type": "tool_use", "id": "toolu_9", "name": "output", "input": {"city": "Paris"}}],
    }
    parsed = adapter.parse(reply, request)
    assert parsed.text == '{"city": "Paris"}'
    assert parsed.tool_calls == [] and parsed.finish_reason == "stop"
    assert parsed.message["content"] == [{"type": "text", "text": '{"city": "Paris"}'}]
    # Without the request the adapter cannot know the tool is the output one.
    assert [c.name for c in adapter.parse(reply).tool_calls] == ["output"]


def test_streamed_output_tool_is_one_text_delta() -> None:
    request = make(output=output.object(SCHEMA))
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 3, "output_tokens": 1}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_9", "name": "output", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"city": '},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '"Paris"}'},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    parser, neutral = feed_all(sse_text(*events), request)
    assert neutral == [{"type": "text-delta", "text": '{"city": "Paris"}'}]
    parsed = parser.result()
    assert (parsed.text, parsed.tool_calls, parsed.finish_reason) == ('{"city": "Paris"}', [], "stop")


# ---------------------------------------------------------------- replies


REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "content": [
        {"type": "thinking", "thinking": "Let me think.", "signature": "SIG"},
        {"type": "redacted_thinking", "data": "REDACTED"},
        {"type": "text", "text": "Adding."},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
        {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1}},
    ],
    "stop_reason": "tool_use",
    "usage": {
        "input_tokens": 10,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 20,
        "output_tokens": 5,
    },
}


def test_parse_reply() -> None:
    parsed = adapter.parse(REPLY)
    assert parsed.text == "Adding."
    assert parsed.reasoning == "Let me think."
    assert [(c.id, c.name, c.arguments) for c in parsed.tool_calls] == [("toolu_1", "add", {"a": 1})]
    assert parsed.finish_reason == "tool_calls"
    usage = parsed.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        130,
        5,
        100,
        20,
    )
    assert usage.total_tokens == 135
    thinking, redacted = parsed.message["content"][:2]
    assert thinking == {
        "type": "reasoning",
        "text": "Let me think.",
        "provider_metadata": {"protocol": "anthropic", "signature": "SIG"},
    }
    assert redacted == {
        "type": "reasoning",
        "text": "",
        "provider_metadata": {"protocol": "anthropic", "redacted": "REDACTED"},
    }


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "stop"),  # no calls in the reply: a "tool_use" stop without calls is a stop
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "other"),
    ],
)
def test_stop_reasons(stop_reason: str, finish: str) -> None:
    reply = {"type": "message", "content": [{"type": "text", "text": "x"}], "stop_reason": stop_reason}
    assert adapter.parse(reply).finish_reason == finish


def test_error_body_in_a_200_raises() -> None:
    with pytest.raises(AgentError) as caught:
        adapter.parse({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    assert caught.value.kind == "server" and caught.value.retryable


# ---------------------------------------------------------------- streaming


STREAM = [
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "usage": {
                "input_tokens": 10,
                "cache_read_input_tokens": 4,
                "cache_creation_input_tokens": 0,
                "output_tokens": 1,
            },
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Hmm."}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "SIG"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "ping"},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "On it."}},
    {"type": "content_block_stop", "index": 1},
    {
        "type": "content_block_start",
        "index": 2,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {}},
    },
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}},
    {
        "type": "content_block_delta",
        "index": 2,
        "delta": {"type": "input_json_delta", "partial_json": '{"a"'},
    },
    {
        "type": "content_block_delta",
        "index": 2,
        "delta": {"type": "input_json_delta", "partial_json": ": 1}"},
    },
    {"type": "content_block_stop", "index": 2},
    {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use"},
        "usage": {"output_tokens": 30, "input_tokens": None},
    },
    {"type": "message_stop"},
]


def test_stream_events_and_result() -> None:
    parser, neutral = feed_all(sse_text(*STREAM))
    assert parser.done
    assert neutral == [
        {"type": "reasoning-delta", "text": "Hmm."},
        {"type": "text-delta", "text": "On it."},
        {"type": "tool-call-delta", "tool_call_id": "toolu_1", "tool_name": "add", "delta": '{"a"'},
        {"type": "tool-call-delta", "tool_call_id": "toolu_1", "tool_name": "add", "delta": ": 1}"},
        {"type": "tool-call", "tool_call_id": "toolu_1", "tool_name": "add", "input": {"a": 1}},
    ]
    parsed = parser.result()
    assert (parsed.text, parsed.reasoning, parsed.finish_reason) == ("On it.", "Hmm.", "tool_calls")
    assert parsed.message["content"][0]["provider_metadata"] == {"protocol": "anthropic", "signature": "SIG"}
    assert [c.arguments for c in parsed.tool_calls] == [{"a": 1}]
    assert (parsed.usage.input_tokens, parsed.usage.output_tokens, parsed.usage.cache_read_tokens) == (
        14,
        30,
        4,
    )


def test_stream_cut_short_keeps_text_and_drops_the_open_call() -> None:
    parser, _ = feed_all(sse_text(*STREAM[:12]))
    assert not parser.done
    parsed = parser.result()
    assert (parsed.text, parsed.tool_calls, parsed.finish_reason) == ("On it.", [], "other")


def test_overloaded_error_event_is_a_retryable_server_error() -> None:
    payload = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    with pytest.raises(AgentError) as caught:
        adapter.stream().feed(SSEEvent(json.dumps(payload), "error"))
    assert (caught.value.kind, caught.value.retryable, caught.value.message) == ("server", True, "Overloaded")


def test_prompt_too_long_error_event_is_an_overflow() -> None:
    payload = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 210000 tokens > 200000 maximum",
        },
    }
    with pytest.raises(AgentError) as caught:
        adapter.stream().feed(SSEEvent(json.dumps(payload), "error"))
    assert caught.value.overflow and not caught.value.retryable


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("status", "message", "overflow"),
    [
        (400, "prompt is too long: 214564 tokens > 200000 maximum", True),
        (
            400,
            "input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, "
            "decrease input length or `max_tokens` and try again",
            True,
        ),
        (529, "Overloaded", False),
        (400, "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`", False),
        (429, "prompt is too long for this rate", False),
    ],
)
def test_error_message_and_overflow(status: int, message: str, overflow: bool) -> None:
    body = json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": message}})
    assert adapter.error(status, body) == (message, overflow)


# ---------------------------------------------------------------- provider state round trip


def test_signed_thinking_round_trips_to_anthropic_and_is_dropped_elsewhere() -> None:
    """Extended thinking with tools needs the signed block back; other protocols must not get it."""
    parsed = adapter.parse(REPLY)
    history = [
        {"role": "user", "content": "add 1"},
        parsed.message,
        {"role": "tool", "content": [result({"type": "text", "value": "1"})]},
    ]
    turn = body_of(make(history, tools=[TOOL]))["messages"][1]["content"]
    assert turn[:2] == [
        {"type": "thinking", "thinking": "Let me think.", "signature": "SIG"},
        {"type": "redacted_thinking", "data": "REDACTED"},
    ]
    for protocol in ("responses", "gemini", "chat"):
        other = json.dumps(get(protocol).build(make(history, tools=[TOOL])).body)
        assert "SIG" not in other and "REDACTED" not in other and "toolu_1" in other
