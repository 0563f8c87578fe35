"""Tool-call ids stay unique in history whatever the server sends (API.md §Details "Tool-call ids").

Regression tests for issue 8 defect 1: servers that number every reply's calls from `call_0`,
two calls of one reply sharing an id, Gemini's generated ids for the same call in two rounds,
and a loaded history that already holds duplicates. Each test reads the request bodies the
server recorded and checks that every result travels paired with its own call.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agentcore import Agent, AgentError, tool
from agentcore.call_ids import open_calls, paired
from agentcore.history import assistant, user
from agentcore.history import tool as tool_message
from agentcore.testing import ModelServer

PROTOCOLS = ("chat", "responses", "anthropic", "gemini")
MakeAgent = Callable[..., Agent]


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.fixture(params=PROTOCOLS)
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _call(a: int, b: int, id: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"name": "add", "arguments": {"a": a, "b": b}}
    if id is not None:
        item["id"] = id
    return item


def _reply(protocol: str, *calls: dict[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = {"tool_calls": list(calls)}
    if protocol == "gemini":
        item["gemini_call_ids"] = True  # newer Gemini versions send ids: make them collide too
    return item


# ---------------------------------------------------------------- wire readers


def wire_pairs(
    protocol: str, body: dict[str, Any]
) -> tuple[list[tuple[str, dict[str, Any]]], list[tuple[str, str]]]:
    """([(call id, arguments)], [(result id, result text)]) in the order the request carries them."""
    calls: list[tuple[str, dict[str, Any]]] = []
    results: list[tuple[str, str]] = []
    if protocol == "chat":
        for message in body["messages"]:
            for c in message.get("tool_calls") or []:
                calls.append((c["id"], json.loads(c["function"]["arguments"])))
            if message["role"] == "tool":
                results.append((message["tool_call_id"], str(message["content"])))
    elif protocol == "responses":
        for item in body["input"]:
            if item.get("type") == "function_call":
                calls.append((item["call_id"], json.loads(item["arguments"])))
            elif item.get("type") == "function_call_output":
                results.append((item["call_id"], str(item["output"])))
    elif protocol == "anthropic":
        for message in body["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else []:
                if block.get("type") == "tool_use":
                    calls.append((block["id"], block["input"]))
                elif block.get("type") == "tool_result":
                    results.append((block["tool_use_id"], str(block["content"])))
    else:
        for content in body["contents"]:
            for part in content["parts"]:
                if "functionCall" in part:
                    calls.append((part["functionCall"]["id"], part["functionCall"]["args"]))
                elif "functionResponse" in part:
                    response = part["functionResponse"]
                    value = response["response"].get("output", response["response"].get("error"))
                    results.append((response["id"], str(value)))
    return calls, results


def assert_each_result_paired_with_its_call(protocol: str, body: dict[str, Any], expected_calls: int) -> None:
    """Ids unique on the wire, every call answered once, and each answer is that call's sum."""
    calls, results = wire_pairs(protocol, body)
    assert len(calls) == expected_calls
    call_ids = [c for c, _ in calls]
    assert len(set(call_ids)) == len(call_ids), call_ids
    assert sorted(r for r, _ in results) == sorted(call_ids)
    arguments = dict(calls)
    for result_id, text in results:
        assert text == str(arguments[result_id]["a"] + arguments[result_id]["b"])


def history_call_ids(history: list[dict[str, Any]]) -> list[str]:
    return [
        p["tool_call_id"]
        for m in history
        if m["role"] == "assistant"
        for p in m["content"]
        if p.get("type") == "tool-call"
    ]


def assert_history_ids_unique(history: list[dict[str, Any]]) -> None:
    ids = history_call_ids(history)
    assert all(ids) and len(set(ids)) == len(ids), ids
    answered = [p["tool_call_id"] for m in history if m["role"] == "tool" for p in m["content"]]
    assert sorted(answered) == sorted(ids)


# ---------------------------------------------------------------- replies reusing ids


