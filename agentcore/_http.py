"""The HTTP transport of `llm.py`: one shared `requests` session whose sockets can be cut.

    with Call(cancel) as call:
        response = call.post(url, body, headers, timeout_s)
        for chunk in call.chunks(response, idle_s): ...

Cancellation shuts the TCP socket down from the controlling thread, which wakes a blocked
connect, send or read at once in every phase; no polling. A call holds a duplicate of each
socket it uses (`os.dup`), taken the moment the socket exists — before `connect()`, before a
TLS handshake. Shutdown acts on the socket, not on one descriptor, so the duplicate cuts it
whoever holds it by then: the urllib3 connection, or (after `Connection: close`, HTTP/1.0
bodies ended by close) the `http.client` response that took it over. The duplicate is closed
when the connection goes back to the pool and when the call ends, so a late cancel never cuts
another call that reuses the connection. Only `llm.py` imports this module, and it is the only
place (with llm.py) where `requests` / `urllib3` are imported — lazily, on first use.

A pooled connection the server closed just as the request went out (it said keep-alive, then
hung up after its reply) fails before any byte of a response: that request is sent again at
once, once, on a new connection — no retry, no backoff (`Call.post`). A failure after a response
byte, on a new connection, or by a cancel or a timeout is never resent here.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ._utils.cancel import Signal

log = logging.getLogger("agentcore")
_CHUNK = 65536
_local = threading.local()
_session: Any = None
_session_lock = threading.Lock()
# Guards every call's duplicates and every connection's owner, so that a cancel cannot cut a
# connection between the pool handing it to another call and that call owning it.
_owners = threading.Lock()


class Call:
    """One HTTP exchange that `cancel` (or a stalled stream) can cut at any moment."""

    def __init__(self, cancel: Signal | None) -> None:
        self.cancel = cancel
        self.aborted = False
        self.idle_expired = False
        self.idle_s: float | None = None
        self._cuts: dict[int, socket.socket] = {}  # id(connection) -> duplicate of its socket
        self._unlisten: Callable[[], None] | None = None
        self.response: Any = None
        # Of the latest attempt: sent on a connection that had carried a request before, and
        # whether a byte of the response arrived; `resent` once a stale connection was replaced.
        self.reused = False
        self.received = False
        self.resent = False

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
        with _owners:
            cuts, self._cuts = list(self._cuts.values()), {}
        for duplicate in cuts:
            duplicate.close()

    def own(self, conn: Any, sock: socket.socket | None) -> None:
        """Hold a duplicate of `sock` (the socket `conn` is about to use); cut it at once if aborted."""
        if sock is None or sock.fileno() < 0:
            return
        duplicate = socket.socket(fileno=_dup(sock))
        with _owners:
            conn.agentcore_call = self
            previous = self._cuts.pop(id(conn), None)
            self._cuts[id(conn)] = duplicate
            if self.aborted:
                _shutdown(duplicate)
        if previous is not None:
            previous.close()

    def release(self, conn: Any) -> None:
        """`conn` went back to the pool: it is no longer this call's to cut."""
        with _owners:
            duplicate = self._cuts.pop(id(conn), None)
            if getattr(conn, "agentcore_call", None) is self:
                conn.agentcore_call = None
        if duplicate is not None:
            duplicate.close()

    def abort(self) -> None:
        """Cut every socket this call uses (a shutdown wakes a blocked connect, send or read)."""
        with _owners:
            self.aborted = True
            for duplicate in self._cuts.values():
                _shutdown(duplicate)

    def post(self, url: str, body: bytes, headers: dict[str, str], timeout_s: float | None) -> Any:
        """POST `body`; a request the server dropped on a stale pooled connection goes again, once."""
        try:
            return self._post(url, body, headers, timeout_s)
        except Exception as exc:
            if not self._stale(exc):
                raise
            log.debug("the server closed a pooled connection as the request was sent; sending it again")
        # urllib3 put the dropped connection's slot back first (its pool is a LIFO queue), so
        # the request goes out on a new connection, not on another idle one.
        self.resent = True
        return self._post(url, body, headers, timeout_s)

    def _stale(self, exc: BaseException) -> bool:
        """The attempt failed on a reused connection before any byte of a response arrived: the
        server had closed it (what urllib3's and the official SDKs' pools resend at once)."""
        import requests

        if not self.reused or self.received or self.resent or self.aborted or self.idle_expired:
            return False
        return isinstance(exc, requests.exceptions.ConnectionError) and not isinstance(
            exc, requests.exceptions.Timeout
        )

    def _post(self, url: str, body: bytes, headers: dict[str, str], timeout_s: float | None) -> Any:
        timeout = (timeout_s, timeout_s)
        s = session()
        settings = environment_settings(url)
        if s.cookies or "auth" in settings:
            # The cookie jar and netrc auth shape each request anew: requests' own whole path.
            self.response = s.post(
                url,
                data=body,
                headers=headers,
                stream=True,
                timeout=timeout,
                allow_redirects=False,
                **settings,
            )
        else:
            self.response = _send_prepared(s, _prepared(s, url, headers, body), timeout, settings)
        if self.aborted:
            self.abort()
        return self.response

    def chunks(self, response: Any, idle_s: float | None = None) -> Iterator[bytes]:
        """Body bytes as they arrive (one socket read each), until the server ends the body.

        With `idle_s`, a body that delivers no byte for that long is cut and `idle_expired` set.
        """
        raw = response.raw
        read1 = getattr(raw, "read1", None)
        direct = _direct_read1(raw)
        self.idle_s = idle_s
        watch = _IdleWatch(idle_s, self._expire) if idle_s is not None else None
        try:
            while True:
                if direct is not None:
                    try:
                        data = direct(_CHUNK)
                    except Exception:
                        with raw._error_catcher():  # urllib3's own errors and clean-up for it
                            raise
                    if not data:
                        direct = None
                        continue  # urllib3 reads the end itself: it closes and frees the connection
                else:
                    # Decoded: a server may compress although asked for `identity`.
                    read = read1 if read1 is not None else raw.read
                    data = read(_CHUNK, decode_content=True)
                if not data:
                    return
                if watch is not None:
                    watch.touch()
                yield data
        finally:
            if watch is not None:
                watch.stop()

    def _expire(self) -> None:
        with _owners:
            self.idle_expired = True
            for duplicate in self._cuts.values():
                _shutdown(duplicate)


