#!/usr/bin/env python3
"""Many agents at once against the local model server; what they cost and whether it leaks.

    python scripts/stress.py --sessions 200 --rounds 20                 # N sessions x M rounds
    python scripts/stress.py --sessions 50 --rounds 10 --sqlite /tmp/s.db
    python scripts/stress.py --sessions 20 --rounds 10 --duration 600   # a 10-minute soak
    python scripts/stress.py --processes 8 --rounds 20 [--postgres DSN] # durable sessions, 4 pairs
    python scripts/stress.py --celery --sessions 200 --rounds 5 --kills 10  # Celery workers killed

Every session is one agent running `--rounds` sends, all sessions at once (one thread each).
Each send is two model requests: the model calls a memory tool (`remember`, a thread here) and
a file tool (`checksum`, in a tool process) in parallel, then answers. The model server
(`agentcore.testing.ModelServer`) runs in a child process of its own, so the figures below are
agentcore's alone: completed / failed sends, p50 / p99 send latency, model requests per second,
and the change in RSS, open file descriptors, threads and child processes from a baseline taken
after one warm-up send (so lazy imports are not counted as growth) to the end, after every agent
is closed. `--duration` repeats the sessions (fresh agents each time) until the time is up,
samples RSS every `--sample-every` seconds and prints its slope after `--warmup` seconds.

`--processes N` (durable sessions, API.md §Durable sessions): N agent processes in pairs, each
pair on one session of a SQLite file (or `--postgres DSN`), every process sending `--rounds`
messages back to back, so each send supersedes its partner's run, while this process calls
`store.stop()` on a random session every 0.1-0.5 s. It reports sends, supersedes, stops and
violations, which must be 0: a `conflict` or any error but `aborted`; a stored history with a
call that has no result or two; an input stored other than once; a reply that does not answer
the input it follows (runs interleaved); a tool call that started twice (the effects file); a
worker left with threads or child processes after closing its agent.

`--celery` (API.md §Running on workers): a real Redis, four real Celery workers (two pools), sessions
sent from this process while `--kills` random workers are killed with SIGKILL and replaced; it
reports sends, redeliveries and violations, which must be 0 (scripts/celery_stress.py says which).

Linux only (it reads /proc). Exit status 0 when every send completed (with `--processes`: when
there is no violation), 1 otherwise.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from agentcore import Agent, AgentError, tool  # noqa: E402
from agentcore.tools import load  # noqa: E402

MODEL = "stress"
# A plain-dict tool: the tool process needs no agentcore import to load it.
CHECKSUM_TOOL = textwrap.dedent("""
    import hashlib

    checksum = {
        "name": "checksum",
        "description": "The sha256 of a text.",
        "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "execute": lambda input: hashlib.sha256(input["text"].encode()).hexdigest(),
    }
