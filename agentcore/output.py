"""Structured output: ask the model for JSON of a given shape and validate it.

    config = {"output": output.object({"type": "object", "properties": {"total": {"type": "number"}}})}
    result = agent.send("Count the orders")
    result.output["total"]

A schema is a JSON Schema dict, or a type hint `@tool` accepts (API.md §Details "Typed tools"):
a dataclass gives an instance in `result.output`, a TypedDict a dict, a class with
`model_json_schema()` / `model_validate()` (pydantic style) what its `model_validate` returns.

    output.object(Invoice)         # result.output is an Invoice
    output.array(tuple[str, int])  # result.output is a list of tuples
"""

from __future__ import annotations

import json as _json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ._utils.schemas import validator
from .errors import AgentError

if TYPE_CHECKING:
    from ._utils.hints import Kind

_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


@dataclass(frozen=True)
class OutputSpec:
    """What the final reply must be.

    `kind` is "object", "array" or "json". `schema` is the JSON Schema of the value the user
    gets (for "array", of the list); `cls` is the type it was made from, if any, and `convert`
    builds the typed value from validated JSON (None: the JSON is the value).
    """

    kind: Literal["object", "array", "json"]
    schema: dict[str, Any] | None
    cls: Any = None
    name: str = "output"
    convert: Callable[[Any], Any] | None = None

    def wire_schema(self) -> dict[str, Any] | None:
        """The schema sent to the vendor. Arrays travel wrapped as {"items": [...]}."""
        if self.kind == "array":
            return {
                "type": "object",
                "properties": {"items": self.schema or {}},
                "required": ["items"],
                "additionalProperties": False,
            }
        return self.schema

    def instructions(self) -> str:
        """The instruction text used when the protocol has no native structured output."""
        schema = self.wire_schema()
        if schema is None:
            return "Answer with a single valid JSON value and nothing else (no prose, no code fences)."
        return (
            "Answer with a single JSON value that matches this JSON Schema, and nothing else "
            "(no prose, no code fences):\n" + _json.dumps(schema, ensure_ascii=False)
        )

    def parse(self, text: str) -> Any:
        """Parse and validate a reply. Raises AgentError(kind="unknown") when it does not fit."""
        data = _load_json(text)
        if self.kind == "array" and isinstance(data, dict) and "items" in data:
            data = data["items"]
        schema = self.schema
        if schema is not None:
            _validate(data, schema)
        if self.convert is not None:
            try:
                return self.convert(data)
            except Exception as exc:
                raise AgentError(f"structured output failed validation: {exc}", kind="unknown") from exc
        return data


def object(schema: Any, *, name: str = "output") -> OutputSpec:
    """The final reply is one object matching `schema`: a JSON Schema dict, or a type whose
    schema is an object (a dataclass, TypedDict, NamedTuple, `dict[str, X]`, a model class).

    Raises:
        AgentError: kind "config", when `schema` is neither, naming the problem.
    """
    if isinstance(schema, dict):
        return OutputSpec("object", schema, None, name)
    kind = _kind_of(schema)
    if kind.schema.get("type") != "object":
        raise AgentError(
            f"output.object() needs a type whose JSON form is an object, not {schema!r}; "
            "use output.array() for lists",
            kind="config",
        )
    return OutputSpec("object", kind.schema, schema, name, kind.convert)


def array(item_schema: Any, *, name: str = "output") -> OutputSpec:
    """The final reply is a list whose items match `item_schema` (a JSON Schema dict or a type)."""
    if isinstance(item_schema, dict):
        return OutputSpec("array", {"type": "array", "items": item_schema}, None, name)
    kind = _kind_of(list[item_schema])  # type: ignore[valid-type]
    return OutputSpec("array", kind.schema, item_schema, name, kind.convert)


def json(*, name: str = "output") -> OutputSpec:
    """The final reply is any JSON value."""
    return OutputSpec("json", None, None, name)


def _kind_of(hint: Any) -> Kind:
    from ._utils.hints import Kind, hoist_defs, kind_of

    try:
        kind = kind_of(hint)
        return Kind(hoist_defs(kind.schema), kind.convert, kind.match)
    except TypeError as exc:
        raise AgentError(
            f"an output schema must be a JSON Schema dict or a type with a JSON Schema form: {exc}",
            kind="config",
        ) from None


def _load_json(text: str) -> Any:
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        return _json.loads(body)
    except ValueError as exc:
        raise AgentError(f"structured output is not valid JSON: {exc}", kind="unknown") from exc


def _validate(data: Any, schema: dict[str, Any]) -> None:
    import jsonschema

    try:
        # What `jsonschema.validate` does, with the validator built once per schema.
        error = jsonschema.exceptions.best_match(validator(schema).iter_errors(data))
        if error is not None:
            raise error
    except jsonschema.ValidationError as exc:
        path = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        raise AgentError(
            f"structured output failed validation at {path}: {exc.message}", kind="unknown"
        ) from exc
    except jsonschema.SchemaError as exc:
        raise AgentError(f"the output schema is invalid: {exc.message}", kind="config") from exc
