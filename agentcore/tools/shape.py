"""Turn what a tool returned into the result the model reads.

    shape("hi")                                  # {"output": {"type": "text", "value": "hi"}}
    shape({"stop": True, "output": "done"})      # {... "stop": True}
    truncate(result["output"], limit=32000)      # middle cut, head and tail kept
    interrupted_result(), denied_result(), timeout_result(30), error_result("boom")

A result is always a plain-JSON dict: `output` (an output block), plus `stop`, `error`
and `interrupted` when they apply. Nothing here raises for a bad return value: a value
the model could not read becomes an error result, because a malformed block written to
the append-only history would break every later request.

These rules are also the tool process's: its worker runs this file's source before its own
(tools/process.py), so this file imports the standard library only, and at module level only
what a tool process has loaded anyway (every one of them pays for the rest).
"""

from __future__ import annotations

import enum
import json
import math
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

BLOCK_TYPES = ("text", "json", "error-text", "error-json", "execution-denied", "content")
PART_TYPES = ("text", "image", "file")
ERROR_TYPES = ("error-text", "error-json")

NO_OUTPUT_TEXT = "The tool ran successfully and returned no output."
INTERRUPTED_TEXT = "The tool call was interrupted before it finished; its result is unknown."
DENIED_TEXT = "The user did not allow this tool call."
RAW_QUOTE_LIMIT = 8000


class NotJSON(TypeError):
    """A value has no plain-JSON form (an arbitrary object, a cycle, a bad dict key)."""


class InvalidBlock(ValueError):
    """An output block the model could not read (unknown type, bad value, bad content part)."""


# ---------------------------------------------------------------- return value -> result


def shape(value: Any) -> dict[str, Any]:
    """The result for a tool's return value (see the module docstring for the rules)."""
    try:
        if _is_envelope(value):
            return _shape_envelope(value)
        return output_result(value_block(value))
    except NotJSON as exc:
        return error_result(f"The tool returned a value that cannot be sent to the model: {exc}")
    except InvalidBlock as exc:
        return error_result(f"The tool returned an invalid output block: {exc}")
    except RecursionError:
        return error_result("The tool returned a value nested too deeply to send to the model.")


def shape_model_output(to_model_output: Callable[..., Any], value: Any, input: Any) -> dict[str, Any]:
    """The result when the tool has `to_model_output(output=, input=)`: its block, validated."""
    try:
        block = to_model_output(output=value, input=input)
    except Exception as exc:
        return error_result(f"to_model_output failed: {describe(exc)}")
    try:
        checked = validate_block(block)
    except (InvalidBlock, NotJSON, RecursionError) as exc:
        return error_result(f"to_model_output returned an invalid output block: {exc}")
    return output_result(checked, stop=_is_envelope(value) and value.get("stop") is True)


def value_block(value: Any) -> dict[str, Any]:
    """The output block for a plain return value: str → text, None → text, else json."""
    if value is None:
        return {"type": "text", "value": NO_OUTPUT_TEXT}
    if isinstance(value, str):
        return {"type": "text", "value": value}
    return {"type": "json", "value": to_json(value)}


def generator_value(returned: Any, yields: list[Any]) -> Any:
    """What a generator tool produced: its return value, else its yields (joined when all str)."""
    if returned is not None:
        return returned
    if yields and all(isinstance(item, str) for item in yields):
        return "".join(yields)
    return yields or None


def output_result(block: dict[str, Any], *, stop: bool = False) -> dict[str, Any]:
    """Wrap a checked block as a result; error blocks also set `error` to their text."""
    result: dict[str, Any] = {"output": block}
    if stop:
        result["stop"] = True
    if block.get("type") in ERROR_TYPES:
        value = block.get("value")
        result["error"] = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return result


def _is_envelope(value: Any) -> bool:
    """`{"output": ...}` or `{"stop": True, ...}` with no other keys."""
    if not isinstance(value, Mapping) or not value or not set(value) <= {"output", "stop"}:
        return False
    return "output" in value or value.get("stop") is True


def _shape_envelope(value: Mapping[str, Any]) -> dict[str, Any]:
    output = value.get("output")
    stop = value.get("stop") is True
    if isinstance(output, Mapping) and isinstance(output.get("type"), str):
        return output_result(validate_block(output), stop=stop)
    return output_result(value_block(output), stop=stop)


# ---------------------------------------------------------------- block validation


