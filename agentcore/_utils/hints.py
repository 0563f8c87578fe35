"""Python type hints as JSON Schema, and validated JSON back as values of those types.

    kind = hints.kind_of(list[Point])      # TypeError for a hint JSON Schema cannot state
    kind.schema                            # {"type": "array", "items": {"type": "object", ...}}
    kind.convert([{"x": 1, "y": 2}])       # [Point(x=1, y=2)]

Used by `@tool` (parameters) and `output.object()/.array()`. Supported: str int float bool None,
list/set/frozenset/Sequence[X], dict/Mapping[str, X], tuple[X, ...] and tuple[X, Y], Optional,
Union and X | Y, Literal, Enum, TypedDict (total or not), dataclasses, NamedTuple, Annotated,
Any, and classes with `model_json_schema()` / `model_validate()` (pydantic style, duck-typed),
nested to any depth. `convert` expects a value that already passed the schema (jsonschema):
it builds the typed value and does not validate again.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Union

Convert = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class Kind:
    """One compiled hint.

    Attributes:
        schema: its JSON Schema (a pydantic-style class's own `$defs` are moved to the root by
            `hoist_defs`).
        convert: JSON value -> typed value; None when the JSON value already is one.
        match: whether a JSON value fits this kind (picks the branch of a union to convert by).
    """

    schema: dict[str, Any]
    convert: Convert | None
    match: Callable[[Any], bool]

    def value(self, data: Any) -> Any:
        return data if self.convert is None else self.convert(data)


def kind_of(hint: Any) -> Kind:
    """The Kind of a type hint.

    Raises:
        TypeError: the hint has no JSON Schema form (a plain class, bytes, dict with non-str
            keys, a recursive dataclass, ...); the message says which part.
    """
    return _compile(hint, ())


def hoist_defs(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with every nested `$defs` moved to the root, where `#/$defs/...` refs resolve.

    Raises:
        TypeError: two different definitions share a name.
    """
    found: dict[str, Any] = {}

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        out = {}
        for key, value in node.items():
            if key == "$defs" and isinstance(value, dict):
                for name, definition in value.items():
                    definition = walk(definition)
                    if found.setdefault(name, definition) != definition:
                        raise TypeError(f"two different types are both named {name!r} in one schema")
            else:
                out[key] = walk(value)
        return out

    root: dict[str, Any] = walk(schema)
    if found:
        root["$defs"] = found
    return root


# ---------------------------------------------------------------- compiling


def _anything(value: Any) -> bool:
    return True


_ANY = Kind({}, None, _anything)
_SIMPLE: dict[Any, tuple[str, Callable[[Any], bool]]] = {
    str: ("string", lambda v: isinstance(v, str)),
    bool: ("boolean", lambda v: isinstance(v, bool)),
    int: ("integer", lambda v: _is_number(v) and float(v).is_integer()),
    float: ("number", lambda v: _is_number(v)),
}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _compile(hint: Any, active: tuple[Any, ...]) -> Kind:
    if hint is Any or hint is object or isinstance(hint, str | typing.TypeVar):
        # A string is a name that could not be resolved (a TYPE_CHECKING import): no constraint.
        return _ANY
    if hint is None or hint is type(None):
        return Kind({"type": "null"}, None, lambda v: v is None)
    if isinstance(hint, type) and hint in _SIMPLE:
        name, match = _SIMPLE[hint]
        return Kind({"type": name}, _NUMBER_CONVERT.get(hint), match)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return _compile(args[0], active)
    if origin is Literal:
        return _choice(list(args), None)
    if origin is Union or origin is types.UnionType:
        return _union([_compile(arg, active) for arg in args])
    if origin is tuple or hint is tuple:
        return _tuple(args, active)
    if hint in (list, set, frozenset) or origin in (list, set, frozenset, Sequence) or hint is Sequence:
        return _array(_compile(args[0], active) if args else _ANY, origin or hint)
    if hint in (dict, Mapping) or origin in (dict, Mapping):
        return _mapping(args, active)
    if isinstance(hint, type):
        return _class(hint, active)
    raise TypeError(f"{_name(hint)} has no JSON Schema form")


_NUMBER_CONVERT: dict[Any, Convert] = {
    # JSON Schema counts 2.0 as an integer and 2 as a number; Python wants the annotated type.
    int: lambda v: int(v) if isinstance(v, float) else v,
    float: lambda v: float(v) if isinstance(v, int) else v,
}


def _class(cls: type, active: tuple[Any, ...]) -> Kind:
    if issubclass(cls, enum.Enum):
        return _choice([member.value for member in cls], cls)
    if callable(getattr(cls, "model_json_schema", None)) and callable(getattr(cls, "model_validate", None)):
        validate = cls.model_validate  # type: ignore[attr-defined]
        return Kind(dict(cls.model_json_schema()), validate, lambda v: isinstance(v, dict))  # type: ignore[attr-defined]
    if cls in active:
        raise TypeError(f"{_name(cls)} refers to itself; recursive types have no inline JSON Schema")
    active = (*active, cls)
    if typing.is_typeddict(cls):
        return _record(cls, _hints(cls), set(cls.__required_keys__), None, active)  # type: ignore[attr-defined]
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        fields = _hints(cls)
        required = {name for name in cls._fields if name not in cls._field_defaults}  # type: ignore[attr-defined]
        return _record(cls, fields, required, cls, active)
    if dataclasses.is_dataclass(cls):
        hints = _hints(cls)
        init = [field for field in dataclasses.fields(cls) if field.init]
        fields = {field.name: hints.get(field.name, Any) for field in init}
        required = {
            field.name
            for field in init
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        }
        return _record(cls, fields, required, cls, active)
    raise TypeError(
        f"{_name(cls)} has no JSON Schema form (use a dataclass, TypedDict, NamedTuple, Enum "
        "or a class with model_json_schema()/model_validate())"
    )


