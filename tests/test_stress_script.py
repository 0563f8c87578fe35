"""scripts/stress.py runs and reports: a smoke test with tiny numbers (the real runs are in the README)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "stress.py"


def stress(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=240
    )


def test_sessions_by_rounds_report_every_figure() -> None:
    done = stress("--sessions", "3", "--rounds", "2")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "sessions 3 x rounds 2, tools: memory + file, history: memory" in out
    assert re.search(r"^sends: 6 completed, 0 failed in [\d.]+ s$", out, re.M), out
    assert re.search(r"^send latency: p50 [\d.]+ ms, p99 [\d.]+ ms$", out, re.M), out
    # Each send is two model requests: the tool calls, then the answer.
    assert re.search(r"^model requests: 12 \([\d.]+/s\)$", out, re.M), out
    for row in ("rss MB", "open fds", "threads", "child procs"):
        assert re.search(rf"^{row} +[\d.]+ +[\d.]+ +[+-][\d.]+$", out, re.M), (row, out)


def test_sqlite_sessions_store_every_entry(tmp_path: Path) -> None:
    done = stress("--sessions", "2", "--rounds", "3", "--sqlite", str(tmp_path / "stress.db"))
    assert done.returncode == 0, done.stderr
    assert "history: sqlite" in done.stdout
    assert "sqlite: 24 entries stored, 24 expected" in done.stdout


def test_duration_makes_a_soak_with_an_rss_slope() -> None:
    done = stress(
        "--sessions", "2", "--rounds", "2", "--duration", "3", "--sample-every", "0.2", "--warmup", "0.5"
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"^soak: \d+ waves in \d+ s, RSS sampled every 0.2 s$", done.stdout, re.M), done.stdout
    assert re.search(r"^rss slope after 0.5 s warm-up: [+-][\d.]+ MB/min", done.stdout, re.M), done.stdout


def test_processes_mode_reports_sends_supersedes_stops_and_no_violation() -> None:
    """Durable sessions: two processes on one session, superseding each other, stopped from here."""
    done = stress("--processes", "2", "--rounds", "4")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "processes 2 (1 sessions) x rounds 4, store: sqlite" in out
    assert re.search(
        r"^sends: 8 \(\d+ completed, \d+ stopped: \d+ supersedes, \d+ by store.stop\) in", out, re.M
    ), out
    assert re.search(r"^violations: 0$", out, re.M), out


def test_processes_mode_needs_pairs() -> None:
    done = stress("--processes", "3")
    assert done.returncode != 0 and "even number" in done.stderr


def test_celery_mode_reports_sends_kills_redeliveries_and_no_violation() -> None:
    """Real Redis, four real Celery workers, one of them killed with SIGKILL and replaced."""
    done = stress("--celery", "--sessions", "3", "--rounds", "2", "--kills", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "celery: 3 sessions x 2 sends, 4 workers (threads x4, threads x4, prefork x2, prefork x2)" in out
    assert re.search(r"^sends: 6 \(\d+ answered, \d+ taken over by a redelivery, 0 failed\) in", out, re.M), (
        out
    )
    kills = r"^worker kills: 1, task deliveries: \d+ \(\d+ redelivered\), tasks started again .*: \d+$"
    assert re.search(kills, out, re.M), out
    assert re.search(r"^violations: 0$", out, re.M), out
