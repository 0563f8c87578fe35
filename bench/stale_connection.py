"""What a stale pooled connection costs: a send whose kept-alive connection the server drops.

    python bench/stale_connection.py [--tries 20]

Against tests/wire/test_stale_connection.py's KeepAliveServer: one send leaves a kept-alive
connection in the pool, and the server hangs up (FIN, or RST) the moment the next request
arrives on it — what llama.cpp's server did after each streamed reply. Prints how long that
second send takes with the default retry settings (`retry_base_delay` 5 s). Before the resend
on a new connection it was one backoff: about 5,000 ms and a WARNING.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "wire"))

from test_stale_connection import running

from agentcore import Agent


def one_try(drop: str) -> float:
    with running(["ok", drop, "ok"]) as server:
        agent = Agent(config={"base_url": server.base_url, "model": "m"})
        try:
            agent.send("first")
            started = time.perf_counter()
            agent.send("second")
            return time.perf_counter() - started
        finally:
            agent.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tries", type=int, default=20)
    args = parser.parse_args()
    warnings: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = warnings.append  # type: ignore[method-assign]
    logging.getLogger("agentcore").addHandler(handler)
    for drop in ("close", "reset"):
        samples = [one_try(drop) * 1000 for _ in range(args.tries)]
        p50 = statistics.median(samples)
        print(
            f"server {drop:<5} on the reused connection: second send p50 {p50:8.1f} ms, "
            f"max {max(samples):8.1f} ms over {args.tries} tries"
        )
    print(f"WARNING records on logger 'agentcore': {len(warnings)}")


if __name__ == "__main__":
    main()
