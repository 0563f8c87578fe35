"""The client against HTTP servers we did not write: uvicorn (h11, asyncio) and Werkzeug's
threaded WSGI server, each serving an OpenAI-compatible chat stream. Each has its own ideas of
framing and connection handling; a reply is read whole, and stop() cuts one that stalls.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from agentcore import Agent, AgentError

uvicorn = pytest.importorskip("uvicorn")
starlette_responses = pytest.importorskip("starlette.responses")
werkzeug_serving = pytest.importorskip("werkzeug.serving")

WORDS = ["Hello", " from", " a", " server", " we", " did", " not", " write."]
BOUND_S = 30.0  # only keeps a regression from hanging the suite


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    body = {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _events(stall: bool) -> Iterator[bytes]:
    """The chat stream; with `stall`, two words and then nothing (the caller blocks)."""
    yield _chunk({"role": "assistant", "content": ""})
    for index, word in enumerate(WORDS):
        if stall and index == 2:
            return
        yield _chunk({"content": word})
    yield _chunk({}, "stop")
    yield b"data: [DONE]\n\n"


class _Uvicorn:
    """A starlette app under uvicorn on a thread; POST /v1/chat/completions streams `_events`."""

    def __init__(self, stall: bool) -> None:
        self.release = threading.Event()

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            import anyio

            if scope["type"] != "http":
                return

            async def body() -> Any:
                for event in _events(stall):
                    yield event
                if stall:
                    while not self.release.is_set():  # until the test ends (a client leaving cancels it)
                        await anyio.sleep(0.05)

            response = starlette_responses.StreamingResponse(body(), media_type="text/event-stream")
            await response(scope, receive, send)

        self._sock = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"
        config = uvicorn.Config(app, log_level="error", lifespan="off", timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]})
        self._thread.start()
        while not self._server.started:  # uvicorn says when it listens; a short wait-for-condition
            threading.Event().wait(0.01)

    def close(self) -> None:
        self.release.set()
        self._server.should_exit = True
        self._thread.join()
        self._sock.close()


class _Werkzeug:
    """Werkzeug's threaded WSGI server; a generator body is streamed (chunked, HTTP/1.1)."""

    def __init__(self, stall: bool) -> None:
        self.release = threading.Event()

        def app(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
            environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            start_response("200 OK", [("Content-Type", "text/event-stream")])
            yield from _events(stall)
            if stall:
                self.release.wait()

        self._server = werkzeug_serving.make_server("127.0.0.1", 0, app, threaded=True)
        self.base_url = f"http://127.0.0.1:{self._server.server_port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever)
        self._thread.start()

    def close(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._thread.join()
        self._server.server_close()


SERVERS = {"uvicorn": _Uvicorn, "werkzeug": _Werkzeug}


@pytest.mark.parametrize("name", list(SERVERS))
def test_a_reply_from_a_third_party_server_is_read_whole(name: str) -> None:
    server = SERVERS[name](stall=False)
    try:
        agent = Agent(config={"base_url": server.base_url, "model": "m"})
        assert agent.send("hi").text == "".join(WORDS)
        assert agent.send("again").text == "".join(WORDS)  # the connection is reused or renewed
        agent.close()
    finally:
        server.close()


@pytest.mark.parametrize("name", list(SERVERS))
def test_stop_cuts_a_stalled_stream_from_a_third_party_server(name: str) -> None:
    server = SERVERS[name](stall=True)
    try:
        arrived = threading.Event()

        def on_event(event: dict[str, Any]) -> None:
            if event["type"] == "text-delta" and event["text"] == WORDS[1]:
                arrived.set()

        config = {"base_url": server.base_url, "model": "m"}
        agent = Agent(config=config, callbacks={"on_llm_event": on_event})
        box: dict[str, BaseException] = {}

        def run() -> None:
            try:
                agent.send("hi")
            except BaseException as exc:
                box["error"] = exc

        thread = threading.Thread(target=run)
        thread.start()
        assert arrived.wait(BOUND_S)
        agent.stop()
        thread.join(BOUND_S)
        assert not thread.is_alive() and not server.release.is_set()  # ended while the server stalled
        error = box["error"]
        assert isinstance(error, AgentError) and error.kind == "aborted"
        assert agent.history[-1]["content"] == [{"type": "text", "text": "".join(WORDS[:2])}]
        agent.close()
    finally:
        server.close()
