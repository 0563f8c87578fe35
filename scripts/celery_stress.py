"""`scripts/stress.py --celery`: sessions sent to real Celery workers that are killed at random.

    python scripts/stress.py --celery --sessions 200 --rounds 5 --kills 10 [--postgres DSN]

A `redis-server` on a free port in a temp dir is the broker, four `celery worker` processes (two
threads pools of 4, two prefork pools of 2; tests/celery/celery_tasks.py is their app) run the
tasks against a SQLite file (or `--postgres DSN`, a schema of its own), and this process is the
web process: one thread per 10 sessions, each session sending `--rounds` messages one after the
other with `task.send(...)` — what docs/API.md tells users: it waits for the result and starts
the task again, with the same entry id, when no worker took it within `--restart-after` seconds
(Redis can lose a task handed to a worker killed that instant, celery/celery#4354). Each send is
two model requests: the model calls a memory tool and a file tool (neither replayable; each takes
up to 0.2 s), then answers quoting the input.
Meanwhile `--kills` times a random worker is killed with SIGKILL (its whole process group: a lost
machine) and a new one of the same pool started; its tasks come back after the broker's
visibility timeout (5 s) and are resumed by another worker.

It reports the sends, the redeliveries, the kills and the violations, which must be 0: a send
whose task failed or was not answered with the reply to its input; a stored history where an
input is not stored exactly once, is not answered exactly once (one "done: <input>" reply), a
call has no result or two, or a tool call started twice (the effects file).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CELERY_TESTS = ROOT / "tests" / "celery"
VISIBILITY_S = 5.0
POOLS = (("threads", 4), ("threads", 4), ("prefork", 2), ("prefork", 2))
RESTART_S = 30.0


def model(recorded: Any) -> dict[str, Any]:
    """Call both tools, then answer quoting the input (so a reply to another input shows)."""
    body = recorded.body if isinstance(recorded.body, dict) else {}
    messages = body.get("messages") or [{}]
    users = [m for m in messages if m.get("role") == "user"]
    text = str(users[-1].get("content", "")) if users else ""
    if messages[-1].get("role") == "tool":
        return {"text": f"done: {text}", "chunk_size": 4}
    calls = [{"name": "mem_effect", "arguments": {"tag": "nap"}}]
    calls.append({"name": "file_effect", "arguments": {"tag": "nap"}})
    return {"text": "On it.", "tool_calls": calls}


class Web:
    """The web process's sends: per session, `rounds` sends one after the other."""

    def __init__(self, run_agent: Any, rounds: int, restart_after: float = RESTART_S) -> None:
        self.run_agent, self.rounds, self.restart_after = run_agent, rounds, restart_after
        self.answered = self.superseded = 0
        self.failures: list[str] = []
        self.lock = threading.Lock()

    def session(self, session: str) -> None:
        for round_ in range(self.rounds):
            text = f"{session} message {round_}"
            try:
                result = self.run_agent.send(session, text, timeout=600.0, restart_after=self.restart_after)
            except Exception as error:  # a failed task is a violation, whatever it raised
                with self.lock:
                    self.failures.append(f"{session}: send {round_} failed: {error!r}")
                continue
            with self.lock:
                if result["superseded"]:
                    # Only a redelivery that took over a run still going ends so; history says
                    # whether the send was answered.
                    self.superseded += 1
                elif result["text"] == f"done: {text}":
                    self.answered += 1
                else:
                    self.failures.append(f"{session}: send {round_} answered {result['text']!r}")

    def sessions(self, names: list[str]) -> None:
        """One thread's sessions, one after the other."""
        for name in names:
            self.session(name)


class Restarts(logging.Handler):
    """Counts the tasks `task.send` started again (it logs a warning for each)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "starting it again" in record.getMessage():
            self.count += 1


def killer(cluster: Any, kills: int, total: int, web: Web, done: threading.Event, log: list[str]) -> None:
    """Kill a random worker after every total/(kills+1) answered sends; start one in its place."""
    for n in range(kills):
        threshold = total * (n + 1) // (kills + 1)
        while web.answered + web.superseded < threshold and not done.is_set():
            time.sleep(0.05)
        if done.is_set():
            return
        time.sleep(random.uniform(0, 0.5))
        victim = random.choice(cluster.alive())
        victim.kill()
        cluster.worker(victim.pool, victim.concurrency)
        log.append(victim.name)


def violations(store: Any, sessions: list[str], rounds: int, effects: Path, web: Web) -> list[str]:
    from agentcore.history import tool_calls_of, tool_results_of

    found = list(web.failures)
    started = [tuple(line.split()[:2]) for line in effects.read_text().splitlines() if line.strip()]
    calls = [row for row in started if row[0] != "task"]
    twice = {row for row in calls if calls.count(row) > 1}
    if twice:
        found.append(f"{len(twice)} tool calls started twice: {sorted(twice)[:5]}")
    for session in sessions:
        history = store.load(session)
        ids = [p["tool_call_id"] for m in history for p in tool_calls_of(m)]
        results = [p["tool_call_id"] for m in history for p in tool_results_of(m)]
        if sorted(ids) != sorted(results) or len(set(results)) != len(results):
            found.append(f"{session}: calls and results do not pair one to one")
        inputs = [m["content"] for m in history if m["role"] == "user"]
        expected = [f"{session} message {n}" for n in range(rounds)]
        if inputs != expected:
            found.append(f"{session}: inputs stored {inputs}, sent {expected}")
        replies = [_text(m) for m in history if m["role"] == "assistant"]
        for text in expected:
            if replies.count(f"done: {text}") != 1:
                found.append(f"{session}: {text!r} answered {replies.count(f'done: {text}')} times")
    return found


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if p.get("type") == "text")


def run(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(CELERY_TESTS))
    from cluster import RedisServer, Worker

    from agentcore.testing import ModelServer

    with tempfile.TemporaryDirectory(prefix="agentcore-celery-stress-") as folder:
        tmp = Path(folder)
        spec = ["postgres", _schema(args.postgres)] if args.postgres else ["sqlite", str(tmp / "s.db")]
        redis = RedisServer(tmp / "redis")
        try:
            with ModelServer(default=model) as server:
                return _run(args, tmp, redis, server, spec, Worker)
        finally:
            redis.stop()


def _schema(dsn: str) -> str:
    """A schema of this run's own on the server at `dsn`; the DSN that uses it."""
    import uuid

    import psycopg
    from psycopg.conninfo import make_conninfo

    schema = f"celery_stress_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
    return str(make_conninfo(dsn, options=f"-c search_path={schema}"))


