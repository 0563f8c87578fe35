"""Proxy settings from the environment: read once per origin, followed exactly as requests does.

A real HTTP proxy stand-in on 127.0.0.1 records the request lines it is sent (a proxied request
names the whole URL); the model server answers direct requests.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests.utils

from agentcore import Agent, _http
from agentcore.testing import ModelServer

REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "via proxy"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
}
PROXY_NAMES = [f"{n}_proxy" for n in ("http", "https", "all", "no")]


class Proxy:
    """Answers every request with one chat reply and records its request line."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                owner.lines.append(self.requestline)
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.dumps(REPLY).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[Proxy]:
    for name in PROXY_NAMES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    running = Proxy()
    yield running
    running.close()


def ask(base_url: str) -> str:
    agent = Agent(config={"base_url": base_url, "model": "m", "stream": False})
    try:
        return agent.send("hi").text
    finally:
        agent.close()


def test_http_proxy_from_the_environment_is_used(proxy: Proxy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    assert ask("http://model.invalid:9/v1") == "via proxy"
    assert proxy.lines == ["POST http://model.invalid:9/v1/chat/completions HTTP/1.1"]


def test_no_proxy_sends_direct(proxy: Proxy, monkeypatch: pytest.MonkeyPatch, server: ModelServer) -> None:
    server.add({"text": "direct"})
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert ask(server.base_url) == "direct"
    assert proxy.lines == []


def test_a_changed_environment_is_followed(
    proxy: Proxy, monkeypatch: pytest.MonkeyPatch, server: ModelServer
) -> None:
    server.add({"text": "direct"}, {"text": "direct again"})
    assert ask(server.base_url) == "direct"
    monkeypatch.setenv("http_proxy", proxy.url)
    assert ask(server.base_url) == "via proxy"
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    assert ask(server.base_url) == "direct again"
    assert len(proxy.lines) == 1


def test_the_environment_is_read_once_per_origin(
    monkeypatch: pytest.MonkeyPatch, server: ModelServer
) -> None:
    reads: list[str] = []
    original = requests.utils.get_environ_proxies

    def counted(url: str, no_proxy: Any = None) -> Any:
        reads.append(url)
        return original(url, no_proxy)

    monkeypatch.setattr(requests.utils, "get_environ_proxies", counted)
    monkeypatch.setattr(_http, "_settings", {})
    server.add({"text": "1"}, {"text": "2"}, {"text": "3"})
    agent = Agent(config={"base_url": server.base_url, "model": "m"})
    try:
        assert [agent.send("hi").text for _ in range(3)] == ["1", "2", "3"]
    finally:
        agent.close()
    assert len(reads) == 1