def validate_block(block: Any) -> dict[str, Any]:
    """A copy of `block` with its value normalised, or `InvalidBlock` saying what is wrong."""
    if not isinstance(block, Mapping):
        raise InvalidBlock(f"expected a dict with 'type' and 'value', got {type(block).__name__}")
    kind = block.get("type")
    if kind not in BLOCK_TYPES:
        raise InvalidBlock(f"unknown output block type {kind!r}; use one of {', '.join(BLOCK_TYPES)}")
    value = block.get("value")
    if kind in ("text", "error-text") and not isinstance(value, str):
        raise InvalidBlock(f"a {kind} block needs a str value, got {type(value).__name__}")
    if kind in ("json", "error-json"):
        value = to_json(value)
    if kind == "execution-denied" and value is not None and not isinstance(value, str):
        raise InvalidBlock("an execution-denied block needs a str value (the reason)")
    if kind == "content":
        value = _content_parts(value)
    return {**block, "value": value}


def _content_parts(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise InvalidBlock("a content block needs a list of parts")
    return [_content_part(part) for part in value]


def _content_part(part: Any) -> dict[str, Any]:
    if not isinstance(part, Mapping):
        raise InvalidBlock(f"content parts are dicts, got {type(part).__name__}")
    kind = part.get("type")
    if kind not in PART_TYPES:
        raise InvalidBlock(
            f"content part type {kind!r} is rejected: tool output may hold only text, image and file parts"
        )
    needed = {"text": ("text",), "image": ("image",), "file": ("data", "media_type")}[kind]
    for key in needed:
        if not isinstance(part.get(key), str):
            raise InvalidBlock(f"a {kind} part needs a str {key!r}")
    for key in ("media_type", "filename"):
        if key in part and not isinstance(part[key], str):
            raise InvalidBlock(f"a {kind} part's {key!r} must be a str")
    return dict(part)


# ---------------------------------------------------------------- JSON normalisation


def to_json(value: Any) -> Any:
    """A plain-JSON copy of `value`.

    datetime/date/time → ISO text, set/tuple → list, bytes → base64 text, Decimal → float,
    NaN/inf → None, Enum → its value, dataclass/pydantic model → dict, Path/UUID → str.

    Raises:
        NotJSON: for other objects and cyclic structures (the message names the type).
    """
    return _to_json(value, set())


def _to_json(value: Any, active: set[int]) -> Any:
    if isinstance(value, enum.Enum):
        return _to_json(value.value, active)
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    scalar = _scalar(value)
    if scalar is not _NOT_SCALAR:
        return scalar
    if id(value) in active:
        raise NotJSON(f"a cyclic structure (a {type(value).__name__} contains itself)")
    active.add(id(value))
    try:
        return _container(value, active)
    finally:
        active.discard(id(value))


_NOT_SCALAR = object()


def _scalar(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        import base64

        return base64.b64encode(bytes(value)).decode("ascii")
    # decimal, datetime, pathlib and uuid are looked up only once loaded (a value of one of their
    # types means its module is loaded), so that importing the tools does not import them.
    if isinstance(value, _loaded("decimal", "Decimal")):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, _loaded("datetime", "datetime", "date", "time")):
        return value.isoformat()
    if isinstance(value, _loaded("pathlib", "PurePath") + _loaded("uuid", "UUID")):
        return str(value)
    return _NOT_SCALAR


def _loaded(module: str, *names: str) -> tuple[type[Any], ...]:
    """The types `names` of `module` if it is loaded, else none."""
    found = sys.modules.get(module)
    return tuple(getattr(found, name) for name in names) if found is not None else ()


def _container(value: Any, active: set[int]) -> Any:
    if isinstance(value, Mapping):
        return {_key(key): _to_json(item, active) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_to_json(item, active) for item in value]
    if isinstance(value, set | frozenset):
        items = [_to_json(item, active) for item in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    # A dataclass instance exists only once `dataclasses` is loaded: no need to load it here.
    dataclasses = sys.modules.get("dataclasses")
    if dataclasses is not None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_json(getattr(value, f.name), active) for f in dataclasses.fields(value)}
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return _to_json(dump(), active)
    raise NotJSON(f"a {type(value).__module__}.{type(value).__qualname__} object is not JSON")


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, enum.Enum):
        return _key(key.value)
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    raise NotJSON(f"a dict key of type {type(key).__name__} is not JSON (keys must be str)")


# ---------------------------------------------------------------- truncation


def truncate(block: dict[str, Any], limit: int | None) -> dict[str, Any]:
    """Cut an output block to about `limit` characters, from the middle.

    Text and error-text values are cut; a json block whose text form is too long becomes
    a text block (error-json → error-text) holding the cut JSON text; in a content block
    the text parts share the limit in proportion to their length. Media parts and
    execution-denied blocks are never touched.
    """
    if limit is None:
        return block
    kind = block.get("type")
    value = block.get("value")
    if kind in ("text", "error-text") and isinstance(value, str):
        return {**block, "value": cut_middle(value, limit)}
    if kind in ("json", "error-json"):
        text = json.dumps(value, ensure_ascii=False)
        if len(text) <= limit:
            return block
        return {**block, "type": "text" if kind == "json" else "error-text", "value": cut_middle(text, limit)}
    if kind == "content" and isinstance(value, list):
        return {**block, "value": _cut_parts(value, limit)}
    return block


