"""Token counts of one request or of a whole send, and what they cost.

    total(history)                      # Usage of everything a conversation used
    cost(history, prices)               # in currency units, from config["prices"]; None if unpriced

`input_tokens` counts every prompt token, cached ones included, so
`cache_read_tokens / input_tokens` is the cache hit rate (and the uncached part of a prompt is
`input_tokens - cache_read_tokens - cache_write_tokens`).
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

    def __sub__(self, other: Usage) -> Usage:
        return Usage(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(Usage)))

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
    messages) and `retried_usage` (failed attempts of the round that reported usage), and each
    tool message's `sub_agent_usage` (its sub-agent runs, nested included)."""
    summed = Usage()
    for entry in history:
        for key in ("usage", "retried_usage", "sub_agent_usage"):
            value = entry.get(key) if isinstance(entry, Mapping) else None
            if isinstance(value, Mapping):
                summed.add(of_dict(value))
    return summed


def of_dict(value: Mapping[str, Any]) -> Usage:
    """A `Usage` from a stored usage dict (unknown keys ignored, junk counted as 0)."""
    return Usage.of(**{k: v for k, v in value.items() if k in _FIELDS})


def by_model(history: Iterable[Mapping[str, Any]]) -> dict[str | None, Usage]:
    """What `total` sums, per model: an entry's `model` names who used its `usage`; a tool
    message's `sub_agent_spend["models"]` splits its sub-agent runs by model. Usage whose model
    is not recorded (entries written before models were, a hand-made history) is under None."""
    split: dict[str | None, Usage] = {}

    def add(model: Any, value: Any) -> None:
        if isinstance(value, Mapping):
            key = model if isinstance(model, str) and model else None
            split.setdefault(key, Usage()).add(of_dict(value))

    for entry in history:
        if not isinstance(entry, Mapping):
            continue
        add(entry.get("model"), entry.get("usage"))
        add(entry.get("model"), entry.get("retried_usage"))
        spend = entry.get("sub_agent_spend")
        models = spend.get("models") if isinstance(spend, Mapping) else None
        if isinstance(models, Mapping):
            for model, value in models.items():
                add(model, value)
        else:
            add(None, entry.get("sub_agent_usage"))
    return split


def cost(history: Iterable[Mapping[str, Any]], prices: Mapping[str, Mapping[str, float]]) -> float | None:
    """What a conversation cost, from `prices` (`config["prices"]`: per model, currency units
    per million tokens of `input`, `output`, `cache_read`, `cache_write`; cache prices default to
    the input price). None when some usage has no price: its model is not in `prices`, or the
    history does not say which model used it."""
    return priced(by_model(history), prices)


def priced(split: Mapping[str | None, Usage], prices: Mapping[str, Mapping[str, float]]) -> float | None:
    """The cost of usage split by model (`by_model`); None when one with tokens has no price."""
    summed = 0.0
    for model, usage in split.items():
        if not any(usage.to_dict().values()):
            continue
        price = prices.get(model) if model is not None else None
        if price is None:
            return None
        summed += price_of(usage, price)
    return summed


def price_of(usage: Usage, price: Mapping[str, float]) -> float:
    """The cost of `usage` at one model's `price` (per million tokens)."""
    read = usage.cache_read_tokens
    write = usage.cache_write_tokens
    uncached = max(0, usage.input_tokens - read - write)
    per_input = float(price["input"])
    per_read = float(price.get("cache_read", per_input))
    per_write = float(price.get("cache_write", per_input))
    per_output = float(price["output"])
    units = uncached * per_input + read * per_read + write * per_write + usage.output_tokens * per_output
    return units / 1_000_000


_FIELDS = frozenset(f.name for f in fields(Usage))


def _int(value: object) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value == value:
        return int(value)
    return 0
