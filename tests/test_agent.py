"""The Agent, end to end: send results and entries, input checks, latest-send-wins, cancel, stop,
resume, compact, close, KeyboardInterrupt."""

from __future__ import annotations

import copy
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from background import Background

from agentcore import Agent, AgentError, SendResult, ToolContext, Usage, tool
from agentcore import runs as runs_module
from agentcore.testing import ModelServer, Recorded

pytestmark = pytest.mark.usefixtures("no_thread_leak")
MakeAgent = Callable[..., Agent]

IMAGE = "data:image/png;base64,iVBORw0KGgo="


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def wait_for(condition: Callable[[], Any], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.002)


def slow_reply(
    started: threading.Event, text: str = "slow", delay: float = 60.0
) -> Callable[[Recorded], Any]:
    """A script item that says when the request arrived and answers only after `delay`.

    The delay outlasts any stop a busy machine may be slow to deliver; a closing server ends it.
    """

    def reply(recorded: Recorded) -> dict[str, Any]:
        started.set()
        return {"text": text, "delay": delay}

    return reply


def held_reply(started: threading.Event, release: threading.Event, answered: threading.Event) -> Any:
    """A script item that says when the request arrived and answers only once `release` is set
    (or after 60 s); `answered` tells whether it got past that wait. A test that must not wait
    for the reply checks `answered` is still clear when it returned, then sets `release`."""

    def reply(recorded: Recorded) -> str:
        started.set()
        release.wait(60)
        answered.set()
        return "slow"

    return reply


def blocking_tool(entered: threading.Event) -> Any:
    @tool
    def hang(ctx: ToolContext) -> str:
        """Wait until the call is cancelled."""
        entered.set()
        ctx.cancel.wait(60)
        return "late"

    return hang


def when_set(event: threading.Event, action: Callable[[], Any]) -> None:
    """Run `action` on another thread as soon as `event` is set."""

    def wait_then_act() -> None:
        if event.wait(30):
            action()

    threading.Thread(target=wait_then_act, daemon=True).start()


def assert_aborted(error: BaseException | None) -> None:
    assert isinstance(error, AgentError) and error.kind == "aborted", error


# ---------------------------------------------------------------- SendResult and entries


