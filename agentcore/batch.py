"""The tool calls of one round: each checked, decided and run; results land in call order.

    batch = Batch(state, calls)
    results = batch.run()          # one result dict per call, in call order

Per call: `on_tool_call` → argument check → `before_tool_call` → `on_permission` →
`tool_execution_start` → the tool → `after_tool_call` → `on_tool_result` / `tool_execution_end`.
Calls run in parallel, except that `tool_execution: "sequential"` runs one at a time, and a tool
with `execution_mode: "sequential"` is a barrier inside a parallel round. Whatever happens,
every call gets exactly one result (`close` answers the unfinished ones as interrupted).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from ._utils import surrogates
from ._utils.cancel import Signal, child
from ._utils.threads import spawn
from .events import Emitter, ToolScope, tool_scope
from .hooks import HookFailed, Hooks
from .protocols.base import ToolCall
from .tools.execute import check_call, run_checked
from .tools.handlers import ToolSet
from .tools.shape import denied_result, error_result, interrupted_result, shape, validate_block

_PER_CALL_CALLBACKS = ("on_tool_call", "on_permission", "on_tool_output", "on_tool_result")


class RunState(Protocol):
    """What a batch reads from the loop's run state."""

    agent_id: str
    history: list[dict[str, Any]]
    config: Any
    tools: ToolSet
    cancel: Signal
    pool: Any
    events: Emitter
    hooks: Hooks


