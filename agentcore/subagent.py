"""Agents that call agents: `agent.as_tool(...)` turns an agent into a memory tool.

    researcher = Agent(config={..., "system": "You research."}, tools=[search])
    lead = Agent(config=..., tools=[researcher.as_tool("research", "Research a question")])

Each call runs a fresh copy of the agent (its config, tools, hooks and callbacks; its history
starting as a copy of the agent's at call time), so concurrent calls never share a history and
the template agent is never touched. The copy's events reach the calling run's listeners as
`{"type": "sub_agent", "tool_call_id", "tool_name", "event"}`; what its run used is added to
the calling tool message's `sub_agent_usage` (grandchildren included, since their usage is in
the child's own tool messages). Cancelling the call stops the copy and kills its tool processes.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from . import config as _config
from ._utils.threads import owner
from .errors import AgentError
from .events import Event, ToolScope, current_scope
from .usage import total

if TYPE_CHECKING:
    from .tools.decorator import ToolContext


class Child(Protocol):
    """What a call needs of the agent copy it runs: an `Agent`, described here so as not to import it."""

    history: list[dict[str, Any]]

    @property
    def running(self) -> Any: ...

    def subscribe(self, listener: Callable[[Event], Any]) -> Callable[[], None]: ...

    def send(self, input: Any, *, config: Any = ..., cancel: threading.Event | None = ...) -> Any: ...

    def stop(self) -> bool: ...

    def close(self) -> None: ...


TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "The task for the sub-agent, self-contained."}},
    "required": ["task"],
}


def as_tool(
    fresh_copy: Callable[[], Child],
    config: Mapping[str, Any],
    name: str,
    description: str,
    *,
    input_schema: Mapping[str, Any] | None = None,
    output: Any = None,
) -> dict[str, Any]:
    """A memory tool record whose calls each run a copy of the agent (see the module docstring).

    Args:
        fresh_copy: makes the copy a call runs (the agent's config, tools, hooks, callbacks, and a
            copy of its history, all as they are at call time).
        config: the agent's config now (a bad `output` fails here, not at the first call).
        name, description: the tool's name and description as the model sees them.
        input_schema: the call's arguments (default `{"task": string}`); the child's input is
            the `task` argument, or the whole arguments as JSON when there is no `task` string.
        output: structured output for the child (config `output`); the tool then returns the
            child's parsed `output` instead of its text.
    """
    if not isinstance(name, str) or not name:
        raise AgentError("as_tool() needs a non-empty str name", kind="config")
    if not isinstance(description, str):
        raise AgentError("as_tool() description must be a str", kind="config")
    overrides = {"output": output} if output is not None else None
    # Checked now, so a bad `output` fails here rather than at the first call.
    if overrides is not None:
        _config.merge(config, overrides)

    def execute(input: dict[str, Any], ctx: ToolContext) -> Any:
        return _call(fresh_copy, input, ctx, overrides)

    return {
        "name": name,
        "description": description,
        "input_schema": copy.deepcopy(dict(input_schema)) if input_schema is not None else TASK_SCHEMA,
        "execute": execute,
    }


def _call(
    fresh_copy: Callable[[], Child], input: dict[str, Any], ctx: ToolContext, overrides: dict[str, Any] | None
) -> Any:
    """One call: a fresh copy runs the task; its events and usage go to the calling run."""
    scope = current_scope()
    child = fresh_copy()
    start = len(child.history)
    forwarding = scope is not None and scope.events.listening()
    unsubscribe = child.subscribe(_forwarder(scope)) if scope is not None and forwarding else None
    unstop = _stop_with(scope.cancel, child) if scope is not None else None
    try:
        if scope is not None and scope.cancel.is_set():
            raise AgentError("the calling run was stopped before the sub-agent started", kind="aborted")
        result = child.send(_task(input), config=overrides, cancel=ctx.cancel)
    finally:
        if unstop is not None:
            unstop()
        if unsubscribe is not None:
            unsubscribe()
        if scope is not None:
            scope.add_usage(total(child.history[start:]))
        child.close()
    return result.output if overrides is not None else result.text


def _task(input: Mapping[str, Any]) -> str:
    task = input.get("task")
    if isinstance(task, str):
        return task
    return json.dumps(dict(input), ensure_ascii=False)


def _forwarder(scope: ToolScope) -> Callable[[Event], None]:
    """The child's listener: each event goes to the calling run as a `sub_agent` event."""
    events, call = scope.events, scope.call

    def forward(event: Event) -> None:
        events.emit("sub_agent", {"tool_call_id": call.id, "tool_name": call.name, "event": event})

    return forward


def _stop_with(cancel: Any, child: Child) -> Callable[[], None]:
    """Stop `child` (its tool processes killed) the moment the calling run is cancelled.

    The tool's own `ctx.cancel` is set only after the calling run has moved on; stopping the
    child inside the cancel itself means the caller's `stop()` returns with the child's
    processes gone. From inside a run's own thread it only signals (waiting there could wait
    for an event delivery that thread holds).
    """

    def stop() -> None:
        if owner() is None:
            child.stop()
        elif child.running is not None:
            child.running.cancel.set()

    on_set = getattr(cancel, "on_set", None)
    if on_set is None:
        return lambda: None
    remove: Callable[[], None] = on_set(stop)
    return remove
