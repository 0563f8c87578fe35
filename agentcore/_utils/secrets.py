"""Keep configured keys out of messages, bodies, logs and reprs.

    text = redact(text, ["sk-live-123"])

A server may echo the key back in an error body; everything that leaves the HTTP layer
as text passes through here first.
"""

from __future__ import annotations

from collections.abc import Iterable

MASK = "***"


def redact(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4 and secret in text:
            text = text.replace(secret, MASK)
    return text


def mask(secret: str) -> str:
    """How a key is shown in a repr: never any of its characters."""
    return MASK if secret else ""
