"""The `tasks.py` of docs/API.md §Running on workers (Celery) works as written.

The block is copied out of the docs into a temp dir, a real `celery -A tasks worker` imports it
there (on PostgreSQL, as the page shows), and this process sends, watches and reads the result
with the page's own calls.
"""

from __future__ import annotations

import importlib.util
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery_support import LONG_S, RedisServer, flush
from cluster import Worker

from agentcore.testing import ModelServer

ROOT = Path(__file__).resolve().parents[2]
TASKS = re.compile(r"A complete `tasks.py`.*?```python\n(.*?)```", re.S)


@pytest.fixture
def postgres_schema(postgres_server: str) -> Iterator[str]:
    import psycopg
    from psycopg.conninfo import make_conninfo

    schema = f"agentcore_docs_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
    yield make_conninfo(postgres_server, options=f"-c search_path={schema}")
    with psycopg.connect(postgres_server, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA {schema} CASCADE")


def test_the_docs_tasks_py_runs_on_a_worker(
    redis_server: RedisServer, postgres_schema: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = TASKS.search((ROOT / "docs" / "API.md").read_text())
    assert found, "docs/API.md shows a complete tasks.py"
    (tmp_path / "tasks.py").write_text(found.group(1))
    flush(redis_server, 200)
    flush(redis_server, 201)
    with ModelServer(default={"text": "the logs are fine"}) as model:
        env = {
            "BROKER_URL": redis_server.url(200),
            "RESULT_URL": redis_server.url(201),
            "SESSIONS_DSN": postgres_schema,
            "MODEL_URL": model.base_url,
        }
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        (tmp_path / "logs").mkdir()
        worker = Worker("docs", "threads", 2, env, tmp_path / "logs", app="tasks", cwd=tmp_path)
        tasks: Any = None
        try:
            spec = importlib.util.spec_from_file_location("docs_tasks", tmp_path / "tasks.py")
            assert spec is not None and spec.loader is not None
            tasks = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(tasks)
            with tasks.store.watch("user-42", timeout=LONG_S) as events:
                pending = tasks.run_agent.start("user-42", "Summarise the logs")
                seen = []
                for event in events:
                    seen.append(event["type"])
                    if event["type"] == "agent_end":
                        break
            result = pending.get(timeout=LONG_S)
        finally:
            worker.stop()
            if tasks is not None:
                tasks.store.close()
                tasks.app.close()
    assert result["text"] == "the logs are fine" and result["superseded"] is False, worker.output()
    assert "message_update" in seen
    assert model.requests[0]["model"] == "my-model"
