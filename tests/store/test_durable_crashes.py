"""The crash matrix: SIGKILL an agent at random moments of a durable run, then resume it elsewhere.

API.md §Durable sessions, "Call journal". Each trial is a fresh session. A forked child runs a
three-round task: round 1 calls a memory tool, a file tool (in a tool process) and a
`replay: "safe"` memory tool (in parallel, or one at a time in half the runs); round 2 a
`needs_approval` tool (deferred: the run ends with "approval"; the child then approves it and
resumes) and the memory tool again; round 3 answers. The child is killed with SIGKILL after a
random progress marker plus a random few milliseconds, or at a random instant. Every tool start
is a line in an effects file. Then `resume()` in a new process (approving what waits) must leave:

- a valid history: every call with exactly one result;
- every entry committed before the kill, unchanged (a prefix);
- no non-replayable call started twice (effects file), whatever the moment;
- each call open at the kill treated by its journal row: never started → ran once now, with its
  real result; started and not replayable → the interrupted result, carrying `"interrupted": true`;
  started and replayable → ran again; waiting or approved → ran once.

The kill moments vary from run to run; none of the verdicts depends on them. The counts of
phases hit and of open calls by journal state are printed (pytest -s) for the report.
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from store_workers import Spec, open_store

from agentcore.history import tool_calls_of, tool_results_of
from agentcore.testing import ModelServer, Recorded

KILLS = int(os.environ.get("AGENTCORE_CRASH_KILLS", "200"))
MARKERS = ("stream", "tool", "step")
REPLAYABLE = {"safe_effect"}
AGENTS = Path(__file__).with_name("durable_agents.py")
ROOT = Path(__file__).resolve().parents[2]
LONG_S = 120.0


def crash_model(recorded: Recorded) -> dict[str, Any]:
    """Round 1: three tools; round 2: the approval tool and the memory tool again; round 3: done."""
    messages = recorded.body.get("messages", []) if isinstance(recorded.body, dict) else []
    round_ = sum(1 for m in messages if m.get("role") == "assistant")
    reply: dict[str, Any] = {"text": f"round {round_} under way", "chunk_size": 4, "chunk_delay": 0.002}
    if round_ == 0:
        reply["tool_calls"] = [
            {"name": "mem_effect", "arguments": {"tag": "a"}},
            {"name": "file_effect", "arguments": {"tag": "b"}},
            {"name": "safe_effect", "arguments": {"tag": "c"}},
        ]
    elif round_ == 1:
        reply["tool_calls"] = [
            {"name": "approve_me", "arguments": {"tag": "d"}},
            {"name": "mem_effect", "arguments": {"tag": "e"}},
        ]
    else:
        reply["text"] = "all done"
    return reply


class Launcher:
    """`durable_agents.py launcher`: forks a fresh child per job (imports paid once)."""

    def __init__(self, effects: Path) -> None:
        path = os.pathsep.join(
            p for p in (str(ROOT), str(AGENTS.parent), os.environ.get("PYTHONPATH", "")) if p
        )
        env = {**os.environ, "PYTHONPATH": path, "AGENTCORE_EFFECTS": str(effects)}
        # A session of its own: closing it ends its forked jobs too (`close`), whatever they do.
        self.process = subprocess.Popen(
            [sys.executable, str(AGENTS), "launcher", "{}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        assert self.line() == "ready"

    def _read(self) -> None:
        assert self.process.stdout is not None
        for text in self.process.stdout:
            self.lines.put(text.rstrip("\n"))
        self.lines.put(None)

    def line(self) -> str:
        try:
            text = self.lines.get(timeout=LONG_S)
        except queue.Empty:
            raise AssertionError(f"no line from the launcher within {LONG_S} s") from None
        assert text is not None, "the launcher ended early"
        return text

    def start(self, job: dict[str, Any]) -> int:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        first = self.line()
        assert first.startswith("pid "), first
        return int(first.split()[1])

    def until_exit(self) -> tuple[list[str], dict[str, Any]]:
        seen = []
        while True:
            text = self.line()
            if text.startswith("exit "):
                return seen, json.loads(text[5:])
            seen.append(text)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=LONG_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@pytest.fixture
def effects(tmp_path: Path) -> Path:
    return tmp_path / "effects.log"


@pytest.fixture
def launcher(effects: Path) -> Iterator[Launcher]:
    started = Launcher(effects)
    yield started
    started.close()


def kill_during(launcher: Launcher, job: dict[str, Any], rng: random.Random) -> str:
    """Start `job`, SIGKILL it at a random moment; returns the phase the kill was aimed at."""
    pid = launcher.start(job)
    if rng.random() < 0.3:
        phase, marker, count = "instant", None, 0
        time.sleep(rng.uniform(0, 0.25))
    else:
        marker = rng.choice(MARKERS)
        count = rng.randint(1, 3 if marker != "stream" else 12)
        phase = f"{marker}#{count}"
    seen: list[str] = []
    while marker is not None:
        text = launcher.line()
        if text.startswith("exit "):
            return f"{phase} (ended first)"
        seen.append(text)
        if seen.count(marker) >= count:
            time.sleep(rng.uniform(0, 0.01))
            break
    os.kill(pid, signal.SIGKILL)
    _, ended = launcher.until_exit()
    return phase if ended["killed"] else f"{phase} (ended first)"


def journal_rows(spec: Spec, session: str) -> dict[str, str]:
    """Journal states of the session's calls, read with the database's own client."""
    kind, target = spec
    if kind == "sqlite":
        import sqlite3

        with sqlite3.connect(target) as connection:
            rows = connection.execute(
                "SELECT call_id, state FROM agentcore_calls WHERE session = ?", (session,)
            ).fetchall()
    else:
        import psycopg

        with psycopg.connect(target) as connection:
            rows = connection.execute(
                "SELECT call_id, state FROM agentcore_calls WHERE session = %s", (session,)
            ).fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


def calls_and_results(
    history: list[dict[str, Any]],
) -> tuple[dict[str, str], dict[str, list[dict[str, Any]]]]:
    calls = {str(p["tool_call_id"]): str(p["tool_name"]) for m in history for p in tool_calls_of(m)}
    results: dict[str, list[dict[str, Any]]] = {}
    for message in history:
        for part in tool_results_of(message):
            results.setdefault(str(part["tool_call_id"]), []).append(part)
    return calls, results


def check_trial(
    spec: Spec,
    session: str,
    before: list[dict[str, Any]],
    rows: dict[str, str],
    effects: Path,
    seen: Counter[str],
) -> None:
    store = open_store(spec)
    after = store.load(session)
    store.close()
    assert after[: len(before)] == before, "an entry committed before the kill changed or was lost"
    calls, results = calls_and_results(after)
    assert set(results) == set(calls), "a call without a result, or a result without a call"
    assert all(len(r) == 1 for r in results.values()), "a call with two results"
    lines = effects.read_text().splitlines() if effects.exists() else []
    counts = Counter(line.split()[1] for line in lines if line.split()[1] in calls)
    for call_id, name in calls.items():
        if name not in REPLAYABLE:
            assert counts[call_id] <= 1, f"{name} {call_id} started {counts[call_id]} times"
    open_before = {cid for cid in calls_and_results(before)[0] if cid not in calls_and_results(before)[1]}
    for call_id in open_before:
        name, part, state = calls[call_id], results[call_id][0], rows.get(call_id)
        seen[f"{state or 'never started'}{' (replay safe)' if name in REPLAYABLE else ''}"] += 1
        if state == "started" and name not in REPLAYABLE:
            assert part.get("interrupted") is True, f"{name}: started, not replayable: {part}"
            assert part["output"]["type"] == "error-text"
        else:
            # Never started, waiting, approved, or replayable: it ran (once) after the crash.
            assert counts[call_id] >= 1, f"{name} {call_id} (journal: {state}) never ran"
            assert not part.get("interrupted"), f"{name} {call_id} (journal: {state}): {part}"
    if after:
        assert after[-1]["role"] == "assistant" and after[-1]["content"][0]["text"] == "all done"


@pytest.mark.timeout(1800)  # 200 kills per store: minutes on a loaded 2-core machine
def test_sigkill_at_random_moments_then_resume_in_a_new_process(
    store_spec: Spec, launcher: Launcher, effects: Path
) -> None:
    rng = random.Random()
    phases: Counter[str] = Counter()
    open_calls: Counter[str] = Counter()  # calls open at the kill, by their journal state
    killed = trial = 0
    with ModelServer(default=crash_model) as server:
        # Until KILLS runs were killed mid-run (a run that ended before its kill is checked too).
        while killed < KILLS:
            assert trial < 3 * KILLS, f"runs keep ending before their kill: {phases}"
            session = f"crash-{trial}"
            trial += 1
            job = {
                "spec": list(store_spec),
                "session": session,
                "base_url": server.base_url,
                "file_tools": True,
                "lease": 0.2,
                "action": "task",
                "input": "do the three rounds",
                # Half the runs start their calls one at a time: a kill during the first leaves
                # the later ones never started.
                "config": {"tool_execution": rng.choice(["parallel", "sequential"])},
            }
            phase = kill_during(launcher, job, rng)
            phases[phase] += 1
            killed += "ended first" not in phase
            store = open_store(store_spec)
            before = store.load(session)
            store.close()
            rows = journal_rows(store_spec, session)
            launcher.start({**job, "action": "recover"})
            output, ended = launcher.until_exit()
            assert ended == {"killed": False, "code": 0}, output
            result = json.loads(next(o for o in output if o.startswith("result "))[7:])
            assert "error" not in result, result
            check_trial(store_spec, session, before, rows, effects, open_calls)
    print(f"\n{store_spec[0]}: {killed} kills in {trial} trials; phases: {dict(sorted(phases.items()))}")
    print(f"{store_spec[0]}: calls open at the kill, by journal state: {dict(sorted(open_calls.items()))}")
