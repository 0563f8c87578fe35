"""A JSON Schema validator is built once per distinct schema, not once per Agent (issue 13).

Each Agent holds its own copy of every tool's schema; validators are shared by content
(`agentcore/_utils/schemas.py`), so a process making many agents checks each schema once.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from agentcore import Agent, tool
from agentcore._utils import schemas
from agentcore.output import _validate
from agentcore.tools import execute


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_agents_with_the_same_tool_share_one_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Any] = []
    original = schemas._new

    def counting(schema: Any) -> Any:
        built.append(schema)
        return original(schema)

    monkeypatch.setattr(schemas, "_new", counting)
    monkeypatch.setattr(schemas, "_validators", {})
    agents = [Agent(config={"base_url": "http://127.0.0.1:9", "model": "m"}, tools=[add]) for _ in range(5)]
    assert len({id(a.tools.schema["add"]["input_schema"]) for a in agents}) == 5  # five copies
    for agent in agents:
        assert execute("add", {"a": 1, "b": 2}, agent.tools) == {"output": {"type": "json", "value": 3}}
        assert execute("add", {"a": "x", "b": 2}, agent.tools)["output"]["type"] == "error-text"
    assert len(built) == 1


def test_equal_schemas_share_a_validator_and_different_ones_do_not() -> None:
    one = schemas.validator({"type": "object", "properties": {"n": {"const": 1}}})
    reordered = schemas.validator({"properties": {"n": {"const": 1}}, "type": "object"})
    as_bool = schemas.validator({"type": "object", "properties": {"n": {"const": True}}})
    as_float = schemas.validator({"type": "object", "properties": {"n": {"const": 1.0}}})
    assert one is reordered
    assert as_bool is not one and as_float is not one
    assert list(as_bool.iter_errors({"n": 1})) and not list(one.iter_errors({"n": 1}))


def test_an_invalid_schema_fails_every_time() -> None:
    for _ in range(2):
        with pytest.raises(jsonschema.SchemaError):
            schemas.validator({"type": "objekt"})


def test_structured_output_validation_reports_as_before() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    with pytest.raises(Exception) as caught:
        _validate({"n": "x"}, schema)
    assert "structured output failed validation at n: 'x' is not of type 'integer'" in str(caught.value)
    _validate({"n": 1}, schema)
    with pytest.raises(Exception, match="the output schema is invalid"):
        _validate({}, {"type": "objekt"})
