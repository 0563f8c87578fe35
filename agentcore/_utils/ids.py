"""Random ids in the form `uuid.uuid4().hex` has, without importing `uuid`.

    random_hex()  # "3f0c9a4e1b7d4c2a9e8f6d5c4b3a2910": 32 hex digits, a version-4 UUID

`uuid` pulls in `platform` on import, which costs more than the rest of an id's needs put together.
"""

from __future__ import annotations

import os


def random_hex() -> str:
    """A new random (version 4, RFC 4122 variant) UUID as 32 lowercase hex digits."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    return raw.hex()
