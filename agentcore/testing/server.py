"""A scripted model server on 127.0.0.1, speaking the vendors' HTTP APIs.

    with ModelServer(["Hi!", {"tool_calls": [{"name": "add", "arguments": {"a": 1}}]}]) as server:
        config = {"base_url": server.base_url, "model": "m"}
        ...
        server.requests[0]["messages"], server.log[0].headers["authorization"]

Each model request pops the next script item (items are described in docs/INTERNALS.md and
`script.py`); the request path picks the protocol encoder. The server serves from
construction until `close()`, which ends every connection, stalled ones included, and joins
every thread it started.

Real servers handle connections in ways a client must survive; the constructor options give
each of them (they combine freely):

    ModelServer(keep_alive=False)        # `Connection: close` on every response, then hang up
    ModelServer(http10=True)             # HTTP/1.0: no chunks, no lengths, bodies ended by close
    ModelServer(chunked=False)           # streams without Transfer-Encoding, ended by close
    ModelServer(content_length=False)    # plain bodies without Content-Length, ended by close
    ModelServer(tls=(certfile, keyfile)) # HTTPS (`base_url` is https://localhost:<port>/v1)
    ModelServer(event_stream_type=None)  # SSE sent with no Content-Type at all

and two script item keys act before any byte of the response: `{"stall_before_headers": True}`
(read the request, then go quiet until the client leaves) and `{"reset_before_headers": True}`
(read the request, then reset the connection). `server.stalled` is set when any scripted stall
begins, so a test can act at that moment.
"""

from __future__ import annotations

import json
import logging
import select
import socket
import socketserver
import ssl
import struct
import threading
import traceback
from collections import deque
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler
from itertools import count
from typing import Any, cast
from urllib.parse import parse_qsl, urlsplit

from . import encoders
from .script import EXHAUSTED_TEXT, Headers, Item, Recorded, Reply, build, check

logger = logging.getLogger(__name__)

_JOIN_TIMEOUT_S = 5.0
_STALL_POLL_S = 0.05
_SSE_TYPE = "text/event-stream; charset=utf-8"
# Item keys the server acts on itself (before any encoder runs).
_SERVER_KEYS = frozenset({"stall_before_headers", "reset_before_headers"})


