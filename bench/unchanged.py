"""Nothing else gets slower: this tree against another one, the figures side by side.

    python bench/unchanged.py --against /path/to/another/checkout [--runs 5]

Each figure is measured in fresh processes, one tree after the other in turn (interleaved, so
that a machine getting busier slows both alike), `PYTHONPATH` pointing at each tree; the model
server runs in its own process (bench/servers.py). Medians over `--runs`, with their ranges:

- the session journal: a 100-call tool chain with an SQLite session (every entry committed as it
  is appended) and without one, ms per call, and what the session adds per call;
- cancel latency: `agent.stop()` while the request waits for its headers and while it reads a
  stream, from the call to `send()` raising, ms;
- tool processes: the overhead of a warm call of a trivial file tool (p50 over 300 calls), and
  the first round of a new agent whose model asks for 16 calls of a tool sleeping 0.2 s.

Without `--against`, this tree's figures only. Target (issue 23): none of these gets slower
(here: each median within 10 % of the other tree's, or within the two trees' ranges).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import model_server

ROOT = Path(__file__).resolve().parents[1]

JOURNAL = textwrap.dedent(
    """
    import json, sys, tempfile, time, os
    from agentcore import Agent, tool
    from agentcore.store import SQLiteStore

    @tool
    def step(n: int) -> str:
        '''Record one step.

        Args:
            n: The step number.
        '''
        return f"step {n} recorded"

    def chain(session):
        config = {"base_url": sys.argv[1], "model": "m", "no_tool_rounds": 1}
        config["max_context_tokens"] = float("inf")
        agent = Agent(config=config, tools=[step], session=session)
        started = time.perf_counter()
        result = agent.send("Record the steps of the job, one tool call per step.")
        assert result.steps == 101, result.steps
        return (time.perf_counter() - started) / 100 * 1000

    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(os.path.join(folder, "bench.db"))
        chain(None)  # warm: imports, the connection pool
        plain = chain(None)
        stored = chain(store.session("bench"))
        store.close()
    print(json.dumps({"without a session": plain, "with an SQLite session": stored,
                      "the session, per call": stored - plain}))
    """
)

CANCEL = textwrap.dedent(
    """
    import json, sys, threading, time
    from agentcore import Agent, AgentError
    from agentcore.testing import ModelServer

    def latency(item):
        with ModelServer([item]) as server:
            agent = Agent(config={"base_url": server.base_url, "model": "m", "retry": lambda e: False})
            done = {}
            def run():
                try:
                    agent.send("hi")
                except AgentError as error:
                    done["at"] = time.perf_counter()
                    done["kind"] = error.kind
            thread = threading.Thread(target=run)
            thread.start()
            assert server.stalled.wait(10)
            time.sleep(0.05)
            started = time.perf_counter()
            agent.stop()
            thread.join(10)
            assert done.get("kind") == "aborted", done
            return (done["at"] - started) * 1000

    figures = {}
    for name, item in (("waiting for headers", {"stall_before_headers": True}),
                       ("reading a stream", {"text": "a long reply " * 50, "stall_after": 3})):
        latency(item)  # warm
        figures[name] = sorted(latency(item) for _ in range(5))[2]
    print(json.dumps(figures))
    """
)

TOOLS = textwrap.dedent(
    """
    import json, os, statistics, sys, tempfile, time
    from agentcore import Agent
    from agentcore.tools import load, execute

    folder = tempfile.mkdtemp()
    with open(os.path.join(folder, "tools.py"), "w") as f:
        f.write("import time\\n"
                "echo = {'name': 'echo', 'execute': lambda input: input}\\n"
                "nap = {'name': 'nap', 'execute': lambda input: time.sleep(0.2) or 'slept'}\\n")
    tools = load(folder)
    execute("echo", {"n": 1}, tools)  # starts the process
    times = []
    for n in range(300):
        started = time.perf_counter()
        execute("echo", {"n": n}, tools)
        times.append((time.perf_counter() - started) * 1000)
    calls = [{"name": "nap", "arguments": {}} for _ in range(16)]
    from agentcore.testing import ModelServer
    with ModelServer([{"tool_calls": calls}, "done"]) as server:
        agent = Agent(config={"base_url": server.base_url, "model": "m", "no_tool_rounds": 1})
        started = time.perf_counter()
        agent.send("nap sixteen times", tools=tools)
        round_s = time.perf_counter() - started
        agent.close()
    print(json.dumps({"warm file-tool call p50": statistics.median(times),
                      "first round of 16 x 0.2 s file tools": round_s * 1000}))
    """
)

SCRIPTS = {"journal": JOURNAL, "cancel": CANCEL, "tools": TOOLS}


def figures(tree: Path, script: str, base_url: str) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(tree)
    done = subprocess.run(
        [sys.executable, "-c", script, base_url], env=env, capture_output=True, text=True, cwd="/"
    )
    if done.returncode:
        raise RuntimeError(f"{tree}: {done.stderr[-2000:]}")
    found: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):8.2f} ({min(values):.2f}–{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--against", type=Path, help="another checkout (e.g. of main) to compare with")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    trees = [ROOT] + ([args.against.resolve()] if args.against else [])
    load = os.getloadavg()[0]
    print(f"python {sys.version.split()[0]}; load average {load:.2f}; {args.runs} runs, interleaved")
    samples: dict[Path, dict[str, list[float]]] = {tree: {} for tree in trees}
    with model_server("chain", steps=100) as server:
        for _ in range(args.runs):
            for script in SCRIPTS.values():
                for tree in trees:
                    for name, value in figures(tree, script, server.base_url).items():
                        samples[tree].setdefault(name, []).append(value)
    header = f"| figure, ms | this tree ({ROOT.name})"
    if args.against:
        header += f" | {args.against.name} | ratio |"
    print()
    print(header)
    print("|---|---|" + ("---|---|" if args.against else ""))
    slower = []
    for name, ours in samples[ROOT].items():
        row = f"| {name} | {spread(ours)}"
        if args.against:
            theirs = samples[args.against.resolve()][name]
            ratio = statistics.median(ours) / statistics.median(theirs) if statistics.median(theirs) else 1.0
            row += f" | {spread(theirs)} | {ratio:.2f} |"
            # Slower: more than 10 % and outside the other tree's range (noise on a shared machine).
            if ratio > 1.1 and statistics.median(ours) > max(theirs) and name != "the session, per call":
                slower.append(name)
        print(row)
    if args.against:
        print()
        verdict = "met    " if not slower else "NOT met"
        print(f"  {verdict}  nothing else gets slower{': ' + ', '.join(slower) if slower else ''}")


if __name__ == "__main__":
    main()