""")


# ------------------------------------------------------------ the model server (child process)


def model_reply(recorded: Any) -> dict[str, Any]:
    """The scripted model: call both tools, then answer once their results are in."""
    body = recorded.body if isinstance(recorded.body, dict) else {}
    messages = body.get("messages") or [{}]
    if messages[-1].get("role") == "tool":
        return {"text": "Noted and checksummed.", "chunk_size": 16}
    text = str(messages[-1].get("content", ""))
    return {
        "text": "On it.",
        "tool_calls": [
            {"name": "remember", "arguments": {"key": f"k{len(messages)}", "value": text}},
            {"name": "checksum", "arguments": {"text": text}},
        ],
    }


def serve() -> None:
    """`stress.py --serve`: run the model server until stdin closes; print its base URL first."""
    from agentcore.testing import ModelServer

    with ModelServer(default=model_reply) as server:
        print(server.base_url, flush=True)
        stop = threading.Event()

        def wait_for_eof() -> None:
            sys.stdin.read()
            stop.set()

        threading.Thread(target=wait_for_eof, daemon=True).start()
        # The server records every request; drop the records, a soak would otherwise grow here.
        while not stop.wait(1.0):
            del server.requests[:], server.log[:]


def start_server() -> tuple[subprocess.Popen[str], str]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        },
    )
    assert child.stdout is not None
    base_url = child.stdout.readline().strip()
    if not base_url.startswith("http"):
        child.kill()
        raise SystemExit(f"the model server did not start (said {base_url!r})")
    return child, base_url


# ------------------------------------------------------------ what the process holds


@dataclass(frozen=True)
class Snapshot:
    """What the process holds at one moment (`exclude`: the model server's pid)."""

    rss_mb: float
    fds: dict[str, str]
    keepalive: set[str]
    threads: int
    thread_names: list[str]
    children: list[str]

    @classmethod
    def take(cls, server: subprocess.Popen[str], port: int) -> Snapshot:
        gc.collect()
        fds = open_fds()
        names = [thread.name for thread in threading.enumerate()]
        children = descendants(os.getpid(), server.pid)
        return cls(rss_mb(), fds, sockets_to(port, fds), os_threads(), names, children)


def rss_mb() -> float:
    return _status_field("VmRSS") / 1024


def open_fds() -> dict[str, str]:
    """fd number -> what it is (a file path, socket:[inode], pipe:[inode])."""
    found = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            found[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the fd listdir itself used, now closed
    return found


def sockets_to(port: int, fds: dict[str, str]) -> set[str]:
    """The fds that are TCP connections to `port` on this machine (HTTP keep-alive to the server)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as rows:
                next(rows)
                for row in rows:
                    columns = row.split()
                    if int(columns[2].rsplit(":", 1)[1], 16) == port:
                        inodes.add(f"socket:[{columns[9]}]")
        except OSError:
            continue
    return {fd for fd, target in fds.items() if target in inodes}


def os_threads() -> int:
    return _status_field("Threads")


def _status_field(name: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {name}")


def descendants(pid: int, exclude: int) -> list[str]:
    """Command lines of the processes below `pid`, not counting `exclude` and its descendants."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                # The name field may hold spaces and parentheses: the ppid follows the last ")".
                parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue

    def below(root: int) -> set[int]:
        found: set[int] = set()
        frontier = [root]
        while frontier:
            parent = frontier.pop()
            kids = [child for child, ppid in parents.items() if ppid == parent and child not in found]
            found.update(kids)
            frontier.extend(kids)
        return found

    return [_command(child) for child in sorted(below(pid) - below(exclude) - {exclude})]


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return f"{pid} " + cmdline.read().replace(b"\0", b" ").decode(errors="replace")[:100]
    except OSError:
        return f"{pid} (gone)"


# ------------------------------------------------------------ the sessions


@dataclass
class Tally:
    """Counts shared by every session thread."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    latencies_s: list[float] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    stored: tuple[int, int] | None = None

    def sent(self, seconds: float) -> None:
        with self.lock:
            self.latencies_s.append(seconds)

    def failed(self, error: BaseException) -> None:
        kind = error.kind if isinstance(error, AgentError) else type(error).__name__
        with self.lock:
            self.failures[kind] = self.failures.get(kind, 0) + 1

    def request(self, _payload: Any) -> None:
        with self.lock:
            self.requests += 1


def memory_tools() -> list[Any]:
    notes: dict[str, str] = {}

    @tool
    def remember(key: str, value: str) -> str:
        """Keep a note.

        Args:
            key: The note's name.
            value: What to keep.
        """
        notes[key] = value
        return f"kept {key}"

    return [remember]


def run_session(
    name: str, rounds: int, base_url: str, tools: Any, tally: Tally, store: Any, forget: bool
) -> None:
    """One agent, `rounds` sends; with a store, its history lives there (deleted after if `forget`)."""
    config = {"base_url": base_url, "model": MODEL, "no_tool_rounds": 1, "retry_base_delay": 0.1}
    session = store.session(name) if store is not None else None
    callbacks = {"on_llm_start": tally.request}
    try:
        with Agent(config, tools=load(tools, memory_tools()), callbacks=callbacks, session=session) as agent:
            for round_ in range(rounds):
                started = time.perf_counter()
                try:
                    agent.send(f"{name} round {round_}: remember this and checksum it")
                except Exception as error:
                    tally.failed(error)
                else:
                    tally.sent(time.perf_counter() - started)
    except Exception as error:
        tally.failed(error)
    if store is not None and forget:
        store.delete(name)


def run_wave(
    wave: int, args: argparse.Namespace, base_url: str, tools: Any, tally: Tally, store: Any
) -> None:
    threads = [
        threading.Thread(
            target=run_session,
            args=(f"w{wave}-s{index}", args.rounds, base_url, tools, tally, store, args.duration is not None),
            name=f"stress-session-{index}",
        )
        for index in range(args.sessions)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def check_stored(args: argparse.Namespace, store: Any, tally: Tally) -> None:
    """Every completed send stored its 4 entries (input, tool-call reply, tool results, answer)."""
    if args.duration is not None:
        return  # a soak deletes its sessions as it goes
    stored = sum(row["length"] for row in store.sessions() if row["id"].startswith("w0-"))
    expected = 4 * len(tally.latencies_s)
    tally.stored = (stored, expected)
    if stored != expected:
        tally.failed(RuntimeError(f"{stored} entries stored, {expected} expected"))


# ------------------------------------------------------------ report


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def slope_mb_per_min(samples: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MB) samples, in MB per minute."""
    if len(samples) < 2:
        return float("nan")
    mean_t = sum(t for t, _ in samples) / len(samples)
    mean_m = sum(m for _, m in samples) / len(samples)
    spread = sum((t - mean_t) ** 2 for t, _ in samples)
    if spread == 0:
        return float("nan")
    return 60 * sum((t - mean_t) * (m - mean_m) for t, m in samples) / spread


def report(args: argparse.Namespace, tally: Tally, elapsed_s: float, start: Snapshot, end: Snapshot) -> None:
    sends = len(tally.latencies_s)
    failed = sum(tally.failures.values())
    store = f"sqlite {args.sqlite}" if args.sqlite else "memory"
    print(f"sessions {args.sessions} x rounds {args.rounds}, tools: memory + file, history: {store}")
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(tally.failures.items()))
    print(f"sends: {sends} completed, {failed} failed{f' ({kinds})' if kinds else ''} in {elapsed_s:.1f} s")
    p50, p99 = percentile(tally.latencies_s, 0.5), percentile(tally.latencies_s, 0.99)
    print(f"send latency: p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms")
    print(f"model requests: {tally.requests} ({tally.requests / elapsed_s:.1f}/s)")
    if tally.stored is not None:
        print(f"sqlite: {tally.stored[0]} entries stored, {tally.stored[1]} expected")
    print(f"{'':14}{'start':>10}{'end':>10}{'change':>10}")
    print(f"{'rss MB':14}{start.rss_mb:>10.1f}{end.rss_mb:>10.1f}{end.rss_mb - start.rss_mb:>+10.1f}")
    for label, before, after in (
        ("open fds", len(start.fds), len(end.fds)),
        ("  keep-alive", len(start.keepalive), len(end.keepalive)),
        ("threads", start.threads, end.threads),
        ("child procs", len(start.children), len(end.children)),
    ):
        print(f"{label:14}{before:>10}{after:>10}{after - before:>+10}")
    # Name what grew, so a leak can be chased without rerunning.
    new_fds = sorted(
        target for fd, target in end.fds.items() if start.fds.get(fd) != target and fd not in end.keepalive
    )
    for what, items in (
        ("new fds (other than keep-alive)", new_fds),
        ("new threads", sorted(set(end.thread_names) - set(start.thread_names))),
        ("child procs at end", end.children),
    ):
        if items:
            print(f"{what}: {', '.join(items[:10])}{' ...' if len(items) > 10 else ''}")


