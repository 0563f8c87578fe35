"""The app's Celery workers (several-processes mode, README: Several processes).

    cd examples/app && APP_BROKER=redis://127.0.0.1:6379/0 APP_POSTGRES=postgresql://... \
        celery -A workers worker -P threads -c 4

Each worker runs the sessions' agents — the same tools, model and production settings as
server.py — on the PostgreSQL store the web processes share; `server.py --broker` imports
`run_agent` from here to enqueue. APP_VISIBILITY (seconds, default 3600) is how long Redis waits
before it hands a killed worker's task to another, and APP_RESTORE (seconds, default Kombu's
~100) how often a worker looks for such tasks; APP_LEASE (default 10) how long a dead worker's
lease on its session lasts.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from contextlib import ExitStack
from typing import Any

from celery import Celery
from server import PRODUCTION_CONFIG, TOOLS, model_config, prices_config, research_tool

from agentcore import Agent
from agentcore.celery import agent_task
from agentcore.store import PostgresStore

BROKER = os.environ["APP_BROKER"]
app = Celery("agentcore-app", broker=BROKER, backend=BROKER)
app.conf.update(
    worker_prefetch_multiplier=1,  # a worker takes a task only when it can run it
    broker_transport_options={
        "visibility_timeout": float(os.environ.get("APP_VISIBILITY", "3600")),
        **(
            {"unacked_restore_interval": int(os.environ["APP_RESTORE"]), "unacked_restore_throttle": 1}
            if "APP_RESTORE" in os.environ
            else {}
        ),
    },
    broker_connection_retry_on_startup=True,
)
_process = ExitStack()  # the demo model server of this process, when there is no real endpoint


@functools.cache
def _store() -> PostgresStore:
    return PostgresStore(os.environ["APP_POSTGRES"])


@functools.cache
def _config() -> dict[str, Any]:
    lease = {"session_lease": float(os.environ.get("APP_LEASE", "10"))}
    return {**model_config(_process, None), **PRODUCTION_CONFIG, **prices_config(None), **lease}


def make_agent(session_id: str) -> Agent:
    # One JSON line per delivery on stderr: which worker process runs which session.
    line = {"session": session_id, "worker_pid": os.getpid(), "at": time.time()}
    print(json.dumps(line), file=sys.stderr, flush=True)
    config = _config()
    return Agent(config=config, tools=[*TOOLS, research_tool(config)], session=_store().session(session_id))


run_agent = agent_task(app, make_agent)
