"""Responses input items against a server that needs every item's `type` (issue 24 defect 3).

llama.cpp's `llama-server` turns a Responses request into a chat request item by item
(tools/server/server-chat.cpp, `server_chat_convert_responses_to_chatcmpl`). `LlamaResponses`
below follows the same tests in the same order and refuses what it refuses, with its HTTP 400
`{"error": {"code": 400, "message": "Cannot determine type of 'item'", "type":
"invalid_request_error"}}`. The OpenAI API accepts a message item without `type`; llama.cpp
only for user / system / developer messages, so a conversation broke at its second request.
Every body sent here also validates against `CreateResponse` of OpenAI's OpenAPI description.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from openapi_check import validate_create_response

from agentcore import Agent, AgentError, tool
from agentcore.testing import ModelServer, Recorded


class Refused(ValueError):
    """What llama.cpp throws as std::invalid_argument; the server answers it with a 400."""


def _is_str(item: dict[str, Any], key: str) -> bool:
    return isinstance(item.get(key), str)


def _is_list(item: dict[str, Any], key: str) -> bool:
    return isinstance(item.get(key), list)


def check_input(items: Any) -> None:
    """The checks of server_chat_convert_responses_to_chatcmpl, item by item (raises Refused)."""
    if isinstance(items, str):
        return
    if not isinstance(items, list):
        raise Refused("'input' must be a string or array of objects")
    for original in items:
        item = dict(original)
        if _is_str(item, "content"):
            # "Only 'Input message' contains item['content']::string": made an input_text part.
            item["content"] = [{"type": "input_text", "text": item["content"]}]
        role, kind = item.get("role"), item.get("type")
        if _is_list(item, "content") and role in ("user", "system", "developer"):
            for part in item["content"]:
                if part.get("type") not in ("input_text", "input_image", "input_file"):
                    raise Refused("'type' must be one of 'input_text', 'input_image', or 'input_file'")
        elif role == "assistant" and kind == "message":
            for part in item.get("content") or []:
                if part.get("type") not in ("output_text", "input_text", "refusal"):
                    raise Refused("'type' must be one of 'output_text' or 'refusal'")
        elif kind == "function_call" and all(_is_str(item, k) for k in ("arguments", "call_id", "name")):
            pass
        elif kind == "function_call_output" and _is_str(item, "call_id"):
            if not (_is_str(item, "output") or _is_list(item, "output")):
                raise Refused("Cannot determine type of 'item'")
            for part in item["output"] if _is_list(item, "output") else []:
                if part.get("type") != "input_text":
                    raise Refused("Output of tool call should be 'Input text'")
        elif kind == "reasoning" and _is_list(item, "summary"):
            if not _is_list(item, "content") or not item["content"]:
                raise Refused("item['content'] is not an array")
        else:
            raise Refused("Cannot determine type of 'item'")


class LlamaResponses:
    """A scripted reply for each request whose input llama.cpp accepts; its 400 for the others.

    Every body is also validated against the OpenAPI schema (failures are kept in `invalid`).
    """

    def __init__(self, replies: list[Any]) -> None:
        self.replies = list(replies)
        self.refused: list[str] = []
        self.invalid: list[str] = []

    def __call__(self, recorded: Recorded) -> Any:
        body = recorded.body
        try:
            validate_create_response(body)
        except AssertionError as failed:
            self.invalid.append(str(failed))
        try:
            check_input(body.get("input"))
        except Refused as refused:
            self.refused.append(str(refused))
            error = {"code": 400, "message": str(refused), "type": "invalid_request_error"}
            return {"status": 400, "body": json.dumps({"error": error}), "content_type": "application/json"}
        return self.replies.pop(0) if self.replies else "(no more replies)"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def _agent(server: ModelServer, **config: Any) -> Agent:
    return Agent(
        config={
            "base_url": server.base_url,
            "model": "qwen2.5-coder-1.5b",
            "protocol": "responses",
            "retry_max_elapsed": 0.0,  # a refusal fails the test at once instead of being retried
            "no_tool_rounds": 1,  # a reply without calls ends the send
            **config,
        },
        tools=[add],
    )


@pytest.mark.parametrize("stream", [True, False])
def test_a_second_send_with_tool_history_is_accepted(stream: bool) -> None:
    """The second request carried `{"role": "assistant", "content": ...}` without a type: refused."""
    llama = LlamaResponses(
        [
            {"text": "Let me add.", "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
            "2 + 3 is 5.",
            {"tool_calls": [{"name": "add", "arguments": {"a": 5, "b": 1}}]},
            "And 6.",
        ]
    )
    with ModelServer(default=llama) as server, _agent(server, stream=stream) as agent:
        assert agent.send("What is 2 + 3?").text == "2 + 3 is 5."
        assert agent.send("Add 1 more.").text == "And 6."
        sent = [r.body for r in server.log]
    assert not llama.refused and not llama.invalid, (llama.refused, llama.invalid)
    assert len(sent) == 4
    items = [item for body in sent for item in body["input"]]
    assert all("type" in item for item in items)
    assert {item["type"] for item in items} == {"message", "function_call", "function_call_output"}


def test_the_send_after_a_stop_mid_reply_is_accepted() -> None:
    """A stop keeps the partial text and interrupted calls; the next send replays them."""
    llama = LlamaResponses(
        [{"text": "I will add these two numbers now, " * 5, "chunk_size": 4, "stall_after": 6}, "Fine."]
    )
    with ModelServer(default=llama) as server, _agent(server) as agent:
        done = threading.Event()
        errors: list[AgentError] = []

        def first() -> None:
            try:
                agent.send("What is 2 + 3?")
            except AgentError as error:
                errors.append(error)
            finally:
                done.set()

        thread = threading.Thread(target=first)
        thread.start()
        assert server.stalled.wait(30), "the reply never reached its stall"
        agent.stop()
        thread.join(30)
        assert done.is_set() and errors and errors[0].kind == "aborted"
        assert agent.history[-1]["role"] == "assistant"  # the partial reply was kept
        assert agent.send("Go on.").text == "Fine."
    assert not llama.refused and not llama.invalid, (llama.refused, llama.invalid)


def test_the_summary_request_is_accepted() -> None:
    llama = LlamaResponses(["4", "SUMMARY: the user asked for 2 + 2; the answer was 4."])
    with ModelServer(default=llama) as server, _agent(server) as agent:
        agent.send("What is 2 + 2?")
        assert agent.compact().startswith("SUMMARY")
    assert not llama.refused and not llama.invalid, (llama.refused, llama.invalid)


def test_the_check_refuses_what_llama_cpp_refuses() -> None:
    """Guards the port itself, with the shapes the issue reported."""
    with pytest.raises(Refused, match="Cannot determine type"):
        check_input([{"role": "assistant", "content": "an earlier reply"}])
    with pytest.raises(Refused, match="Cannot determine type"):
        check_input([{"call_id": "c1", "name": "add", "arguments": "{}"}])
    check_input(
        [
            {"role": "user", "content": "q"},
            {"type": "message", "role": "assistant", "content": "an earlier reply"},
            {"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "3"},
        ]
    )
