"""Several processes opening one new SQLite file at the same instant (the first use of a store)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

from agentcore import AgentError
from agentcore.store import SQLiteStore


def _append_once(path: str, barrier: Any, outcomes: Any) -> None:
    barrier.wait()
    try:
        SQLiteStore(path).append("s", [{"n": 1}], expected_length=0)
        outcomes.put("won")
    except AgentError as error:
        outcomes.put(error.kind)


def test_processes_racing_to_create_a_store_get_won_or_conflict_never_a_config_error(tmp_path: Path) -> None:
    """Switching a new file to WAL and creating the schema once answered "database is locked" at
    once to the losers of the race, which surfaced as kind "config" instead of waiting."""
    context = multiprocessing.get_context("fork")
    for round_ in range(12):
        path = str(tmp_path / f"race-{round_}.db")
        barrier, outcomes = context.Barrier(4), context.Queue()
        processes = [context.Process(target=_append_once, args=(path, barrier, outcomes)) for _ in range(4)]
        for process in processes:
            process.start()
        results = sorted(outcomes.get(timeout=60) for _ in processes)
        for process in processes:
            process.join(timeout=60)
        assert results == ["conflict", "conflict", "conflict", "won"], f"round {round_}: {results}"
