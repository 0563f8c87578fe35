"""Script items of the scripted model server, and the recorded requests they answer.

    check(item)                                   # early: a typo fails at add(), not as a 500
    reply = build(item, recorded, new_call_id)    # per request
    reply.text, reply.tool_calls, reply.usage, reply.stream_error, ...

An item is a `str` (a text reply), a dict with the keys of the table in docs/INTERNALS.md, or
a callable `fn(recorded) -> item`. A `Reply` is protocol-neutral: the encoders turn it into
one vendor's wire format.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ..usage import Usage

EXHAUSTED_TEXT = "(script exhausted)"
DEFAULT_CHUNK_SIZE = 8

# key -> accepted types. Extra per-protocol keys come from each encoder's EXTRA_KEYS.
_KEY_TYPES: dict[str, tuple[type, ...]] = {
    "text": (str,),
    "reasoning": (str, type(None)),
    "tool_calls": (list, tuple),
    "usage": (Mapping,),
    "finish_reason": (str,),
    "status": (int,),
    "error": (str,),
    "overflow": (bool,),
    "headers": (Mapping,),
    "body": (str, bytes, dict, list),
    "content_type": (str,),
    "chunks": (list, tuple),
    "delay": (int, float),
    "chunk_delay": (int, float),
    "chunk_size": (int,),
    "drop_after": (int, type(None)),
    "stall_after": (int, type(None)),
    "stream_error": (str, type(None)),
    "truncate": (bool,),
    "numbered_call_ids": (bool,),
}
KEYS = frozenset(_KEY_TYPES)
USAGE_KEYS = frozenset(
    {"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "total_tokens"}
)
_NON_NEGATIVE = ("delay", "chunk_delay", "drop_after", "stall_after")


class Headers(Mapping[str, str]):
    """Request headers. Names are stored lower-cased; lookups ignore case."""

    def __init__(self, pairs: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        items = pairs.items() if isinstance(pairs, Mapping) else pairs
        self._items = {name.lower(): value for name, value in items}

    def __getitem__(self, name: str) -> str:
        return self._items[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"


@dataclass(frozen=True)
class Recorded:
    """One request as the server received it.

    `path` has no query string; `query` maps each parameter to its last value. `body` is the
    parsed JSON body, or None when the body was empty or not JSON; `raw` is the body bytes.
    """

    method: str
    path: str
    query: dict[str, str]
    headers: Headers
    body: Any
    raw: bytes = b""


Item: TypeAlias = "str | Mapping[str, Any] | Callable[[Recorded], Any]"


@dataclass(frozen=True)
class ScriptedCall:
    """A tool call to send. `arguments` is the wire text; `input` its parsed object, or None."""

    id: str
    name: str
    arguments: str
    input: dict[str, Any] | None
    item: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """A normalised script item. `item` is the original dict, for protocol-specific keys."""

    text: str = ""
    reasoning: str | None = None
    tool_calls: tuple[ScriptedCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    status: int = 200
    error: str | None = None
    overflow: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    content_type: str | None = None
    chunks: tuple[bytes, ...] | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    chunk_size: int = DEFAULT_CHUNK_SIZE
    drop_after: int | None = None
    stall_after: int | None = None
    stream_error: str | None = None
    truncate: bool = False
    item: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_error(self) -> bool:
        """True when the reply is an HTTP error (a status of 400 or more, or an overflow)."""
        return self.overflow or self.status >= 400

    def pieces(self, text: str) -> list[str]:
        """`text` cut into deltas of `chunk_size` characters (none for empty text)."""
        size = self.chunk_size
        return [text[start : start + size] for start in range(0, len(text), size)]


def check(item: object, extra_keys: frozenset[str] = frozenset()) -> None:
    """Validate a script item's keys and value types.

    Raises:
        TypeError: the item, or one of its values, has the wrong type.
        ValueError: an unknown key or an out-of-range value.
    """
    if isinstance(item, str) or callable(item):
        return
    if not isinstance(item, Mapping):
        raise TypeError(f"script item must be a str, dict or callable, not {type(item).__name__}")
    unknown = set(item) - KEYS - extra_keys
    if unknown:
        known = ", ".join(sorted(KEYS | extra_keys))
        raise ValueError(f"unknown script item key(s) {sorted(unknown)}; known keys: {known}")
    for key, value in item.items():
        types = _KEY_TYPES.get(key)
        if types is not None and not isinstance(value, types):
            raise TypeError(f"script item key {key!r} has type {type(value).__name__}")
    for key in _NON_NEGATIVE:
        if (item.get(key) or 0) < 0:
            raise ValueError(f"script item key {key!r} must not be negative")
    if item.get("chunk_size", 1) < 1:
        raise ValueError("script item key 'chunk_size' must be at least 1")
    for call in item.get("tool_calls", ()):
        _check_call(call)
    if not all(isinstance(chunk, (str, bytes)) for chunk in item.get("chunks", ())):
        raise TypeError("script item key 'chunks' must hold str or bytes chunks")
    bad_usage = set(item.get("usage", {})) - USAGE_KEYS
    if bad_usage:
        raise ValueError(f"unknown usage key(s) {sorted(bad_usage)}; known: {sorted(USAGE_KEYS)}")


def _check_call(call: object) -> None:
    if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
        raise TypeError(f"a scripted tool call must be a dict with a str 'name', not {call!r}")
    if not isinstance(call.get("arguments", {}), (Mapping, str)):
        raise TypeError("a scripted tool call's 'arguments' must be a dict or a str")


def build(
    item: Item,
    recorded: Recorded,
    new_call_id: Callable[[], str],
    extra_keys: frozenset[str] = frozenset(),
) -> Reply:
    """Turn a script item into a `Reply` for `recorded`.

    A callable item is called with `recorded` first. Usage not given is estimated from the
    request and reply sizes (about 4 characters a token); tool calls without an `id` get
    one from `new_call_id` — or, with `numbered_call_ids: True`, `call_0`, `call_1`, … counted
    from 0 in every reply, as many OpenAI-compatible servers do.
    """
    if callable(item):
        item = item(recorded)
        if callable(item):
            raise TypeError("a callable script item must return a str or dict, not another callable")
    if isinstance(item, str):
        item = {"text": item}
    check(item, extra_keys)
    assert isinstance(item, Mapping)
    if item.get("numbered_call_ids"):
        numbers = iter(range(len(item.get("tool_calls", ()))))
        new_call_id = lambda: f"call_{next(numbers)}"  # noqa: E731
    calls = tuple(_scripted_call(call, new_call_id) for call in item.get("tool_calls", ()))
    text = item.get("text", "")
    reasoning = item.get("reasoning")
    status = item.get("status", 500 if "error" in item else 200)
    return Reply(
        text=text,
        reasoning=reasoning,
        tool_calls=calls,
        usage=_usage(item.get("usage", {}), recorded, text, reasoning, calls),
        finish_reason=item.get("finish_reason") or ("tool_calls" if calls else "stop"),
        status=status,
        error=item.get("error") or (f"scripted error (HTTP {status})" if status >= 400 else None),
        overflow=item.get("overflow", False),
        headers={str(name): str(value) for name, value in item.get("headers", {}).items()},
        body=_raw_body(item["body"]) if "body" in item else None,
        content_type=item.get("content_type"),
        chunks=tuple(_bytes(chunk) for chunk in item["chunks"]) if "chunks" in item else None,
        delay=float(item.get("delay", 0)),
        chunk_delay=float(item.get("chunk_delay", 0)),
        chunk_size=item.get("chunk_size", DEFAULT_CHUNK_SIZE),
        drop_after=item.get("drop_after"),
        stall_after=item.get("stall_after"),
        stream_error=item.get("stream_error"),
        truncate=item.get("truncate", False),
        item=item,
    )


def _scripted_call(call: Mapping[str, Any], new_call_id: Callable[[], str]) -> ScriptedCall:
    arguments = call.get("arguments", {})
    if isinstance(arguments, str):
        text, parsed = arguments, _json_object(arguments)
    else:
        text, parsed = json.dumps(arguments, ensure_ascii=False), dict(arguments)
    return ScriptedCall(call.get("id") or new_call_id(), call["name"], text, parsed, call)


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _usage(
    given: Mapping[str, Any],
    recorded: Recorded,
    text: str,
    reasoning: str | None,
    calls: tuple[ScriptedCall, ...],
) -> Usage:
    reply_chars = len(text) + len(reasoning or "") + sum(len(c.name) + len(c.arguments) for c in calls)
    return Usage.of(
        input_tokens=given.get("input_tokens", len(recorded.raw) // 4),
        output_tokens=given.get("output_tokens", reply_chars // 4),
        cache_read_tokens=given.get("cache_read_tokens", 0),
        cache_write_tokens=given.get("cache_write_tokens", 0),
        total_tokens=given.get("total_tokens"),
    )


def _raw_body(body: str | bytes | dict[str, Any] | list[Any]) -> bytes:
    if isinstance(body, (dict, list)):
        return json.dumps(body).encode()
    return _bytes(body)


def _bytes(chunk: str | bytes) -> bytes:
    return chunk.encode() if isinstance(chunk, str) else chunk
