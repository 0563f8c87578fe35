"""How fast a superseding send, a `store.stop` and a `store.steer` reach a run in another process.

    python bench/durable_latency.py [--tries 50] [--postgres DSN]

Two agent processes (A and B) on one session, the model server and the stopper in this one
(a third process). Per try, on SQLite (a temp file) and on PostgreSQL when a DSN is given:

- supersede: A runs a 60 s stoppable tool; B sends. Figure: from A's run ending (its
  `agent_end`) to B's run starting (its `agent_start`, after taking the lease) — API.md: within
  0.5 s — and from B's `send()` call to A's run ending (the stop reaching A);
- stop: A runs the 60 s tool; this process calls `store.stop()`. Figure: from the call to A's
  `agent_end`, and to `store.stop()` returning;
- steer: A loops on a 20 ms tool; this process calls `store.steer()`. Figure: from the call to
  the steer's `message_end` in A (delivered at A's next delivery point).

Times are `time.time()` on one machine. Prints p50 / p99 per figure and store; target p99 ≤ 0.5 s.
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

HANG, LOOP = "hang for a minute", "loop until steered"


def model(recorded: Any) -> dict[str, Any]:
    messages = recorded.body.get("messages", [])
    users = [m for m in messages if m.get("role") == "user"]
    last = str(users[-1].get("content")) if users else ""
    after_tool = bool(messages) and messages[-1].get("role") == "tool"
    if last == HANG and not after_tool:
        return {"tool_calls": [{"name": "slow", "arguments": {"seconds": 60}}]}
    if last == LOOP:
        return {"tool_calls": [{"name": "slow", "arguments": {"seconds": 0.02}}]}
    return {"text": "ok"}


# ---------------------------------------------------------------- the agent processes


def child(spec: list[str], base_url: str, session_id: str) -> None:
    """`--child`: one send per stdin line; timestamps of its events as JSON lines on stdout."""
    from agentcore import Agent, AgentError, ToolContext, tool

    store = open_store(spec)

    @tool
    def slow(seconds: float, ctx: ToolContext) -> str:
        """Wait (stoppable).

        Args:
            seconds: how long.
        """
        say({"slow": time.time()})
        ctx.cancel.wait(seconds)
        return "slept"

    def on_event(event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind in ("agent_start", "agent_end") or (
            kind == "message_end" and event["message"].get("role") == "user"
        ):
            say({"event": kind, "t": time.time(), "content": event.get("message", {}).get("content")})

    config = {"base_url": base_url, "model": "m", "no_tool_rounds": 1}
    say({"ready": True})
    for line in sys.stdin:
        agent = Agent(config=config, tools=[slow], session=store.session(session_id))
        agent.subscribe(on_event)
        try:
            outcome = agent.send(json.loads(line)).reason
        except AgentError as error:
            outcome = error.kind
        agent.close()
        say({"done": outcome})
    store.close()


def say(value: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


def open_store(spec: list[str]) -> Any:
    from agentcore.store import PostgresStore, SQLiteStore

    return SQLiteStore(spec[1]) if spec[0] == "sqlite" else PostgresStore(spec[1])


class AgentProcess:
    """A `--child` process, read by a thread."""

    def __init__(self, spec: list[str], base_url: str, session_id: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--child", json.dumps([spec, base_url, session_id])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next(lambda v: "ready" in v)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(json.loads(line))

    def send(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(text) + "\n")
        self.process.stdin.flush()

    def next(self, wanted: Any) -> dict[str, Any]:
        while True:
            value = self.lines.get(timeout=120)
            if wanted(value):
                return value

    def event(self, kind: str) -> float:
        return float(self.next(lambda v: v.get("event") == kind)["t"])

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


# ---------------------------------------------------------------- the tries


def tries(spec: list[str], base_url: str, count: int) -> dict[str, list[float]]:
    store = open_store(spec)
    session_id = uuid.uuid4().hex
    a, b = AgentProcess(spec, base_url, session_id), AgentProcess(spec, base_url, session_id)
    figures: dict[str, list[float]] = {
        k: [] for k in ("supersede", "supersede reach", "stop", "stop returns", "steer")
    }
    for _ in range(count):
        a.send(HANG)
        a.next(lambda v: "slow" in v)
        asked = time.time()
        b.send("hello")
        a_end = a.event("agent_end")
        b_start = b.event("agent_start")
        figures["supersede"].append(b_start - a_end)
        figures["supersede reach"].append(a_end - asked)
        a.next(lambda v: "done" in v)
        b.next(lambda v: "done" in v)

        a.send(HANG)
        a.next(lambda v: "slow" in v)
        asked = time.time()
        store.stop(session_id)
        returned = time.time()
        figures["stop"].append(a.event("agent_end") - asked)
        figures["stop returns"].append(returned - asked)
        a.next(lambda v: "done" in v)

        a.send(LOOP)
        a.next(lambda v: "slow" in v)
        asked = time.time()
        store.steer(session_id, "steered")
        delivered = a.next(lambda v: v.get("event") == "message_end" and v.get("content") == "steered")
        figures["steer"].append(float(delivered["t"]) - asked)
        a.next(lambda v: "done" in v)
    a.close()
    b.close()
    store.close()
    return figures


def report(label: str, figures: dict[str, list[float]]) -> None:
    for name, values in figures.items():
        ordered = sorted(values)
        p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
        print(
            f"{label:9} {name:16} p50 {statistics.median(ordered) * 1000:6.1f} ms   "
            f"p99 {p99 * 1000:6.1f} ms   max {ordered[-1] * 1000:6.1f} ms   ({len(ordered)} tries)"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tries", type=int, default=50)
    parser.add_argument("--postgres", metavar="DSN")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*json.loads(args.child))
        return
    from agentcore.testing import ModelServer

    with tempfile.TemporaryDirectory() as folder, ModelServer(default=model) as server:
        report("sqlite", tries(["sqlite", str(Path(folder) / "latency.db")], server.base_url, args.tries))
        if args.postgres:
            report("postgres", tries(["postgres", _schema(args.postgres)], server.base_url, args.tries))


def _schema(dsn: str) -> str:
    import psycopg
    from psycopg.conninfo import make_conninfo

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
    return str(make_conninfo(dsn, options=f"-c search_path={schema}"))


if __name__ == "__main__":
    main()
