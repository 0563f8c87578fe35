"""Writers in separate processes, on SQLite and PostgreSQL: nothing interleaves, nothing is lost.

The children are real processes (`store_workers.py`), each with its own connection; the
verdicts hold whichever process the scheduler lets in first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from store_workers import Spec, open_store

WORKERS = Path(__file__).with_name("store_workers.py")
ROOT = Path(__file__).resolve().parents[2]


def child_env() -> dict[str, str]:
    """The children import this checkout's agentcore, whatever else is installed."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def start(command: str, args: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKERS), command, json.dumps(args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
    )


def test_two_processes_on_one_session_never_interleave_and_the_loser_writes_nothing(
    store_spec: Spec,
) -> None:
    """Each round both processes append a batch expecting the same length: one wins, one conflicts."""
    rounds, batch = 40, 5
    duelists = [
        start("duel", {"spec": list(store_spec), "session": "duel", "batch": batch, "name": name})
        for name in ("left", "right")
    ]
    try:
        for process in duelists:
            assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        winners = []
        for round_ in range(rounds):
            # Both are blocked reading stdin: releasing them one line apart lets them race.
            for process in duelists:
                assert process.stdin is not None
                process.stdin.write(f"{round_}\n")
                process.stdin.flush()
            outcomes = [p.stdout.readline().strip() for p in duelists if p.stdout is not None]
            assert sorted(outcomes) == ["conflict", "won"], f"round {round_}: {outcomes}"
            winners.append(("left", "right")[outcomes.index("won")])
    finally:
        for process in duelists:
            if process.stdin is not None:
                process.stdin.close()
            process.wait(timeout=60)
    store = open_store(store_spec)
    stored = store.load("duel")
    store.close()
    assert len(stored) == rounds * batch
    for round_, winner in enumerate(winners):
        expected = [{"writer": winner, "round": round_, "k": k} for k in range(batch)]
        assert stored[round_ * batch : (round_ + 1) * batch] == expected


@pytest.mark.timeout(1200)  # 32,000 commits from 8 processes: minutes on a loaded 2-core machine
def test_eight_processes_two_hundred_sessions_twenty_appends_leave_exactly_the_rows(
    store_spec: Spec,
) -> None:
    writers, sessions, appends = 8, 200, 20
    args = {"spec": list(store_spec), "writers": writers, "sessions": sessions, "appends": appends}
    processes = [start("hammer", {**args, "writer": w}) for w in range(writers)]
    for process in processes:
        out, _ = process.communicate(timeout=600)
        assert process.returncode == 0, out
    store = open_store(store_spec)
    listed = store.sessions()
    assert sorted(s["id"] for s in listed) == sorted(f"s{s}" for s in range(sessions))
    assert {s["length"] for s in listed} == {writers * appends}
    for s in range(sessions):
        stored = store.load(f"s{s}")
        assert Counter(e["w"] for e in stored) == dict.fromkeys(range(writers), appends)
        for w in range(writers):
            assert [e["k"] for e in stored if e["w"] == w] == list(range(appends)), f"s{s}, writer {w}"
    store.close()


def test_postgres_store_without_psycopg_names_the_extra(tmp_path: Path) -> None:
    """A blocker on sys.path makes `import psycopg` fail in a child, as on a machine without the extra."""
    (tmp_path / "psycopg.py").write_text("raise ImportError('not installed here')\n")
    code = (
        "from agentcore import AgentError\n"
        "from agentcore.store import PostgresStore\n"
        "try:\n    PostgresStore('host=127.0.0.1')\n"
        "except AgentError as e:\n    print(e.kind, e)\n"
    )
    env = child_env()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.startswith("config "), out.stderr
    assert "pip install 'agentcore[postgres]'" in out.stdout
