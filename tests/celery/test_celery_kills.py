"""agentcore.celery: a worker killed with SIGKILL mid-run has its task redelivered, and resumed.

The task is `acks_late` with `reject_on_worker_lost`: a whole worker killed (a lost machine) never
acknowledges, so Redis hands the task out again once its visibility timeout (8 s here) passes; a
prefork pool process killed alone (the OOM killer) is rejected back to the queue by its worker at
once. Each test routes its task to a queue of one worker, kills that worker at a known point, and
starts a second one on that queue, which takes the redelivered task. What must hold afterwards:
the input is in history once, no non-replayable call (memory or file tool) ran twice (their
starts are lines in a file), a reply that was written is not asked for again, history is valid.
Every wait polls with a deadline no run comes near; no verdict depends on timing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery_support import LONG_S, Cluster, RedisServer, make_cluster
from test_celery_runs import assert_valid, call, collect

from agentcore.history import tool_results_of

VISIBILITY_S = 8.0


@pytest.fixture(scope="module")
def cluster(
    redis_server: RedisServer, module_store: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    tmp: Path = tmp_path_factory.mktemp("celery-kills")
    # One process each: a task Redis hands out again while its delivery still runs (a busy
    # machine past the visibility timeout) waits for that delivery instead of racing it.
    workers = [("threads", 1, "threads"), ("prefork", 1, "prefork")]
    with make_cluster(
        redis_server, module_store, tmp, workers, visibility_s=VISIBILITY_S, lease_s=1.0
    ) as found:
        yield found


def task_pids(cluster: Cluster, session: str) -> list[int]:
    """The process of each delivery of `session`'s task, in order."""
    return [int(row[2]) for row in cluster.lines("task", session)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z")


def test_a_worker_killed_mid_model_stream_is_replaced_and_the_reply_is_asked_again(cluster: Cluster) -> None:
    text = "stream, then lose the machine"
    cluster.script.plan(
        text, [{"text": "a long reply that stops half way", "stall_after": 2}, "the reply, whole"]
    )
    events: list[dict[str, Any]] = []
    watcher = threading.Thread(target=collect, args=(cluster.web.watch("stream", timeout=LONG_S), events))
    watcher.start()
    pending = cluster.run_agent.start("stream", text, queue="threads")
    cluster.wait_for("a streamed delta", lambda: any(e["type"] == "message_update" for e in events))
    [first] = task_pids(cluster, "stream")
    victim = cluster.worker_of(first)
    victim.kill()
    cluster.worker("threads", 1, "threads")
    result = pending.get(timeout=LONG_S)
    watcher.join(LONG_S)
    assert result["text"] == "the reply, whole" and result["reason"] == "no-tool", result
    pids = task_pids(cluster, "stream")
    assert len(pids) >= 2 and pids[1] not in victim.pids() | {first}, "a second worker resumed"
    history = cluster.web.load("stream")
    assert [m["role"] for m in history] == ["user", "assistant"], "the input once; the partial reply never"
    assert history[1]["content"][0]["text"] == "the reply, whole"
    assert cluster.script.requests(text) == 2


def test_a_worker_killed_mid_tool_is_replaced_and_no_non_replayable_call_runs_twice(cluster: Cluster) -> None:
    text = "three tools, then lose the machine"
    calls = [
        call("mem_effect", "hang-once", "kill-mem"),
        call("safe_effect", "hang-once", "kill-safe"),
        call("file_effect", "hang-once", "kill-file"),
    ]
    cluster.script.plan(text, {"tool_calls": calls}, "after the crash")
    pending = cluster.run_agent.start("tools", text, queue="prefork")
    started = lambda: all(cluster.lines(c["name"], c["id"]) for c in calls)  # noqa: E731
    cluster.wait_for("the three calls' starts", started)
    [first] = task_pids(cluster, "tools")
    victim = cluster.worker_of(first)
    victim.kill()
    cluster.worker("prefork", 1, "prefork")
    result = pending.get(timeout=LONG_S)
    assert result["text"] == "after the crash" and result["reason"] == "no-tool", result
    assert len(task_pids(cluster, "tools")) >= 2
    assert len(cluster.lines("mem_effect", "kill-mem")) == 1, "a started memory call never runs twice"
    assert len(cluster.lines("file_effect", "kill-file")) == 1, "a started file-tool call never runs twice"
    assert len(cluster.lines("safe_effect", "kill-safe")) == 2, 'replay: "safe" runs again'
    history = cluster.web.load("tools")
    assert_valid(history)
    assert [m["content"] for m in history if m["role"] == "user"] == [text]
    results = {p["tool_call_id"]: p for m in history for p in tool_results_of(m)}
    assert results["kill-mem"].get("interrupted") and results["kill-file"].get("interrupted")
    assert results["kill-safe"]["output"]["value"] == "safe_effect hang-once done"
    file_pid = int(cluster.lines("file_effect", "kill-file")[0][2])
    cluster.wait_for("the killed worker's tool process to end", lambda: not alive(file_pid))


def test_a_pool_process_killed_after_writing_the_reply_is_redelivered_and_answers_from_history(
    cluster: Cluster,
) -> None:
    text = "answer, then die"
    # The worker's finish_turn hook SIGKILLs its own pool process once this reply is written:
    # the run never announces its end, the prefork worker rejects the task back to the queue.
    cluster.script.plan(text, "die after this")
    result = cluster.run_agent.start("die", text, queue="prefork").get(timeout=LONG_S)
    assert result["text"] == "die after this" and result["reason"] == "no-tool", result
    assert len(task_pids(cluster, "die")) >= 2, "delivered again"
    assert cluster.script.requests(text) == 1, "the written reply is not asked for again"
    history = cluster.web.load("die")
    assert [m["role"] for m in history] == ["user", "assistant"]
