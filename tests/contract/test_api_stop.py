"""API.md §Agent `stop()`, `running`, `cancel` and "latest instruction wins"; Details §Cancellation.

Fixtures and the contract's conventions: tests/contract/conftest.py.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from api_helpers import _wait_for, add, call, make, tool_results
from background import returns_within as _returns

from agentcore import Agent, AgentError, SendResult, ToolContext
from agentcore.testing import ModelServer


def test_cancel_already_set_writes_nothing(srv: ModelServer, agents: list[Agent]) -> None:
    agent = make(agents, srv)
    event = threading.Event()
    event.set()
    with pytest.raises(AgentError) as info:
        agent.send("hi", cancel=event)
    assert info.value.kind == "aborted"
    assert agent.history == [] and srv.requests == []


def test_running_has_cancel_event_and_thread(srv: ModelServer, agents: list[Agent]) -> None:
    seen: dict[str, Any] = {}

    def on_start() -> None:
        running = agent.running
        seen["cancel"] = running.cancel if running else None
        seen["thread"] = running.thread if running else None
        seen["current"] = threading.current_thread()

    srv.add("ok")
    agent = make(agents, srv, callbacks={"on_start": on_start})
    agent.send("hi")
    assert isinstance(seen["cancel"], threading.Event)
    assert isinstance(seen["thread"], threading.Thread) and seen["thread"] is seen["current"]
    assert agent.running is None


def test_stop_idle_false_and_running_true(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"text": "slow", "delay": 60})  # stop() must not wait for this stall
    agent = make(agents, srv)
    assert agent.stop() is False
    errors: list[AgentError] = []

    def send() -> None:
        try:
            agent.send("hi")
        except AgentError as error:
            errors.append(error)

    thread = threading.Thread(target=send)
    thread.start()
    _wait_for(lambda: agent.running is not None and srv.requests)
    assert _returns(agent.stop) is True
    thread.join(30)
    assert not thread.is_alive()
    assert errors and errors[0].kind == "aborted"
    assert agent.running is None
    assert agent.history[0]["role"] == "user"  # written before the first request


def test_cancel_event_stops_the_send(srv: ModelServer, agents: list[Agent]) -> None:
    event = threading.Event()

    def arrived(recorded: Any) -> dict[str, Any]:
        event.set()  # the request is in and its reply held back: cancel now
        return {"text": "slow", "delay": 60}

    srv.add(arrived)
    agent = make(agents, srv)
    with pytest.raises(AgentError) as info:
        agent.send("hi", cancel=event)
    assert info.value.kind == "aborted"


def test_latest_instruction_wins(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"text": "slow", "delay": 60}, "second")  # the second send must not wait for this stall
    agent = make(agents, srv)
    errors: list[AgentError] = []

    def first() -> None:
        try:
            agent.send("first")
        except AgentError as error:
            errors.append(error)

    thread = threading.Thread(target=first)
    thread.start()
    _wait_for(lambda: len(srv.requests) == 1)
    assert _returns(lambda: agent.send("second")).text == "second"
    thread.join(30)
    assert not thread.is_alive()
    assert errors and errors[0].kind == "aborted"


def test_stop_inside_a_callback_only_sets_cancel(srv: ModelServer, agents: list[Agent]) -> None:
    returned: list[bool] = []

    def on_llm_finish(result: Any) -> None:
        returned.append(agent.stop())

    srv.add({"tool_calls": [call()]}, "never")
    agent = make(agents, srv, tools=[add], callbacks={"on_llm_finish": on_llm_finish})
    with pytest.raises(AgentError) as info:
        agent.send("go")
    assert returned == [True] and info.value.kind == "aborted"
    results = tool_results(agent.history)
    assert len(results) == 1  # every call gets exactly one result


def test_stop_with_a_blocked_memory_tool(srv: ModelServer, agents: list[Agent]) -> None:
    release = threading.Event()
    seen: list[ToolContext] = []
    tool_threads: list[threading.Thread] = []

    def block(input: dict[str, Any], ctx: ToolContext) -> str:
        seen.append(ctx)
        tool_threads.append(threading.current_thread())
        release.wait(60)
        return "late"

    srv.add({"tool_calls": [{"name": "block", "id": "b1", "arguments": {}}]}, "never")
    agent = make(agents, srv, tools=[{"name": "block", "execute": block}])
    errors: list[AgentError] = []

    def send() -> None:
        try:
            agent.send("go")
        except AgentError as error:
            errors.append(error)

    thread = threading.Thread(target=send)
    thread.start()
    try:
        _wait_for(lambda: bool(seen))
        assert _returns(agent.stop) is True
        assert not release.is_set()  # stop() did not wait for the tool's thread
        thread.join(30)
        assert not thread.is_alive()
        assert errors[0].kind == "aborted"
        assert seen[0].cancel.is_set()
        result = tool_results(agent.history)[0]
        # API.md §Details "Stored results say what happened": the part says it was interrupted.
        assert set(result) == {"type", "tool_call_id", "tool_name", "output", "interrupted"}
        assert result["interrupted"] is True
        assert result["output"]["type"] == "error-text" and "interrupt" in result["output"]["value"].lower()
    finally:
        release.set()
    tool_threads[0].join(30)  # the tool has returned its late value
    assert not tool_threads[0].is_alive()
    assert len(tool_results(agent.history)) == 1  # the late return value is dropped


def test_keyboard_interrupt_closes_history_and_reraises(srv: ModelServer, agents: list[Agent]) -> None:
    import os
    import signal

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("not applicable: signals reach the main thread only")
    release = threading.Event()
    started = threading.Event()

    def block(input: dict[str, Any]) -> str:
        started.set()
        release.wait(60)
        return "late"

    srv.add({"tool_calls": [{"name": "block", "id": "k1", "arguments": {}}]}, "never")
    agent = make(agents, srv, tools=[{"name": "block", "execute": block}])

    def interrupt() -> None:
        if started.wait(30):
            os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    killer = threading.Thread(target=interrupt)
    killer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            agent.send("go")
    finally:
        killer.join()
        release.set()
        signal.signal(signal.SIGINT, previous)
    assert agent.running is None
    assert tool_results(agent.history)[0]["output"]["type"] == "error-text"


def test_superseded_send_applies_nothing(srv: ModelServer, agents: list[Agent]) -> None:
    """Until A's run was held inside its callback, B's cancel could cut A's request and end A
    early, and B then wrote its input before C superseded it (a scheduling-dependent failure)."""
    release, held = threading.Event(), threading.Event()

    def held_finish(result: Any) -> None:
        held.set()
        release.wait(60)  # A's run cannot end before the test has started B and C

    srv.add("A", "C")
    agent = make(agents, srv, callbacks={"on_llm_finish": held_finish})
    outcomes: dict[str, Any] = {}

    def send(name: str, **kwargs: Any) -> None:
        try:
            outcomes[name] = agent.send(name, **kwargs)
        except AgentError as error:
            outcomes[name] = error

    a = threading.Thread(target=send, args=("A",))
    a.start()
    _wait_for(held.is_set, timeout=30)
    running_a = agent.running
    b = threading.Thread(target=send, args=("B",), kwargs={"config": {"system": "from B"}})
    b.start()
    # B has taken over `agent.running` and waits for A to end; then C supersedes B.
    _wait_for(lambda: agent.running is not running_a, timeout=30)
    running_b = agent.running
    c = threading.Thread(target=send, args=("C",))
    c.start()
    _wait_for(lambda: agent.running is not running_b, timeout=30)
    release.set()
    for thread in (a, b, c):
        thread.join(30)
    assert isinstance(outcomes["B"], AgentError) and outcomes["B"].kind == "aborted"
    assert "B" not in [m["content"] for m in agent.history if m["role"] == "user"]
    assert agent.config["system"] == ""
    assert isinstance(outcomes["C"], SendResult)


def test_cancel_set_leaves_a_running_send_alone(srv: ModelServer, agents: list[Agent]) -> None:
    release = threading.Event()

    def held(recorded: Any) -> str:
        release.wait(60)  # the first send is still running while the second one is refused
        return "finished anyway"

    srv.add(held)
    agent = make(agents, srv)
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(agent.send("first")))
    thread.start()
    _wait_for(lambda: len(srv.requests) == 1)
    event = threading.Event()
    event.set()
    try:
        with pytest.raises(AgentError) as info:
            agent.send("second", cancel=event)
        assert info.value.kind == "aborted"
    finally:
        release.set()
    thread.join(30)
    assert outcome and outcome[0].text == "finished anyway"


def test_setting_running_cancel_stops_the_run(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"text": "slow", "delay": 60})  # the send must not wait for this stall
    agent = make(agents, srv)

    def cancel_later() -> None:
        _wait_for(lambda: agent.running is not None and srv.requests)
        running = agent.running
        if running is not None:
            running.cancel.set()

    threading.Thread(target=cancel_later).start()
    with pytest.raises(AgentError) as info:
        _returns(lambda: agent.send("hi"))
    assert info.value.kind == "aborted"


def test_stop_from_a_memory_tool(srv: ModelServer, agents: list[Agent]) -> None:
    returned: list[bool] = []
    release = threading.Event()

    def quit_now(input: dict[str, Any], ctx: ToolContext) -> str:
        returned.append(agent.stop())
        release.wait(60)  # the send must not wait for the tool that stopped it
        return "stopped"

    srv.add({"tool_calls": [{"name": "quit", "id": "q1", "arguments": {}}]}, "never")
    agent = make(agents, srv, tools=[{"name": "quit", "execute": quit_now}])
    try:
        with pytest.raises(AgentError) as info:
            _returns(lambda: agent.send("go"))
        assert not release.is_set()
        assert info.value.kind == "aborted" and returned == [True]
    finally:
        release.set()


def test_compact_stops_the_running_send(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"text": "slow", "delay": 60}, "SUMMARY")  # compact() must not wait for this stall
    agent = make(agents, srv)
    errors: list[AgentError] = []

    def send() -> None:
        try:
            agent.send("long task")
        except AgentError as error:
            errors.append(error)

    thread = threading.Thread(target=send)
    thread.start()
    _wait_for(lambda: len(srv.requests) == 1)
    assert _returns(agent.compact) == "SUMMARY"
    thread.join(30)
    assert not thread.is_alive()
    assert errors and errors[0].kind == "aborted"
    assert agent.history[-1] == {**agent.history[-1], "role": "compact", "content": "SUMMARY"}
