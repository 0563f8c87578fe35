"""Endpoints that never answer, for tests of the phases before a server replies.

    with Blackhole() as hole:         # connect() to hole.base_url hangs (SYN never answered)
        hole.wait_connecting(timeout=5)   # True once some client is stuck in connect()
    with SilentPeer(tls=(cert, key)) as peer:   # accepts, reads the request head, then
        peer.heard.wait(5)                      # goes quiet without reading the body

`ModelServer` covers every phase from the response headers on (`stall_before_headers`,
`stall_after`); these two cover connecting, the TLS handshake and sending the body.
Linux only for `Blackhole.wait_connecting` (it reads /proc/net/tcp). Stdlib only.
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
from typing import Any

_POLL_S = 0.05
_SYN_SENT = "02"


class Blackhole:
    """A listening port whose accept queue is full, so a new connect() waits for an answer
    that never comes (the kernel drops its SYN). `close()` releases it."""

    def __init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(0)
        self.port: int = self._listener.getsockname()[1]
        self._fillers: list[socket.socket] = []
        self._fill()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _fill(self) -> None:
        # Connections the listener never accepts, until one no longer completes: the queue is full.
        for _ in range(8):
            filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            filler.setblocking(False)
            self._fillers.append(filler)
            if filler.connect_ex(("127.0.0.1", self.port)) != 0 and _connecting_to(self.port):
                return

    def connecting(self) -> int:
        """Clients (the fillers excluded) stuck in connect() to this port now."""
        # Told apart by their own port: a filler may leave SYN_SENT at any time (its SYN
        # retries run out), so "all minus the last filler" would miscount.
        fillers = {_local_port(filler) for filler in self._fillers}
        return sum(1 for port in _connecting_to(self.port) if port not in fillers)

    def wait_connecting(self, timeout: float) -> bool:
        """Wait until a client other than our own fillers is stuck connecting."""
        done = threading.Event()
        waited = 0.0
        while waited < timeout:
            if self.connecting() > 0:
                return True
            done.wait(_POLL_S)
            waited += _POLL_S
        return False

    def close(self) -> None:
        for filler in self._fillers:
            filler.close()
        self._listener.close()

    def __enter__(self) -> Blackhole:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _local_port(sock: socket.socket) -> int:
    try:
        return int(sock.getsockname()[1])
    except OSError:
        return 0


def _connecting_to(port: int) -> list[int]:
    """Local ports of this host's sockets in SYN_SENT towards 127.0.0.1:port (from /proc/net/tcp)."""
    target = f"0100007F:{port:04X}"
    ports: list[int] = []
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            if fields[2] == target and fields[3] == _SYN_SENT:
                ports.append(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


class SilentPeer:
    """Accepts connections (with TLS when given `(certfile, keyfile)`), reads the request up to
    the end of its headers, sets `heard`, then neither reads nor writes until the client leaves.

    Its receive buffer is small, so a client sending a large body blocks in send().
    """

    def __init__(self, *, tls: tuple[str, str] | None = None, handshake: bool = True) -> None:
        """`handshake=False` with `tls` never answers the TLS hello: the client waits in connect."""
        self._tls: ssl.SSLContext | None = None
        if tls is not None:
            self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._tls.load_cert_chain(*tls)
        self._handshake = handshake
        self.heard = threading.Event()
        self._closing = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port: int = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, name="SilentPeer", daemon=True)
        self._acceptor.start()

    @property
    def base_url(self) -> str:
        host = "localhost" if self._tls is not None else "127.0.0.1"
        return f"{'https' if self._tls is not None else 'http'}://{host}:{self.port}/v1"

    def _accept(self) -> None:
        while not self._closing.is_set():
            readable, _, _ = select.select([self._listener], [], [], _POLL_S)
            if not readable:
                continue
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(sock,), name="SilentPeer-conn", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        conn: Any = sock
        try:
            if self._tls is not None and self._handshake:
                conn = self._tls.wrap_socket(sock, server_side=True)
            if self._tls is None or self._handshake:
                self._read_head(conn)
            else:
                self.heard.set()  # the client's hello arrived (or will); never answer it
            while not self._closing.is_set():
                readable, _, _ = select.select([conn], [], [], _POLL_S)
                if readable and self._client_left(conn):
                    return
        except OSError:
            return
        finally:
            conn.close()

    def _read_head(self, conn: Any) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            piece = conn.recv(1024)
            if not piece:
                raise OSError("the client left before its headers ended")
            data += piece
        self.heard.set()

    def _client_left(self, sock: socket.socket) -> bool:
        # Peek at the TCP bytes without consuming them (past TLS: SSLSocket refuses flags):
        # unread body bytes must stay in the (full) buffer.
        try:
            return socket.socket.recv(sock, 1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    def close(self) -> None:
        self._closing.set()
        self._acceptor.join()
        self._listener.close()
        for thread in self._threads:
            thread.join()

    def __enter__(self) -> SilentPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
