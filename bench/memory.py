"""Memory: what one agent holds after a send, 1,000 agents sharing a tool list, and one long chain.

    python bench/memory.py [--agents 1000] [--steps 100] [--trace]

Two measurements, each in a fresh process (the model server runs in another one, bench/servers.py):

- Many agents: `--agents` agents made with one tool list, each of which sends once (the model
  calls the tool, then answers: four history entries). Per agent, with `tracemalloc`: what it
  holds once built, and what it holds more after its send, beyond its history and its tools' own
  data (each measured as the memory a copy of it takes); RSS per agent; and how many validators
  were compiled (one per distinct schema is the target).
- One chain: the peak RSS (`VmHWM`) after each stage: the interpreter, `from agentcore import
  Agent, tool`, `requests` (which the first send loads), a `--steps`-step chain. `--trace` adds
  the largest Python allocations by file.

Targets (issue 23): an agent that has sent once holds <= 16 KB beyond its history and its tools'
own data; 1,000 agents sharing one tool list compile one validator per distinct schema; (issue
13) <= 40 MB after 100 steps.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import resource
import subprocess
import sys
import tracemalloc
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import model_server


def peak_mb() -> float:
    """The peak RSS of this process image. `ru_maxrss` is not it when a big process started this
    one: Linux carries the parent's peak over through fork and exec; `VmHWM` starts anew at exec."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def size_of_copy(value: Any) -> int:
    """The memory a deep copy of `value` takes (its own objects, as the agent holds them)."""
    before = traced()
    kept = copy.deepcopy(value)
    size = traced() - before
    del kept
    return size


def many_agents(count: int) -> None:
    from agentcore import Agent, tool
    from agentcore._utils import schemas

    @tool
    def step(n: int) -> str:
        """Record one step of the job.

        Args:
            n: The step number.
        """
        return f"step {n} recorded"

    compiled: list[str] = []
    original = schemas._new

    def counting(schema: Any) -> Any:
        compiled.append(json.dumps(schema, sort_keys=True))
        return original(schema)

    schemas._new = counting  # counts the validators compiled, from the process's first
    tools = [step]
    with model_server("chain", steps=1) as server:
        config = {"base_url": server.base_url, "model": "m", "no_tool_rounds": 1}
        warm = Agent(config=config, tools=tools)
        warm.send("warm up: imports, the connection pool, the learned ratio")
        del warm
        # RSS first, untraced (tracemalloc's own records would count): then the same, traced.
        gc.collect()
        rss_start = rss_kb()
        untraced = [Agent(config=config, tools=tools) for _ in range(count)]
        gc.collect()
        rss_built = rss_kb()
        for agent in untraced:
            agent.send("Record one step of the job.")
        gc.collect()
        rss_sent = rss_kb()
        tracemalloc.start()
        start = traced()
        agents = [Agent(config=config, tools=tools) for _ in range(count)]
        built = traced()
        for agent in agents:
            agent.send("Record one step of the job.")
        sent = traced()
        sample = agents[:50]
        history = sum(size_of_copy(a.history) for a in sample) / len(sample)
        own_tools = sum(size_of_copy(dict(a.tools.schema)) for a in sample) / len(sample)
        tracemalloc.stop()
    per_built, per_send = (built - start) / count, (sent - built) / count
    beyond = per_built - own_tools + per_send - history
    entries = len(agents[0].history)
    print(f"{count} agents sharing one tool list, each sent once ({entries} history entries); per agent:")
    print(
        f"  built:                {per_built / 1024:6.2f} KB (its tools' own data: {own_tools / 1024:.2f} KB)"
    )
    print(f"  after one send:     + {per_send / 1024:6.2f} KB, of which its history {history / 1024:.2f} KB")
    print(f"  beyond its history and its tools' own data: {beyond / 1024:.2f} KB (tracemalloc)")
    rss_built_kb, rss_send_kb = (rss_built - rss_start) / count, (rss_sent - rss_built) / count
    print(f"  RSS: built {rss_built_kb:.2f} KB, after the send +{rss_send_kb:.2f} KB")
    distinct = len(set(compiled))
    print(f"  validators compiled in the process: {len(compiled)}, for {distinct} distinct schema(s)")
    checks = [
        ("an agent that has sent once: <= 16 KB beyond its history and tools", beyond <= 16 * 1024),
        ("one validator per distinct schema", len(compiled) == distinct),
    ]
    for text, ok in checks:
        print(f"  {'met    ' if ok else 'NOT met'}  {text}")


def long_agent(entries: int) -> None:
    """What an agent on a long history keeps between sends, against the size of that history."""
    from long_history import history_of

    from agentcore import Agent

    with model_server("text") as server:
        config = {"base_url": server.base_url, "model": "m", "max_context_tokens": float("inf")}
        Agent(config=config).send("warm up: imports, the connection pool")
        tracemalloc.start()
        history = history_of(entries)
        size = traced()
        agent = Agent(config=config, history=history)
        before = traced()
        agent.send("one more message")
        agent.send("and another")
        kept = traced() - before
        tracemalloc.stop()
    print(f"an agent on a {len(agent.history)}-entry history, after two sends:")
    print(f"  its history {size / 1024:.0f} KB; what it keeps for the next send {kept / 1024:.0f} KB")
    print(f"  ({kept / size:.2f}x its history: the fold, the latest request's wire forms and JSON text)")


def one_chain(steps: int, trace: bool) -> None:
    print(f"{'interpreter':36} {peak_mb():6.1f} MB")
    if trace:
        tracemalloc.start(5)
    from agentcore import Agent, tool

    @tool
    def step(n: int) -> str:
        """Record one step of the job.

        Args:
            n: The step number.
        """
        return f"step {n} recorded; the job log now has {n} entries"

    print(f"{'+ from agentcore import Agent, tool':36} {peak_mb():6.1f} MB")
    import requests  # noqa: F401

    print(f"{'+ requests':36} {peak_mb():6.1f} MB")
    with model_server("chain", steps=steps) as server:
        config = {"base_url": server.base_url, "model": "m", "no_tool_rounds": 1}
        agent = Agent(config={**config, "max_context_tokens": float("inf")}, tools=[step])
        assert agent.send("Record the steps of the job, one tool call per step.").steps == steps + 1
    print(f"{f'+ a {steps}-step chain':36} {peak_mb():6.1f} MB (target <= 40 MB)")
    if trace:
        stats = tracemalloc.take_snapshot().statistics("filename")
        print(f"traced Python allocations: {sum(s.size for s in stats) / 1e6:.1f} MB; largest:")
        for stat in stats[:12]:
            print(f"  {stat}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--only", choices=["agents", "long", "chain"])
    args = parser.parse_args()
    if args.only == "agents":
        many_agents(args.agents)
    elif args.only == "long":
        long_agent(3000)
    elif args.only == "chain":
        one_chain(args.steps, args.trace)
    else:
        # Each in a fresh process: the peak RSS of the chain must not include the agents'.
        for only in ("agents", "long", "chain"):
            subprocess.run([sys.executable, __file__, *sys.argv[1:], "--only", only], check=True)


if __name__ == "__main__":
    main()
