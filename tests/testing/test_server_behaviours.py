"""ModelServer's connection behaviours, seen on the raw wire: what a client of servers that are
not ours must survive (keep-alive off, HTTP/1.0, unframed bodies, TLS, no SSE type, stalls and
resets before the headers), and the peers that stall connecting and sending."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import threading

import pytest

from agentcore.testing import ModelServer
from agentcore.testing.peers import Blackhole, SilentPeer
from agentcore.testing.tls import self_signed

CHAT = "/v1/chat/completions"


def _raw(
    server: ModelServer, *, stream: bool, version: str = "HTTP/1.1", sock: socket.socket | None = None
) -> bytes:
    """Send one chat request (asking the server to close after it) and read until it closes."""
    body = json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    ).encode()
    fields = f"Host: x\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
    head = f"POST {CHAT} {version}\r\n{fields}\r\n"
    conn = sock or socket.create_connection(("127.0.0.1", server.port))
    conn.settimeout(10)
    conn.sendall(head.encode() + body)
    data = b""
    while piece := conn.recv(65536):
        data += piece
    conn.close()
    return data


def _head(data: bytes) -> tuple[str, dict[str, str], bytes]:
    head, _, body = data.partition(b"\r\n\r\n")
    status, *lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return status, headers, body


def test_keep_alive_off_says_connection_close_and_hangs_up() -> None:
    with ModelServer(["one"], keep_alive=False) as server:
        status, headers, body = _head(_raw(server, stream=True))
    assert status.startswith("HTTP/1.1 200") and headers["connection"] == "close"
    assert headers["transfer-encoding"] == "chunked" and body.endswith(b"0\r\n\r\n")


def test_http10_sends_no_length_and_no_chunks_and_ends_by_close() -> None:
    with ModelServer(["one", "two"], http10=True) as server:
        for stream in (True, False):
            status, headers, body = _head(_raw(server, stream=stream))
            assert status.startswith("HTTP/1.0 200")
            assert "content-length" not in headers and "transfer-encoding" not in headers
            assert body  # everything up to the close


def test_unframed_streams_and_bodies_end_by_close() -> None:
    with ModelServer(["one", "two"], chunked=False, content_length=False) as server:
        _, stream_headers, stream_body = _head(_raw(server, stream=True))
        _, json_headers, json_body = _head(_raw(server, stream=False))
    assert "transfer-encoding" not in stream_headers and stream_headers["connection"] == "close"
    assert stream_body.startswith(b"data: ") and b"[DONE]" in stream_body
    assert "content-length" not in json_headers and json.loads(json_body)["choices"]


def test_a_stream_can_come_without_a_content_type() -> None:
    with ModelServer(["one"], event_stream_type=None) as server:
        _, headers, body = _head(_raw(server, stream=True))
    assert "content-type" not in headers and b"data: " in body


def test_default_framing_is_unchanged() -> None:
    with ModelServer(["one"]) as server:
        _, headers, _ = _head(_raw(server, stream=True))
    assert (
        headers["content-type"].startswith("text/event-stream") and headers["transfer-encoding"] == "chunked"
    )
    assert "connection" not in headers


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")
def test_tls_mode_serves_https_with_the_given_certificate(tmp_path: object) -> None:
    cert, key = self_signed(str(tmp_path))
    with ModelServer(["secure"], tls=(cert, key)) as server:
        assert server.base_url == f"https://localhost:{server.port}/v1"
        context = ssl.create_default_context(cafile=cert)
        sock = context.wrap_socket(
            socket.create_connection(("127.0.0.1", server.port)), server_hostname="localhost"
        )
        status, _, body = _head(_raw(server, stream=False, sock=sock))
    assert status.startswith("HTTP/1.1 200") and b"secure" in body


def test_stall_before_headers_sends_nothing_until_the_client_leaves() -> None:
    with ModelServer([{"stall_before_headers": True}, "next"]) as server:
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        assert server.stalled.wait(10)
        sock.settimeout(0.2)
        with pytest.raises(TimeoutError):
            sock.recv(1)
        sock.close()
        # The stalled handler ends when the client leaves; the server goes on answering.
        assert b"next" in _head(_raw(server, stream=False))[2]


def test_reset_before_headers_resets_the_connection() -> None:
    with ModelServer([{"reset_before_headers": True}]) as server, pytest.raises(ConnectionResetError):
        _raw(server, stream=False)


def test_a_blackhole_keeps_connect_waiting_and_says_so() -> None:
    with Blackhole() as hole:
        assert hole.connecting() == 0
        client = socket.socket()
        client.settimeout(30)
        failed: list[BaseException] = []

        def connect() -> None:
            try:
                client.connect(("127.0.0.1", hole.port))
            except OSError as exc:
                failed.append(exc)

        thread = threading.Thread(target=connect)
        thread.start()
        assert hole.wait_connecting(10)
        client.shutdown(socket.SHUT_RDWR)  # what a cancel does: it wakes the connect at once
        thread.join(10)
        client.close()
    assert not thread.is_alive() and failed


def test_a_silent_peer_reads_the_head_and_nothing_more() -> None:
    with SilentPeer() as peer:
        sock = socket.create_connection(("127.0.0.1", peer.port))
        sock.sendall(b"POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 9999999\r\n\r\n")
        assert peer.heard.wait(10)
        sock.setblocking(False)
        sent = 0
        try:
            while sent < 64 * 1024 * 1024:
                sent += sock.send(b"x" * 65536)
        except BlockingIOError:
            pass  # the peer does not read: the buffers filled
        sock.close()
    assert sent < 64 * 1024 * 1024