def test_send_result_reports_text_steps_summed_usage_reason_and_appended_messages(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(
        {
            "tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}],
            "usage": {"input_tokens": 10, "output_tokens": 2},
        },
        {"text": "3", "usage": {"input_tokens": 20, "output_tokens": 1, "cache_read_tokens": 8}},
    )
    agent = make_agent(server, tools=[add], no_tool_rounds=1)
    result = agent.send("what is 1+2?")
    assert isinstance(result, SendResult)
    assert (result.text, result.steps, result.reason, result.output) == ("3", 2, "no-tool", None)
    assert result.usage == Usage(input_tokens=30, output_tokens=3, total_tokens=33, cache_read_tokens=8)
    assert [m["role"] for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    assert all(a is b for a, b in zip(result.messages, agent.history, strict=True))


def test_retried_attempts_are_not_steps(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add({"status": 500, "error": "busy"}, {"status": 429, "error": "slow down"}, "fine")
    result = make_agent(server).send("hi")
    assert (result.steps, result.text) == (1, "fine")
    assert len(server.requests) == 3


def test_appended_entries_carry_id_and_created_at_and_assistant_ones_usage(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add({"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}, "3")
    before = time.time()
    result = make_agent(server, tools=[add], no_tool_rounds=1).send("hi")
    ids = [m["id"] for m in result.messages]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids) and len(set(ids)) == len(ids)
    assert all(before <= m["created_at"] <= time.time() for m in result.messages)
    assert [("usage" in m) for m in result.messages] == [False, True, False, True]
    assert result.messages[-1]["usage"]["output_tokens"] >= 0


def test_the_library_never_adds_keys_to_entries_it_did_not_create(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    history = [
        {"role": "user", "content": "question"},
        {"role": "assistant", "content": [{"type": "text", "text": "answer"}]},
    ]
    snapshot = copy.deepcopy(history)
    server.add("more")
    make_agent(server, history=history).send("next")
    assert history[:2] == snapshot


def test_extra_keys_of_entries_are_kept_and_never_sent(server: ModelServer, make_agent: MakeAgent) -> None:
    history: list[dict[str, Any]] = [{"role": "user", "content": "question", "id": "u1", "meta": {"x": 1}}]
    history.append({"role": "assistant", "content": [{"type": "text", "text": "answer"}], "created_at": 1.0})
    server.add("more")
    make_agent(server, history=history).send("next")
    assert server.requests[0]["messages"][:2] == [
        {"role": "user", "content": "question"},
        {"role": "assistant", "content": "answer"},
    ]
    assert history[0]["meta"] == {"x": 1}


def test_an_empty_assistant_reply_is_stored_but_never_sent(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add("", "second")
    agent = make_agent(server)
    agent.send("first")
    assert agent.history[-1]["role"] == "assistant"
    agent.send("again")
    assert [m["role"] for m in server.requests[1]["messages"]] == ["user", "user"]


def test_reasoning_from_the_model_is_kept_in_history_as_reasoning_parts(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add({"reasoning": "Thinking it over.", "text": "Answer."})
    agent = make_agent(server)
    agent.send("hi")
    assert agent.history[-1]["content"] == [
        {"type": "reasoning", "text": "Thinking it over."},
        {"type": "text", "text": "Answer."},
    ]


# ---------------------------------------------------------------- input


@pytest.mark.parametrize(
    "bad_input",
    [
        "",
        "   \n\t ",
        [],
        [{"type": "text", "text": "   "}],
        ["plain string part"],
        [{"type": "audio", "data": "x"}],
        [{"type": "text"}],
        [{"type": "image"}],
        [{"type": "file", "data": "eA=="}],
        [{"type": "file", "media_type": "application/pdf"}],
        42,
        None,
    ],
    ids=lambda value: repr(value)[:30],
)
def test_invalid_input_is_a_request_error_and_nothing_is_written(
    server: ModelServer, make_agent: MakeAgent, bad_input: Any
) -> None:
    agent = make_agent(server)
    with pytest.raises(AgentError) as caught:
        agent.send(bad_input)
    assert caught.value.kind == "request"
    assert agent.history == [] and server.requests == []


def test_media_forbidden_by_capabilities_is_a_request_error(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    agent = make_agent(server, capabilities={"image": False})
    with pytest.raises(AgentError) as caught:
        agent.send([{"type": "text", "text": "look"}, {"type": "image", "image": IMAGE}])
    assert caught.value.kind == "request"
    assert agent.history == [] and server.requests == []


def test_with_media_fallback_strip_the_image_is_dropped_from_the_request_but_kept_in_history(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add("I only see text.")
    agent = make_agent(server, capabilities={"image": False}, media_fallback="strip")
    parts = [{"type": "text", "text": "look"}, {"type": "image", "image": IMAGE}]
    agent.send(parts)
    assert agent.history[0]["content"] == parts
    assert IMAGE not in str(server.requests[0]) and "look" in str(server.requests[0])


def test_content_part_input_is_stored_as_given(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add("seen")
    agent = make_agent(server)
    parts = [{"type": "text", "text": "what is this?"}, {"type": "image", "image": IMAGE}]
    agent.send(parts)
    assert agent.history[0]["content"] == parts
    assert server.requests[0]["messages"][0]["content"][1]["image_url"]["url"] == IMAGE


def test_the_input_stays_in_history_when_the_send_fails_later(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add({"status": 400, "error": "bad request"})
    agent = make_agent(server, retry={"skip_codes": [400]})
    with pytest.raises(AgentError) as caught:
        agent.send("hi")
    assert caught.value.kind == "request" and caught.value.status == 400
    assert [m["content"] for m in agent.history] == ["hi"]


# ---------------------------------------------------------------- latest send wins


def test_a_second_send_from_another_thread_stops_the_first(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    started = threading.Event()
    server.add(slow_reply(started), "second answer")
    agent = make_agent(server)
    first = Background(lambda: agent.send("first"))
    assert started.wait(30)
    second = Background(lambda: agent.send("second")).join()  # never the first's 60 s stall
    assert_aborted(first.join().error)
    assert second.error is None and second.result.text == "second answer"
    assert [m["content"] for m in agent.history if m["role"] == "user"] == ["first", "second"]


def test_a_send_superseded_before_it_started_applies_nothing(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    release = threading.Event()
    in_first = threading.Event()

    def on_start() -> None:
        if not in_first.is_set():
            in_first.set()
            release.wait(30)

    server.add("third answer")
    agent = make_agent(server, callbacks={"on_start": on_start})
    first = Background(lambda: agent.send("first"))
    assert in_first.wait(30)
    first_running = agent.running
    second = Background(
        lambda: agent.send("second", config={"system": "from second"}, callbacks={"on_step": print})
    )
    wait_for(lambda: agent.running is not first_running)
    second_running = agent.running
    third = Background(lambda: agent.send("third"))
    wait_for(lambda: agent.running is not second_running)
    release.set()
    assert_aborted(first.join().error)
    assert_aborted(second.join().error)
    assert third.join().error is None and third.result.text == "third answer"
    assert [m["content"] for m in agent.history if m["role"] == "user"] == ["first", "third"]
    assert agent.config["system"] == "" and "on_step" not in agent.callbacks
    assert len(server.requests) == 1


def test_agent_running_is_set_during_a_run_and_none_after(server: ModelServer, make_agent: MakeAgent) -> None:
    seen: list[Any] = []
    agent: Any = None

    def on_start() -> None:
        running = agent.running
        seen.append(
            (
                running is not None,
                isinstance(running.cancel, threading.Event),
                running.thread is threading.current_thread(),
            )
        )

    server.add("hi")
    agent = make_agent(server, callbacks={"on_start": on_start})
    assert agent.running is None
    agent.send("hi")
    assert seen == [(True, True, True)]
    assert agent.running is None


# ---------------------------------------------------------------- cancel=


def test_setting_the_cancel_event_mid_run_aborts_the_send(server: ModelServer, make_agent: MakeAgent) -> None:
    started = threading.Event()
    cancel = threading.Event()
    server.add(slow_reply(started))
    agent = make_agent(server)
    when_set(started, cancel.set)
    sent = Background(lambda: agent.send("hi", cancel=cancel)).join()  # never the 60 s stall
    assert_aborted(sent.error)
    assert agent.running is None


def test_an_already_set_cancel_aborts_at_once_and_leaves_a_running_send_alone(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    started, release = threading.Event(), threading.Event()

    def held_reply(recorded: Recorded) -> str:
        started.set()
        release.wait(30)  # the first send stays running until the checks are done
        return "first answer"

    server.add(held_reply)
    agent = make_agent(server)
    first = Background(lambda: agent.send("first"))
    assert started.wait(30)
    running = agent.running
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(AgentError) as caught:
        agent.send("ignored", cancel=cancel)
    assert caught.value.kind == "aborted"
    assert running is not None and agent.running is running and not running.cancel.is_set()
    release.set()
    assert first.join().error is None and first.result.text == "first answer"
    assert [m["content"] for m in agent.history if m["role"] == "user"] == ["first"]


def test_a_send_with_an_already_set_cancel_writes_nothing(server: ModelServer, make_agent: MakeAgent) -> None:
    cancel = threading.Event()
    cancel.set()
    agent = make_agent(server)
    with pytest.raises(AgentError) as caught:
        agent.send("hi", cancel=cancel, config={"system": "changed"})
    assert caught.value.kind == "aborted"
    assert agent.history == [] and agent.config["system"] == "" and server.requests == []


# ---------------------------------------------------------------- stop()


def test_stop_when_idle_returns_false(make_agent: MakeAgent, server: ModelServer) -> None:
    assert make_agent(server).stop() is False


def test_stop_returns_true_after_the_run_ended_with_every_call_answered(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    entered, added = threading.Event(), threading.Event()
    server.add(
        {
            "tool_calls": [
                {"name": "hang", "id": "c1"},
                {"name": "add", "arguments": {"a": 1, "b": 1}, "id": "c2"},
            ]
        }
    )
    on_tool_result = {"on_tool_result": lambda p: added.set() if p["tool_name"] == "add" else None}
    agent = make_agent(server, tools=[blocking_tool(entered), add], callbacks=on_tool_result)
    first = Background(lambda: agent.send("hi"))
    assert entered.wait(30) and added.wait(30)
    assert agent.stop() is True
    assert agent.running is None
    assert [m["role"] for m in agent.history] == ["user", "assistant", "tool"]
    hang_result, add_result = agent.history[2]["content"]
    assert hang_result["tool_call_id"] == "c1" and "interrupted" in hang_result["output"]["value"]
    assert add_result["output"] == {"type": "json", "value": 2}
    assert_aborted(first.join().error)


def test_stop_from_inside_a_callback_only_sets_cancel(server: ModelServer, make_agent: MakeAgent) -> None:
    returned: list[bool] = []
    agent: Any = None

    def on_llm_finish(result: Any) -> None:
        returned.append(agent.stop())

    server.add({"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 1}}]}, "never")
    agent = make_agent(server, tools=[add], callbacks={"on_llm_finish": on_llm_finish})
    with pytest.raises(AgentError) as caught:
        agent.send("hi")
    assert caught.value.kind == "aborted" and returned == [True]
    assert len(server.requests) == 1 and agent.running is None


def test_stop_from_inside_a_memory_tool_only_sets_cancel(server: ModelServer, make_agent: MakeAgent) -> None:
    returned: list[bool] = []
    agent: Any = None

    @tool
    def quit_now() -> str:
        """Stop the agent."""
        returned.append(agent.stop())
        return "stopping"

    server.add({"tool_calls": [{"name": "quit_now"}]}, "never")
    agent = make_agent(server, tools=[quit_now])
    with pytest.raises(AgentError) as caught:
        agent.send("hi")
    assert caught.value.kind == "aborted" and returned == [True]
    assert len(server.requests) == 1


# ---------------------------------------------------------------- send() inside a run


def test_send_from_inside_a_callback_raises_a_request_error(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    errors: list[BaseException] = []
    agent: Any = None

    def on_step(payload: dict[str, Any]) -> None:
        try:
            agent.send("nested")
        except AgentError as error:
            errors.append(error)

    server.add("answer")
    agent = make_agent(server, callbacks={"on_step": on_step})
    result = agent.send("hi")
    assert [e.kind for e in errors if isinstance(e, AgentError)] == ["request"]
    assert result.text == "answer" and [m["role"] for m in agent.history] == ["user", "assistant"]


def test_a_nested_send_raised_inside_a_notification_callback_is_swallowed(
    server: ModelServer, make_agent: MakeAgent, caplog: pytest.LogCaptureFixture
) -> None:
    agent: Any = None
    server.add("answer")
    agent = make_agent(server, callbacks={"on_start": lambda: agent.send("nested")})
    result = agent.send("hi")
    assert result.text == "answer"
    assert any(isinstance(r.exc_info and r.exc_info[1], AgentError) for r in caplog.records)


def test_send_from_inside_a_memory_tool_raises_a_request_error(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    agent: Any = None

    @tool
    def recurse() -> str:
        """Try to send."""
        agent.send("nested")
        return "sent"

    server.add({"tool_calls": [{"name": "recurse"}]}, "done")
    agent = make_agent(server, tools=[recurse], no_tool_rounds=1)
    agent.send("hi")
    output = agent.history[2]["content"][0]["output"]
    assert output["type"] == "error-text" and "AgentError" in output["value"]


# ---------------------------------------------------------------- resume()


def test_resume_runs_on_without_appending_input(server: ModelServer, make_agent: MakeAgent) -> None:
    history = [
        {"role": "user", "content": "add 1 and 2"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool-call", "tool_call_id": "c1", "tool_name": "add", "input": {"a": 1, "b": 2}}
            ],
        },
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool-result",
                    "tool_call_id": "c1",
                    "tool_name": "add",
                    "output": {"type": "json", "value": 3},
                }
            ],
        },
    ]
    server.add("It is 3.")
    agent = make_agent(server, tools=[add], history=history, no_tool_rounds=1)
    result = agent.resume()
    assert [m["role"] for m in result.messages] == ["assistant"]
    assert len(history) == 4 and result.text == "It is 3."
    assert [m["role"] for m in server.requests[0]["messages"]] == ["user", "assistant", "tool"]


@pytest.mark.parametrize("history", [[], [{"role": "compact", "content": "s"}]])
def test_resume_needs_a_history_ending_in_an_assistant_tool_or_user_message(
    server: ModelServer, make_agent: MakeAgent, history: Any
) -> None:
    agent = make_agent(server, history=history)
    with pytest.raises(AgentError) as caught:
        agent.resume()
    assert caught.value.kind == "request" and server.requests == []


INPUT_TEXT = "the one and only input"


def _input_copies(body: dict[str, Any]) -> int:
    import json

    return json.dumps(body).count(INPUT_TEXT)


@pytest.mark.parametrize("protocol", ["chat", "responses", "anthropic", "gemini"])
def test_resume_after_a_failed_first_request_sends_the_input_once(
    protocol: str, server: ModelServer, make_agent: MakeAgent
) -> None:
    """Issue 8 defect 7: the input of a failed send is sent as it is, never a second copy."""
    server.add({"status": 500, "error": "down"}, "answered")
    agent = make_agent(server, protocol=protocol, retry=lambda error: False)
    with pytest.raises(AgentError) as caught:
        agent.send(INPUT_TEXT)
    assert caught.value.kind == "server"
    assert [m["role"] for m in agent.history] == ["user"]
    result = agent.resume()
    assert result.text == "answered"
    assert [m["role"] for m in result.messages] == ["assistant"]
    assert _input_copies(server.requests[1]) == 1
    assert [m["role"] for m in agent.history] == ["user", "assistant"]


def test_resume_after_a_send_stopped_before_the_reply_sends_the_input_once(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    cancel = threading.Event()

    def stop_on_arrival(recorded: Recorded) -> dict[str, Any]:
        cancel.set()  # the request has arrived: stop the send before the model answers
        return {"text": "never read", "stall_after": 0}

    server.add(stop_on_arrival, "answered")
    agent = make_agent(server)
    with pytest.raises(AgentError) as caught:
        agent.send(INPUT_TEXT, cancel=cancel)
    assert caught.value.kind == "aborted"
    assert [m["role"] for m in agent.history] == ["user"]
    assert agent.resume().text == "answered"
    assert [_input_copies(body) for body in server.requests] == [1, 1]
    assert [m["content"] for m in agent.history if m["role"] == "user"] == [INPUT_TEXT]


def test_resume_with_input_is_a_type_error(server: ModelServer, make_agent: MakeAgent) -> None:
    agent = make_agent(server, history=[{"role": "assistant", "content": [{"type": "text", "text": "x"}]}])
    with pytest.raises(TypeError):
        resume: Any = agent.resume
        resume("more")


# ---------------------------------------------------------------- compact()


def test_compact_appends_a_compact_message_and_returns_its_text(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    events: list[dict[str, Any]] = []
    agent_events: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "remember 42"},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
    ]
    server.add({"text": "The user asked to remember 42.", "usage": {"input_tokens": 50, "output_tokens": 9}})
    agent = make_agent(server, history=history, callbacks={"on_compact": agent_events.append})
    text = agent.compact(on_compact=events.append)
    assert text == "The user asked to remember 42."
    assert history[-1]["role"] == "compact" and history[-1]["content"] == text
    assert len(history) == 3 and "id" in history[-1]
    assert events[0] == {"type": "compact-start"}
    assert events[-1]["type"] == "compact-finish"
    assert events[-1]["usage"] == Usage(input_tokens=50, output_tokens=9, total_tokens=59)
    assert all(e["request"] == "compact" for e in events[1:-1]) and len(events) > 2
    assert agent_events == [] and agent.running is None
    assert "remember 42" in str(server.requests[0]["messages"])


def test_compact_stops_what_is_running(server: ModelServer, make_agent: MakeAgent) -> None:
    started = threading.Event()
    server.add(slow_reply(started), "the summary")
    agent = make_agent(server)
    first = Background(lambda: agent.send("long task"))
    assert started.wait(30)
    assert agent.compact() == "the summary"
    assert_aborted(first.join().error)
    assert agent.history[-1]["role"] == "compact"


def test_an_empty_summary_is_an_error_and_appends_nothing(server: ModelServer, make_agent: MakeAgent) -> None:
    history = [{"role": "user", "content": "hi"}]
    server.add("   ")
    agent = make_agent(server, history=history)
    with pytest.raises(AgentError) as caught:
        agent.compact()
    assert caught.value.kind == "unknown" and history == [{"role": "user", "content": "hi"}]


# ---------------------------------------------------------------- close() and with


def test_close_stops_a_running_send(server: ModelServer, make_agent: MakeAgent) -> None:
    started = threading.Event()
    server.add(slow_reply(started))
    agent = make_agent(server)
    first = Background(lambda: agent.send("hi"))
    assert started.wait(30)
    agent.close()
    assert agent.running is None
    assert_aborted(first.join().error)


def test_agent_is_a_context_manager_that_closes(server: ModelServer) -> None:
    started = threading.Event()
    server.add(slow_reply(started))
    with Agent(config={"base_url": server.base_url, "model": "m"}) as agent:
        first = Background(lambda: agent.send("hi"))
        assert started.wait(30)
    assert agent.running is None
    assert_aborted(first.join().error)


# ---------------------------------------------------------------- KeyboardInterrupt


@pytest.fixture
def interrupt_main_when() -> Iterator[Callable[[Callable[[], bool]], Any]]:
    """`interrupt_main_when(condition)`: deliver SIGINT to the main thread, like Ctrl-C, once
    `condition()` holds — a point the run has reached, never a delay (the machine may be slow)."""
    done = threading.Event()
    threads: list[threading.Thread] = []
    main = threading.main_thread().ident
    assert main is not None and threading.current_thread() is threading.main_thread()

    def arm(condition: Callable[[], bool]) -> None:
        def watch() -> None:
            deadline = time.monotonic() + 30
            while not done.is_set() and time.monotonic() < deadline:
                if condition():
                    signal.pthread_kill(main, signal.SIGINT)
                    return
                done.wait(0.002)

        threads.append(threading.Thread(target=watch, daemon=True))
        threads[-1].start()

    yield arm
    done.set()
    for thread in threads:
        thread.join()


def test_keyboard_interrupt_stops_the_worker_closes_history_and_re_raises(
    server: ModelServer, make_agent: MakeAgent, interrupt_main_when: Callable[[Callable[[], bool]], Any]
) -> None:
    assert threading.current_thread() is threading.main_thread()
    entered = threading.Event()
    server.add({"tool_calls": [{"name": "hang", "id": "c1"}]}, "never")
    agent = make_agent(server, tools=[blocking_tool(entered)])
    interrupt_main_when(entered.is_set)  # Ctrl-C while the tool runs
    with pytest.raises(KeyboardInterrupt):
        agent.send("hi")
    assert entered.is_set() and agent.running is None
    assert [m["role"] for m in agent.history] == ["user", "assistant", "tool"]
    assert "interrupted" in agent.history[2]["content"][0]["output"]["value"]
    assert len(server.requests) == 1


def test_ctrl_c_during_a_model_reply_stops_the_run_at_once(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    started, release, answered = threading.Event(), threading.Event(), threading.Event()
    server.add(held_reply(started, release, answered))
    agent = make_agent(server)
    main = threading.main_thread().ident
    assert main is not None
    when_set(started, lambda: signal.pthread_kill(main, signal.SIGINT))
    try:
        with pytest.raises(KeyboardInterrupt):
            agent.send("hi")
        assert not answered.is_set()  # it did not wait for the reply
        assert agent.running is None
        assert [m["role"] for m in agent.history] == ["user"]
    finally:
        release.set()


class _InterruptedStart(threading.Thread):
    """A run thread whose `start()` meets a Ctrl-C: after the run reached the model, or before it exists."""

    def __init__(self, *args: Any, reached: threading.Event | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reached = reached

    def start(self) -> None:
        if self.reached is None:
            raise KeyboardInterrupt
        super().start()
        assert self.reached.wait(30)
        raise KeyboardInterrupt


def _spawn_interrupted(
    monkeypatch: pytest.MonkeyPatch, reached: threading.Event | None
) -> list[_InterruptedStart]:
    made: list[_InterruptedStart] = []

    def spawn(target: Callable[[], None], *, name: str, start: bool = True) -> threading.Thread:
        thread = _InterruptedStart(target=target, name=name, daemon=True, reached=reached)
        made.append(thread)
        return thread

    monkeypatch.setattr(runs_module, "spawn", spawn)
    return made


def test_ctrl_c_while_the_run_thread_is_starting_still_stops_the_run(
    server: ModelServer, make_agent: MakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A busy machine can let the run reach the model before `Thread.start()` returns.
    started = threading.Event()
    server.add(slow_reply(started))
    agent = make_agent(server)
    made = _spawn_interrupted(monkeypatch, started)
    with pytest.raises(KeyboardInterrupt):
        agent.send("hi")
    assert agent.running is None
    made[0].join(30)
    assert not made[0].is_alive()
    assert [m["role"] for m in agent.history] == ["user"]


def test_ctrl_c_before_the_run_thread_exists_abandons_the_run(
    server: ModelServer, make_agent: MakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = make_agent(server)
    made = _spawn_interrupted(monkeypatch, None)
    with pytest.raises(KeyboardInterrupt):
        agent.send("hi")
    assert agent.running is None
    # The thread object never ran; if it were started now it must not run the send.
    threading.Thread.start(made[0])
    made[0].join(30)
    assert server.requests == []
    assert [m["role"] for m in agent.history] == ["user"]
    monkeypatch.undo()
    server.add({"text": "again"})
    assert agent.send("next").text == "again"


# ---------------------------------------------------------------- more of stop, resume, compact


def test_stop_does_not_wait_for_a_memory_tool_that_ignores_cancel_and_drops_its_late_value(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    entered, release, finished = threading.Event(), threading.Event(), threading.Event()
    results: list[dict[str, Any]] = []
    tool_threads: list[threading.Thread] = []

    @tool
    def stubborn() -> str:
        """Ignore cancellation."""
        tool_threads.append(threading.current_thread())
        entered.set()
        release.wait(60)
        finished.set()
        return "late value"

    server.add({"tool_calls": [{"name": "stubborn"}]})
    agent = make_agent(server, tools=[stubborn], callbacks={"on_tool_result": results.append})
    first = Background(lambda: agent.send("hi"))
    assert entered.wait(30)
    try:
        stopped = Background(agent.stop).join()
        assert stopped.result is True and not finished.is_set()  # stop() did not wait for the tool
        assert_aborted(first.join().error)
        assert not finished.is_set()
        snapshot = copy.deepcopy(agent.history)
    finally:
        release.set()
    tool_threads[0].join(30)  # the late value has been returned (and must be dropped)
    assert finished.is_set() and not tool_threads[0].is_alive()
    assert agent.history == snapshot
    assert "interrupted" in agent.history[-1]["content"][0]["output"]["value"]
    assert [r.get("interrupted") for r in results] == [True]


def test_close_from_inside_a_callback_only_sets_cancel(server: ModelServer, make_agent: MakeAgent) -> None:
    agent: Any = None
    server.add("never written")
    agent = make_agent(server, callbacks={"on_llm_start": lambda payload: agent.close()})
    with pytest.raises(AgentError) as caught:
        agent.send("hi")
    assert caught.value.kind == "aborted" and agent.running is None


def test_stop_interrupts_a_retry_backoff_at_once(server: ModelServer, make_agent: MakeAgent) -> None:
    retrying = threading.Event()
    server.add({"status": 500, "error": "busy"})
    agent = make_agent(
        server, retry_base_delay=60.0, retry_max_delay=60.0, callbacks={"on_retry": lambda p: retrying.set()}
    )
    first = Background(lambda: agent.send("hi"))
    assert retrying.wait(30)
    assert Background(agent.stop).join().result is True
    assert_aborted(first.join().error)  # within Background's 30 s: the 60 s backoff was cut
    assert len(server.requests) == 1


def test_tools_get_the_agent_id_in_their_context(server: ModelServer, make_agent: MakeAgent) -> None:
    @tool
    def whoami(ctx: ToolContext) -> str:
        """Say which agent runs this call."""
        return ctx.agent_id

    server.add({"tool_calls": [{"name": "whoami"}]}, "done")
    agent = make_agent(server, tools=[whoami], id="agent-7", no_tool_rounds=1)
    agent.send("hi")
    assert agent.history[2]["content"][0]["output"] == {"type": "text", "value": "agent-7"}


def test_resume_overrides_are_written_back(server: ModelServer, make_agent: MakeAgent) -> None:
    steps: list[int] = []
    history: list[dict[str, Any]] = [{"role": "assistant", "content": [{"type": "text", "text": "Hi."}]}]
    server.add("resumed", "later")
    agent = make_agent(server, history=history)
    agent.resume(config={"system": "be brief"}, callbacks={"on_step": lambda p: steps.append(p["step"])})
    agent.send("again")
    assert agent.config["system"] == "be brief" and steps == [1, 1]
    assert server.requests[1]["messages"][0] == {"role": "system", "content": "be brief"}


def test_compact_uses_the_on_retry_given_to_the_call(server: ModelServer, make_agent: MakeAgent) -> None:
    retries: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    server.add({"status": 503, "error": "busy"}, "summary")
    agent = make_agent(server, history=history)
    assert agent.compact(on_retry=retries.append) == "summary"
    assert [r["attempt"] for r in retries] == [1]


def test_ctrl_c_while_waiting_for_the_previous_run_to_end_leaves_the_agent_usable(
    server: ModelServer, make_agent: MakeAgent, interrupt_main_when: Callable[[Callable[[], bool]], Any]
) -> None:
    release, in_first = threading.Event(), threading.Event()

    def on_start() -> None:
        if not in_first.is_set():
            in_first.set()
            release.wait(30)

    server.add("third answer")
    agent = make_agent(server, callbacks={"on_start": on_start})
    first = Background(lambda: agent.send("first"))
    assert in_first.wait(30)
    running_first = agent.running
    # Ctrl-C once "second" has taken over agent.running and waits for the first run to end.
    interrupt_main_when(lambda: agent.running is not running_first)
    with pytest.raises(KeyboardInterrupt):
        agent.send("second")
    release.set()
    assert_aborted(first.join().error)
    assert agent.running is None
    third = Background(lambda: agent.send("third")).join()
    assert third.error is None and third.result.text == "third answer"
    assert [m["content"] for m in agent.history if m["role"] == "user"] == ["first", "third"]


def test_a_loaded_history_with_an_unanswered_call_is_closed_before_the_next_request(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    """A process that died mid-tool leaves a call without a result; vendors reject that forever."""
    loaded = [
        {"role": "user", "content": "read it"},
        {
            "role": "assistant",
            "content": [{"type": "tool-call", "tool_call_id": "c9", "tool_name": "read", "input": {}}],
        },
    ]
    server.add("ok")
    agent = make_agent(server, history=loaded)
    result = agent.send("go on")
    assert [m["role"] for m in agent.history] == ["user", "assistant", "tool", "user", "assistant"]
    closing = agent.history[2]
    assert (
        closing["content"][0]["tool_call_id"] == "c9"
        and "interrupted" in closing["content"][0]["output"]["value"]
    )
    assert result.messages[0] is closing
    sent = server.requests[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
