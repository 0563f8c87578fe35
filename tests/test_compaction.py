"""Compaction: appended, never removing; once per round; by budget; overflow → compact and resend."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentcore import AgentError, output, tool
from agentcore.compact import PREVIOUS_INTRO, SUMMARY_SYSTEM
from agentcore.testing import ModelServer, Recorded

MakeAgent = Any

BUDGET = 20000


def is_compaction(recorded: Recorded) -> bool:
    return SUMMARY_SYSTEM[:40] in json.dumps(recorded.body)


@tool
def step(n: int) -> str:
    """Record one step.

    Args:
        n: The step number.
    """
    return f"step {n} done. " + "log line. " * 200


class Scripted:
    """Replies to compaction requests with a numbered summary and to the rest with a tool call."""

    def __init__(self) -> None:
        self.summaries = 0
        self.steps = 0
        self.order: list[str] = []

    def __call__(self, recorded: Recorded) -> dict[str, Any]:
        if is_compaction(recorded):
            self.summaries += 1
            self.order.append("compact")
            return {"text": f"SUMMARY {self.summaries}: the goal is to record steps; {self.steps} done."}
        self.steps += 1
        self.order.append("main")
        return {"tool_calls": [{"name": "step", "arguments": {"n": self.steps}}]}


def test_120_rounds_with_a_200k_first_message_stay_within_budget(make_agent: MakeAgent) -> None:
    """Count-based selection kept the pasted log in every request (120/120 rounds over threshold)."""
    script = Scripted()
    with ModelServer(default=script) as server:
        agent = make_agent(server, tools=[step], max_context_tokens=BUDGET, max_steps=120)
        result = agent.send("GOAL: record the steps. Here is the log:\n" + "L" * 200_000)
        sizes = [len(json.dumps(r.body)) // 4 for r in server.log]
    assert result.reason == "step-limit" and result.steps == 120
    assert script.summaries >= 3, "the run should have compacted several times"
    # Every request after the first compaction is within the budget (server-side estimate, 4 chars/token).
    assert max(sizes) <= BUDGET, f"largest request {max(sizes)} tokens"
    # Never two compactions in a row: at most one summary request per round.
    assert "compact,compact" not in ",".join(script.order)
    rounds = ",".join(script.order).split("main")
    assert max(r.count("compact") for r in rounds) <= 1
    # History only grew: the huge first message is still there, summaries were appended.
    assert agent.history[0]["content"].startswith("GOAL") and len(agent.history[0]["content"]) > 200_000
    assert sum(1 for m in agent.history if m["role"] == "compact") == script.summaries


def test_second_compaction_gets_the_previous_summary_as_background(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add("first summary: facts A and B", "second summary")
    agent = make_agent(server)
    agent.history += [
        {"role": "user", "content": "goal"},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
    ]
    assert agent.compact() == "first summary: facts A and B"
    agent.history.append({"role": "user", "content": "more"})
    agent.compact()
    prompt = json.dumps(server.requests[1])
    assert PREVIOUS_INTRO[:30] in prompt and "facts A and B" in prompt
    assert [m["role"] for m in agent.history].count("compact") == 2


def test_compaction_events_usage_and_appended_entry(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add({"text": "the summary", "usage": {"input_tokens": 300, "output_tokens": 20}})
    agent = make_agent(server)
    agent.history.append({"role": "user", "content": "goal"})
    events: list[dict[str, Any]] = []
    text = agent.compact(on_compact=events.append)
    assert text == "the summary"
    kinds = [e["type"] for e in events]
    assert kinds[0] == "compact-start" and kinds[-1] == "compact-finish"
    assert all(e.get("request") == "compact" for e in events[1:-1]) and len(events) > 2
    assert events[-1]["usage"].input_tokens == 300
    entry = agent.history[-1]
    assert entry["role"] == "compact" and entry["content"] == "the summary" and "id" in entry


def test_automatic_compaction_counts_in_send_usage_and_folds_into_system(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(
        {"text": "SUMMARY: earlier work", "usage": {"input_tokens": 1000, "output_tokens": 10}},
        {"text": "done", "usage": {"input_tokens": 50, "output_tokens": 5}},
    )
    agent = make_agent(server, max_context_tokens=1000)
    result = agent.send("x" * 5000)
    assert result.usage.input_tokens == 1050 and result.steps == 1
    assert [m["role"] for m in result.messages] == ["user", "compact", "assistant"]
    system = server.requests[1]["messages"][0]
    assert system["role"] == "system" and "SUMMARY: earlier work" in system["content"]


def test_empty_summary_raises_and_appends_nothing(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add("   ")
    agent = make_agent(server)
    agent.history.append({"role": "user", "content": "goal"})
    with pytest.raises(AgentError) as info:
        agent.compact()
    assert info.value.kind == "unknown" and len(agent.history) == 1


def test_overflow_compacts_and_resends_at_most_three_times(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add(
        {"overflow": True},
        "summary 1",
        {"overflow": True},
        "summary 2",
        {"overflow": True},
        "summary 3",
        {"overflow": True},
    )
    agent = make_agent(server)
    with pytest.raises(AgentError) as info:
        agent.send("hello")
    assert info.value.kind == "request" and info.value.status == 400
    assert len(server.requests) == 7
    assert [m["role"] for m in agent.history].count("compact") == 3


def test_overflow_then_success_after_one_compaction(server: ModelServer, make_agent: MakeAgent) -> None:
    retries: list[Any] = []
    server.add({"overflow": True}, "summary", "answer")
    agent = make_agent(server, callbacks={"on_retry": retries.append})
    result = agent.send("hello")
    assert result.text == "answer" and result.steps == 1 and not retries


def test_compaction_uses_compact_overrides_and_never_inherits_output_or_forced_tool_choice(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add("summary")
    agent = make_agent(
        server,
        compact={"model": "cheap-model"},
        output=output.object({"type": "object"}),
        provider={"tool_choice": "required", "temperature": 0.2},
    )
    agent.history.append({"role": "user", "content": "goal"})
    agent.compact()
    body = server.requests[0]
    assert body["model"] == "cheap-model"
    assert "response_format" not in body and "tool_choice" not in body and body.get("temperature") == 0.2


def test_compaction_request_overflow_is_raised(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add({"overflow": True})
    agent = make_agent(server)
    agent.history.append({"role": "user", "content": "goal"})
    with pytest.raises(AgentError) as info:
        agent.compact()
    assert info.value.overflow and len(agent.history) == 1


# ---------------------------------------------------------------- an oversized input (issue 8 defect 11)

HUGE_INPUT = "log line: all is well\n" * (5_000_000 // 22)  # about 5 MB


def test_a_5mb_input_covered_by_the_summary_is_logged_and_flagged(
    server: ModelServer, make_agent: Any, caplog: pytest.LogCaptureFixture
) -> None:
    server.add("Summary: the user pasted a long log where all is well.", "All is well.")
    events: list[dict[str, Any]] = []
    agent = make_agent(server, callbacks={"on_compact": events.append})
    with caplog.at_level("WARNING", logger="agentcore"):
        result = agent.send(HUGE_INPUT)
    assert result.reason == "finished" and result.text == "All is well."
    finish = [e for e in events if e["type"] == "compact-finish"]
    assert len(finish) == 1 and finish[0]["input_excerpted"] is True
    warnings = [r for r in caplog.records if r.name == "agentcore" and r.levelname == "WARNING"]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert f"{len(HUGE_INPUT)} characters" in message and "max_context_tokens=128000" in message
    # Behaviour kept: the main request carries the summary, not the input; history keeps it whole.
    assert len(server.log[1].raw) < 200_000
    assert agent.history[0]["content"] == HUGE_INPUT


def test_a_compaction_that_keeps_the_input_is_not_flagged(
    server: ModelServer, make_agent: Any, caplog: pytest.LogCaptureFixture
) -> None:
    server.add("first answer", "the summary", "second answer")
    events: list[dict[str, Any]] = []
    agent = make_agent(server, callbacks={"on_compact": events.append})
    agent.send("a short question")
    with caplog.at_level("WARNING", logger="agentcore"):
        assert agent.compact() == "the summary"
    finish = [e for e in events if e["type"] == "compact-finish"]
    assert len(finish) == 1 and finish[0]["input_excerpted"] is False
    assert not [r for r in caplog.records if r.name == "agentcore" and r.levelname == "WARNING"]


def test_compact_run_reports_input_excerpted(server: ModelServer) -> None:
    from agentcore import compact

    server.add("the summary")
    result = compact.run(
        history=[{"role": "user", "content": "x" * 50_000}],
        connection={"base_url": server.base_url, "model": "m"},
        max_context_tokens=10_000,
    )
    assert result["input_excerpted"] is True
