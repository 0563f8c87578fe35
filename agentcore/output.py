"""Structured output: ask the model for JSON of a given shape and validate it.

    config = {"output": output.object({"type": "object", "properties": {"total": {"type": "number"}}})}
    result = agent.send("Count the orders")
    result.output["total"]

A schema is a JSON Schema dict, or any class with `model_json_schema()` (pydantic style);
then `result.output` is built with the class's `model_validate`.
"""

from __future__ import annotations

import json as _json
import re
from dataclasses import dataclass
from typing import Any, Literal

from .errors import AgentError

_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


@dataclass(frozen=True)
class OutputSpec:
    """What the final reply must be.

    `kind` is "object", "array" or "json". `schema` is the JSON Schema of the value the user
    gets (for "array", of the list); `cls` is the model class, if one was given.
    """

    kind: Literal["object", "array", "json"]
    schema: dict[str, Any] | None
    cls: Any = None
    name: str = "output"

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
        if self.cls is not None and hasattr(self.cls, "model_validate"):
            try:
                if self.kind == "array":
                    return [self.cls.model_validate(item) for item in data]
                return self.cls.model_validate(data)
            except Exception as exc:
                raise AgentError(f"structured output failed validation: {exc}", kind="unknown") from exc
        return data


def object(schema: Any, *, name: str = "output") -> OutputSpec:
    """The final reply is one object matching `schema` (a JSON Schema dict or a model class)."""
    json_schema, cls = _schema_of(schema)
    return OutputSpec("object", json_schema, cls, name)


def array(item_schema: Any, *, name: str = "output") -> OutputSpec:
    """The final reply is a list whose items match `item_schema`."""
    json_schema, cls = _schema_of(item_schema)
    return OutputSpec("array", {"type": "array", "items": json_schema}, cls, name)


def json(*, name: str = "output") -> OutputSpec:
    """The final reply is any JSON value."""
    return OutputSpec("json", None, None, name)


def _schema_of(schema: Any) -> tuple[dict[str, Any], Any]:
    if isinstance(schema, dict):
        return schema, None
    to_schema = getattr(schema, "model_json_schema", None)
    if callable(to_schema):
        return dict(to_schema()), schema
    raise AgentError(
        "an output schema must be a JSON Schema dict or a class with model_json_schema()", kind="config"
    )


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
        jsonschema.validate(data, schema)
    except jsonschema.ValidationError as exc:
        path = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        raise AgentError(
            f"structured output failed validation at {path}: {exc.message}", kind="unknown"
        ) from exc
    except jsonschema.SchemaError as exc:
        raise AgentError(f"the output schema is invalid: {exc.message}", kind="config") from exc
