"""SIGKILL an agent with a session at random moments; the stored history must always be usable.

A child process runs a three-round tool task against the scripted model server, with a session
in the store under test, and reports progress markers (`stream` during a reply, `tool` during
tool calls, `step` between rounds). The test kills it with SIGKILL right after a randomly chosen
marker, plus a random few milliseconds. Whatever the moment, the stored history

- loads,
- is a prefix of what the uninterrupted run writes (compared entry by entry, ids aside), and
- is continued by a new `Agent(session=...)`: calls left open get interrupted results, the task
  finishes, and nothing stored before is changed.

The kill timing varies from run to run; none of these verdicts depends on it.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from store_workers import Spec, agent_config, open_store, slow_echo

from agentcore import Agent, tool
from agentcore.history import open_calls, tool_calls_of, tool_results_of
from agentcore.testing import ModelServer, Recorded

KILLS = 50
ROUNDS = 3
PHASES = ("stream", "tool", "step")
WORKERS = Path(__file__).with_name("store_workers.py")
ROOT = Path(__file__).resolve().parents[2]
FINAL_TEXT = "All three rounds are done; every echo came back."


def scripted_reply(recorded: Recorded) -> dict[str, Any]:
    """The reply depends only on how many tool rounds the request already holds: any order works."""
    done = sum(1 for m in recorded.body["messages"] if m.get("role") == "assistant" and m.get("tool_calls"))
    stream = {"chunk_delay": 0.005, "chunk_size": 16}
    if done >= ROUNDS:
        return {"text": FINAL_TEXT, **stream}
    calls = [
        {"id": f"r{done}{side}", "name": "slow_echo", "arguments": {"text": f"{side}{done}"}}
        for side in ("a", "b")
    ]
    return {"text": f"Round {done}: echoing two words now.", "tool_calls": calls, **stream}


class Launcher:
    """The forking child launcher of store_workers.py, driven line by line."""

    def __init__(self) -> None:
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        self.process = subprocess.Popen(
            [sys.executable, str(WORKERS), "launcher", "{}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": path},
        )
        assert self.readline() == "ready"

    def readline(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, "the launcher exited"
        return line.strip()

    def run(self, job: dict[str, Any], kill_after: tuple[str, int] | None, delay_s: float) -> list[str]:
        """Run `job` in a fresh child; SIGKILL it after the n-th `phase` marker. Returns the markers seen."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        pid_line = self.readline()
        assert pid_line.startswith("pid "), pid_line
        pid = int(pid_line.split()[1])
        seen: list[str] = []
        while True:
            line = self.readline()
            if line.startswith("exit "):
                ended = json.loads(line[5:])
                assert kill_after is None or ended["signal"] == signal.SIGKILL or "done" in seen, ended
                assert ended["code"] in (0, None), f"the child failed: {ended}"
                return seen
            seen.append(line)
            if kill_after is not None and Counter(seen)[kill_after[0]] == kill_after[1]:
                if delay_s:
                    # Not a synchronisation: a random extra moment, so kills land mid-step too.
                    time.sleep(delay_s)
                os.kill(pid, signal.SIGKILL)
                kill_after = None

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


@pytest.fixture
def launcher() -> Iterator[Launcher]:
    started = Launcher()
    yield started
    started.close()


def normalised(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries without the fields that differ between runs (random ids and timestamps)."""
    return [{k: v for k, v in entry.items() if k not in ("id", "created_at")} for entry in history]


def committed_before(markers: list[str]) -> int:
    """How many entries must be stored once the child has written `markers`.

    Each marker is written after the commits it follows: `tool` after the round's assistant entry,
    `step` after the round's assistant and tool entries. So the user entry, two per finished step,
    and one more when a round's tools had started.
    """
    steps = markers.count("step")
    last_step = max((i for i, m in enumerate(markers) if m == "step"), default=-1)
    tools_started = "tool" in markers[last_step + 1 :]
    return 1 + 2 * steps + int(tools_started)


def assert_every_call_has_one_result(history: list[dict[str, Any]]) -> None:
    calls = [p["tool_call_id"] for m in history for p in tool_calls_of(m)]
    results = Counter(p["tool_call_id"] for m in history for p in tool_results_of(m))
    assert results == Counter(calls), "every tool call needs exactly one result"


@pytest.mark.timeout(900)
def test_a_killed_run_leaves_a_loadable_prefix_that_a_new_agent_continues(
    store_spec: Spec, launcher: Launcher
) -> None:
    store = open_store(store_spec)
    with ModelServer(default=scripted_reply) as server:
        job = {"spec": list(store_spec), "base_url": server.base_url, "input": "Echo in three rounds."}
        markers = launcher.run({**job, "session": "reference"}, None, 0.0)
        reference = normalised(store.load("reference"))
        assert markers[-1] == "done" and reference[-1]["content"][0]["text"] == FINAL_TEXT
        assert len(reference) == 2 + 2 * ROUNDS
        counts = Counter(markers)
        for attempt in range(KILLS):
            rng = random.Random(attempt)
            phase = PHASES[attempt % len(PHASES)]
            kill_after = (phase, rng.randint(1, counts[phase]))
            session = f"killed-{attempt}"
            seen = launcher.run(
                {**job, "session": session}, kill_after, rng.choice([0.0, 0.0, rng.uniform(0, 0.03)])
            )

            stored = store.load(session)
            where = f"attempt {attempt}, killed after {kill_after}: {len(stored)} entries stored"
            assert normalised(stored) == reference[: len(stored)], where
            assert len(stored) >= min(committed_before(seen), len(reference)), f"{where}: {seen}"
            left_open = open_calls(stored)

            agent = Agent(
                config=agent_config(server.base_url), tools=[tool(slow_echo)], session=store.session(session)
            )
            assert agent.history == stored
            result = agent.send("Please go on.")
            assert result.text == FINAL_TEXT, where
            final = store.load(session)
            assert final[: len(stored)] == stored, f"{where}: stored entries changed"
            assert final == agent.history
            assert_every_call_has_one_result(final)
            if left_open:
                closing = final[len(stored)]
                assert [p["tool_call_id"] for p in tool_results_of(closing)] == [
                    c["tool_call_id"] for c in left_open
                ], where
                assert all(p["output"]["type"] == "error-text" for p in tool_results_of(closing))
    store.close()
