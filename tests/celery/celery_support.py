"""Fixtures and helpers for agentcore.celery: a real Redis, real Celery workers, both real stores.

The tests import them from here (`from celery_support import ...`), never `from conftest`: when
tests/app is collected in the same run, a module named `conftest` is the first folder's one.

    @pytest.fixture(scope="module")               # in a test module: its workers, shared
    def cluster(redis_server, module_store, tmp_path_factory):
        with make_cluster(redis_server, module_store, tmp_path_factory.mktemp("c"), [("threads", 2)]) as c:
            yield c

    def test_x(cluster):
        cluster.script.plan("hi", {"text": "hello"})          # the model's reply to "hi"
        result = cluster.run_agent.start("s1", "hi").get(timeout=LONG_S)

`module_store` runs each module on SQLite and on PostgreSQL (the PostgreSQL server of tests/store:
a throwaway cluster, a schema per module). Redis is one `redis-server` for the test session, in a
temp dir on a free port; each module gets a database of its own. Starting workers is what costs,
so a module's tests share them and tell their runs apart by session id. Under CI=true a missing
redis-server, Celery or PostgreSQL fails the tests; elsewhere they are skipped.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import os
import socket
import sys
import tempfile
import threading
import time
import uuid
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
    """A module's Redis database, store, model script, workers and client app (the "web process").

    Tests of one module share it: each uses session ids, user texts and call ids of its own.
    """

    def __init__(
        self, redis: RedisServer, spec: Any, tmp: Path, model: ModelServer, script: Script, **settings: Any
    ) -> None:
        import celery_tasks

        db = next(_databases) % 256
        flush(redis, db)
        self.broker = redis.url(db)
        self.spec, self.tmp, self.model, self.script = spec, tmp, model, script
        self.settings = settings
        self.effects = tmp / "effects.log"
        self.gates = tmp / "gates"
        self.gates.mkdir()
        self.logs = tmp / "logs"
        self.logs.mkdir()
        self.workers: list[Worker] = []
        visibility_s = float(settings.get("visibility_s", 600.0))
        self.app, self.run_agent = celery_tasks.make_app(self.broker, self.broker, visibility_s)
        self._stores: list[Any] = []
        self._agents: list[Any] = []
        self._names = itertools.count(1)
        self.web = self.store()

    def worker(self, pool: str = "threads", concurrency: int = 2, queue: str | None = None) -> Worker:
        env = {
            "AGENTCORE_TEST_BROKER": self.broker,
            "AGENTCORE_TEST_STORE": json.dumps(list(self.spec)),
            "AGENTCORE_TEST_MODEL": self.model.base_url,
            "AGENTCORE_TEST_VISIBILITY": str(self.settings.get("visibility_s", 600.0)),
            "AGENTCORE_TEST_LEASE": str(self.settings.get("lease_s", 2.0)),
            "AGENTCORE_TEST_GATES": str(self.gates),
            "AGENTCORE_EFFECTS": str(self.effects),
        }
        worker = Worker(f"w{next(self._names)}-{pool}", pool, concurrency, env, self.logs, queue=queue)
        self.workers.append(worker)
        return worker

    def alive(self) -> list[Worker]:
        return [w for w in self.workers if w.alive]

    def store(self) -> Any:
        """A store object of the test process (the "web process")."""
        store = open_store(self.spec)
        self._stores.append(store)
        return store

    def agent(self, session: str) -> Any:
        """An agent of the web process on `session` (for pending() / decide()); closed at the end."""
        from agentcore import Agent

        agent = Agent(
            config={"base_url": self.model.base_url, "model": "m"}, session=self.web.session(session)
        )
        self._agents.append(agent)
        return agent

    def open_gate(self, name: str) -> None:
        (self.gates / name).write_text("")

    def lines(self, word: str | None = None, key: str | None = None) -> list[list[str]]:
        """The effects file's lines, split (those starting with `word`, about `key`, when given)."""
        if not self.effects.exists():
            return []
        rows = [line.split() for line in self.effects.read_text().splitlines() if line.strip()]
        return [r for r in rows if (word is None or r[0] == word) and (key is None or r[1] == key)]

    def worker_of(self, pid: int) -> Worker:
        """The worker one of whose processes is `pid`."""
        for worker in self.workers:
            if pid in worker.pids():
                return worker
        raise AssertionError(f"no worker runs pid {pid}")

    def wait_for(self, what: str, check: Any) -> Any:
        """Poll `check()` until it returns something truthy; fail (with the workers' logs) at LONG_S."""
        deadline = time.monotonic() + LONG_S
        while time.monotonic() < deadline:
            found = check()
            if found:
                return found
            time.sleep(0.05)
        raise AssertionError(f"{what}: not within {LONG_S} s\n{self.report()}")

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()
        for agent in self._agents:
            agent.close()
        for store in self._stores:
            store.close()
        self.app.close()

    def report(self) -> str:
        return "\n".join(f"--- {w.name} ({w.pool}):\n{w.output()}" for w in self.workers)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def module_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The store a module's tests share, as plain data the workers are given: SQLite, then PostgreSQL."""
    if request.param == "sqlite":
        yield ("sqlite", str(tmp_path_factory.mktemp("celery-store") / "sessions.db"))
        return
    import psycopg
    from psycopg.conninfo import make_conninfo

    server = request.getfixturevalue("postgres_server")
    schema = f"agentcore_celery_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
    yield ("postgres", make_conninfo(server, options=f"-c search_path={schema}"))
    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA {schema} CASCADE")


@contextlib.contextmanager
def make_cluster(
    redis: RedisServer, spec: Any, tmp: Path, workers: list[tuple[Any, ...]], **settings: Any
) -> Iterator[Cluster]:
    """A Cluster with `workers` ([(pool, concurrency[, queue])]) started, all stopped on leaving."""
    script = Script()
    with ModelServer(default=script) as model:
        found = Cluster(redis, spec, tmp, model, script, **settings)
        try:
            for spec_ in workers:
                found.worker(*spec_)
            yield found
        finally:
            found.close()
