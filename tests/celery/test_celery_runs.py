"""agentcore.celery: a session's run as a Celery task (API.md §Running on workers (Celery)).

Real Redis, real `celery worker` processes (a threads pool and a prefork pool, shared by the
module's tests), SQLite and PostgreSQL stores. This process plays the web process: it enqueues
with `task.start`, watches with `store.watch`, stops with `store.stop`, approves with `decide`.
Every wait polls with a deadline no run comes near; no verdict depends on timing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery_support import LONG_S, Cluster, RedisServer, make_cluster

from agentcore import AgentError
from agentcore.history import tool_calls_of, tool_results_of

RESULT_KEYS = {"text", "reason", "steps", "usage", "pending", "output", "superseded"}


@pytest.fixture(scope="module")
def cluster(
    redis_server: RedisServer, module_store: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    tmp: Path = tmp_path_factory.mktemp("celery-runs")
    with make_cluster(redis_server, module_store, tmp, [("threads", 2), ("prefork", 2)]) as found:
        yield found


def assert_valid(history: list[dict[str, Any]]) -> None:
    """Every call has exactly one result, and every entry id is stored once."""
    calls = [p["tool_call_id"] for m in history for p in tool_calls_of(m)]
    results = [p["tool_call_id"] for m in history for p in tool_results_of(m)]
    assert sorted(calls) == sorted(results) and len(set(calls)) == len(calls), history
    ids = [m.get("id") for m in history]
    assert len(set(ids)) == len(ids), history


def call(name: str, tag: str, id: str) -> dict[str, Any]:
    return {"id": id, "name": name, "arguments": {"tag": tag}}


def collect(watch: Any, into: list[dict[str, Any]]) -> None:
    """Read a watch until the run's `agent_end`."""
    with watch as events:
        for event in events:
            into.append(event)
            if event["type"] == "agent_end":
                return


def test_start_runs_on_a_worker_the_web_process_watches_live_and_gets_the_send_result(
    cluster: Cluster,
) -> None:
    text = "look at the logs"
    cluster.script.plan(
        text, {"tool_calls": [call("safe_effect", "gate:live", "live-1")]}, {"text": "all is well"}
    )
    events: list[dict[str, Any]] = []
    # Opened before the start: the watch reads from this moment on.
    watch = cluster.web.watch("live", timeout=LONG_S)
    watcher = threading.Thread(target=collect, args=(watch, events))
    watcher.start()
    pending = cluster.run_agent.start("live", text)
    # The tool waits for a gate only this process opens: whatever the watch shows now, the run
    # is still going on the worker — the events arrive live, not after the task.
    cluster.wait_for(
        "the tool's start, watched", lambda: any(e["type"] == "tool_execution_start" for e in events)
    )
    assert not pending.ready()
    assert [e["type"] for e in events[:2]] == ["agent_start", "turn_start"]
    cluster.open_gate("live")
    result = pending.get(timeout=LONG_S)
    watcher.join(LONG_S)
    assert set(result) == RESULT_KEYS
    assert result["text"] == "all is well" and result["reason"] == "no-tool"
    assert result["steps"] == 2 and result["pending"] == [] and result["superseded"] is False
    assert result["usage"]["output_tokens"] > 0
    types = [e["type"] for e in events]
    assert types[-1] == "agent_end" and events[-1]["text"] == "all is well"
    assert "message_update" in types, "streamed deltas reach the web process"
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    history = cluster.web.load("live")
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[0]["content"] == text and history[0]["id"], "the input is stored once, with its id"
    assert_valid(history)


def test_store_stop_from_the_web_process_ends_the_run_on_the_worker(cluster: Cluster) -> None:
    text = "wait for ever"
    cluster.script.plan(text, {"tool_calls": [call("mem_effect", "gate:never", "stop-1")]}, "unreachable")
    pending = cluster.run_agent.start("stop", text)
    cluster.wait_for("the tool's start", lambda: cluster.lines("mem_effect", "stop-1"))
    assert cluster.web.stop("stop", timeout=LONG_S) is True
    result = pending.get(timeout=LONG_S)
    assert result["superseded"] is True and result["reason"] is None, result
    assert pending.state == "SUCCESS"
    history = cluster.web.load("stop")
    assert_valid(history)
    assert [m["role"] for m in history] == ["user", "assistant", "tool"]
    [closed] = tool_results_of(history[2])
    assert closed["interrupted"] is True
    assert cluster.script.requests(text) == 1, "a stopped run asks the model nothing more"


def test_a_second_start_on_the_session_supersedes_the_first(cluster: Cluster) -> None:
    cluster.script.plan("first task", {"tool_calls": [call("mem_effect", "gate:never", "sup-1")]}, "no")
    cluster.script.plan("second task", {"text": "second done"})
    first = cluster.run_agent.start("sup", "first task")
    cluster.wait_for("the first run's tool", lambda: cluster.lines("mem_effect", "sup-1"))
    second = cluster.run_agent.start("sup", "second task")
    assert second.get(timeout=LONG_S)["text"] == "second done"
    ended = first.get(timeout=LONG_S)
    assert ended["superseded"] is True and ended["reason"] is None and first.state == "SUCCESS"
    history = cluster.web.load("sup")
    assert_valid(history)
    assert [m["content"] for m in history if m["role"] == "user"] == ["first task", "second task"]
    assert len(cluster.lines("mem_effect", "sup-1")) == 1


