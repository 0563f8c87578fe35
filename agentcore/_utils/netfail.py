"""A failed connection in one line a person can act on: the address and the cause.

    describe(exc, "http://127.0.0.1:9/v1/chat/completions")
    # "cannot connect to 127.0.0.1:9: connection refused"

`requests` wraps the socket's error in urllib3's (whose text names the pool and connection
classes and repeats itself); what matters is at the bottom of the chain. Stdlib only: urllib3's
classes are recognised by name, so this module imports nothing of it.
"""

from __future__ import annotations

import errno
import socket
import ssl
from collections.abc import Iterator
from urllib.parse import urlsplit

# urllib3 / requests classes whose presence means "the connection was never made".
_CONNECT_FAILURES = ("NewConnectionError", "NameResolutionError", "ConnectTimeoutError", "ConnectTimeout")


def describe(exc: BaseException, url: str) -> str:
    """`cannot connect to HOST:PORT: CAUSE`, or `the connection to HOST:PORT failed: CAUSE`."""
    chain = list(_chain(exc))
    cause, connecting = _cause(chain)
    address = _address(url)
    if connecting:
        return f"cannot connect to {address}: {cause}"
    return f"the connection to {address} failed: {cause}"


def _cause(chain: list[BaseException]) -> tuple[str, bool]:
    """The cause in words, and whether it happened while connecting."""
    names = {type(e).__name__ for e in chain}
    connecting = bool(names & set(_CONNECT_FAILURES))
    for e in chain:
        if isinstance(e, socket.gaierror) or type(e).__name__ == "NameResolutionError":
            return "unknown host (the name does not resolve)", True
    for e in chain:
        if isinstance(e, ConnectionRefusedError) or getattr(e, "errno", None) == errno.ECONNREFUSED:
            return "connection refused", True
        if isinstance(e, ssl.SSLCertVerificationError):
            return f"the TLS certificate is not trusted ({e.verify_message})", True
        if isinstance(e, ssl.SSLError):
            return f"TLS failed ({e.reason or e.strerror or e})", connecting
    if names & {"ConnectTimeoutError", "ConnectTimeout"}:
        return "timed out", True
    for e in chain:
        if isinstance(e, ConnectionResetError):
            return "the connection was reset", connecting
        if type(e).__name__ == "RemoteDisconnected":
            return "the server closed the connection without answering", False
        if type(e).__name__ in ("IncompleteRead", "InvalidChunkLength", "ChunkedEncodingError"):
            return "the server closed the connection in the middle of its reply", False
        if isinstance(e, TimeoutError) or "Timeout" in type(e).__name__:
            return "timed out", connecting
    for e in reversed(chain):
        if isinstance(e, OSError) and e.strerror:
            return e.strerror[0].lower() + e.strerror[1:], connecting
    return _last_line(chain[-1]), connecting


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception and everything it wraps, outermost first (urllib3's `reason`, args, causes)."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        inner = [getattr(current, "reason", None), current.__cause__, current.__context__, *current.args]
        todo += [e for e in inner if isinstance(e, BaseException)]


def _address(url: str) -> str:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    host = parts.hostname or url
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _last_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__