def test_two_replies_both_calling_call_0_pair_each_result_with_its_own_call(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(_reply(protocol, _call(1, 2, "call_0")), _reply(protocol, _call(3, 4, "call_0")), "done")
    agent = make_agent(server, protocol=protocol, tools=[add], no_tool_rounds=1)
    assert agent.send("add twice").text == "done"
    assert len(server.requests) == 3
    assert_each_result_paired_with_its_call(protocol, server.requests[2], expected_calls=2)
    assert_history_ids_unique(agent.history)
    # The first call keeps the server's id; the second is renamed and remembers it.
    second = agent.history[3]["content"][0]
    assert agent.history[1]["content"][0]["tool_call_id"] == "call_0"
    assert second["tool_call_id"] != "call_0"
    assert second["provider_metadata"]["wire_id"] == "call_0"


def test_numbered_call_ids_script_option_reuses_ids_across_replies(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(
        {"tool_calls": [_call(1, 2), _call(5, 6)], "numbered_call_ids": True},
        {"tool_calls": [_call(3, 4), _call(7, 8)], "numbered_call_ids": True},
        "done",
    )
    agent = make_agent(server, tools=[add], no_tool_rounds=1)
    agent.send("go")
    wire_ids = [c["id"] for c in server.requests[1]["messages"][1]["tool_calls"]]
    assert wire_ids == ["call_0", "call_1"]
    assert_each_result_paired_with_its_call("chat", server.requests[2], expected_calls=4)
    assert_history_ids_unique(agent.history)


def test_two_calls_in_one_reply_sharing_an_id_get_one_result_each(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(_reply(protocol, _call(1, 2, "dup"), _call(3, 4, "dup")), "done")
    tool_results: list[dict[str, Any]] = []
    agent = make_agent(
        server,
        protocol=protocol,
        tools=[add],
        no_tool_rounds=1,
        callbacks={"on_tool_result": tool_results.append},
    )
    agent.send("add twice")
    assert_each_result_paired_with_its_call(protocol, server.requests[1], expected_calls=2)
    assert_history_ids_unique(agent.history)
    # The callbacks see the ids that were written.
    assert sorted(r["tool_call_id"] for r in tool_results) == sorted(history_call_ids(agent.history))


def test_missing_and_empty_ids_get_fresh_ones(server: ModelServer, make_agent: MakeAgent) -> None:
    chunks = [
        'data: {"id":"r1","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":['
        '{"index":0,"id":"","type":"function","function":{"name":"add","arguments":"{\\"a\\":1,\\"b\\":2}"}}]}}]}\n\n',
        'data: {"id":"r1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n',
        "data: [DONE]\n\n",
    ]
    server.add({"chunks": chunks}, "done")
    agent = make_agent(server, tools=[add], no_tool_rounds=1)
    agent.send("go")
    assert_history_ids_unique(agent.history)
    assert_each_result_paired_with_its_call("chat", server.requests[1], expected_calls=1)


# Two calls of `add` (1 + 2 and 3 + 4) as each vendor writes them, with the call id left out or
# empty: hand-written wire replies (JSON and SSE), not what our ModelServer would generate.
ADDS = [{"a": 1, "b": 2}, {"a": 3, "b": 4}]


def _id(mode: str, key: str = "id") -> dict[str, Any]:
    return {} if mode == "missing" else {key: ""}


def _sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> list[str]:
    chunks = []
    for event, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        chunks.append((f"event: {event}\n" if event else "") + f"data: {text}\n\n")
    return chunks


def _chat_reply(mode: str, stream: bool) -> dict[str, Any]:
    calls = [
        {**_id(mode), "type": "function", "function": {"name": "add", "arguments": json.dumps(args)}}
        for args in ADDS
    ]
    if not stream:
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
        usage = {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}
        return {"body": {"id": "r1", "object": "chat.completion", "choices": [choice], "usage": usage}}
    deltas = [
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, **call}]}}]}
        for i, call in enumerate(calls)
    ]
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    return {"chunks": _sse([(None, d) for d in [*deltas, end]] + [(None, "[DONE]")])}


def _responses_reply(mode: str, stream: bool) -> dict[str, Any]:
    items = [
        {
            "type": "function_call",
            "id": f"fc_{i}",
            **_id(mode, "call_id"),
            "name": "add",
            "arguments": json.dumps(args),
            "status": "completed",
        }
        for i, args in enumerate(ADDS)
    ]
    usage = {"input_tokens": 5, "output_tokens": 5, "total_tokens": 10}
    response = {"id": "resp_1", "object": "response", "status": "completed", "output": items, "usage": usage}
    if not stream:
        return {"body": response}
    events: list[tuple[str | None, dict[str, Any] | str]] = [
        (
            "response.created",
            {"type": "response.created", "response": {**response, "output": [], "status": "in_progress"}},
        )
    ]
    for i, item in enumerate(items):
        events += [
            (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": i, "item": {**item, "arguments": ""}},
            ),
            (
                "response.function_call_arguments.delta",
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": item["id"],
                    "output_index": i,
                    "delta": item["arguments"],
                },
            ),
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": i, "item": item},
            ),
        ]
    events.append(("response.completed", {"type": "response.completed", "response": response}))
    return {"chunks": _sse(events)}


