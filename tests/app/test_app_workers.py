"""examples/app's several-processes mode in a real headless Chromium: two web processes
(`server.py --postgres --broker`) and two Celery workers (`celery -A workers worker`), sharing a
real PostgreSQL and a real Redis. A tab on web process 1 sends, a tab on web process 2 watches,
the worker running the reply is SIGKILLed mid-reply, and the reply completes once, on the other.

Every wait polls a condition with a deadline no run comes near; nothing depends on timing.
Under CI=true a missing Redis, Celery, PostgreSQL or browser fails the test.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from app_helpers import ROOT
from test_app_browser import App, call_state, css, open_page, send, wait_for

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "celery"))

from cluster import RedisServer, Worker, redis_binary  # noqa: E402

_spec = importlib.util.spec_from_file_location("store_fixtures_app", HERE.parent / "store" / "conftest.py")
assert _spec is not None and _spec.loader is not None
_store_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_store_fixtures)
postgres_server = _store_fixtures.postgres_server

LONG_S = 180.0
REPLY = "Here is what I found."


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the several-processes app test cannot run under CI=true: {reason}")
    pytest.skip(reason)


@pytest.fixture
def layout(postgres_server: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A Redis, a PostgreSQL schema, and two workers of examples/app/workers.py."""
    try:
        import celery  # noqa: F401
        import psycopg
        import redis  # noqa: F401
        from psycopg.conninfo import make_conninfo
    except ImportError:
        _unavailable("Celery, redis or psycopg is not installed: pip install -e '.[test]'")
    if redis_binary() is None:
        _unavailable("redis-server is not installed (apt-get install redis-server)")
    schema = f"agentcore_app_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
    dsn = make_conninfo(postgres_server, options=f"-c search_path={schema}")
    server = RedisServer(Path(tempfile.mkdtemp(prefix="agentcore-app-redis-")))
    env = {"APP_BROKER": server.url(0), "APP_POSTGRES": dsn, "APP_VISIBILITY": "5", "APP_LEASE": "2"}
    env["APP_RESTORE"] = "1"  # look for a killed worker's task every second (Kombu: ~100 s)
    logs = tmp_path / "logs"
    logs.mkdir()
    workers: list[Worker] = []
    try:
        for name in ("w1", "w2"):
            workers.append(
                Worker(name, "threads", 2, env, logs, app="workers", cwd=ROOT / "examples" / "app")
            )
        yield {"env": env, "args": ("--postgres", dsn, "--broker", server.url(0)), "workers": workers}
    finally:
        for worker in workers:
            worker.stop()
        server.stop()
        with psycopg.connect(postgres_server, autocommit=True) as connection:
            connection.execute(f"DROP SCHEMA {schema} CASCADE")


def deliveries(worker: Worker, session: str) -> list[float]:
    """When `worker` started a delivery of `session`: the JSON line workers.py prints on stderr,
    which Celery writes to the worker's log file."""
    found = []
    for path in (worker.log, worker.log.with_suffix(".stderr")):
        for line in path.read_text().splitlines():
            start = line.find('{"session"')
            if start >= 0:
                record = json.loads(line[start:])
                if record["session"] == session:
                    found.append(float(record["at"]))
    return found


def replies(driver: Any) -> list[str]:
    done = css(driver, "#messages [data-role=assistant]:not([data-streaming]) .text")
    return [node.text for node in done if node.text.startswith(REPLY)]


def poll(what: str, check: Any) -> Any:
    deadline = time.monotonic() + LONG_S
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {LONG_S} s")


def test_two_web_processes_two_workers_a_killed_worker_and_the_reply_completes_once(
    app: App, browser: Any, layout: dict[str, Any]
) -> None:
    web1 = app(env=layout["env"], args=layout["args"])
    web2 = app(env=layout["env"], args=layout["args"])
    session = web1.new_session()
    open_page(browser, web1, session)
    sender = browser.current_window_handle
    browser.switch_to.new_window("tab")
    open_page(browser, web2, session)  # the watching tab, served by the other web process
    watcher = browser.current_window_handle
    browser.switch_to.window(sender)
    send(browser, "slow 600 please")
    browser.switch_to.window(watcher)
    wait_for(
        browser, lambda d: "running" in call_state(d, "slow_task") and "progress" in d.page_source, LONG_S
    )
    # The worker that took the task first is the one running it (a visibility-timeout duplicate
    # on the other only waits for the session's lease): kill it, all its processes at once.
    first = poll(
        "a worker took the task",
        lambda: sorted((t, w.name) for w in layout["workers"] for t in deliveries(w, session)),
    )
    victim = next(w for w in layout["workers"] if w.name == first[0][1])
    survivor = next(w for w in layout["workers"] if w is not victim)
    victim.kill()
    wait_for(browser, lambda d: len(replies(d)) >= 1, LONG_S)
    assert len(replies(browser)) == 1, "the watching tab shows the reply once"
    assert deliveries(survivor, session), "the other worker resumed the run"
    browser.switch_to.window(sender)
    wait_for(browser, lambda d: len(replies(d)) >= 1, LONG_S)
    assert len(replies(browser)) == 1, "the sending tab shows the reply once"
    history = web2.history(session)
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"], history
    assert [m["content"] for m in history if m["role"] == "user"] == ["slow 600 please"]
    [result] = history[2]["content"]
    assert result.get("interrupted") is True, "the killed call is closed, not run again"
