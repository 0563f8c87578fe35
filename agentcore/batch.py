"""The tool calls of one round: each checked, decided and run; results land in call order.

    batch = Batch(state, calls)
    results = batch.run()          # one result dict per call, in call order

Per call: `on_tool_call` → argument check → `before_tool_call` → `on_permission` (or the
journal's decision, for a call resumed after a crash or an approval) → the journal's claim →
`tool_execution_start` → the tool → `after_tool_call` → `on_tool_result` / `tool_execution_end`.
Calls run in parallel, except that `tool_execution: "sequential"` runs one at a time, and a tool
with `execution_mode: "sequential"` is a barrier inside a parallel round. Whatever happens,
every call gets exactly one result (`close` answers the unfinished ones as interrupted) — except
a deferred call (`on_permission` returned "defer", or a `needs_approval` tool and no
`on_permission`): it is recorded in the journal as pending and waits, without a result, for a
decision (`batch.pending` lists them; API.md §Durable sessions).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from ._utils import surrogates
from ._utils.cancel import Signal, child
from ._utils.threads import spawn
from .errors import AgentError
from .events import Emitter, ToolScope, tool_scope
from .hooks import HookFailed, Hooks
from .protocols.base import ToolCall
from .store.journal import INPUT_CHANGED, NO_DECISION, CallRecord, Journal, input_hash
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
    # The run's budget.Budget: a sub-agent called in this batch charges it (ToolScope.budget).
    budget: Any


# The result slot of a call left without a result: deferred (it waits for a decision), or never
# started when a resume took the run over (the resume runs it). Never written, never announced.
_NO_RESULT: dict[str, Any] = {"deferred": True}


class Batch:
    """The calls of one round, each on its own thread (or inline when nothing needs a thread).

    Args:
        state: the run's state; `state.journal` (when present) records each call's start.
        calls: the calls, in call order.
        records: journal records of these calls, for calls resumed after a crash, a supersede
            or an approval: their decision replaces `on_permission`, and a started call runs
            again only for a `replay: "safe"` tool.
    """

    def __init__(
        self,
        state: RunState,
        calls: list[ToolCall],
        records: dict[str, CallRecord] | None = None,
        claimed: frozenset[str] = frozenset(),
    ) -> None:
        self.state = state
        self.calls = calls
        self.journal: Journal | None = getattr(state, "journal", None)
        self.records = records or {}
        # Deferred calls: call id -> the pending dict (tool_call_id, tool_name, input, input_hash).
        self._pending: dict[str, dict[str, Any]] = {}
        # Calls the journal let start: once claimed, a call is answered even when handed over.
        # `claimed`: recorded as started with the reply that carries them (`reply_claims`).
        self._preclaimed = claimed
        self._claimed: set[str] = set(claimed)
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
        """Answer every unfinished call as interrupted; later results are dropped.

        Returns the results of the answered calls (`answered`), in call order: a deferred call
        has none, and neither has a call never started when a resume took the run over (the
        resume runs it: `state.handover`).
        """
        self._unfollow()
        handover = getattr(self.state, "handover", None)
        handed_over = (
            self.journal is not None and self.cancel.is_set() and handover is not None and handover()
        )
        unanswered = []
        with self._done:
            for index, result in enumerate(self.results):
                never_started = self.calls[index].id not in self._claimed
                if handed_over and never_started and (result is None or result.get("interrupted")):
                    self.results[index] = _NO_RESULT
                elif result is None:
                    self.results[index] = interrupted_result()
                    unanswered.append(index)
        for index in unanswered:
            self.state.events.tool_end(self.calls[index], self.results[index] or {})
        # A call that stored its own result only has its announcement left: wait for it, so no
        # event of this round arrives after the round (or the send) has ended.
        for index, thread in self._threads.items():
            if index not in unanswered:
                thread.join()
        if self.journal is not None:
            self.journal.settle(
                c.id for c, r in zip(self.calls, self.results, strict=True) if r is not _NO_RESULT
            )
        return [r for r in self.results if r is not None and r is not _NO_RESULT]

    @property
    def answered(self) -> list[ToolCall]:
        """The calls that have a result (every call but the deferred ones), in call order."""
        return [c for c, r in zip(self.calls, self.results, strict=True) if r is not _NO_RESULT]

    @property
    def pending(self) -> list[dict[str, Any]]:
        """The deferred calls, in call order: what `approval_required` and `SendResult.pending` carry."""
        return [self._pending[c.id] for c in self.calls if c.id in self._pending]

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
        if result is not _NO_RESULT:
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
        record = self.records.get(call.id)
        decided = self._recorded(call, record) if record is not None else self._permission(call)
        if decided is not None:
            return decided
        if self.cancel.is_set():
            return interrupted_result()
        claimed = self._claim(call)
        if claimed is not None:
            return claimed
        events.tool_start(call, input)
        # The scope tells a delegating tool (a sub-agent) which call it works for (subagent.py).
        scope = ToolScope(events, call, self.cancel, budget=state.budget)
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
        if scope.spend is not None:
            result = {**result, "sub_agent_spend": scope.spend.to_dict()}
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

    # ------------------------------------------------------------ decisions and the journal

    def _permission(self, call: ToolCall) -> dict[str, Any] | None:
        """A call met for the first time: None when it may run, else its result (or _NO_RESULT)."""
        on_permission = self.state.events.callbacks.get("on_permission")
        if on_permission is not None:
            return self._ask(on_permission, call)
        if self._flag(call, "needs_approval") is True:
            return self._defer(call)
        return None

    def _recorded(self, call: ToolCall, record: CallRecord) -> dict[str, Any] | None:
        """A resumed call: its journal record decides (None: it may be claimed now)."""
        state = record.state
        if state == "pending":
            self._pending[call.id] = record.pending_view()
            return _NO_RESULT
        if state == "denied":
            return denied_result(record.reason)
        if state == "closed":
            return denied_result(NO_DECISION)
        if state == "started" and self._flag(call, "replay") != "safe":
            return interrupted_result()
        if state == "allowed" and record.input_hash != input_hash(call.arguments):
            return denied_result(INPUT_CHANGED)
        return None

    def _claim(self, call: ToolCall) -> dict[str, Any] | None:
        """Record the call as started — the one start it gets; None when it may run now."""
        if self.journal is None or call.id in self._preclaimed:
            return None
        try:
            outcome, reason = self.journal.claim(
                call.id, call.name, input_hash(call.arguments), replay=self._flag(call, "replay") == "safe"
            )
        except AgentError as exc:
            return self._journal_failed(exc, "the call did not run")
        if outcome == "run":
            with self._done:
                self._claimed.add(call.id)
            return None
        if outcome == "pending":
            return self._defer(call)
        if outcome == "started":
            return interrupted_result()
        return denied_result(reason or NO_DECISION)

    def _defer(self, call: ToolCall) -> dict[str, Any]:
        """Record the call as waiting for a decision; it gets no result now."""
        if self.journal is None:
            return denied_result("the call needs an approval, and this run has no journal to wait in")
        hash = input_hash(call.arguments)
        view = {"tool_call_id": call.id, "tool_name": call.name, "input": call.arguments, "input_hash": hash}
        try:
            self.journal.defer(call.id, call.name, call.arguments, hash)
        except AgentError as exc:
            return self._journal_failed(exc, "the call could not wait for a decision")
        self._pending[call.id] = view
        return _NO_RESULT

    def _journal_failed(self, exc: AgentError, consequence: str) -> dict[str, Any]:
        """The result of a call whose journal write failed."""
        if exc.kind == "aborted":
            # The session is held by another run now: this one may start nothing more.
            self.cancel.set()
            return interrupted_result()
        self._fail(exc)
        return error_result(f"the call journal failed, so {consequence}: {exc}")

    def _flag(self, call: ToolCall, key: str) -> Any:
        return self.state.tools.schema.get(call.name, {}).get(key)

    def _ask(self, on_permission: Callable[..., Any], call: ToolCall) -> dict[str, Any] | None:
        """None when allowed; else the result to give (denied, deferred, interrupted, or an error)."""
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
        if allowed == "defer" and isinstance(allowed, str):
            return self._defer(call)
        return None if allowed is True else denied_result()


def reply_claims(state: RunState, calls: list[ToolCall]) -> list[tuple[str, str, str]]:
    """`(call_id, tool_name, input_hash)` of the calls that start as soon as their reply is written.

    Those are recorded as started in the reply's own commit (one transaction for the round, not
    one per call): the calls of the round's first group, when nothing can still stop them before
    they start — no `on_permission`, no `before_tool_call` hook, a known tool that needs no
    approval. Any other call is claimed by itself, right before it starts.
    """
    if getattr(state, "journal", None) is None or "before_tool_call" in state.hooks:
        return []
    if state.events.callbacks.get("on_permission") is not None:
        return []
    schema = state.tools.schema
    first: list[ToolCall] = []
    for call in calls:
        sequential = (
            state.config.get("tool_execution") == "sequential"
            or schema.get(call.name, {}).get("execution_mode") == "sequential"
        )
        if sequential and first:
            break
        first.append(call)
        if sequential:
            break
    return [
        (c.id, c.name, input_hash(c.arguments))
        for c in first
        if c.name in state.tools and schema[c.name].get("needs_approval") is not True
    ]


class _PermissionFailed(Exception):
    """`on_permission` raised: the send fails with its exception as the cause."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"on_permission raised: {type(cause).__name__}: {cause}")
        self.cause = cause


def failure_error(failure: BaseException) -> Any:
    """The AgentError a failed deciding callback (or the call journal) gives the send."""
    if isinstance(failure, HookFailed):
        return failure.to_error()
    if isinstance(failure, AgentError):
        return failure
    cause = failure.cause if isinstance(failure, _PermissionFailed) else failure
    error = AgentError(str(failure), kind="tool", cause=cause)
    error.__cause__ = cause
    return error
