"""A pooled connection the server has just closed costs no backoff (issue 25 defect 2).

llama.cpp's server answered `Connection: keep-alive` and then closed the connection after each
streamed reply; a request sent on it before the close arrived failed with `RemoteDisconnected`
before any byte of a response, and the agent logged a WARNING and waited `retry_base_delay`.
`KeepAliveServer` makes that race deterministic: it answers as told per request and, for a
request told to "close" or "reset", hangs up at the moment that request arrives on the
kept-alive connection (after reading it: FIN; before: RST). No sleep decides any verdict: a
retry through the policy would wait `retry_base_delay` (60 s) and `retry_max_elapsed` (0) makes
it fail at once instead.
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from agentcore import Agent, AgentError

NO_BACKOFF = {"retry_base_delay": 60.0, "retry_max_elapsed": 0.0}
BOUND_S = 30.0  # only keeps a regression from hanging the suite


def _sse_reply(text: str) -> bytes:
    """A streamed chat reply as llama-server sends it: chunked SSE on a kept-alive connection."""
    events = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    chunks = [*(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events), b"data: [DONE]\n\n"]
    body = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
    head = (
        b"HTTP/1.1 200 OK\r\nServer: llama.cpp\r\nContent-Type: text/event-stream\r\n"
        b"Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    return head + body


def _json_reply(text: str) -> bytes:
    message = {"role": "assistant", "content": text}
    body = json.dumps({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}).encode()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    return head + body


class KeepAliveServer:
    """HTTP/1.1 on 127.0.0.1:0 that keeps connections alive and acts per request as `plan` says:
    "ok" (a streamed reply), "close" (read the request, then FIN), "reset" (RST without reading
    the body), "partial" (a piece of a status line, then FIN), "stall" (read, say nothing).

    `seen` lists (connection number, request number on it) for each request, in order.
    """

    def __init__(self, plan: list[str], tls: tuple[str, str] | None = None) -> None:
        self.plan = list(plan)
        self.close_reused = False  # then every request after a connection's first is answered "close"
        self.seen: list[tuple[int, int]] = []
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._tls = None
        if tls is not None:
            self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._tls.load_cert_chain(*tls)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def wait_seen(self, count: int) -> bool:
        """Block until `count` requests have arrived (False after BOUND_S)."""
        with self._lock:
            return self._lock.wait_for(lambda: len(self.seen) >= count, BOUND_S)

    @property
    def base_url(self) -> str:
        host = "localhost" if self._tls is not None else "127.0.0.1"
        return f"{'https' if self._tls else 'http'}://{host}:{self.port}/v1"

    def close(self) -> None:
        self._stop.set()
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=BOUND_S).close()  # wakes accept()
        except OSError:
            pass
        self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in self._threads:
            thread.join(BOUND_S)

    def _accept(self) -> None:
        number = 0
        while not self._stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            if self._stop.is_set():
                sock.close()
                return
            number += 1
            thread = threading.Thread(target=self._serve, args=(sock, number), daemon=True)
            with self._lock:
                self._sockets.append(sock)
                self._threads.append(thread)
            thread.start()

    def _serve(self, raw: socket.socket, number: int) -> None:
        sock = raw
        try:
            if self._tls is not None:
                sock = self._tls.wrap_socket(raw, server_side=True)  # takes over raw's descriptor
                with self._lock:
                    self._sockets.append(sock)
            reader = sock.makefile("rb")
            for index in range(1, 1000):
                head = _read_head(reader)
                if head is None:
                    return
                with self._lock:
                    self.seen.append((number, index))
                    action = self.plan.pop(0) if self.plan else "ok"
                    if self.close_reused and index > 1:
                        action = "close"
                    self._lock.notify_all()
                if action == "reset":
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return
                body = json.loads(reader.read(_content_length(head)) or b"{}")
                if not self._answer(sock, action, body.get("stream", False)):
                    return
        except OSError:
            pass
        finally:
            sock.close()

    def _answer(self, sock: socket.socket, action: str, stream: bool) -> bool:
        """Act on one request; False when the connection ends here."""
        if action == "hold":  # a reply once two requests are in flight: two pooled connections
            action = "ok" if self.wait_seen(2) else "stall"
        if action == "ok":
            text = f"reply {len(self.seen)}"
            sock.sendall(_sse_reply(text) if stream else _json_reply(text))
            return True
        if action == "partial":
            sock.sendall(b"HTTP/1.1 2")
        elif action == "stall":
            self._stop.wait()
        return False  # "close", "partial", "stall": hang up


def _read_head(reader: Any) -> list[bytes] | None:
    lines = []
    while True:
        line = reader.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            return lines
        lines.append(line)


def _content_length(head: list[bytes]) -> int:
    for line in head:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


@contextmanager
def running(plan: list[str], tls: tuple[str, str] | None = None) -> Iterator[KeepAliveServer]:
    server = KeepAliveServer(plan, tls)
    try:
        yield server
    finally:
        server.close()


def _agent(server: KeepAliveServer, retries: list[Any], **config: Any) -> Agent:
    base = {"base_url": server.base_url, "model": "m", **config}
    return Agent(config=base, callbacks={"on_retry": retries.append})


def _retry_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "retry" in r.getMessage()
    ]


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("drop", ["close", "reset"])
def test_a_request_dropped_on_a_reused_connection_is_sent_again_at_once(
    drop: str, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="agentcore")
    retries: list[Any] = []
    with running(["ok", drop, "ok"]) as server, _agent(server, retries, stream=stream, **NO_BACKOFF) as agent:
        assert agent.send("first").text == "reply 1"
        assert agent.send("second").text == "reply 3"
        seen = list(server.seen)
    # The second send went out on the kept-alive connection, was dropped, and went again on a new one.
    assert seen == [(1, 1), (1, 2), (2, 1)]
    assert retries == [] and _retry_warnings(caplog) == []


def test_the_resend_takes_a_new_connection_not_another_pooled_one(caplog: pytest.LogCaptureFixture) -> None:
    """Two idle pooled connections, both closed by the server: the resend must not take the other."""
    caplog.set_level(logging.DEBUG, logger="agentcore")
    retries: list[Any] = []
    with running(["hold", "hold"]) as server:
        agents = [_agent(server, retries, **NO_BACKOFF) for _ in range(2)]
        threads = [threading.Thread(target=agent.send, args=("first",)) for agent in agents]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(BOUND_S)
        assert sorted(server.seen) == [(1, 1), (2, 1)]  # two connections, both back in the pool
        server.close_reused = True
        assert agents[0].send("second").text == "reply 4"
        assert server.seen[-1] == (3, 1)
        for agent in agents:
            agent.close()
    assert len(server.seen) == 4 and retries == [] and _retry_warnings(caplog) == []


def test_over_tls_too(cert: tuple[str, str], caplog: pytest.LogCaptureFixture) -> None:
    """HTTPS connects before the request is written (urllib3's _validate_conn): still told apart."""
    caplog.set_level(logging.DEBUG, logger="agentcore")
    retries: list[Any] = []
    with running(["ok", "close", "ok"], tls=cert) as server, _agent(server, retries, **NO_BACKOFF) as agent:
        assert agent.send("first").text == "reply 1"
        assert agent.send("second").text == "reply 3"
        assert server.seen == [(1, 1), (1, 2), (2, 1)]
    assert retries == [] and _retry_warnings(caplog) == []


def test_a_second_failure_goes_through_the_retry_policy(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="agentcore")
    retries: list[Any] = []
    fast = {"retry_base_delay": 0.01, "retry_max_delay": 0.01}
    with running(["ok", "close", "close", "ok"]) as server, _agent(server, retries, **fast) as agent:
        agent.send("first")
        assert agent.send("second").text == "reply 4"
        seen = list(server.seen)
    assert seen == [(1, 1), (1, 2), (2, 1), (3, 1)]  # the resend's own failure was not resent again
    assert [payload["error"].kind for payload in retries] == ["network"]
    assert len(_retry_warnings(caplog)) == 1


@pytest.mark.parametrize("plan", [["partial"], ["ok", "partial"], ["close"]])
def test_never_resent_after_a_response_byte_or_from_a_new_connection(plan: list[str]) -> None:
    """A reply that had begun may have been acted on; a new connection's failure is the server's."""
    retries: list[Any] = []
    with running(plan) as server, _agent(server, retries, **NO_BACKOFF) as agent:
        for _ in plan[:-1]:
            agent.send("first")
        with pytest.raises(AgentError) as caught:
            agent.send("second")
        assert len(server.seen) == len(plan)
    assert caught.value.kind == "network" and retries == []


@pytest.mark.parametrize("plan", [["ok", "stall"], ["ok", "close", "stall"]])
def test_a_stop_ends_the_request_and_nothing_is_resent(plan: list[str]) -> None:
    """Cut on the reused connection, or during the resend: aborted, and no request after the cut."""
    retries: list[Any] = []
    with running(plan) as server, _agent(server, retries, **NO_BACKOFF) as agent:
        agent.send("first")
        box: dict[str, Any] = {}
        thread = threading.Thread(target=lambda: box.update(error=_send_error(agent)))
        thread.start()
        assert server.wait_seen(len(plan))
        assert agent.stop()
        thread.join(BOUND_S)
        assert not thread.is_alive()
        assert len(server.seen) == len(plan)
    assert box["error"].kind == "aborted" and retries == []


def _send_error(agent: Agent) -> AgentError | None:
    try:
        agent.send("second")
    except AgentError as error:
        return error
    return None
