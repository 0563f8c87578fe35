"""Our schema checker says "valid" exactly where jsonschema does, and otherwise hands over to it.

`agentcore/_utils/schemas.py` checks tool inputs against the keywords tool schemas commonly use
without importing jsonschema; a value it does not accept gets jsonschema's own errors. Random
schemas built from those keywords and random values: the checker's verdict is jsonschema's
(Draft 2020-12), and a schema with anything else goes to jsonschema whole.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore._utils import schemas

names = st.sampled_from(["a", "b", "n"])
type_names = st.sampled_from(["null", "boolean", "integer", "number", "string", "array", "object"])
numbers = st.one_of(st.integers(-3, 3), st.floats(-3, 3, allow_nan=False))


def keywords(sub: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "type": st.one_of(type_names, st.lists(type_names, min_size=1, max_size=3, unique=True)),
            "properties": st.dictionaries(names, sub, max_size=3),
            "additionalProperties": sub,
            "required": st.lists(names, max_size=3, unique=True),
            "items": sub,
            "prefixItems": st.lists(sub, max_size=2),
            "anyOf": st.lists(sub, min_size=1, max_size=3),
            "enum": st.lists(st.one_of(st.sampled_from(["x", "y", ""]), st.none()), max_size=3),
            "const": st.one_of(st.sampled_from(["x", "y"]), st.none()),
            "minLength": st.integers(0, 3),
            "maxLength": st.integers(0, 3),
            "minItems": st.integers(0, 3),
            "maxItems": st.integers(0, 3),
            "minimum": numbers,
            "maximum": numbers,
            "exclusiveMinimum": numbers,
            "exclusiveMaximum": numbers,
            "pattern": st.sampled_from(["^x", "y$", "[0-9]"]),
            "description": st.just("What it is."),
            "default": st.integers(),
            "format": st.just("date"),
            "x-vendor": st.booleans(),  # in no vocabulary: jsonschema ignores it
        },
    )


schemas_strategy = st.recursive(st.one_of(st.booleans(), keywords(st.just(True))), keywords, max_leaves=8)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), numbers, st.sampled_from(["", "x", "xy", "y", "1", "x1y"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(names, inner, max_size=3)),
    max_leaves=10,
)


def metaschema_valid(schema: Any) -> bool:
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError:
        return False
    return True


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=schemas_strategy, values=st.lists(json_values, min_size=1, max_size=4))
def test_the_checker_agrees_with_jsonschema(schema: Any, values: list[Any]) -> None:
    check = schemas._compile(schema)
    if not metaschema_valid(schema):
        assert check is None  # jsonschema's to reject
        return
    assert check is not None  # every keyword here is the checker's
    reference = jsonschema.Draft202012Validator(schema)
    for value in values:
        assert check(value) == reference.is_valid(value), (schema, value)


@settings(max_examples=150, deadline=None)
@given(schema=schemas_strategy, value=json_values)
def test_the_validator_reports_jsonschemas_errors(schema: Any, value: Any) -> None:
    if not metaschema_valid(schema):
        with pytest.raises(jsonschema.SchemaError):
            schemas.validator(schema)
        return
    # Sorted: the validator shared by equal schemas was built from the first of them, whose keys'
    # order (the order jsonschema reports in) may differ from this one's.
    got = sorted(e.message for e in schemas.validator(schema).iter_errors(value))
    assert got == sorted(e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(value))


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "objekt"},
        {"type": "object", "required": "n"},
        {"properties": {"n": {"minimum": "0"}}},
        {"anyOf": []},
        {"pattern": "("},
        {"$defs": {"unused": {"type": 3}}},
        {"description": 5},
    ],
)
def test_a_schema_the_metaschema_rejects_is_jsonschemas_to_reject(schema: Any) -> None:
    assert schemas._compile(schema) is None
    with pytest.raises(jsonschema.SchemaError):
        schemas.validator(schema)


@pytest.mark.parametrize(
    "schema",
    [
        {"oneOf": [{"type": "string"}]},
        {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
        {"enum": [1, True]},
        {"$ref": "https://example.com/schema"},
        {"minItems": 1.0},
    ],
)
def test_other_keywords_go_to_jsonschema_whole(schema: Any) -> None:
    assert schemas._compile(schema) is None
    assert not isinstance(schemas.validator(schema), schemas.Checked)


def test_local_definitions_and_recursion() -> None:
    tree = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            }
        },
        "$ref": "#/$defs/Node",
    }
    check = schemas._compile(tree)
    assert check is not None
    assert check({"kids": [{"kids": []}, {}]}) and not check({"kids": [{"kids": [3]}]})


def test_values_that_are_not_plain_json_go_to_jsonschema() -> None:
    check = schemas._compile({"type": "array", "items": True})
    assert check is not None and check([1, "x"]) and not check((1, "x")) and not check([object()])


def test_a_valid_tool_call_does_not_import_jsonschema() -> None:
    """What the cold start saves: a script whose tool calls are valid never loads jsonschema."""
    code = textwrap.dedent(
        """
        import sys
        from agentcore import tool
        from agentcore.tools import execute

        @tool
        def add(a: int, b: int, note: str | None = None) -> int:
            '''Add.

            Args:
                a: A.
                b: B.
                note: A note.
            '''
            return a + b

        assert execute("add", {"a": 1, "b": 2}, add)["output"]["value"] == 3
        print("jsonschema" in sys.modules)
        assert execute("add", {"a": "1", "b": 2}, add)["output"]["type"] == "error-text"
        print("jsonschema" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]
