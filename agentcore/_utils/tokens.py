"""Token estimates without a tokenizer: characters × a tokens-per-character ratio.

    ratio = ratios.get(("chat", base_url, model))     # 0.6 until a real sample arrives
    tokens = estimate(chars, ratio)
    ratios.learn(("chat", base_url, model), chars, usage.input_tokens)

The ratio is learned per (protocol, base_url, model) from the real `usage.input_tokens` of
each request, so the estimate follows whatever tokenizer the server really uses. The context
size a server names in an overflow error is remembered under the same key (`limits`), and
caps the budget of later requests to that model:

    limits.learn(("chat", base_url, model), 8192)
    limits.budget(("chat", base_url, model), max_context_tokens)   # min of the two
"""

from __future__ import annotations

import json
import threading
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

DEFAULT_RATIO = 0.6
MIN_RATIO, MAX_RATIO = 0.1, 2.0
SMOOTHING = 0.3
MAX_DEVIATION = 3.0
MIN_SAMPLE_CHARS = 200
# A media part costs tokens, not characters: count it as a fixed amount of text.
MEDIA_CHARS = 1500


class Ratios:
    """Process-wide learned ratios, keyed by (protocol, base_url, model)."""

    def __init__(self) -> None:
        self._ratios: dict[Hashable, float] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> float:
        return self._ratios.get(key, DEFAULT_RATIO)

    def learn(self, key: Hashable, chars: int, input_tokens: int) -> None:
        """Fold one real sample in. Tiny payloads and samples over 3× off are ignored."""
        if chars < MIN_SAMPLE_CHARS or input_tokens <= 0:
            return
        sample = _clamp(input_tokens / chars)
        with self._lock:
            current = self._ratios.get(key)
            if current is None:
                self._ratios[key] = sample
                return
            if sample > current * MAX_DEVIATION or sample < current / MAX_DEVIATION:
                return
            self._ratios[key] = _clamp(current * (1 - SMOOTHING) + sample * SMOOTHING)

    def clear(self) -> None:
        with self._lock:
            self._ratios.clear()


ratios = Ratios()


class Limits:
    """Process-wide context sizes that servers named in overflow errors, keyed like `Ratios`."""

    def __init__(self) -> None:
        self._limits: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> int | None:
        return self._limits.get(key)

    def learn(self, key: Hashable, tokens: int | None) -> None:
        """Remember the latest limit the server named (a server restarted with another context
        size names the new one)."""
        if tokens is None or tokens <= 0:
            return
        with self._lock:
            self._limits[key] = tokens

    def budget(self, key: Hashable, configured: float) -> float:
        """`configured` (max_context_tokens), or the learned limit when that is smaller."""
        learned = self._limits.get(key)
        return configured if learned is None else min(configured, float(learned))

    def clear(self) -> None:
        with self._lock:
            self._limits.clear()


limits = Limits()


def estimate(chars: int, ratio: float | None = None) -> int:
    return int(chars * (DEFAULT_RATIO if ratio is None else ratio) + 0.5)


def _clamp(ratio: float) -> float:
    return min(MAX_RATIO, max(MIN_RATIO, ratio))


def message_chars(message: Mapping[str, Any]) -> int:
    return _content_chars(message.get("content")) + 4


def messages_chars(messages: Iterable[Mapping[str, Any]]) -> int:
    """The characters of `messages`. A request's are counted once per turn, where it is folded
    (fold.py), and kept with the fold: only what a request adds is counted again."""
    return sum(map(message_chars, messages))


def tools_chars(tools: Iterable[Mapping[str, Any]] | None) -> int:
    if not tools:
        return 0
    return sum(len(json.dumps(t, ensure_ascii=False, default=str)) for t in tools)


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if not isinstance(content, list):
        return 0
    return sum(_part_chars(p) for p in content if isinstance(p, Mapping))


def _part_chars(part: Mapping[str, Any]) -> int:
    kind = part.get("type")
    if kind in ("text", "reasoning"):
        return len(part.get("text") or "")
    if kind in ("image", "file"):
        return MEDIA_CHARS
    if kind == "tool-call":
        return len(str(part.get("tool_name", ""))) + len(
            json.dumps(part.get("input", {}), ensure_ascii=False)
        )
    if kind == "tool-result":
        output = part.get("output") or {}
        value = output.get("value")
        if isinstance(value, str):
            return len(value) + 16
        if output.get("type") == "content":
            return _content_chars(value) + 16
        return len(json.dumps(value, ensure_ascii=False, default=str)) + 16
    return 0
