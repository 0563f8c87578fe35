"""Details §Wire and §Reasoning and provider state: what each protocol puts on the wire.

Fixtures and the contract's conventions: tests/contract/conftest.py.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from api_helpers import FAST, KEY, add, call, make

import agentcore
from agentcore import Agent
from agentcore.testing import ModelServer


def _wire(srv: ModelServer, protocol: str, *, stream: bool = True, **config: Any) -> Any:
    srv.add("ok")
    agent = Agent(
        config={
            "base_url": srv.base_url,
            "model": "mdl",
            "api_key": KEY,
            "protocol": protocol,
            "stream": stream,
            **FAST,
            **config,
        }
    )
    try:
        agent.send("hi")
    finally:
        agent.close()
    return srv.log[-1]


def test_wire_paths_and_auth(srv: ModelServer) -> None:
    chat = _wire(srv, "chat")
    assert chat.path == "/v1/chat/completions" and chat.headers["authorization"] == f"Bearer {KEY}"
    responses = _wire(srv, "responses")
    assert responses.path == "/v1/responses" and responses.headers["authorization"] == f"Bearer {KEY}"
    anthropic = _wire(srv, "anthropic")
    assert anthropic.path == "/v1/messages"
    assert anthropic.headers["x-api-key"] == KEY and anthropic.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in anthropic.headers
    gemini = _wire(srv, "gemini")
    assert gemini.path == "/v1/models/mdl:streamGenerateContent" and gemini.query.get("alt") == "sse"
    assert gemini.headers["x-goog-api-key"] == KEY and "key" not in gemini.query
    plain = _wire(srv, "gemini", stream=False)
    assert plain.path == "/v1/models/mdl:generateContent" and "key" not in plain.query
    assert KEY not in plain.path and "authorization" not in plain.headers


def test_wire_anthropic_max_tokens(srv: ModelServer) -> None:
    assert _wire(srv, "anthropic").body["max_tokens"] == 8192
    assert _wire(srv, "anthropic", max_tokens=100).body["max_tokens"] == 100
    assert (
        _wire(srv, "anthropic", max_tokens=100, provider={"max_output_tokens": 50}).body["max_tokens"] == 50
    )


def test_wire_max_output_tokens_wins(srv: ModelServer) -> None:
    body = _wire(srv, "responses", max_tokens=100, provider={"max_output_tokens": 50}).body
    assert body["max_output_tokens"] == 50
    gemini = _wire(srv, "gemini", max_tokens=100, provider={"max_output_tokens": 50}).body
    assert gemini["generationConfig"]["maxOutputTokens"] == 50
    chat = _wire(srv, "chat", max_tokens=100, provider={"max_output_tokens": 50}).body
    assert 50 in (chat.get("max_tokens"), chat.get("max_completion_tokens"))
    assert 100 not in (chat.get("max_tokens"), chat.get("max_completion_tokens"))


def test_wire_responses_stateless(srv: ModelServer) -> None:
    body = _wire(srv, "responses").body
    assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]


def test_wire_tool_choice_omitted_unless_set(srv: ModelServer) -> None:
    srv.add("ok")
    agent = Agent(config={"base_url": srv.base_url, "model": "m", "no_tool_rounds": 1}, tools=[add])
    agent.send("hi")
    assert "tool_choice" not in srv.requests[-1] and srv.requests[-1]["tools"]
    srv.add("ok")
    agent.send("hi", config={"provider": {"tool_choice": "required"}})
    assert srv.requests[-1]["tool_choice"] == "required"
    for protocol, field_name in (
        ("anthropic", "tool_choice"),
        ("responses", "tool_choice"),
        ("gemini", "toolConfig"),
    ):
        srv.add("ok")
        Agent(
            config={"base_url": srv.base_url, "model": "m", "no_tool_rounds": 1, "protocol": protocol},
            tools=[add],
        ).send("hi")
        assert field_name not in srv.requests[-1], protocol
    agent.close()


def test_wire_body_cannot_override_reserved(srv: ModelServer, caplog: pytest.LogCaptureFixture) -> None:
    reserved = {"model": "x", "messages": [], "input": [], "contents": [], "stream": False, "vendor_flag": 1}
    with caplog.at_level(logging.WARNING, logger="agentcore"):
        chat = _wire(srv, "chat", provider={"body": reserved}).body
    assert chat["model"] == "mdl" and chat["messages"] and chat["stream"] is True and chat["vendor_flag"] == 1
    assert caplog.records
    responses = _wire(srv, "responses", provider={"body": reserved}).body
    assert responses["model"] == "mdl" and responses["input"] and responses["stream"] is True
    gemini = _wire(srv, "gemini", provider={"body": reserved}).body
    assert gemini["contents"] and gemini["vendor_flag"] == 1
    anthropic = _wire(srv, "anthropic", provider={"body": reserved}).body
    assert anthropic["model"] == "mdl" and anthropic["messages"] and anthropic["stream"] is True


def test_wire_cache(srv: ModelServer) -> None:
    default = _wire(srv, "chat").body
    assert isinstance(default["prompt_cache_key"], str) and default["prompt_cache_key"]
    assert "prompt_cache_key" not in _wire(srv, "chat", cache=False).body
    keyed = _wire(srv, "chat", cache={"key": "k1", "retention": "24h", "body": {"extra_cache": 1}}).body
    assert (keyed["prompt_cache_key"], keyed["prompt_cache_retention"], keyed["extra_cache"]) == (
        "k1",
        "24h",
        1,
    )
    responses = _wire(srv, "responses", cache={"retention": "24h"}).body
    assert responses["prompt_cache_retention"] == "24h"
    wins = _wire(srv, "chat", cache={"key": "k1"}, provider={"body": {"prompt_cache_key": "mine"}}).body
    assert wins["prompt_cache_key"] == "mine"
    anthropic = _wire(srv, "anthropic", system="SYS", cache={"retention": "1h"}).body
    assert '"ttl": "1h"' in json.dumps(anthropic)
    assert "cache_control" in json.dumps(anthropic["system"])
    assert "cache_control" not in json.dumps(_wire(srv, "anthropic", system="SYS", cache=False).body)


def test_wire_system_sent_exactly(srv: ModelServer) -> None:
    body = _wire(srv, "chat", system="Exactly this.").body
    assert body["messages"][0] == {"role": "system", "content": "Exactly this."}


def test_gemini_function_response_and_call_ids(srv: ModelServer, agents: list[Agent]) -> None:
    def fail(input: dict[str, Any]) -> None:
        raise RuntimeError("broken tool")

    srv.add({"tool_calls": [call(), call(id="ignored"), {"name": "fail", "arguments": {}}]}, "done")
    agent = make(
        agents, srv, protocol="gemini", tools=[add, {"name": "fail", "execute": fail}], no_tool_rounds=1
    )
    agent.send("go")
    ids = [p["tool_call_id"] for p in agent.history[1]["content"] if p["type"] == "tool-call"]
    assert len(ids) == 3 and len(set(ids)) == 3
    responses = [
        part["functionResponse"]["response"]
        for content in srv.requests[1]["contents"]
        for part in content.get("parts", [])
        if "functionResponse" in part
    ]
    assert responses[0] == {"output": 3} and responses[1] == {"output": 3}
    assert set(responses[2]) == {"error"} and "broken tool" in responses[2]["error"]


def test_reasoning_state_round_trips_same_protocol_only(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"text": "first", "reasoning": "deep thought"}, "second")
    agent = make(agents, srv, protocol="anthropic")
    agent.send("one")
    part = agent.history[1]["content"][0]
    assert part["type"] == "reasoning" and part["provider_metadata"]["protocol"] == "anthropic"
    agent.send("two")
    assert '"signature"' in json.dumps(srv.requests[1]["messages"])
    srv.add("third")
    agent.send("three", config={"protocol": "chat"})
    assert "deep thought" not in json.dumps(srv.requests[2])
    srv.add("fourth")
    agent.send("four", config={"capabilities": {"reasoning": True}})
    assert "reasoning_content" in json.dumps(srv.requests[3])


def test_chat_keeps_consecutive_user_messages(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("ok")
    agent = make(agents, srv)
    agent.history.append(agentcore.history.user("first"))
    agent.send("second")
    users = [m["content"] for m in srv.requests[0]["messages"] if m["role"] == "user"]
    assert users == ["first", "second"]


def test_anthropic_structured_output_uses_a_forced_tool(srv: ModelServer, agents: list[Agent]) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    srv.add({"tool_calls": [{"name": "output", "arguments": {"n": 5}}]})
    agent = make(agents, srv, protocol="anthropic", output=agentcore.output.object(schema))
    result = agent.send("q")
    body = srv.requests[0]
    assert body["tool_choice"]["type"] == "tool"
    forced = body["tool_choice"]["name"]
    assert any(t["name"] == forced for t in body["tools"])
    assert result.output == {"n": 5} and result.reason == "finished"


def test_gemini_call_ids_deterministic_for_a_response(srv: ModelServer) -> None:
    part = {"functionCall": {"name": "add", "args": {"a": 1, "b": 2}}}
    body = {
        "candidates": [{"content": {"role": "model", "parts": [part, part]}, "finishReason": "STOP"}],
        "responseId": "resp-1",
    }
    reply = {"body": json.dumps(body), "status": 200, "content_type": "application/json"}
    srv.add(reply, reply)
    messages = [{"role": "user", "content": "q"}]
    options: dict[str, Any] = {"base_url": srv.base_url, "model": "m", "protocol": "gemini", "stream": False}
    first = agentcore.llm.chat(messages=messages, **options)
    second = agentcore.llm.chat(messages=messages, **options)
    assert [c.id for c in first.tool_calls] == [c.id for c in second.tool_calls]
    assert len({c.id for c in first.tool_calls}) == 2


def test_provider_mapping(srv: ModelServer) -> None:
    provider = {"temperature": 0.3, "headers": {"X-Trace": "t1"}, "stop": ["END"]}
    chat = _wire(srv, "chat", provider=provider)
    assert (
        chat.body["temperature"] == 0.3 and chat.body["stop"] == ["END"] and chat.headers["x-trace"] == "t1"
    )
    anthropic = _wire(srv, "anthropic", provider=provider)
    assert anthropic.body["temperature"] == 0.3 and anthropic.body["stop_sequences"] == ["END"]
    assert anthropic.headers["x-trace"] == "t1"
    gemini = _wire(srv, "gemini", provider=provider)
    config = gemini.body["generationConfig"]
    assert (
        config["temperature"] == 0.3
        and config["stopSequences"] == ["END"]
        and gemini.headers["x-trace"] == "t1"
    )
    responses = _wire(srv, "responses", provider={"temperature": 0.3, "reasoning_effort": "low"})
    assert responses.body["temperature"] == 0.3 and responses.body["reasoning"]["effort"] == "low"
    assert _wire(srv, "chat", provider={"reasoning_effort": "low"}).body["reasoning_effort"] == "low"


def test_anthropic_cache_breakpoint_on_last_message(srv: ModelServer) -> None:
    body = _wire(srv, "anthropic", system="SYS").body
    assert "cache_control" in json.dumps(body["messages"][-1])
    assert "prompt_cache_key" not in _wire(srv, "gemini").body


def test_responses_sends_whole_input(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("first answer", "second answer")
    agent = make(agents, srv, protocol="responses")
    agent.send("one")
    agent.send("two")
    sent = json.dumps(srv.requests[1]["input"])
    assert "one" in sent and "first answer" in sent and "two" in sent
    assert "previous_response_id" not in srv.requests[1]


def test_gemini_thought_signature_sent_back(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"reasoning": "thinking", "tool_calls": [call()]}, "done")
    agent = make(agents, srv, protocol="gemini", tools=[add], no_tool_rounds=1)
    agent.send("go")
    model_turns = [c for c in srv.requests[1]["contents"] if c.get("role") == "model"]
    calls = [p for c in model_turns for p in c["parts"] if "functionCall" in p]
    assert calls and "thoughtSignature" in calls[0]


def test_structured_output_without_native_support(srv: ModelServer, agents: list[Agent]) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    srv.add('{"n": 1}')
    agent = make(
        agents,
        srv,
        system="SYS",
        capabilities={"structured_output": False},
        output=agentcore.output.object(schema),
    )
    assert agent.send("q").output == {"n": 1}
    body = srv.requests[0]
    assert "response_format" not in body
    assert '"n"' in body["messages"][0]["content"] and body["messages"][0]["content"].startswith("SYS")


def test_file_part_filename_reaches_the_wire(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("read it")
    part = {"type": "file", "media_type": "application/pdf", "data": "JVBERi0xLjQ=", "filename": "report.pdf"}
    make(agents, srv).send([{"type": "text", "text": "summarise"}, part])
    assert "report.pdf" in json.dumps(srv.requests[0])


def test_tool_choice_mapping(srv: ModelServer) -> None:
    def body(protocol: str) -> Any:
        srv.add("ok")
        agentcore.llm.chat(
            base_url=srv.base_url,
            model="m",
            messages=[{"role": "user", "content": "q"}],
            tools=agentcore.tools.load([add]),
            protocol=protocol,
            provider={"tool_choice": "required"},
        )
        return srv.requests[-1]

    assert body("chat")["tool_choice"] == "required"
    assert body("responses")["tool_choice"] == "required"
    assert body("anthropic")["tool_choice"]["type"] == "any"
    assert body("gemini")["toolConfig"]["functionCallingConfig"]["mode"] == "ANY"


def test_default_cache_key_hashes_base_url_model_system(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("1", "2", "3", "4")
    agent = make(agents, srv, system="A")
    agent.send("x")
    agent.send("y")
    agent.send("z", config={"system": "B"})
    agent.send("w", config={"model": "other"})
    keys = [r["prompt_cache_key"] for r in srv.requests]
    assert keys[0] == keys[1] and len(set(keys[1:])) == 3


def test_native_structured_output_per_protocol(srv: ModelServer, agents: list[Agent]) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    for protocol in ("responses", "gemini"):
        srv.add('{"n": 7}')
        agent = make(agents, srv, protocol=protocol, output=agentcore.output.object(schema))
        assert agent.send("q").output == {"n": 7}
    responses, gemini = srv.requests
    assert responses["text"]["format"]["type"] == "json_schema"
    assert responses["text"]["format"]["schema"] == schema
    assert gemini["generationConfig"]["responseMimeType"] == "application/json"
    assert gemini["generationConfig"]["responseJsonSchema"] == schema
