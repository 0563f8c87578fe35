"""What a durable session costs per tool call: a 100-call chain with and without a session.

    python bench/journal_cost.py [--calls 100] [--runs 7] [--postgres DSN]

The chain of `cpu_per_step.py` (one memory-tool call per step, streaming, the model server in
another process), run alternately without a session and with a fresh `SQLiteStore` session
(WAL, in a temp dir): with a session every step also commits the assistant entry (with the
journal's claim of its call, in the same transaction) and the tool message (both fenced by the
lease), reads the steer queue at the delivery point, and hands ~15 events to the keeper, which
writes them in batches; each run takes and gives back the lease. The figure is the difference
of the medians, per tool call, in wall time and in client CPU time (all threads, the keeper
included). Target: ≤ 0.3 ms per call on SQLite. `--postgres DSN` adds the same rows for a
PostgresStore (its own schema, dropped after).

Then the store operations alone, each timed over 2,000 repetitions on the same file: a journal
claim alone, a fenced one-entry append without and with its call's claim (how a round records its
calls: in the reply's transaction), a queue read, an event batch of 15.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from cpu_per_step import SYSTEM, chain_server, step

from agentcore import Agent


def chain(base_url: str, calls: int, store: Any) -> tuple[float, float]:
    """One `calls`-call chain; returns (wall s, CPU s) of the send."""
    config = {
        "base_url": base_url,
        "model": "bench",
        "system": SYSTEM,
        "no_tool_rounds": 1,
        "max_context_tokens": float("inf"),
    }
    session = store.session(uuid.uuid4().hex) if store is not None else None
    agent = Agent(config=config, tools=[step], session=session)
    task = "Record the steps of the job, one tool call per step."
    wall, cpu = time.perf_counter(), time.process_time()
    result = agent.send(task)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert result.steps == calls + 1, result.steps
    agent.close()
    return wall, cpu


def compare(base_url: str, calls: int, runs: int, store: Any, label: str) -> None:
    chain(base_url, calls, None)
    chain(base_url, calls, store)  # warm: imports, connections, the schema
    plain: list[tuple[float, float]] = []
    durable: list[tuple[float, float]] = []
    for _ in range(runs):  # interleaved, so a burst of load on the machine hits both alike
        plain.append(chain(base_url, calls, None))
        durable.append(chain(base_url, calls, store))
    for index, what in ((0, "wall"), (1, "CPU ")):
        without = statistics.median(r[index] for r in plain) / calls * 1000
        with_session = statistics.median(r[index] for r in durable) / calls * 1000
        print(
            f"{label:10} {what}: {without:.3f} ms/call without a session, {with_session:.3f} with; "
            f"the session costs {with_session - without:+.3f} ms per tool call"
        )


def operations(store: Any, label: str) -> None:
    """The store operations of one step, each alone."""
    session = store.session(uuid.uuid4().hex)
    session.load()
    session.acquire("bench", lease_s=30.0, cancel=threading.Event(), on_lost=lambda _handover: None)
    journal = session.journal()
    history: list[dict[str, Any]] = []
    count = 2000

    def timed(name: str, body: Any) -> None:
        started, cpu = time.perf_counter(), time.process_time()
        for n in range(count):
            body(n)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        print(f"{label:10} {name}: {wall / count * 1e6:.0f} µs wall, {cpu / count * 1e6:.0f} µs CPU")

    timed(
        "journal claim, alone (a call that needed a decision)",
        lambda n: journal.claim(f"call_{n}", "step", "0" * 64, replay=False),
    )

    def append(n: int, claims: bool) -> None:
        if claims:  # the round's call, recorded as started in the reply's own commit
            journal.stage([(f"staged_{n}", "step", "0" * 64)])
        history.append({"role": "assistant", "content": [{"type": "text", "text": str(n)}]})
        session.commit(history)

    timed("fenced append of one entry", lambda n: append(n, False))
    timed("fenced append of one entry + its call's claim", lambda n: append(n, True))
    queues = session.queues()
    timed("steer queue read", lambda n: queues.take("steer", "one-at-a-time"))
    events = [{"type": "message_update", "run_id": "r", "agent_id": "a", "delta": {"text": "x"}}] * 15
    timed("15 events written", lambda n: store.append_events(session.id, events))
    session.release()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--postgres", metavar="DSN", help="also measure a PostgresStore")
    args = parser.parse_args()
    from agentcore.store import SQLiteStore

    print(f"load average at start: {' '.join(Path('/proc/loadavg').read_text().split()[:3])} (2 cores)")
    with tempfile.TemporaryDirectory() as folder, chain_server(args.calls) as base_url:
        sqlite = SQLiteStore(Path(folder) / "bench.db")
        compare(base_url, args.calls, args.runs, sqlite, "sqlite")
        operations(sqlite, "sqlite")
        sqlite.close()
        if args.postgres:
            postgres = _postgres(args.postgres)
            compare(base_url, args.calls, args.runs, postgres, "postgres")
            operations(postgres, "postgres")
            postgres.close()
    print(f"load average at end: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")


def _postgres(dsn: str) -> Any:
    import psycopg
    from psycopg.conninfo import make_conninfo

    from agentcore.store import PostgresStore

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
    return PostgresStore(make_conninfo(dsn, options=f"-c search_path={schema}"))


if __name__ == "__main__":
    main()
