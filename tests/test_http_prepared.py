"""Requests prepared once and copied (`_http._prepared`) put the very bytes on the wire that
requests' own `Session.post` puts there.

A raw TCP server on 127.0.0.1 records each request exactly as it arrives (request line, headers
in order, body) and answers with a small JSON body, optionally setting a cookie.
"""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from agentcore import _http

BODY = b'{"ok": true}'


class RawServer:
    """Keeps connections alive; records the bytes of every request; can set a cookie."""

    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self.set_cookie: str | None = None
        self.reply: bytes | None = None  # a whole response to send instead of the JSON one
        self.connections = 0
        owner = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                owner.connections += 1
                buffer = b""
                while True:
                    while b"\r\n\r\n" not in buffer:
                        data = self.request.recv(65536)
                        if not data:
                            return
                        buffer += data
                    head, _, buffer = buffer.partition(b"\r\n\r\n")
                    length = next(
                        (
                            int(line.split(b":", 1)[1])
                            for line in head.split(b"\r\n")
                            if line.lower().startswith(b"content-length:")
                        ),
                        0,
                    )
                    while len(buffer) < length:
                        buffer += self.request.recv(65536)
                    owner.requests.append(head + b"\r\n\r\n" + buffer[:length])
                    buffer = buffer[length:]
                    if owner.reply is not None:
                        self.request.sendall(owner.reply)
                        continue
                    cookie = f"Set-Cookie: {owner.set_cookie}\r\n" if owner.set_cookie else ""
                    self.request.sendall(
                        (
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                            f"Content-Length: {len(BODY)}\r\n{cookie}\r\n"
                        ).encode()
                        + BODY
                    )

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def raw() -> Iterator[RawServer]:
    server = RawServer()
    yield server
    server.close()


@pytest.fixture
def fresh_session(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The library's session, new for this test (no cookies from other tests), and its templates."""
    monkeypatch.setattr(_http, "_session", None)
    monkeypatch.setattr(_http, "_templates", {})
    yield _http.session()
    _http.session().close()


def post_with_agentcore(url: str, body: bytes, headers: dict[str, str]) -> Any:
    with _http.Call(None) as call:
        response = call.post(url, body, headers, 30)
        assert response.raw.read() == BODY
        return response


def post_with_requests(url: str, body: bytes, headers: dict[str, str]) -> None:
    """requests' whole path (`Session.request`), on a session set up like the library's."""
    with _http._new_session() as s:
        response = s.post(
            url,
            data=body,
            headers=headers,
            stream=True,
            timeout=(30, 30),
            allow_redirects=False,
            **_http.environment_settings(url),
        )
        assert response.content == BODY


HEADER_SETS = [
    {"Content-Type": "application/json"},
    {"Content-Type": "application/json", "Authorization": "Bearer sk-test", "Accept": "text/event-stream"},
    # Names the session sets too, in another case: the session's place, the caller's spelling.
    {
        "user-agent": "mine/1.0",
        "ACCEPT-ENCODING": "gzip",
        "x-api-key": "k",
        "anthropic-version": "2023-06-01",
    },
    {"Content-Type": "application/json; charset=utf-8", "X-Empty": "", "Connection": "close"},
]


@pytest.mark.parametrize("headers", HEADER_SETS, ids=["plain", "auth+sse", "session-names", "odd"])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1beta/models/m:streamGenerateContent?alt=sse"])
def test_the_same_bytes_as_requests_session_post(
    raw: RawServer, fresh_session: Any, headers: dict[str, str], path: str
) -> None:
    url = raw.url + path
    for body in (
        b'{"model": "m", "messages": []}',
        b'{"model": "m", "text": "' + "é".encode() * 3000 + b'"}',
    ):
        post_with_requests(url, body, headers)
        post_with_agentcore(url, body, headers)
        post_with_agentcore(url, body, headers)  # a second time: from the kept template
    expected, ours = raw.requests[0::3], [r for i, r in enumerate(raw.requests) if i % 3]
    assert ours[0::2] == expected
    assert ours[1::2] == expected


def test_credentials_in_the_url_are_sent_as_requests_sends_them(raw: RawServer, fresh_session: Any) -> None:
    url = raw.url.replace("http://", "http://user:pa%20ss@") + "/v1/chat/completions"
    post_with_requests(url, b"{}", {"Content-Type": "application/json"})
    post_with_agentcore(url, b"{}", {"Content-Type": "application/json"})
    assert raw.requests[0] == raw.requests[1]
    assert b"Authorization: Basic " in raw.requests[1]


def test_each_body_gets_its_own_length(raw: RawServer, fresh_session: Any) -> None:
    url = raw.url + "/v1/chat/completions"
    for size in (1, 500, 70000, 3):
        post_with_agentcore(url, b"x" * size, {"Content-Type": "application/json"})
    lengths = [r.split(b"Content-Length: ")[1].split(b"\r\n")[0] for r in raw.requests]
    assert lengths == [b"1", b"500", b"70000", b"3"]
    assert [len(r.partition(b"\r\n\r\n")[2]) for r in raw.requests] == [1, 500, 70000, 3]


def test_a_cookie_the_server_sets_is_sent_back(raw: RawServer, fresh_session: Any) -> None:
    url = raw.url + "/v1/chat/completions"
    raw.set_cookie = "__cf_bm=abc123; Path=/; HttpOnly"
    post_with_agentcore(url, b"{}", {"Content-Type": "application/json"})
    raw.set_cookie = None
    post_with_agentcore(url, b"{}", {"Content-Type": "application/json"})
    assert b"Cookie:" not in raw.requests[0]
    assert b"\r\nCookie: __cf_bm=abc123\r\n" in raw.requests[1]
    assert "__cf_bm" in fresh_session.cookies


def test_a_reply_without_cookies_leaves_the_jar_empty(raw: RawServer, fresh_session: Any) -> None:
    post_with_agentcore(raw.url + "/v1/chat/completions", b"{}", {"Content-Type": "application/json"})
    assert len(fresh_session.cookies) == 0


# ---------------------------------------------------------------- reading a streamed body

SSE = b"".join(b'data: {"n": %d}\n\n' % i for i in range(50)) + b"data: [DONE]\n\n"


def chunked(body: bytes, headers: str = "", size: int = 7) -> bytes:
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    framed = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n{headers}\r\n"
    )
    return head.encode() + framed


