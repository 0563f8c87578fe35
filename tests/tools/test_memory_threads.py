"""Memory tools run on threads a run reuses (`_utils/threads.Workers`), and none outlives the run.

One thread takes call after call within a run; each call still runs under its own tool's thread
name, with its own context (its events carry its own call id) and the run as owner. When the run
ends, its idle threads have ended too; a tool that never returned keeps its thread until it does.
"""

from __future__ import annotations

import threading
from typing import Any

from agentcore import Agent
from agentcore._utils.threads import Workers, reusing, start
from agentcore.testing import ModelServer

WAIT_S = 30


def agent_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("agentcore") and t.is_alive()]


def config(server: ModelServer) -> dict[str, Any]:
    return {"base_url": server.base_url, "model": "m", "no_tool_rounds": 1}


def chain(n: int, name: str = "record") -> list[Any]:
    return [*({"tool_calls": [{"name": name, "arguments": {"n": i}}]} for i in range(n)), "done"]


def recorder(seen: list[tuple[threading.Thread, str]]) -> dict[str, Any]:
    def record(input: dict[str, Any]) -> Any:
        thread = threading.current_thread()
        seen.append((thread, thread.name))
        yield f"call {input['n']}"  # streamed as tool_execution_update under this call's id
        return "recorded"

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    return {"name": "record", "description": "Record.", "input_schema": schema, "execute": record}


def test_one_thread_takes_every_call_of_a_run_and_ends_with_it() -> None:
    seen: list[tuple[threading.Thread, str]] = []
    before = set(agent_threads())
    events: list[dict[str, Any]] = []
    with ModelServer(chain(5)) as server, Agent(config=config(server)) as agent:
        agent.subscribe(events.append)
        agent.send("go", tools=[recorder(seen)])
        left = [t for t in agent_threads() if t not in before]
    assert len(seen) == 5
    assert len({thread for thread, _ in seen}) == 1  # the same thread, call after call
    assert {name for _, name in seen} == {"agentcore-tool-record"}
    assert left == []  # checked at once: the idle thread was ended and joined
    # Each call's context is its own: its update carries its call id, not an earlier call's.
    starts = {e["tool_call_id"]: e["input"]["n"] for e in events if e["type"] == "tool_execution_start"}
    updates = [(e["tool_call_id"], e["data"]) for e in events if e["type"] == "tool_execution_update"]
    assert updates == [(call_id, f"call {n}") for call_id, n in starts.items()]


def test_an_abandoned_tool_keeps_its_thread_and_the_next_call_gets_another() -> None:
    release, started = threading.Event(), threading.Event()
    threads: list[threading.Thread] = []

    def stubborn(input: dict[str, Any]) -> str:
        threads.append(threading.current_thread())
        if input["n"] == 0:
            started.set()
            release.wait(120)  # ignores ctx.cancel: a thread cannot be killed
        return "done"

    tool = {
        "name": "stubborn",
        "description": "Stubborn.",
        "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "execute": stubborn,
        "timeout": 0.5,  # the call is given up on (a timeout result); its thread goes on
    }
    before = set(agent_threads())
    with ModelServer(chain(2, "stubborn")) as server, Agent(config=config(server)) as agent:
        agent.send("go", tools=[tool])
        assert started.is_set()
        left = [t for t in agent_threads() if t not in before]
    try:
        assert len(threads) == 2 and threads[0] is not threads[1]
        assert left == [threads[0]]  # only the abandoned one is still there
    finally:
        release.set()
    threads[0].join(WAIT_S)
    assert not threads[0].is_alive()  # its job returned after the run closed: it ended, not idled


def test_start_reuses_an_idle_thread_runs_as_its_caller_and_falls_back_after_close() -> None:
    import contextvars

    from agentcore._utils import threads as threads_module

    var: contextvars.ContextVar[str] = contextvars.ContextVar("test_var", default="unset")
    seen: list[tuple[threading.Thread, str, Any]] = []
    done = threading.Semaphore(0)

    def job() -> None:
        seen.append((threading.current_thread(), var.get(), threads_module.owner()))

    workers = Workers()
    idle_when_then_ran: list[int] = []

    def then() -> None:
        idle_when_then_ran.append(len(workers._idle))
        done.release()

    with reusing(workers), threads_module.owned_by("the run"):
        for value in ("a", "b", "c"):
            var.set(value)
            start(job, name="agentcore-tool-job", then=then)
            assert done.acquire(timeout=WAIT_S)
    assert idle_when_then_ran == [1, 1, 1]  # `then` runs once the thread is back among the idle
    assert [(v, o) for _, v, o in seen] == [("a", "the run"), ("b", "the run"), ("c", "the run")]
    assert len({t for t, _, _ in seen}) == 1
    assert not seen[0][0].is_alive()  # closed: the idle thread was ended and joined
    assert workers.start(job, name="late") is False  # closed: `start` spawns a thread instead
    start(job, name="agentcore-tool-late", then=done.release)  # outside `reusing`: a new thread
    assert done.acquire(timeout=WAIT_S)
    assert seen[-1][0] is not seen[0][0] and seen[-1][1:] == ("c", None)  # the caller's context, no owner
