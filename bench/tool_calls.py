"""File-tool process costs: warm and cold calls, fan-out, kill cycles, an output flood.

    python bench/tool_calls.py [--cycles 1000] [--warm-calls 2000] [--agent] [--fanout-only]

Prints each figure next to its target:
  - warm call overhead of a trivial file tool, p50/p99 over 2,000 calls (target p50 < 0.5 ms),
    and a cold call (a new process each time; reported);
  - fan-out: 16 calls of a tool sleeping 0.2 s at once, no concurrency cap (target < 0.35 s),
    with new processes and with warm ones; `--agent` also runs it as one model round of an Agent;
  - start → call → kill cycles (half by timeout, half by cancel): growth of this process's RSS
    (target < 2 MB) and tool processes left behind (must be 0);
  - a tool printing 100 MB: peak RSS of the parent above its baseline (target < 100 MB),
    measured in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentcore._utils.cancel import Signal
from agentcore.tools.handlers import FileTool
from agentcore.tools.runner import ToolPool
from agentcore.tools.scan import scan
from agentcore.tools.toolset import ToolSet

TOOLS = """
import os, sys, time

def _sleep(input):
    time.sleep(input.get("seconds", 0.2))
    return "slept"

def _hang(input):
    print(os.getpid(), flush=True)
    time.sleep(60)

def _flood(input):
    chunk = "x" * (1 << 20)
    for _ in range(100):
        sys.stdout.write(chunk)
    return "flooded"

echo = {"name": "echo", "execute": lambda input: input}
sleep = {"name": "sleep", "execute": _sleep}
hang = {"name": "hang", "execute": _hang}
hang_timeout = {"name": "hang_timeout", "execute": _hang, "timeout": 0.15}
flood = {"name": "flood", "execute": _flood}
"""

FANOUT = 16


def file_tool(tools: ToolSet, name: str) -> FileTool:
    handler = tools.handlers[name]
    assert isinstance(handler, FileTool)
    return handler


def tool_folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="agentcore-bench-tools-"))
    (folder / "bench_tools.py").write_text(TOOLS)
    return folder


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def verdict(ok: bool) -> str:
    return "OK" if ok else "MISSED"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


# ---------------------------------------------------------------- warm and cold calls


def warm_and_cold(tools: ToolSet, calls: int) -> None:
    pool = ToolPool()
    handler = file_tool(tools, "echo")
    for _ in range(50):
        pool.run(handler, {"n": 1}, tool_call_id="warmup")
    times = []
    for n in range(calls):
        start = time.perf_counter()
        pool.run(handler, {"n": n}, tool_call_id="c")
        times.append(time.perf_counter() - start)
    pool.close()
    p50, p99 = percentile(times, 0.5), percentile(times, 0.99)
    print(
        f"warm call overhead ({calls} calls): p50 {ms(p50)}, p99 {ms(p99)}"
        f"  (target p50 < 0.5 ms) {verdict(p50 < 5e-4)}"
    )

    cold = []
    for _ in range(20):
        fresh = ToolPool()
        start = time.perf_counter()
        fresh.run(handler, {"n": 1}, tool_call_id="c")
        cold.append(time.perf_counter() - start)
        fresh.close()
    print(f"cold call (new process, 20 calls): median {ms(statistics.median(cold))}  (reported, no target)")


# ---------------------------------------------------------------- fan-out


def fan_out(pool: ToolPool, tools: ToolSet) -> float:
    """16 calls of a 0.2 s tool started together; the wall time until all are back."""
    handler = file_tool(tools, "sleep")
    results: list[Any] = []
    threads = [
        threading.Thread(target=lambda i=i: results.append(pool.run(handler, {}, tool_call_id=f"c{i}")))
        for i in range(FANOUT)
    ]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    assert all(r["output"]["value"] == "slept" for r in results), results
    return elapsed


def fan_out_figures(tools: ToolSet) -> None:
    pool = ToolPool()
    cold = fan_out(pool, tools)
    warm = fan_out(pool, tools)
    pool.close()
    print(
        f"fan-out {FANOUT} x 0.2 s, no cap: new processes {cold:.3f} s, warm processes {warm:.3f} s"
        f"  (target < 0.35 s) {verdict(warm < 0.35)} warm / {verdict(cold < 0.35)} cold"
        f"  [{os.cpu_count()} CPUs]"
    )


def fanout_through_agent(folder: str | Path, rounds: int = 2, warm: int = 0) -> list[float]:
    """The same fan-out as one model round of an Agent (scripted local model server).

    Each round the model asks for 16 `sleep` calls at once, then answers with text.
    Returns the wall time of each send (the first one starts the tool processes, or takes the
    `warm` spares started by `agentcore.tools.warm(warm, tools)` before the agent was made).
    """
    from agentcore import Agent
    from agentcore.testing import ModelServer
    from agentcore.tools import warm as warm_up

    tools = scan(folder)
    if warm:
        warm_up(warm, tools)

    calls = [{"name": "sleep", "arguments": {"seconds": 0.2}} for _ in range(FANOUT)]
    script: list[Any] = []
    for _ in range(rounds):
        script += [{"tool_calls": calls}, {"text": "done"}]
    times = []
    with ModelServer(script) as server:
        config = {"base_url": server.base_url, "model": "bench", "no_tool_rounds": 1}
        with Agent(config=config) as agent:
            for _ in range(rounds):
                start = time.perf_counter()
                agent.send("fan out", tools=tools)
                times.append(time.perf_counter() - start)
    return times


def first_round_figures(folder: Path, tries: int = 5) -> None:
    """The first round of a new agent: 16 x 0.2 s file tools, cold and after tools.warm(16, tools)."""
    cold = [fanout_through_agent(folder, rounds=1)[0] for _ in range(tries)]
    warmed = [fanout_through_agent(folder, rounds=1, warm=FANOUT)[0] for _ in range(tries)]
    median_cold, median_warm = statistics.median(cold), statistics.median(warmed)
    print(
        f"first round of a new agent, {FANOUT} x 0.2 s file tools (median of {tries}):"
        f" cold {median_cold:.3f} s, after tools.warm({FANOUT}) {median_warm:.3f} s"
        f"  (target <= 0.30 s) {verdict(median_warm <= 0.30)}  [{os.cpu_count()} CPUs]"
    )


# ---------------------------------------------------------------- kill cycles


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def kill_cycles(tools: ToolSet, cycles: int) -> None:
    """start → call → kill, `cycles` times (even: cancel once the tool runs; odd: its timeout)."""
    pool = ToolPool()
    pids: list[int] = []
    before = set(_children())  # the shared pool's warm scan process, say

    def cycle(n: int) -> None:
        cancel = Signal()

        def on_output(payload: dict[str, Any]) -> None:
            if payload["stream"] == "stdout" and payload["data"].strip().isdigit():
                pids.append(int(payload["data"]))
                if n % 2 == 0:
                    cancel.set()

        handler = file_tool(tools, "hang" if n % 2 == 0 else "hang_timeout")
        result = pool.run(handler, {}, tool_call_id=f"c{n}", cancel=cancel, on_output=on_output)
        assert result.get("interrupted") or result.get("error") == "timeout", result

    for n in range(20):
        cycle(n)
    baseline = rss_bytes()
    start = time.perf_counter()
    for n in range(cycles):
        cycle(n)
    elapsed = time.perf_counter() - start
    growth_mb = (rss_bytes() - baseline) / 2**20
    pool.close()
    left = {pid for pid in pids if _alive(pid)} | (set(_children()) - before)
    print(
        f"{cycles} start->call->kill cycles ({elapsed:.1f} s): RSS growth {growth_mb:.2f} MB (target < 2 MB)"
        f" {verdict(growth_mb < 2)}; processes left {len(left)} (must be 0) {verdict(not left)}"
    )


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _children() -> list[int]:
    """Live processes whose parent is this one (tool processes not yet reaped would show here)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid() and fields[0] != "Z":
                found.append(int(entry))
    return found


