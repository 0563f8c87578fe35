"""API.md §Lower layers: `llm.chat`, `text_tools`, a custom adapter; recorded traffic through `llm.chat`.

Fixtures and the contract's conventions: tests/contract/conftest.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_helpers import KEY, add, call, make, tool_results
from recorded import RECORDED

import agentcore
from agentcore import Agent, AgentError, Usage
from agentcore.testing import ModelServer


def test_llm_chat_result(srv: ModelServer) -> None:
    srv.add({"text": "calling", "reasoning": None, "tool_calls": [call()], "finish_reason": "stop"})
    events: list[dict[str, Any]] = []
    result = agentcore.llm.chat(
        base_url=srv.base_url,
        api_key=KEY,
        model="m",
        messages=[{"role": "user", "content": "q"}],
        system="S",
        tools=[{"name": "add", "description": "d", "input_schema": add.input_schema}],
        on_llm_event=events.append,
    )
    assert isinstance(result, agentcore.llm.LLMResult)
    assert result.text == "calling" and result.finish_reason == "tool_calls"
    first = result.tool_calls[0]
    assert (first.id, first.name, first.arguments) == ("c1", "add", {"a": 1, "b": 2})
    assert first["name"] == "add" and dict(first) == {
        "id": "c1",
        "name": "add",
        "arguments": {"a": 1, "b": 2},
    }
    assert isinstance(result.usage, Usage)
    assert result.message["role"] == "assistant"
    assert result.message["content"][-1]["type"] == "tool-call"
    assert isinstance(result.raw, list)  # stream events
    assert sum(e["type"] == "finish" for e in events) == 1
    assert srv.requests[0]["messages"][0] == {"role": "system", "content": "S"}


@pytest.mark.parametrize(
    ("scripted", "expected"),
    [("stop", "stop"), ("length", "length"), ("content_filter", "content_filter")],
)
def test_llm_finish_reasons(srv: ModelServer, scripted: str, expected: str) -> None:
    srv.add({"text": "t", "finish_reason": scripted})
    result = agentcore.llm.chat(base_url=srv.base_url, model="m", messages=[{"role": "user", "content": "q"}])
    assert result.finish_reason == expected
    assert result.reasoning is None or isinstance(result.reasoning, str)


def test_stream_false_gives_one_finish_event(srv: ModelServer, agents: list[Agent]) -> None:
    events: list[dict[str, Any]] = []
    srv.add("hello there")
    result = agentcore.llm.chat(
        base_url=srv.base_url,
        model="m",
        messages=[{"role": "user", "content": "q"}],
        stream=False,
        on_llm_event=events.append,
    )
    assert result.text == "hello there" and not isinstance(result.raw, list)
    assert [e["type"] for e in events] == ["finish"]
    assert not srv.requests[0].get("stream")
    agent_events: list[dict[str, Any]] = []
    srv.add("again")
    make(agents, srv, stream=False, callbacks={"on_llm_event": agent_events.append}).send("q")
    assert [e["type"] for e in agent_events] == ["finish"]


def test_llm_chat_validates_provider(srv: ModelServer) -> None:
    with pytest.raises(AgentError) as info:
        agentcore.llm.chat(base_url=srv.base_url, model="m", messages=[], provider={"bogus": 1})
    assert info.value.kind == "config"


def test_text_tools_prepare_wrap_read() -> None:
    tools = agentcore.tools.load([add])
    spec = agentcore.text_tools.prepare(tools.schema)
    h = agentcore.history
    messages = [
        h.user("add 1 and 2"),
        h.assistant(tool_calls=[{"id": "c1", "name": "add", "arguments": {"a": 1, "b": 2}}]),
        h.tool("c1", "add", 3),
    ]
    wrapped = agentcore.text_tools.wrap(messages, spec)
    text = json.dumps(wrapped)
    assert "add" in text and "<tool_result" in text
    assert all(m["role"] != "tool" for m in wrapped)
    assert "<tool_call>" in json.dumps([m for m in wrapped if m["role"] == "system"])  # the manual
    found = agentcore.text_tools.read(
        'Sure. <tool_call>{"name": "add", "arguments": {"a": 4, "b": 5}}</tool_call>', spec
    )
    assert found.text.strip() == "Sure."
    assert [(c.name, c.arguments) for c in found.tool_calls] == [("add", {"a": 4, "b": 5})]
    assert found.invalid == []
    bad = agentcore.text_tools.read("<tool_call>{not json at all</tool_call>", spec, loose=False)
    assert bad.tool_calls == [] and len(bad.invalid) == 1


def test_text_mode_result_text_has_calls_removed(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add('Let me add. <tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>')
    agent = make(agents, srv, tools=[add], tool_mode="text", max_steps=1)
    result = agent.send("q")
    assert result.reason == "step-limit" and "<tool_call>" not in result.text and "Let me add." in result.text
    assert "tools" not in srv.requests[0]
    assert tool_results(agent.history)[0]["output"] == {"type": "json", "value": 3}


class EchoAdapter:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def chat(self, request: dict[str, Any], *, cancel: Any, on_event: Any, timeout: Any) -> Any:
        self.requests.append(request)
        message = {"role": "assistant", "content": [{"type": "text", "text": "adapted"}]}
        return agentcore.llm.LLMResult(
            text="adapted",
            reasoning=None,
            tool_calls=[],
            usage=Usage(input_tokens=1, output_tokens=1, total_tokens=2),
            finish_reason="stop",
            message=message,
            raw=None,
        )


def test_custom_adapter(agents: list[Agent]) -> None:
    adapter = EchoAdapter()
    agent = Agent(config={"model": adapter, "system": "S", "max_tokens": 10})
    agents.append(agent)
    result = agent.send("hi")
    assert result.text == "adapted"
    request = adapter.requests[0]
    assert {"system", "messages", "tools", "provider", "output", "max_tokens"} <= set(request)
    assert request["system"] == "S" and request["max_tokens"] == 10
    for bad in (
        {"provider": {"body": {"x": 1}}},
        {"cache": {"key": "k"}},
        {"capabilities": {"tool_choice": False}},
    ):
        with pytest.raises(AgentError) as info:
            Agent(config={"model": adapter, **bad})
        assert info.value.kind == "config"


def test_auto_tool_mode_falls_back_and_remembers(srv: ModelServer, agents: list[Agent]) -> None:
    model = f"auto-{time.monotonic_ns()}"
    srv.add(
        {"status": 400, "error": "tools are not supported by this model"},
        '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 2}}</tool_call>',
        "four",
    )
    agent = make(agents, srv, tools=[add], tool_mode="auto", no_tool_rounds=1)
    agent.send("2+2", config={"model": model})
    assert "tools" in srv.requests[0] and "tools" not in srv.requests[1]
    assert tool_results(agent.history)[0]["output"] == {"type": "json", "value": 4}
    assert any("<tool_call>" in json.dumps(m) for m in srv.requests[1]["messages"][:1])
    srv.add("fresh")
    other = make(agents, srv, tools=[add], tool_mode="auto", no_tool_rounds=1, model=model)
    other.send("hi")
    assert "tools" not in srv.requests[-1]  # remembered process-wide per (base_url, model)


def test_stream_events_and_reasoning(srv: ModelServer) -> None:
    events: list[dict[str, Any]] = []
    srv.add({"text": "answer", "reasoning": "because", "tool_calls": [call()]})
    result = agentcore.llm.chat(
        base_url=srv.base_url,
        model="m",
        messages=[{"role": "user", "content": "q"}],
        tools=agentcore.tools.load([add]),
        on_llm_event=events.append,
    )
    kinds = [e["type"] for e in events]
    assert {"text-delta", "reasoning-delta", "tool-call-delta", "tool-call", "finish"} <= set(kinds)
    assert kinds[-1] == "finish" and kinds.count("finish") == 1
    assert "".join(e["text"] for e in events if e["type"] == "reasoning-delta") == "because"
    assert result.reasoning == "because"
    assert result.tool_calls[0] == {"id": "c1", "name": "add", "arguments": {"a": 1, "b": 2}}
    assert [p["type"] for p in result.message["content"]] == ["reasoning", "text", "tool-call"]


def test_unknown_vendor_finish_reason_is_other(srv: ModelServer) -> None:
    body = {
        "id": "x",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "banana"}
        ],
    }
    srv.add({"body": json.dumps(body), "status": 200, "content_type": "application/json"})
    result = agentcore.llm.chat(
        base_url=srv.base_url, model="m", messages=[{"role": "user", "content": "q"}], stream=False
    )
    assert result.finish_reason == "other" and result.text == "hi"


RECORDED_PATHS = sorted(RECORDED.glob("*/*.json"))


@pytest.fixture(scope="module")
def replay_server() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


@pytest.mark.parametrize("path", RECORDED_PATHS, ids=[p.stem for p in RECORDED_PATHS])
def test_recorded_reply_through_llm_chat(replay_server: ModelServer, path: Path) -> None:
    fixture = json.loads(path.read_text(encoding="utf-8"))
    response, expect = fixture["response"], fixture["expect"]
    replay_server.add(
        {"body": response["body"], "status": response["status"], "content_type": response["content_type"]}
    )
    events: list[dict[str, Any]] = []
    options: dict[str, Any] = {
        "base_url": replay_server.base_url,
        "api_key": KEY,
        "model": "recorded-model",
        "messages": [{"role": "user", "content": "replay"}],
        "protocol": fixture["protocol"],
        "stream": fixture["stream"],
        "on_llm_event": events.append,
    }
    if expect["error"]:
        with pytest.raises(AgentError) as info:
            agentcore.llm.chat(**options)
        assert info.value.status == expect["error"]["status"] == response["status"]
        assert expect["error"]["message_contains"] in info.value.message
        assert info.value.kind == "request"
        return
    result = agentcore.llm.chat(**options)
    assert result.text == expect["text"]
    assert result.reasoning == expect["reasoning"]
    assert result.finish_reason == expect["finish_reason"]
    calls = [(c.name, c.arguments) for c in result.tool_calls]
    assert calls == [
        (c["name"], c["arguments"] if c["arguments"] != "" else {}) for c in expect["tool_calls"]
    ]
    for mine, theirs in zip(result.tool_calls, expect["tool_calls"], strict=True):
        if theirs["id"] is not None:
            assert mine.id == theirs["id"]
        assert isinstance(mine.id, str) and mine.id
    usage = expect["usage"] or {}
    for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
        assert getattr(result.usage, name) == (usage.get(name) or 0), name
    assert [e["type"] for e in events].count("finish") == 1
    assert result.message["role"] == "assistant"
    json.dumps(result.message)  # plain JSON, ready for history


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (400, "tools are not supported"),
        (422, "Unknown field: tool_choice"),
        (400, "functions are not allowed"),
    ],
)
def test_auto_mode_refusal_wordings(srv: ModelServer, agents: list[Agent], status: int, message: str) -> None:
    srv.add({"status": status, "error": message}, "plain answer")
    agent = make(
        agents, srv, tools=[add], tool_mode="auto", no_tool_rounds=1, model=f"refuse-{time.monotonic_ns()}"
    )
    assert agent.send("q").text == "plain answer"
    assert "tools" not in srv.requests[1]


@pytest.mark.parametrize("protocol", ["chat", "responses", "anthropic", "gemini"])
def test_stream_and_non_stream_give_the_same_result(srv: ModelServer, protocol: str) -> None:
    reply = {
        "text": "the answer",
        "tool_calls": [call(id="s1")],
        "usage": {"input_tokens": 40, "output_tokens": 6, "cache_read_tokens": 10},
    }
    results = []
    for stream in (True, False):
        srv.add(reply)
        results.append(
            agentcore.llm.chat(
                base_url=srv.base_url,
                model="m",
                messages=[{"role": "user", "content": "q"}],
                tools=agentcore.tools.load([add]),
                protocol=protocol,
                stream=stream,
            )
        )
    streamed, plain = results
    assert streamed.text == plain.text == "the answer"
    assert [(c.name, c.arguments) for c in streamed.tool_calls] == [
        (c.name, c.arguments) for c in plain.tool_calls
    ]
    assert streamed.usage == plain.usage and streamed.usage.input_tokens == 40
    assert streamed.usage.cache_read_tokens == 10
    assert streamed.finish_reason == plain.finish_reason == "tool_calls"


@pytest.mark.parametrize("protocol", ["chat", "responses", "anthropic", "gemini"])
def test_text_tools_around_a_direct_llm_chat(srv: ModelServer, protocol: str) -> None:
    spec = agentcore.text_tools.prepare(agentcore.tools.load([add]))
    h = agentcore.history
    messages = [
        h.user("add"),
        h.assistant(tool_calls=[{"id": "c1", "name": "add", "arguments": {"a": 1, "b": 2}}]),
        h.tool("c1", "add", 3),
    ]
    srv.add('<tool_call>{"name": "add", "arguments": {"a": 3, "b": 4}}</tool_call>')
    reply = agentcore.llm.chat(
        base_url=srv.base_url,
        model="m",
        messages=agentcore.text_tools.wrap(messages, spec),
        system="SYS",
        protocol=protocol,
    )
    sent = json.dumps(srv.requests[-1])
    assert "SYS" in sent and "## add" in sent and "<tool_result" in sent
    assert "functionDeclarations" not in sent and '"tools"' not in sent
    found = agentcore.text_tools.read(reply.text, spec)
    assert [(c.name, c.arguments) for c in found.tool_calls] == [("add", {"a": 3, "b": 4})]
