"""agentcore.celery: a session's run as a Celery task (API.md §Running on workers (Celery)).

Real Redis, real `celery worker` processes, SQLite and PostgreSQL stores; this process plays the
web process: it enqueues with `task.start`, watches with `store.watch`, stops with `store.stop`.
"""

from __future__ import annotations

from conftest import LONG_S, Cluster


def test_start_runs_on_a_worker_and_returns_the_send_result(cluster: Cluster) -> None:
    cluster.script.plan("hello there", {"text": "hello back"})
    cluster.worker("w1", "threads")
    result = cluster.run_agent.start("s1", "hello there").get(timeout=LONG_S)
    assert result["reason"] == "finished" or result["reason"] == "no-tool"
    assert result["text"] == "hello back"
    history = cluster.store().load("s1")
    assert [e["role"] for e in history] == ["user", "assistant"]