def _anthropic_reply(mode: str, stream: bool) -> dict[str, Any]:
    blocks = [{"type": "tool_use", **_id(mode), "name": "add", "input": args} for args in ADDS]
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": blocks,
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 5, "output_tokens": 5},
    }
    if not stream:
        return {"body": message}
    events: list[tuple[str | None, dict[str, Any] | str]] = [
        (
            "message_start",
            {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}},
        )
    ]
    for i, block in enumerate(blocks):
        events += [
            (
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": {**block, "input": {}}},
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": i,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": i}),
        ]
    events += [
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return {"chunks": _sse(events)}


def _gemini_reply(mode: str, stream: bool) -> dict[str, Any]:
    parts = [{"functionCall": {"name": "add", "args": args, **_id(mode)}} for args in ADDS]
    body = {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 5, "totalTokenCount": 10},
    }
    return {"chunks": _sse([(None, body)])} if stream else {"body": body}


REPLIES_WITHOUT_IDS = {
    "chat": _chat_reply,
    "responses": _responses_reply,
    "anthropic": _anthropic_reply,
    "gemini": _gemini_reply,
}


@pytest.mark.parametrize("mode", ["missing", "empty"])
@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
def test_calls_with_no_id_or_an_empty_id_each_get_their_own_result(
    protocol: str, stream: bool, mode: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    """Before: an Anthropic reply whose `tool_use` ids were empty or missing gave each call a
    fresh id in history and each result another one — results that answer no call, a history
    every later request sent invalid."""
    item = REPLIES_WITHOUT_IDS[protocol](mode, stream)
    server.add({**item, "content_type": "text/event-stream" if stream else "application/json"}, "done")
    agent = make_agent(server, tools=[add], protocol=protocol, stream=stream, no_tool_rounds=1)
    assert agent.send("add both").text == "done"
    assert_history_ids_unique(agent.history)
    calls = [p for p in agent.history[1]["content"] if p["type"] == "tool-call"]
    assert [c["input"] for c in calls] == ADDS
    results = agent.history[2]["content"]
    assert [r["tool_call_id"] for r in results] == [c["tool_call_id"] for c in calls]
    assert [r["output"]["value"] for r in results] == [3, 7]
    assert_each_result_paired_with_its_call(protocol, server.requests[1], expected_calls=2)


class _StreamsCallsWithoutIds:
    """A custom model adapter: streams text and two complete calls with no id, then waits for a stop."""

    def chat(self, request: dict[str, Any], *, cancel: Any, on_event: Any, timeout: Any) -> Any:
        on_event({"type": "text-delta", "text": "adding"})
        for args in ADDS:
            on_event({"type": "tool-call", "tool_name": "add", "input": args})
        cancel.wait(60)
        raise AgentError("the request was cancelled", kind="aborted")


def test_calls_without_an_id_cut_by_stop_mid_stream_get_one_each() -> None:
    """The partial-reply path: complete calls whose stream events carried no id (before: "None",
    which a second such call then replaced)."""
    agent = Agent(config={"model": _StreamsCallsWithoutIds()}, tools=[add])

    def stop_after_the_calls(event: dict[str, Any]) -> None:
        if event["type"] == "tool-call" and event["input"] == ADDS[-1]:
            agent.stop()

    with agent, pytest.raises(AgentError) as raised:
        agent.send("add", callbacks={"on_llm_event": stop_after_the_calls})
    assert raised.value.kind == "aborted"
    ids = history_call_ids(agent.history)
    assert len(ids) == 2 and "None" not in ids, ids
    assert_history_ids_unique(agent.history)


def _gemini_body_without_ids() -> dict[str, Any]:
    """A Gemini-compatible reply with no `responseId` and no call id: only the call itself."""
    call = {"functionCall": {"name": "add", "args": {"a": 1, "b": 2}}}
    return {
        "candidates": [{"content": {"role": "model", "parts": [call]}, "finishReason": "STOP", "index": 0}]
    }


def test_gemini_same_call_same_arguments_in_two_rounds_does_not_collide(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    body = json.dumps(_gemini_body_without_ids())
    server.add({"body": body}, {"body": body}, "done")
    agent = make_agent(server, protocol="gemini", stream=False, tools=[add], no_tool_rounds=1)
    assert agent.send("add twice").text == "done"
    assert_history_ids_unique(agent.history)
    assert_each_result_paired_with_its_call("gemini", server.requests[2], expected_calls=2)


def test_gemini_thought_signature_survives_a_renamed_call(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add(
        {"tool_calls": [_call(1, 2, "c")], "gemini_call_ids": True, "reasoning": "think"},
        {"tool_calls": [_call(3, 4, "c")], "gemini_call_ids": True, "reasoning": "think"},
        "done",
    )
    agent = make_agent(server, protocol="gemini", tools=[add], no_tool_rounds=1)
    agent.send("go")
    renamed = history_call_ids(agent.history)[1]
    part = next(p for p in agent.history[3]["content"] if p.get("type") == "tool-call")
    assert part["tool_call_id"] == renamed != "c"
    meta = part["provider_metadata"]
    assert meta["protocol"] == "gemini" and meta["wire_id"] == "c" and meta["thought_signature"]
    sent = [p for c in server.requests[2]["contents"] for p in c["parts"] if "functionCall" in p]
    assert [p["functionCall"]["id"] for p in sent] == history_call_ids(agent.history)
    assert sent[1]["thoughtSignature"] == meta["thought_signature"]


def test_responses_item_id_survives_a_renamed_call(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add({"tool_calls": [_call(1, 2, "c")]}, {"tool_calls": [_call(3, 4, "c")]}, "done")
    agent = make_agent(server, protocol="responses", tools=[add], no_tool_rounds=1)
    agent.send("go")
    part = agent.history[3]["content"][0]
    assert part["provider_metadata"]["protocol"] == "responses"
    assert part["provider_metadata"]["id"].startswith("fc")
    items = [i for i in server.requests[2]["input"] if i.get("type") == "function_call"]
    assert items[1]["id"] == part["provider_metadata"]["id"]
    assert items[1]["call_id"] == part["tool_call_id"]


def test_a_call_cut_by_stop_mid_stream_gets_a_unique_id(server: ModelServer, make_agent: MakeAgent) -> None:
    """The partial-reply path (cancelled mid-stream) writes ids through the same rule."""
    server.add({"tool_calls": [_call(1, 2, "call_0")]})
    agent = make_agent(server, tools=[add], no_tool_rounds=1)
    agent.send("first")

    def stop_after_first_call(event: dict[str, Any]) -> None:
        if event["type"] == "tool-call":
            agent.stop()

    server.add({"text": "again", "tool_calls": [_call(3, 4, "call_0"), _call(5, 6, "x")], "stall_after": 60})
    with pytest.raises(AgentError) as raised:
        agent.send("second", callbacks={"on_llm_event": stop_after_first_call})
    assert raised.value.kind == "aborted"
    partial = agent.history[-2]
    assert partial["content"][0] == {"type": "text", "text": "again"}
    assert partial["content"][1]["provider_metadata"]["wire_id"] == "call_0"
    assert_history_ids_unique(agent.history)


# ---------------------------------------------------------------- loaded histories with duplicates


def _duplicated_history() -> list[dict[str, Any]]:
    return [
        user("add twice"),
        assistant(tool_calls=[{"id": "call_0", "name": "add", "arguments": {"a": 1, "b": 2}}]),
        tool_message("call_0", "add", 3),
        assistant(tool_calls=[{"id": "call_0", "name": "add", "arguments": {"a": 3, "b": 4}}]),
        tool_message("call_0", "add", 7),
        assistant(
            tool_calls=[
                {"id": "same", "name": "add", "arguments": {"a": 5, "b": 6}},
                {"id": "same", "name": "add", "arguments": {"a": 7, "b": 8}},
            ]
        ),
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool-result",
                    "tool_call_id": "same",
                    "tool_name": "add",
                    "output": {"type": "json", "value": 11},
                },
                {
                    "type": "tool-result",
                    "tool_call_id": "same",
                    "tool_name": "add",
                    "output": {"type": "json", "value": 15},
                },
            ],
        },
        assistant("all added"),
    ]


def test_loaded_history_with_duplicate_ids_travels_paired(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    history = _duplicated_history()
    loaded, before = len(history), json.dumps(history, sort_keys=True)
    server.add("ok")
    agent = make_agent(server, protocol=protocol, tools=[add], no_tool_rounds=1, history=history)
    agent.send("thanks")
    assert_each_result_paired_with_its_call(protocol, server.requests[0], expected_calls=4)
    # Renamed on the wire only: the loaded entries are untouched.
    assert json.dumps(agent.history[:loaded], sort_keys=True) == before


def test_paired_renames_deterministically_and_open_calls_counts_duplicates_apart() -> None:
    history = _duplicated_history()[:4]  # the second call_0 has no result yet
    wire = paired(history)
    assert history_call_ids(wire) == ["call_0", "call_0_2"]
    assert paired(history) == wire
    assert [p["input"] for p in open_calls(history)] == [{"a": 3, "b": 4}]


def test_a_loaded_history_missing_a_duplicate_result_is_closed_and_sent_valid(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add("ok")
    agent = make_agent(
        server, protocol=protocol, tools=[add], no_tool_rounds=1, history=_duplicated_history()[:4]
    )
    agent.send("go on")
    calls, results = wire_pairs(protocol, server.requests[0])
    assert len(calls) == 2 and len({c for c, _ in calls}) == 2
    assert sorted(r for r, _ in results) == sorted(c for c, _ in calls)