def _direct_read1(raw: Any) -> Callable[[int], bytes] | None:
    """`read1` of the `http.client` response under urllib3's, when urllib3 would add nothing to it.

    urllib3 wraps every read in its error catcher and its decoder; for a body with no content
    encoding and no length to count down (chunked, or ended by close: every SSE stream seen)
    that is all it does besides noticing the end, which it is then left to read itself.
    """
    import http.client

    fp = getattr(raw, "_fp", None)
    if not isinstance(fp, http.client.HTTPResponse) or getattr(raw, "length_remaining", 0) is not None:
        return None
    if getattr(raw, "_has_decoded_content", False) or not hasattr(raw, "_error_catcher"):
        return None
    if raw.headers.get("Content-Encoding", "identity").strip().lower() not in ("", "identity"):
        return None
    return fp.read1


class _IdleWatch:
    """Calls `expire` once when `touch()` has not been called for `idle_s` seconds."""

    def __init__(self, idle_s: float, expire: Callable[[], None]) -> None:
        self._idle_s = idle_s
        self._expire = expire
        self._last = time.monotonic()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="agentcore-stream-idle", daemon=True)
        self._thread.start()

    def touch(self) -> None:
        self._last = time.monotonic()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        wait = self._idle_s
        while not self._stopped.wait(wait):
            quiet = time.monotonic() - self._last
            if quiet >= self._idle_s:
                self._expire()
                return
            wait = self._idle_s - quiet


def _dup(sock: socket.socket) -> int:
    import os

    return os.dup(sock.fileno())


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
    # What requests reads from the environment on every request (walking all of os.environ for
    # proxies, opening ~/.netrc) is read once per origin instead: `environment_settings`.
    s.trust_env = False
    return s


# Requests prepared once per (url, headers) and copied for each body: `Session.request` merges
# the session's settings, parses the URL and validates every header on every call, the same
# work each time while they keep their values. Bounded, as `_settings` is.
_templates: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}


def _prepared(s: Any, url: str, headers: dict[str, str], body: bytes) -> Any:
    """What `s.prepare_request(Request("POST", url, headers=headers, data=body))` returns, for a
    session with no cookies and no auth: the same headers, in the same order, and the same body."""
    key = (url, tuple(headers.items()))
    template = _templates.get(key)
    if template is None:
        import requests

        if len(_templates) > 256:
            _templates.clear()
        # An empty body gives `Content-Length: 0` where the real length goes, after the
        # session's and the caller's headers and before any auth in the URL.
        template = _templates[key] = s.prepare_request(
            requests.Request("POST", url, headers=headers, data=b"")
        )
    prepared = template.copy()
    prepared.body = body
    prepared.headers["Content-Length"] = str(len(body))
    return prepared