def report_soak(
    args: argparse.Namespace,
    waves: int,
    elapsed_s: float,
    samples: list[tuple[float, float]],
    wave_ends: list[tuple[float, Snapshot]],
) -> None:
    settled = [(t, mb) for t, mb in samples if t >= args.warmup]
    print(f"soak: {waves} waves in {elapsed_s:.0f} s, RSS sampled every {args.sample_every:g} s")
    if len(settled) < 2:
        print(f"soak: too few RSS samples after the {args.warmup:g} s warm-up for a slope")
    else:
        low, high = min(mb for _, mb in settled), max(mb for _, mb in settled)
        print(
            f"rss slope after {args.warmup:g} s warm-up: {slope_mb_per_min(settled):+.3f} MB/min "
            f"over {len(settled)} samples (min {low:.1f}, max {high:.1f} MB)"
        )
    # Between waves every agent is closed: what is held then should not grow from wave to wave.
    ends = [snapshot for t, snapshot in wave_ends if t >= args.warmup]
    if len(ends) >= 2:
        first, last = ends[0], ends[-1]
        print(
            f"between waves after warm-up ({len(ends)} waves), first -> last: "
            f"rss {first.rss_mb:.1f} -> {last.rss_mb:.1f} MB, fds {len(first.fds)} -> {len(last.fds)} "
            f"(keep-alive {len(first.keepalive)} -> {len(last.keepalive)}), "
            f"threads {first.threads} -> {last.threads}, "
            f"child procs {len(first.children)} -> {len(last.children)}"
        )


