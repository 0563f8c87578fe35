"""A cold script, as a whole process: agentcore against the same script written with bare `requests`.

    python bench/cold_start.py [--runs 9] [--importtime]

Each script starts a fresh interpreter, imports, makes an agent with one `@tool` (the bare one:
a tool list and a loop) and runs a six-request tool chain (five calls, then the answer) against
a local model server in its own process (bench/servers.py). Wall time of the whole process,
the pairs interleaved; medians with their ranges.

Two settings: "bytecode" (a warm cache under PYTHONPYCACHEPREFIX, as an installed package has:
pip compiles what it installs) and "source" (the environment as it is; here
PYTHONDONTWRITEBYTECODE=1, so agentcore compiles from source in every process while the
installed `requests` has its bytecode). `--importtime` prints what the agentcore script imports
beyond the bare one (python -X importtime), by self time.

Target (issue 23): the whole-process cold script <= 1.3x the bare-requests script (bytecode).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import model_server

ROOT = Path(__file__).resolve().parents[1]
STEPS = 5

AGENT = textwrap.dedent(
    """
    import sys
    from agentcore import Agent, tool

    @tool
    def step(n: int) -> str:
        '''Record one step of the job.

        Args:
            n: The step number.
        '''
        return f"step {n} recorded"

    agent = Agent(config={"base_url": sys.argv[1], "model": "m", "no_tool_rounds": 1}, tools=[step])
    print(agent.send("Record the steps of the job, one tool call per step.").text)
    """
)

BARE = textwrap.dedent(
    """
    import json, sys
    import requests

    def step(n):
        return f"step {n} recorded"

    tools = [{"type": "function", "function": {"name": "step", "description": "Record one step of the job.",
              "parameters": {"type": "object", "properties": {"n": {"type": "integer", "description":
              "The step number."}}, "required": ["n"]}}}]
    messages = [{"role": "user", "content": "Record the steps of the job, one tool call per step."}]
    session = requests.Session()
    while True:
        response = session.post(sys.argv[1] + "/chat/completions", stream=True, json={
            "model": "m", "messages": messages, "tools": tools, "stream": True,
            "stream_options": {"include_usage": True}})
        text, calls = [], {}
        for line in response.iter_lines():
            if not line.startswith(b"data: ") or line[6:] == b"[DONE]":
                continue
            for choice in json.loads(line[6:]).get("choices") or []:
                delta = choice.get("delta") or {}
                text.append(delta.get("content") or "")
                for tc in delta.get("tool_calls") or []:
                    call = calls.setdefault(tc["index"], {"id": "", "name": "", "arguments": ""})
                    call["id"] = tc.get("id") or call["id"]
                    function = tc.get("function") or {}
                    call["name"] = function.get("name") or call["name"]
                    call["arguments"] += function.get("arguments") or ""
        if not calls:
            break
        messages.append({"role": "assistant", "content": "".join(text) or None, "tool_calls": [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls.values()]})
        for c in calls.values():
            output = step(**json.loads(c["arguments"]))
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": output})
    print("".join(text))
    """
)


def run(code: str, base_url: str, env: dict[str, str], *flags: str) -> tuple[float, float, str]:
    """(wall s, CPU s of the process, its stderr)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *flags, "-c", code, base_url],
        env=env,
        cwd=tempfile.gettempdir(),  # `-c` puts the working directory first on sys.path
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert "All steps are recorded." in done.stdout, done.stderr
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu, done.stderr


def measure(base_url: str, env: dict[str, str], runs: int) -> dict[str, list[float]]:
    got: dict[str, list[float]] = {"ours": [], "bare": [], "ours cpu": [], "bare cpu": []}
    for _ in range(runs):
        for name, code in (("ours", AGENT), ("bare", BARE)):
            wall, cpu, _ = run(code, base_url, env)
            got[name].append(wall)
            got[f"{name} cpu"].append(cpu)
    return got


def spread(values: list[float]) -> str:
    """Median (range), in ms."""
    return f"{statistics.median(values) * 1000:6.1f} ({min(values) * 1000:.0f}–{max(values) * 1000:.0f})"


def ratio(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}x ({min(values):.2f}–{max(values):.2f})"


def imported(stderr: str) -> dict[str, int]:
    found = {}
    for line in stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            self_us, _cumulative, name = line.split(":", 1)[1].split("|")
            found[name.strip()] = int(self_us)
    return found


def importtime_report(base_url: str, env: dict[str, str]) -> None:
    ours = imported(run(AGENT, base_url, env, "-X", "importtime")[2])
    bare = imported(run(BARE, base_url, env, "-X", "importtime")[2])
    extra = {name: us for name, us in ours.items() if name not in bare}
    total = sum(extra.values()) / 1000
    print(f"  modules only the agentcore script imports: {len(extra)}, {total:.1f} ms self time")
    for name, us in sorted(extra.items(), key=lambda item: -item[1])[:25]:
        print(f"    {us / 1000:6.2f} ms  {name}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--importtime", action="store_true")
    args = parser.parse_args()
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    base["PYTHONPATH"] = str(ROOT)
    load = os.getloadavg()[0]
    print(f"python {sys.version.split()[0]}; load average {load:.2f}; {args.runs} interleaved pairs; ms")
    met = False
    with model_server("chain", steps=STEPS) as server, tempfile.TemporaryDirectory() as cache:
        bytecode = {k: v for k, v in base.items() if k != "PYTHONDONTWRITEBYTECODE"}
        bytecode["PYTHONPYCACHEPREFIX"] = cache
        measure(server.base_url, bytecode, 1)  # fills the bytecode cache
        for label, env in (("bytecode", bytecode), ("source", base)):
            got = measure(server.base_url, env, args.runs)
            ratios = [a / b for a, b in zip(got["ours"], got["bare"], strict=True)]
            cpu = [a / b for a, b in zip(got["ours cpu"], got["bare cpu"], strict=True)]
            print(
                f"  {label:8} wall: agentcore {spread(got['ours'])}, bare requests {spread(got['bare'])}, "
                f"ratio {ratio(ratios)}"
            )
            ours_cpu, bare_cpu = spread(got["ours cpu"]), spread(got["bare cpu"])
            print(f"  {label:8} CPU:  agentcore {ours_cpu}, bare requests {bare_cpu}, ratio {ratio(cpu)}")
            if label == "bytecode":
                met = statistics.median(ratios) <= 1.3
            if args.importtime:
                importtime_report(server.base_url, env)
    verdict = "met    " if met else "NOT met"
    print(f"  {verdict}  whole-process cold script <= 1.3x the bare-requests script (bytecode, wall, median)")


if __name__ == "__main__":
    main()