def read_body(url: str) -> tuple[bytes, Any]:
    with _http.Call(None) as call:
        response = call.post(url, b"{}", {"Content-Type": "application/json"}, 30)
        reader = _http._direct_read1(response.raw)
        return b"".join(call.chunks(response)), reader


def test_a_chunked_stream_is_read_whole_and_its_connection_kept(raw: RawServer, fresh_session: Any) -> None:
    raw.reply = chunked(SSE)
    for _ in range(3):
        body, reader = read_body(raw.url + "/v1/chat/completions")
        assert body == SSE
        assert reader is not None  # read past urllib3
    assert raw.connections == 1  # each response ended cleanly and gave its connection back


def test_a_compressed_stream_is_read_through_urllib3_and_decoded(raw: RawServer, fresh_session: Any) -> None:
    import gzip

    raw.reply = chunked(gzip.compress(SSE), "Content-Encoding: gzip\r\n", size=40)
    body, reader = read_body(raw.url + "/v1/chat/completions")
    assert body == SSE
    assert reader is None


def test_a_broken_chunk_is_urllib3s_protocol_error(raw: RawServer, fresh_session: Any) -> None:
    import urllib3.exceptions

    raw.reply = chunked(SSE)[:-40] + b"zz\r\nnot a chunk"
    with _http.Call(None) as call:
        response = call.post(
            raw.url + "/v1/chat/completions", b"{}", {"Content-Type": "application/json"}, 30
        )
        with pytest.raises(urllib3.exceptions.ProtocolError, match="Connection broken"):
            b"".join(call.chunks(response))


# ---------------------------------------------------------------- the Response a reply becomes


@pytest.mark.parametrize("set_cookie", [None, "sid=1; Path=/"])
def test_the_response_is_the_one_requests_builds(raw: RawServer, fresh_session: Any, set_cookie: Any) -> None:
    from requests.adapters import HTTPAdapter

    raw.set_cookie = set_cookie
    url = raw.url + "/v1/chat/completions?x=1"
    with _http.Call(None) as call:
        ours = call.post(url, b"{}", {"Content-Type": "application/json"}, 30)
        theirs = HTTPAdapter.build_response(ours.connection, ours.request, ours.raw)  # requests' own
        assert ours.raw.read() == BODY

    def fields(response: Any) -> dict[str, Any]:
        values = {k: v for k, v in vars(response).items() if k not in ("cookies", "elapsed", "headers")}
        return {**values, "headers": dict(response.headers), "cookies": response.cookies.get_dict()}

    assert fields(ours) == fields(theirs)
    assert ours.cookies.get_dict() == ({"sid": "1"} if set_cookie else {})
