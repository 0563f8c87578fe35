"""JSON Schema validators, built once per distinct schema in the process.

    validator(schema).iter_errors(value)   # jsonschema's errors; none when `value` is valid

Every Agent holds its own copy of each tool's schema, so a cache by object would build (and
check) the same validator again for each new agent; building one costs far more than encoding
the schema, so the cache is keyed by the schema's canonical JSON. Encoding a schema still costs
more than a small validation, so the latest schema objects also remember their validator (a
tool validates every call against the same object).

Most tool schemas use a handful of keywords (type, properties, required, items, enum, anyOf,
bounds, local `$ref`s), and most calls are valid. For such a schema a small checker of our own
(`_compile`) answers "valid" without importing `jsonschema` at all (its first import costs tens
of milliseconds: the cold start of a script). Only a value it does not accept goes to
`jsonschema`, which then reports the errors, so every message is jsonschema's own. The checker
accepts a value only where jsonschema (2020-12 rules) does; any keyword it does not know, a
`$schema` other than 2020-12, or a keyword value the metaschema would reject hands the whole
schema to jsonschema.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

_CACHE_SIZE = 512
_OBJECTS = 64  # schema objects remembered by identity (each kept alive with its validator)
_validators: dict[str, Any] = {}
# id(schema) -> (schema, validator): the schema is kept alive with it, so its id stays its own.
_by_object: dict[int, tuple[Any, Any]] = {}
_lock = threading.Lock()


def validator(schema: Any) -> Any:
    """The validator for `schema` (jsonschema's, checked against its metaschema, unless ours will do).

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
        _by_object.pop(id(schema), None)
        if len(_by_object) >= _OBJECTS:
            del _by_object[next(iter(_by_object))]  # the oldest: agents come and go
        _by_object[id(schema)] = (schema, made)
    return made


def _new(schema: Any) -> Any:
    check = _compile(schema)
    if check is not None:
        return Checked(schema, check)
    return _jsonschema(schema)


def _jsonschema(schema: Any) -> Any:
    from jsonschema.validators import validator_for

    cls = validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


class Checked:
    """A schema our checker covers: valid values never load jsonschema; the others get its errors."""

    def __init__(self, schema: Any, check: Callable[[Any], bool]) -> None:
        self.schema = schema
        self._check = check
        self._full: Any = None

    def is_valid(self, value: Any) -> bool:
        return self._check(value) or self.full().is_valid(value)

    def iter_errors(self, value: Any) -> Iterator[Any]:
        if self._check(value):
            return iter(())
        return iter(self.full().iter_errors(value))

    def full(self) -> Any:
        if self._full is None:
            self._full = _jsonschema(self.schema)
        return self._full


# ---------------------------------------------------------------- the checker

Check = Callable[[Any], bool]
_DIALECTS = ("https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2020-12/schema#")
# Keywords that change nothing a value must be; each with the type its value must have.
_ANNOTATIONS: dict[str, Any] = {
    "title": str,
    "description": str,
    "$comment": str,
    "format": str,  # an annotation: jsonschema checks formats only when given a format checker
    "deprecated": bool,
    "readOnly": bool,
    "writeOnly": bool,
    "examples": list,
    "default": object,
}
# Every other 2020-12 keyword (and the older ones jsonschema still reads): not ours to check.
_OTHERS = frozenset(
    [
        "$id",
        "$anchor",
        "$dynamicRef",
        "$dynamicAnchor",
        "$vocabulary",
        "$recursiveRef",
        "$recursiveAnchor",
        "definitions",
        "dependencies",
        "allOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "dependentSchemas",
        "contains",
        "patternProperties",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "multipleOf",
        "uniqueItems",
        "maxContains",
        "minContains",
        "maxProperties",
        "minProperties",
        "dependentRequired",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        "additionalItems",
    ]
)
_TYPES: dict[str, Check] = {
    "null": lambda v: v is None,
    "boolean": lambda v: type(v) is bool,
    "integer": lambda v: type(v) is int or (type(v) is float and v.is_integer()),
    "number": lambda v: type(v) is int or type(v) is float,
    "string": lambda v: type(v) is str,
    "array": lambda v: type(v) is list,
    "object": lambda v: type(v) is dict,
}
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems")
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


class _Unsupported(Exception):
    """The schema uses something the checker leaves to jsonschema."""


def _compile(schema: Any) -> Check | None:
    """A function telling values that are valid for `schema` (False: invalid, or left to jsonschema)."""
    if isinstance(schema, dict) and "$schema" in schema and schema["$schema"] not in _DIALECTS:
        return None
    try:
        return _Compiler(schema).compile(schema)
    except (_Unsupported, RecursionError):
        return None


class _Compiler:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}

    def compile(self, schema: Any) -> Check:
        if schema is True:
            return _always
        if schema is False:
            return _never
        if type(schema) is not dict:
            raise _Unsupported
        checks: list[Check] = []
        for key, value in schema.items():
            if key in _ANNOTATIONS:
                if not isinstance(value, _ANNOTATIONS[key]):
                    raise _Unsupported
            elif key == "$defs":
                if type(value) is not dict:
                    raise _Unsupported
                for definition in value.values():
                    self.compile(definition)  # each must be a schema, used or not (the metaschema says so)
            elif key == "$schema":
                pass
            elif key in _OTHERS:
                raise _Unsupported
            else:
                found = self._keyword(key, value, schema)
                if found is not None:
                    checks.append(found)
        return _all_of(checks)

    def _keyword(self, key: str, value: Any, schema: dict[str, Any]) -> Check | None:
        """The check of one keyword; None for a keyword jsonschema ignores (not in any vocabulary)."""
        if key == "type":
            return _type_check(value)
        if key == "properties":
            return self._properties(value, schema.get("additionalProperties", True))
        if key == "additionalProperties":
            return self._properties({}, value) if "properties" not in schema else None
        if key == "required":
            return _required(value)
        if key == "items":
            return self._items(value, schema.get("prefixItems", []))
        if key == "prefixItems":
            if value == []:
                raise _Unsupported  # no schema array (minItems 1)
            return self._items(True, value) if "items" not in schema else None
        if key == "anyOf":
            if type(value) is not list or not value:
                raise _Unsupported
            options = [self.compile(option) for option in value]
            return lambda v: any(option(v) for option in options)
        if key in ("enum", "const"):
            return _choice(key, value)
        if key in _COUNTS:
            return _count(key, value)
        if key in _BOUNDS:
            return _bound(key, value)
        if key == "pattern":
            return _pattern(value)
        if key == "$ref":
            return self._ref(value)
        return None

    def _properties(self, properties: Any, additional: Any) -> Check:
        if type(properties) is not dict:
            raise _Unsupported
        named = {name: self.compile(sub) for name, sub in properties.items()}
        other = self.compile(additional)

        def check(value: Any) -> bool:
            if type(value) is not dict:
                return True
            for name, item in value.items():
                sub = named.get(name, other)
                if not sub(item):
                    return False
            return True

        return check

    def _items(self, items: Any, prefix: Any) -> Check:
        if type(prefix) is not list:
            raise _Unsupported
        first = [self.compile(sub) for sub in prefix]
        rest = self.compile(items)

        def check(value: Any) -> bool:
            if type(value) is not list:
                return True
            return all(first[i](v) if i < len(first) else rest(v) for i, v in enumerate(value))

        return check

    def _ref(self, ref: Any) -> Check:
        # Local definitions only ("#/$defs/Name"), compiled once; a recursive one refers to itself.
        if type(ref) is not str or not ref.startswith("#/$defs/") or "~" in ref or "%" in ref:
            raise _Unsupported
        name = ref[len("#/$defs/") :]
        defs = self.root.get("$defs") if type(self.root) is dict else None
        if type(defs) is not dict or name not in defs or "/" in name:
            raise _Unsupported
        if ref not in self.refs:
            box: list[Check] = []
            self.refs[ref] = lambda v: box[0](v)
            box.append(self.compile(defs[name]))
        return self.refs[ref]


