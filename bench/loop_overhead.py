"""Client overhead per loop step: agentcore against a bare `requests` loop.

    python bench/loop_overhead.py [--quick]

Both clients run the same tool chain (one tool call per step, streaming on, the whole
growing conversation sent each step) against the same local model server, in one process.
Client overhead per step = wall time per request − the server's own time for it (measured
inside the server), so the figure is what each client adds, not what the server costs.

Also measured: 20 sessions at once (threads, one server), steps/s; `import agentcore` time in a
fresh process; the peak RSS of a fresh process after a 100-step chain; and a fresh process that
imports, builds an agent and gets one reply, against the same script written with bare `requests`.
The table at the end is the one in README's performance section. Targets (issue 13): chain100 ≤
1.0× the bare loop, chain20 ≤ 1.5×, step 100 ≤ 1.2× step 20; 20 sessions ≥ 0.9× the bare loop's
steps/s; import ≤ 30 ms; RSS after 100 steps ≤ 40 MB.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import requests

from agentcore import Agent, tool
from agentcore.testing import ModelServer
from agentcore.testing import server as server_module

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


# ---------------------------------------------------------------- server time


class ServerClock:
    """Adds up the time the server spends handling each request (inside do_POST)."""

    def __init__(self) -> None:
        self.total = 0.0
        self.lock = threading.Lock()
        original = server_module._Handler.do_POST
        clock = self

        def timed(handler: Any) -> None:
            started = time.perf_counter()
            try:
                original(handler)
            finally:
                with clock.lock:
                    clock.total += time.perf_counter() - started

        server_module._Handler.do_POST = timed  # type: ignore[method-assign]

    def reset(self) -> float:
        with self.lock:
            total, self.total = self.total, 0.0
        return total


def script(steps: int) -> list[Any]:
    calls: list[Any] = [
        {"tool_calls": [{"name": "step", "arguments": {"n": i + 1}}], "chunk_size": 16} for i in range(steps)
    ]
    return [*calls, {"text": "All steps are recorded.", "chunk_size": 16}]


def chain_reply(steps: int) -> Any:
    """A reply that depends only on the request (its tool results): any number of sessions at once."""

    def reply(recorded: Any) -> dict[str, Any]:
        done = sum(1 for m in recorded.body["messages"] if m["role"] == "tool")
        if done < steps:
            return {"tool_calls": [{"name": "step", "arguments": {"n": done + 1}}], "chunk_size": 16}
        return {"text": "All steps are recorded.", "chunk_size": 16}

    return reply


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


def overhead_ms_per_step(clock: ServerClock, client: Any, steps: int, repeats: int) -> float:
    """Median over repeats of (wall − server time) / requests, in ms."""
    figures = []
    for _ in range(repeats):
        with ModelServer(script(steps)) as server:
            clock.reset()
            started = time.perf_counter()
            made = client(server.base_url, steps)
            wall = time.perf_counter() - started
            figures.append((wall - clock.reset()) / made * 1000)
    return statistics.median(figures)


# ---------------------------------------------------------------- fresh processes

IMPORT_SNIPPET = (
    "import time; t = time.perf_counter(); import agentcore; print((time.perf_counter() - t) * 1000)"
)

AGENT_SCRIPT = textwrap.dedent("""
    import sys
    from agentcore import Agent
    print(Agent(config={"base_url": sys.argv[1], "model": "m"}).send("hi").text)
""")

BARE_SCRIPT = textwrap.dedent("""
    import json, sys
    import requests
    r = requests.post(sys.argv[1] + "/chat/completions", stream=True, json={
        "model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
        "stream_options": {"include_usage": True}})
    text = []
    for line in r.iter_lines():
        if line.startswith(b"data: ") and line[6:] != b"[DONE]":
            for c in json.loads(line[6:]).get("choices") or []:
                text.append((c.get("delta") or {}).get("content") or "")
    print("".join(text))
""")


def import_ms(runs: int) -> float:
    return statistics.median(
        float(
            subprocess.run(
                [sys.executable, "-c", IMPORT_SNIPPET], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(runs)
    )


def fresh_process_ratio(runs: int) -> tuple[float, float]:
    with ModelServer(default={"text": "hello there"}) as server:
        agent_times, bare_times = [], []
        for _ in range(runs):
            for code, times in ((AGENT_SCRIPT, agent_times), (BARE_SCRIPT, bare_times)):
                started = time.perf_counter()
                out = subprocess.run(
                    [sys.executable, "-c", code, server.base_url], capture_output=True, text=True
                )
                times.append(time.perf_counter() - started)
                assert "hello there" in out.stdout, out.stderr
    return statistics.median(agent_times) * 1000, statistics.median(bare_times) * 1000


def sessions_per_second(client: Any, sessions: int, steps: int, repeats: int) -> float:
    """Median over repeats of requests per second with `sessions` chains running at once on threads."""
    figures = []
    for _ in range(repeats):
        with ModelServer(default=chain_reply(steps)) as server:
            barrier = threading.Barrier(sessions + 1)
            made: list[int] = []

            def session(barrier: threading.Barrier, made: list[int], base_url: str) -> None:
                barrier.wait()
                made.append(client(base_url, steps))

            threads = [
                threading.Thread(target=session, args=(barrier, made, server.base_url))
                for _ in range(sessions)
            ]
            for thread in threads:
                thread.start()
            barrier.wait()
            started = time.perf_counter()
            for thread in threads:
                thread.join()
            figures.append(sum(made) / (time.perf_counter() - started))
    return statistics.median(figures)


RSS_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[3])
    import loop_overhead as bench
    getattr(bench, sys.argv[2])(sys.argv[1], 100)
    print(bench.peak_rss_mb())
""")


