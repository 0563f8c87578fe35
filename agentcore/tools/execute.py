"""Run one tool call: check it, run it, shape and cut its result.

    result = run_call(tools, call, cancel=signal, on_output=cb, limit=32000, agent_id=agent.id)
    result = execute("add", {"a": 1, "b": 2}, tools)       # public, outside the loop

`run_call` never raises for a tool's failure: an unknown tool, unparsable or invalid
arguments, an exception, a timeout or a cancel each come back as a result dict the model
can read (`output`, plus `stop`, `error`, `interrupted` when they apply).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._utils import surrogates
from .._utils.cancel import Signal, child
from .._utils.ids import random_hex
from .._utils.schemas import validator as _validator
from .handlers import FileTool, MemoryTool, ToolSet
from .memory import OnOutput, run_memory
from .shape import (
    error_result,
    exception_result,
    interrupted_result,
    invalid_call_result,
    truncate_result,
)
from .toolset import load

_MAX_LISTED_ERRORS = 5
_MAX_ERROR_CHARS = 300


class Call(Protocol):
    """What `run_call` reads from a tool call (`protocols.base.ToolCall` fits)."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def arguments(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class _DirectCall:
    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw_arguments: str | None = None


def run_call(tools: ToolSet, call: Call, **options: Any) -> dict[str, Any]:
    """Run one call of the model and return its result dict: `check_call`, then `run_checked`.

    `options` are `run_checked`'s keywords.
    """
    problem = check_call(tools, call)
    if problem is not None:
        return problem
    return run_checked(tools, call, **options)


def check_call(tools: ToolSet, call: Call, arguments: Any = None) -> dict[str, Any] | None:
    """The invalid-call or error result for a call that must not run, else None.

    `arguments` checks other arguments than the call's own (a hook's rewritten input).
    """
    handler = tools.handlers.get(call.name)
    raw = getattr(call, "raw_arguments", None)
    if handler is None:
        return invalid_call_result(call.name, raw, "there is no tool with this name", available=list(tools))
    if raw is not None:
        return invalid_call_result(call.name, raw, "the arguments are not a valid JSON object")
    given = call.arguments if arguments is None else arguments
    return _check_input(call.name, tools.schema[call.name].get("input_schema"), given)


def run_checked(
    tools: ToolSet,
    call: Call,
    *,
    cancel: threading.Event | None,
    on_output: OnOutput | None,
    limit: int | None,
    agent_id: str,
    pool: Any = None,
    concurrency: int | None = None,
) -> dict[str, Any]:
    """Run a call that `check_call` passed and return its result dict (never raises for the tool's failure).

    Args:
        tools: the effective tool set.
        call: the model's call (`id`, `name`, `arguments`, and `raw_arguments` when the
            argument text was not a JSON object).
        cancel: the run's cancel event (a `Signal` is followed without polling).
        on_output: receives `{"tool_call_id", "tool_name", "stream", "data"}`.
        limit: `max_tool_output` in characters, or None.
        agent_id: passed to the tool's context.
        pool: the agent's tool-process pool for file tools; None uses the shared pool.
        concurrency: passed to the pool as a keyword, when given.
    """
    handler = tools.handlers[call.name]
    signal, unfollow = _signal(cancel)
    try:
        if signal.is_set():
            return interrupted_result()
        run: Callable[..., dict[str, Any]] = run_memory
        if not isinstance(handler, MemoryTool):
            run = functools.partial(_run_file, pool=pool, concurrency=concurrency)
        result = run(
            handler,
            call.arguments,
            tool_call_id=call.id,
            cancel=signal,
            on_output=on_output,
            agent_id=agent_id,
        )
    finally:
        unfollow()
    return truncate_result(result, limit)


