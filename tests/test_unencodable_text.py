"""Text that cannot be encoded (API.md §Details): a lone surrogate never breaks a conversation.

A str may hold U+D800–U+DFFF (`os.listdir()` of a file name that is not UTF-8, JSON's `"\\ud83d"`
half of an emoji); UTF-8 cannot encode it. Before: a tool returning `report-\\udcff.txt` was written
to history as is, and every later send failed with kind `unknown` (UnicodeEncodeError) — for good,
since history only grows. Now: in the input of send / steer / follow_up it is refused
(`request`, nothing written); on every other way into history — tool results and their streamed
output, model replies on all four protocols, streamed or not — it becomes U+FFFD with a WARNING
naming where; a loaded history that holds one is sent with U+FFFD and is not edited.
(MCP results: tests/test_mcp.py; stores: tests/store/test_store_unencodable.py; the example app:
tests/app/test_app_api.py.)
"""

from __future__ import annotations

import copy
import json
import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from agentcore import Agent, AgentError, tool, tools
from agentcore.protocols.base import make_result
from agentcore.testing import ModelServer
from agentcore.usage import Usage

PROTOCOLS = ["chat", "responses", "anthropic", "gemini"]
MODEL = "test-model"  # what conftest's make_agent names the model
FAST_RETRY = {"retry_base_delay": 0.01, "retry_max_delay": 0.05}
NAME = "report-\udcff.txt"  # what os.listdir() gives for b"report-\xff.txt"
FIXED = "report-\ufffd.txt"
HALF = "caf\ud83d"  # "\ud83d" in JSON: half of an emoji


def surrogate_free(value: Any) -> bool:
    """True when the value encodes as UTF-8, i.e. holds no lone surrogate anywhere."""
    try:
        json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "agentcore" and r.levelno == logging.WARNING]


@tool
def listing() -> str:
    """List the folder."""
    return NAME


@tool
def echo(text: str) -> str:
    """Say it back."""
    return text


@tool
def listing_json() -> dict[str, Any]:
    """List the folder as JSON."""
    return {"names": [NAME], NAME: "as a key"}


@tool
def listing_streamed():  # type: ignore[no-untyped-def]
    """List the folder, one name at a time."""
    yield "first\udcfe "
    yield NAME


# ---------------------------------------------------------------- input: refused, nothing written


BAD_INPUTS = [
    pytest.param(NAME, id="str"),
    pytest.param([{"type": "text", "text": "look: " + HALF}], id="text-part"),
    pytest.param(
        [
            {"type": "text", "text": "ok"},
            {"type": "file", "media_type": "text/plain", "data": "aGk=", "filename": NAME},
        ],
        id="filename",
    ),
]


