"""Time to the first streamed delta when the primary fails, for a chain of two models.

    python bench/fallback_first_delta.py [--tries 20] [--idle 0.5]

Three cases, each a fresh agent whose `config["fallback"]` is one healthy ModelServer (chat):
- healthy: the primary answers (the baseline: what a delta costs with no failure);
- refused: the primary's port refuses connections (a bound socket that never listens) — the
  fallback is asked at once, with no backoff wait (retry_base_delay is left at its 5 s default);
- stalled: the primary sends its headers and one delta, then nothing; `stream_idle_timeout`
  (`--idle`, seconds) fails it and the fallback is asked at once. The stalled primary's own
  delta is not counted: the figure is the time to the fallback's first delta, the one a user
  keeps.
Prints p50 and max in milliseconds over `--tries` sends.
"""

from __future__ import annotations

import argparse
import logging
import socket
import statistics
import threading
import time
from typing import Any

from agentcore import Agent
from agentcore.testing import ModelServer

REPLY = "The fallback's answer, streamed in pieces so that the first one is measurable."


def one_send(primary_url: str, fallback: ModelServer, idle_s: float, counted_attempt: int) -> float:
    """Milliseconds from `send` to the first text delta of HTTP attempt `counted_attempt` or later."""
    first = threading.Event()
    stamp: list[float] = []
    attempts: list[int] = [0]

    def on_llm_start(_payload: Any) -> None:
        attempts[0] += 1

    def on_llm_event(event: dict[str, Any]) -> None:
        # The stalled primary's own delta comes in attempt 1; the figure is the fallback's.
        wanted = attempts[0] >= counted_attempt
        if event.get("type") == "text-delta" and wanted and not first.is_set():
            stamp.append(time.perf_counter())
            first.set()

    fallback.add(REPLY)
    config = {
        "base_url": primary_url,
        "model": "primary",
        "stream_idle_timeout": idle_s,
        "fallback": [{"base_url": fallback.base_url, "model": "fallback"}],
    }
    callbacks = {"on_llm_start": on_llm_start, "on_llm_event": on_llm_event}
    with Agent(config=config, callbacks=callbacks) as agent:
        started = time.perf_counter()
        agent.send("hello")
    return (stamp[0] - started) * 1000


def measure(case: str, tries: int, idle_s: float) -> list[float]:
    samples: list[float] = []
    with ModelServer() as fallback, ModelServer() as primary:
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))  # bound, never listening: connect() is refused
        refused = f"http://127.0.0.1:{holder.getsockname()[1]}/v1"
        try:
            for _ in range(tries):
                if case == "healthy":
                    samples.append(one_send(fallback.base_url, fallback, idle_s, 1))
                elif case == "refused":
                    samples.append(one_send(refused, fallback, idle_s, 2))
                else:
                    primary.add({"text": "A primary that stops after one piece " * 4, "stall_after": 2})
                    samples.append(one_send(primary.base_url, fallback, idle_s, 2))
        finally:
            holder.close()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--idle", type=float, default=0.5, help="stream_idle_timeout, seconds")
    args = parser.parse_args()
    # Each move to the fallback logs a WARNING (as every retry does); the figures are the output here.
    logging.getLogger("agentcore").addHandler(logging.NullHandler())
    print(f"chain of two models, {args.tries} sends each, stream_idle_timeout {args.idle} s")
    for case in ("healthy", "refused", "stalled"):
        samples = measure(case, args.tries, args.idle)
        print(
            f"{case:<8} primary: first delta p50 {statistics.median(samples):8.1f} ms, "
            f"max {max(samples):8.1f} ms"
        )


if __name__ == "__main__":
    main()
