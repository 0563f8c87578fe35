"""Agents on Celery workers: Celery carries the work, the session store carries the state.

    # tasks.py, imported by the web process and by every worker
    app = Celery("chat", broker="redis://127.0.0.1:6379/0", backend="redis://127.0.0.1:6379/1")
    run_agent = agent_task(app, make_agent)          # make_agent(session_id) -> Agent(session=...)

    run_agent.start("user-42", "Summarise the logs")   # the web process: enqueue; an AsyncResult
    run_agent.start("user-42")                         # no input: resume (after agent.decide(), say)
    run_agent.send("user-42", "Summarise the logs")    # start, wait for the result dict, start again
                                                       # with the same entry id if no worker took it

The task is declared `acks_late` with `reject_on_worker_lost`, so a worker killed mid-run has its
task delivered again, to another worker. What keeps a second delivery safe is the session:
`start` gives the input its history entry id before enqueueing, and a delivery that finds that
entry in history continues the run with `resume()` instead of appending it again — under the
journal's rules, so no non-replayable call runs twice and no approval is consumed twice. A
delivery that finds the run already over (the worker died after the last entry was written)
returns how it ended, without a model request. Celery is imported when `agent_task` is called.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, is_dataclass
from typing import Any

from ._utils.ids import random_hex
from .agent import Agent
from .call_ids import tool_calls_of
from .config import DEFAULTS
from .errors import AgentError
from .inputs import user_entry
from .result import SendResult
from .store.base import check_id
from .usage import Usage, total

__all__ = ["agent_task"]

INSTALL_HINT = "pip install 'agentcore[celery]'"
Factory = Callable[[str], Agent]
Message = dict[str, Any]
log = logging.getLogger(__name__)
# How often a second delivery looks whether the session's run has ended.
SETTLE_POLL_S = 0.1
# How often `task.send` looks whether its task has ended.
RESULT_POLL_S = 0.05


def agent_task(app: Any, factory: Factory, *, name: str = "agentcore.run") -> Any:
    """Register on `app` the task that runs a session's agent; returns it (it has `start`).

    Args:
        app: the Celery application (the web process and the workers import the same one).
        factory: `factory(session_id)` builds the agent, with `session=store.session(session_id)`;
            called once per delivery, in the worker.
        name: the task's name.

    Returns:
        The task. `task.start(session_id, input=None, **apply_async_options)` enqueues a run and
        returns its `AsyncResult`; the task's result is the run's `SendResult` as a plain dict.
    """
    if not callable(factory):
        raise AgentError(f"agent_task needs factory(session_id) -> Agent, got {factory!r}", kind="config")
    base = _task_class()

    def run(task: Any, session_id: str, input: Any = None) -> dict[str, Any]:
        request = task.request
        redelivered = bool((request.delivery_info or {}).get("redelivered"))
        return run_session(factory, session_id, input, task_id=request.id, redelivered=redelivered)

    run.__doc__ = f"Run the agent of one session ({factory!r}): send the input, or resume."
    # track_started: a task a worker took shows STARTED, so `send` tells a lost task (still
    # PENDING) from one that runs or waits for its redelivery.
    return app.task(
        bind=True, base=base, name=name, acks_late=True, reject_on_worker_lost=True, track_started=True
    )(run)


@functools.cache
def _task_class() -> Any:
    """The Task class with `start` (made once Celery is imported)."""
    try:
        from celery import Task
    except ImportError as exc:
        raise AgentError(f"agentcore.celery needs Celery: {INSTALL_HINT}", kind="config") from exc

    class AgentTask(Task):  # type: ignore[misc]
        """A session's run on a worker; `start` enqueues one (see agentcore.celery)."""

        def start(self, session_id: str, input: Any = None, **options: Any) -> Any:
            """Enqueue a run of `session_id`: send `input`, or resume when it is None.

            The input gets its entry id here, before enqueueing: a delivery that finds it in
            history resumes instead of appending it twice.

            Raises:
                AgentError: kind "request" for a bad session id or input (nothing is enqueued).
            """
            entry = None if input is None else _stamped(user_entry(input, DEFAULTS))
            return self.apply_async((check_id(session_id), entry), **options)

        def send(
            self,
            session_id: str,
            input: Any = None,
            *,
            timeout: float | None = None,
            restart_after: float = 60.0,
            **options: Any,
        ) -> dict[str, Any]:
            """`start`, then wait for the result dict; start again, with the same entry id, when no
            worker has taken the task after `restart_after` seconds (a broker can lose a task handed
            to a worker killed that instant: Redis, celery/celery#4354). The id makes the second
            delivery safe: one that finds the input in history waits for its run and answers with
            how it ended.

            Raises:
                AgentError: as `start`, or the run's error (the task failed).
                TimeoutError: no result within `timeout` seconds (None: wait as long as it takes).
            """
            if not restart_after > 0:
                raise AgentError(f"restart_after must be > 0 seconds, got {restart_after!r}", kind="config")
            entry = None if input is None else _stamped(user_entry(input, DEFAULTS))
            args = (check_id(session_id), entry)
            pending = self.apply_async(args, **options)
            return _result_of(lambda: self.apply_async(args, **options), pending, timeout, restart_after)

    return AgentTask


