"""`@tool`: turn a typed Python function into a tool the model can call.

    @tool
    def add(a: int, b: int = 1) -> int:
        \"\"\"Add two numbers.

        Args:
            a: The first number.
            b: The second number.
        \"\"\"
        return a + b

    add(1, 2)                 # still a plain call
    add.input_schema          # {"type": "object", "properties": {...}, "required": ["a"]}
    add.execute({"a": 1}, ctx)

The schema is inferred with the standard library only (type hints + the Google-style
docstring). A parameter annotated `ToolContext` receives the call's context and never
appears in the schema.
"""

from __future__ import annotations

import enum
import functools
import json
import re
import sys
import threading
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, Union, overload

from ..errors import AgentError

if TYPE_CHECKING:
    # Imported where a schema is made: `import agentcore` stays cheap.
    import inspect

    from .._utils.hints import Convert, Kind

P = ParamSpec("P")
R = TypeVar("R")

_SECTIONS = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Returns|Return|Yields|Raises|Examples?|Notes?):\s*$"
)
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a running tool may know about its call.

    Attributes:
        tool_call_id: the id the model gave this call.
        tool_name: the tool's name.
        cancel: set when the call is interrupted or timed out; long tools should check it.
        agent_id: the id of the agent running the call ("" for a direct `execute()`).
    """

    tool_call_id: str
    tool_name: str
    cancel: threading.Event
    agent_id: str = ""


class FunctionTool(Generic[P, R]):
    """A function decorated with `@tool`: callable as before, plus the tool's description.

    Attributes:
        name, description, input_schema, timeout, to_model_output: the tool's fields.
        context_param: the parameter that receives the `ToolContext`, if any.
    """

    # "sequential" makes the tool a barrier in a parallel round (API.md §Hooks).
    execution_mode: str = "parallel"
    # "safe": resume() may run a started call again; True: deferred for a decision when the
    # agent has no on_permission (API.md §Durable sessions).
    replay: str = "never"
    needs_approval: bool = False
    # Copied from the function by functools.update_wrapper.
    __name__: str
    __qualname__: str
    __wrapped__: Callable[P, R]

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        name: str,
        description: str,
        input_schema: dict[str, Any],
        timeout: float | None,
        to_model_output: Callable[..., Any] | None,
        context_param: str | None,
        converters: Mapping[str, Convert],
    ) -> None:
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._call: Callable[..., R] = fn
        self.name = name
        self.description = description
        self.input_schema = input_schema
        self.timeout = timeout
        self.to_model_output = to_model_output
        self.context_param = context_param
        self._converters = dict(converters)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._fn(*args, **kwargs)

    def execute(self, input: Mapping[str, Any], ctx: Any = None) -> R:
        """Run the function with the model's input as keyword arguments.

        Each parameter gets a value of its annotated type (Enum members, dataclass instances,
        tuples, ... built from the JSON the model sent, which the caller validated against
        `input_schema`), and the context parameter, if any, gets `ctx`.
        """
        converters = self._converters
        kwargs = {key: converters[key](value) if key in converters else value for key, value in input.items()}
        if self.context_param is not None:
            kwargs[self.context_param] = ctx if ctx is not None else _detached_context(self.name)
        return self._call(**kwargs)

    def __repr__(self) -> str:
        return f"<tool {self.name}>"

    def __reduce__(self) -> str:
        # Pickled by reference, like the function it replaces at module level.
        return str(getattr(self, "__qualname__", self.name))


@overload
def tool(fn: Callable[P, R], /) -> FunctionTool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    to_model_output: Callable[..., Any] | None = None,
    sequential: bool = False,
    replay: str = "never",
    needs_approval: bool = False,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def tool(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    to_model_output: Callable[..., Any] | None = None,
    sequential: bool = False,
    replay: str = "never",
    needs_approval: bool = False,
) -> FunctionTool[P, R] | Callable[[Callable[P, R]], FunctionTool[P, R]]:
    """Make a tool of a function: `@tool` or `@tool(name=, description=, timeout=, to_model_output=)`.

    Args:
        fn: the function (when used as `@tool` without parentheses).
        name: the tool's name; defaults to the function's name.
        description: defaults to the docstring text before its `Args:` section.
        timeout: seconds after which the call is reported as timed out.
        to_model_output: `fn(output=, input=) -> output block`, to shape the result yourself.
        sequential: run as a barrier inside a parallel round (`execution_mode: "sequential"`).
        replay: "safe" lets `resume()` run a call again that was started before a crash or a
            supersede (its effects may then happen twice); "never" (default) gives it the
            interrupted result instead.
        needs_approval: defer each call for a decision (`agent.decide()`) when the agent has no
            `on_permission`; the run ends with reason "approval" (API.md §Durable sessions).

    Raises:
        AgentError: kind "config", for `*args`/`**kwargs`, positional-only parameters or a bad option.
        TypeError: a parameter's annotation has no JSON Schema form (API.md §Details "Typed tools").
    """

    scope = _caller_locals()

    def decorate(function: Callable[P, R]) -> FunctionTool[P, R]:
        label = name if isinstance(name, str) else getattr(function, "__name__", "tool")
        flags = durable_flags(f"@tool {label}", {"replay": replay, "needs_approval": needs_approval})
        built = _build(function, name, description, timeout, to_model_output, scope)
        if sequential:
            built.execution_mode = "sequential"
        if flags:
            built.replay = str(flags.get("replay", "never"))
            built.needs_approval = bool(flags.get("needs_approval", False))
        return built

    if fn is not None:
        return decorate(fn)
    return decorate


def _build(
    fn: Callable[P, R],
    name: str | None,
    description: str | None,
    timeout: float | None,
    to_model_output: Callable[..., Any] | None,
    scope: Mapping[str, Any] | None = None,
) -> FunctionTool[P, R]:
    tool_name = name if name is not None else getattr(fn, "__name__", None)
    if not isinstance(tool_name, str) or not tool_name or tool_name == "<lambda>":
        raise AgentError(f"@tool needs a name for {fn!r}: pass @tool(name=...)", kind="config")
    check_name(tool_name, f"@tool {getattr(fn, '__qualname__', tool_name)}")
    if not is_timeout(timeout):
        raise AgentError(f"@tool {tool_name}: timeout must be a number of seconds > 0", kind="config")
    if to_model_output is not None and not callable(to_model_output):
        raise AgentError(f"@tool {tool_name}: to_model_output must be callable", kind="config")
    import inspect

    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise AgentError(
            f"@tool {tool_name}: async functions are not supported; use a plain def", kind="config"
        )
    summary, arg_docs = parse_docstring(getattr(fn, "__doc__", None))
    schema, context_param, converters = infer_schema(fn, tool_name, arg_docs, scope)
    return FunctionTool(
        fn,
        name=tool_name,
        description=description if description is not None else summary,
        input_schema=schema,
        timeout=float(timeout) if timeout is not None else None,
        to_model_output=to_model_output,
        context_param=context_param,
        converters=converters,
    )


# The strictest vendor rule (Gemini and OpenAI): a name any protocol accepts.
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def check_name(name: str, what: str = "tool") -> None:
    """A config error unless `name` matches `^[a-zA-Z0-9_-]{1,64}$`."""
    if not TOOL_NAME.fullmatch(name):
        raise AgentError(
            f"{what}: the tool name {name!r} is not allowed: use 1 to 64 letters, digits, '_' or '-' "
            "(^[a-zA-Z0-9_-]{1,64}$, the strictest vendor rule)",
            kind="config",
        )


def is_timeout(value: Any) -> bool:
    """None, or a number of seconds > 0 (bools are not numbers here)."""
    if value is None:
        return True
    return not isinstance(value, bool) and isinstance(value, int | float) and value > 0


REPLAY_VALUES = ("never", "safe")


def durable_flags(label: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Check a tool's `replay` and `needs_approval`; returns those that differ from the default.

    Raises:
        AgentError: kind "config", naming the tool and the bad value.
    """
    flags: dict[str, Any] = {}
    replay = values.get("replay", "never")
    if replay not in REPLAY_VALUES or not isinstance(replay, str):
        raise AgentError(f"{label}: replay must be 'never' or 'safe', got {replay!r}", kind="config")
    if replay != "never":
        flags["replay"] = replay
    needs_approval = values.get("needs_approval", False)
    if not isinstance(needs_approval, bool):
        raise AgentError(
            f"{label}: needs_approval must be True or False, got {needs_approval!r}", kind="config"
        )
    if needs_approval:
        flags["needs_approval"] = True
    return flags


