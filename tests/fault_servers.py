"""Model endpoints with real faults, on servers we did not write, for the fallback tests.

    with refused_port() as base_url: ...                  # the kernel refuses every connect
    with ChatFault("stall") as server: server.base_url    # uvicorn: two deltas, then silence
    with ChatFault("drop") as server: ...                 # uvicorn: two deltas, then the connection dies
    with FakeLLM(rules) as fake: fake.base_url            # fakellm (FastAPI): OpenAI and Anthropic APIs

The faults are what the servers really do: a bound socket that never listens refuses connections
(ECONNREFUSED from the kernel); uvicorn with a body that stops yielding stalls mid-stream, and
with a body that raises mid-stream aborts the connection before the chunked terminator;
fakellm (a third-party mock server) answers both protocols, and non-streamed requests with the
status a rule names.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

PARTIAL = ["PARTIAL", " words", " from", " the", " primary"]


def _need(module: str) -> Any:
    """Import a test dependency; missing, it skips — except under CI=true, where it fails."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as missing:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{module} is missing (pip install -e '.[test]'): {missing}")
        pytest.skip(f"{module} is not installed")


@contextlib.contextmanager
def refused_port() -> Iterator[str]:
    """A base_url whose port is bound but not listening: connecting is refused, and the port
    stays ours (no other process can take it) for as long as the block runs."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    try:
        yield f"http://127.0.0.1:{holder.getsockname()[1]}/v1"
    finally:
        holder.close()


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    body = {"id": "c1", "object": "chat.completion.chunk", "model": "primary", "choices": [choice]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class ChatFault:
    """An OpenAI-compatible chat stream under uvicorn (starlette) that fails after two deltas.

    `mode` "stall": the body stops sending (until the test ends or the client leaves);
    "drop": the body raises, and uvicorn aborts the connection mid-body. `requests` counts the
    requests it received.
    """

    def __init__(self, mode: str) -> None:
        uvicorn = _need("uvicorn")
        responses = _need("starlette.responses")
        self.mode = mode
        self.release = threading.Event()
        self.requests = 0

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            import anyio

            if scope["type"] != "http":
                return
            self.requests += 1

            async def body() -> Any:
                yield _chunk({"role": "assistant", "content": ""})
                for word in PARTIAL[:2]:
                    yield _chunk({"content": word})
                if self.mode == "drop":
                    raise ConnectionAbortedError("the primary fell over mid-reply")
                while not self.release.is_set():  # a stall: until the test ends or the client leaves
                    await anyio.sleep(0.05)

            response = responses.StreamingResponse(body(), media_type="text/event-stream")
            await response(scope, receive, send)

        self._sock = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"
        config = uvicorn.Config(app, log_level="critical", lifespan="off", timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]})
        self._thread.start()
        while not self._server.started:  # uvicorn says when it listens
            threading.Event().wait(0.01)

    def close(self) -> None:
        self.release.set()
        self._server.should_exit = True
        self._thread.join()
        self._sock.close()

    def __enter__(self) -> ChatFault:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FakeLLM:
    """fakellm's FastAPI app under uvicorn on a thread, answering by its YAML rules.

    fakellm keeps its rules in module state read from the file `FAKELLM_CONFIG` names; each
    instance writes its rules there and asks the server to reload them. `stats()` is its own
    record of the requests it answered (per rule).
    """

    def __init__(self, rules: list[dict[str, Any]], folder: Path) -> None:
        _need("fakellm")
        uvicorn = _need("uvicorn")
        yaml = _need("yaml")
        path = folder / "fakellm.yaml"
        path.write_text(yaml.safe_dump({"version": 1, "rules": rules}))
        os.environ["FAKELLM_CONFIG"] = str(path)
        from fakellm import server as fake_server

        self._sock = socket.create_server(("127.0.0.1", 0))
        self.root = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self.base_url = f"{self.root}/v1"
        config = uvicorn.Config(fake_server.app, log_level="critical", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]})
        self._thread.start()
        while not self._server.started:
            threading.Event().wait(0.01)
        self._post("/_fakellm/reload")
        self._post("/_fakellm/reset")
        self._before: dict[str, int] = dict(self.stats()["by_rule"])

    def _post(self, path: str) -> Any:
        import requests

        return requests.post(self.root + path, timeout=30).json()

    def stats(self) -> dict[str, Any]:
        import requests

        return dict(requests.get(self.root + "/_fakellm/stats", timeout=30).json())

    def answered(self) -> dict[str, int]:
        """Requests answered since this instance started, per rule name (fakellm's own count)."""
        now: dict[str, int] = self.stats()["by_rule"]
        counts = {rule: count - self._before.get(rule, 0) for rule, count in now.items()}
        return {rule: count for rule, count in counts.items() if count}

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join()
        self._sock.close()
        os.environ.pop("FAKELLM_CONFIG", None)

    def __enter__(self) -> FakeLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
