"""JSON Schema validators, built once per distinct schema in the process.

    validator(schema).iter_errors(value)   # jsonschema's validator class for the schema's $schema

Every Agent holds its own copy of each tool's schema, so a cache by object would build (and
check) the same validator again for each new agent; building one costs far more than encoding
the schema, so the cache is keyed by the schema's canonical JSON. Encoding a schema still costs
more than a small validation, so each schema object also remembers its validator (a tool
validates every call against the same object). `jsonschema` is imported on first use only.
"""

from __future__ import annotations

import json
import threading
from typing import Any

_CACHE_SIZE = 512
_validators: dict[str, Any] = {}
# id(schema) -> (schema, validator): the schema is kept alive with it, so its id stays its own.
_by_object: dict[int, tuple[Any, Any]] = {}
_lock = threading.Lock()


def validator(schema: Any) -> Any:
    """The validator for `schema` (checked against its metaschema when first built).

    Raises:
        jsonschema.SchemaError: the schema is invalid (not cached: raised again each time).
    """
    with _lock:
        known = _by_object.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    try:
        # Sorted keys: key order never changes what a schema accepts; 1, 1.0 and true stay apart.
        key = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):
        return _new(schema)  # not plain JSON: built each time
    with _lock:
        made = _validators.get(key)
    if made is None:
        made = _new(schema)
    with _lock:
        if len(_validators) >= _CACHE_SIZE:
            _validators.clear()
        _validators[key] = made
        if len(_by_object) >= _CACHE_SIZE:
            _by_object.clear()
        _by_object[id(schema)] = (schema, made)
    return made


def _new(schema: Any) -> Any:
    from jsonschema.validators import validator_for

    cls = validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)