@pytest.mark.parametrize("bad", BAD_INPUTS)
def test_send_input_with_a_lone_surrogate_is_a_request_error_and_writes_nothing(
    server: ModelServer, make_agent: Any, bad: Any
) -> None:
    history = [
        {"role": "user", "content": "earlier"},
        {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
    ]
    agent = make_agent(server, history=copy.deepcopy(history))
    with pytest.raises(AgentError) as caught:
        agent.send(bad)
    assert caught.value.kind == "request"
    assert "lone surrogate" in str(caught.value) and "U+D" in str(caught.value)
    assert agent.history == history
    assert server.requests == []
    with pytest.raises(AgentError) as streamed:
        agent.stream(bad)
    assert streamed.value.kind == "request" and agent.history == history


@pytest.mark.parametrize("bad", BAD_INPUTS)
def test_steer_and_follow_up_with_a_lone_surrogate_are_refused_and_queue_nothing(
    server: ModelServer, make_agent: Any, bad: Any
) -> None:
    agent = make_agent(server)
    for queue in (agent.steer, agent.follow_up):
        with pytest.raises(AgentError) as caught:
            queue(bad)
        assert caught.value.kind == "request" and "lone surrogate" in str(caught.value)
    with pytest.raises(AgentError):
        agent.steer({"role": "user", "content": "fine", "note": NAME})  # any key of a user entry
    assert agent.queued() == {"steer": [], "follow_up": []}
    assert agent.history == []


def test_the_error_names_where_the_surrogate_is(server: ModelServer, make_agent: Any) -> None:
    agent = make_agent(server)
    with pytest.raises(AgentError) as caught:
        agent.send([{"type": "text", "text": "fine"}, {"type": "text", "text": HALF}])
    assert "input part 1" in str(caught.value) and "U+D83D at character 3" in str(caught.value)


# ---------------------------------------------------------------- tool results and output


def _check_tool_round(
    agent: Agent, server: ModelServer, caplog: pytest.LogCaptureFixture, tool_name: str
) -> None:
    assert surrogate_free(agent.history), agent.history
    assert any(f"the result of tool {tool_name!r}" in w for w in warnings_of(caplog)), warnings_of(caplog)
    # The next send works, and the model was sent U+FFFD (the request encoded).
    assert agent.send("and now?").text == "later"
    assert FIXED in json.dumps(server.requests[-1], ensure_ascii=False)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_memory_tool_result_is_written_with_u_fffd_and_the_next_send_works(
    server: ModelServer, make_agent: Any, caplog: pytest.LogCaptureFixture, protocol: str
) -> None:
    server.add({"tool_calls": [{"name": "listing", "arguments": {}}]}, "done", "later")
    agent = make_agent(server, tools=[listing], protocol=protocol, no_tool_rounds=1)
    with caplog.at_level(logging.WARNING, "agentcore"):
        assert agent.send("list it").text == "done"
        result = agent.history[2]["content"][0]
        assert result["output"] == {"type": "text", "value": FIXED}
        _check_tool_round(agent, server, caplog, "listing")


def test_json_results_keys_included_and_streamed_output_are_cleaned(
    server: ModelServer, make_agent: Any, caplog: pytest.LogCaptureFixture
) -> None:
    server.add(
        {
            "tool_calls": [
                {"name": "listing_json", "arguments": {}},
                {"name": "listing_streamed", "arguments": {}},
            ]
        },
        "done",
        "later",
    )
    outputs: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    agent = make_agent(
        server,
        tools=[listing_json, listing_streamed],
        no_tool_rounds=1,
        callbacks={"on_tool_output": outputs.append, "on_tool_result": results.append},
    )
    agent.subscribe(events.append)
    with caplog.at_level(logging.WARNING, "agentcore"):
        agent.send("list it")
        as_json, streamed = (r["output"] for r in agent.history[2]["content"])
        assert as_json == {"type": "json", "value": {"names": [FIXED], FIXED: "as a key"}}
        assert streamed == {"type": "text", "value": "first\ufffd " + FIXED}
        assert [o["data"] for o in outputs] == ["first\ufffd ", FIXED]
        # What callbacks and listeners were given is clean too (a UI may encode it as UTF-8).
        assert surrogate_free(results) and surrogate_free(events)
        assert any("output streamed by tool 'listing_streamed'" in w for w in warnings_of(caplog))
        _check_tool_round(agent, server, caplog, "listing_json")


FILE_TOOL = '''
import os, sys
from agentcore import tool

@tool
def names() -> str:
    """The folder's names, as os.listdir() gives them."""
    print("printed", os.fsdecode(b"a-\\xff"), flush=True)
    return os.fsdecode(b"report-\\xff.txt")

@tool
def names_streamed():
    """One name at a time."""
    yield os.fsdecode(b"first-\\xfe ")
    yield os.fsdecode(b"report-\\xff.txt")
'''


def test_a_file_tool_result_and_its_output_are_written_with_u_fffd(
    server: ModelServer, make_agent: Any, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    (tmp_path / "names.py").write_text(FILE_TOOL)
    server.add(
        {"tool_calls": [{"name": "names", "arguments": {}}, {"name": "names_streamed", "arguments": {}}]},
        "done",
        "later",
    )
    outputs: list[dict[str, Any]] = []
    agent = make_agent(
        server, tools=tools.load(tmp_path), no_tool_rounds=1, callbacks={"on_tool_output": outputs.append}
    )
    with caplog.at_level(logging.WARNING, "agentcore"):
        agent.send("list it")
        names, streamed = (r["output"] for r in agent.history[2]["content"])
        assert names == {"type": "text", "value": FIXED}
        assert streamed == {"type": "text", "value": "first-\ufffd " + FIXED}
        assert surrogate_free(outputs) and "first-\ufffd " in [o["data"] for o in outputs]
        _check_tool_round(agent, server, caplog, "names")


def test_direct_execute_gives_the_result_the_loop_would_write() -> None:
    seen: list[dict[str, Any]] = []
    result = tools.execute("listing_streamed", {}, [listing_streamed], on_output=seen.append)
    assert result["output"] == {"type": "text", "value": "first\ufffd " + FIXED}
    assert surrogate_free(seen)


def test_a_hook_output_with_a_surrogate_is_cleaned_too(
    server: ModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.add({"tool_calls": [{"name": "listing", "arguments": {}}]}, "done")
    hooks = {"after_tool_call": lambda call, result: {"output": {"type": "text", "value": "hooked " + HALF}}}
    config = {"base_url": server.base_url, "model": MODEL, "no_tool_rounds": 1, **FAST_RETRY}
    with Agent(config=config, tools=[listing], hooks=hooks) as agent:
        agent.send("list it")
        assert agent.history[2]["content"][0]["output"] == {"type": "text", "value": "hooked caf\ufffd"}


# ---------------------------------------------------------------- model replies, every protocol


REPLY = {
    "text": "Here: " + HALF,
    "reasoning": "thinking \udcff",
    "tool_calls": [{"name": "echo", "arguments": {"text": "d\ud83d"}}],
}


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_reply_with_lone_surrogate_escapes_is_written_with_u_fffd(
    server: ModelServer, make_agent: Any, caplog: pytest.LogCaptureFixture, protocol: str, stream: bool
) -> None:
    """The server's JSON carries `"\\ud83d"` escapes (ModelServer escapes what UTF-8 cannot carry)."""
    server.add(REPLY, "after the tool", "later")
    llm_events: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    agent = make_agent(
        server,
        tools=[echo],
        protocol=protocol,
        stream=stream,
        no_tool_rounds=1,
        capabilities={"reasoning": True},
        callbacks={"on_llm_event": llm_events.append},
    )
    agent.subscribe(events.append)
    with caplog.at_level(logging.WARNING, "agentcore"):
        assert agent.send("go").text == "after the tool"
    reply = agent.history[1]
    assert surrogate_free(agent.history)
    parts = {p["type"]: p for p in reply["content"]}
    assert parts["text"]["text"] == "Here: caf\ufffd"
    assert parts["reasoning"]["text"] == "thinking \ufffd"
    assert parts["tool-call"]["input"] == {"text": "d\ufffd"}
    assert agent.history[2]["content"][0]["output"]["value"] == "d\ufffd"  # the tool got U+FFFD
    assert surrogate_free([e for e in llm_events if e["type"] != "finish"]) and surrogate_free(events)
    assert any(f"the reply of model {MODEL!r} ({protocol})" in w for w in warnings_of(caplog))
    assert agent.send("and?").text == "later"


class HalfAdapter:
    """A custom model adapter whose reply (and stream events) hold a lone surrogate."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def chat(self, request: dict[str, Any], *, cancel: Any, on_event: Any, timeout: Any) -> Any:
        self.requests.append(request)
        if on_event is not None:
            on_event({"type": "text-delta", "text": HALF})
        return make_result([{"type": "text", "text": HALF}], Usage(), "stop", raw=None)


def test_a_custom_adapters_reply_is_written_with_u_fffd(caplog: pytest.LogCaptureFixture) -> None:
    adapter = HalfAdapter()
    events: list[dict[str, Any]] = []
    history = [
        {"role": "user", "content": "before"},
        {"role": "assistant", "content": [{"type": "text", "text": NAME}]},
    ]
    with Agent(
        config={"model": adapter}, history=history, callbacks={"on_llm_event": events.append}
    ) as agent:
        with caplog.at_level(logging.WARNING, "agentcore"):
            assert agent.send("hi").text == "caf\ufffd"
        assert history[1]["content"][0]["text"] == NAME  # the loaded entry is not edited
        assert surrogate_free(agent.history[2:]) and surrogate_free(events)
        assert surrogate_free(adapter.requests)  # the adapter was sent U+FFFD
    assert any("a custom adapter" in w for w in warnings_of(caplog))


# ---------------------------------------------------------------- a loaded history that holds one


def poisoned_history() -> list[dict[str, Any]]:
    """What an older version (or a hand edit) left in a store: a lone surrogate in every role."""
    return [
        {"role": "user", "content": "list the folder " + HALF},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Listing \udcff"},
                {"type": "tool-call", "tool_call_id": "call_a", "tool_name": "listing", "input": {"d": NAME}},
            ],
        },
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool-result",
                    "tool_call_id": "call_a",
                    "tool_name": "listing",
                    "output": {"type": "text", "value": NAME},
                }
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Found " + NAME}]},
    ]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_loaded_history_with_a_surrogate_is_sent_with_u_fffd_and_not_edited(
    server: ModelServer, make_agent: Any, caplog: pytest.LogCaptureFixture, protocol: str, stream: bool
) -> None:
    history = poisoned_history()
    agent = make_agent(
        server, history=history, tools=[listing], protocol=protocol, stream=stream, no_tool_rounds=1
    )
    server.add("fine")
    with caplog.at_level(logging.WARNING, "agentcore"):
        result = agent.send("go on")
    assert result.text == "fine" and result.reason == "no-tool"
    assert agent.history[:4] == poisoned_history()  # not edited
    body = json.loads(server.log[-1].raw.decode("utf-8"))  # the body was valid UTF-8
    assert surrogate_free(body) and "Found " + FIXED in json.dumps(body, ensure_ascii=False)
    assert any(
        f"the request to model {MODEL!r} ({protocol})" in w and "history is not edited" in w
        for w in warnings_of(caplog)
    )


def test_compaction_of_a_poisoned_history_works(server: ModelServer, make_agent: Any) -> None:
    agent = make_agent(server, history=poisoned_history())
    server.add("Summary: listed " + HALF)
    summary = agent.compact()
    assert summary == "Summary: listed caf\ufffd"
    assert agent.history[-1] == {**agent.history[-1], "role": "compact", "content": summary}


def test_many_threads_sending_poisoned_histories_all_succeed(make_agent: Any) -> None:
    with ModelServer(default="ok") as server:
        _send_all_at_once(server, make_agent)


def _send_all_at_once(server: ModelServer, make_agent: Any) -> None:
    agents = [make_agent(server, history=poisoned_history()) for _ in range(8)]
    failures: list[BaseException] = []

    def send(agent: Agent) -> None:
        try:
            agent.send("again " + str(id(agent)))
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=send, args=(a,)) for a in agents]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert failures == []
