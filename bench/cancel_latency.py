"""Cancel latency per request phase × server behaviour: stop() and a cancel event.

    python bench/cancel_latency.py [--tries 20] [--only stream]

For each scenario of tests/wire/phases.py (connecting, sending the body, waiting for headers,
reading a streamed body, reading a plain body, waiting between retries; against keep-alive,
`Connection: close`, HTTP/1.0, unframed, no-SSE-type, TLS and TLS+close servers), a send is
started, the request is let reach its phase (the scenario stalls there forever), then it is
cancelled. Latency = from the cancel call to the moment `send()` raised in its thread.
API.md promises ≤ 100 ms in every cell.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "wire"))

from phases import cases, scenario

from agentcore import Agent, AgentError
from agentcore.testing.tls import self_signed

BOUND_S = 20.0


def one_try(phase: str, behaviour: str, cert: tuple[str, str], method: str) -> float:
    with scenario(phase, behaviour, cert) as s:
        agent = Agent(config=s.config, callbacks=s.callbacks)
        cancel = threading.Event()
        ended: dict[str, Any] = {}

        def run() -> None:
            try:
                agent.send(s.input, cancel=cancel)
            except AgentError as error:
                ended["kind"] = error.kind
            ended["at"] = time.perf_counter()

        thread = threading.Thread(target=run)
        thread.start()
        if not s.reached(BOUND_S):
            raise RuntimeError(f"{phase}/{behaviour} never reached its phase")
        started = time.perf_counter()
        if method == "stop":
            agent.stop()
        else:
            cancel.set()
        thread.join(BOUND_S)
        agent.close()
        if thread.is_alive() or ended.get("kind") != "aborted":
            raise RuntimeError(f"{phase}/{behaviour}/{method} did not end as aborted: {ended}")
        return float(ended["at"] - started)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--only", default="", help="run only phases containing this text")
    args = parser.parse_args()
    logging.getLogger("agentcore").setLevel(logging.ERROR)  # the retry-wait scenario logs its retry
    cert = self_signed(tempfile.mkdtemp())
    os.environ["REQUESTS_CA_BUNDLE"] = cert[0]
    columns = ("stop p50", "stop p99", "event p50", "event p99")
    print(f"{'phase':<11} {'server':<12} " + " ".join(f"{c:>10}" for c in columns) + "  (ms)")
    worst = 0.0
    for phase, behaviour in cases():
        if args.only and args.only not in phase:
            continue
        row = []
        for method in ("stop", "event"):
            samples = [one_try(phase, behaviour, cert, method) * 1000 for _ in range(args.tries)]
            row += [statistics.median(samples), percentile(samples, 0.99)]
            worst = max(worst, max(samples))
        print(f"{phase:<11} {behaviour:<12} " + " ".join(f"{v:10.2f}" for v in row), flush=True)
    print(f"worst single cancel: {worst:.2f} ms (promise: 100 ms)")


if __name__ == "__main__":
    main()
