"""The tasks module of the test workers: `celery -A celery_tasks worker` (cluster.py starts them).

    app, run_agent = make_app(broker, backend, visibility_s=4.0)   # the test process: its own app

Each worker reads its settings from the environment: AGENTCORE_TEST_BROKER / _BACKEND (Redis
URLs), AGENTCORE_TEST_STORE (JSON `["sqlite", path]` or `["postgres", dsn]`), AGENTCORE_TEST_MODEL
(the model server's base URL), AGENTCORE_TEST_VISIBILITY and AGENTCORE_TEST_LEASE (seconds).

What the tests count is written as lines to $AGENTCORE_EFFECTS: `task <session> <pid>` when a
delivery starts (the pid of the process running it, whose process group is its worker), and
`<tool> <tool_call_id> <pid>` at each tool start. A tool whose tag is "hang-once" hangs at its
first start (a test kills the worker there); "nap" takes up to 0.2 s; "gate:NAME" waits until
$AGENTCORE_TEST_GATES/NAME exists. A reply "die after this" kills the process running the task
once the reply is written, the first time (before the run could announce its end).
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

from celery import Celery

from agentcore import Agent, ToolContext, tool
from agentcore.celery import agent_task
from agentcore.tools import load

FILE_TOOLS = Path(__file__).with_name("celery_file_tools")
_stores: dict[int, Any] = {}


def make_app(broker: str, backend: str, visibility_s: float = 60.0) -> tuple[Celery, Any]:
    """A Celery app with the settings a user of agentcore.celery should set, and the task on it."""
    app = Celery("agentcore-tests", broker=broker, backend=backend)
    app.conf.update(
        # A worker takes a task only when a process of it is free to run it.
        worker_prefetch_multiplier=1,
        # Redis gives a task a worker did not acknowledge to another after `visibility_timeout`
        # (a killed worker never acknowledges); the sweep that does it runs every second here.
        broker_transport_options={
            "visibility_timeout": visibility_s,
            "unacked_restore_interval": 1,
            "unacked_restore_throttle": 1,
        },
        worker_cancel_long_running_tasks_on_connection_loss=True,
        broker_connection_retry_on_startup=True,
    )
    return app, agent_task(app, make_agent)


def store() -> Any:
    """One store per process (a prefork child makes its own)."""
    found = _stores.get(os.getpid())
    if found is None:
        from agentcore.store import PostgresStore, SQLiteStore

        kind, target = json.loads(os.environ["AGENTCORE_TEST_STORE"])
        found = _stores[os.getpid()] = SQLiteStore(target) if kind == "sqlite" else PostgresStore(target)
    return found


def record(line: str) -> bool:
    """Append a line to the effects file; True if it is the first line with these two words."""
    path = os.environ.get("AGENTCORE_EFFECTS")
    if not path:
        return True
    key = " ".join(line.split()[:2]) + " "
    first = not os.path.exists(path) or key not in Path(path).read_text()
    with open(path, "a") as file:
        file.write(f"{line} {os.getpid()}\n")
    return first


def act(name: str, tag: str, ctx: ToolContext) -> str:
    first = record(f"{name} {ctx.tool_call_id}")
    if tag == "hang-once" and first:
        time.sleep(600)
    if tag == "nap":  # scripts/stress.py --celery: calls take a moment, so some kills land in one
        ctx.cancel.wait(random.uniform(0, 0.2))
    if tag.startswith("gate:"):
        gate = Path(os.environ["AGENTCORE_TEST_GATES"], tag[5:])
        while not gate.exists():
            if ctx.cancel.wait(0.02):
                return f"{name} {tag} stopped"
    return f"{name} {tag} done"


def memory_tools() -> list[Any]:
    @tool
    def mem_effect(tag: str, ctx: ToolContext) -> str:
        """Do something that must happen once.

        Args:
            tag: what to do.
        """
        return act("mem_effect", tag, ctx)

    @tool(replay="safe")
    def safe_effect(tag: str, ctx: ToolContext) -> str:
        """Do something that may happen again.

        Args:
            tag: what to do.
        """
        return act("safe_effect", tag, ctx)

    @tool(needs_approval=True)
    def approve_me(tag: str, ctx: ToolContext) -> str:
        """Do something a person must approve first.

        Args:
            tag: what to do.
        """
        return act("approve_me", tag, ctx)

    return [mem_effect, safe_effect, approve_me]


TOOLS = load(str(FILE_TOOLS), memory_tools())


def die_after_reply(turn: dict[str, Any]) -> None:
    """finish_turn hook: the reply is written; kill this process before the run can end."""
    text = "".join(p.get("text", "") for p in turn["message"]["content"] if p.get("type") == "text")
    if text == "die after this" and record(f"die {turn['message']['id']}"):
        os.kill(os.getpid(), signal.SIGKILL)


def make_agent(session_id: str) -> Agent:
    """The factory: an agent on the session, talking to the test's model server."""
    record(f"task {session_id}")
    config = {
        "base_url": os.environ["AGENTCORE_TEST_MODEL"],
        "model": "m",
        "no_tool_rounds": 1,
        "retry_base_delay": 0.05,
        "retry_max_elapsed": 30.0,
        "request_timeout": 30.0,
        "session_lease": float(os.environ.get("AGENTCORE_TEST_LEASE", "1.0")),
    }
    hooks = {"finish_turn": die_after_reply}
    return Agent(config=config, tools=TOOLS, hooks=hooks, session=store().session(session_id))


if "AGENTCORE_TEST_BROKER" in os.environ:
    app, run_agent = make_app(
        os.environ["AGENTCORE_TEST_BROKER"],
        os.environ.get("AGENTCORE_TEST_BACKEND", os.environ["AGENTCORE_TEST_BROKER"]),
        float(os.environ.get("AGENTCORE_TEST_VISIBILITY", "60")),
    )
