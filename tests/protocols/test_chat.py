"""The chat completions adapter: request building rules and stream assembly, without a server."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import pytest

from agentcore import output
from agentcore._utils.sse import SSEEvent
from agentcore.errors import AgentError
from agentcore.protocols import get
from agentcore.protocols.base import DEFAULT_CAPABILITIES, Request
from agentcore.protocols.chat import ChatAdapter, adapter

PNG = "iVBORw0KGgo="
WEATHER = {"name": "weather", "description": "Weather of a city", "input_schema": {"type": "object"}}


def make_request(**fields: Any) -> Request:
    fields.setdefault("messages", [{"role": "user", "content": "hi"}])
    fields.setdefault("base_url", "https://api.example.com/v1")
    fields.setdefault("cache", False)
    return Request(model="m1", **fields)


def caps(**changes: bool) -> dict[str, bool]:
    return {**DEFAULT_CAPABILITIES, **changes}


def body_of(**fields: Any) -> dict[str, Any]:
    return adapter.build(make_request(**fields)).body


def messages_of(messages: list[dict[str, Any]], **fields: Any) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = body_of(messages=messages, **fields)["messages"]
    return result


def user(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(parts)}


def tool_result(call_id: str, out: dict[str, Any], name: str = "weather") -> dict[str, Any]:
    return {"type": "tool-result", "tool_call_id": call_id, "tool_name": name, "output": out}


# ---------------------------------------------------------------- registry


def test_get_returns_the_chat_adapter() -> None:
    found = get("chat")
    assert found is adapter
    assert isinstance(found, ChatAdapter) and found.name == "chat"


def test_get_rejects_an_unknown_protocol_as_config() -> None:
    with pytest.raises(AgentError) as info:
        get("soap")
    assert info.value.kind == "config" and "soap" in info.value.message


def test_get_reports_a_missing_adapter_module_as_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agentcore.protocols.gemini", None)
    with pytest.raises(AgentError) as info:
        get("gemini")
    assert info.value.kind == "config" and "gemini" in info.value.message


# ---------------------------------------------------------------- url and headers


def test_url_appends_chat_completions_to_the_base_url() -> None:
    wire = adapter.build(make_request(base_url="http://127.0.0.1:8080/v1/"))
    assert wire.url == "http://127.0.0.1:8080/v1/chat/completions"


def test_headers_carry_bearer_key_json_and_provider_headers() -> None:
    wire = adapter.build(make_request(api_key="sk-test", provider={"headers": {"X-App": "demo"}}))
    assert wire.headers == {
        "Content-Type": "application/json",
        "Authorization": "Bearer sk-test",
        "X-App": "demo",
    }


def test_no_authorization_header_without_a_key() -> None:
    assert "Authorization" not in adapter.build(make_request(api_key="")).headers


# ---------------------------------------------------------------- messages


def test_system_goes_first_and_is_omitted_when_empty() -> None:
    assert messages_of([{"role": "user", "content": "q"}], system="Be brief.") == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "q"},
    ]
    assert messages_of([{"role": "user", "content": "q"}])[0]["role"] == "user"


def test_a_lone_text_part_is_sent_as_a_string() -> None:
    assert messages_of([user({"type": "text", "text": "hello"})]) == [{"role": "user", "content": "hello"}]


def test_user_parts_map_to_chat_parts() -> None:
    sent = messages_of(
        [
            user(
                {"type": "text", "text": "look"},
                {"type": "image", "image": PNG, "media_type": "image/jpeg"},
                {"type": "image", "image": "https://example.com/a.png"},
                {"type": "image", "image": f"data:image/gif;base64,{PNG}"},
                {"type": "file", "media_type": "image/webp", "data": PNG},
                {"type": "file", "media_type": "audio/wav", "data": "UklGR"},
                {"type": "file", "media_type": "audio/mpeg", "data": "SUQz"},
                {"type": "file", "media_type": "application/pdf", "data": "JVBER", "filename": "a.pdf"},
                {"type": "file", "media_type": "text/csv", "data": "YSxi"},
            )
        ]
    )
    assert sent[0]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{PNG}"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        {"type": "image_url", "image_url": {"url": f"data:image/gif;base64,{PNG}"}},
        {"type": "image_url", "image_url": {"url": f"data:image/webp;base64,{PNG}"}},
        {"type": "input_audio", "input_audio": {"data": "UklGR", "format": "wav"}},
        {"type": "input_audio", "input_audio": {"data": "SUQz", "format": "mp3"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBER", "filename": "a.pdf"}},
        {"type": "file", "file": {"file_data": "data:text/csv;base64,YSxi", "filename": "file.csv"}},
    ]


def test_audio_without_an_input_audio_format_goes_as_a_file() -> None:
    sent = messages_of([user({"type": "file", "media_type": "audio/ogg", "data": "T2dn"})])
    assert sent[0]["content"] == [
        {"type": "file", "file": {"file_data": "data:audio/ogg;base64,T2dn", "filename": "file.ogg"}}
    ]


def test_files_by_url_become_a_text_reference_and_video_a_video_url() -> None:
    sent = messages_of(
        [
            user(
                {"type": "file", "media_type": "application/pdf", "data": "https://example.com/a.pdf"},
                {"type": "file", "media_type": "video/mp4", "data": "https://example.com/v.mp4"},
            )
        ]
    )
    assert sent[0]["content"] == [
        {"type": "text", "text": "[file application/pdf: https://example.com/a.pdf]"},
        {"type": "video_url", "video_url": {"url": "https://example.com/v.mp4"}},
    ]


def test_media_fallback_strip_drops_forbidden_media_and_keeps_text() -> None:
    sent = messages_of(
        [user({"type": "text", "text": "what is this?"}, {"type": "image", "image": PNG})],
        capabilities=caps(image=False),
        media_fallback="strip",
    )
    assert sent == [{"role": "user", "content": "what is this?"}]


def test_media_fallback_error_raises_a_request_error() -> None:
    with pytest.raises(AgentError) as info:
        body_of(messages=[user({"type": "image", "image": PNG})], capabilities=caps(image=False))
    assert info.value.kind == "request"


def test_assistant_text_and_tool_calls_with_json_string_arguments() -> None:
    sent = messages_of(
        [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {
                        "type": "tool-call",
                        "tool_call_id": "c1",
                        "tool_name": "weather",
                        "input": {"city": "Köln"},
                    },
                ],
            },
        ]
    )
    assistant = sent[1]
    assert assistant["content"] == "Checking."
    call = assistant["tool_calls"][0]
    assert call["id"] == "c1" and call["type"] == "function" and call["function"]["name"] == "weather"
    assert isinstance(call["function"]["arguments"], str)
    assert json.loads(call["function"]["arguments"]) == {"city": "Köln"}


def test_assistant_with_only_tool_calls_has_null_content() -> None:
    call = {"type": "tool-call", "tool_call_id": "c1", "tool_name": "weather", "input": {}}
    sent = messages_of([{"role": "user", "content": "q"}, {"role": "assistant", "content": [call]}])
    assert sent[1]["content"] is None and sent[1]["tool_calls"][0]["function"]["arguments"] == "{}"


REASONING_REPLY = {
    "role": "assistant",
    "content": [{"type": "reasoning", "text": "think"}, {"type": "text", "text": "answer"}],
}


def test_reasoning_is_dropped_by_default() -> None:
    sent = messages_of([{"role": "user", "content": "q"}, REASONING_REPLY])
    assert sent[1] == {"role": "assistant", "content": "answer"}


def test_reasoning_is_sent_as_reasoning_content_when_the_capability_is_on() -> None:
    sent = messages_of([{"role": "user", "content": "q"}, REASONING_REPLY], capabilities=caps(reasoning=True))
    assert sent[1] == {"role": "assistant", "content": "answer", "reasoning_content": "think"}


@pytest.mark.parametrize("reasoning", [False, True])
def test_empty_assistant_messages_are_never_sent(reasoning: bool) -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": []},
        {"role": "assistant", "content": [{"type": "text", "text": ""}]},
        {"role": "assistant", "content": [{"type": "reasoning", "text": "only thoughts"}]},
        {"role": "user", "content": "again"},
    ]
    sent = messages_of(history, capabilities=caps(reasoning=reasoning))
    assert [m["role"] for m in sent] == ["user", "user"]


def test_tool_results_become_one_tool_message_each_as_text() -> None:
    results = [
        tool_result("c1", {"type": "text", "value": "sunny"}),
        tool_result("c2", {"type": "json", "value": {"temp": 21}}),
        tool_result("c3", {"type": "error-text", "value": "boom"}),
        tool_result("c4", {"type": "error-json", "value": {"error": "bad"}}),
    ]
    sent = messages_of([{"role": "user", "content": "q"}, {"role": "tool", "content": results}])
    assert sent[1:] == [
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": '{"temp": 21}'},
        {"role": "tool", "tool_call_id": "c3", "content": "boom"},
        {"role": "tool", "tool_call_id": "c4", "content": '{"error": "bad"}'},
    ]


def test_tool_media_follows_the_tool_messages_in_one_labelled_user_message() -> None:
    content = {
        "type": "content",
        "value": [{"type": "text", "text": "Here it is:"}, {"type": "image", "image": PNG}],
    }
    results = [tool_result("c1", content), tool_result("c2", {"type": "text", "value": "done"})]
    sent = messages_of([{"role": "user", "content": "q"}, {"role": "tool", "content": results}])
    assert [m["role"] for m in sent] == ["user", "tool", "tool", "user"]
    first_line, reference = sent[1]["content"].split("\n")
    assert first_line == "Here it is:"
    file_id = reference.removeprefix("See file ").removesuffix(".")
    assert len(file_id) == 6
    assert sent[3]["content"] == [
        {"type": "text", "text": f"This is file {file_id}:"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    ]


def test_tool_media_stripped_by_capabilities_leaves_no_reference() -> None:
    content = {
        "type": "content",
        "value": [{"type": "text", "text": "chart"}, {"type": "image", "image": PNG}],
    }
    sent = messages_of(
        [{"role": "user", "content": "q"}, {"role": "tool", "content": [tool_result("c1", content)]}],
        capabilities=caps(image=False),
        media_fallback="strip",
    )
    assert sent[1:] == [{"role": "tool", "tool_call_id": "c1", "content": "chart"}]


def test_compact_entries_travel_as_user_text_and_unknown_roles_fail() -> None:
    assert messages_of([{"role": "compact", "content": "summary"}]) == [
        {"role": "user", "content": "summary"}
    ]
    with pytest.raises(AgentError) as info:
        messages_of([{"role": "robot", "content": "x"}])
    assert info.value.kind == "request"


# ---------------------------------------------------------------- tools and tool choice


def test_tools_are_function_tools() -> None:
    assert body_of(tools=[WEATHER])["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Weather of a city",
                "parameters": {"type": "object"},
            },
        }
    ]


def test_tools_are_omitted_when_empty_or_switched_off() -> None:
    assert "tools" not in body_of()
    assert "tools" not in body_of(tools=[WEATHER], capabilities=caps(tools=False))


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("any", "required"),
        ({"name": "weather"}, {"type": "function", "function": {"name": "weather"}}),
        (
            {"type": "function", "function": {"name": "weather"}},
            {"type": "function", "function": {"name": "weather"}},
        ),
    ],
)
def test_tool_choice_is_sent_when_set(choice: Any, sent: Any) -> None:
    assert body_of(tools=[WEATHER], provider={"tool_choice": choice})["tool_choice"] == sent


def test_tool_choice_is_omitted_unless_set_allowed_and_tools_present() -> None:
    assert "tool_choice" not in body_of(tools=[WEATHER])
    assert "tool_choice" not in body_of(
        tools=[WEATHER], provider={"tool_choice": "required"}, capabilities=caps(tool_choice=False)
    )
    assert "tool_choice" not in body_of(provider={"tool_choice": "required"})


def test_invalid_tool_choice_is_a_config_error() -> None:
    with pytest.raises(AgentError) as info:
        body_of(tools=[WEATHER], provider={"tool_choice": "sometimes"})
    assert info.value.kind == "config"


def test_parallel_tool_calls_passes_through_with_tools() -> None:
    assert body_of(tools=[WEATHER], provider={"parallel_tool_calls": False})["parallel_tool_calls"] is False


# ---------------------------------------------------------------- provider keys and body


def test_provider_generation_keys_are_sent_under_their_names() -> None:
    provider = {
        "temperature": 0.2,
        "top_p": 0.9,
        "top_k": 40,
        "stop": ["END"],
        "presence_penalty": 0.1,
        "frequency_penalty": 0.3,
        "seed": 7,
        "reasoning_effort": "low",
    }
    body = body_of(provider=provider)
    assert {key: body[key] for key in provider} == provider


def test_max_tokens_comes_from_the_request_and_provider_max_output_tokens_wins() -> None:
    assert body_of(max_tokens=100)["max_tokens"] == 100
    assert body_of(max_tokens=100, provider={"max_output_tokens": 50})["max_tokens"] == 50
    body = body_of()
    assert "max_tokens" not in body and "max_completion_tokens" not in body


def test_unknown_provider_keys_are_config_errors() -> None:
    with pytest.raises(AgentError) as info:
        body_of(provider={"temprature": 0.2})
    assert info.value.kind == "config" and "temprature" in info.value.message


@pytest.mark.parametrize("provider", [{"headers": {"X": 1}}, {"headers": "X: 1"}, {"body": ["x"]}])
def test_malformed_headers_or_body_are_config_errors(provider: dict[str, Any]) -> None:
    with pytest.raises(AgentError) as info:
        body_of(provider=provider)
    assert info.value.kind == "config"


def test_provider_body_is_merged_last(caplog: pytest.LogCaptureFixture) -> None:
    body = body_of(provider={"temperature": 0.2, "body": {"temperature": 0.9, "n": 1}})
    assert body["temperature"] == 0.9 and body["n"] == 1
    assert not caplog.records


def test_provider_body_cannot_override_model_messages_or_stream(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agentcore"):
        body = body_of(provider={"body": {"model": "other", "messages": [], "stream": False, "user": "u1"}})
    assert body["model"] == "m1" and body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["stream"] is True and body["user"] == "u1"
    warned = " ".join(r.getMessage() for r in caplog.records if r.name == "agentcore")
    assert "'model'" in warned and "'messages'" in warned and "'stream'" in warned


# ---------------------------------------------------------------- stream and usage


def test_streaming_asks_for_usage() -> None:
    body = body_of(stream=True)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_usage_capability_off_drops_stream_options() -> None:
    body = body_of(stream=True, capabilities=caps(usage=False))
    assert body["stream"] is True and "stream_options" not in body


def test_non_streaming_request_says_stream_false() -> None:
    body = body_of(stream=False)
    assert body["stream"] is False and "stream_options" not in body


# ---------------------------------------------------------------- cache


def test_cache_true_sends_a_stable_hash_of_base_url_model_and_system() -> None:
    key = body_of(cache=True, system="S")["prompt_cache_key"]
    assert len(key) == 32 and int(key, 16) >= 0
    assert body_of(cache=True, system="S")["prompt_cache_key"] == key
    assert body_of(cache=True, system="other")["prompt_cache_key"] != key
    assert body_of(cache=True, system="S", base_url="http://other/v1")["prompt_cache_key"] != key
    other_model = adapter.build(
        Request(
            model="m2",
            messages=[{"role": "user", "content": "hi"}],
            base_url="https://api.example.com/v1",
            system="S",
        )
    )
    assert other_model.body["prompt_cache_key"] != key


def test_cache_false_sends_no_cache_fields() -> None:
    body = body_of(cache=False)
    assert "prompt_cache_key" not in body and "prompt_cache_retention" not in body


def test_cache_dict_sets_key_retention_and_body() -> None:
    body = body_of(cache={"key": "project:1", "retention": "24h", "body": {"cache_namespace": "agent"}})
    assert body["prompt_cache_key"] == "project:1"
    assert body["prompt_cache_retention"] == "24h"
    assert body["cache_namespace"] == "agent"


def test_cache_dict_without_key_uses_the_default_key() -> None:
    assert body_of(cache={"retention": "24h"})["prompt_cache_key"] == body_of(cache=True)["prompt_cache_key"]


def test_provider_body_wins_over_cache_fields() -> None:
    body = body_of(
        cache={"key": "k", "body": {"cache_namespace": "a"}},
        provider={"body": {"prompt_cache_key": "mine", "cache_namespace": "b"}},
    )
    assert body["prompt_cache_key"] == "mine" and body["cache_namespace"] == "b"


def test_cache_body_cannot_override_the_model() -> None:
    assert body_of(cache={"body": {"model": "x"}})["model"] == "m1"


@pytest.mark.parametrize("cache", [{"ttl": "1h"}, "yes", {"key": 3}])
def test_malformed_cache_settings_are_config_errors(cache: Any) -> None:
    with pytest.raises(AgentError) as info:
        body_of(cache=cache)
    assert info.value.kind == "config"


# ---------------------------------------------------------------- structured output

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_object_output_is_a_json_schema_response_format() -> None:
    body = body_of(output=output.object(SCHEMA, name="city_answer"), system="S")
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "city_answer", "schema": SCHEMA, "strict": False},
    }
    assert body["messages"][0] == {"role": "system", "content": "S"}


def test_array_output_travels_wrapped_in_items() -> None:
    schema = body_of(output=output.array(SCHEMA))["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["items"] == {"type": "array", "items": SCHEMA}
    assert schema["required"] == ["items"]


def test_json_output_is_json_object_mode_with_instructions() -> None:
    spec = output.json()
    body = body_of(output=spec)
    assert body["response_format"] == {"type": "json_object"}
    assert body["messages"][0] == {"role": "system", "content": spec.instructions()}


def test_without_native_structured_output_the_instructions_join_the_system_text() -> None:
    spec = output.object(SCHEMA)
    body = body_of(output=spec, system="Be brief.", capabilities=caps(structured_output=False))
    assert "response_format" not in body
    assert body["messages"][0] == {"role": "system", "content": "Be brief.\n\n" + spec.instructions()}


# ---------------------------------------------------------------- stream assembly


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> SSEEvent:
    data: dict[str, Any] = {"id": "chatcmpl-1", "created": 1, "object": "chat.completion.chunk"}
    data["choices"] = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    data.update(extra)
    return SSEEvent(json.dumps(data))


def call_delta(
    index: int, arguments: str, call_id: str | None = None, name: str | None = None
) -> dict[str, Any]:
    item: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        item.update(id=call_id, type="function")
        item["function"]["name"] = name
    return {"tool_calls": [item]}


DONE = SSEEvent("[DONE]")


def run(events: list[SSEEvent]) -> tuple[list[dict[str, Any]], Any, bool]:
    parser = adapter.stream()
    emitted: list[dict[str, Any]] = []
    for event in events:
        emitted += parser.feed(event)
    return emitted, parser.result(), parser.done


def test_arguments_spread_over_many_deltas_form_one_call() -> None:
    pieces = ['{"ci', 'ty": ', '"Mexi', "co City", '"}']
    events = [chunk({"role": "assistant", "content": None}), chunk(call_delta(0, "", "call_a", "weather"))]
    events += [chunk(call_delta(0, piece)) for piece in pieces]
    events += [chunk({}, "tool_calls"), DONE]
    emitted, result, done = run(events)
    assert done
    deltas = [e for e in emitted if e["type"] == "tool-call-delta"]
    assert "".join(e["delta"] for e in deltas) == '{"city": "Mexico City"}'
    assert {(e["tool_call_id"], e["tool_name"]) for e in deltas} == {("call_a", "weather")}
    assert emitted[-1] == {
        "type": "tool-call",
        "tool_call_id": "call_a",
        "tool_name": "weather",
        "input": {"city": "Mexico City"},
    }
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        ("call_a", "weather", {"city": "Mexico City"})
    ]
    assert result.finish_reason == "tool_calls"
    assert result.message == {
        "role": "assistant",
        "content": [
            {
                "type": "tool-call",
                "tool_call_id": "call_a",
                "tool_name": "weather",
                "input": {"city": "Mexico City"},
            }
        ],
    }


def test_parallel_calls_are_merged_by_index() -> None:
    events = [
        chunk(call_delta(0, "", "call_a", "weather")),
        chunk(call_delta(1, "", "call_b", "time")),
        chunk(call_delta(0, '{"city":')),
        chunk(call_delta(1, '{"tz": "UTC"}')),
        chunk(call_delta(0, ' "Oslo"}')),
        chunk({}, "tool_calls"),
        DONE,
    ]
    emitted, result, _ = run(events)
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        ("call_a", "weather", {"city": "Oslo"}),
        ("call_b", "time", {"tz": "UTC"}),
    ]
    assert [e["tool_call_id"] for e in emitted if e["type"] == "tool-call"] == ["call_a", "call_b"]


def test_a_new_id_at_a_used_index_starts_a_new_call() -> None:
    """Some servers number every call 0; their ids still tell the calls apart."""
    events = [
        chunk(call_delta(0, '{"city": "A"}', "call_a", "weather")),
        chunk(call_delta(0, '{"city": "B"}', "call_b", "weather")),
        chunk({}, "tool_calls"),
        DONE,
    ]
    _, result, _ = run(events)
    assert [(c.id, c.arguments) for c in result.tool_calls] == [
        ("call_a", {"city": "A"}),
        ("call_b", {"city": "B"}),
    ]


def test_unparsable_arguments_give_empty_input_and_keep_the_raw_text() -> None:
    events = [chunk(call_delta(0, '{"city": "Os', "call_a", "weather")), chunk({}, "tool_calls"), DONE]
    emitted, result, _ = run(events)
    call = result.tool_calls[0]
    assert call.arguments == {} and call.raw_arguments == '{"city": "Os'
    assert result.message["content"][-1]["input"] == {}
    assert emitted[-1]["input"] == {}


def test_missing_call_ids_are_generated_deterministically() -> None:
    events = [
        chunk({"tool_calls": [{"index": 0, "function": {"name": "weather", "arguments": "{}"}}]}),
        chunk({}, "tool_calls"),
        DONE,
    ]
    _, first, _ = run(events)
    _, second, _ = run(events)
    call_id = first.tool_calls[0].id
    assert call_id.startswith("call_0_") and len(call_id) == len("call_0_") + 8
    assert second.tool_calls[0].id == call_id
    whole = adapter.parse(
        {
            "id": "chatcmpl-1",
            "created": 1,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "tool_calls": [
                            {"type": "function", "function": {"name": "weather", "arguments": "{}"}}
                        ]
                    },
                }
            ],
        }
    )
    assert whole.tool_calls[0].id == call_id


def test_text_reasoning_and_usage_are_assembled() -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "total_tokens": 120,
        "prompt_tokens_details": {"cached_tokens": 60, "cache_write_tokens": 30},
    }
    events = [
        chunk({"role": "assistant", "reasoning_content": "Let me "}, usage=None),
        chunk({"reasoning": "think."}, usage=None),
        chunk({"content": "Hel"}, usage=None),
        chunk({"content": "lo"}, usage=None),
        chunk({}, "stop", usage=None),
        chunk(None, usage=usage),
        chunk(None, usage=None),
        DONE,
    ]
    emitted, result, _ = run(events)
    assert emitted == [
        {"type": "reasoning-delta", "text": "Let me "},
        {"type": "reasoning-delta", "text": "think."},
        {"type": "text-delta", "text": "Hel"},
        {"type": "text-delta", "text": "lo"},
    ]
    assert result.text == "Hello" and result.reasoning == "Let me think."
    assert result.message["content"] == [
        {"type": "reasoning", "text": "Let me think."},
        {"type": "text", "text": "Hello"},
    ]
    assert result.usage.to_dict() == {
        "input_tokens": 100,
        "output_tokens": 20,
        "total_tokens": 120,
        "cache_read_tokens": 60,
        "cache_write_tokens": 30,
    }
    assert result.finish_reason == "stop" and result.usage_reported


def test_a_stream_without_usage_reports_none() -> None:
    _, result, _ = run([chunk({"content": "hi"}, "stop"), DONE])
    assert not result.usage_reported and result.usage.total_tokens == 0 and result.reasoning is None


def test_only_the_first_choice_counts() -> None:
    data = {
        "choices": [{"index": 1, "delta": {"content": "other"}}, {"index": 0, "delta": {"content": "mine"}}]
    }
    _, result, _ = run([SSEEvent(json.dumps(data)), DONE])
    assert result.text == "mine"


@pytest.mark.parametrize(
    ("raw", "neutral"),
    [("stop", "stop"), ("length", "length"), ("content_filter", "content_filter"), ("eos", "other")],
)
def test_finish_reasons_are_mapped(raw: str, neutral: str) -> None:
    _, result, _ = run([chunk({"content": "x"}, raw), DONE])
    assert result.finish_reason == neutral


def test_missing_done_leaves_done_false() -> None:
    _, result, done = run([chunk({"content": "partial"})])
    assert done is False and result.text == "partial"


def test_events_after_done_are_ignored() -> None:
    _, result, done = run([chunk({"content": "a"}, "stop"), DONE, chunk({"content": "late"})])
    assert done and result.text == "a"


def test_in_stream_error_raises_a_retryable_server_error() -> None:
    parser = adapter.stream()
    parser.feed(chunk({"content": "par"}))
    with pytest.raises(AgentError) as info:
        parser.feed(
            SSEEvent(json.dumps({"error": {"message": "upstream overloaded", "type": "server_error"}}))
        )
    assert (
        info.value.kind == "server" and info.value.retryable and "upstream overloaded" in info.value.message
    )


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"message": "slow down", "code": "rate_limit_exceeded"}, "limit"),
        ({"message": "slow down", "code": 429}, "limit"),
        ({"message": "bad key", "status": 401}, "auth"),
    ],
)
def test_in_stream_error_kind_follows_its_code_or_status(error: dict[str, Any], kind: str) -> None:
    with pytest.raises(AgentError) as info:
        adapter.stream().feed(SSEEvent(json.dumps({"error": error})))
    assert info.value.kind == kind


def test_in_stream_overflow_is_marked_and_not_retryable() -> None:
    error = {
        "message": "This model's maximum context length is 8192 tokens.",
        "code": "context_length_exceeded",
    }
    with pytest.raises(AgentError) as info:
        adapter.stream().feed(SSEEvent(json.dumps({"error": error})))
    assert info.value.overflow and not info.value.retryable


def test_a_chunk_that_is_not_json_is_an_unknown_error() -> None:
    with pytest.raises(AgentError) as info:
        adapter.stream().feed(SSEEvent("{not json"))
    assert info.value.kind == "unknown"


# ---------------------------------------------------------------- non-streaming parse


def test_parse_reads_reasoning_text_and_calls_in_order() -> None:
    body = {
        "id": "x",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "reasoning_content": "hmm",
                    "content": "Checking.",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "weather", "arguments": '{"city": "Rome"}'},
                        },
                        {
                            "id": "c2",
                            "type": "function",
                            "function": {"name": "weather", "arguments": "not json"},
                        },
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "prompt_cache_hit_tokens": 4},
    }
    result = adapter.parse(body)
    assert [p["type"] for p in result.message["content"]] == ["reasoning", "text", "tool-call", "tool-call"]
    assert result.reasoning == "hmm" and result.text == "Checking."
    assert result.tool_calls[0].arguments == {"city": "Rome"}
    assert result.tool_calls[1].arguments == {} and result.tool_calls[1].raw_arguments == "not json"
    assert result.usage.cache_read_tokens == 4 and result.usage.total_tokens == 15


def test_parse_of_a_body_without_choices_is_unknown() -> None:
    with pytest.raises(AgentError) as info:
        adapter.parse({"object": "chat.completion"})
    assert info.value.kind == "unknown"


def test_parse_of_an_error_body_raises_it() -> None:
    with pytest.raises(AgentError) as info:
        adapter.parse({"error": {"message": "model overloaded"}})
    assert info.value.kind == "server" and info.value.message == "model overloaded"


# ---------------------------------------------------------------- error bodies


def test_error_reads_the_vendor_message() -> None:
    body = json.dumps({"error": {"message": "The model `x` does not exist", "code": "model_not_found"}})
    assert adapter.error(404, body) == ("The model `x` does not exist", False)


def test_error_falls_back_to_the_trimmed_raw_text() -> None:
    assert adapter.error(502, "  <html>Bad Gateway</html>\n") == ("<html>Bad Gateway</html>", False)


@pytest.mark.parametrize(
    "body",
    [
        # OpenAI
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, your messages "
                "resulted in 130000 tokens.",
                "code": "context_length_exceeded",
            }
        },
        {"error": {"message": "Input tokens exceed the configured limit of 272000 tokens.", "code": None}},
        # DeepSeek
        {
            "error": {
                "message": "This model's maximum context length is 65536 tokens. However, you requested "
                "66343 tokens (62247 in the messages, 4096 in the completion). Please reduce the length "
                "of the messages or completion.",
                "type": "invalid_request_error",
                "code": "invalid_request_error",
            }
        },
        # vLLM (old and V1 engines)
        {
            "object": "error",
            "message": "This model's maximum context length is 131072 tokens. However, you requested "
            "219523 tokens",
            "type": "BadRequestError",
            "code": 400,
        },
        {
            "object": "error",
            "message": "Prompt length of 5016 is longer than the maximum model length of 4096.",
        },
        # llama.cpp
        {
            "error": {
                "code": 400,
                "message": "request (4476 tokens) exceeds the available context size (4096 tokens)",
                "type": "exceed_context_size_error",
            }
        },
        # Ollama
        {"error": {"message": "input length exceeds the context length", "type": "api_error"}},
        # only the code says so
        {"error": {"message": "too long", "code": "context_length_exceeded"}},
    ],
)
def test_error_recognises_context_overflow_variants(body: dict[str, Any]) -> None:
    message, overflow = adapter.error(400, json.dumps(body))
    assert overflow, message


def test_a_rate_limit_about_tokens_is_not_an_overflow() -> None:
    body = json.dumps(
        {"error": {"message": "Request too large: too many tokens per min", "code": "rate_limit"}}
    )
    assert adapter.error(429, body)[1] is False
    assert adapter.error(400, json.dumps({"error": {"message": "Invalid 'messages[3]'."}}))[1] is False
