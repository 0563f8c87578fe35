"""Hooks decide; callbacks only notify. Calling the hooks and reading what they return.

    hooks = Hooks(check_hooks({"before_tool_call": guard}))
    decision = hooks.before_tool_call(call, history)    # None | {"block": why} | {"input": new}

A hook that raises fails the send: the exception travels as `HookFailed` to the loop, which
closes history as for any failure and raises `AgentError(kind="tool")` from it (API.md §Hooks).
A hook that returns something it may not is a mistake in the caller's code, reported the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NoReturn

from .errors import AgentError

HOOKS = frozenset({"before_tool_call", "after_tool_call", "unknown_tool", "prepare_request", "finish_turn"})
PER_CALL = ("before_tool_call", "after_tool_call", "unknown_tool")
_REQUEST_KEYS = frozenset({"step", "system", "messages", "tools"})


class HookFailed(Exception):
    """A hook raised (or returned what it may not); `name` says which, `__cause__` holds why."""

    def __init__(self, name: str, cause: BaseException) -> None:
        super().__init__(f"the {name} hook raised {type(cause).__name__}: {cause}")
        self.name = name
        self.cause = cause

    def to_error(self) -> AgentError:
        error = AgentError(str(self), kind="tool", cause=self.cause)
        error.__cause__ = self.cause
        return error


def check_hooks(hooks: Any, *, at_send: bool = False) -> dict[str, Callable[..., Any] | None]:
    """Validated hooks dict (None values remove a hook when merged)."""
    if hooks is None:
        return {}
    if not isinstance(hooks, Mapping):
        if at_send:
            raise AgentError(f"hooks must be a dict, got {type(hooks).__name__}", kind="config")
        raise TypeError(f"hooks must be a dict, got {type(hooks).__name__}")
    checked: dict[str, Callable[..., Any] | None] = {}
    for name, hook in hooks.items():
        if name not in HOOKS:
            raise AgentError(f"unknown hook {name!r}; known: {', '.join(sorted(HOOKS))}", kind="config")
        if hook is not None and not callable(hook):
            raise AgentError(f"hook {name} must be callable, got {type(hook).__name__}", kind="config")
        checked[name] = hook
    return checked


class HistoryView(Sequence[Any]):
    """A read-only view of the history list, given to hooks (no copy is made)."""

    def __init__(self, history: list[Any]) -> None:
        self._history = history

    def __getitem__(self, index: Any) -> Any:
        return self._history[index]

    def __len__(self) -> int:
        return len(self._history)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._history)

    def __repr__(self) -> str:
        return f"HistoryView({len(self._history)} entries)"


class Hooks:
    """The hooks of one run. Each method returns the hook's decision, checked, or raises HookFailed."""

    def __init__(self, hooks: Mapping[str, Callable[..., Any] | None]) -> None:
        self._hooks = {name: hook for name, hook in hooks.items() if hook is not None}

    def __contains__(self, name: str) -> bool:
        return name in self._hooks

    def any_per_call(self) -> bool:
        return any(name in self._hooks for name in PER_CALL)

    def _call(self, name: str, *args: Any) -> Any:
        try:
            return self._hooks[name](*args)
        except Exception as exc:
            raise HookFailed(name, exc) from exc

    @staticmethod
    def call_view(call: Any, input: dict[str, Any], history: list[Any]) -> dict[str, Any]:
        return {
            "tool_call_id": call.id,
            "tool_name": call.name,
            "input": input,
            "history": HistoryView(history),
        }

    def before_tool_call(self, view: dict[str, Any]) -> dict[str, Any] | None:
        """None, `{"block": reason}` or `{"input": new_input}`."""
        if "before_tool_call" not in self._hooks:
            return None
        decision = self._call("before_tool_call", view)
        if decision is None:
            return None
        if isinstance(decision, Mapping) and set(decision) <= {"block", "input"} and decision:
            if "input" in decision and not isinstance(decision["input"], dict):
                self._bad("before_tool_call", "{'input': ...} must hold a dict")
            return dict(decision)
        self._bad("before_tool_call", "must return None, {'block': reason} or {'input': new_input}")

    def after_tool_call(self, view: dict[str, Any], result: dict[str, Any]) -> dict[str, Any] | None:
        """None, or any of `{"output": block, "stop": True}`."""
        if "after_tool_call" not in self._hooks:
            return None
        decision = self._call("after_tool_call", view, dict(result))
        if decision is None:
            return None
        if isinstance(decision, Mapping) and decision and set(decision) <= {"output", "stop"}:
            return dict(decision)
        self._bad("after_tool_call", "must return None, {'output': block} or {'stop': True}")

    def unknown_tool(self, view: dict[str, Any]) -> tuple[bool, Any]:
        """(answered, value): a value answers a call to a tool that does not exist."""
        if "unknown_tool" not in self._hooks:
            return False, None
        value = self._call("unknown_tool", view)
        return value is not None, value

    def prepare_request(self, request: dict[str, Any]) -> dict[str, Any]:
        """The request's `system`/`messages`/`tools`, replaced where the hook says so."""
        if "prepare_request" not in self._hooks:
            return request
        replaced = self._call("prepare_request", dict(request))
        if replaced is None:
            return request
        if not isinstance(replaced, Mapping) or not set(replaced) <= _REQUEST_KEYS:
            self._bad("prepare_request", "must return None or a dict of step/system/messages/tools")
        return {**request, **dict(replaced)}

    def prepared(
        self, request: dict[str, Any], schema: Mapping[str, Any]
    ) -> tuple[str, list[Any], list[dict[str, Any]], Mapping[str, Any]]:
        """(system, messages, tools, tool schema by name) of a request after `prepare_request`."""
        replaced = self.prepare_request(request)
        tools = list(replaced["tools"])
        if replaced["tools"] is not request["tools"]:
            schema = {t["name"]: t for t in tools}
        return str(replaced["system"]), list(replaced["messages"]), tools, schema

    def finish_turn(self, turn: dict[str, Any]) -> str | None:
        if "finish_turn" not in self._hooks:
            return None
        decision = self._call("finish_turn", turn)
        if decision is None or decision in ("end", "continue"):
            return str(decision) if decision is not None else None
        self._bad("finish_turn", 'must return None, "end" or "continue"')

    @staticmethod
    def _bad(name: str, why: str) -> NoReturn:
        raise HookFailed(name, TypeError(f"{name} {why}"))
