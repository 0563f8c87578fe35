"""Typed tools (API.md §Details "Typed tools"): every supported annotation has an exact schema,
the function receives values of the annotated types, and anything else fails at decoration.

Before, a dataclass parameter became the schema `{}` and the function got a plain dict.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import typing
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NamedTuple, Optional, TypedDict, Union

import pytest

from agentcore import Agent, AgentError, output, tool
from agentcore.testing import ModelServer
from agentcore.tools import execute
from agentcore.tools.decorator import schema_of


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Point:
    x: float
    y: float = 0.0


@dataclass(frozen=True)
class Shape:
    name: str
    corners: list[Point]
    color: Color | None = None
    tags: tuple[str, int] = ("plain", 0)
    meta: dict[str, Point] = field(default_factory=dict)


class Movie(TypedDict):
    title: str
    year: int


class Draft(TypedDict, total=False):
    title: str
    where: Point


class Pair(NamedTuple):
    left: int
    right: str = "r"


class Plain:
    pass


@dataclass
class Holder:
    inner: Plain


@dataclass
class Node:
    children: list[Node]


@dataclass
class Circle:
    radius: float


@dataclass
class Square:
    side: float


class FakeModel:
    """A pydantic-style class, duck-typed: model_json_schema() and model_validate()."""

    def __init__(self, city: str) -> None:
        self.city = city

    @classmethod
    def model_json_schema(cls) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"city": {"type": "string"}, "at": {"$ref": "#/$defs/Spot"}},
            "required": ["city"],
            "$defs": {"Spot": {"type": "object", "properties": {"lat": {"type": "number"}}}},
        }

    @classmethod
    def model_validate(cls, data: Any) -> FakeModel:
        return cls(data["city"])


POINT = {
    "type": "object",
    "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
    "required": ["x"],
    "additionalProperties": False,
}
COLOR = {"type": "string", "enum": ["red", "blue"]}


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (None, {"type": "null"}),
        (Point, POINT),
        (list[Point], {"type": "array", "items": POINT}),
        (Optional[Point], {"anyOf": [POINT, {"type": "null"}]}),  # noqa: UP045
        (Union[Point, None], {"anyOf": [POINT, {"type": "null"}]}),  # noqa: UP007
        (dict[str, Color], {"type": "object", "additionalProperties": COLOR}),
        (tuple[str, int], {"type": "array", "minItems": 2, "maxItems": 2,
                           "prefixItems": [{"type": "string"}, {"type": "integer"}]}),
        (tuple[Point, ...], {"type": "array", "items": POINT}),
        (Literal["a", 1], {"enum": ["a", 1]}),
        (Annotated[int, "meta"], {"type": "integer"}),
        (Movie, {"type": "object", "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
                 "required": ["title", "year"], "additionalProperties": False}),
        (Draft, {"type": "object", "properties": {"title": {"type": "string"}, "where": POINT},
                 "additionalProperties": False}),
        (Pair, {"type": "object", "properties": {"left": {"type": "integer"}, "right": {"type": "string"}},
                "required": ["left"], "additionalProperties": False}),
        (Circle | Square, {"anyOf": [
            {"type": "object", "properties": {"radius": {"type": "number"}}, "required": ["radius"],
             "additionalProperties": False},
            {"type": "object", "properties": {"side": {"type": "number"}}, "required": ["side"],
             "additionalProperties": False},
        ]}),
    ],
)  # fmt: skip
def test_schema_of_each_kind(annotation: Any, expected: dict[str, Any]) -> None:
    assert schema_of(annotation) == expected


def test_nested_dataclasses_are_stated_to_the_bottom() -> None:
    schema = schema_of(Shape)
    assert schema["required"] == ["name", "corners"]
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert props["corners"] == {"type": "array", "items": POINT}
    assert props["color"] == {"anyOf": [COLOR, {"type": "null"}]}
    assert props["tags"]["prefixItems"] == [{"type": "string"}, {"type": "integer"}]
    assert props["meta"] == {"type": "object", "additionalProperties": POINT}


def test_a_model_class_keeps_its_schema_and_its_defs_move_to_the_root() -> None:
    @tool
    def visit(place: FakeModel, others: list[FakeModel]) -> str:
        """Visit."""
        return place.city

    schema = visit.input_schema
    assert schema["properties"]["place"]["properties"]["at"] == {"$ref": "#/$defs/Spot"}
    assert "$defs" not in schema["properties"]["place"]
    assert schema["$defs"] == {"Spot": {"type": "object", "properties": {"lat": {"type": "number"}}}}
    import jsonschema

    jsonschema.validate({"place": {"city": "Oslo", "at": {"lat": 1}}, "others": []}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"place": {"city": "Oslo", "at": {"lat": "north"}}, "others": []}, schema)


@tool
def describe(
    shape: Shape,
    movie: Movie,
    draft: Draft,
    pair: Pair,
    figure: Circle | Square,
    colors: dict[str, Color],
    span: tuple[int, float],
    place: FakeModel,
    maybe: Point | None = None,
    count: int = 0,
    ratio: float = 1.0,
) -> dict[str, Any]:
    """Report what each parameter arrived as."""
    assert isinstance(shape, Shape) and all(isinstance(p, Point) for p in shape.corners)
    assert isinstance(shape.color, Color) and isinstance(shape.tags, tuple)
    assert all(isinstance(p, Point) for p in shape.meta.values())
    assert type(movie) is dict and isinstance(draft["where"], Point)
    assert isinstance(pair, Pair) and isinstance(figure, Square)
    assert colors == {"a": Color.RED} and span == (1, 2.0) and isinstance(span[1], float)
    assert isinstance(place, FakeModel) and maybe is None
    assert type(count) is int and type(ratio) is float
    return {"shape": repr(shape), "pair": repr(pair), "figure": repr(figure), "count": count, "ratio": ratio}


def test_the_function_receives_values_of_the_annotated_types() -> None:
    arguments = {
        "shape": {"name": "tri", "corners": [{"x": 0, "y": 1}, {"x": 2}], "color": "red",
                  "tags": ["t", 3], "meta": {"c": {"x": 1.5}}},
        "movie": {"title": "Alien", "year": 1979},
        "draft": {"where": {"x": 1}},
        "pair": {"left": 1},
        "figure": {"side": 2},
        "colors": {"a": "red"},
        "span": [1, 2],
        "place": {"city": "Oslo"},
        "count": 3.0,
        "ratio": 2,
    }  # fmt: skip
    result = execute("describe", arguments, [describe])
    assert "error" not in result, result
    value = result["output"]["value"]
    assert value["shape"] == (
        "Shape(name='tri', corners=[Point(x=0.0, y=1.0), Point(x=2.0, y=0.0)], color=<Color.RED: 'red'>, "
        "tags=('t', 3), meta={'c': Point(x=1.5, y=0.0)})"
    )
    assert value["pair"] == "Pair(left=1, right='r')" and value["figure"] == "Square(side=2.0)"
    assert value["count"] == 3 and value["ratio"] == 2.0


def test_input_that_does_not_fit_is_rejected_before_conversion() -> None:
    result = execute("describe", {"shape": {"name": "x", "corners": [{"y": 1}]}}, [describe])
    assert "Invalid input" in result["error"] and "x" in result["error"]


@pytest.mark.parametrize(
    ("annotation", "problem"),
    [
        ("bytes", "bytes"),
        ("dict[int, str]", "keys"),
        ("Plain", "Plain"),
        ("list[Plain]", "Plain"),
        ("Holder", "Holder.inner"),
        ("Node", "refers to itself"),
    ],
)
def test_an_annotation_without_a_json_form_fails_at_decoration_naming_the_parameter(
    annotation: str, problem: str
) -> None:
    namespace: dict[str, Any] = dict(globals())
    exec(f"def fn(ok: int, bad: {annotation}) -> None: ...", namespace)
    with pytest.raises(TypeError) as info:
        tool(namespace["fn"])
    assert "'bad'" in str(info.value) and "@tool fn" in str(info.value) and problem in str(info.value)


def test_enum_and_literal_conversion_keeps_working_in_unions() -> None:
    @tool
    def pick(color: Color | None, mode: Literal["a", "b"] | int) -> str:
        """Pick."""
        return f"{color!r} {mode!r}"

    assert (
        execute("pick", {"color": "blue", "mode": "a"}, [pick])["output"]["value"]
        == "<Color.BLUE: 'blue'> 'a'"
    )
    assert execute("pick", {"color": None, "mode": 2}, [pick])["output"]["value"] == "None 2"


# ---------------------------------------------------------------- output.object / output.array


@dataclass
class Invoice:
    total: float
    lines: list[Point]


def test_output_object_of_a_dataclass_gives_an_instance(server: ModelServer) -> None:
    server.add('{"total": 3, "lines": [{"x": 1, "y": 2}]}')
    agent = Agent(config={"base_url": server.base_url, "model": "m", "output": output.object(Invoice)})
    try:
        result = agent.send("bill me")
    finally:
        agent.close()
    assert result.output == Invoice(total=3.0, lines=[Point(1, 2)])
    assert isinstance(result.output.lines[0], Point)
    assert "'lines'" in str(server.requests[0])


def test_output_array_of_a_typeddict_gives_dicts_and_of_a_namedtuple_tuples(server: ModelServer) -> None:
    server.add('{"items": [{"title": "Alien", "year": 1979}]}', '{"items": [{"left": 1, "right": "x"}]}')
    agent = Agent(config={"base_url": server.base_url, "model": "m"})
    try:
        movies = agent.send("movies", config={"output": output.array(Movie)}).output
        pairs = agent.send("pairs", config={"output": output.array(Pair)}).output
    finally:
        agent.close()
    assert movies == [{"title": "Alien", "year": 1979}] and type(movies[0]) is dict
    assert pairs == [Pair(1, "x")] and isinstance(pairs[0], Pair)


def test_output_object_rejects_types_that_are_not_objects_and_types_without_a_form() -> None:
    with pytest.raises(AgentError) as info:
        output.object(list[int])
    assert info.value.kind == "config" and "output.array" in str(info.value)

    class Plain:
        pass

    with pytest.raises(AgentError) as info:
        output.array(Plain)
    assert info.value.kind == "config" and "Plain" in str(info.value)


# ---------------------------------------------------------------- real pydantic


def pydantic_or_skip() -> Any:
    try:
        import pydantic
    except ImportError:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip("pydantic is not installed (it is in the test extra)")
    return pydantic


def test_real_pydantic_models_as_parameters_and_as_output(server: ModelServer) -> None:
    pydantic = pydantic_or_skip()

    class City(pydantic.BaseModel):  # type: ignore[misc,name-defined]
        name: str
        where: Point

    class Trip(pydantic.BaseModel):  # type: ignore[misc,name-defined]
        stops: list[City]

    @tool
    def plan(trip: Trip, first: City | None = None) -> str:
        """Plan a trip."""
        assert isinstance(trip, Trip) and isinstance(trip.stops[0], City)
        return ",".join(stop.name for stop in trip.stops)

    schema = plan.input_schema
    assert "City" in schema["$defs"] and "$defs" not in schema["properties"]["trip"]
    trip = {"stops": [{"name": "Oslo", "where": {"x": 1, "y": 2}}]}
    assert execute("plan", {"trip": trip}, [plan])["output"]["value"] == "Oslo"
    assert "Invalid input" in execute("plan", {"trip": {"stops": [{"name": 1}]}}, [plan])["error"]

    server.add('{"stops": [{"name": "Rome", "where": {"x": 0, "y": 0}}]}')
    agent = Agent(config={"base_url": server.base_url, "model": "m", "output": output.object(Trip)})
    try:
        result = agent.send("plan")
    finally:
        agent.close()
    assert isinstance(result.output, Trip) and result.output.stops[0].name == "Rome"


def test_dataclass_fields_that_are_not_init_arguments_are_not_in_the_schema() -> None:
    @dataclass
    class Counter:
        start: int
        seen: int = dataclasses.field(init=False, default=0)

    assert schema_of(Counter)["properties"] == {"start": {"type": "integer"}}
    assert typing.get_type_hints(Counter)["seen"] is int
