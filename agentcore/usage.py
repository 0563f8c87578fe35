"""Token counts of one request or of a whole send.

`input_tokens` counts every prompt token, cached ones included, so
`cache_read_tokens / input_tokens` is the cache hit rate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(Usage)))

    def add(self, other: Usage) -> None:
        """Add `other` into this one in place."""
        for f in fields(Usage):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def to_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(Usage)}

    @classmethod
    def of(
        cls,
        input_tokens: object = 0,
        output_tokens: object = 0,
        cache_read_tokens: object = 0,
        cache_write_tokens: object = 0,
        total_tokens: object = None,
    ) -> Usage:
        """Build from wire values, treating None and junk as 0; total defaults to input + output."""
        i, o = _int(input_tokens), _int(output_tokens)
        total = _int(total_tokens) if total_tokens is not None else i + o
        return cls(i, o, total or i + o, _int(cache_read_tokens), _int(cache_write_tokens))


def total(history: Iterable[Mapping[str, Any]]) -> Usage:
    """Everything a conversation used: each entry's own `usage` (assistant replies, compact
    messages) and each tool message's `sub_agent_usage` (its sub-agent runs, nested included)."""
    summed = Usage()
    for entry in history:
        for key in ("usage", "sub_agent_usage"):
            value = entry.get(key) if isinstance(entry, Mapping) else None
            if isinstance(value, Mapping):
                summed.add(Usage.of(**{k: v for k, v in value.items() if k in _FIELDS}))
    return summed


_FIELDS = frozenset(f.name for f in fields(Usage))


def _int(value: object) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value == value:
        return int(value)
    return 0