def sample_rss(stop: threading.Event, every_s: float, began: float, into: list[tuple[float, float]]) -> None:
    while not stop.wait(every_s):
        into.append((time.monotonic() - began, rss_mb()))


# ------------------------------------------------------------ --processes: durable sessions


def durable_model(recorded: Any) -> dict[str, Any]:
    """Call `remember` and `checksum`, then answer quoting the input (so interleaving shows)."""
    body = recorded.body if isinstance(recorded.body, dict) else {}
    messages = body.get("messages") or [{}]
    users = [m for m in messages if m.get("role") == "user"]
    text = str(users[-1].get("content", "")) if users else ""
    if messages[-1].get("role") == "tool":
        return {"text": f"done: {text}", "chunk_size": 16}
    return {
        "text": "On it.",
        "tool_calls": [
            {"name": "remember", "arguments": {"key": "k", "value": text}},
            {"name": "checksum", "arguments": {"text": text}},
        ],
    }


def durable_worker(job: dict[str, Any]) -> None:
    """`--worker JSON`: one process of a pair: `rounds` sends on its session; prints a JSON tally."""
    import random

    from agentcore import ToolContext

    store = open_durable_store(job["store"])
    effects = job["effects"]

    @tool
    def remember(key: str, value: str, ctx: ToolContext) -> str:
        """Keep a note, slowly.

        Args:
            key: The note's name.
            value: What to keep.
        """
        with open(effects, "a") as file:
            file.write(ctx.tool_call_id + "\n")
        ctx.cancel.wait(random.uniform(0, 0.05))
        return f"kept {key}"

    config = {"base_url": job["base_url"], "model": MODEL, "no_tool_rounds": 1, "session_lease": 2.0}
    outcomes: dict[str, int] = {}
    with Agent(config, tools=load(job["tools"], [remember]), session=store.session(job["session"])) as agent:
        for round_ in range(job["rounds"]):
            try:
                outcome = agent.send(f"{job['name']} message {round_}").reason
            except AgentError as error:
                outcome = error.kind
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            time.sleep(random.uniform(0, 0.3))  # sometimes the partner finishes first
    store.close()
    gc.collect()
    time.sleep(0.2)  # a keeper thread or an idle tool thread ends just after the last release
    # The tool-process spawner is one thread per process by design (tools/process.py), not a run's.
    leftovers = [
        t.name
        for t in threading.enumerate()
        if t is not threading.main_thread() and t.name != "agentcore-tool-spawner"
    ]
    print(json.dumps({"outcomes": outcomes, "threads": leftovers, "children": descendants(os.getpid(), -1)}))


