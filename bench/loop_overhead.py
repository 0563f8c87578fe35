"""Client overhead per loop step: agentcore against a bare `requests` loop.

    python bench/loop_overhead.py [--quick] [--repeats 7]

Both clients run the same tool chain (one tool call per step, streaming on, the whole growing
conversation sent each step) against the same scripted model server, which runs in a process
of its own (bench/servers.py), as a real endpoint does. Client overhead per step = (wall time −
the server's busy time) / requests, so the figure is what each client adds, not what the
server costs. 20 sessions at once: 20 threads each running a 10-step chain, steps per second.

Repeats are interleaved (each repeat measures every client once, so a machine that gets busier
or quieter moves them alike); each figure is the median of the repeats with their range, and
each ratio the median of the per-repeat ratios. The CPU line: client CPU time per step (all
threads) of fresh processes, the steadier figure on a busy machine.

Targets (issue 23): chain100 ≤ 1.0× the bare loop, chain20 ≤ 1.2×, 20 sessions ≥ 0.95×.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import Server, model_server

from agentcore import Agent, tool

SYSTEM = "You are a careful assistant. Use the tools to do the work, one step at a time. " * 20
TOOL_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "description": "The step number."}},
    "required": ["n"],
}


@tool
def step(n: int) -> str:
    """Record one step of the job.

    Args:
        n: The step number.
    """
    return f"step {n} recorded; the job log now has {n} entries"


# ---------------------------------------------------------------- the two clients


def run_agentcore(base_url: str, steps: int, *, streamed: bool = False, stream: bool = True) -> int:
    agent = Agent(
        config={
            "base_url": base_url,
            "model": "bench",
            "system": SYSTEM,
            "no_tool_rounds": 1,
            "max_context_tokens": float("inf"),
            "stream": stream,
        },
        tools=[step],
    )
    task = "Record the steps of the job, one tool call per step."
    if streamed:
        with agent.stream(task) as run:
            for _event in run:
                pass
        result = run.wait()
    else:
        result = agent.send(task)
    assert result.steps == steps + 1, result.steps
    return result.steps


def run_agentcore_streamed(base_url: str, steps: int) -> int:
    """The same run through `agent.stream`, with one reader draining every event."""
    return run_agentcore(base_url, steps, streamed=True)


def run_agentcore_unstreamed(base_url: str, steps: int) -> int:
    """The same run asking for whole JSON replies (`stream: False`)."""
    return run_agentcore(base_url, steps, stream=False)


def run_bare_unstreamed(base_url: str, steps: int) -> int:
    """The bare loop asking for whole JSON replies."""
    return run_bare(base_url, steps, stream=False)


def run_bare(base_url: str, steps: int, *, stream: bool = True) -> int:
    session = requests.Session()
    tools = [
        {
            "type": "function",
            "function": {
                "name": "step",
                "description": "Record one step of the job.",
                "parameters": TOOL_SCHEMA,
            },
        }
    ]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Record the steps of the job, one tool call per step."},
    ]
    requests_made = 0
    while True:
        body: dict[str, Any] = {"model": "bench", "messages": messages, "tools": tools}
        if stream:
            body.update(stream=True, stream_options={"include_usage": True})
        response = session.post(f"{base_url}/chat/completions", json=body, stream=stream)
        requests_made += 1
        text, calls = _read_sse(response) if stream else _read_json(response)
        if not calls:
            break
        messages.append(
            {
                "role": "assistant",
                "content": text or None,
                "tool_calls": [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": c["arguments"]},
                    }
                    for c in calls
                ],
            }
        )
        for c in calls:
            output = step(**json.loads(c["arguments"]))
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": output})
    assert requests_made == steps + 1
    return requests_made


def _read_json(response: requests.Response) -> tuple[str, list[dict[str, str]]]:
    message = response.json()["choices"][0]["message"]
    calls = [
        {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
        for c in message.get("tool_calls") or []
    ]
    return message.get("content") or "", calls


def _read_sse(response: requests.Response) -> tuple[str, list[dict[str, str]]]:
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    for line in response.iter_lines():
        if not line.startswith(b"data: "):
            continue
        data = line[6:]
        if data == b"[DONE]":
            break
        chunk = json.loads(data)
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                text.append(delta["content"])
            for tc in delta.get("tool_calls") or []:
                call = calls.setdefault(tc["index"], {"id": "", "name": "", "arguments": ""})
                call["id"] = tc.get("id") or call["id"]
                fn = tc.get("function") or {}
                call["name"] = fn.get("name") or call["name"]
                call["arguments"] += fn.get("arguments") or ""
    return "".join(text), list(calls.values())


def ms_per_step(server: Server, client: Any, steps: int) -> float:
    """(wall − server busy time) / requests of one chain, in ms."""
    server.busy()
    started = time.perf_counter()
    made = client(server.base_url, steps)
    wall = time.perf_counter() - started
    return (wall - server.busy()) / made * 1000


def sessions_per_second(server: Server, client: Any, sessions: int, steps: int) -> float:
    """Requests per second with `sessions` chains running at once on threads."""
    barrier = threading.Barrier(sessions + 1)
    made: list[int] = []

    def session() -> None:
        barrier.wait()
        made.append(client(server.base_url, steps))

    threads = [threading.Thread(target=session) for _ in range(sessions)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return sum(made) / (time.perf_counter() - started)


CLIENTS = {
    "bare `requests` loop": run_bare,
    "agentcore": run_agentcore,
    "agentcore, agent.stream": run_agentcore_streamed,
    "bare loop, `stream: false`": run_bare_unstreamed,
    "agentcore, `stream: false`": run_agentcore_unstreamed,
}
# Each agentcore row is compared with the bare loop making the same kind of request.
BASELINE = {name: "bare `requests` loop" for name in CLIENTS}
BASELINE["agentcore, `stream: false`"] = "bare loop, `stream: false`"
COLUMNS = ("chain20", "chain100", "sessions")


def measure(repeats: int) -> dict[str, dict[str, list[float]]]:
    samples = {name: {column: [] for column in COLUMNS} for name in CLIENTS}
    with (
        model_server("chain", 20) as c20,
        model_server("chain", 100) as c100,
        model_server("chain", 10) as c10,
    ):
        for client in CLIENTS.values():  # warm: imports, connection pools
            ms_per_step(c20, client, 20)
        for _ in range(repeats):
            for name, client in CLIENTS.items():
                samples[name]["chain20"].append(ms_per_step(c20, client, 20))
                samples[name]["chain100"].append(ms_per_step(c100, client, 100))
                samples[name]["sessions"].append(sessions_per_second(c10, client, 20, 10))
    return samples


def spread(values: list[float], digits: int = 2) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def ratios(samples: dict[str, dict[str, list[float]]], name: str, column: str) -> list[float]:
    base = samples[BASELINE[name]][column]
    return [a / b for a, b in zip(samples[name][column], base, strict=True)]


def main() -> None:
    quick = "--quick" in sys.argv
    repeats = (
        int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else (3 if quick else 7)
    )
    load = os.getloadavg()[0]
    print(f"python {sys.version.split()[0]}; {repeats} interleaved repeats; load average {load:.2f}")
    samples = measure(repeats)
    print()
    print("client overhead ms/step (ratio to the bare loop); steps/s; median (range) of the repeats")
    print()
    print("| | chain20 ms/step | chain100 ms/step | step 100 / step 20 | 20 sessions at once, steps/s |")
    print("|---|---|---|---|---|")
    for name in CLIENTS:
        cells = []
        for column in COLUMNS:
            cell = spread(samples[name][column], 0 if column == "sessions" else 2)
            if not name.startswith("bare"):
                cell += f"; {spread(ratios(samples, name, column))}×"
            cells.append(cell)
        flat = [b / a for a, b in zip(samples[name]["chain20"], samples[name]["chain100"], strict=True)]
        cells.insert(2, spread(flat))
        print(f"| {name} | {' | '.join(cells)} |")
    print()
    print(f"  {cpu_line(3 if quick else 5)}")
    print(f"  load average at the end {os.getloadavg()[0]:.2f}")
    print()
    median = {column: statistics.median(ratios(samples, "agentcore", column)) for column in COLUMNS}
    checks = [
        ("chain20 <= 1.2x the bare loop", median["chain20"] <= 1.2),
        ("chain100 <= 1.0x the bare loop", median["chain100"] <= 1.0),
        ("20 sessions >= 0.95x the bare loop's steps/s", median["sessions"] >= 0.95),
    ]
    for text, ok in checks:
        print(f"  {'met    ' if ok else 'NOT met'}  {text} (median of the per-repeat ratios)")


CPU_SCRIPT = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[3])
    import loop_overhead as bench
    client, steps = getattr(bench, sys.argv[2]), int(sys.argv[4])
    client(sys.argv[1], steps)  # warm: imports, connection pool
    started = time.process_time()
    client(sys.argv[1], steps)
    print((time.process_time() - started) / (steps + 1) * 1000)
""")


def cpu_line(repeats: int) -> str:
    """Client CPU time per step (all threads), the model server in another process: the steady
    figure on a busy machine (wall-clock overhead swings with whatever else runs)."""
    here = os.path.dirname(os.path.abspath(__file__))
    figures: dict[tuple[str, int], list[float]] = {}
    for steps in (20, 100):
        with model_server("chain", steps) as server:
            base_url = server.base_url
            for _ in range(repeats):
                for client in ("run_bare", "run_agentcore"):
                    out = subprocess.run(
                        [sys.executable, "-c", CPU_SCRIPT, base_url, client, here, str(steps)],
                        capture_output=True,
                        text=True,
                        check=True,
                    ).stdout
                    figures.setdefault((client, steps), []).append(float(out.split()[-1]))
    med = {key: statistics.median(values) for key, values in figures.items()}
    cells = []
    for steps in (20, 100):
        bare, ours = med["run_bare", steps], med["run_agentcore", steps]
        cells.append(f"chain{steps} bare {bare:.2f}, agentcore {ours:.2f} ({ours / bare:.2f}x)")
    return f"client CPU ms/step, server in another process (median of {repeats}): " + "; ".join(cells)


if __name__ == "__main__":
    main()
