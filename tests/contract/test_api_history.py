"""API.md §History format and Details §History entries the library appends.

Fixtures and the contract's conventions: tests/contract/conftest.py.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from api_helpers import FAST, add, call, make

import agentcore
from agentcore import Agent
from agentcore.testing import ModelServer


def test_appended_entries_carry_id_created_at_and_usage(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"tool_calls": [call()]}, "done")
    agent = make(agents, srv, tools=[add], no_tool_rounds=1)
    before = time.time()
    agent.send("go")
    for message in agent.history:
        assert re.fullmatch(r"[0-9a-f]{32}", message["id"])
        assert before - 1 <= message["created_at"] <= time.time() + 1
    for message in agent.history:
        if message["role"] == "assistant":
            assert isinstance(message["usage"], dict)
    json.dumps(agent.history)  # plain JSON throughout


def test_library_never_adds_keys_to_entries_it_did_not_create(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("ok")
    mine = {"role": "user", "content": "earlier", "custom": 1}
    reply = {"role": "assistant", "content": [{"type": "text", "text": "sure"}]}
    agent = make(agents, srv)
    agent.history.extend([mine, reply])
    agent.send("go on")
    assert mine == {"role": "user", "content": "earlier", "custom": 1}
    assert reply == {"role": "assistant", "content": [{"type": "text", "text": "sure"}]}
    # Extra keys are kept and never sent to the model.
    assert "custom" not in json.dumps(srv.requests[0])
    assert "created_at" not in json.dumps(srv.requests[0])


def test_history_constructors() -> None:
    h = agentcore.history
    assert h.user("hi") == {"role": "user", "content": "hi"}
    assert h.compact("sum") == {"role": "compact", "content": "sum"}
    message = h.assistant("ok", tool_calls=[{"id": "c1", "name": "add", "arguments": '{"a": 1}'}])
    assert message["role"] == "assistant"
    assert message["content"] == [
        {"type": "text", "text": "ok"},
        {"type": "tool-call", "tool_call_id": "c1", "tool_name": "add", "input": {"a": 1}},
    ]
    ready = {"type": "tool-call", "tool_call_id": "c2", "tool_name": "x", "input": {}}
    assert h.assistant(tool_calls=[ready])["content"] == [ready]
    assert h.assistant(tool_calls=[{"id": "c3", "name": "x", "arguments": {"k": 1}}])["content"][0][
        "input"
    ] == {"k": 1}
    result = h.tool("c1", "add", 3)
    assert result == {
        "role": "tool",
        "content": [
            {
                "type": "tool-result",
                "tool_call_id": "c1",
                "tool_name": "add",
                "output": {"type": "json", "value": 3},
            }
        ],
    }
    assert h.tool("c1", "add", "three")["content"][0]["output"] == {"type": "text", "value": "three"}
    assert h.tool("c1", "add", None)["content"][0]["output"]["type"] == "text"


def test_turns_rules() -> None:
    h = agentcore.history
    user = h.user("go")
    call_message = h.assistant(tool_calls=[{"id": "c1", "name": "read", "arguments": {}}])
    result = h.tool("c1", "read", "x")
    orphan = h.tool("zz", "read", "y")
    more = h.assistant("and more")
    # The result sits before its call: it still joins the call's turn, after the call.
    assert h.turns([user, result, call_message]) == [[user], [call_message, result]]
    assert h.turns([user, call_message, orphan]) == [[user], [call_message]]
    # Each model reply is a turn with its results; only adjacent assistant messages fold together.
    assert h.turns([user, call_message, result, more]) == [[user], [call_message, result], [more]]
    assert h.turns([user, more, h.assistant("x"), h.user("u")]) == [
        [user],
        [more, h.assistant("x")],
        [h.user("u")],
    ]


def test_render_format() -> None:
    h = agentcore.history
    messages = [
        h.user("read the config"),
        h.assistant(
            [{"type": "reasoning", "text": "I will read"}],
            tool_calls=[{"id": "c1", "name": "read", "arguments": {"path": "a.json"}}],
        ),
        h.tool("c1", "read", {"port": 8080}),
        h.user([{"type": "text", "text": "and this?"}, {"type": "image", "image": "iVBORw0KGgo="}]),
        h.user([{"type": "file", "media_type": "application/pdf", "data": "JVBERi0="}]),
    ]
    assert h.render(messages).splitlines() == [
        "user: read the config",
        'assistant: [reasoning] I will read [call read {"path": "a.json"}]',
        'tool: [read returned] {"port": 8080}',
        "user: and this? [image]",
        "user: [file]",
    ]


def test_empty_assistant_reply_stored_not_sent(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"text": ""}, "now")
    agent = make(agents, srv)
    agent.send("one")
    assert agent.history[1]["role"] == "assistant"
    agent.send("two")
    roles = [m["role"] for m in srv.requests[1]["messages"]]
    assert roles.count("assistant") == 0


@pytest.mark.parametrize("protocol", ["chat", "responses", "anthropic", "gemini"])
def test_history_is_plain_json_and_reloads(srv: ModelServer, protocol: str) -> None:
    srv.add(
        {"reasoning": "think", "text": "calling", "tool_calls": [call()]},
        {"reasoning": "more", "text": "3"},
        {"text": "again"},
    )
    config = {"base_url": srv.base_url, "model": "m", "protocol": protocol, "no_tool_rounds": 1, **FAST}
    with Agent(config=config, tools=[add]) as agent:
        agent.send("add")
        stored = json.dumps(agent.history)
    assert json.loads(stored) == agent.history  # no tuples, objects or NaN hiding in it
    with Agent(config=config, tools=[add], history=json.loads(stored)) as reloaded:
        assert reloaded.send("once more").text == "again"
    assert json.loads(stored)[-1]["usage"]["input_tokens"] >= 0
