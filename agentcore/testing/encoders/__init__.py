"""Wire encoders of the scripted model server, one module per protocol.

    protocol = protocol_for("/v1/chat/completions")   # "chat", or None for an unknown path
    encoder = get(protocol)                            # the module, or None when not written yet
    if encoder.is_stream(recorded): chunks = encoder.encode_stream(reply, recorded)

A protocol is added by writing `encoders/<protocol>.py` with the functions of `Encoder`
(and, optionally, `EXTRA_KEYS`: the script item keys it reads from `reply.item`); the server
and the registry need no change. `encode_stream` honours `reply.truncate` (stop before the
finish event and the terminator) and `reply.stream_error` (after the content, an in-stream
error event, then stop); the server applies delays, `drop_after` and `stall_after`.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from types import ModuleType
from typing import Any, Protocol, cast

from ...config import PROTOCOLS
from ..script import Recorded, Reply

_SUFFIXES = (
    ("/chat/completions", "chat"),
    ("/responses", "responses"),
    ("/messages", "anthropic"),
    (":generateContent", "gemini"),
    (":streamGenerateContent", "gemini"),
)


class Encoder(Protocol):
    """What a protocol module provides. All functions are pure and cheap."""

    def is_stream(self, request: Recorded) -> bool:
        """Whether the request asks for a streamed (SSE) reply."""
        ...

    def encode_json(self, reply: Reply, request: Recorded) -> tuple[int, dict[str, str], dict[str, Any]]:
        """A non-streamed reply: (status, extra headers, body)."""
        ...

    def encode_stream(self, reply: Reply, request: Recorded) -> Iterator[bytes]:
        """A streamed reply: raw SSE chunks, one event each, terminator included."""
        ...

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """The vendor's error body for an HTTP error carrying `message`."""
        ...

    def overflow_body(self) -> dict[str, Any]:
        """The vendor's 400 body for a context-length overflow."""
        ...


def protocol_for(path: str) -> str | None:
    """The protocol served at `path` (no query string), or None."""
    for suffix, protocol in _SUFFIXES:
        if path.endswith(suffix):
            return protocol
    return None


def get(protocol: str) -> Encoder | None:
    """The encoder module of `protocol`, or None when it does not exist (yet)."""
    module = _load(protocol)
    return cast(Encoder, module) if module is not None else None


def extra_keys() -> frozenset[str]:
    """Script item keys that the available encoders read besides the common ones."""
    keys: set[str] = set()
    for protocol in PROTOCOLS:
        module = _load(protocol)
        keys.update(getattr(module, "EXTRA_KEYS", ()))
    return frozenset(keys)


def _load(protocol: str) -> ModuleType | None:
    if protocol not in PROTOCOLS:
        return None
    name = f"{__name__}.{protocol}"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        # Only "this protocol has no encoder yet"; a broken import inside one still raises.
        if exc.name != name:
            raise
        return None


# ---------------------------------------------------------------- helpers for encoders


def wire_json(value: Any, separators: tuple[str, str] | None = None) -> str:
    """JSON text as servers send it: UTF-8 as is, and a lone surrogate (a script's "caf\\ud83d")
    as its `\\ud83d` escape, which UTF-8 cannot carry otherwise — what a real server's JSON does."""
    text = json.dumps(value, ensure_ascii=False, separators=separators)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, separators=separators)
    return text


def sse(data: dict[str, Any] | str, event: str | None = None, newline: str = "\n") -> bytes:
    """One SSE event: `event: <event>` (when given) and `data: <compact JSON>`, then a blank line."""
    text = data if isinstance(data, str) else wire_json(data, separators=(",", ":"))
    head = f"event: {event}{newline}" if event is not None else ""
    return f"{head}data: {text}{newline}{newline}".encode()