def test_a_deferred_approval_ends_the_task_and_a_later_start_after_decide_completes_it(
    cluster: Cluster,
) -> None:
    text = "clean up please"
    cluster.script.plan(
        text,
        {"tool_calls": [call("approve_me", "delete", "appr-1"), call("mem_effect", "note", "appr-2")]},
        {"text": "cleaned up"},
    )
    waiting = cluster.run_agent.start("appr", text).get(timeout=LONG_S)
    assert waiting["reason"] == "approval" and waiting["superseded"] is False
    [pending] = waiting["pending"]
    assert pending["tool_call_id"] == "appr-1" and pending["tool_name"] == "approve_me"
    assert pending["input"] == {"tag": "delete"} and pending["input_hash"]
    assert not cluster.lines("approve_me", "appr-1"), "a deferred call does not run"
    assert len(cluster.lines("mem_effect", "appr-2")) == 1, "the round's other call ran"
    web = cluster.agent("appr")
    assert web.pending() == waiting["pending"]
    web.decide("appr-1", True, input_hash=pending["input_hash"])
    done = cluster.run_agent.start("appr").get(timeout=LONG_S)
    assert done["reason"] == "no-tool" and done["text"] == "cleaned up", done
    assert len(cluster.lines("approve_me", "appr-1")) == 1, "the approved call ran once"
    history = cluster.web.load("appr")
    assert_valid(history)
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "tool", "assistant"]


def test_start_refuses_a_bad_session_id_or_input_before_enqueueing(cluster: Cluster) -> None:
    with pytest.raises(AgentError) as bad_id:
        cluster.run_agent.start("", "hi")
    assert bad_id.value.kind == "request"
    with pytest.raises(AgentError) as empty:
        cluster.run_agent.start("s", "   ")
    assert empty.value.kind == "request" and "empty" in empty.value.message
    with pytest.raises(AgentError) as role:
        cluster.run_agent.start("s", {"role": "assistant", "content": "hi"})
    assert role.value.kind == "request"


def test_a_failed_run_fails_the_task_with_its_agent_error(cluster: Cluster) -> None:
    text = "ask a model that is not there"
    # x-should-retry: false — the client gives up at once instead of retrying for 30 s.
    refusal = {
        "status": 404,
        "error": "the model my-model does not exist",
        "headers": {"x-should-retry": "false"},
    }
    cluster.script.plan(text, refusal)
    pending = cluster.run_agent.start("fail", text)
    with pytest.raises(AgentError) as raised:
        pending.get(timeout=LONG_S)
    assert pending.state == "FAILURE"
    assert "does not exist" in str(raised.value)
    history = cluster.web.load("fail")
    assert [m["content"] for m in history] == [text], "the input stays, as after any failed send"


def test_send_starts_again_with_the_same_entry_id_a_task_the_broker_lost(cluster: Cluster) -> None:
    """`task.send` waits for the result; a task no worker took (Redis can drop the message of a
    worker killed as it took it, celery/celery#4354) is started again, with the same input id."""
    import redis

    text = "answer me even if the broker drops me"
    cluster.script.plan(text, {"text": "answered once"})
    client = redis.Redis.from_url(cluster.broker)
    queue = "agentcore-lost"  # no worker consumes it: the test plays the broker that loses a task
    found: dict[str, Any] = {}

    def send() -> None:
        try:
            found["result"] = cluster.run_agent.send(
                "lost", text, timeout=LONG_S, restart_after=0.5, queue=queue
            )
        except Exception as error:  # reported by the assertion below
            found["error"] = error

    sender = threading.Thread(target=send)
    sender.start()
    try:
        cluster.wait_for("the first start", lambda: client.llen(queue) == 1)
        client.delete(queue)  # lost, as a message popped by a worker killed before it read it
        cluster.wait_for("a second start", lambda: client.llen(queue) >= 1)
        client.rpoplpush(queue, "celery")  # this one reaches a worker
        sender.join(LONG_S)
    finally:
        client.delete(queue)
        client.close()
    assert "error" not in found, found
    assert found["result"]["text"] == "answered once" and found["result"]["superseded"] is False
    history = cluster.web.load("lost")
    assert [m["content"] for m in history if m["role"] == "user"] == [text]
    assert [m["role"] for m in history] == ["user", "assistant"]
    assert len(cluster.lines("task", "lost")) == 1, "one start ran; the lost one never did"


def test_send_refuses_a_restart_delay_that_is_not_positive(cluster: Cluster) -> None:
    with pytest.raises(AgentError) as bad:
        cluster.run_agent.send("s", "hi", restart_after=0)
    assert bad.value.kind == "config" and "restart_after" in bad.value.message