def peak_rss_mb() -> float:
    """This process image's peak RSS (`VmHWM`; `ru_maxrss` would include the parent's, see memory.py)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def rss_mb(client: str, runs: int) -> float:
    """Peak RSS (MB) of a fresh process that ran one 100-step chain with `client`."""
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    with ModelServer(default=chain_reply(100)) as server:
        return statistics.median(
            float(
                subprocess.run(
                    [sys.executable, "-c", RSS_SCRIPT, server.base_url, client, here],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.split()[-1]
            )
            for _ in range(runs)
        )


def main() -> None:
    quick = "--quick" in sys.argv
    repeats = 2 if quick else 5
    clock = ServerClock()
    # Warm both paths (imports, connection pools, JIT-free but cache-warm).
    overhead_ms_per_step(clock, run_agentcore, 5, 1)
    overhead_ms_per_step(clock, run_bare, 5, 1)
    print(f"python {sys.version.split()[0]}; median of {repeats} runs; client overhead per step (ms)")
    clients = {
        "bare `requests` loop": run_bare,
        "agentcore": run_agentcore,
        "agentcore, agent.stream": run_agentcore_streamed,
        "bare loop, `stream: false`": run_bare_unstreamed,
        "agentcore, `stream: false`": run_agentcore_unstreamed,
    }
    # Each agentcore row is compared with the bare loop making the same kind of request.
    baseline = {name: "bare `requests` loop" for name in clients}
    baseline["agentcore, `stream: false`"] = "bare loop, `stream: false`"
    # Interleaved: each repeat measures every client once, so a machine that gets busier or
    # quieter during the run moves all of them alike; the medians are then compared.
    samples: dict[str, list[list[float]]] = {name: [[], [], []] for name in clients}
    for _ in range(repeats):
        for column, steps in enumerate((20, 100)):
            for name, client in clients.items():
                samples[name][column].append(overhead_ms_per_step(clock, client, steps, 1))
        for name, client in clients.items():
            samples[name][2].append(sessions_per_second(client, 20, 10, 1))
    rows = {name: [statistics.median(column) for column in columns] for name, columns in samples.items()}
    runs = 5 if quick else 15
    imported = import_ms(runs)
    rss = {"bare `requests` loop": rss_mb("run_bare", 3), "agentcore": rss_mb("run_agentcore", 3)}
    bare = rows["bare `requests` loop"]
    print()
    print(
        "| | chain20 ms/step | chain100 ms/step | step 100 / step 20 "
        "| 20 sessions at once, steps/s | RSS after 100 steps |"
    )
    print("|---|---|---|---|---|---|")
    for name, (c20, c100, rate) in rows.items():
        base = rows[baseline[name]]
        ratio = "" if name.startswith("bare") else f" ({c20 / base[0]:.2f}×)"
        ratio100 = "" if name.startswith("bare") else f" ({c100 / base[1]:.2f}×)"
        rate_ratio = "" if name.startswith("bare") else f" ({rate / base[2]:.2f}×)"
        memory = f"{rss[name]:.1f} MB" if name in rss else ""
        cells = [f"{c20:.2f}{ratio}", f"{c100:.2f}{ratio100}", f"{c100 / c20:.2f}", f"{rate:.0f}{rate_ratio}"]
        print(f"| {name} | {' | '.join(cells)} | {memory} |")
    print()
    print(f"  import agentcore (fresh process, in-process time): {imported:5.1f} ms (target <= 30 ms)")
    agent_ms, bare_ms = fresh_process_ratio(runs)
    print(
        f"  fresh process, import + agent + one reply: agentcore {agent_ms:5.1f} ms, "
        f"bare requests {bare_ms:5.1f} ms, "
        f"ratio {agent_ms / bare_ms:4.2f}x (target <= 1.3x)"
    )
    print(f"  {cpu_line(repeats)}")
    print(f"  {memory_line()}")
    print(f"  {first_round_line(3 if quick else 5)}")
    print()
    c20, c100, rate = rows["agentcore"]
    checks = [
        ("chain20 <= 1.5x the bare loop", c20 / bare[0] <= 1.5),
        ("chain100 <= 1.0x the bare loop", c100 / bare[1] <= 1.0),
        ("step 100 <= 1.2x step 20", c100 / c20 <= 1.2),
        (
            "step 100 <= 1.2x step 20, agent.stream",
            rows["agentcore, agent.stream"][1] / rows["agentcore, agent.stream"][0] <= 1.2,
        ),
        (
            "step 100 <= 1.2x step 20, `stream: false`",
            rows["agentcore, `stream: false`"][1] / rows["agentcore, `stream: false`"][0] <= 1.2,
        ),
        ("20 sessions >= 0.9x the bare loop", rate / bare[2] >= 0.9),
        ("import agentcore <= 30 ms", imported <= 30),
    ]
    for name, ok in checks:
        print(f"  {'met    ' if ok else 'NOT met'}  {name}")


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
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    from cpu_per_step import chain_server  # the same chain, served from another process

    figures: dict[tuple[str, int], list[float]] = {}
    for steps in (20, 100):
        with chain_server(steps) as base_url:
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


def memory_line() -> str:
    """The last line of `bench/memory.py`: RSS after a 100-step chain, server in another process."""
    import os

    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "memory.py")
    out = subprocess.run([sys.executable, script], capture_output=True, text=True, check=True).stdout
    return out.strip().splitlines()[-1].strip()


def first_round_line(tries: int) -> str:
    """`bench/tool_calls.py`'s cold fan-out: 16 x 0.2 s file tools in a new agent's first round."""
    import contextlib
    import io
    import os
    import shutil

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import tool_calls

    folder = tool_calls.tool_folder()
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            tool_calls.first_round_figures(folder, tries=tries)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return out.getvalue().strip()


if __name__ == "__main__":
    main()
