"""One run per session across processes, on SQLite and PostgreSQL (API.md §Durable sessions).

A send in process B stops A's run and goes on from the store; `store.stop()` / `store.steer()`
from a third process reach the run; a holder killed with SIGKILL is replaced after
`session_lease`; two busy writers never interleave and never conflict; `store.watch()` from
another process sees every event of a run. Latencies are measured by bench/durable_latency.py,
not asserted here.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from children import Child, child_env
from store_workers import Spec, open_store

from agentcore.history import tool_calls_of, tool_results_of
from agentcore.testing import ModelServer, Recorded

AGENTS = Path(__file__).with_name("durable_agents.py")
WORKERS = Path(__file__).with_name("run_state_workers.py")


def model(recorded: Recorded) -> dict[str, Any]:
    """ "hang" → a 60 s stoppable tool; "loop" → a short tool every round until a steer arrives;
    anything else → a reply quoting the last user message."""
    messages = recorded.body.get("messages", []) if isinstance(recorded.body, dict) else []
    users = [m for m in messages if m.get("role") == "user"]
    last_user = str(users[-1].get("content")) if users else ""
    after_tool = bool(messages) and messages[-1].get("role") == "tool"
    if last_user == "hang" and not after_tool:
        return {"tool_calls": [{"name": "slow", "arguments": {"seconds": 60}}]}
    if last_user == "loop":
        return {"tool_calls": [{"name": "slow", "arguments": {"seconds": 0.05}}]}
    return {"text": f"reply to {last_user}"}


class Agents:
    def __init__(self, spec: Spec, server: ModelServer) -> None:
        self.spec = spec
        self.base = {"spec": list(spec), "session": "s", "base_url": server.base_url, "lease": 0.5}

    def start(self, action: str, **job: Any) -> Child:
        argv = [sys.executable, str(AGENTS), "run", json.dumps({**self.base, "action": action, **job})]
        return Child(argv, child_env())

    @staticmethod
    def result(child: Child) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(child.until(lambda line: line.startswith("{")))
        assert child.finish() == 0
        return result

    def run(self, action: str, **job: Any) -> dict[str, Any]:
        return self.result(self.start(action, **job))

    def history(self) -> list[dict[str, Any]]:
        store = open_store(self.spec)
        try:
            return store.load("s")
        finally:
            store.close()


@pytest.fixture
def agents(store_spec: Spec) -> Iterator[Agents]:
    with ModelServer(default=model) as server:
        yield Agents(store_spec, server)


def assert_valid(history: list[dict[str, Any]]) -> None:
    calls = [p["tool_call_id"] for m in history for p in tool_calls_of(m)]
    results = [p["tool_call_id"] for m in history for p in tool_results_of(m)]
    assert sorted(calls) == sorted(results) and len(set(calls)) == len(calls)


def test_a_send_in_another_process_stops_the_run_and_goes_on_from_the_store(agents: Agents) -> None:
    a = agents.start("send", input="hang")
    a.until(lambda line: line == "slow")
    b = agents.run("send", input="never mind")
    a_result = agents.result(a)
    assert a_result["error"] == "aborted", "the superseded caller gets aborted"
    assert b["reason"] == "no-tool" and b["text"] == "reply to never mind"
    history = agents.history()
    assert_valid(history)
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "user", "assistant"]
    [result] = tool_results_of(history[2])
    assert result["interrupted"] is True, "A's open call was closed as by stop()"


def test_store_stop_from_a_third_process_ends_the_run(agents: Agents) -> None:
    a = agents.start("send", input="hang")
    a.until(lambda line: line == "slow")
    stopped = agents.run("stop")
    assert stopped["value"] is True
    assert agents.result(a)["error"] == "aborted"
    history = agents.history()
    assert_valid(history)
    assert tool_results_of(history[-1])[0]["interrupted"] is True
    assert agents.run("stop")["value"] is False, "nothing runs any more"


def test_store_steer_from_a_third_process_is_delivered_after_the_running_tool(agents: Agents) -> None:
    a = agents.start("send", input="loop")
    a.until(lambda line: line == "slow")
    assert agents.run("steer", message="turn left")["value"] is None
    result = agents.result(a)
    assert result["text"] == "reply to turn left"
    history = agents.history()
    assert_valid(history)
    steer = next(i for i, m in enumerate(history) if m.get("content") == "turn left")
    assert history[steer - 1]["role"] == "tool", "delivered after a round's results"
    store = open_store(agents.spec)
    assert store.session("s").queues().queued() == {"steer": [], "follow_up": []}
    store.close()


def test_a_follow_up_queued_from_another_process_waits_for_the_next_run(agents: Agents) -> None:
    agents.run("follow_up", message="and then?")
    result = agents.run("send", input="first")
    assert result["text"] == "reply to and then?"
    assert [m.get("content") for m in agents.history() if m["role"] == "user"] == ["first", "and then?"]


def test_a_holder_killed_with_sigkill_is_replaced_after_its_lease(agents: Agents) -> None:
    a = agents.start("send", input="hang")
    a.until(lambda line: line == "slow")
    a.process.send_signal(signal.SIGKILL)
    a.finish()
    b = agents.run("send", input="are you there?")
    assert b["text"] == "reply to are you there?"
    history = agents.history()
    assert_valid(history)
    assert tool_results_of(history[2])[0]["interrupted"] is True


def test_two_busy_writers_never_interleave_and_never_conflict(agents: Agents) -> None:
    writers = [agents.start("sends", name=name, count=12) for name in ("left", "right")]
    outcomes = [agents.result(w)["outcomes"] for w in writers]
    flat = [o for per in outcomes for o in per]
    assert set(flat) <= {"no-tool", "aborted"}, outcomes
    assert "conflict" not in flat
    history = agents.history()
    assert_valid(history)
    users = [m["content"] for m in history if m["role"] == "user"]
    assert len(users) == len(flat), "every send wrote its input once"
    for name in ("left", "right"):
        mine = [u for u in users if u.startswith(name)]
        assert mine == [f"{name} {n}" for n in range(12)], "each writer's inputs in its own order"
    # Every completed send's reply follows its own input: nothing interleaved inside a run.
    for index, entry in enumerate(history):
        if entry["role"] == "assistant":
            before = next(m for m in reversed(history[:index]) if m["role"] == "user")
            assert entry["content"][0]["text"] == f"reply to {before['content']}"


def test_watch_from_another_process_sees_every_event_of_the_run_in_order(agents: Agents) -> None:
    watcher = Child(
        [
            sys.executable,
            str(WORKERS),
            "watch",
            # A long quiet timeout: no verdict may depend on how fast the agent process starts.
            json.dumps({"spec": list(agents.spec), "session": "s", "timeout": 120}),
        ]
    )
    assert watcher.line() == "ready"
    a = agents.start("send", input="hello", events=True)
    lines: list[str] = []
    while True:
        line = a.line()
        if line.startswith("{"):
            break
        lines.append(line)
    a.finish()
    own = [json.loads(line[6:]) for line in lines if line.startswith("event ")]
    watched = []
    while len(watched) < len(own):
        watched.append(json.loads(watcher.line()))
    watcher.process.terminate()
    watcher.finish()
    assert [{k: v for k, v in e.items() if k != "seq"} for e in watched] == own
    seqs = [e["seq"] for e in watched]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert own[0]["type"] == "agent_start" and own[-1]["type"] == "agent_end"
