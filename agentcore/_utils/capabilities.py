"""What a model can take: the capability switches and which one a content part needs.

DEFAULT_CAPABILITIES["image"]          # True
media_kind({"type": "file", "media_type": "audio/wav"})   # "audio"
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULT_CAPABILITIES: dict[str, bool] = {
    "image": True,
    "audio": True,
    "video": True,
    "file": True,
    "tools": True,
    "structured_output": True,
    "tool_choice": True,
    "reasoning": False,
    "usage": True,
}


def media_kind(part: Mapping[str, Any]) -> str | None:
    """Which capability a content part needs: image / audio / video / file, or None for text."""
    kind = part.get("type")
    if kind == "image":
        return "image"
    if kind == "file":
        media_type = str(part.get("media_type") or "")
        if media_type.startswith("image/"):
            return "image"
        if media_type.startswith("audio/"):
            return "audio"
        if media_type.startswith("video/"):
            return "video"
        return "file"
    return None