def _send_prepared(s: Any, prepared: Any, timeout: Any, settings: dict[str, Any]) -> Any:
    """`s.send(prepared, allow_redirects=False, stream=True, ...)` for a session with no hooks,
    no cookies and no proxies, verify or cert of its own (ours: `_new_session`)."""
    from datetime import timedelta

    started = time.perf_counter()
    response = s.get_adapter(prepared.url).send(
        prepared,
        stream=True,
        timeout=timeout,
        verify=settings["verify"],
        cert=None,
        proxies=settings["proxies"],
    )
    response.elapsed = timedelta(seconds=time.perf_counter() - started)
    if "set-cookie" in response.headers:
        from requests.cookies import extract_cookies_to_jar

        extract_cookies_to_jar(s.cookies, prepared, response.raw)  # type: ignore[no-untyped-call]
    return response


# The variables requests' environment settings depend on for an http(s) URL: while they keep
# their values, the settings of an origin do too. (A proxy variable in odd case, `Https_Proxy`,
# is read when an origin is first seen, but changing it later goes unnoticed.)
_ENVIRONMENT = (
    *(name for base in ("http", "https", "all", "no") for name in (f"{base}_proxy", f"{base.upper()}_PROXY")),
    *("REQUEST_METHOD", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NETRC", "HOME"),
)
_settings: dict[tuple[str, tuple[str | None, ...]], dict[str, Any]] = {}


def environment_settings(url: str) -> dict[str, Any]:
    """`proxies`, `verify` and netrc `auth` for `url`, as a `trust_env` session would compute them."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    key = (f"{parts.scheme}://{parts.netloc}", tuple(map(os.environ.get, _ENVIRONMENT)))
    found = _settings.get(key)
    if found is None:
        if len(_settings) > 256:  # a long-lived process cycling through env values stays bounded
            _settings.clear()
        found = _settings[key] = _read_environment(url)
    return found


def _read_environment(url: str) -> dict[str, Any]:
    # The same calls `Session.request` makes with trust_env (merge_environment_settings, netrc).
    from requests.utils import get_environ_proxies, get_netrc_auth

    verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or True
    settings: dict[str, Any] = {"proxies": get_environ_proxies(url), "verify": verify}
    auth = get_netrc_auth(url)
    if auth:
        settings["auth"] = auth
    return settings


def _current() -> Call | None:
    return getattr(_local, "call", None)


def _create_connection(conn: Any) -> socket.socket:
    """urllib3's `create_connection`, telling the current Call each socket before it connects."""
    from urllib3.util.connection import _set_socket_options, allowed_gai_family

    host = conn._dns_host.strip("[]")
    error: OSError | None = None
    for family, kind, proto, _, address in socket.getaddrinfo(
        host, conn.port, allowed_gai_family(), socket.SOCK_STREAM
    ):
        sock = socket.socket(family, kind, proto)
        try:
            _set_socket_options(sock, conn.socket_options)
            if not _is_default_timeout(conn.timeout):
                sock.settimeout(conn.timeout)
            if conn.source_address:
                sock.bind(conn.source_address)
            call = _current()
            if call is not None:
                call.own(conn, sock)
            sock.connect(address)
            return sock
        except OSError as exc:
            error = exc
            sock.close()
    raise error or OSError("getaddrinfo returns an empty list")


def _is_default_timeout(value: Any) -> bool:
    """urllib3 2 marks "no timeout given" with its own sentinel, urllib3 1.26 with the socket module's."""
    import urllib3.util.timeout

    sentinel = getattr(urllib3.util.timeout, "_DEFAULT_TIMEOUT", None)  # absent in urllib3 1.26
    return value is sentinel or value is socket._GLOBAL_DEFAULT_TIMEOUT  # type: ignore[attr-defined]


def _starting(conn: Any) -> None:
    """`conn` is about to send a request: the current Call owns its socket and learns whether
    that socket already carried a request (`agentcore_served`, reset by each new socket)."""
    call = _current()
    if call is None:
        return
    sock = getattr(conn, "sock", None)
    call.own(conn, sock)
    call.reused = sock is not None and getattr(conn, "agentcore_served", 0) > 0
    call.received = False


@functools.lru_cache(maxsize=1)
def _response_class() -> Any:
    """http.client's response, telling the current Call when the first byte of a response arrived."""
    import http.client

    class FirstByte(http.client.HTTPResponse):
        def begin(self) -> None:
            call = _current()
            if self.headers is None and call is not None:
                # peek() takes nothing from the stream: the status line is read as usual.
                if not self.fp.peek(1):
                    raise http.client.RemoteDisconnected("Remote end closed connection without response")
                call.received = True
            super().begin()

    return FirstByte


def _tracked_adapter_class() -> Any:
    """An HTTPAdapter whose pools hold tracked connections (`_tracked_pool_classes`)."""
    from requests.adapters import HTTPAdapter

    http_pool, https_pool = _tracked_pool_classes()

    class TrackedAdapter(HTTPAdapter):  # type: ignore[misc]
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {"http": http_pool, "https": https_pool}

        def build_response(self, req: Any, resp: Any) -> Any:
            """requests' own (made to be overridden), without the cookie parsing when none is set.

            Extracting cookies builds mock request and response objects for `http.cookiejar`
            on every reply; a reply without a Set-Cookie header has nothing to extract.
            (`tests/test_http_prepared.py` checks the two builds give the same Response.)
            """
            headers = getattr(resp, "headers", None)
            if headers is None or "set-cookie" in headers or "set-cookie2" in headers:
                return super().build_response(req, resp)
            return _plain_response(self, req, resp, headers)

    return TrackedAdapter


def _plain_response(adapter: Any, req: Any, resp: Any, headers: Any) -> Any:
    """What `HTTPAdapter.build_response` makes of a reply that sets no cookie."""
    from requests.models import Response
    from requests.structures import CaseInsensitiveDict
    from requests.utils import get_encoding_from_headers

    response = Response()
    response.status_code = getattr(resp, "status", None)  # type: ignore[assignment]  # as requests does
    response.headers = CaseInsensitiveDict(headers)
    response.encoding = get_encoding_from_headers(response.headers)
    response.raw = resp
    response.reason = resp.reason
    response.url = req.url.decode("utf-8") if isinstance(req.url, bytes) else req.url
    response.request = req
    response.connection = adapter
    return response


def _tracked_pool_classes() -> tuple[Any, Any]:
    """urllib3's HTTP and HTTPS pools: their connections are tracked, and one back in the pool
    belongs to no call until the next send."""
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    http_connection, https_connection = _tracked_connection_classes()

    class Returned:
        def _put_conn(self, conn: Any) -> None:
            owner = getattr(conn, "agentcore_call", None) if conn is not None else None
            if owner is not None:
                owner.release(conn)
            super()._put_conn(conn)  # type: ignore[misc]

    class TrackedHTTPPool(Returned, HTTPConnectionPool):  # type: ignore[misc]
        ConnectionCls = http_connection

    class TrackedHTTPSPool(Returned, HTTPSConnectionPool):  # type: ignore[misc]
        ConnectionCls = https_connection

    return TrackedHTTPPool, TrackedHTTPSPool


def _tracked_connection_classes() -> tuple[Any, Any]:
    """urllib3's HTTP and HTTPS connections, every socket they use known to the current Call."""
    import urllib3.exceptions
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

    # urllib3 1.26 has no NameResolutionError: it reports a failed lookup as a NewConnectionError.
    NameResolutionError: Any = getattr(urllib3.exceptions, "NameResolutionError", None)

    class Tracked:
        host: str
        timeout: Any

        response_class = _response_class()

        def _new_conn(self) -> socket.socket:
            # urllib3's own _new_conn, with the socket handed over before connect() blocks.
            self.agentcore_served = 0
            try:
                return _create_connection(self)
            except socket.gaierror as e:
                if NameResolutionError is None:
                    raise NewConnectionError(self, f"Failed to resolve {self.host}: {e}") from e  # type: ignore[arg-type]
                raise NameResolutionError(self.host, self, e) from e  # type: ignore[arg-type]
            except TimeoutError as e:
                message = f"Connection to {self.host} timed out. (connect timeout={self.timeout})"
                raise ConnectTimeoutError(self, message) from e
            except OSError as e:
                raise NewConnectionError(self, f"Failed to establish a new connection: {e}") from e  # type: ignore[arg-type]

        def request(self, *args: Any, **kwargs: Any) -> Any:
            _starting(self)
            result = super().request(*args, **kwargs)  # type: ignore[misc]
            self.agentcore_served = getattr(self, "agentcore_served", 0) + 1
            return result

    class TrackedHTTPConnection(Tracked, HTTPConnection):  # type: ignore[misc]
        pass

    class TrackedHTTPSConnection(Tracked, HTTPSConnection):  # type: ignore[misc]
        pass

    return TrackedHTTPConnection, TrackedHTTPSConnection
