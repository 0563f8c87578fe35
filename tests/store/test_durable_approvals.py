"""Approvals that wait, across processes, on SQLite and PostgreSQL (API.md §Durable sessions).

Process A defers a call, B lists and decides it, C resumes: the call runs exactly once. Every
agent is a real child process (`durable_agents.py run`); the tools record each start in an
effects file, which is how "ran once" is counted.
"""

from __future__ import annotations

import json
import signal
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from children import Child, child_env
from store_workers import Spec, open_store

from agentcore.history import tool_calls_of, tool_results_of
from agentcore.store.journal import input_hash
from agentcore.testing import ModelServer

AGENTS = Path(__file__).with_name("durable_agents.py")


class Agents:
    """Runs `durable_agents.py run` jobs against one session, one store, one model server."""

    def __init__(self, spec: Spec, server: ModelServer, effects: Path) -> None:
        self.spec, self.server, self.effects = spec, server, effects
        self.base = {"spec": list(spec), "session": "s", "base_url": server.base_url, "lease": 0.5}

    def start(self, action: str, **job: Any) -> Child:
        argv = [sys.executable, str(AGENTS), "run", json.dumps({**self.base, "action": action, **job})]
        return Child(argv, child_env(AGENTCORE_EFFECTS=str(self.effects)))

    def run(self, action: str, **job: Any) -> dict[str, Any]:
        child = self.start(action, **job)
        result: dict[str, Any] = json.loads(child.until(lambda line: line.startswith("{")))
        assert child.finish() == 0
        return result

    def ran(self) -> Counter[str]:
        text = self.effects.read_text() if self.effects.exists() else ""
        return Counter(line.split()[1] for line in text.splitlines())

    def history(self) -> list[dict[str, Any]]:
        store = open_store(self.spec)
        try:
            return store.load("s")
        finally:
            store.close()


@pytest.fixture
def agents(store_spec: Spec, tmp_path: Path) -> Iterator[Agents]:
    with ModelServer() as server:
        yield Agents(store_spec, server, tmp_path / "effects.log")


def approval_then(agents: Agents, *after: Any) -> None:
    agents.server.add({"tool_calls": [{"name": "approve_me", "arguments": {"tag": "x"}}]})
    for item in after:
        agents.server.add(item)


def results(history: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p["tool_call_id"]: p for m in history for p in tool_results_of(m)}


def test_deferred_in_a_decided_in_b_run_once_in_c(agents: Agents) -> None:
    approval_then(agents, "approved and done")
    a = agents.run("send", input="tidy up")
    assert a["reason"] == "approval"
    [waiting] = a["pending"]
    assert waiting["input_hash"] == input_hash({"tag": "x"})
    b = agents.run("pending")
    assert b["pending"] == [waiting], "any process that opens the session sees what waits"
    agents.run("decide", call=waiting["tool_call_id"], allow=True, hash=waiting["input_hash"])
    assert agents.run("pending")["pending"] == []
    c = agents.run("resume")
    assert (c["reason"], c["text"]) == ("no-tool", "approved and done")
    assert agents.ran() == {waiting["tool_call_id"]: 1}
    assert results(agents.history())[waiting["tool_call_id"]]["output"] == {
        "type": "text",
        "value": "approved x",
    }
    again = agents.run("resume")
    assert "error" not in again and agents.ran() == {waiting["tool_call_id"]: 1}, "the approval was consumed"


def test_a_decision_on_a_stale_input_hash_is_a_conflict_and_on_a_decided_call_a_request_error(
    agents: Agents,
) -> None:
    approval_then(agents)
    [waiting] = agents.run("send", input="tidy up")["pending"]
    stale = agents.run("decide", call=waiting["tool_call_id"], allow=True, hash=input_hash({"tag": "y"}))
    assert stale["error"] == "conflict"
    agents.run("decide", call=waiting["tool_call_id"], allow=False, reason="not today")
    twice = agents.run("decide", call=waiting["tool_call_id"], allow=True)
    assert twice["error"] == "request"
    agents.server.add("understood")
    assert agents.run("resume")["text"] == "understood"
    part = results(agents.history())[waiting["tool_call_id"]]
    assert part["output"] == {"type": "execution-denied", "value": "not today"}
    assert agents.ran() == {}


