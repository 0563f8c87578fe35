"""Client CPU time per loop step, with the model server in another process.

    python bench/cpu_per_step.py [--steps 20] [--runs 5] [--stream]

The wall-clock figures of `loop_overhead.py` swing widely on a busy shared machine; CPU time of
the client process (all its threads) barely does, so this is the figure to compare two versions
of the loop with: the same tool chain as `loop_overhead.py` (one call per step, streaming), the
server's work excluded because it runs in its own process. `--stream` runs each chain through
`agent.stream` with one reader draining every event.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

from agentcore import Agent, tool

SERVER = textwrap.dedent(
    """
    import sys
    from agentcore.testing import ModelServer

    STEPS = int(sys.argv[1])

    def reply(recorded):
        done = sum(1 for m in recorded.body["messages"] if m["role"] == "tool")
        if done < STEPS:
            return {"tool_calls": [{"name": "step", "arguments": {"n": done + 1}}], "chunk_size": 16}
        return {"text": "All steps are recorded.", "chunk_size": 16}

    with ModelServer(default=reply) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()
    """
)
SYSTEM = "You are a careful assistant. Use the tools to do the work, one step at a time. " * 20


@tool
def step(n: int) -> str:
    """Record one step of the job.

    Args:
        n: The step number.
    """
    return f"step {n} recorded; the job log now has {n} entries"


def chain(base_url: str, steps: int, streamed: bool) -> None:
    config = {"base_url": base_url, "model": "bench", "system": SYSTEM, "no_tool_rounds": 1}
    agent = Agent(config={**config, "max_context_tokens": float("inf")}, tools=[step])
    task = "Record the steps of the job, one tool call per step."
    if streamed:
        with agent.stream(task) as run:  # type: ignore[attr-defined]
            for _event in run:
                pass
        result = run.wait()
    else:
        result = agent.send(task)
    assert result.steps == steps + 1, result.steps
    agent.close()


@contextlib.contextmanager
def chain_server(steps: int) -> Iterator[str]:
    """The scripted server for a `steps`-call chain, in another process; yields its base URL."""
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(steps)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        yield server.stdout.readline().strip()
    finally:
        server.communicate("")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--stream", action="store_true")
    args = parser.parse_args()
    with chain_server(args.steps) as base_url:
        chain(base_url, args.steps, args.stream)  # warm: imports, connection pool
        figures = []
        for _ in range(args.runs):
            started = time.process_time()
            chain(base_url, args.steps, args.stream)
            figures.append((time.process_time() - started) / (args.steps + 1) * 1000)
    mode = "agent.stream + reader" if args.stream else "send"
    print(
        f"{statistics.median(figures):.3f} ms CPU/step "
        f"({mode}, {args.steps}-step chain, median of {args.runs})"
    )


if __name__ == "__main__":
    main()
