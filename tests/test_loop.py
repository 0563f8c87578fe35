"""The loop, end to end through the scripted model server: reasons, reminders, tools, invariants."""

from __future__ import annotations

import copy
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from agentcore import Agent, AgentError, ToolContext, output, tool
from agentcore.config import NO_TOOL_PROMPT
from agentcore.testing import ModelServer, Recorded

pytestmark = pytest.mark.usefixtures("no_thread_leak")
MakeAgent = Callable[..., Agent]


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def call(name: str, arguments: Any = None, id: str | None = None) -> dict[str, Any]:
    """A scripted tool call."""
    item: dict[str, Any] = {"name": name, "arguments": {} if arguments is None else arguments}
    if id is not None:
        item["id"] = id
    return item


def reminders(request: dict[str, Any], prompt: str = NO_TOOL_PROMPT) -> list[int]:
    """Indexes of the messages of a recorded request that carry the no-tool reminder."""
    return [i for i, m in enumerate(request["messages"]) if m.get("content") == prompt]


def results_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    assert message["role"] == "tool"
    return list(message["content"])


def check_history(history: list[dict[str, Any]]) -> list[str]:
    """Every violation of the loop's history invariants (an empty list when it is valid)."""
    problems: list[str] = []
    calls: dict[str, int] = {}
    answered: dict[str, int] = {}
    for index, message in enumerate(history):
        role = message.get("role")
        if role not in ("user", "assistant", "tool", "compact"):
            problems.append(f"{index}: unknown role {role!r}")
        if not isinstance(message.get("id"), str) or not isinstance(message.get("created_at"), float):
            problems.append(f"{index}: missing id / created_at")
        if role == "assistant" and not isinstance(message.get("usage"), dict):
            problems.append(f"{index}: assistant entry without usage")
        content = message.get("content")
        parts = content if isinstance(content, list) else []
        for part in parts:
            if part.get("type") == "tool-call":
                if part["tool_call_id"] in calls:
                    problems.append(f"{index}: duplicate call {part['tool_call_id']}")
                calls[part["tool_call_id"]] = index
                if not isinstance(part.get("input"), dict):
                    problems.append(f"{index}: call input is not a dict")
            elif part.get("type") == "tool-result":
                call_id = part["tool_call_id"]
                if call_id in answered:
                    problems.append(f"{index}: second result for {call_id}")
                if call_id not in calls:
                    problems.append(f"{index}: result for {call_id} before (or without) its call")
                answered[call_id] = index
                if part["output"].get("type") not in (
                    "text",
                    "json",
                    "error-text",
                    "error-json",
                    "execution-denied",
                    "content",
                ):
                    problems.append(f"{index}: bad output block {part['output']!r}")
    problems += [f"call {c} has no result" for c in calls if c not in answered]
    return problems


# ---------------------------------------------------------------- the four reasons


