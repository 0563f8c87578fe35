"""The loop end to end on every protocol: chat, responses, anthropic and gemini.

    def test_x(protocol, server, make_agent):
        server.add("Hello!")
        agent = make_agent(server, protocol=protocol)

Every test runs once per protocol (and per stream mode where that is cheap) against the
scripted model server, which answers the same neutral script in each vendor's wire format.
Tests assert protocol-neutral things — SendResult, history, callbacks, request counts — and
read request bodies only through the small wire readers below, one per question.

Shared readers and tools: e2e_helpers.py; the `protocol` and `stream` fixtures: conftest.py.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from e2e_helpers import (
    MakeAgent,
    add,
    assert_history_valid,
    call,
    expected_state,
    explode,
    finish,
    opaque_state,
    parts_of,
    system_text,
    tool_calls_sent,
    tool_names,
    tool_results_sent,
    wait_echo,
    wire_messages,
)

from agentcore.config import NO_TOOL_PROMPT, PROTOCOLS
from agentcore.protocols.base import CONTINUE_TEXT
from agentcore.protocols.gemini import SKIP_SIGNATURE
from agentcore.testing import ModelServer
from agentcore.testing.encoders import anthropic as anthropic_wire
from agentcore.testing.encoders import gemini as gemini_wire
from agentcore.testing.encoders import responses as responses_wire

pytestmark = pytest.mark.usefixtures("no_thread_leak")

# ---------------------------------------------------------------- plain replies


def test_plain_reply_finishes_and_sums_usage(
    protocol: str, stream: bool, server: ModelServer, make_agent: MakeAgent
) -> None:
    usage = {"input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 30}
    server.add({"text": "Hello there.", "usage": usage})
    agent = make_agent(server, protocol=protocol, stream=stream, system="Be brief.")
    result = agent.send("hi")
    assert (result.reason, result.text, result.steps) == ("finished", "Hello there.", 1)
    assert len(server.requests) == 1
    assert system_text(protocol, server.requests[0]) == "Be brief."
    assert wire_messages(protocol, server.requests[0]) == [("user", "hi")]
    u = result.usage
    assert (u.input_tokens, u.output_tokens, u.total_tokens, u.cache_read_tokens) == (100, 20, 120, 30)
    assert [m["role"] for m in agent.history] == ["user", "assistant"]
    assert result.messages == agent.history


def test_usage_is_summed_over_every_round(
    protocol: str, stream: bool, server: ModelServer, make_agent: MakeAgent
) -> None:
    usage = {"input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 30}
    server.add({"tool_calls": [call("add", {"a": 1, "b": 2})], "usage": usage}, {"text": "3", "usage": usage})
    agent = make_agent(server, protocol=protocol, stream=stream, tools=[add], no_tool_rounds=1)
    result = agent.send("1+2?")
    u = result.usage
    assert (u.input_tokens, u.output_tokens, u.total_tokens, u.cache_read_tokens) == (200, 40, 240, 60)
    assert agent.history[1]["usage"]["input_tokens"] == 100


def test_reasoning_is_kept_in_history_as_a_reasoning_part(
    protocol: str, stream: bool, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add({"reasoning": "The user greets me.", "text": "Hello!"})
    agent = make_agent(server, protocol=protocol, stream=stream)
    result = agent.send("hi")
    assert result.text == "Hello!"
    assistant = agent.history[-1]
    assert [p["text"] for p in parts_of(assistant, "reasoning")] == ["The user greets me."]
    assert [p["text"] for p in parts_of(assistant, "text")] == ["Hello!"]


# ---------------------------------------------------------------- tool rounds


def test_tool_round_trip(protocol: str, stream: bool, server: ModelServer, make_agent: MakeAgent) -> None:
    results: list[dict[str, Any]] = []
    server.add({"text": "Adding.", "tool_calls": [call("add", {"a": 2, "b": 3})]}, "It is 5.")
    agent = make_agent(
        server,
        protocol=protocol,
        stream=stream,
        tools=[add],
        no_tool_rounds=1,
        callbacks={"on_tool_result": results.append},
    )
    result = agent.send("2+3?")
    assert (result.reason, result.text, result.steps) == ("no-tool", "It is 5.", 2)
    first, second = server.requests
    assert tool_names(protocol, first) == ["add"]
    assert [m["role"] for m in agent.history] == ["user", "assistant", "tool", "assistant"]
    [call_part] = parts_of(agent.history[1], "tool-call")
    assert (call_part["tool_name"], call_part["input"]) == ("add", {"a": 2, "b": 3})
    [result_part] = agent.history[2]["content"]
    assert result_part["tool_call_id"] == call_part["tool_call_id"]
    assert result_part["output"] == {"type": "json", "value": 5}
    # The call and its result travel back under the same id, the result last.
    assert tool_calls_sent(protocol, second) == [(call_part["tool_call_id"], "add")]
    assert [r[:2] for r in tool_results_sent(protocol, second)] == [(call_part["tool_call_id"], "5")]
    assert wire_messages(protocol, second)[-1][0] == "tool"
    assert [(r["tool_name"], r["output"]) for r in results] == [("add", {"type": "json", "value": 5})]
    assert_history_valid(agent.history)


def test_parallel_calls_come_back_in_call_order(
    protocol: str, stream: bool, server: ModelServer, make_agent: MakeAgent
) -> None:
    results: list[dict[str, Any]] = []
    calls = [
        call("wait_echo", {"text": "slow", "seconds": 0.15}),
        call("wait_echo", {"text": "fast", "seconds": 0}),
        call("add", {"a": 1, "b": 1}),
    ]
    server.add({"tool_calls": calls}, "all done")
    agent = make_agent(
        server,
        protocol=protocol,
        stream=stream,
        tools=[add, wait_echo],
        no_tool_rounds=1,
        callbacks={"on_tool_result": results.append},
    )
    agent.send("go")
    ids = [p["tool_call_id"] for p in parts_of(agent.history[1], "tool-call")]
    assert len(set(ids)) == 3
    tool_message = agent.history[2]
    assert [p["tool_call_id"] for p in tool_message["content"]] == ids
    assert [p["output"]["value"] for p in tool_message["content"]] == ["slow", "fast", 2]
    sent = tool_results_sent(protocol, server.requests[1])
    assert [(i, text) for i, text, _ in sent] == list(zip(ids, ["slow", "fast", "2"], strict=True))
    assert sorted(r["tool_call_id"] for r in results) == sorted(ids)
    assert_history_valid(agent.history)


def test_a_failing_tool_gives_an_error_result_the_model_reads(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    results: list[dict[str, Any]] = []
    server.add({"tool_calls": [call("explode")]}, "Sorry.")
    agent = make_agent(
        server,
        protocol=protocol,
        tools=[explode],
        no_tool_rounds=1,
        callbacks={"on_tool_result": results.append},
    )
    result = agent.send("go")
    assert result.text == "Sorry."
    output_block = agent.history[2]["content"][0]["output"]
    assert output_block["type"] == "error-text" and "the disk is on fire" in output_block["value"]
    [(_, text, is_error)] = tool_results_sent(protocol, server.requests[1])
    assert "the disk is on fire" in text
    assert is_error is {"chat": None, "responses": None, "anthropic": True, "gemini": True}[protocol]
    assert results[0]["output"] == output_block


def test_unknown_tool_gets_an_invalid_call_result(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    results: list[dict[str, Any]] = []
    server.add({"tool_calls": [call("nope", {"x": 1})]}, "ok")
    agent = make_agent(
        server, protocol=protocol, tools=[add], no_tool_rounds=1, callbacks={"on_tool_result": results.append}
    )
    agent.send("go")
    output_block = agent.history[2]["content"][0]["output"]
    assert output_block["type"] == "error-text"
    assert "no tool with this name" in output_block["value"] and "add" in output_block["value"]
    assert "no tool with this name" in tool_results_sent(protocol, server.requests[1])[0][1]
    assert [r["tool_name"] for r in results] == ["nope"]
    assert_history_valid(agent.history)


def test_unparsable_arguments_get_an_invalid_call_result_quoting_them(
    protocol: str, stream: bool, server: ModelServer, make_agent: MakeAgent
) -> None:
    if protocol == "gemini":
        pytest.skip("not applicable: Gemini's functionCall.args is always a JSON object: no unparsable text")
    if protocol == "anthropic" and not stream:
        pytest.skip(
            "not applicable: a whole Anthropic tool_use carries `input` as an object (streams carry text)"
        )
    results: list[dict[str, Any]] = []
    server.add({"tool_calls": [call("add", '{"a": 1, "b": ')]}, "ok")
    agent = make_agent(
        server,
        protocol=protocol,
        stream=stream,
        tools=[add],
        no_tool_rounds=1,
        callbacks={"on_tool_result": results.append},
    )
    agent.send("go")
    [call_part] = parts_of(agent.history[1], "tool-call")
    assert call_part["input"] == {}
    output_block = agent.history[2]["content"][0]["output"]
    assert output_block["type"] == "error-text" and '{"a": 1, "b": ' in output_block["value"]
    assert '{"a": 1, "b": ' in tool_results_sent(protocol, server.requests[1])[0][1]
    assert results[0]["output"] == output_block


def test_schema_invalid_arguments_name_the_path_and_the_tool_does_not_run(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    ran: list[str] = []

    def record(input: dict[str, Any]) -> str:
        ran.append("ran")
        return "ran"

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    counter = {"name": "count", "description": "Count.", "input_schema": schema, "execute": record}
    results: list[dict[str, Any]] = []
    server.add({"tool_calls": [call("count", {"n": "seven"})]}, "ok")
    agent = make_agent(
        server,
        protocol=protocol,
        tools=[counter],
        no_tool_rounds=1,
        callbacks={"on_tool_result": results.append},
    )
    agent.send("go")
    output_block = agent.history[2]["content"][0]["output"]
    assert output_block["type"] == "error-text" and "input.n" in output_block["value"]
    assert "input.n" in tool_results_sent(protocol, server.requests[1])[0][1]
    assert ran == []
    assert results[0]["input"] == {"n": "seven"}


# ---------------------------------------------------------------- reasons


def test_no_tool_reminder_rides_once_on_the_last_allowed_round_and_never_in_history(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add("one", "two", "three", "never asked")
    agent = make_agent(server, protocol=protocol, tools=[add])
    result = agent.send("hi")
    assert (result.reason, result.text, result.steps) == ("no-tool", "three", 3)
    assert len(server.requests) == 3
    trailing = [wire_messages(protocol, r)[-1] for r in server.requests]
    assert (trailing[0], trailing[2]) == (("user", "hi"), ("user", NO_TOOL_PROMPT))
    reminded = [sum(1 for m in wire_messages(protocol, r) if m[1] == NO_TOOL_PROMPT) for r in server.requests]
    assert reminded == [0, 0, 1]
    assert all(NO_TOOL_PROMPT not in json.dumps(m) for m in agent.history)


def test_requests_end_on_a_user_turn_where_the_vendor_rejects_a_final_assistant_turn(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    """Round 2 of a no-tool run and a resume after a text reply end on an assistant turn:
    Anthropic took that as a prefill (rejected by current models), Gemini refused it."""
    server.add("one", "two", "three", "resumed")
    agent = make_agent(server, protocol=protocol, tools=[add])
    agent.send("hi")
    agent.resume(config={"no_tool_rounds": 1})
    assert len(server.requests) == 4
    needs_user_turn = protocol in ("anthropic", "gemini")
    for body in (server.requests[1], server.requests[3]):
        role, text = wire_messages(protocol, body)[-1]
        assert (role, text) == (("user", CONTINUE_TEXT) if needs_user_turn else ("assistant", text))
        assert [m for m in wire_messages(protocol, body) if m[1] == CONTINUE_TEXT] == (
            [("user", CONTINUE_TEXT)] if needs_user_turn else []
        )
    assert all(CONTINUE_TEXT not in json.dumps(m) for m in agent.history)


def test_a_send_after_a_step_limit_carries_the_results_then_the_new_input(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add({"tool_calls": [call("add", {"a": 1, "b": 2})]}, "It was 3.")
    agent = make_agent(server, protocol=protocol, tools=[add], max_steps=1, no_tool_rounds=1)
    assert agent.send("1+2?").reason == "step-limit"
    agent.send("and then?")
    body = server.requests[1]
    [call_id] = [p["tool_call_id"] for p in parts_of(agent.history[1], "tool-call")]
    assert [r[:2] for r in tool_results_sent(protocol, body)] == [(call_id, "3")]
    assert wire_messages(protocol, body)[-1][1] == "and then?"
    if protocol == "anthropic":
        # One user turn: the tool_result first, then the new text (Anthropic demands alternation).
        last = body["messages"][-1]
        assert [b["type"] for b in last["content"]] == ["tool_result", "text"]
        roles = [m["role"] for m in body["messages"]]
        assert all(a != b for a, b in itertools.pairwise(roles))


def test_tool_stop_ends_the_run(protocol: str, server: ModelServer, make_agent: MakeAgent) -> None:
    server.add({"tool_calls": [call("finish", {"summary": "all good"})]}, "never asked")
    agent = make_agent(server, protocol=protocol, tools=[finish])
    result = agent.send("go")
    assert (result.reason, result.steps) == ("tool-stop", 1)
    assert len(server.requests) == 1
    assert agent.history[-1]["content"][0]["output"] == {"type": "text", "value": "done: all good"}


def test_step_limit_keeps_the_last_rounds_results(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    for n in range(3):
        server.add({"tool_calls": [call("add", {"a": n, "b": 1})]})
    agent = make_agent(server, protocol=protocol, tools=[add], max_steps=2)
    result = agent.send("go")
    assert (result.reason, result.steps) == ("step-limit", 2)
    assert len(server.requests) == 2
    assert [m["role"] for m in agent.history] == ["user", "assistant", "tool", "assistant", "tool"]
    assert agent.history[-1]["content"][0]["output"] == {"type": "json", "value": 2}
    assert_history_valid(agent.history)


# ---------------------------------------------------------------- reasoning and provider state


def test_provider_state_goes_back_to_the_same_protocol(
    protocol: str, stream: bool, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(
        {
            "reasoning": "I need to add.",
            "redacted_thinking": "REDACTED",
            "tool_calls": [call("add", {"a": 1, "b": 2})],
        },
        "It is 3.",
    )
    agent = make_agent(server, protocol=protocol, stream=stream, tools=[add], no_tool_rounds=1)
    assert agent.send("1+2?").text == "It is 3."
    assert opaque_state(protocol, server.requests[0]) == []
    assert opaque_state(protocol, server.requests[1]) == expected_state(protocol, "I need to add.", "add")
    reasoning = parts_of(agent.history[1], "reasoning")
    assert reasoning[0]["text"] == "I need to add."
    assert all(p["provider_metadata"]["protocol"] == protocol for p in reasoning if "provider_metadata" in p)
    # Readable reasoning is not sent unless capabilities.reasoning asks for it; Anthropic's
    # signed thinking block is the exception: it must travel intact, text included.
    assert ("I need to add." in json.dumps(server.requests[1])) is (protocol == "anthropic")


def test_provider_state_of_a_text_reply_goes_back_on_the_next_send(
    protocol: str, stream: bool, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add({"reasoning": "Just greet.", "text": "Hello!"}, "Bye!")
    agent = make_agent(server, protocol=protocol, stream=stream)
    agent.send("hi")
    agent.send("bye")
    expected = {
        "chat": [],
        "responses": [responses_wire.fake_encrypted_content("Just greet.")],
        "anthropic": [anthropic_wire.fake_signature("Just greet.")],
        # Without calls, Gemini signs the first text part of the reply.
        "gemini": [gemini_wire.fake_signature("")],
    }[protocol]
    assert opaque_state(protocol, server.requests[1]) == expected
    assert ("assistant", "Hello!") in wire_messages(protocol, server.requests[1])


def test_switching_protocol_drops_the_other_vendors_state(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    other = PROTOCOLS[(PROTOCOLS.index(protocol) + 1) % len(PROTOCOLS)]
    server.add(
        {
            "reasoning": "Plan A.",
            "redacted_thinking": "REDACTED",
            "tool_calls": [call("add", {"a": 1, "b": 2})],
        },
        "It is 3.",
        {"tool_calls": [call("add", {"a": 3, "b": 4})]},
        "It is 7.",
    )
    agent = make_agent(server, protocol=protocol, tools=[add], no_tool_rounds=1)
    agent.send("1+2?")
    state = expected_state(protocol, "Plan A.", "add")
    result = agent.send("3+4?", config={"protocol": other})
    assert (result.reason, result.text) == ("no-tool", "It is 7.")
    first_other = server.requests[2]
    assert [s for s in opaque_state(other, first_other) if s != SKIP_SIGNATURE] == []
    assert all(s not in json.dumps(first_other) for s in state)
    # The earlier round still travels: its call and result, under the same ids.
    earlier = [p["tool_call_id"] for p in parts_of(agent.history[1], "tool-call")]
    assert [i for i, _ in tool_calls_sent(other, first_other)] == earlier
    # History is untouched: the first vendor's state is still there for a switch back.
    assert parts_of(agent.history[1], "reasoning")[0]["text"] == "Plan A."
    assert_history_valid(agent.history)