def _result_of(restart: Callable[[], Any], first: Any, timeout: float | None, every: float) -> dict[str, Any]:
    """The result of the first of the task's starts to end. Polled (AsyncResult.get() is not safe
    from many threads at once); every `every` seconds while no start has left PENDING (no worker
    took one), one more start. A start that was only slow is as good as the last: they share the
    entry id, so whichever runs second answers with the first's run."""
    began = time.monotonic()
    restart_at = began + every
    starts = [first]
    while True:
        done = next((pending for pending in starts if pending.ready()), None)
        if done is not None:
            result: dict[str, Any] = done.get(timeout=every)
            return result
        now = time.monotonic()
        if timeout is not None and now - began > timeout:
            raise TimeoutError(f"task {first.id} gave no result within {timeout} s")
        if now >= restart_at:
            restart_at = now + every
            if all(pending.state == "PENDING" for pending in starts):
                log.warning("task %s: no worker took it within %s s; starting it again", first.id, every)
                starts.append(restart())
        time.sleep(RESULT_POLL_S)


def run_session(
    factory: Factory, session_id: str, input: Any, *, task_id: str | None = None, redelivered: bool = False
) -> dict[str, Any]:
    """What one delivery of the task does (also callable without Celery, for tests and scripts).

    Returns:
        The result dict: `text`, `reason`, `steps`, `usage`, `pending`, `output`, `superseded`.

    Raises:
        AgentError: the run failed (any kind but "aborted": a run superseded or stopped ends
            quietly, with `superseded: true`).
    """
    agent = _agent_of(factory, session_id)
    try:
        return _deliver(agent, _entry(input, task_id), redelivered)
    except AgentError as error:
        if error.kind != "aborted":
            raise
        log.info("session %s: the run was superseded or stopped (%s)", session_id, error)
        return _quiet()
    finally:
        # Whatever happened, the agent's tool processes end with the task (and a run still going,
        # after a soft time limit interrupted the wait, is stopped with its calls closed).
        agent.close()


def _deliver(agent: Agent, entry: Message | None, redelivered: bool) -> dict[str, Any]:
    """Send the input, or resume: a second delivery never writes its input twice."""
    if entry is None:
        if not redelivered:
            return as_dict(agent.resume())
        _settle(agent)
        return _over(agent, -1) or as_dict(agent.resume())
    index = _index_of(agent.history, entry["id"])
    if index is None:
        return as_dict(agent.send(entry))
    log.info(
        "session %s: input %s is in history already: the task was delivered again", _id(agent), entry["id"]
    )
    _settle(agent)
    index = _index_of(agent.history, entry["id"])
    return _over(agent, index if index is not None else -1) or as_dict(agent.resume())


def _index_of(history: list[Message], entry_id: str) -> int | None:
    return next((i for i, e in enumerate(history) if e.get("id") == entry_id), None)


def _settle(agent: Agent) -> None:
    """Before a second delivery decides whether the run is over: wait until no run of the session
    is going, then read the history the store holds. The broker's visibility timeout hands a long
    task out again while its first delivery still runs: that one finishes and writes the task's
    result; a holder that died is done once its lease lapses; a newer start's run is left alone."""
    session = agent.session
    lease_state = getattr(getattr(session, "store", None), "lease_state", None)
    if session is None or not callable(lease_state):
        return
    if lease_state(session.id).live:
        log.info("session %s: a run is going; this delivery waits for it to end", session.id)
        while lease_state(session.id).live:
            time.sleep(SETTLE_POLL_S)
    agent.reload()


def _agent_of(factory: Factory, session_id: str) -> Agent:
    agent = factory(check_id(session_id))
    session = getattr(agent, "session", None)
    if not isinstance(agent, Agent) or session is None or session.id != session_id:
        if isinstance(agent, Agent):
            agent.close()
        raise AgentError(
            f"the factory must return Agent(session=store.session({session_id!r})), got {agent!r}: "
            "the session is what makes a task safe to deliver twice and visible from the web process",
            kind="config",
        )
    return agent


def _entry(input: Any, task_id: str | None) -> Message | None:
    """The input as the entry to send; its id is the task's when `start` did not give one."""
    if input is None:
        return None
    entry = (
        dict(input) if isinstance(input, Mapping) and "role" in input else {"role": "user", "content": input}
    )
    entry.setdefault("id", task_id or random_hex())
    return entry


