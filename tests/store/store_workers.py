"""Child-process halves of the store tests, run as `python store_workers.py COMMAND JSON`.

    duel      append a batch per round when told to on stdin; print "won" or "conflict"
    hammer    append to many sessions, retrying each conflict after reading the length again
    launcher  fork a fresh agent run per job line (imports are paid once); print pid and exit

Also `open_store(spec)` and `raw_texts(spec, id)` for the tests themselves.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from typing import Any

Spec = tuple[str, str]


def open_store(spec: Spec | list[str]) -> Any:
    kind, target = spec
    if kind == "sqlite":
        from agentcore.store import SQLiteStore

        return SQLiteStore(target)
    from agentcore.store import PostgresStore

    return PostgresStore(target)


def raw_texts(spec: Spec, id: str) -> list[str]:
    """The stored entry texts, read with the database's own client, not through the store."""
    kind, target = spec
    if kind == "sqlite":
        import sqlite3

        with sqlite3.connect(target) as connection:
            rows = connection.execute(
                "SELECT entry FROM agentcore_entries WHERE session = ? ORDER BY idx", (id,)
            ).fetchall()
        return [row[0] for row in rows]
    import psycopg

    with psycopg.connect(target) as connection:
        rows = connection.execute(
            "SELECT entry FROM agentcore_entries WHERE session = %s ORDER BY idx", (id,)
        ).fetchall()
    return [row[0] for row in rows]


# ---------------------------------------------------------------- two writers, one session


def duel(args: dict[str, Any]) -> None:
    """Each stdin line is a round: append `batch` entries expecting `round * batch` stored."""
    from agentcore import AgentError

    store = open_store(args["spec"])
    batch = args["batch"]
    print("ready", flush=True)
    for line in sys.stdin:
        round_ = int(line)
        entries = [{"writer": args["name"], "round": round_, "k": k} for k in range(batch)]
        try:
            store.append(args["session"], entries, expected_length=round_ * batch)
            print("won", flush=True)
        except AgentError as error:
            print(error.kind, flush=True)
    store.close()


# ---------------------------------------------------------------- many writers, many sessions


def hammer(args: dict[str, Any]) -> None:
    """Append `appends` entries to each of `sessions` sessions, rotating the start by writer."""
    from agentcore import AgentError

    store = open_store(args["spec"])
    writer, count = args["writer"], args["sessions"]
    order = [(writer * count // args["writers"] + i) % count for i in range(count)]
    known = dict.fromkeys(order, 0)
    conflicts = 0
    for k in range(args["appends"]):
        for s in order:
            session = f"s{s}"
            while True:
                try:
                    known[s] = store.append(session, [{"w": writer, "k": k}], expected_length=known[s])
                    break
                except AgentError as error:
                    if error.kind != "conflict":
                        raise
                    conflicts += 1
                    known[s] = len(store.load(session))
    store.close()
    print(json.dumps({"conflicts": conflicts}), flush=True)


# ---------------------------------------------------------------- an agent run, forked per job


def launcher(_args: dict[str, Any]) -> None:
    """For each job line on stdin, fork a child that runs it, then print how the child ended.

    The launcher imports agentcore once and has no threads, so a fork is a clean, fast start.
    The child shares the launcher's stdout: it writes `pid N` first, then its progress markers;
    the launcher writes `exit {...}` once the child has ended (it is reaped at the next job).
    """
    import importlib

    # Everything a run loads lazily, loaded once here so that no child pays for it.
    for name in (
        "agentcore.loop",
        "agentcore.protocols.chat",
        "agentcore.store.sqlite",
        "agentcore.store.postgres",
        "requests",
        "jsonschema",
        "psycopg",
        "agentcore._http",
        "agentcore.tools.execute",
    ):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)

    print("ready", flush=True)
    previous = 0
    for line in sys.stdin:
        _reap(previous)
        job = json.loads(line)
        pid = previous = os.fork()
        if pid == 0:
            code = 0
            try:
                run_agent(job)
            except BaseException as exc:
                print(f"child failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                code = 1
            os._exit(code)
        # Wait without reaping: until the next job, the pid stays a zombie, so the reader's
        # SIGKILL can never reach another process that reused the number.
        ended = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        killed = ended.si_code == os.CLD_KILLED
        outcome = (
            {"signal": ended.si_status, "code": None} if killed else {"signal": 0, "code": ended.si_status}
        )
        print("exit " + json.dumps(outcome), flush=True)
    _reap(previous)


def _reap(pid: int) -> None:
    if pid:
        os.waitpid(pid, 0)


def slow_echo(text: str) -> str:
    """Echo a text, slowly.

    Args:
        text: what to echo.
    """
    time.sleep(0.03)
    return text.upper()


def mark(name: str) -> None:
    # One write per line, straight to the fd: lines from several threads never mix.
    os.write(1, (name + "\n").encode())


def run_agent(job: dict[str, Any]) -> None:
    """Send one task with a session, writing `pid`, then `stream` / `tool` / `step` markers, then `done`."""
    from agentcore import Agent, tool

    mark(f"pid {os.getpid()}")

    def on_event(event: dict[str, Any]) -> None:
        if event.get("type") == "text-delta":
            mark("stream")

    store = open_store(job["spec"])
    agent = Agent(
        config=agent_config(job["base_url"]),
        tools=[tool(slow_echo)],
        callbacks={
            "on_llm_event": on_event,
            "on_tool_call": lambda _payload: mark("tool"),
            "on_step": lambda _payload: mark("step"),
        },
        session=store.session(job["session"]),
    )
    agent.send(job["input"])
    mark("done")


def agent_config(base_url: str) -> dict[str, Any]:
    # A short lease: after a SIGKILL the next agent waits for the dead holder's lease to lapse.
    return {
        "base_url": base_url,
        "model": "m",
        "no_tool_rounds": 1,
        "retry_base_delay": 0.01,
        "session_lease": 0.5,
    }


if __name__ == "__main__":
    {"duel": duel, "hammer": hammer, "launcher": launcher}[sys.argv[1]](json.loads(sys.argv[2]))
