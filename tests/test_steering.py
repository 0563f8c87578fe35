"""Steering and follow-up (API.md §Steering and follow-up): delivery points, modes, nothing lost."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from event_checks import check_order, collect

from agentcore import Agent, AgentError, ToolContext
from agentcore.testing import ModelServer

MakeAgent = Callable[..., Agent]
Event = dict[str, Any]


def gated_tool(gate: threading.Event, started: threading.Event | None = None) -> dict[str, Any]:
    def work(input: dict[str, Any], ctx: ToolContext) -> str:
        if started is not None:
            started.set()
        assert gate.wait(30)
        return "worked"

    return {"name": "work", "description": "Work.", "input_schema": {"type": "object"}, "execute": work}


def call_work() -> dict[str, Any]:
    return {"tool_calls": [{"name": "work", "arguments": {}}]}


def user_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "user" and isinstance(m["content"], str)]


def wire_users(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], str)]


# ---------------------------------------------------------------- the main case


def test_a_steer_from_another_thread_while_tools_run_is_delivered_after_the_tool_message(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    gate, started = threading.Event(), threading.Event()
    server.add(call_work(), "Understood, only the bug.")
    agent = make_agent(server, tools=[gated_tool(gate, started)], no_tool_rounds=1)
    run = agent.stream("Refactor everything")
    assert started.wait(30)
    steering = threading.Thread(target=agent.steer, args=("Stop refactoring; only fix the bug.",))
    steering.start()
    steering.join()
    assert agent.queued()["steer"][0]["content"] == "Stop refactoring; only fix the bug."
    gate.set()
    events = collect(run)
    roles = [m["role"] for m in agent.history]
    assert roles == ["user", "assistant", "tool", "user", "assistant"]
    assert agent.history[2]["content"][0]["output"]["value"] == "worked"  # the tool was not interrupted
    assert agent.history[3]["content"] == "Stop refactoring; only fix the bug."
    assert wire_users(server.requests[1])[-1] == "Stop refactoring; only fix the bug."
    assert agent.history[3] in run.result.messages
    assert agent.queued() == {"steer": [], "follow_up": []}
    # Announced between the rounds: after turn_end of round 1, before turn_start of round 2.
    kinds = [e["type"] for e in events]
    first_end = kinds.index("turn_end")
    assert kinds[first_end + 1 : first_end + 4] == ["message_start", "message_end", "turn_start"]
    assert events[first_end + 2]["message"] is agent.history[3]


def test_steering_mode_one_at_a_time_and_all(server: ModelServer, make_agent: MakeAgent) -> None:
    for mode, expected_rounds in (("one-at-a-time", [["s1"], ["s2"]]), ("all", [["s1", "s2"]])):
        gate, started = threading.Event(), threading.Event()
        with ModelServer([call_work(), call_work(), "done", "done"]) as srv:
            agent = make_agent(srv, tools=[gated_tool(gate, started)], no_tool_rounds=1, steering_mode=mode)
            run = agent.stream("go")
            assert started.wait(30)
            agent.steer("s1")
            agent.steer("s2")
            gate.set()
            run.wait(30)
            delivered: list[list[str]] = []
            seen: set[str] = set()
            for body in srv.requests[1:]:
                new = [t for t in wire_users(body) if t in ("s1", "s2") and t not in seen]
                seen.update(new)
                if new:
                    delivered.append(new)
            assert delivered == expected_rounds, mode


# ---------------------------------------------------------------- the other moments of queueing


def test_a_steer_queued_while_idle_is_delivered_after_the_next_input(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add("ok")
    agent = make_agent(server)
    agent.steer("Keep it short.")
    agent.steer("And polite.")
    events = collect(agent.stream("Tell me a story"))
    assert user_texts(agent.history) == ["Tell me a story", "Keep it short.", "And polite."]
    assert wire_users(server.requests[0]) == ["Tell me a story", "Keep it short.", "And polite."]
    announced = [
        e["message"]["content"]
        for e in events
        if e["type"] == "message_end" and e["message"]["role"] == "user"
    ]
    assert announced == ["Tell me a story", "Keep it short.", "And polite."]
    assert [e["type"] for e in events[:3]] == ["agent_start", "turn_start", "message_start"]


def test_a_steer_queued_during_a_retry_wait_is_delivered(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add({"status": 500, "error": "busy"}, "first answer", "answer to the steer")
    box: list[Agent] = []
    agent = make_agent(server, callbacks={"on_retry": lambda payload: box[0].steer("Also mention cats.")})
    box.append(agent)
    result = agent.send("Hello")
    assert user_texts(agent.history) == ["Hello", "Also mention cats."]
    assert wire_users(server.requests[2])[-1] == "Also mention cats."
    assert result.text == "answer to the steer"
    assert result.steps == 2


def test_a_steer_queued_just_as_the_run_ends_waits_for_the_next_run(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add("first", "second")
    agent = make_agent(server)

    def steer_at_the_end(event: Event) -> None:
        if event["type"] == "agent_end" and len(agent.history) == 2:
            agent.steer("late steer")

    agent.subscribe(steer_at_the_end)
    assert agent.send("one").text == "first"
    assert [e["content"] for e in agent.queued()["steer"]] == ["late steer"]
    assert user_texts(agent.history) == ["one"]
    agent.send("two")
    assert user_texts(agent.history) == ["one", "two", "late steer"]


def test_a_superseding_send_delivers_steers_before_its_input(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    gate, started = threading.Event(), threading.Event()
    server.add(call_work(), "reply to the new send")
    agent = make_agent(server, tools=[gated_tool(gate, started)], no_tool_rounds=1)
    first = agent.stream("old task")
    assert started.wait(30)
    agent.steer("steer for the old task")
    result = agent.send("new task")
    gate.set()
    with pytest.raises(AgentError):
        first.wait()
    assert user_texts(agent.history) == ["old task", "steer for the old task", "new task"]
    assert result.messages[0]["content"] == "steer for the old task"
    assert result.text == "reply to the new send"


@pytest.mark.parametrize("ending", ["step-limit", "tool-stop", "error", "stop"])
def test_steers_survive_a_run_that_ends_another_way(
    server: ModelServer, make_agent: MakeAgent, ending: str
) -> None:
    gate, started = threading.Event(), threading.Event()
    tools = [
        gated_tool(gate, started),
        {
            "name": "finish",
            "description": "Stop.",
            "input_schema": {"type": "object"},
            "execute": lambda input: {"stop": True, "output": "done"},
        },
    ]
    config: dict[str, Any] = {"no_tool_rounds": 1}
    if ending == "step-limit":
        server.add(call_work())
        config["max_steps"] = 1
    elif ending == "tool-stop":
        server.add({"tool_calls": [{"name": "work", "arguments": {}}, {"name": "finish", "arguments": {}}]})
    elif ending == "error":
        server.add(call_work(), {"status": 400, "error": "bad"})
        config["retry"] = lambda error: False
    else:
        server.add(call_work())
    agent = make_agent(server, tools=tools, **config)
    run = agent.stream("go")
    assert started.wait(30)
    agent.steer("keep me")
    agent.follow_up("and me")
    if ending == "stop":
        agent.stop()
    gate.set()
    try:
        run.wait(30)
    except AgentError:
        pass
    if ending == "error":
        # The steer was delivered after the tool round; the request that carried it failed.
        assert user_texts(agent.history)[-1] == "keep me"
    else:
        assert [e["content"] for e in agent.queued()["steer"]] == ["keep me"]
    assert [e["content"] for e in agent.queued()["follow_up"]] == ["and me"]


# ---------------------------------------------------------------- follow-ups


def test_follow_ups_wait_for_the_end_and_the_run_goes_on(server: ModelServer, make_agent: MakeAgent) -> None:
    gate, started = threading.Event(), threading.Event()
    server.add(call_work(), "first done", "summary written")
    agent = make_agent(server, tools=[gated_tool(gate, started)], no_tool_rounds=1)
    run = agent.stream("do the work")
    assert started.wait(30)
    agent.follow_up("Then summarise what you changed.")
    gate.set()
    result = run.wait(30)
    roles_and_text = [(m["role"], m.get("content") if m["role"] == "user" else None) for m in agent.history]
    assert roles_and_text == [
        ("user", "do the work"),
        ("assistant", None),
        ("tool", None),
        ("assistant", None),
        ("user", "Then summarise what you changed."),
        ("assistant", None),
    ]
    assert result.text == "summary written"
    assert result.reason == "no-tool"
    assert result.steps == 3


@pytest.mark.parametrize(("mode", "requests"), [("one-at-a-time", 3), ("all", 2)])
def test_follow_up_modes(server: ModelServer, make_agent: MakeAgent, mode: str, requests: int) -> None:
    server.add("a", "b", "c")
    agent = make_agent(server, follow_up_mode=mode)
    agent.follow_up("first follow-up")
    agent.follow_up("second follow-up")
    result = agent.send("start")
    assert len(server.requests) == requests
    assert user_texts(agent.history) == ["start", "first follow-up", "second follow-up"]
    assert result.reason == "finished"


def test_a_follow_up_restarts_the_no_tool_count(server: ModelServer, make_agent: MakeAgent) -> None:
    tools = [
        {
            "name": "noop",
            "description": "Nothing.",
            "input_schema": {"type": "object"},
            "execute": lambda i: "ok",
        }
    ]
    server.add("one", "two", "three", "four")
    agent = make_agent(server, tools=tools, no_tool_rounds=2, no_tool_prompt="")
    agent.follow_up("more please")
    result = agent.send("go")
    # Two no-tool rounds end the run; the follow-up then gives it two more.
    assert len(server.requests) == 4
    assert result.reason == "no-tool"


def test_a_steer_left_at_the_end_goes_before_follow_ups(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add("a", "b", "c")
    agent = make_agent(server)
    events: list[Event] = []
    agent.subscribe(events.append)

    def queue_both(event: Event) -> None:
        if event["type"] == "turn_end" and event["step"] == 1:
            agent.follow_up("follow-up")
            agent.steer("steer")

    agent.subscribe(queue_both)
    agent.send("start")
    assert user_texts(agent.history) == ["start", "steer", "follow-up"]
    assert check_order(events) == []


# ---------------------------------------------------------------- the queue API


def test_queued_and_clear_queues(server: ModelServer, make_agent: MakeAgent) -> None:
    agent = make_agent(server)
    agent.steer("a")
    agent.steer([{"type": "text", "text": "b"}])
    agent.follow_up({"role": "user", "content": "c", "meta": {"source": "ui"}})
    queued = agent.queued()
    assert queued == {
        "steer": [
            {"role": "user", "content": "a"},
            {"role": "user", "content": [{"type": "text", "text": "b"}]},
        ],
        "follow_up": [{"role": "user", "content": "c", "meta": {"source": "ui"}}],
    }
    queued["steer"].clear()
    queued["follow_up"][0]["meta"]["source"] = "changed"
    assert len(agent.queued()["steer"]) == 2
    assert agent.queued()["follow_up"][0]["meta"] == {"source": "ui"}
    removed = agent.clear_queues()
    assert removed["steer"][0]["content"] == "a"
    assert removed["follow_up"][0]["meta"] == {"source": "ui"}
    assert agent.queued() == {"steer": [], "follow_up": []}


@pytest.mark.parametrize(
    "message",
    [
        "",
        "   ",
        [],
        [{"type": "video"}],
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": ""},
        42,
    ],
)
def test_invalid_messages_raise_and_queue_nothing(
    server: ModelServer, make_agent: MakeAgent, message: Any
) -> None:
    agent = make_agent(server)
    for queue in (agent.steer, agent.follow_up):
        with pytest.raises(AgentError) as caught:
            queue(message)
        assert caught.value.kind == "request"
    assert agent.queued() == {"steer": [], "follow_up": []}


def test_config_modes_are_validated(server: ModelServer, make_agent: MakeAgent) -> None:
    for key in ("steering_mode", "follow_up_mode", "tool_execution"):
        with pytest.raises(AgentError) as caught:
            make_agent(server, **{key: "sometimes"})
        assert caught.value.kind == "config"
