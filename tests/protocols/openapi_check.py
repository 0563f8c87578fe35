"""Request bodies checked against OpenAI's published OpenAPI description (tests/fixtures/schemas).

    validate_create_response(body)     # AssertionError naming every violation

Shared by the recorded-fixture checks and the strict-server tests of the responses adapter.
"""

from __future__ import annotations

import json
from typing import Any

from recorded import OPENAPI

_VALIDATOR: list[Any] = []


def validate_create_response(body: dict[str, Any]) -> None:
    """Assert that `body` is a `CreateResponse` (the schema is in the checkout: never skipped)."""
    if not _VALIDATOR:
        _VALIDATOR.append(_validator())
    errors = sorted(_VALIDATOR[0].iter_errors(body), key=lambda e: list(e.absolute_path))
    assert not errors, [f"{list(e.absolute_path)}: {e.message[:200]}" for e in errors]


def _validator() -> Any:
    import jsonschema

    document = json.loads(OPENAPI.read_text(encoding="utf-8"))
    components = _as_json_schema(document["components"])
    schema = {"$ref": "#/components/schemas/CreateResponse", "components": components}
    return jsonschema.Draft202012Validator(schema)


def _as_json_schema(node: Any) -> Any:
    """OpenAPI 3 quirks as JSON Schema: `nullable` allows null; a `oneOf` with a `discriminator`
    is checked as `anyOf` (OpenAPI picks the branch by the discriminator, which jsonschema does
    not implement, and branches such as EasyInputMessage / InputMessage overlap)."""
    if isinstance(node, list):
        return [_as_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _as_json_schema(value) for key, value in node.items()}
    if "discriminator" in node and "oneOf" in node:
        node["anyOf"] = node.pop("oneOf")
    if node.pop("nullable", False):
        return {"anyOf": [node, {"type": "null"}]}
    return node