def open_durable_store(spec: list[str]) -> Any:
    from agentcore.store import PostgresStore, SQLiteStore

    return SQLiteStore(spec[1]) if spec[0] == "sqlite" else PostgresStore(spec[1])


def run_processes(args: argparse.Namespace) -> int:
    import random

    from agentcore.testing import ModelServer

    if args.processes < 2 or args.processes % 2:
        raise SystemExit("--processes takes an even number >= 2 (one session per pair)")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    with (
        tempfile.TemporaryDirectory(prefix="agentcore-stress-") as folder,
        ModelServer(default=durable_model) as server,
    ):
        Path(folder, "checksum.py").write_text(CHECKSUM_TOOL)
        spec = (
            ["postgres", durable_schema(args.postgres)]
            if args.postgres
            else ["sqlite", args.sqlite or f"{folder}/s.db"]
        )
        effects = f"{folder}/effects.log"
        sessions = [f"pair-{n}" for n in range(args.processes // 2)]
        began = time.monotonic()
        workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--worker",
                    json.dumps(
                        {
                            "store": spec,
                            "session": sessions[n // 2],
                            "name": f"p{n}",
                            "rounds": args.rounds,
                            "base_url": server.base_url,
                            "tools": folder,
                            "effects": effects,
                        }
                    ),
                ],
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            for n in range(args.processes)
        ]
        store = open_durable_store(spec)
        stops = 0
        while any(w.poll() is None for w in workers):
            time.sleep(random.uniform(0.1, 0.5))
            stops += bool(store.stop(random.choice(sessions)))
        tallies = [json.loads(w.communicate()[0].strip().splitlines()[-1]) for w in workers]
        elapsed = time.monotonic() - began
        violations = durable_violations(store, sessions, tallies, effects, args)
        store.close()
    outcomes: dict[str, int] = {}
    for tally in tallies:
        for kind, count in tally["outcomes"].items():
            outcomes[kind] = outcomes.get(kind, 0) + count
    aborted = outcomes.get("aborted", 0)
    completed = sum(
        count for kind, count in outcomes.items() if kind not in ("aborted",) and kind in ("no-tool",)
    )
    print(f"processes {args.processes} ({len(sessions)} sessions) x rounds {args.rounds}, store: {spec[0]}")
    print(
        f"sends: {sum(outcomes.values())} ({completed} completed, {aborted} stopped: "
        f"{max(aborted - stops, 0)} supersedes, {stops} by store.stop) in {elapsed:.1f} s"
    )
    print(f"outcomes: {dict(sorted(outcomes.items()))}")
    print(f"violations: {len(violations)}")
    for violation in violations[:20]:
        print(f"  {violation}")
    return 0 if not violations else 1


def durable_violations(
    store: Any, sessions: list[str], tallies: list[dict[str, Any]], effects: str, args: argparse.Namespace
) -> list[str]:
    from agentcore.history import tool_calls_of, tool_results_of

    found = []
    for tally in tallies:
        bad = {k: v for k, v in tally["outcomes"].items() if k not in ("no-tool", "aborted")}
        if bad:
            found.append(f"sends ended other than finished or aborted: {bad}")
        if tally["threads"] or tally["children"]:
            found.append(f"a worker kept threads {tally['threads']} / children {tally['children']}")
    started = Path(effects).read_text().splitlines() if Path(effects).exists() else []
    twice = [call for call in set(started) if started.count(call) > 1]
    if twice:
        found.append(f"{len(twice)} tool calls started twice: {twice[:5]}")
    for session in sessions:
        history = store.load(session)
        calls = [p["tool_call_id"] for m in history for p in tool_calls_of(m)]
        results = [p["tool_call_id"] for m in history for p in tool_results_of(m)]
        if sorted(calls) != sorted(results) or len(set(results)) != len(results):
            found.append(f"{session}: calls and results do not pair one to one")
        inputs = [m["content"] for m in history if m["role"] == "user"]
        if len(inputs) != len(set(inputs)) or len(inputs) != 2 * args.rounds:
            distinct = len(set(inputs))
            found.append(
                f"{session}: {len(inputs)} inputs stored ({distinct} distinct), {2 * args.rounds} sent"
            )
        for index, entry in enumerate(history):
            text = entry["content"][0].get("text", "") if entry["role"] == "assistant" else ""
            if text.startswith("done: "):
                asked = next(m["content"] for m in reversed(history[:index]) if m["role"] == "user")
                if text != f"done: {asked}":
                    found.append(f"{session} entry {index}: {text!r} answers another input than {asked!r}")
    return found


def durable_schema(dsn: str) -> str:
    import uuid

    import psycopg
    from psycopg.conninfo import make_conninfo

    schema = f"stress_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
    return str(make_conninfo(dsn, options=f"-c search_path={schema}"))


# ------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.serve:
        serve()
        return 0
    if args.worker:
        durable_worker(json.loads(args.worker))
        return 0
    if args.processes:
        return run_processes(args)
    if args.celery:
        import celery_stress

        return celery_stress.run(args)
    server, base_url = start_server()
    port = int(base_url.rsplit(":", 1)[1].split("/")[0])
    store = None
    try:
        with tempfile.TemporaryDirectory(prefix="agentcore-stress-") as folder:
            Path(folder, "checksum.py").write_text(CHECKSUM_TOOL)
            tools = load(folder)
            if args.sqlite:
                from agentcore.store import SQLiteStore

                store = SQLiteStore(args.sqlite)
            # Warm up: the first send loads requests, jsonschema and the protocols, and starts
            # the shared pools; none of that is growth.
            run_session("warm-up", 1, base_url, tools, Tally(), store, True)
            start = Snapshot.take(server, port)
            tally, samples = Tally(), [(0.0, start.rss_mb)]
            began = time.monotonic()
            stop_sampling = threading.Event()
            sampler = threading.Thread(
                target=sample_rss, args=(stop_sampling, args.sample_every, began, samples), daemon=True
            )
            sampler.start()
            wave, wave_ends = 0, []
            while True:
                run_wave(wave, args, base_url, tools, tally, store)
                wave += 1
                if args.duration is None or time.monotonic() - began >= args.duration:
                    break
                wave_ends.append((time.monotonic() - began, Snapshot.take(server, port)))
            elapsed = time.monotonic() - began
            stop_sampling.set()
            sampler.join()
            if store is not None:
                check_stored(args, store, tally)
                store.close()
            end = Snapshot.take(server, port)
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=30)
    report(args, tally, elapsed, start, end)
    if args.duration is not None:
        report_soak(args, wave, elapsed, samples, wave_ends)
    if args.json:
        print(json.dumps({"samples": samples}))
    return 0 if not tally.failures else 1


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=50, help="concurrent sessions (default 50)")
    parser.add_argument("--rounds", type=int, default=10, help="sends per session (default 10)")
    parser.add_argument("--sqlite", metavar="PATH", help="keep the sessions in this SQLite file")
    parser.add_argument("--duration", type=float, metavar="SECONDS", help="soak: repeat until this long")
    parser.add_argument("--sample-every", type=float, default=5.0, metavar="SECONDS", help="RSS sampling")
    parser.add_argument("--warmup", type=float, default=60.0, metavar="SECONDS", help="soak warm-up")
    parser.add_argument("--json", action="store_true", help="also print the RSS samples as JSON")
    parser.add_argument("--processes", type=int, metavar="N", help="durable sessions: N processes in pairs")
    parser.add_argument(
        "--celery", action="store_true", help="sessions sent to Celery workers killed at random"
    )
    parser.add_argument("--kills", type=int, default=10, help="with --celery: worker kills (default 10)")
    parser.add_argument(
        "--restart-after",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="with --celery: task.send starts a task no worker took again after this long (default 30)",
    )
    parser.add_argument(
        "--postgres", metavar="DSN", help="with --processes / --celery: a PostgresStore (own schema)"
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
