"""The HTTP transport of `llm.py`: one shared `requests` session whose sockets can be cut.

    with Call(cancel) as call:
        response = call.post(url, body, headers, timeout_s)
        for chunk in call.chunks(response): ...

Cancellation closes the connection from the controlling thread (socket shutdown), which
wakes a blocking read at once; no polling. Only `llm.py` imports this module, and it is the
only place (with llm.py) where `requests` / `urllib3` are imported — lazily, on first use.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ._utils.cancel import Signal

_CHUNK = 65536
_local = threading.local()
_session: Any = None
_session_lock = threading.Lock()


class Call:
    """One HTTP exchange that `cancel` can cut at any moment."""

    def __init__(self, cancel: Signal | None) -> None:
        self.cancel = cancel
        self.sockets: list[socket.socket] = []
        self.aborted = False
        self._lock = threading.Lock()
        self._unlisten: Callable[[], None] | None = None
        self.response: Any = None

    def __enter__(self) -> Call:
        _local.call = self
        if self.cancel is not None:
            self._unlisten = self.cancel.on_set(self.abort)
        return self

    def __exit__(self, *exc: object) -> None:
        _local.call = None
        if self._unlisten is not None:
            self._unlisten()
        if self.response is not None:
            self.response.close()

    def track(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with self._lock:
            if sock not in self.sockets:
                self.sockets.append(sock)
            aborted = self.aborted
        if aborted:
            _shutdown(sock)

    def abort(self) -> None:
        with self._lock:
            self.aborted = True
            sockets = list(self.sockets)
        response = self.response
        if response is not None:
            connection = getattr(getattr(response, "raw", None), "connection", None)
            sock = getattr(connection, "sock", None)
            if sock is not None:
                sockets.append(sock)
        for sock in sockets:
            _shutdown(sock)

    def post(self, url: str, body: bytes, headers: dict[str, str], timeout_s: float | None) -> Any:
        self.response = session().post(
            url, data=body, headers=headers, stream=True, timeout=(timeout_s, timeout_s), allow_redirects=False
        )
        if self.aborted:
            self.abort()
        return self.response

    def chunks(self, response: Any) -> Iterator[bytes]:
        """Body bytes as they arrive (one socket read each), until the server ends the body."""
        raw = response.raw
        read1 = getattr(raw, "read1", None)
        while True:
            data = read1(_CHUNK) if read1 is not None else raw.read(_CHUNK)
            if not data:
                return
            yield data


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def session() -> Any:
    global _session
    if _session is None:
        with _session_lock:
            if _session is None:
                _session = _new_session()
    return _session


def _new_session() -> Any:
    import requests

    adapter = _tracked_adapter_class()(pool_connections=16, pool_maxsize=64)
    s = requests.Session()
    s.mount("http://", adapter)
    s.mount("https://", adapter)
    s.headers.update({"User-Agent": "agentcore", "Accept-Encoding": "identity"})
    return s


def _tracked_adapter_class() -> Any:
    """An HTTPAdapter whose connections tell the current `Call` about their socket."""
    from requests.adapters import HTTPAdapter
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    def track(conn: Any) -> None:
        call = getattr(_local, "call", None)
        if call is not None:
            call.track(getattr(conn, "sock", None))

    class TrackedHTTPConnection(HTTPConnection):  # type: ignore[misc]
        def connect(self) -> None:
            super().connect()
            track(self)

        def request(self, *args: Any, **kwargs: Any) -> Any:
            track(self)
            return super().request(*args, **kwargs)

    class TrackedHTTPSConnection(HTTPSConnection):  # type: ignore[misc]
        def connect(self) -> None:
            super().connect()
            track(self)

        def request(self, *args: Any, **kwargs: Any) -> Any:
            track(self)
            return super().request(*args, **kwargs)

    class TrackedHTTPPool(HTTPConnectionPool):  # type: ignore[misc]
        ConnectionCls = TrackedHTTPConnection

    class TrackedHTTPSPool(HTTPSConnectionPool):  # type: ignore[misc]
        ConnectionCls = TrackedHTTPSConnection

    class TrackedAdapter(HTTPAdapter):  # type: ignore[misc]
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {"http": TrackedHTTPPool, "https": TrackedHTTPSPool}

    return TrackedAdapter
