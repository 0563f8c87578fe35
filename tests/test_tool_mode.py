"""tool_mode native / text / auto through the loop (the text protocol end to end)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentcore import text_tools, tool
from agentcore.testing import ModelServer

MakeAgent = Any


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'


@pytest.fixture(autouse=True)
def fresh_memory(server: ModelServer) -> None:
    for model in ("test-model", "refusing-model", "writes-text"):
        text_tools.forget(server.base_url, model)


def test_native_mode_adds_nothing_to_system_and_treats_call_text_as_text(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add("I would write " + CALL)
    agent = make_agent(server, tools=[add], system="Be brief.", no_tool_rounds=1)
    result = agent.send("2+3?")
    assert server.requests[0]["messages"][0] == {"role": "system", "content": "Be brief."}
    assert "tools" in server.requests[0]
    assert result.reason == "no-tool" and "<tool_call>" in result.text


def test_text_mode_sends_no_tools_field_reads_calls_and_sends_results_as_text(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    events: list[dict[str, Any]] = []
    server.add("Let me add. " + CALL, "It is 5.")
    agent = make_agent(
        server,
        tools=[add],
        tool_mode="text",
        system="Be brief.",
        no_tool_rounds=1,
        callbacks={"on_llm_event": events.append},
    )
    result = agent.send("2+3?")
    first, second = server.requests
    assert "tools" not in first and "tool_choice" not in first
    assert (
        first["messages"][0]["content"].startswith("Be brief.")
        and "<tool_call>" in first["messages"][0]["content"]
    )
    # History keeps the standard shapes; the markup is gone from the stored text.
    assistant, tool_message = agent.history[1], agent.history[2]
    assert assistant["content"][0] == {"type": "text", "text": "Let me add."}
    assert assistant["content"][1]["type"] == "tool-call" and assistant["content"][1]["input"] == {
        "a": 2,
        "b": 3,
    }
    assert tool_message["content"][0]["output"] == {"type": "json", "value": 5}
    # The result travelled back as user text.
    sent = json.dumps(second["messages"])
    assert '<tool_result name=\\"add\\">5</tool_result>' in sent or '<tool_result name=\\"add\\">' in sent
    assert all(m["role"] != "tool" for m in second["messages"])
    assert result.text == "It is 5."
    streamed = "".join(e.get("text", "") for e in events if e["type"] == "text-delta")
    assert "<tool_call>" in streamed, "text deltas still show the call markup"


def test_text_mode_unparseable_call_gets_an_invalid_call_result(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add('<tool_call>{"name": "add", "arguments": {"a": {{{ }</tool_call>', "sorry")
    agent = make_agent(server, tools=[add], tool_mode="text", no_tool_rounds=1)
    agent.send("2+3?")
    result = agent.history[2]["content"][0]["output"]
    assert result["type"] == "error-text" and "Invalid call" in result["value"]
    assert "{{{" in result["value"], "the raw text is quoted so the model can rewrite it"


def test_auto_mode_switches_to_text_when_the_server_refuses_tools_and_remembers(
    make_agent: MakeAgent,
) -> None:
    refusal = {"status": 400, "error": "This model does not support tools"}
    with ModelServer([refusal, "Adding. " + CALL, "5", "again"]) as server:
        agent = make_agent(server, tools=[add], tool_mode="auto", no_tool_rounds=1, model="refusing-model")
        result = agent.send("2+3?")
        assert result.text == "5" and result.steps == 2
        assert "tools" in server.requests[0] and "tools" not in server.requests[1]
        agent.send("more")
        assert "tools" not in server.requests[3], "the refusal is remembered for this base_url + model"


def test_auto_mode_reads_calls_written_as_text_even_with_native_tools(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(CALL, "5")
    agent = make_agent(server, tools=[add], tool_mode="auto", no_tool_rounds=1, model="writes-text")
    result = agent.send("2+3?")
    assert "tools" in server.requests[0]
    assert agent.history[2]["content"][0]["output"]["value"] == 5 and result.text == "5"


def test_history_from_text_mode_works_with_a_native_model(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add(CALL, "5", "native answer")
    agent = make_agent(server, tools=[add], tool_mode="text", no_tool_rounds=1)
    agent.send("2+3?")
    agent.send("and now?", config={"tool_mode": "native"})
    last = server.requests[-1]
    assert "tools" in last
    assert [m["role"] for m in last["messages"]] == ["user", "assistant", "tool", "assistant", "user"]
