"""A tool returning an image: a `content` output block with text and image parts."""

import base64
import struct
import zlib

from agentcore import tool


def tiny_png(width: int = 2, height: int = 2) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@tool
def screenshot() -> dict:
    """Take a screenshot of the screen."""
    png = base64.b64encode(tiny_png()).decode()
    return {
        "output": {
            "type": "content",
            "value": [
                {"type": "text", "text": "The current screen:"},
                {"type": "image", "image": png, "media_type": "image/png"},
            ],
        }
    }