def truncate_result(result: dict[str, Any], limit: int | None) -> dict[str, Any]:
    """`result` with its output block truncated to `limit` (the same dict when nothing changes)."""
    output = result.get("output")
    if limit is None or not isinstance(output, dict):
        return result
    cut = truncate(output, limit)
    return result if cut is output else {**result, "output": cut}


def cut_middle(text: str, limit: int) -> str:
    """`text` if it fits in `limit`, else its head and tail around a notice for the model.

    The result is at most `limit` characters unless `limit` is smaller than the tiny notice.
    Every notice tells the model to narrow the request or page (API.md §Tools).
    """
    total = len(text)
    if total <= limit:
        return text
    notice = _notice_for(total, limit)
    keep = max(0, limit - len(notice(total)))
    head = (keep + 1) // 2
    tail = keep - head
    return text[:head] + notice(total - keep) + text[total - tail :]


def _notice_for(total: int, limit: int) -> Callable[[int], str]:
    """The notice that fits `limit`: the long one explains best, but below twice its length it
    would eat the output, so smaller limits get shorter ones that still say what to do."""

    def full(omitted: int) -> str:
        return _notice(omitted, total, limit)

    if len(full(total)) * 2 <= limit:
        return full
    if len(_short_notice(total)) < limit:
        return _short_notice
    return _tiny_notice


def _notice(omitted: int, total: int, limit: int) -> str:
    return (
        f"\n\n[... {omitted} characters omitted: the output was too long ({total} characters, "
        f"limit {limit}). Narrow the request (a filter, a range, fewer items) or read it in pages. ...]\n\n"
    )


def _short_notice(omitted: int) -> str:
    return f"\n[... {omitted} characters omitted: narrow the request or read it in pages ...]\n"


def _tiny_notice(omitted: int) -> str:
    return f"\n[...{omitted} omitted: narrow or page]\n"


def _cut_parts(parts: list[Any], limit: int) -> list[Any]:
    texts = [len(p["text"]) for p in parts if _is_text_part(p)]
    total = sum(texts)
    if total <= limit:
        return parts
    return [
        {**part, "text": cut_middle(part["text"], max(1, limit * len(part["text"]) // total))}
        if _is_text_part(part)
        else part
        for part in parts
    ]


def _is_text_part(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)


# ---------------------------------------------------------------- standard results


def error_result(text: str, error: str | None = None) -> dict[str, Any]:
    """An error-text result; `error` defaults to the text."""
    return {"output": {"type": "error-text", "value": text}, "error": error if error is not None else text}


def exception_result(exc: BaseException) -> dict[str, Any]:
    """The result for a tool that raised: "<ExcType>: <message>" plus where it was raised."""
    text = describe(exc)
    where = _raised_at(exc)
    return error_result(f"{text}\n{where}" if where else text, error=text)


def describe(exc: BaseException) -> str:
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _raised_at(exc: BaseException) -> str:
    import os
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    frame = frames[-1]
    line = f": {frame.line}" if frame.line else ""
    return f"  at {frame.name} ({os.path.basename(frame.filename)}:{frame.lineno}){line}"


def interrupted_result() -> dict[str, Any]:
    """The result of a call that was cancelled before it finished."""
    return {"output": {"type": "error-text", "value": INTERRUPTED_TEXT}, "interrupted": True}


def denied_result(reason: str | None = None) -> dict[str, Any]:
    """The result of a call the permission callback refused."""
    return {"output": {"type": "execution-denied", "value": reason or DENIED_TEXT}}


def timeout_result(seconds: float) -> dict[str, Any]:
    """The result of a call that ran past its timeout."""
    return error_result(f"The tool timed out after {seconds:g} s and was stopped.", error="timeout")


def invalid_call_result(
    name: str, raw: str | None, reason: str, *, available: Iterable[str] | None = None
) -> dict[str, Any]:
    """The result of a call that could not be run as written (unknown tool, unparsable arguments).

    The raw argument text is quoted (cut to `RAW_QUOTE_LIMIT`) so the model can rewrite it.
    """
    text = f"Invalid call to tool {name!r}: {reason}."
    if available is not None:
        names = sorted(available)
        text += f" Available tools: {', '.join(names)}." if names else " No tools are available."
    if raw is not None:
        text += (
            f"\nThe arguments you sent were:\n{cut_middle(raw, RAW_QUOTE_LIMIT)}\n"
            "Call again with the arguments written as one JSON object that matches the tool's input schema."
        )
    return error_result(text)
