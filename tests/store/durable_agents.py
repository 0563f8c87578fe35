"""Agents with a durable session in child processes: `python durable_agents.py COMMAND JSON`.

    run        one agent call (send / resume / pending / decide / stop / steer / follow_up / watch) from
               the job's JSON; prints one JSON line with what happened
    launcher   imports everything once, then forks a fresh child per job line on stdin (a fast,
               clean start for the crash matrix); prints `pid N`, the child's markers, `exit {...}`

Tools (memory and file) record each start as a line `<tool> <tool_call_id>` in the file named by
$AGENTCORE_EFFECTS, so a test can count how many times a call really ran.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from store_workers import open_store

FILE_TOOLS = Path(__file__).with_name("durable_file_tools")


def mark(text: str) -> None:
    # One write per line, straight to the fd: lines from several threads never mix.
    os.write(1, (text + "\n").encode())


def effect(name: str, call_id: str, tag: str = "") -> None:
    """Record a start; a tag "hang-once" then hangs, the first time only (a test kills it there)."""
    path = os.environ.get("AGENTCORE_EFFECTS")
    if not path:
        return
    first = not os.path.exists(path) or f" {call_id}\n" not in Path(path).read_text()
    with open(path, "a") as file:
        file.write(f"{name} {call_id}\n")
    if tag == "hang-once" and first:
        mark("hanging")
        time.sleep(600)


def memory_tools() -> list[Any]:
    from agentcore import ToolContext, tool

    @tool
    def mem_effect(tag: str, ctx: ToolContext) -> str:
        """Do something that must happen once.

        Args:
            tag: anything.
        """
        mark("tool")
        effect("mem_effect", ctx.tool_call_id, tag)
        time.sleep(0.02)
        return f"mem {tag}"

    @tool(replay="safe")
    def safe_effect(tag: str, ctx: ToolContext) -> str:
        """Something that may happen again.

        Args:
            tag: anything.
        """
        mark("tool")
        effect("safe_effect", ctx.tool_call_id, tag)
        time.sleep(0.02)
        return f"safe {tag}"

    @tool(needs_approval=True)
    def approve_me(tag: str, ctx: ToolContext) -> str:
        """Something a person must approve first.

        Args:
            tag: anything.
        """
        mark("tool")
        effect("approve_me", ctx.tool_call_id, tag)
        time.sleep(0.02)
        return f"approved {tag}"

    @tool
    def slow(seconds: float, ctx: ToolContext) -> str:
        """Wait a while (stoppable).

        Args:
            seconds: how long.
        """
        mark("slow")
        ctx.cancel.wait(seconds)
        return "slept"

    return [mem_effect, safe_effect, approve_me, slow]


def make_agent(job: dict[str, Any], store: Any) -> Any:
    from agentcore import Agent
    from agentcore.tools import load

    tools = memory_tools()
    if job.get("file_tools"):
        tools = [load(str(FILE_TOOLS)), *tools]
    config = {
        "base_url": job["base_url"],
        "model": "m",
        "no_tool_rounds": 1,
        "retry_base_delay": 0.01,
        # A job must end even when its model server is gone (a failed test closed it).
        "retry_max_elapsed": 20.0,
        "request_timeout": 30.0,
        "session_lease": job.get("lease", 0.5),
        **job.get("config", {}),
    }
    callbacks = {
        "on_llm_event": lambda e: mark("stream") if e.get("type") == "text-delta" else None,
        "on_step": lambda _p: mark("step"),
    }
    return Agent(
        config=config, tools=load(*tools), callbacks=callbacks, session=store.session(job["session"])
    )


def run(job: dict[str, Any]) -> dict[str, Any]:
    """Do what the job says; returns what to print."""
    from agentcore import AgentError

    store = open_store(job["spec"])
    try:
        action = job["action"]
        if action in ("stop", "steer", "follow_up"):
            started = time.time()
            value = getattr(store, action)(job["session"], *([job["message"]] if "message" in job else []))
            return {"value": value, "at": started, "done": time.time()}
        agent = make_agent(job, store)
        if job.get("events"):
            agent.subscribe(lambda event: mark("event " + json.dumps(event)))
        if job.get("wait"):
            # A barrier: the test releases several processes at once with one line each.
            print("ready", flush=True)
            sys.stdin.readline()
        try:
            if action == "pending":
                return {"pending": agent.pending(), "history": len(agent.history)}
            if action == "decide":
                agent.decide(job["call"], job["allow"], reason=job.get("reason"), input_hash=job.get("hash"))
                return {"decided": job["call"]}
            if action == "recover":
                return recover(agent)
            if action == "sends":
                return sends(agent, job)
            if action == "task":
                # A whole task: send, then approve what waits and resume (the crash matrix's run).
                first = agent.send(job["input"])
                return {"first": first.reason, **(recover(agent) if first.reason == "approval" else {})}
            result = agent.send(job["input"]) if action == "send" else agent.resume()
            return {
                "reason": result.reason,
                "pending": result.pending,
                "text": result.text,
                "at": time.time(),
            }
        except AgentError as error:
            return {"error": error.kind, "message": str(error), "at": time.time()}
        finally:
            agent.close()
    finally:
        store.close()


def sends(agent: Any, job: dict[str, Any]) -> dict[str, Any]:
    """`count` sends one after another: how each ended (a reason, or an error kind)."""
    from agentcore import AgentError

    outcomes = []
    for n in range(job["count"]):
        try:
            outcomes.append(agent.send(f"{job['name']} {n}").reason)
        except AgentError as error:
            outcomes.append(error.kind)
    return {"outcomes": outcomes}


def recover(agent: Any) -> dict[str, Any]:
    """After a crash: approve whatever waits and resume until the task is done."""
    reasons = []
    if not agent.history:
        return {"reasons": reasons, "empty": True}
    for _ in range(6):
        for call in agent.pending():
            agent.decide(call["tool_call_id"], True, input_hash=call["input_hash"])
        result = agent.resume()
        reasons.append(result.reason)
        if result.reason != "approval":
            break
    return {"reasons": reasons}


def launcher(_args: dict[str, Any]) -> None:
    """For each job line on stdin, fork a child that runs it; print how it ended (see the docstring)."""
    import importlib

    for name in (
        "agentcore.loop",
        "agentcore.protocols.chat",
        "agentcore.store.sqlite",
        "agentcore.store.postgres",
        "agentcore.store.sql",
        "requests",
        "jsonschema",
        "psycopg",
        "agentcore._http",
        "agentcore.tools.execute",
        "agentcore.tools.scan",
        "agentcore.tools.runner",
    ):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    print("ready", flush=True)
    previous = 0
    for line in sys.stdin:
        if previous:
            os.waitpid(previous, 0)
        job = json.loads(line)
        pid = previous = os.fork()
        if pid == 0:
            code = 0
            try:
                mark(f"pid {os.getpid()}")
                mark("result " + json.dumps(run(job)))
            except BaseException as exc:
                print(f"child failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                code = 1
            os._exit(code)
        # Wait without reaping: until the next job the pid stays a zombie, so a SIGKILL sent by the
        # test can never reach another process that reused the number.
        ended = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        killed = ended.si_code == os.CLD_KILLED
        print(
            "exit " + json.dumps({"killed": killed, "code": None if killed else ended.si_status}), flush=True
        )
    if previous:
        os.waitpid(previous, 0)


if __name__ == "__main__":
    command, argument = sys.argv[1], json.loads(sys.argv[2])
    if command == "launcher":
        launcher(argument)
    else:
        print(json.dumps(run(argument)), flush=True)