class ModelServer:
    """A local model endpoint that answers from a script and records what it was sent.

    Attributes:
        requests: parsed JSON bodies of the model requests, in arrival order.
        log: every request received (model requests and unknown paths), as `Recorded`.
        errors: exceptions raised while building replies (each also answered with a 500).
        port: the TCP port; `base_url` is `http://127.0.0.1:<port>/v1`.
    """

    def __init__(
        self,
        script: Iterable[Item] = (),
        *,
        default: Item | None = None,
        port: int = 0,
        keep_alive: bool = True,
        http10: bool = False,
        chunked: bool = True,
        content_length: bool = True,
        tls: tuple[str, str] | ssl.SSLContext | None = None,
        event_stream_type: str | None = _SSE_TYPE,
    ) -> None:
        """Bind and start serving.

        Args:
            script: items answered in order, one per model request.
            default: the item once the script is exhausted (else the text "(script exhausted)").
            port: the port to bind (0 picks a free one).
            keep_alive: False sends `Connection: close` with every response and hangs up
                after it (the client's `http.client` then hands the socket to the response).
            http10: answer as HTTP/1.0: no chunked encoding and no Content-Length; every
                body is ended by closing the connection.
            chunked: False sends streams without Transfer-Encoding, ended by close.
            content_length: False sends plain (non-stream) bodies without Content-Length,
                ended by close.
            tls: serve HTTPS with this certificate and key (`(certfile, keyfile)`) or a
                server-side `ssl.SSLContext`; `base_url` then names host `localhost`.
            event_stream_type: the Content-Type of streams; None sends none at all.
        """
        self._extra_keys = encoders.extra_keys() | _SERVER_KEYS
        self.keep_alive = keep_alive and not http10
        self.http10 = http10
        self.chunked = chunked and not http10
        self.content_length = content_length and not http10
        self.event_stream_type = event_stream_type
        self._tls = _server_context(tls)
        self.stalled = threading.Event()
        if default is not None:
            check(default, self._extra_keys)
        self._default: Item = default if default is not None else {"text": EXHAUSTED_TEXT}
        self._script: deque[Item] = deque()
        self._lock = threading.Lock()
        self._call_ids = count(1)
        self._connections_seen = 0
        self.requests: list[Any] = []
        self.log: list[Recorded] = []
        self.errors: list[BaseException] = []
        # Exceptions raised by callable script items: close() re-raises the first.
        self._raised: list[BaseException] = []
        self.add(*script)
        self._serve_on(port)

    def _serve_on(self, port: int) -> None:
        """Listen on 127.0.0.1:`port` (0: a free one) and accept connections on a thread of their own."""
        self._closing = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._listener = socket.create_server(("127.0.0.1", port), backlog=128)
        self.port: int = self._listener.getsockname()[1]
        self._acceptor = threading.Thread(
            target=self._accept_loop, name=f"ModelServer-{self.port}", daemon=True
        )
        self._acceptor.start()

    # ------------------------------------------------------------ public face

    @property
    def base_url(self) -> str:
        if self._tls is not None:
            return f"https://localhost:{self.port}/v1"
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def remaining(self) -> int:
        """Script items not yet used."""
        with self._lock:
            return len(self._script)

    @property
    def connections(self) -> int:
        """TCP connections accepted so far (tells whether clients reuse connections)."""
        with self._lock:
            return self._connections_seen

    def add(self, *items: Item) -> None:
        """Append items to the script.

        Raises:
            TypeError, ValueError: an item is malformed (unknown key, wrong value type).
        """
        for item in items:
            check(item, self._extra_keys)
        with self._lock:
            self._script.extend(items)

    def start(self) -> ModelServer:
        """Kept for symmetry: the server serves from construction. Returns self."""
        if self._closing.is_set():
            raise RuntimeError("ModelServer is closed")
        return self

    def close(self) -> None:
        """Stop accepting, end every open connection and join every server thread. Idempotent.

        Raises:
            Exception: the first exception a callable script item raised (its request was
                answered with a 500 the client does not retry), so a test fails with it.
        """
        if self._closing.is_set():
            return
        self._shut_down()
        if self._raised:
            raise self._raised[0]

    def _shut_down(self) -> None:
        self._closing.set()
        self._wake_acceptor()
        self._acceptor.join(_JOIN_TIMEOUT_S)
        self._listener.close()
        with self._lock:
            sockets, threads = list(self._sockets), list(self._threads)
        # shutdown (not close) wakes handlers blocked reading or stalled, without racing
        # their own close of the same descriptor.
        for sock in sockets:
            _shutdown(sock)
        for thread in threads:
            if thread is threading.current_thread():
                continue  # close() called from a callable item: this thread ends by itself
            thread.join(_JOIN_TIMEOUT_S)
            if thread.is_alive():
                logger.warning("ModelServer thread %s did not end within %ss", thread.name, _JOIN_TIMEOUT_S)

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ModelServer({self.base_url!r}, remaining={self.remaining})"

    # ------------------------------------------------------------ connections

    def _accept_loop(self) -> None:
        while True:
            try:
                sock, address = self._listener.accept()
            except OSError:
                return
            if self._closing.is_set():
                sock.close()
                return
            sock.settimeout(None)
            # Small SSE chunks must leave at once, not wait for the previous one's ACK.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            thread = threading.Thread(
                target=self._serve_connection,
                args=(sock, address),
                name=f"ModelServer-{self.port}-conn",
                daemon=True,
            )
            with self._lock:
                self._sockets.add(sock)
                self._threads.add(thread)
                self._connections_seen += 1
            thread.start()

    def _wake_acceptor(self) -> None:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1.0).close()
        except OSError:
            pass

    def _serve_connection(self, sock: socket.socket, address: Any) -> None:
        try:
            if self._tls is not None:
                sock = self._handshake(sock)
            _Handler(sock, address, cast(socketserver.BaseServer, self))
        except OSError:
            pass  # the client went away, a failed handshake, a scripted drop, or close()
        finally:
            sock.close()
            with self._lock:
                self._sockets.discard(sock)
                self._threads.discard(threading.current_thread())

    def _handshake(self, raw: socket.socket) -> socket.socket:
        """Wrap `raw` in TLS; the wrapped socket replaces it in the set close() shuts down."""
        assert self._tls is not None
        wrapped = self._tls.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        with self._lock:
            self._sockets.discard(raw)
            self._sockets.add(wrapped)
        if self._closing.is_set():
            _shutdown(wrapped)
        wrapped.do_handshake()
        return wrapped

    # ------------------------------------------------------------ script

    def _reply_for(self, recorded: Recorded) -> Reply:
        """Record a model request and build the reply of the next script item."""
        with self._lock:
            self.log.append(recorded)
            self.requests.append(recorded.body)
            item = self._script.popleft() if self._script else self._default
        try:
            return build(item, recorded, self._new_call_id, self._extra_keys)
        except Exception as exc:
            if callable(item):
                with self._lock:
                    self._raised.append(exc)
            raise

    def _new_call_id(self) -> str:
        return f"call_{next(self._call_ids)}"

    def _record_only(self, recorded: Recorded) -> None:
        with self._lock:
            self.log.append(recorded)

    def _failed(self, error: BaseException) -> None:
        logger.error("ModelServer could not build a reply", exc_info=error)
        with self._lock:
            self.errors.append(error)