class Batch:
    """The calls of one round, each on its own thread (or inline when nothing needs a thread)."""

    def __init__(self, state: RunState, calls: list[ToolCall]) -> None:
        self.state = state
        self.calls = calls
        self.results: list[dict[str, Any] | None] = [None] * len(calls)
        self.cancel, self._unfollow = child(state.cancel)
        # The first failure of a deciding callback (on_permission or a hook): it fails the send.
        self.failure: BaseException | None = None
        self._done = threading.Condition()
        self._threads: dict[int, threading.Thread] = {}
        # Calls whose input a before_tool_call hook rewrote: their results report the new input.
        self._rewritten: dict[str, ToolCall] = {}

    # ------------------------------------------------------------ scheduling

    def run(self) -> None:
        """Run every group of calls in turn until all have results or the run is cancelled."""
        unwake = self.cancel.on_set(self._wake)
        try:
            for group in self._groups():
                if self.cancel.is_set():
                    return
                self._start(group)
                self._wait(group)
        finally:
            unwake()

    def _groups(self) -> list[list[int]]:
        """Call indexes in groups that run together: a sequential call is a group of its own."""
        everything_sequential = self.state.config.get("tool_execution") == "sequential"
        schema = self.state.tools.schema
        groups: list[list[int]] = []
        parallel: list[int] | None = None
        for index, call in enumerate(self.calls):
            if everything_sequential or schema.get(call.name, {}).get("execution_mode") == "sequential":
                groups.append([index])
                parallel = None
            else:
                if parallel is None:
                    parallel = []
                    groups.append(parallel)
                parallel.append(index)
        return groups

    def _start(self, group: list[int]) -> None:
        if len(self.calls) == 1 and not self._needs_threads():
            # One call and nothing that must run on a tool thread (API.md §Callbacks, §Hooks):
            # run it here. run_call returns at once on cancel, so it stays interruptible.
            self._work(group[0])
            return
        for index in group:
            self._threads[index] = spawn(self._worker(index), name="agentcore-tool-call")

    def _needs_threads(self) -> bool:
        callbacks = self.state.events.callbacks
        return any(callbacks.get(name) for name in _PER_CALL_CALLBACKS) or self.state.hooks.any_per_call()

    def _worker(self, index: int) -> Callable[[], None]:
        return lambda: self._work(index)

    def _wait(self, group: list[int]) -> None:
        with self._done:
            while not self.cancel.is_set() and any(self.results[i] is None for i in group):
                self._done.wait()

    def _wake(self) -> None:
        with self._done:
            self._done.notify_all()

    def close(self) -> list[dict[str, Any]]:
        """Answer every unfinished call as interrupted; later results are dropped."""
        self._unfollow()
        unanswered = []
        with self._done:
            for index, result in enumerate(self.results):
                if result is None:
                    self.results[index] = interrupted_result()
                    unanswered.append(index)
        for index in unanswered:
            self.state.events.tool_end(self.calls[index], self.results[index] or {})
        # A call that stored its own result only has its announcement left: wait for it, so no
        # event of this round arrives after the round (or the send) has ended.
        for index, thread in self._threads.items():
            if index not in unanswered:
                thread.join()
        return [r for r in self.results if r is not None]

    # ------------------------------------------------------------ one call

    def _work(self, index: int) -> None:
        call = self.calls[index]
        try:
            result = self._execute(call)
        except HookFailed as exc:
            result = error_result(str(exc))
            self._fail(exc)
        except BaseException as exc:  # a bug in a callback path must still answer the call
            result = error_result(f"the tool call failed: {type(exc).__name__}: {exc}")
        # Whatever produced it (a tool, an MCP server, a hook), it goes into history: text UTF-8
        # cannot encode would fail every later request (API.md §Details "Text that cannot be encoded").
        result = surrogates.replaced(result, f"the result of tool {call.name!r} (call {call.id})")
        with self._done:
            if self.results[index] is not None:
                return
            self.results[index] = result
            self._done.notify_all()
        if self.failure is not None:
            # Cancel only once the failed call's error result is stored: cancelling first would
            # let close() answer it as interrupted.
            self.cancel.set()
        self.state.events.tool_end(self._rewritten.get(call.id, call), result)

    def _fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc

    def _execute(self, call: ToolCall) -> dict[str, Any]:
        state = self.state
        events = state.events
        events.tool_call(call)
        problem = check_call(state.tools, call)
        if problem is not None:
            return self._unknown(call, problem)
        input = call.arguments
        decision = None
        if "before_tool_call" in state.hooks:
            decision = state.hooks.before_tool_call(state.hooks.call_view(call, input, state.history))
        if decision is not None:
            if "block" in decision:
                return denied_result(str(decision["block"]) if decision["block"] else None)
            if "input" in decision:
                input = decision["input"]
                call = self._rewritten[call.id] = ToolCall(call.id, call.name, input)
                problem = check_call(state.tools, call)
                if problem is not None:
                    return problem
        on_permission = events.callbacks.get("on_permission")
        if on_permission is not None:
            denied = self._ask(on_permission, call)
            if denied is not None:
                return denied
        if self.cancel.is_set():
            return interrupted_result()
        events.tool_start(call, input)
        # The scope tells a delegating tool (a sub-agent) which call it works for (subagent.py).
        scope = ToolScope(events, call, self.cancel)
        with tool_scope(scope):
            result = run_checked(
                state.tools,
                call,
                cancel=self.cancel,
                on_output=events.tool_output,
                limit=state.config["max_tool_output"],
                agent_id=state.agent_id,
                pool=state.pool,
            )
        if scope.usage is not None:
            result = {**result, "sub_agent_usage": scope.usage.to_dict()}
        if result.get("interrupted") or "after_tool_call" not in state.hooks:
            return result
        return self._after(call, input, result)

    def _unknown(self, call: ToolCall, problem: dict[str, Any]) -> dict[str, Any]:
        """A call that cannot run: the `unknown_tool` hook may answer a call to a missing tool."""
        state = self.state
        if call.name in state.tools:
            return problem
        answered, value = state.hooks.unknown_tool(state.hooks.call_view(call, call.arguments, state.history))
        return shape(value) if answered else problem

    def _after(self, call: ToolCall, input: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        state = self.state
        decision = state.hooks.after_tool_call(state.hooks.call_view(call, input, state.history), result)
        if decision is None:
            return result
        result = dict(result)
        if "output" in decision:
            try:
                result["output"] = validate_block(decision["output"])
            except Exception as exc:
                raise HookFailed("after_tool_call", exc) from exc
            result.pop("error", None)
        if decision.get("stop") is True:
            result["stop"] = True
        return result

    def _ask(self, on_permission: Callable[..., Any], call: ToolCall) -> dict[str, Any] | None:
        """None when allowed; else the result to give (denied, interrupted, or an error)."""
        payload = {
            "tool_name": call.name,
            "input": call.arguments,
            "tool_call_id": call.id,
            "cancel": self.cancel,
        }
        try:
            allowed = on_permission(payload)
        except BaseException as exc:
            self._fail(_PermissionFailed(exc))
            return error_result(f"the permission check failed: {type(exc).__name__}: {exc}")
        if self.cancel.is_set():
            return interrupted_result()
        return None if allowed is True else denied_result()


class _PermissionFailed(Exception):
    """`on_permission` raised: the send fails with its exception as the cause."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"on_permission raised: {type(cause).__name__}: {cause}")
        self.cause = cause


def failure_error(failure: BaseException) -> Any:
    """The AgentError a failed deciding callback gives the send."""
    from .errors import AgentError

    if isinstance(failure, HookFailed):
        return failure.to_error()
    cause = failure.cause if isinstance(failure, _PermissionFailed) else failure
    error = AgentError(str(failure), kind="tool", cause=cause)
    error.__cause__ = cause
    return error
