"""@tool: schema inference, docstrings, ToolContext injection, errors at decoration time."""

from __future__ import annotations

import enum
import pickle
import threading
import typing
from typing import Any, Literal, Optional

import pytest

from agentcore.errors import AgentError
from agentcore.tools import ToolContext, tool
from agentcore.tools.decorator import FunctionTool, parse_docstring, schema_of


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.Enum):
    LOW = 1
    HIGH = 2


@tool
def add(a: int, b: int = 2) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def _props(fn: Any) -> dict[str, Any]:
    return dict(tool(fn).input_schema["properties"])


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (str, {"type": "string"}),
        (bool, {"type": "boolean"}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (typing.List[str], {"type": "array", "items": {"type": "string"}}),  # noqa: UP006
        (list, {"type": "array"}),
        (set[str], {"type": "array", "items": {"type": "string"}}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (tuple[int, int], {"type": "array", "minItems": 2, "maxItems": 2, "items": {"type": "integer"}}),
        (dict, {"type": "object"}),
        (typing.Dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),  # noqa: UP006
        (Optional[int], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),  # noqa: UP045
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (Literal[1, "x"], {"enum": [1, "x"]}),
        (Color, {"type": "string", "enum": ["red", "blue"]}),
        (Level, {"type": "integer", "enum": [1, 2]}),
        (Color | None, {"anyOf": [{"type": "string", "enum": ["red", "blue"]}, {"type": "null"}]}),
        (Any, {}),
        (Optional[Any], {}),  # noqa: UP045
    ],
)
def test_schema_of_each_type(annotation: Any, expected: dict[str, Any]) -> None:
    assert schema_of(annotation) == expected


def test_function_schema_with_required_defaults_and_descriptions() -> None:
    assert add.name == "add"
    assert add.description == "Add two numbers."
    assert add.input_schema == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "description": "The first number."},
            "b": {"type": "integer", "description": "The second number.", "default": 2},
        },
        "required": ["a"],
    }


def test_string_annotations_are_resolved() -> None:
    """This module uses `from __future__ import annotations`: every hint is a string."""

    def fn(n: int, tags: list[str], color: Color = Color.RED, level: Level | None = None) -> None: ...

    props = _props(fn)
    assert props["n"] == {"type": "integer"}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["color"] == {"type": "string", "enum": ["red", "blue"], "default": "red"}
    assert props["level"]["anyOf"][1] == {"type": "null"}
    assert props["level"]["default"] is None


def test_unresolvable_hint_constrains_nothing_but_others_survive() -> None:
    class Local:
        pass

    def fn(a: int, b: Local) -> None: ...

    assert _props(fn) == {"a": {"type": "integer"}, "b": {}}


def test_unannotated_parameter_has_no_type() -> None:
    def fn(a, b=3):  # type: ignore[no-untyped-def]
        return a

    schema = tool(fn).input_schema
    assert schema["properties"] == {"a": {}, "b": {"default": 3}}
    assert schema["required"] == ["a"]


def test_default_that_is_not_json_is_left_out_but_stays_optional() -> None:
    marker = object()

    def fn(a: int, b: object = marker, c: tuple[int, int] = (1, 2)) -> None: ...

    schema = tool(fn).input_schema
    assert "default" not in schema["properties"]["b"]
    assert schema["properties"]["c"]["default"] == [1, 2]
    assert schema["required"] == ["a"]


def test_no_required_key_when_everything_has_a_default() -> None:
    def fn(a: int = 1) -> None: ...

    assert "required" not in tool(fn).input_schema


def test_no_parameters_gives_empty_object_schema() -> None:
    def ping() -> str:
        return "pong"

    assert tool(ping).input_schema == {"type": "object", "properties": {}}
    assert tool(ping).description == ""


def test_docstring_multiline_args_typed_args_and_other_sections() -> None:
    doc = """Search the logs.

    Looks in every file.

    Args:
        query (str): What to look for,
            possibly spanning
            several lines.
        limit: At most this many.

    Returns:
        The matches.

    Raises:
        ValueError: never.
    """
    summary, args = parse_docstring(doc)
    assert summary == "Search the logs.\n\nLooks in every file."
    assert args == {
        "query": "What to look for, possibly spanning several lines.",
        "limit": "At most this many.",
    }


def test_docstring_without_args() -> None:
    assert parse_docstring("Just text.") == ("Just text.", {})
    assert parse_docstring(None) == ("", {})


def test_options_override_name_description_timeout_and_keep_to_model_output() -> None:
    def shape(output: Any, input: Any) -> dict[str, Any]:
        return {"type": "text", "value": str(output)}

    @tool(name="plus", description="Adds.", timeout=2, to_model_output=shape)
    def add2(a: int) -> int:
        """Ignored docstring."""
        return a

    assert (add2.name, add2.description, add2.timeout) == ("plus", "Adds.", 2.0)
    assert add2.to_model_output is shape
    assert add.timeout is None and add.to_model_output is None


def test_decorated_function_stays_a_plain_callable() -> None:
    assert add(1, 2) == 3
    assert add(a=5) == 7
    assert add.__name__ == "add"
    assert add.__doc__ is not None and "Add two numbers." in add.__doc__
    assert isinstance(add, FunctionTool)


def test_pickles_by_reference_like_the_function() -> None:
    assert pickle.loads(pickle.dumps(add)) is add


def test_tool_context_parameter_is_injected_and_left_out_of_schema() -> None:
    seen: list[ToolContext] = []

    @tool
    def where(path: str, ctx: ToolContext) -> str:
        seen.append(ctx)
        return path

    assert list(where.input_schema["properties"]) == ["path"]
    assert where.input_schema["required"] == ["path"]
    ctx = ToolContext(tool_call_id="c1", tool_name="where", cancel=threading.Event(), agent_id="a")
    assert where.execute({"path": "x"}, ctx) == "x"
    assert seen == [ctx]


def test_tool_context_is_frozen() -> None:
    ctx = ToolContext(tool_call_id="c1", tool_name="t", cancel=threading.Event())
    assert ctx.agent_id == ""
    with pytest.raises(AttributeError):
        ctx.tool_name = "other"  # type: ignore[misc]


def test_execute_passes_enum_members_back() -> None:
    got: list[Any] = []

    @tool
    def paint(color: Color, level: Level | None = None) -> None:
        got.extend([color, level])

    paint.execute({"color": "blue", "level": 2})
    paint.execute({"color": "red", "level": None})
    assert got == [Color.BLUE, Level.HIGH, Color.RED, None]


@pytest.mark.parametrize(
    "source",
    [
        "def fn(*args: int) -> None: ...",
        "def fn(**kwargs: int) -> None: ...",
        "def fn(a: int, /) -> None: ...",
    ],
)
def test_variadic_and_positional_only_parameters_are_rejected(source: str) -> None:
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    with pytest.raises(AgentError) as info:
        tool(namespace["fn"])
    assert info.value.kind == "config"
    assert "fn" in str(info.value) and "named parameters" in str(info.value)


def test_async_functions_are_rejected() -> None:
    async def fetch(url: str) -> str:
        return url

    with pytest.raises(AgentError, match="async"):
        tool(fetch)


def test_lambda_needs_a_name_and_bad_timeout_is_rejected() -> None:
    with pytest.raises(AgentError, match="needs a name"):
        tool(lambda a: a)
    assert tool(name="ident")(lambda a: a).name == "ident"
    for timeout in (0, -1, True, "5"):
        with pytest.raises(AgentError, match="timeout"):
            tool(timeout=timeout)(add.__wrapped__)  # type: ignore[arg-type,attr-defined]
