"""Fixtures for agentcore.celery: a real Redis, real Celery workers, both real stores.

    def test_x(cluster):                       # per test: a Redis db, a store, the model script
        cluster.script.plan("hi", {"text": "hello"})
        cluster.worker("w1", "threads")        # celery -A celery_tasks worker -P threads
        result = cluster.run_agent.start("s1", "hi").get(timeout=LONG_S)

`store_spec` runs each test on SQLite and on PostgreSQL (the fixtures of tests/store: a throwaway
cluster). Redis is one `redis-server` for the test session, in a temp dir on a free port; each
test gets a database of its own. Under CI=true a missing redis-server, Celery or PostgreSQL fails
the tests; elsewhere they are skipped.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import signal
import socket
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster import RedisServer, Worker, redis_binary

from agentcore.testing import ModelServer, Recorded

HERE = Path(__file__).resolve().parent

# The PostgreSQL fixtures of tests/store (one throwaway cluster per test session, a schema per test).
_spec = importlib.util.spec_from_file_location("store_fixtures", HERE.parent / "store" / "conftest.py")
assert _spec is not None and _spec.loader is not None
_store_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_store_fixtures)
postgres_server = _store_fixtures.postgres_server
postgres_dsn = _store_fixtures.postgres_dsn
store_spec = _store_fixtures.store_spec
open_store = _store_fixtures.open_store

LONG_S = 120.0  # a bound for waits that must never be reached
_databases = itertools.count(1)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the Celery tests cannot run under CI=true: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    try:
        import celery  # noqa: F401
        import redis  # noqa: F401
    except ImportError:
        _unavailable("Celery or its Redis client is not installed: pip install -e '.[test]'")
    if redis_binary() is None:
        _unavailable("redis-server is not installed (apt-get install redis-server)")
    folder = Path(tempfile.mkdtemp(prefix="agentcore-redis-"))
    server = RedisServer(folder)
    try:
        yield server
    finally:
        server.stop()


def flush(server: RedisServer, db: int) -> None:
    """Empty one Redis database (raw RESP: no client library needed)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(f"SELECT {db}\r\nFLUSHDB\r\n".encode())
        received = b""
        while received.count(b"\r\n") < 2:
            received += sock.recv(64)


class Script:
    """The model the workers talk to: replies planned per user text, by round and by attempt.

    `plan(text, round0, round1, ...)`: the reply to the request made after `text` in round n (the
    assistant replies since `text`); a round given as a list answers its first attempt with the
    first item, the next with the next (a redelivered run asks again), the last one ever after.
    """

    def __init__(self) -> None:
        self.plans: dict[str, tuple[Any, ...]] = {}
        self.asked: Counter[tuple[str, int]] = Counter()
        self.lock = threading.Lock()

    def plan(self, text: str, *rounds: Any) -> None:
        self.plans[text] = rounds

    def __call__(self, recorded: Recorded) -> Any:
        messages = (recorded.body or {}).get("messages") or []
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        text = str(messages[users[-1]].get("content")) if users else ""
        round_ = sum(1 for m in messages[users[-1] + 1 :] if m.get("role") == "assistant") if users else 0
        with self.lock:
            attempt = self.asked[text, round_]
            self.asked[text, round_] += 1
        rounds = self.plans.get(text)
        if rounds is None:
            return f"unplanned: {text}"
        item = rounds[min(round_, len(rounds) - 1)]
        if isinstance(item, list):
            item = item[min(attempt, len(item) - 1)]
        return item

    def requests(self, text: str) -> int:
        """How many model requests followed `text` (retries and redeliveries included)."""
        with self.lock:
            return sum(n for (t, _), n in self.asked.items() if t == text)


class Cluster:
    """One test's Redis database, store, model script, workers and client app."""

    def __init__(self, redis: RedisServer, spec: Any, tmp: Path, model: ModelServer, script: Script) -> None:
        import celery_tasks

        db = next(_databases) % 256
        flush(redis, db)
        self.broker = redis.url(db)
        self.spec, self.tmp, self.model, self.script = spec, tmp, model, script
        self.effects = tmp / "effects.log"
        self.gates = tmp / "gates"
        self.gates.mkdir()
        self.logs = tmp / "logs"
        self.logs.mkdir()
        self.workers: list[Worker] = []
        self.app, self.run_agent = celery_tasks.make_app(self.broker, self.broker)
        self._stores: list[Any] = []

    def worker(self, name: str, pool: str = "threads", concurrency: int = 2, **settings: Any) -> Worker:
        env = {
            "AGENTCORE_TEST_BROKER": self.broker,
            "AGENTCORE_TEST_STORE": json.dumps(list(self.spec)),
            "AGENTCORE_TEST_MODEL": self.model.base_url,
            "AGENTCORE_TEST_VISIBILITY": str(settings.get("visibility_s", 60.0)),
            "AGENTCORE_TEST_LEASE": str(settings.get("lease_s", 1.0)),
            "AGENTCORE_TEST_GATES": str(self.gates),
            "AGENTCORE_EFFECTS": str(self.effects),
        }
        worker = Worker(name, pool, concurrency, env, self.logs)
        self.workers.append(worker)
        return worker

    def store(self) -> Any:
        """A store object of the test process (the "web process")."""
        store = open_store(self.spec)
        self._stores.append(store)
        return store

    def open_gate(self, name: str) -> None:
        (self.gates / name).write_text("")

    def lines(self, word: str | None = None) -> list[list[str]]:
        """The effects file's lines, split (only those starting with `word`, when given)."""
        if not self.effects.exists():
            return []
        rows = [line.split() for line in self.effects.read_text().splitlines() if line.strip()]
        return [row for row in rows if word is None or row[0] == word]

    def runner_of(self, session: str) -> Worker:
        """The worker whose process took the latest delivery of `session`'s task."""
        pid = int(next(row for row in reversed(self.lines("task")) if row[1] == session)[2])
        for worker in self.workers:
            if pid in worker.pids():
                return worker
        raise AssertionError(f"no worker runs pid {pid}")

    def kill_child(self, session: str) -> int:
        """SIGKILL only the pool process running `session` (prefork: the worker itself lives on)."""
        pid = int(next(row for row in reversed(self.lines("task")) if row[1] == session)[2])
        os.kill(pid, signal.SIGKILL)
        return pid

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()
        for store in self._stores:
            store.close()
        self.app.close()

    def report(self) -> str:
        return "\n".join(f"--- {w.name} ({w.pool}):\n{w.output()}" for w in self.workers)


@pytest.fixture
def cluster(redis_server: RedisServer, store_spec: Any, tmp_path: Path) -> Iterator[Cluster]:
    script = Script()
    with ModelServer(default=script) as model:
        found = Cluster(redis_server, store_spec, tmp_path, model, script)
        try:
            yield found
        finally:
            found.close()