class _Handler(BaseHTTPRequestHandler):
    """One client connection: HTTP/1.1 keep-alive (unless the server's options say otherwise),
    each model request answered from the script."""

    protocol_version = "HTTP/1.1"

    @property
    def owner(self) -> ModelServer:
        return cast(ModelServer, self.server)

    def setup(self) -> None:
        super().setup()
        if self.owner.http10:
            self.protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: a per-request stderr line would cost more than the reply."""

    def do_POST(self) -> None:
        recorded = self._read_request()
        if len(recorded.raw) < int(self.headers.get("Content-Length") or 0):
            # The client went away while sending (killed, cancelled): nobody waits for an answer,
            # so no script item is used and no script function sees a body that is not there.
            self.owner._record_only(recorded)
            self.close_connection = True
            return
        protocol = encoders.protocol_for(recorded.path)
        encoder = encoders.get(protocol) if protocol is not None else None
        if encoder is None:
            self.owner._record_only(recorded)
            status, what = (501, "no encoder yet for") if protocol else (404, "no model endpoint at")
            message = f"ModelServer: {what} {recorded.method} {recorded.path}"
            self._send_body(status, _json({"error": {"message": message, "type": "not_found_error"}}), {})
            return
        try:
            reply = self.owner._reply_for(recorded)
        except Exception as exc:  # a bad item or callable: answer, and keep it for the test
            self.owner._failed(exc)
            # The traceback's last line, and a header the client honours: retrying cannot help.
            message = f"ModelServer script error: {traceback.format_exception_only(exc)[-1].strip()}"
            self._send_body(500, _json(encoder.error_body(500, message)), {"x-should-retry": "false"})
            return
        if reply.delay and self.owner._closing.wait(reply.delay):
            self.close_connection = True
            return
        if reply.item.get("reset_before_headers"):
            self._reset()
            return
        if reply.item.get("stall_before_headers"):
            self._stall()
            return
        try:
            self._answer(encoder, reply, recorded)
        except OSError:
            raise
        except Exception as exc:  # an encoder bug: keep it for the test, end the broken response
            self.owner._failed(exc)
            self.close_connection = True

    do_GET = do_PUT = do_DELETE = do_PATCH = do_POST

    # ------------------------------------------------------------ replies

    def _answer(self, encoder: encoders.Encoder, reply: Reply, recorded: Recorded) -> None:
        stream = encoder.is_stream(recorded)
        if reply.body is not None:
            content_type = reply.content_type or (_SSE_TYPE if stream else "application/json")
            self._send_body(reply.status, reply.body, reply.headers, content_type, reply)
        elif reply.chunks is not None:
            self._send_stream(reply, iter(reply.chunks))
        elif reply.overflow:
            self._send_body(max(reply.status, 400), _json(encoder.overflow_body()), reply.headers)
        elif reply.is_error:
            body = encoder.error_body(reply.status, reply.error or "")
            self._send_body(reply.status, _json(body), reply.headers)
        elif stream:
            self._send_stream(reply, encoder.encode_stream(reply, recorded))
        else:
            status, headers, body = encoder.encode_json(reply, recorded)
            self._send_body(status, _json(body), {**headers, **reply.headers}, reply=reply)

    def _send_body(
        self,
        status: int,
        body: bytes,
        headers: dict[str, str],
        content_type: str = "application/json",
        reply: Reply | None = None,
    ) -> None:
        """A whole body with Content-Length; `drop_after`/`stall_after` count body bytes here."""
        framing = {"Content-Length": str(len(body))} if self.owner.content_length else {}
        self._send_head(status, {"Content-Type": content_type, **framing}, headers)
        cut = _cut_point(reply)
        if cut is None or cut >= len(body):
            self.wfile.write(body)
            return
        self.wfile.write(body[:cut])
        self._interrupt(cast(Reply, reply))

    def _send_stream(self, reply: Reply, chunks: Iterator[bytes]) -> None:
        """SSE with chunked transfer encoding: one HTTP chunk per event, so the connection stays
        reusable (or, with `chunked=False` / `http10=True`, raw bytes ended by close)."""
        chunked = self.owner.chunked
        content_type = self.owner.event_stream_type
        head = {"Content-Type": content_type} if content_type else {}
        head["Cache-Control"] = "no-cache"
        if chunked:
            head["Transfer-Encoding"] = "chunked"
        self._send_head(reply.status, head, reply.headers)
        cut = _cut_point(reply)
        for sent, chunk in enumerate(chunks):
            if sent == cut:
                self._interrupt(reply)
                return
            if sent and reply.chunk_delay and self.owner._closing.wait(reply.chunk_delay):
                self.close_connection = True
                return
            if chunk:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
        if cut is not None:
            self._interrupt(reply)
            return
        if chunked:
            self.wfile.write(b"0\r\n\r\n")

    def _send_head(self, status: int, defaults: dict[str, str], extra: dict[str, str]) -> None:
        self.send_response(status)
        framed = "Content-Length" in defaults or "Transfer-Encoding" in defaults
        if not self.owner.keep_alive or not framed:
            # A body without a length or chunks can only be ended by closing the connection.
            self.close_connection = True
            if not self.owner.http10:
                defaults = {**defaults, "Connection": "close"}
        overridden = {name.lower() for name in extra}
        for name, value in defaults.items():
            if name.lower() not in overridden:
                self.send_header(name, value)
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()

    def _interrupt(self, reply: Reply) -> None:
        """Apply `drop_after` (hang up) or `stall_after` (go quiet until the client leaves)."""
        self.close_connection = True
        if reply.drop_after is not None:
            self.wfile.flush()
            _shutdown(self.connection)
            return
        self._stall()

    def _stall(self) -> None:
        """Go quiet until the client leaves (or close()); `server.stalled` tells the test."""
        self.close_connection = True
        self.wfile.flush()
        self.owner.stalled.set()
        while not self.owner._closing.is_set():
            readable, _, _ = select.select([self.connection], [], [], _STALL_POLL_S)
            # Readable means the client hung up (b"") or sent bytes, which are discarded.
            if readable and not self.connection.recv(4096):
                return

    def _reset(self) -> None:
        """End the connection with a TCP reset (SO_LINGER 0), before any byte of a response."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        socket.socket.close(self.connection)

    # ------------------------------------------------------------ requests

    def _read_request(self) -> Recorded:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        return Recorded(
            method=self.command,
            path=url.path,
            query=dict(parse_qsl(url.query, keep_blank_values=True)),
            headers=Headers(list(self.headers.items())),
            body=_parse_json(raw),
            raw=raw,
        )


def _server_context(tls: tuple[str, str] | ssl.SSLContext | None) -> ssl.SSLContext | None:
    if tls is None or isinstance(tls, ssl.SSLContext):
        return tls
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*tls)
    return context


def _cut_point(reply: Reply | None) -> int | None:
    """Where a scripted drop or stall happens (chunks for streams, bytes for whole bodies)."""
    if reply is None:
        return None
    return reply.drop_after if reply.drop_after is not None else reply.stall_after


def _parse_json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _json(body: dict[str, Any]) -> bytes:
    return encoders.wire_json(body).encode()


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