# ---------------------------------------------------------------- flood


def peak_rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM")


def flood_child(folder: str) -> None:
    """In a fresh process: the peak RSS added by running a tool that prints 100 MB."""
    tools = scan(folder)
    pool = ToolPool()
    pool.run(file_tool(tools, "echo"), {}, tool_call_id="warm")
    forwarded = [0]

    def on_output(payload: dict[str, Any]) -> None:
        forwarded[0] += len(payload["data"])

    baseline = peak_rss_kib()
    result = pool.run(file_tool(tools, "flood"), {}, tool_call_id="c", on_output=on_output)
    growth = peak_rss_kib() - baseline
    pool.close()
    print(json.dumps({"growth_kib": growth, "forwarded": forwarded[0], "result": result}))


def flood(folder: Path) -> None:
    done = subprocess.run(
        [sys.executable, __file__, "--flood-child", str(folder)], capture_output=True, text=True, check=True
    )
    report = json.loads(done.stdout)
    growth_mb = report["growth_kib"] / 1024
    print(
        f"tool printing 100 MB: parent peak RSS +{growth_mb:.1f} MB above baseline (target < 100 MB)"
        f" {verdict(growth_mb < 100)}; forwarded {report['forwarded'] / 2**20:.1f} MiB to on_tool_output"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--warm-calls", type=int, default=2000)
    parser.add_argument("--agent", action="store_true", help="also run the fan-out through an Agent")
    parser.add_argument(
        "--fanout-only", action="store_true", help="only the first round of new agents, cold and warmed"
    )
    parser.add_argument("--flood-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.flood_child:
        flood_child(args.flood_child)
        return
    folder = tool_folder()
    if args.fanout_only:
        first_round_figures(folder)
        return
    tools = scan(folder)
    warm_and_cold(tools, args.warm_calls)
    fan_out_figures(tools)
    if args.agent:
        first_round_figures(folder)
        times = fanout_through_agent(folder)
        figures = ", ".join(f"{t:.3f} s" for t in times)
        print(f"fan-out through an Agent (one model round of 16 calls; first, then warm): {figures}")
    kill_cycles(tools, args.cycles)
    flood(folder)


if __name__ == "__main__":
    main()