def _always(value: Any) -> bool:
    return _plain(value)


def _never(value: Any) -> bool:
    return False


def _plain(value: Any) -> bool:
    """JSON as `json.loads` makes it: what the checker's type tests were written for."""
    kind = type(value)
    if kind in (str, int, float, bool) or value is None:
        return True
    if kind is list:
        return all(map(_plain, value))
    if kind is dict:
        return all(type(k) is str for k in value) and all(map(_plain, value.values()))
    return False


def _all_of(checks: list[Check]) -> Check:
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    return lambda v: all(check(v) for check in checks)


def _type_check(value: Any) -> Check:
    names = [value] if type(value) is str else value
    if type(names) is not list or not names or len(set(map(str, names))) != len(names):
        raise _Unsupported
    if any(type(n) is not str or n not in _TYPES for n in names):
        raise _Unsupported
    # Exact types: a value of none of them (a tuple, a Decimal, an IntEnum) is left to jsonschema.
    tests = [_TYPES[n] for n in names]
    return lambda v: any(test(v) for test in tests)


def _required(value: Any) -> Check:
    if type(value) is not list or any(type(n) is not str for n in value) or len(set(value)) != len(value):
        raise _Unsupported
    names = tuple(value)
    return lambda v: type(v) is not dict or all(n in v for n in names)


def _choice(key: str, value: Any) -> Check:
    # Strings and null only: jsonschema's own equality (1 == 1.0, never True) is not Python's.
    allowed = value if key == "enum" else [value]
    if type(allowed) is not list or any(type(a) is not str and a is not None for a in allowed):
        raise _Unsupported
    strings = frozenset(a for a in allowed if a is not None)
    null = None in allowed
    return lambda v: (type(v) is str and v in strings) or (v is None and null)


def _count(key: str, value: Any) -> Check:
    if type(value) is not int or value < 0:
        raise _Unsupported
    kind = str if key.endswith("Length") else list
    if key.startswith("min"):
        return lambda v: type(v) is not kind or len(v) >= value
    return lambda v: type(v) is not kind or len(v) <= value


def _bound(key: str, value: Any) -> Check:
    if type(value) not in (int, float):
        raise _Unsupported
    tests: dict[str, Check] = {
        "minimum": lambda v: not v < value,
        "maximum": lambda v: not v > value,
        "exclusiveMinimum": lambda v: not v <= value,
        "exclusiveMaximum": lambda v: not v >= value,
    }
    test = tests[key]
    return lambda v: type(v) not in (int, float) or test(v)


def _pattern(value: Any) -> Check:
    import re

    if type(value) is not str:
        raise _Unsupported
    try:
        search = re.compile(value).search
    except re.error:
        raise _Unsupported from None
    return lambda v: type(v) is not str or search(v) is not None