def _record(
    cls: type, fields: Mapping[str, Any], required: set[str], build: Any, active: tuple[Any, ...]
) -> Kind:
    """A JSON object with exactly these fields; `build(**fields)` makes the value (None: a dict)."""
    kinds: dict[str, Kind] = {}
    for name, hint in fields.items():
        try:
            kinds[name] = _compile(hint, active)
        except TypeError as exc:
            raise TypeError(f"{_name(cls)}.{name}: {exc}") from None
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: kind.schema for name, kind in kinds.items()},
    }
    order = [name for name in kinds if name in required]
    if order:
        schema["required"] = order
    schema["additionalProperties"] = False

    def convert(data: Any) -> Any:
        values = {key: kinds[key].value(item) if key in kinds else item for key, item in data.items()}
        return values if build is None else build(**values)

    def match(data: Any) -> bool:
        return (
            isinstance(data, dict)
            and required <= data.keys() <= kinds.keys()
            and all(kinds[key].match(item) for key, item in data.items())
        )

    needs_convert = build is not None or any(kind.convert is not None for kind in kinds.values())
    return Kind(schema, convert if needs_convert else None, match)


def _choice(values: list[Any], cls: type[enum.Enum] | None) -> Kind:
    schema: dict[str, Any] = {"enum": values}
    names = {_json_type(value) for value in values}
    if len(names) == 1 and None not in names:
        schema = {"type": names.pop(), **schema}

    def match(value: Any) -> bool:
        return any(value == choice and type(value) is type(choice) for choice in values)

    return Kind(schema, cls, match)


def _json_type(value: Any) -> str | None:
    for python, (name, _) in _SIMPLE.items():
        if type(value) is python:
            return name
    return None


def _union(options: list[Kind]) -> Kind:
    if any(option.schema == {} for option in options):
        return _ANY
    nulls = [option for option in options if option.schema == {"type": "null"}]
    others = [option for option in options if option.schema != {"type": "null"}]
    # Optional[X] travels as anyOf [X, null]: valid everywhere, and Gemini accepts anyOf
    # where it rejects a list-valued "type".
    ordered = [*others, *nulls[:1]]
    if len(ordered) == 1:
        return ordered[0]
    if all(option.convert is None for option in ordered):
        convert = None
    else:

        def convert(data: Any) -> Any:
            for option in ordered:
                if option.match(data):
                    return option.value(data)
            return data

    return Kind(
        {"anyOf": [option.schema for option in ordered]},
        convert,
        lambda v: any(option.match(v) for option in ordered),
    )


def _array(item: Kind, container: Any) -> Kind:
    schema: dict[str, Any] = {"type": "array", "items": item.schema} if item.schema else {"type": "array"}
    build: Callable[[Any], Any] | None = {set: set, frozenset: frozenset}.get(container)
    if build is None and item.convert is None:
        convert = None
    else:
        make = build or list

        def convert(data: Any) -> Any:
            return make(item.value(element) for element in data)

    def match(data: Any) -> bool:
        return isinstance(data, list) and all(item.match(element) for element in data)

    return Kind(schema, convert, match)


def _tuple(args: tuple[Any, ...], active: tuple[Any, ...]) -> Kind:
    if not args or (len(args) == 2 and args[1] is Ellipsis):
        item = _compile(args[0], active) if args else _ANY
        array = _array(item, list)
        return Kind(array.schema, lambda data: tuple(item.value(element) for element in data), array.match)
    if args == ((),):
        items: list[Kind] = []
    else:
        items = [_compile(arg, active) for arg in args]
    schema: dict[str, Any] = {"type": "array", "minItems": len(items), "maxItems": len(items)}
    if items and all(kind.schema == items[0].schema for kind in items) and items[0].schema:
        schema["items"] = items[0].schema
    elif items:
        schema["prefixItems"] = [kind.schema for kind in items]

    def convert(data: Any) -> Any:
        return tuple(kind.value(element) for kind, element in zip(items, data, strict=True))

    def match(data: Any) -> bool:
        return (
            isinstance(data, list)
            and len(data) == len(items)
            and all(kind.match(element) for kind, element in zip(items, data, strict=True))
        )

    return Kind(schema, convert, match)


def _mapping(args: tuple[Any, ...], active: tuple[Any, ...]) -> Kind:
    if args and args[0] is not str and args[0] is not Any:
        raise TypeError(f"dict keys are always str in JSON, not {_name(args[0])}")
    value = _compile(args[1], active) if len(args) == 2 else _ANY
    schema: dict[str, Any] = {"type": "object"}
    if value.schema:
        schema["additionalProperties"] = value.schema
    convert = None
    if value.convert is not None:

        def convert(data: Any) -> Any:
            return {key: value.value(item) for key, item in data.items()}

    def match(data: Any) -> bool:
        return isinstance(data, dict) and all(value.match(item) for item in data.values())

    return Kind(schema, convert, match)


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception as exc:
        raise TypeError(f"the annotations of {_name(cls)} cannot be resolved: {exc}") from None


def _name(hint: Any) -> str:
    if isinstance(hint, type):
        return hint.__qualname__
    return repr(hint)
