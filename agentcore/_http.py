"""The HTTP transport of `llm.py`: one shared `requests` session whose sockets can be cut.

    with Call(cancel) as call:
        response = call.post(url, body, headers, timeout_s)
        for chunk in call.chunks(response): ...

Cancellation closes the connection from the controlling thread (socket shutdown), which
wakes a blocking read at once; no polling. A call may cut only a connection it still owns:
ownership passes to a call when it sends on the connection and ends when the pool takes the
connection back, so a late cancel never cuts another call that reuses it. Only `llm.py`
imports this module, and it is the only place (with llm.py) where `requests` / `urllib3` are
imported — lazily, on first use.
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
# Guards every connection's `agentcore_call` (its owner), so that a cancel cannot cut a
# connection between the pool handing it to another call and that call owning it.
_owners = threading.Lock()


class Call:
    """One HTTP exchange that `cancel` can cut at any moment."""

    def __init__(self, cancel: Signal | None) -> None:
        self.cancel = cancel
        self.connections: list[Any] = []
        self.aborted = False
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

    def track(self, conn: Any) -> None:
        """Own `conn` (a urllib3 connection this call sends on); cut it at once if already aborted."""
        with _owners:
            conn.agentcore_call = self
            if conn not in self.connections:
                self.connections.append(conn)
            if self.aborted:
                _shutdown(getattr(conn, "sock", None))

    def abort(self) -> None:
        """Cut every connection this call still owns (a socket shutdown wakes a blocked read)."""
        response = self.response
        connection = getattr(getattr(response, "raw", None), "connection", None)
        with _owners:
            self.aborted = True
            for conn in [*self.connections, connection]:
                if conn is not None and getattr(conn, "agentcore_call", None) is self:
                    _shutdown(getattr(conn, "sock", None))

    def post(self, url: str, body: bytes, headers: dict[str, str], timeout_s: float | None) -> Any:
        timeout = (timeout_s, timeout_s)
        self.response = session().post(
            url, data=body, headers=headers, stream=True, timeout=timeout, allow_redirects=False
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


def _shutdown(sock: socket.socket | None) -> None:
    if sock is None:
        return
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
            call.track(conn)

    def disown(conn: Any) -> None:
        if conn is not None:
            with _owners:
                conn.agentcore_call = None

    class Tracked:
        """Mixed into urllib3's connections: each send tells the current Call its socket."""

        def connect(self) -> None:
            super().connect()  # type: ignore[misc]
            track(self)

        def request(self, *args: Any, **kwargs: Any) -> Any:
            track(self)
            return super().request(*args, **kwargs)  # type: ignore[misc]

    class Returned:
        """Mixed into the pools: a connection back in the pool belongs to no call until the next send."""

        def _put_conn(self, conn: Any) -> None:
            disown(conn)
            super()._put_conn(conn)  # type: ignore[misc]

    class TrackedHTTPConnection(Tracked, HTTPConnection):  # type: ignore[misc]
        pass

    class TrackedHTTPSConnection(Tracked, HTTPSConnection):  # type: ignore[misc]
        pass

    class TrackedHTTPPool(Returned, HTTPConnectionPool):  # type: ignore[misc]
        ConnectionCls = TrackedHTTPConnection

    class TrackedHTTPSPool(Returned, HTTPSConnectionPool):  # type: ignore[misc]
        ConnectionCls = TrackedHTTPSConnection

    class TrackedAdapter(HTTPAdapter):  # type: ignore[misc]
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {"http": TrackedHTTPPool, "https": TrackedHTTPSPool}

    return TrackedAdapter
