"""Run one memory tool on its own daemon thread.

    result = run_memory(handler, input, tool_call_id="call_1", cancel=signal,
                        on_output=print, agent_id="a1")

The caller waits for whichever comes first: the tool finishing, `cancel` being set
(→ interrupted result at once), or the tool's timeout (→ timeout result). A thread cannot
be killed, so an abandoned tool keeps running with its `ctx.cancel` set; whatever it
returns or yields after `run_memory` returned is dropped, never delivered.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Callable, Generator
from typing import Any

from .._utils.cancel import Signal
from .._utils.notify import notify
from .._utils.threads import start
from .decorator import ToolContext
from .handlers import MemoryTool
from .shape import (
    error_result,
    exception_result,
    generator_value,
    interrupted_result,
    shape,
    shape_model_output,
    timeout_result,
)

OnOutput = Callable[[dict[str, Any]], Any]


def run_memory(
    handler: MemoryTool,
    input: dict[str, Any],
    *,
    tool_call_id: str,
    cancel: Signal,
    on_output: OnOutput | None = None,
    agent_id: str = "",
) -> dict[str, Any]:
    """Run `handler` with `input` and return its result dict; never raises for tool failures."""
    ctx = ToolContext(tool_call_id=tool_call_id, tool_name=handler.name, cancel=Signal(), agent_id=agent_id)
    call = _Call(handler, input, ctx, on_output)
    # Wake the waiter on cancel through the Signal's callback: no polling, no delay.
    forget = cancel.on_set(call.wake.set)
    try:
        if not cancel.is_set():
            call.start()
        call.wake.wait(handler.timeout)
        return call.close(cancelled=cancel.is_set(), timeout=handler.timeout)
    finally:
        forget()


class _Call:
    """One call's shared state between the waiting caller and the tool thread."""

    def __init__(
        self, handler: MemoryTool, input: dict[str, Any], ctx: ToolContext, on_output: OnOutput | None
    ) -> None:
        self.handler = handler
        self.input = input
        self.ctx = ctx
        self.on_output = on_output
        self.wake = threading.Event()
        self._lock = threading.Lock()
        self._closed = False
        self._result: dict[str, Any] | None = None

    def start(self) -> None:
        # The thread keeps the run's owner, so stop() called inside the tool only sets cancel.
        # The caller is woken once the thread is free again (see `threads.start`).
        start(self._run, name=f"agentcore-tool-{self.handler.name}", then=self.wake.set)

    def close(self, *, cancelled: bool, timeout: float | None) -> dict[str, Any]:
        """End the call for the caller: its result, or interrupted / timed out (and ctx.cancel set)."""
        with self._lock:
            self._closed = True
            result = self._result
        if result is not None:
            return result
        self.ctx.cancel.set()
        if cancelled or timeout is None:
            return interrupted_result()
        return timeout_result(timeout)

    def _run(self) -> None:
        try:
            result = self._execute()
        except BaseException as exc:  # a tool thread has no one else to report to
            result = exception_result(exc)
        with self._lock:
            if not self._closed:
                self._result = result

    def _execute(self) -> dict[str, Any]:
        handler = self.handler
        if handler.takes_context:
            value = handler.execute(self.input, self.ctx)
        else:
            value = handler.execute(self.input)
        if isinstance(value, types.CoroutineType):
            value.close()
            return error_result("The tool is an async function; tools must be plain functions (no asyncio).")
        if isinstance(value, types.GeneratorType):
            value = self._drain(value)
            if self.ctx.cancel.is_set():
                return interrupted_result()
        if handler.to_model_output is not None:
            return shape_model_output(handler.to_model_output, value, self.input)
        return shape(value)

    def _drain(self, generator: Generator[Any, Any, Any]) -> Any:
        """Stream the yields to on_output; stop early when the call was cancelled."""
        yields: list[Any] = []
        while not self.ctx.cancel.is_set():
            try:
                item = next(generator)
            except StopIteration as stop:
                return generator_value(stop.value, yields)
            yields.append(item)
            self._emit(item)
        generator.close()
        return None

    def _emit(self, data: Any) -> None:
        # Held across the callback so nothing is delivered after the caller has returned.
        with self._lock:
            if self._closed:
                return
            payload = {
                "tool_call_id": self.ctx.tool_call_id,
                "tool_name": self.ctx.tool_name,
                "stream": "yield",
                "data": data,
            }
            notify(self.on_output, payload)
