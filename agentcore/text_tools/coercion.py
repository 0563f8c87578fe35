"""Arguments a model wrote as strings, turned into the types the tool's schema asks for.

    coerce_arguments({"n": "7", "ok": "yes"}, schema)    # {"n": 7, "ok": True}

Only where the conversion is unambiguous; anything else is left for schema validation to report.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from .lenient import parse_lenient


def schema_properties(input_schema: Mapping[str, Any]) -> dict[str, Any]:
    properties = input_schema.get("properties") if isinstance(input_schema, Mapping) else None
    return properties if isinstance(properties, dict) else {}


def coerce_arguments(arguments: dict[str, Any], input_schema: Mapping[str, Any]) -> dict[str, Any]:
    """String values turned into the type the schema asks for ("7" -> 7), where that is
    unambiguous; anything that does not convert is left for schema validation to report."""
    properties = schema_properties(input_schema)
    coerced: dict[str, Any] = {}
    for key, value in arguments.items():
        schema = properties.get(key)
        coerced[str(key)] = (
            _coerce(value, schema) if isinstance(value, str) and isinstance(schema, dict) else value
        )
    return coerced


def _schema_types(schema: Mapping[str, Any]) -> set[str]:
    types: set[str] = set()
    declared = schema.get("type")
    if isinstance(declared, str):
        types.add(declared)
    elif isinstance(declared, list):
        types.update(t for t in declared if isinstance(t, str))
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or []:
            if isinstance(option, dict):
                types |= _schema_types(option)
    return types


def _coerce(value: str, schema: Mapping[str, Any]) -> Any:
    types = _schema_types(schema)
    if not types or "string" in types:
        return value
    text = value.strip()
    for kind in ("integer", "number", "boolean", "null", "array", "object"):
        if kind in types:
            converted = _convert(text, kind)
            if converted is not _NO_VALUE:
                return converted
    return value


_NO_VALUE = object()


def _convert(text: str, kind: str) -> Any:
    try:
        if kind == "integer" and re.fullmatch(r"[+-]?\d+(?:\.0*)?", text):
            return int(text.split(".")[0])
        if kind == "number" and re.fullmatch(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", text):
            number = float(text)
            if not math.isfinite(number):
                return _NO_VALUE
            return int(number) if re.fullmatch(r"[+-]?\d+", text) else number
    except (ValueError, OverflowError):
        return _NO_VALUE
    if kind == "boolean" and text.lower() in ("true", "false", "yes", "no", "1", "0"):
        return text.lower() in ("true", "yes", "1")
    if kind == "null" and text.lower() in ("null", "none", ""):
        return None
    if kind in ("array", "object"):
        parsed = parse_lenient(text)
        wanted = list if kind == "array" else dict
        if parsed is not None and len(parsed) == 1 and isinstance(parsed[0], wanted):
            return parsed[0]
    return _NO_VALUE