def _stamped(entry: Message) -> Message:
    entry.setdefault("id", random_hex())
    return entry


def _id(agent: Agent) -> str:
    return agent.session.id if agent.session is not None else "?"


# ---------------------------------------------------------------- a run that was over already


def _over(agent: Agent, index: int) -> dict[str, Any] | None:
    """How the session's run ended, when nothing after entry `index` is left to continue; else None.

    Two records say so: the event log holds the `agent_end` of the run that wrote the last entry
    (and of every run since); or history ends with a reply that ends a run by the loop's rules
    (the worker died between writing it and announcing the end). In doubt: None, and the caller
    resumes — the journal keeps that safe, at worst one more model request.
    """
    history = agent.history
    moved_on = any(e.get("role") == "user" for e in history[index + 1 :]) if index >= 0 else False
    end = _last_end(agent, history)
    if end is not None:
        error = end.get("error")
        if error:
            if error.get("kind") == "aborted":
                return _quiet()
            raise AgentError(str(error.get("message")), kind=error.get("kind"), status=error.get("status"))
        usage = Usage.of(**(end.get("usage") or {}))
        return _plain(
            end.get("text") or "", end.get("reason"), int(end.get("steps") or 0), usage, agent, moved_on
        )
    reason = _final_reply(agent, history[index + 1 :])
    if reason is None:
        return None
    replies = [e for e in history[index + 1 :] if e.get("role") == "assistant"]
    text = _text_of(replies[-1])
    return _plain(text, reason, len(replies), total(history[index + 1 :]), agent, moved_on)


def _last_end(agent: Agent, history: list[Message]) -> Mapping[str, Any] | None:
    """The `agent_end` of the last run, if the run that announced history's last entry and every
    run since have ended (the store keeps the events of the current and the previous run)."""
    if not history or agent.session is None:
        return None
    runs: list[str] = []
    ends: dict[str, Mapping[str, Any]] = {}
    wrote: dict[str, str] = {}
    session = agent.session
    store: Any = session.store
    if not callable(getattr(store, "watch", None)):
        return None  # a store without an event log: history alone decides
    with store.watch(session.id, after=0, timeout=0) as events:
        for event in events:
            run = str(event.get("run_id"))
            if run not in runs:
                runs.append(run)
            if event.get("type") == "agent_end":
                ends[run] = event
            elif event.get("type") == "message_end":
                wrote[str(event.get("message", {}).get("id"))] = run
    writer = wrote.get(str(history[-1].get("id")))
    if writer is None or any(run not in ends for run in runs[runs.index(writer) :]):
        return None
    return ends[runs[-1]]


def _final_reply(agent: Agent, tail: list[Message]) -> str | None:
    """The reason a run ended, when `tail` (what it wrote) ends with a reply that ends a run.

    API.md §The loop: a reply without tool calls ends the run ("finished") when no tools are
    registered or structured output is asked for (a written reply has validated), and ("no-tool")
    once the model has skipped tools `no_tool_rounds` rounds in a row.
    """
    if not tail or tail[-1].get("role") != "assistant" or tool_calls_of(tail[-1]):
        return None
    config = agent.config
    if not (agent.tools and config["capabilities"].get("tools", True)) or config["output"] is not None:
        return "finished"
    skipped = 0
    for entry in reversed(tail):
        if entry.get("role") != "assistant" or tool_calls_of(entry):
            break
        skipped += 1
    return "no-tool" if skipped >= config["no_tool_rounds"] else None


def _text_of(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text")


# ---------------------------------------------------------------- the task's result


def as_dict(result: SendResult) -> dict[str, Any]:
    """A `SendResult` as the task's result: plain JSON, whatever the result backend's serializer."""
    return {
        "text": result.text,
        "reason": result.reason,
        "steps": result.steps,
        "usage": result.usage.to_dict(),
        "pending": list(result.pending),
        "output": _jsonable(result.output),
        "superseded": False,
    }


def _plain(
    text: str, reason: Any, steps: int, usage: Usage, agent: Agent, superseded: bool
) -> dict[str, Any]:
    pending = agent.pending() if reason == "approval" else []
    return {
        "text": text,
        "reason": reason,
        "steps": steps,
        "usage": usage.to_dict(),
        "pending": pending,
        "output": None,
        "superseded": superseded,
    }


def _quiet() -> dict[str, Any]:
    """A run superseded by a newer one, or stopped: the task still succeeds."""
    return {
        "text": "",
        "reason": None,
        "steps": 0,
        "usage": Usage().to_dict(),
        "pending": [],
        "output": None,
        "superseded": True,
    }


def _jsonable(value: Any) -> Any:
    """Structured output as plain data (a class's instances: dataclasses, `model_dump()` objects)."""
    if isinstance(value, list):
        return [_jsonable(item) for item in value]
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return value