def _detached_context(name: str) -> ToolContext:
    return ToolContext(tool_call_id="", tool_name=name, cancel=threading.Event())


# ---------------------------------------------------------------- docstring


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {parameter: description}).

    The description is the text before the first section header (`Args:`, `Returns:`, ...).
    Continuation lines of an argument, indented deeper, are joined with a space.
    """
    if not doc:
        return "", {}
    import inspect

    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    index = 0
    while index < len(lines) and not _SECTIONS.match(lines[index]):
        summary.append(lines[index])
        index += 1
    while index < len(lines):
        header = _SECTIONS.match(lines[index])
        index += 1
        if header is None:
            continue
        section_indent = _indent(lines[index - 1])
        body: list[str] = []
        while index < len(lines) and (not lines[index].strip() or _indent(lines[index]) > section_indent):
            body.append(lines[index])
            index += 1
        if header.group(1) in ("Args", "Arguments", "Parameters", "Params"):
            args.update(_parse_args(body))
    return "\n".join(summary).strip(), args


def _parse_args(body: list[str]) -> dict[str, str]:
    entries: dict[str, str] = {}
    entry_indent: int | None = None
    current: str | None = None
    for line in body:
        if not line.strip():
            continue
        indent = _indent(line)
        match = _ARG_LINE.match(line.strip())
        if match and (entry_indent is None or indent <= entry_indent):
            entry_indent = indent
            current = match.group(1).lstrip("*")
            entries[current] = match.group(2).strip()
        elif current is not None:
            entries[current] = (entries[current] + " " + line.strip()).strip()
    return entries


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


# ---------------------------------------------------------------- schema


def infer_schema(
    fn: Callable[..., Any],
    tool_name: str,
    arg_docs: Mapping[str, str] | None = None,
    scope: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], str | None, dict[str, Convert]]:
    """The input schema of `fn`, its ToolContext parameter, and the converters of its parameters.

    `scope` holds the local names of the code that defined `fn`, for string annotations. A
    parameter is in the converters when its JSON value is not yet of its type (see _utils/hints.py).

    Raises:
        AgentError: kind "config", for `*args`, `**kwargs` or positional-only parameters.
        TypeError: an annotation has no JSON Schema form; the message names the parameter.
    """
    import inspect

    hints = _type_hints(fn, scope)
    properties: dict[str, Any] = {}
    required: list[str] = []
    context_param: str | None = None
    converters: dict[str, Convert] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise AgentError(
                f"@tool {tool_name}: parameter {param.name!r} is {param.kind.description}; "
                "tools take named parameters only (the model sends one JSON object)",
                kind="config",
            )
        annotation = hints.get(param.name, param.annotation)
        if _is_context(annotation):
            context_param = param.name
            continue
        kind = _kind(tool_name, param.name, annotation if annotation is not param.empty else Any)
        if kind.convert is not None:
            converters[param.name] = kind.convert
        properties[param.name] = _property(kind, param, (arg_docs or {}).get(param.name))
        if param.default is param.empty:
            required.append(param.name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    try:
        from .._utils.hints import hoist_defs

        return hoist_defs(schema), context_param, converters
    except TypeError as exc:
        raise TypeError(f"@tool {tool_name}: {exc}") from None


def _property(kind: Kind, param: inspect.Parameter, doc: str | None) -> dict[str, Any]:
    """One parameter's entry in the input schema: its type's schema, its docs, its JSON default."""
    prop = dict(kind.schema)
    if doc:
        prop["description"] = doc
    if param.default is not param.empty and _is_json(param.default):
        prop["default"] = json.loads(json.dumps(_json_default(param.default)))
    return prop


def _kind(tool_name: str, param: str, annotation: Any) -> Kind:
    from .._utils.hints import kind_of

    try:
        return kind_of(annotation)
    except TypeError as exc:
        raise TypeError(f"@tool {tool_name}: parameter {param!r}: {exc}") from None


def _caller_locals() -> dict[str, Any] | None:
    """The local names where `@tool` is applied (the caller of `tool()`).

    With postponed annotations (`from __future__ import annotations`) a class defined in the
    same function as the tool, an Enum say, can only be resolved there.
    """
    try:
        frame = sys._getframe(2)
    except (AttributeError, ValueError):
        return None
    # At module level the locals are the globals, which the hints are resolved in anyway.
    return None if frame.f_locals is frame.f_globals else dict(frame.f_locals)


def _type_hints(fn: Callable[..., Any], scope: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Resolved hints; a name that cannot be resolved (a TYPE_CHECKING import) stays a string
    and constrains nothing, without losing the other hints."""
    localns = dict(scope) if scope else None
    try:
        return typing.get_type_hints(fn, localns=localns)
    except Exception:
        pass
    namespace = {**getattr(fn, "__globals__", {}), **(localns or {})}
    hints: dict[str, Any] = {}
    for name, annotation in (getattr(fn, "__annotations__", None) or {}).items():
        if isinstance(annotation, str):
            try:
                # What get_type_hints does, one annotation at a time.
                annotation = eval(annotation, namespace)
            except Exception:
                pass
        hints[name] = annotation
    return hints


def schema_of(annotation: Any) -> dict[str, Any]:
    """JSON Schema for one type hint (see _utils/hints.py).

    Raises:
        TypeError: the hint has no JSON Schema form.
    """
    from .._utils.hints import hoist_defs, kind_of

    return hoist_defs(kind_of(annotation).schema)


def _is_context(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.rsplit(".", 1)[-1] == "ToolContext"
    if typing.get_origin(annotation) in (Union, types.UnionType):
        return any(_is_context(arg) for arg in typing.get_args(annotation))
    return isinstance(annotation, type) and issubclass(annotation, ToolContext)


def _json_default(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def _is_json(value: Any) -> bool:
    try:
        json.dumps(_json_default(value), allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True