def _run(args: argparse.Namespace, tmp: Path, redis: Any, server: Any, spec: list[str], worker: Any) -> int:
    import celery_tasks

    from agentcore.store import PostgresStore, SQLiteStore

    cluster = Workers(redis.url(0), spec, server.base_url, tmp, worker)
    app, run_agent = celery_tasks.make_app(redis.url(0), redis.url(0), VISIBILITY_S)
    store = SQLiteStore(spec[1]) if spec[0] == "sqlite" else PostgresStore(spec[1])
    try:
        for pool, concurrency in POOLS:
            cluster.worker(pool, concurrency)
        sessions = [f"s{n}" for n in range(args.sessions)]
        web = Web(run_agent, args.rounds, args.restart_after)
        restarts = Restarts()
        logging.getLogger("agentcore.celery").addHandler(restarts)
        done, killed = threading.Event(), []
        began = time.monotonic()
        threads = [
            threading.Thread(target=web.sessions, args=(sessions[i : i + 10],))
            for i in range(0, len(sessions), 10)
        ]
        kill = threading.Thread(
            target=killer, args=(cluster, args.kills, len(sessions) * args.rounds, web, done, killed)
        )
        for thread in [*threads, kill]:
            thread.start()
        for thread in threads:
            thread.join()
        done.set()
        kill.join()
        elapsed = time.monotonic() - began
        found = violations(store, sessions, args.rounds, cluster.effects, web)
        deliveries = sum(1 for line in cluster.effects.read_text().splitlines() if line.startswith("task "))
    finally:
        cluster.stop()
        store.close()
        app.close()
    sends = len(sessions) * args.rounds
    pools = ", ".join(f"{pool} x{concurrency}" for pool, concurrency in POOLS)
    print(f"celery: {args.sessions} sessions x {args.rounds} sends, 4 workers ({pools}), store: {spec[0]}")
    print(
        f"sends: {sends} ({web.answered} answered, {web.superseded} taken over by a redelivery, "
        f"{len(web.failures)} failed) in {elapsed:.1f} s"
    )
    print(
        f"worker kills: {len(killed)}, task deliveries: {deliveries} ({deliveries - sends} redelivered), "
        f"tasks started again (no worker took them in {args.restart_after:g} s): {restarts.count}"
    )
    print(f"violations: {len(found)}")
    for violation in found[:20]:
        print(f"  {violation}")
    return 0 if not found else 1


class Workers:
    """The running workers; `worker()` starts one more, `stop()` ends them all."""

    def __init__(self, broker: str, spec: list[str], model_url: str, tmp: Path, worker: Any) -> None:
        self.effects = tmp / "effects.log"
        self.effects.write_text("")
        self.logs = tmp / "logs"
        self.logs.mkdir()
        self.env = {
            "AGENTCORE_TEST_BROKER": broker,
            "AGENTCORE_TEST_STORE": json.dumps(spec),
            "AGENTCORE_TEST_MODEL": model_url,
            "AGENTCORE_TEST_VISIBILITY": str(VISIBILITY_S),
            "AGENTCORE_TEST_LEASE": "1.0",
            "AGENTCORE_TEST_GATES": str(tmp),
            "AGENTCORE_EFFECTS": str(self.effects),
        }
        self.running: list[Any] = []
        self._worker = worker
        self._lock = threading.Lock()

    def worker(self, pool: str, concurrency: int) -> Any:
        started = self._worker(f"w{len(self.running) + 1}-{pool}", pool, concurrency, self.env, self.logs)
        with self._lock:
            self.running.append(started)
        return started

    def alive(self) -> list[Any]:
        with self._lock:
            return [w for w in self.running if w.alive]

    def stop(self) -> None:
        for worker in self.running:
            worker.stop()
