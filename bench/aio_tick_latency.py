"""How late an asyncio loop runs while 20 agents work through `agentcore.aio` at once.

    python bench/aio_tick_latency.py [--agents 20] [--rounds 5]

A task ticks every 10 ms on the loop while the agents each do a streamed tool round and a
streamed answer, `--rounds` times. Printed: the tick delay (how much later than 10 ms each tick
woke) alone first — what the machine itself costs — then with the agents running. A loop that a
run blocked (a synchronous send on it) would be late by whole runs: hundreds of milliseconds.
The tests check only that the loop is never blocked for a whole phase (tests/test_aio.py).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from agentcore import Agent, tool
from agentcore.testing import ModelServer

TICK_S = 0.010


@tool
def work() -> str:
    """Pretend to work a little."""
    time.sleep(0.02)
    return "tool done"


def reply(recorded: Any) -> dict[str, Any]:
    # First request of a send: call the tool; after that: answer (the send ends "no-tool").
    if len(recorded.body["messages"]) == 1:
        return {"tool_calls": [{"name": "work", "arguments": {}}], "chunk_size": 16}
    return {"text": "all done " * 10, "chunk_size": 16}


async def ticking(work_to_do: Any) -> list[float]:
    """Run `work_to_do()` while a task ticks every 10 ms; the delay of each tick, in ms."""
    done = asyncio.Event()
    delays: list[float] = []

    async def tick() -> None:
        while not done.is_set():
            before = time.monotonic()
            await asyncio.sleep(TICK_S)
            delays.append((time.monotonic() - before - TICK_S) * 1000)

    ticker = asyncio.create_task(tick())
    try:
        await work_to_do()
    finally:
        done.set()
        await ticker
    return delays


def summary(label: str, delays: list[float]) -> str:
    ordered = sorted(delays)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"{label:<22} ticks {len(delays):>5}   p50 {statistics.median(delays):6.2f} ms"
        f"   p99 {p99:6.2f} ms   worst {ordered[-1]:7.2f} ms"
    )


async def main(agents_n: int, rounds: int) -> None:
    with ModelServer(default=reply) as server:
        config = {"base_url": server.base_url, "model": "m", "stream": True, "no_tool_rounds": 1}
        agents = [Agent(config=config, tools=[work]) for _ in range(agents_n)]

        async def idle() -> None:
            await asyncio.sleep(1.0)

        async def run_all() -> None:
            for _ in range(rounds):
                # A fresh history each round keeps every send the same size.
                for agent in agents:
                    agent.history.clear()
                await asyncio.gather(*(agent.asend("go") for agent in agents))

        print(summary("loop alone", await ticking(idle)))
        started = time.monotonic()
        delays = await ticking(run_all)
        took = time.monotonic() - started
        print(summary(f"{agents_n} agents x {rounds} sends", delays))
        print(f"{agents_n * rounds} sends in {took:.2f} s")
        for agent in agents:
            agent.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    asyncio.run(main(options.agents, options.rounds))
