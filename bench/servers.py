"""The model server the benchmarks talk to, in a process of its own, with a clock of its busy time.

    with model_server("chain", steps=20) as server:     # or "text": one short text reply each time
        run_client(server.base_url)
        server.busy()        # seconds spent answering since the last call (and resets it)
        server.last_body()   # the body of the latest model request, parsed

The server is `agentcore.testing.ModelServer`; running it in another process keeps its work
(parsing each request, encoding the stream) off the client's interpreter, as a real endpoint
is. Client time per request = wall time − the server's busy time, so that what is compared is
what each client adds, not what the server costs.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Iterator

SERVER = textwrap.dedent(
    """
    import json, sys, threading, time
    from agentcore.testing import ModelServer
    from agentcore.testing import server as server_module

    KIND, STEPS = sys.argv[1], int(sys.argv[2])
    lock = threading.Lock()
    state = {"busy": 0.0, "last": None}

    def reply(recorded):
        server.log.clear()  # the server keeps only the latest body: long histories stay cheap
        server.requests.clear()
        state["last"] = recorded.raw
        if KIND == "text":
            return {"text": "Noted; here is the next part of the answer.", "chunk_size": 16}
        done = sum(1 for m in recorded.body["messages"] if m["role"] == "tool")
        if done < STEPS:
            return {"tool_calls": [{"name": "step", "arguments": {"n": done + 1}}], "chunk_size": 16}
        return {"text": "All steps are recorded.", "chunk_size": 16}

    original = server_module._Handler.do_POST

    def timed(handler):
        if handler.command == "GET" and handler.path.startswith("/__"):
            with lock:
                if handler.path == "/__busy":
                    body, state["busy"] = json.dumps(state["busy"]).encode(), 0.0
                else:
                    body = state["last"] or b"null"
            handler.send_response(200)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
            return
        started = time.perf_counter()
        try:
            original(handler)
        finally:
            with lock:
                state["busy"] += time.perf_counter() - started

    server_module._Handler.do_POST = server_module._Handler.do_GET = timed
    with ModelServer(default=reply) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()
    """
)


class Server:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self._root = base_url.rsplit("/v1", 1)[0]

    def busy(self) -> float:
        with urllib.request.urlopen(self._root + "/__busy") as reply:
            return float(json.loads(reply.read()))

    def last_body(self) -> object:
        with urllib.request.urlopen(self._root + "/__last") as reply:
            return json.loads(reply.read())


@contextlib.contextmanager
def model_server(kind: str = "chain", steps: int = 0) -> Iterator[Server]:
    """The scripted server in another process ("chain": a `steps`-call tool chain; "text")."""
    process = subprocess.Popen(
        [sys.executable, "-c", SERVER, kind, str(steps)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        yield Server(process.stdout.readline().strip())
    finally:
        process.communicate("")