def execute(
    name: str,
    input: Mapping[str, Any],
    tools: Any,
    *,
    cancel: threading.Event | None = None,
    on_output: OnOutput | None = None,
    limit: int | None = None,
    concurrency: int | None = None,
) -> dict[str, Any]:
    """Run one tool directly, outside the loop; returns the same result dict the loop gets.

    Args:
        name: the tool's name (an unknown name gives an error result).
        input: the tool's arguments.
        tools: a ToolSet, or anything `load()` accepts.
        cancel: a `threading.Event`; setting it interrupts the call.
        on_output: receives streamed output (`{"tool_call_id", "tool_name", "stream", "data"}`).
        limit: cut the output to about this many characters.
        concurrency: how many file-tool processes the shared pool may run at once.
    """
    tool_set = tools if isinstance(tools, ToolSet) else load(tools)
    if not isinstance(input, Mapping):
        return error_result(f"The input of tool {name!r} must be a dict, got {type(input).__name__}.")
    call = _DirectCall(id=f"call_{random_hex()[:12]}", name=name, arguments=dict(input))
    if on_output is not None:
        on_output = _encodable_output(on_output)
    result = run_call(
        tool_set, call, cancel=cancel, on_output=on_output, limit=limit, agent_id="", concurrency=concurrency
    )
    # The same result the loop would write: text UTF-8 cannot encode becomes U+FFFD.
    return surrogates.replaced(result, f"the result of tool {name!r} (call {call.id})")


def _encodable_output(on_output: OnOutput) -> OnOutput:
    def forward(payload: dict[str, Any]) -> None:
        on_output(surrogates.fixed(payload))

    return forward


def _signal(cancel: threading.Event | None) -> tuple[Signal, Callable[[], None]]:
    """The run's cancel as a Signal; a plain Event is bridged (see `_utils.cancel.follow`)."""
    if isinstance(cancel, Signal):
        return cancel, _noop
    signal, unfollow = child(cancel)
    return signal, unfollow


def _noop() -> None:
    return None


def _run_file(
    handler: FileTool, arguments: dict[str, Any], *, pool: Any, concurrency: int | None, **call: Any
) -> dict[str, Any]:
    """Hand a file tool to the tool-process pool (tools/runner.py), which shapes its result.

    `call` holds run_memory's keywords (tool_call_id, cancel, on_output, agent_id), which the
    pool's `run` takes too.
    """
    options: dict[str, Any] = {} if concurrency is None else {"concurrency": concurrency}
    try:
        if pool is None:
            from .runner import shared_pool  # type: ignore[import-not-found,unused-ignore]

            pool = shared_pool()
        result: dict[str, Any] = pool.run(handler, arguments, **call, **options)
    except ModuleNotFoundError as exc:
        if exc.name != f"{__package__}.runner":
            return exception_result(exc)
        return error_result("File tools are not available in this installation.")
    except Exception as exc:  # a pool failure is still one call's failure, never the run's
        return exception_result(exc)
    return result


# ---------------------------------------------------------------- input validation


def _check_input(name: str, schema: Any, arguments: Any) -> dict[str, Any] | None:
    """An error result when `arguments` do not match `schema`, else None."""
    if not isinstance(schema, Mapping):
        return None
    try:
        validator = _validator(schema)
        errors = list(validator.iter_errors(arguments))
    except Exception as exc:
        text = getattr(exc, "message", None) or str(exc)
        return error_result(f"Tool {name!r} cannot be called: its input_schema is invalid ({text}).")
    if not errors:
        return None
    lines = _error_lines(errors)
    if len(lines) > _MAX_LISTED_ERRORS:
        lines = [*lines[:_MAX_LISTED_ERRORS], f"... and {len(lines) - _MAX_LISTED_ERRORS} more"]
    return error_result(
        f"Invalid input for tool {name!r}: "
        + "; ".join(lines)
        + ". The tool did not run; call it again with corrected arguments."
    )


def _error_lines(errors: list[Any]) -> list[str]:
    """One line per failing path, `input.a: <message>`; missing properties of one object share a line."""
    missing: dict[str, list[str]] = {}
    lines: list[str] = []
    for error in sorted(errors, key=lambda e: [str(part) for part in e.absolute_path]):
        path = _path(error.absolute_path)
        if error.validator == "required":
            missing.setdefault(path, []).append(error.message.removesuffix(" is a required property"))
        else:
            lines.append(f"{path}: {_short(error.message)}")
    missed = [f"{path}: missing required {', '.join(names)}" for path, names in missing.items()]
    return missed + lines


def _path(parts: Any) -> str:
    text = "input"
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def _short(message: str) -> str:
    return message if len(message) <= _MAX_ERROR_CHARS else message[: _MAX_ERROR_CHARS - 1] + "…"
