"""Callbacks and permission, end to end: order, threads, payloads, isolation of failures."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentcore import Agent, AgentError, ToolContext, Usage, tool
from agentcore.llm import LLMResult
from agentcore.testing import ModelServer

pytestmark = pytest.mark.usefixtures("no_thread_leak")
MakeAgent = Callable[..., Agent]

NOTIFICATIONS = (
    "on_start",
    "on_llm_start",
    "on_llm_event",
    "on_llm_finish",
    "on_tool_call",
    "on_tool_output",
    "on_tool_result",
    "on_step",
    "on_retry",
    "on_compact",
)


@tool
def count_to(n: int) -> Iterator[str]:
    """Count aloud, streaming each number."""
    for i in range(1, n + 1):
        yield f"{i} "


def add_call(a: int = 1, b: int = 2, id: str = "c1") -> dict[str, Any]:
    return {"name": "add", "arguments": {"a": a, "b": b}, "id": id}


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Recorder:
    """Callbacks that record (name, payload) in arrival order."""

    def __init__(self, *, permission: Any = True) -> None:
        self.events: list[tuple[str, Any]] = []
        self._lock = threading.Lock()
        self.permission = permission

    def callbacks(self) -> dict[str, Any]:
        recorded = {name: self._recorder(name) for name in NOTIFICATIONS}
        return {**recorded, "on_permission": self._on_permission}

    def _recorder(self, name: str) -> Any:
        def record(payload: Any = None) -> None:
            with self._lock:
                self.events.append((name, payload))

        return record

    def _on_permission(self, payload: dict[str, Any]) -> Any:
        with self._lock:
            self.events.append(("on_permission", payload))
        return self.permission

    def names(self) -> list[str]:
        """Event names with runs of stream events / tool outputs collapsed to one."""
        names: list[str] = []
        for name, _ in self.events:
            if name in ("on_llm_event", "on_tool_output", "on_compact") and names and names[-1] == name:
                continue
            names.append(name)
        return names

    def payloads(self, name: str) -> list[Any]:
        return [payload for event, payload in self.events if event == name]


# ---------------------------------------------------------------- order


def test_callbacks_fire_in_the_documented_order(server: ModelServer, make_agent: MakeAgent) -> None:
    recorder = Recorder()
    server.add({"tool_calls": [{"name": "count_to", "arguments": {"n": 2}}]}, "done")
    make_agent(server, tools=[count_to], callbacks=recorder.callbacks(), no_tool_rounds=1).send("hi")
    assert recorder.names() == [
        "on_start",
        "on_llm_start",
        "on_llm_event",
        "on_llm_finish",
        "on_tool_call",
        "on_permission",
        "on_tool_output",
        "on_tool_result",
        "on_step",
        "on_llm_start",
        "on_llm_event",
        "on_llm_finish",
        "on_step",
    ]


def test_on_llm_start_fires_per_http_attempt_and_on_retry_between_them(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    recorder = Recorder()
    server.add({"status": 500, "error": "busy"}, "ok")
    result = make_agent(server, callbacks=recorder.callbacks()).send("hi")
    assert recorder.names() == [
        "on_start",
        "on_llm_start",
        "on_retry",
        "on_llm_start",
        "on_llm_event",
        "on_llm_finish",
        "on_step",
    ]
    assert result.steps == 1


def test_compaction_events_come_before_the_rounds_request(server: ModelServer, make_agent: MakeAgent) -> None:
    recorder = Recorder()
    server.add("Summary: the user said a lot.", "answer")
    agent = make_agent(server, callbacks=recorder.callbacks(), max_context_tokens=200)
    result = agent.send("word " * 400)
    names = recorder.names()
    assert names[:3] == ["on_start", "on_compact", "on_llm_start"]
    compact_events = recorder.payloads("on_compact")
    assert compact_events[0]["type"] == "compact-start" and compact_events[-1]["type"] == "compact-finish"
    assert all(e["request"] == "compact" for e in compact_events[1:-1])
    assert {e["type"] for e in compact_events[1:-1]} >= {"text-delta"}
    assert all("request" not in e for e in recorder.payloads("on_llm_event"))
    assert [m["role"] for m in result.messages] == ["user", "compact", "assistant"]
    assert result.steps == 1


def test_on_step_fires_after_history_is_written(server: ModelServer, make_agent: MakeAgent) -> None:
    seen: list[list[str]] = []
    agent: Any = None

    def on_step(payload: dict[str, Any]) -> None:
        seen.append([m["role"] for m in agent.history])

    server.add({"tool_calls": [add_call()]}, "done")
    agent = make_agent(server, tools=[add], callbacks={"on_step": on_step}, no_tool_rounds=1)
    agent.send("hi")
    assert seen == [["user", "assistant", "tool"], ["user", "assistant", "tool", "assistant"]]


# ---------------------------------------------------------------- payloads


def test_round_callbacks_get_the_documented_payloads(server: ModelServer, make_agent: MakeAgent) -> None:
    recorder = Recorder()
    server.add({"text": "Adding.", "tool_calls": [add_call(2, 3)]}, "5")
    make_agent(server, tools=[add], callbacks=recorder.callbacks(), no_tool_rounds=1).send("hi")
    start = recorder.payloads("on_llm_start")[0]
    assert start["messages"] == [{"role": "user", "content": "hi"}]
    assert [t["name"] for t in start["tools"]] == ["add"]
    finish = recorder.payloads("on_llm_finish")[0]
    assert isinstance(finish, LLMResult) and finish.text == "Adding."
    event_types = {e["type"] for e in recorder.payloads("on_llm_event")}
    assert {"text-delta", "tool-call-delta", "tool-call", "finish"} <= event_types
    text = "".join(e["text"] for e in recorder.payloads("on_llm_event") if e["type"] == "text-delta")
    assert text == "Adding." + "5"  # both rounds


def test_per_call_callbacks_get_the_documented_payloads(server: ModelServer, make_agent: MakeAgent) -> None:
    recorder = Recorder()
    server.add({"tool_calls": [{"name": "count_to", "arguments": {"n": 2}, "id": "c1"}]}, "done")
    make_agent(server, tools=[count_to], callbacks=recorder.callbacks(), no_tool_rounds=1).send("hi")
    (tool_call,) = recorder.payloads("on_tool_call")
    assert tool_call == {"tool_call_id": "c1", "tool_name": "count_to", "input": {"n": 2}}
    (permission,) = recorder.payloads("on_permission")
    assert set(permission) == {"tool_name", "input", "tool_call_id", "cancel"}
    assert (permission["tool_name"], permission["input"], permission["tool_call_id"]) == (
        "count_to",
        {"n": 2},
        "c1",
    )
    assert isinstance(permission["cancel"], threading.Event)
    assert recorder.payloads("on_tool_output") == [
        {"tool_call_id": "c1", "tool_name": "count_to", "stream": "yield", "data": "1 "},
        {"tool_call_id": "c1", "tool_name": "count_to", "stream": "yield", "data": "2 "},
    ]
    (result,) = recorder.payloads("on_tool_result")
    assert result == {
        "output": {"type": "text", "value": "1 2 "},
        "tool_call_id": "c1",
        "tool_name": "count_to",
        "input": {"n": 2},
    }


def test_on_step_payload_has_step_result_calls_and_the_same_results(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    recorder = Recorder()
    server.add({"tool_calls": [add_call(1, 1, "c1"), add_call(2, 2, "c2")]}, "done")
    make_agent(server, tools=[add], callbacks=recorder.callbacks(), no_tool_rounds=1).send("hi")
    first, second = recorder.payloads("on_step")
    assert (first["step"], second["step"]) == (1, 2)
    assert isinstance(first["result"], LLMResult)
    assert [c["id"] for c in first["tool_calls"]] == ["c1", "c2"]
    by_id = {r["tool_call_id"]: r for r in recorder.payloads("on_tool_result")}
    assert first["tool_results"] == [by_id["c1"], by_id["c2"]]
    assert (second["tool_calls"], second["tool_results"]) == ([], [])


def test_on_retry_payload_has_attempt_error_and_delay(server: ModelServer, make_agent: MakeAgent) -> None:
    retries: list[dict[str, Any]] = []
    server.add({"status": 500, "error": "busy"}, {"status": 503, "error": "still busy"}, "ok")
    agent = make_agent(
        server, callbacks={"on_retry": retries.append}, retry_base_delay=0.01, retry_max_delay=1.0
    )
    agent.send("hi")
    assert [r["attempt"] for r in retries] == [1, 2]
    assert [r["delay"] for r in retries] == pytest.approx([0.01, 0.02])
    assert all(isinstance(r["error"], AgentError) and r["error"].kind == "server" for r in retries)
    assert [r["error"].status for r in retries] == [500, 503]


def test_per_call_callbacks_run_concurrently_on_tool_threads(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    barrier = threading.Barrier(2, timeout=5)
    threads: set[int] = set()

    def on_tool_call(payload: dict[str, Any]) -> None:
        threads.add(threading.get_ident())
        barrier.wait()

    server.add({"tool_calls": [add_call(id="c1"), add_call(id="c2")]}, "done")
    agent = make_agent(server, tools=[add], callbacks={"on_tool_call": on_tool_call}, no_tool_rounds=1)
    agent.send("hi")
    assert len(threads) == 2 and threading.get_ident() not in threads
    assert all(r["output"]["type"] == "json" for r in agent.history[2]["content"])


# ---------------------------------------------------------------- isolation


@pytest.mark.parametrize("name", NOTIFICATIONS)
def test_a_failing_notification_callback_is_logged_and_swallowed(
    server: ModelServer, make_agent: MakeAgent, caplog: pytest.LogCaptureFixture, name: Any
) -> None:
    def broken(*args: Any) -> None:
        raise RuntimeError(f"{name} is broken")

    server.add(
        {"status": 500, "error": "busy"},
        {"tool_calls": [{"name": "count_to", "arguments": {"n": 2}}]},
        "done",
    )
    agent = make_agent(server, tools=[count_to], callbacks={name: broken}, no_tool_rounds=1)
    if name == "on_compact":
        server.add("the summary")
    with caplog.at_level(logging.WARNING, logger="agentcore"):
        result = agent.send("hi")
        if name == "on_compact":
            assert agent.compact() == "the summary"
    assert (result.reason, result.text) == ("no-tool", "done")
    assert agent.history[2]["content"][0]["output"] == {"type": "text", "value": "1 2 "}
    failures = [r for r in caplog.records if r.exc_info and f"{name} is broken" in str(r.exc_info[1])]
    assert failures and all(r.name == "agentcore" and r.levelno == logging.WARNING for r in failures)


# ---------------------------------------------------------------- permission


def test_allowed_call_runs_when_on_permission_returns_true(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add({"tool_calls": [add_call(2, 3)]}, "done")
    agent = make_agent(server, tools=[add], callbacks={"on_permission": lambda p: True}, no_tool_rounds=1)
    agent.send("hi")
    assert agent.history[2]["content"][0]["output"] == {"type": "json", "value": 5}


@pytest.mark.parametrize("answer", [False, None, 1, "yes", [True], {"allow": True}])
def test_only_exactly_true_allows_a_call(server: ModelServer, make_agent: MakeAgent, answer: Any) -> None:
    ran: list[int] = []

    @tool
    def guarded(x: int) -> int:
        """Guarded."""
        ran.append(x)
        return x

    results: list[dict[str, Any]] = []
    server.add({"tool_calls": [{"name": "guarded", "arguments": {"x": 1}}]}, "done")
    callbacks = {"on_permission": lambda p: answer, "on_tool_result": results.append}
    agent = make_agent(server, tools=[guarded], callbacks=callbacks, no_tool_rounds=1)
    agent.send("hi")
    assert ran == []
    assert agent.history[2]["content"][0]["output"]["type"] == "execution-denied"
    assert [r["output"]["type"] for r in results] == ["execution-denied"]


def test_on_permission_raising_fails_the_send_with_kind_tool_and_answers_the_call(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    class Refused(Exception):
        pass

    def on_permission(payload: dict[str, Any]) -> bool:
        raise Refused("policy service down")

    server.add({"tool_calls": [add_call(id="c1")]}, "never asked")
    agent = make_agent(server, tools=[add], callbacks={"on_permission": on_permission})
    with pytest.raises(AgentError) as caught:
        agent.send("hi")
    assert caught.value.kind == "tool"
    assert isinstance(caught.value.__cause__, Refused)
    assert len(server.requests) == 1
    (result,) = agent.history[2]["content"]
    assert result["tool_call_id"] == "c1" and result["output"]["type"] == "error-text"
    assert "policy service down" in result["output"]["value"]
    assert agent.running is None


def test_a_call_cancelled_while_on_permission_waits_is_interrupted_not_denied(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    asked = threading.Event()
    agent: Any = None

    def on_permission(payload: dict[str, Any]) -> bool:
        asked.set()
        payload["cancel"].wait(5)
        return False

    server.add({"tool_calls": [add_call(id="c1")]})
    agent = make_agent(server, tools=[add], callbacks={"on_permission": on_permission})
    stopper = threading.Thread(target=lambda: asked.wait(5) and agent.stop())
    stopper.start()
    with pytest.raises(AgentError) as caught:
        agent.send("hi")
    stopper.join()
    assert caught.value.kind == "aborted"
    (result,) = agent.history[2]["content"]
    assert result["output"]["type"] == "error-text" and "interrupted" in result["output"]["value"]


def test_denied_invalid_and_interrupted_calls_all_fire_on_tool_result(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    results: list[dict[str, Any]] = []

    @tool
    def hang(ctx: ToolContext) -> str:
        """Wait until cancelled."""
        ctx.cancel.wait(30)
        return "late"

    agent: Any = None
    others_answered = threading.Event()

    def on_permission(payload: dict[str, Any]) -> bool:
        return bool(payload["tool_name"] != "add")

    def on_tool_result(payload: dict[str, Any]) -> None:
        results.append(payload)
        if {"denied", "invalid"} <= {r["tool_call_id"] for r in results}:
            others_answered.set()  # only hang is left: stop it

    def on_tool_call(payload: dict[str, Any]) -> None:
        if payload["tool_name"] == "hang":
            threading.Thread(target=lambda: others_answered.wait(30) and agent.stop()).start()

    calls = [add_call(id="denied"), {"name": "nope", "id": "invalid"}, {"name": "hang", "id": "interrupted"}]
    server.add({"tool_calls": calls})
    callbacks = {
        "on_permission": on_permission,
        "on_tool_result": on_tool_result,
        "on_tool_call": on_tool_call,
    }
    agent = make_agent(server, tools=[add, hang], callbacks=callbacks)
    with pytest.raises(AgentError):
        agent.send("hi")
    by_id = {r["tool_call_id"]: r for r in results}
    assert sorted(by_id) == ["denied", "interrupted", "invalid"]
    assert by_id["denied"]["output"]["type"] == "execution-denied"
    assert by_id["invalid"]["output"]["type"] == "error-text"
    assert by_id["interrupted"].get("interrupted") is True


def test_usage_of_compaction_is_counted_in_the_send(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add(
        {"text": "Summary.", "usage": {"input_tokens": 100, "output_tokens": 10}},
        {"text": "answer", "usage": {"input_tokens": 7, "output_tokens": 3}},
    )
    result = make_agent(server, max_context_tokens=200).send("word " * 400)
    assert result.usage == Usage(input_tokens=107, output_tokens=13, total_tokens=120)
