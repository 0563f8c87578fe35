"""API.md §Callbacks and Details §Callbacks: order, threads, payloads, permission.

Fixtures and the contract's conventions: tests/contract/conftest.py.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from api_helpers import add, call, make, tool_results

from agentcore import Agent, AgentError, tool
from agentcore.testing import ModelServer


def test_callback_order_and_payloads(srv: ModelServer, agents: list[Agent]) -> None:
    log: list[tuple[str, Any]] = []
    lock = threading.Lock()

    def rec(name: str) -> Any:
        def callback(*args: Any) -> Any:
            with lock:
                log.append((name, args[0] if args else None))
            return True

        return callback

    names = [
        "on_start",
        "on_llm_start",
        "on_llm_event",
        "on_llm_finish",
        "on_tool_call",
        "on_permission",
        "on_tool_output",
        "on_tool_result",
        "on_step",
    ]

    @tool
    def talk(n: int) -> Iterator[str]:
        """Talk."""
        yield "x" * n

    srv.add({"tool_calls": [{"name": "talk", "id": "t1", "arguments": {"n": 2}}]}, "done")
    agent = make(agents, srv, tools=[talk], no_tool_rounds=1, callbacks={n: rec(n) for n in names})
    agent.send("go")
    order = [name for name, _ in log if name != "on_llm_event"]
    assert order[:9] == [
        "on_start",
        "on_llm_start",
        "on_llm_finish",
        "on_tool_call",
        "on_permission",
        "on_tool_output",
        "on_tool_result",
        "on_step",
        "on_llm_start",
    ]
    payload = {}
    for name, value in log:
        payload.setdefault(name, value)  # the first of each
    assert {"messages", "tools"} <= set(payload["on_llm_start"])
    assert payload["on_tool_call"] == {"tool_call_id": "t1", "tool_name": "talk", "input": {"n": 2}}
    permission = payload["on_permission"]
    assert {"tool_name", "input", "tool_call_id", "cancel"} <= set(permission)
    assert isinstance(permission["cancel"], threading.Event)
    assert payload["on_tool_output"] == {
        "tool_call_id": "t1",
        "tool_name": "talk",
        "stream": "yield",
        "data": "xx",
    }
    result = payload["on_tool_result"]
    assert result["output"] == {"type": "text", "value": "xx"}
    assert (result["tool_call_id"], result["tool_name"], result["input"]) == ("t1", "talk", {"n": 2})
    step = payload["on_step"]
    assert set(step) == {"step", "result", "tool_calls", "tool_results"}
    assert step["step"] == 1 and step["result"].tool_calls[0].name == "talk"
    assert step["tool_results"] == [result]
    assert step["tool_calls"][0]["name"] == "talk"
    steps = [p["step"] for n, p in log if n == "on_step"]
    assert steps == [1, 2]
    events = [p["type"] for n, p in log if n == "on_llm_event"]
    assert {"tool-call", "text-delta", "finish"} <= set(events)
    text_events = [p for n, p in log if n == "on_llm_event" and p["type"] == "text-delta"]
    assert "".join(e["text"] for e in text_events) == "done"


def test_permission_must_be_exactly_true(srv: ModelServer, agents: list[Agent]) -> None:
    results: list[dict[str, Any]] = []
    srv.add({"tool_calls": [call()]}, "ok")
    agent = make(
        agents,
        srv,
        tools=[add],
        no_tool_rounds=1,
        callbacks={"on_permission": lambda p: 1, "on_tool_result": results.append},
    )
    agent.send("go")
    assert tool_results(agent.history)[0]["output"]["type"] == "execution-denied"
    assert results[0]["output"]["type"] == "execution-denied" and results[0]["tool_call_id"] == "c1"


def test_permission_raising_fails_the_send(srv: ModelServer, agents: list[Agent]) -> None:
    class Mine(Exception):
        pass

    def deny(payload: Any) -> bool:
        raise Mine("no")

    srv.add({"tool_calls": [call()]}, "never")
    agent = make(agents, srv, tools=[add], callbacks={"on_permission": deny})
    with pytest.raises(AgentError) as info:
        agent.send("go")
    assert info.value.kind == "tool" and isinstance(info.value.__cause__, Mine)
    result = tool_results(agent.history)[0]
    assert result["output"]["type"] == "error-text"


def test_cancelled_while_permission_waits_is_interrupted(srv: ModelServer, agents: list[Agent]) -> None:
    def ask(payload: dict[str, Any]) -> bool:
        agent.stop()
        return False

    srv.add({"tool_calls": [call()]}, "never")
    agent = make(agents, srv, tools=[add], callbacks={"on_permission": ask})
    with pytest.raises(AgentError) as info:
        agent.send("go")
    assert info.value.kind == "aborted"
    result = tool_results(agent.history)[0]
    assert result["output"]["type"] == "error-text" and "interrupt" in result["output"]["value"].lower()


def test_notification_errors_swallowed_and_logged(
    srv: ModelServer, agents: list[Agent], caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: Any) -> None:
        raise RuntimeError("callback bug")

    srv.add("fine")
    agent = make(agents, srv, callbacks={"on_start": broken, "on_llm_finish": broken, "on_step": broken})
    with caplog.at_level(logging.WARNING, logger="agentcore"):
        assert agent.send("hi").text == "fine"
    records = [r for r in caplog.records if r.name == "agentcore" and r.levelno == logging.WARNING]
    assert records and all(r.exc_info for r in records)


def test_on_tool_result_for_invalid_calls(srv: ModelServer, agents: list[Agent]) -> None:
    results: list[dict[str, Any]] = []
    srv.add({"tool_calls": [{"name": "ghost", "id": "g1", "arguments": {"x": 1}}]}, "ok")
    agent = make(agents, srv, tools=[add], no_tool_rounds=1, callbacks={"on_tool_result": results.append})
    agent.send("q")
    assert len(results) == 1 and results[0]["tool_call_id"] == "g1" and results[0]["tool_name"] == "ghost"
    assert results[0]["input"] == {"x": 1} and results[0]["output"]["type"] == "error-text"


def test_on_step_runs_after_history_is_written(srv: ModelServer, agents: list[Agent]) -> None:
    seen: list[list[str]] = []
    srv.add({"tool_calls": [call()]}, "done")
    agent = make(
        agents,
        srv,
        tools=[add],
        no_tool_rounds=1,
        callbacks={"on_step": lambda p: seen.append([m["role"] for m in agent.history])},
    )
    agent.send("go")
    assert seen == [["user", "assistant", "tool"], ["user", "assistant", "tool", "assistant"]]


def test_cancelled_calls_reach_on_tool_result(srv: ModelServer, agents: list[Agent]) -> None:
    release = threading.Event()
    results: list[dict[str, Any]] = []

    entered = threading.Event()

    def block(input: dict[str, Any]) -> str:
        entered.set()
        release.wait(30)
        return "late"

    srv.add({"tool_calls": [{"name": "block", "id": "b1", "arguments": {}}]})
    agent = make(
        agents, srv, tools=[{"name": "block", "execute": block}], callbacks={"on_tool_result": results.append}
    )
    threading.Thread(target=lambda: entered.wait(30) and agent.stop()).start()  # stop mid-call
    try:
        with pytest.raises(AgentError):
            agent.send("go")
    finally:
        release.set()
    assert len(results) == 1 and results[0]["interrupted"] is True and results[0]["tool_call_id"] == "b1"
    assert results[0]["input"] == {} and results[0]["tool_name"] == "block"


def test_per_call_callbacks_run_on_tool_threads(srv: ModelServer, agents: list[Agent]) -> None:
    threads: dict[str, threading.Thread] = {}
    nested: list[BaseException] = []

    def on_start() -> None:
        threads["run"] = threading.current_thread()

    def on_tool_call(payload: dict[str, Any]) -> None:
        threads["call"] = threading.current_thread()
        try:
            agent.send("nested from a tool thread")
        except BaseException as exc:
            nested.append(exc)

    srv.add({"tool_calls": [call()]}, "ok")
    agent = make(
        agents,
        srv,
        tools=[add],
        no_tool_rounds=1,
        callbacks={"on_start": on_start, "on_tool_call": on_tool_call},
    )
    agent.send("go")
    assert threads["call"] is not threads["run"]
    assert isinstance(nested[0], AgentError) and nested[0].kind == "request"


def test_per_call_callbacks_run_concurrently(srv: ModelServer, agents: list[Agent]) -> None:
    second_seen = threading.Event()
    waited: list[bool] = []

    def on_tool_call(payload: dict[str, Any]) -> None:
        if payload["tool_call_id"] == "c1":
            waited.append(second_seen.wait(30))  # only returns early if c2's callback runs meanwhile
        else:
            second_seen.set()

    srv.add({"tool_calls": [call(), call(id="c2")]}, "ok")
    agent = make(agents, srv, tools=[add], no_tool_rounds=1, callbacks={"on_tool_call": on_tool_call})
    agent.send("go")
    assert waited == [True]