def test_two_processes_resuming_one_decided_call_at_once_run_it_once(agents: Agents) -> None:
    approval_then(agents, "done", "done")
    [waiting] = agents.run("send", input="tidy up")["pending"]
    agents.run("decide", call=waiting["tool_call_id"], allow=True)
    both = [agents.start("resume", wait=True) for _ in range(2)]
    for child in both:
        assert child.line() == "ready"
    for child in both:
        child.write("go")
    outcomes = [json.loads(c.until(lambda line: line.startswith("{"))) for c in both]
    for child in both:
        assert child.finish() == 0
    assert agents.ran() == {waiting["tool_call_id"]: 1}, outcomes
    # One runs it; the other either superseded that run or found nothing left to do.
    assert all(o.get("reason") == "no-tool" or o.get("error") == "aborted" for o in outcomes), outcomes
    history = agents.history()
    calls = {p["tool_call_id"] for m in history for p in tool_calls_of(m)}
    assert set(results(history)) == calls


@pytest.mark.parametrize(("tool", "replayed"), [("approve_me", False), ("safe_effect", True)])
def test_a_resume_retried_after_a_crash_between_start_and_result(
    agents: Agents, tool: str, replayed: bool
) -> None:
    """The approved (or replayable) call hangs; its process is killed; a new process resumes."""
    agents.server.add({"tool_calls": [{"name": tool, "arguments": {"tag": "hang-once"}}]})
    agents.server.add("recovered")
    if tool == "approve_me":
        [waiting] = agents.run("send", input="go")["pending"]
        agents.run("decide", call=waiting["tool_call_id"], allow=True)
        crashing = agents.start("resume")
    else:
        crashing = agents.start("send", input="go")
    crashing.until(lambda line: line == "hanging")
    crashing.process.send_signal(signal.SIGKILL)
    crashing.finish()
    retried = agents.run("resume")
    assert retried["text"] == "recovered"
    [call_id] = {p["tool_call_id"] for m in agents.history() for p in tool_calls_of(m)}
    part = results(agents.history())[call_id]
    if replayed:
        assert agents.ran() == {call_id: 2}
        assert part["output"] == {"type": "text", "value": "safe hang-once"}
    else:
        assert agents.ran() == {call_id: 1}, "a started call that is not replayable never runs again"
        assert part["interrupted"] is True and part["output"]["type"] == "error-text"


def test_a_resume_taking_over_a_run_runs_the_calls_that_run_never_started(agents: Agents) -> None:
    """A handover: the superseded run answers only the call it started (interrupted); the
    resume that stopped it runs the other approved call, once."""
    agents.server.add(
        {
            "tool_calls": [
                {"name": "approve_me", "arguments": {"tag": "hang-once"}},
                {"name": "approve_me", "arguments": {"tag": "second"}},
            ]
        }
    )
    agents.server.add("both handled")
    sequential = {"config": {"tool_execution": "sequential"}}
    first, second = agents.run("send", input="go", **sequential)["pending"]
    for call in (first, second):
        agents.run("decide", call=call["tool_call_id"], allow=True)
    a = agents.start("resume", **sequential)
    a.until(lambda line: line == "hanging")
    b = agents.run("resume", **sequential)
    a_result = json.loads(a.until(lambda line: line.startswith("{")))
    a.finish()
    assert a_result["error"] == "aborted" and b["text"] == "both handled"
    parts = results(agents.history())
    assert parts[first["tool_call_id"]]["interrupted"] is True
    assert parts[second["tool_call_id"]]["output"] == {"type": "text", "value": "approved second"}
    assert agents.ran() == {first["tool_call_id"]: 1, second["tool_call_id"]: 1}
