"""Text that cannot be encoded: lone surrogates (U+D800–U+DFFF) inside JSON values.

    problem = first(input)                  # "a lone surrogate U+DCFF at character 7", or None
    value = replaced(value, "the result of tool 'ls'")   # U+FFFD instead, with a WARNING

A Python str can hold the code points U+D800–U+DFFF — `os.listdir()` returns them for file
names that are not UTF-8, `json.loads` for JSON's `"\\ud83d"` half of an emoji — but UTF-8
cannot encode them, so one written to history would fail every later request. Callers'
input is refused (`first`); anything else on its way into history is cleaned (`replaced`).
"""

from __future__ import annotations

import logging
import re
from typing import Any, TypeVar

log = logging.getLogger("agentcore")

REPLACEMENT = "\ufffd"
SURROGATE = re.compile("[\ud800-\udfff]")
T = TypeVar("T")


def count(value: Any) -> int:
    """How many lone surrogates the strings of a JSON value hold (keys included)."""
    if isinstance(value, str):
        return 0 if value.isascii() else len(SURROGATE.findall(value))
    if isinstance(value, dict):
        return sum(count(k) + count(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return sum(count(item) for item in value)
    return 0


def fixed(value: T) -> T:
    """A copy of `value` with each lone surrogate replaced by U+FFFD (`value` itself when clean)."""
    result: Any = value
    if isinstance(value, str):
        result = value if value.isascii() else SURROGATE.sub(REPLACEMENT, value)
    elif isinstance(value, dict) and count(value):
        result = {fixed(k): fixed(v) for k, v in value.items()}
    elif isinstance(value, (list, tuple)) and count(value):
        result = type(value)(fixed(item) for item in value)
    return result  # type: ignore[no-any-return]


def replaced(value: T, where: str) -> T:
    """`fixed(value)`, logging a WARNING that names `where` when something was replaced."""
    found = count(value)
    if not found:
        return value
    warn(where, found)
    return fixed(value)


def warn(where: str, found: int, done: str = "replaced by U+FFFD") -> None:
    plural = "" if found == 1 else "s"
    log.warning("%s held %d lone surrogate%s (text UTF-8 cannot encode); %s", where, found, plural, done)


def first(value: Any, path: str = "") -> str | None:
    """Where the first lone surrogate of a JSON value is, in words; None when there is none."""
    if isinstance(value, str):
        match = None if value.isascii() else SURROGATE.search(value)
        if match is None:
            return None
        where = f" in {path}" if path else ""
        return f"a lone surrogate U+{ord(match.group()):04X} at character {match.start()}{where}"
    if isinstance(value, dict):
        for key, item in value.items():
            found = first(key, f"a key of {path or 'it'}") or first(item, f"{path}[{key!r}]")
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = first(item, f"{path}[{index}]")
            if found:
                return found
    return None


def sub_text(text: str) -> tuple[str, int]:
    """Encoded JSON text (or any text) with its lone surrogates replaced, and how many there were."""
    return SURROGATE.subn(REPLACEMENT, text)