def test_reason_is_finished_when_no_tools_are_registered(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add("Hello there.")
    result = make_agent(server).send("hi")
    assert (result.reason, result.text, result.steps) == ("finished", "Hello there.", 1)
    assert len(server.requests) == 1


def test_reason_is_no_tool_after_three_rounds_without_tool_calls_by_default(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add("one", "two", "three", "never asked")
    result = make_agent(server, tools=[add]).send("hi")
    assert (result.reason, result.text, result.steps) == ("no-tool", "three", 3)
    assert len(server.requests) == 3


def test_no_tool_reminder_rides_only_on_the_request_of_the_last_allowed_round(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add("one", "two", "three")
    make_agent(server, tools=[add]).send("hi")
    first, second, third = server.requests
    assert reminders(first) == [] and reminders(second) == []
    assert reminders(third) == [len(third["messages"]) - 1]
    assert third["messages"][-1] == {"role": "user", "content": NO_TOOL_PROMPT}


def test_no_tool_reminder_is_never_written_to_history(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add("one", "two", "three")
    agent = make_agent(server, tools=[add])
    agent.send("hi")
    assert [m["role"] for m in agent.history] == ["user", "assistant", "assistant", "assistant"]
    assert all(NO_TOOL_PROMPT not in str(m["content"]) for m in agent.history)
    server.add("four", "five", "six")
    agent.send("again")
    assert [len(reminders(r)) for r in server.requests] == [0, 0, 1, 0, 0, 1]


def test_no_tool_rounds_count_only_rounds_in_a_row(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add("skip", {"tool_calls": [call("add", {"a": 1, "b": 2})]}, "skip", "skip", "never")
    result = make_agent(server, tools=[add], no_tool_rounds=2).send("hi")
    assert (result.reason, result.steps) == ("no-tool", 4)
    assert [len(reminders(r)) for r in server.requests] == [0, 1, 0, 1]


@pytest.mark.parametrize(
    ("config", "ending"),
    [
        ({"no_tool_rounds": 1}, ("no-tool", 1)),
        ({"no_tool_rounds": float("inf"), "max_steps": 4}, ("step-limit", 4)),
        ({"no_tool_prompt": ""}, ("no-tool", 3)),
    ],
    ids=["rounds-1", "rounds-inf", "empty-prompt"],
)
def test_no_reminder_when_rounds_is_one_or_infinite_or_the_prompt_is_empty(
    server: ModelServer, make_agent: MakeAgent, config: Any, ending: Any
) -> None:
    server.add("one", "two", "three", "four")
    result = make_agent(server, tools=[add], **config).send("hi")
    first = len(server.requests[0]["messages"])
    assert [len(r["messages"]) for r in server.requests] == [first + i for i in range(len(server.requests))]
    assert all(r["messages"][-1]["role"] == "assistant" for r in server.requests[1:])
    assert (result.reason, result.steps) == ending


def test_custom_no_tool_prompt_is_sent_as_written(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add("one", "two")
    make_agent(server, tools=[add], no_tool_rounds=2, no_tool_prompt="Use a tool!").send("hi")
    assert server.requests[1]["messages"][-1] == {"role": "user", "content": "Use a tool!"}


def test_reason_is_tool_stop_when_a_tool_returns_stop(server: ModelServer, make_agent: MakeAgent) -> None:
    @tool
    def finish(answer: str) -> dict[str, Any]:
        """Give the final answer."""
        return {"stop": True, "output": answer}

    server.add({"text": "Done.", "tool_calls": [call("finish", {"answer": "42"})]}, "never asked")
    agent = make_agent(server, tools=[finish])
    result = agent.send("hi")
    assert (result.reason, result.steps, result.text) == ("tool-stop", 1, "Done.")
    assert len(server.requests) == 1
    assert results_of(agent.history[-1])[0]["output"] == {"type": "text", "value": "42"}


def test_reason_is_step_limit_and_the_last_rounds_tool_results_are_saved(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    for i in range(3):
        server.add({"tool_calls": [call("add", {"a": i, "b": 1})]})
    agent = make_agent(server, tools=[add], max_steps=2)
    result = agent.send("hi")
    assert (result.reason, result.steps) == ("step-limit", 2)
    assert len(server.requests) == 2
    assert [m["role"] for m in agent.history] == ["user", "assistant", "tool", "assistant", "tool"]
    assert results_of(agent.history[-1])[0]["output"] == {"type": "json", "value": 2}


def test_step_limit_also_ends_rounds_without_tool_calls(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add("one", "two", "three")
    result = make_agent(server, tools=[add], max_steps=2).send("hi")
    assert (result.reason, result.steps) == ("step-limit", 2)


def test_capabilities_tools_false_sends_no_tools_and_finishes(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add("plain answer")
    result = make_agent(server, tools=[add], capabilities={"tools": False}).send("hi")
    assert result.reason == "finished"
    assert "tools" not in server.requests[0]


# ---------------------------------------------------------------- tool calls


def test_parallel_tool_calls_run_concurrently(server: ModelServer, make_agent: MakeAgent) -> None:
    barrier = threading.Barrier(4, timeout=30)

    @tool
    def meet(i: int) -> int:
        """Wait for the other calls."""
        barrier.wait()
        return i

    server.add({"tool_calls": [call("meet", {"i": i}) for i in range(4)]}, "done")
    agent = make_agent(server, tools=[meet], no_tool_rounds=1)
    agent.send("hi")
    outputs = [r["output"] for r in results_of(agent.history[2])]
    assert outputs == [{"type": "json", "value": i} for i in range(4)]


def test_tool_results_are_written_in_call_order_whatever_finishes_first(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    @tool
    def nap(seconds: float, label: str) -> str:
        """Sleep, then return the label."""
        time.sleep(seconds)
        return label

    naps = [(0.15, "a"), (0.0, "b"), (0.05, "c")]
    calls = [call("nap", {"seconds": s, "label": x}, id=f"c{x}") for s, x in naps]
    server.add({"tool_calls": calls}, "done")
    agent = make_agent(server, tools=[nap], no_tool_rounds=1)
    agent.send("hi")
    results = results_of(agent.history[2])
    assert [(r["tool_call_id"], r["output"]["value"]) for r in results] == [
        ("ca", "a"),
        ("cb", "b"),
        ("cc", "c"),
    ]
    sent = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in sent] == ["ca", "cb", "cc"]


def test_unknown_tool_gets_one_invalid_call_result(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add({"tool_calls": [call("nope", {"x": 1}, id="c1")]}, "done")
    agent = make_agent(server, tools=[add], no_tool_rounds=1)
    agent.send("hi")
    (result,) = results_of(agent.history[2])
    assert result["tool_call_id"] == "c1"
    assert result["output"]["type"] == "error-text"
    assert "nope" in result["output"]["value"] and "add" in result["output"]["value"]


def test_unparsable_arguments_give_empty_input_and_a_result_quoting_the_raw_text(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    ran = []

    @tool
    def echo(text: str = "") -> str:
        """Echo."""
        ran.append(text)
        return text

    raw = '{"text": "unterminated'
    server.add({"tool_calls": [call("echo", raw, id="c1")]}, "done")
    agent = make_agent(server, tools=[echo], no_tool_rounds=1)
    agent.send("hi")
    call_part = agent.history[1]["content"][-1]
    assert call_part["type"] == "tool-call" and call_part["input"] == {}
    (result,) = results_of(agent.history[2])
    assert result["output"]["type"] == "error-text" and raw in result["output"]["value"]
    assert ran == []


def test_schema_invalid_input_gives_an_error_naming_the_path_and_the_tool_does_not_run(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    ran = []

    @tool
    def count(n: int) -> int:
        """Count."""
        ran.append(n)
        return n

    server.add({"tool_calls": [call("count", {"n": "three"})]}, "done")
    agent = make_agent(server, tools=[count], no_tool_rounds=1)
    agent.send("hi")
    (result,) = results_of(agent.history[2])
    assert result["output"]["type"] == "error-text" and "input.n" in result["output"]["value"]
    assert ran == []


def test_a_tool_that_raises_gives_an_error_result_and_the_loop_goes_on(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    @tool
    def boom() -> str:
        """Fail."""
        raise ValueError("disk on fire")

    server.add({"tool_calls": [call("boom")]}, "recovered")
    agent = make_agent(server, tools=[boom], no_tool_rounds=1)
    result = agent.send("hi")
    (tool_result,) = results_of(agent.history[2])
    assert tool_result["output"]["type"] == "error-text" and "disk on fire" in tool_result["output"]["value"]
    assert result.text == "recovered"


def test_tool_results_are_sent_back_to_the_model(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add({"tool_calls": [call("add", {"a": 2, "b": 3}, id="c1")]}, "5")
    make_agent(server, tools=[add], no_tool_rounds=1).send("hi")
    assert {"role": "tool", "tool_call_id": "c1", "content": "5"} in server.requests[1]["messages"]


# ---------------------------------------------------------------- invariants


def test_history_is_append_only(server: ModelServer, make_agent: MakeAgent) -> None:
    earlier = [
        {"role": "user", "content": "old question", "mine": 1},
        {"role": "assistant", "content": [{"type": "text", "text": "old answer"}]},
    ]
    snapshot = copy.deepcopy(earlier)
    ids = [id(m) for m in earlier]
    server.add({"tool_calls": [call("add", {"a": 1, "b": 1})]}, "2")
    agent = make_agent(server, tools=[add], history=earlier, no_tool_rounds=1)
    agent.send("new question")
    assert agent.history[:2] == snapshot and [id(m) for m in agent.history[:2]] == ids


def test_a_reply_cut_by_a_retried_error_leaves_nothing(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add({"text": "partial text that never completes", "drop_after": 3}, "whole")
    agent = make_agent(server)
    result = agent.send("hi")
    assert [m["role"] for m in agent.history] == ["user", "assistant"]
    assert result.text == "whole" and result.steps == 1


def _cut_reply(server: ModelServer, make_agent: Any, at: str) -> list[dict[str, Any]]:
    """Send, and stop the run from `on_llm_event` at the first event of type `at`; return the history."""
    agent: Any = None

    def on_llm_event(event: dict[str, Any]) -> None:
        if event["type"] == at:
            agent.stop()

    server.add(
        {
            "text": "Let me add.",
            "tool_calls": [call("add", {"a": 1, "b": 2}, id="c1"), call("add", {"a": 3, "b": 4}, id="c2")],
            "chunk_delay": 0.01,
        }
    )
    agent = make_agent(server, tools=[add], callbacks={"on_llm_event": on_llm_event})
    with pytest.raises(AgentError) as caught:
        agent.send("hi")
    assert caught.value.kind == "aborted"
    assert check_history(agent.history) == []
    return list(agent.history)


def test_a_reply_cut_by_cancellation_keeps_the_text_that_arrived(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    history = _cut_reply(server, make_agent, "tool-call-delta")
    assert [m["role"] for m in history] == ["user", "assistant"]
    assert history[1]["content"] == [{"type": "text", "text": "Let me add."}]


def test_a_reply_cut_by_cancellation_answers_its_complete_calls_as_interrupted(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    history = _cut_reply(server, make_agent, "tool-call")
    assert [m["role"] for m in history] == ["user", "assistant", "tool"]
    assert history[1]["content"][0] == {"type": "text", "text": "Let me add."}
    # Stopped at the first complete call: c1 is kept (complete), c2 had only begun.
    assert [p["tool_call_id"] for p in history[1]["content"][1:]] == ["c1"]
    results = results_of(history[2])
    assert [r["tool_call_id"] for r in results] == ["c1"]
    assert all("interrupted" in r["output"]["value"] for r in results)


def _random_reply(rng: random.Random) -> Any:
    def reply(recorded: Recorded) -> dict[str, Any]:
        kind = rng.random()
        if kind < 0.5:
            return {"text": "All done, nothing else to do here.", "chunk_delay": 0.001}
        names = [rng.choice(["slow", "slow", "add", "missing"]) for _ in range(rng.randint(1, 3))]
        calls = [call(name, {"a": 1, "b": 2}) for name in names]
        if rng.random() < 0.15:
            calls.append(call("slow", '{"a": '))
        return {"text": "Working on it step by step.", "tool_calls": calls, "chunk_delay": 0.001}

    return reply


class _RandomStop:
    """Stops one run at a random instant of a chosen phase, from another thread, like a user would."""

    PHASES = ("model", "stream", "permission", "tool", "anytime")

    def __init__(self, rng: random.Random, stop: Any, target: str) -> None:
        self.rng, self.stop, self.target = rng, stop, target
        self.timer: threading.Timer | None = None
        self._lock = threading.Lock()
        if target == "anytime":
            self._arm(0.03)

    def reached(self, phase: str) -> None:
        # Stream events come many per reply: arm on a random one of them, not always the first.
        if phase == self.target and (phase != "stream" or self.rng.random() < 0.2):
            self._arm(0.004)

    def _arm(self, within: float) -> None:
        with self._lock:
            if self.timer is None:
                self.timer = threading.Timer(self.rng.random() * within, self.stop)
                self.timer.start()

    def join(self) -> bool:
        with self._lock:
            timer = self.timer
        if timer is not None:
            timer.join()
        return timer is not None


def test_every_call_gets_exactly_one_result_when_cancelled_at_random_instants(make_agent: MakeAgent) -> None:
    """Runs stopped while waiting for the model, streaming, in permission waits or in tools.

    Every history must stay valid (each call answered exactly once, nothing edited) and the next
    send must go on from it.
    """
    rng = random.Random(1234)
    current: list[_RandomStop] = []

    @tool
    def slow(a: int, b: int, ctx: ToolContext) -> int:
        """Add slowly."""
        current[0].reached("tool")
        ctx.cancel.wait(rng.random() * 0.005)
        return a + b

    def on_permission(payload: dict[str, Any]) -> bool:
        current[0].reached("permission")
        payload["cancel"].wait(rng.random() * 0.003)
        return rng.random() < 0.8

    callbacks = {
        "on_permission": on_permission,
        "on_llm_start": lambda payload: current[0].reached("model"),
        "on_llm_event": lambda event: current[0].reached("stream"),
    }
    # At least 100 runs, and on until every stop moment was hit 4 times: on a busy machine a
    # moment (a tool running, say) comes up less often, and that must not decide the verdict.
    runs, most, checked, stopped = 100, 400, 0, dict.fromkeys(_RandomStop.PHASES, 0)
    with ModelServer(default=_random_reply(rng)) as server:
        agent = make_agent(server, tools=[add, slow], callbacks=callbacks, no_tool_rounds=1)
        for run in range(most):
            if run >= runs and all(count > 3 for count in stopped.values()):
                break
            before = copy.deepcopy(agent.history)
            cancel = threading.Event()
            target = _RandomStop.PHASES[run % len(_RandomStop.PHASES)]
            current[:] = [_RandomStop(rng, agent.stop if run % 2 else cancel.set, target)]
            try:
                agent.send(f"task {run}", cancel=cancel)
            except AgentError as error:
                assert error.kind == "aborted", error
            stopped[target] += current[0].join()
            assert agent.running is None
            assert agent.history[: len(before)] == before, f"run {run}: history was edited"
            assert check_history(agent.history) == [], f"run {run}"
            checked += 1
    assert checked >= runs
    assert all(count > 3 for count in stopped.values()), stopped


# ---------------------------------------------------------------- structured output


POINT = {
    "type": "object",
    "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
    "required": ["x", "y"],
}


def test_reason_is_finished_when_the_structured_output_validates_even_with_tools(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add('{"x": 1, "y": 2}')
    result = make_agent(server, tools=[add], output=output.object(POINT)).send("a point")
    assert (result.reason, result.output, result.steps) == ("finished", {"x": 1, "y": 2}, 1)


def test_an_invalid_structured_reply_is_retried_not_written_and_not_a_step(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add('{"x": "one"}', "not json at all", '{"x": 1, "y": 2}')
    agent = make_agent(server, tools=[add], output=output.object(POINT), no_tool_rounds=1)
    result = agent.send("a point")
    assert (result.reason, result.output, result.steps) == ("finished", {"x": 1, "y": 2}, 1)
    assert [m["role"] for m in agent.history] == ["user", "assistant"]
    assert len(server.requests) == 3


# ---------------------------------------------------------------- compaction inside the loop


def test_compaction_happens_at_most_once_per_round(server: ModelServer, make_agent: MakeAgent) -> None:
    """A system prompt alone over the threshold: each round compacts once, then sends anyway."""
    server.add("summary one", {"tool_calls": [call("add", {"a": 1, "b": 2})]}, "summary two", "done")
    agent = make_agent(server, tools=[add], max_context_tokens=200, no_tool_rounds=1, system="rule " * 200)
    result = agent.send("hi")
    roles = ["user", "compact", "assistant", "tool", "compact", "assistant"]
    assert [m["role"] for m in result.messages] == roles
    assert (result.steps, result.text, len(server.requests)) == (2, "done", 4)


def test_a_context_overflow_compacts_and_resends(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add({"overflow": True}, "the summary", "answer")
    result = make_agent(server).send("hi")
    assert [m["role"] for m in result.messages] == ["user", "compact", "assistant"]
    assert (result.steps, result.text) == (1, "answer")


def test_overflow_gives_up_after_three_compactions_with_the_original_error(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    for n in range(3):
        server.add({"overflow": True}, f"summary {n}")
    server.add({"overflow": True}, "never asked")
    agent = make_agent(server)
    with pytest.raises(AgentError) as caught:
        agent.send("hi")
    assert (caught.value.kind, caught.value.status) == ("request", 400)
    assert [m["role"] for m in agent.history] == ["user", "compact", "compact", "compact"]
    assert len(server.requests) == 7
