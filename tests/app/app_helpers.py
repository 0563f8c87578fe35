"""Helpers of the app tests: the server as a subprocess, and a strict reader of its event stream."""

from __future__ import annotations

import http.client
import json
import os
import select
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "examples" / "app" / "server.py"
_START_TIMEOUT_S = 60.0


class AppProcess:
    """`python examples/app/server.py` on a free port, with its stderr kept in a file."""

    def __init__(
        self,
        db: Path,
        token: str | None,
        heartbeat: float | None,
        logs: Path,
        extra_env: dict[str, str],
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.db, self.token = db, token
        self.stderr_path = logs / f"stderr-{os.getpid()}-{id(self)}.log"
        args = [sys.executable, str(SERVER), "--port", "0", "--db", str(db)]
        if token is not None:
            args += ["--token", token]
        if heartbeat is not None:
            args += ["--heartbeat", str(heartbeat)]
        args += extra_args
        model_settings = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AGENTCORE_MODEL")
        env = {k: v for k, v in os.environ.items() if k not in model_settings}
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        env.update(extra_env)
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._stderr, env=env, cwd=ROOT)
        self.url = self._read_url()

    def _read_url(self) -> str:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], _START_TIMEOUT_S)
        line = self.process.stdout.readline().decode() if ready else ""
        if not line.startswith("serving on "):
            self.stop()
            raise RuntimeError(f"the app did not start: {line!r} {self.stderr_path.read_text()}")
        return line.split()[-1].rstrip("/")

    def call(
        self, method: str, path: str, body: Any = None, *, token: str | None = None, raw: bytes | None = None
    ) -> tuple[int, Any]:
        """One JSON request; `token` defaults to the server's own (pass "" to send none)."""
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        bearer = self.token if token is None else token
        if bearer:
            request.add_header("Authorization", f"Bearer {bearer}")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def new_session(self) -> str:
        status, body = self.call("POST", "/api/sessions")
        assert status == 200, body
        return str(body["id"])

    def history(self, session: str) -> list[dict[str, Any]]:
        status, body = self.call("GET", f"/api/sessions/{session}")
        assert status == 200, body
        return list(body["history"])

    def turn_lines(self) -> list[dict[str, Any]]:
        lines = self.stderr_path.read_text().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{") and '"model_ms"' in line]

    def page(self, session: str | None = None, token: str | None = None) -> str:
        params = [f"{k}={v}" for k, v in (("token", token), ("session", session)) if v]
        return self.url + "/" + ("#" + "&".join(params) if params else "")

    def stop(self, kill: bool = False) -> None:
        if self.process.poll() is None:
            self.process.kill() if kill else self.process.terminate()
            self.process.wait(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._stderr.close()


@dataclass
class Stream:
    """What was read: numbered events in order, the comment lines, and the raw lines."""

    events: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


def read(
    url: str,
    session: str,
    *,
    until: Callable[[Stream], bool],
    last_event_id: int | None = None,
    token: str | None = None,
    timeout: float = 60.0,
) -> Stream:
    """Read the session's events until `until(stream)` holds. Every block must be exactly one
    `id:` line and one `data:` line holding one JSON object; anything else is a comment."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    headers = {}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    connection.request("GET", f"/api/sessions/{session}/events", headers=headers)
    response = connection.getresponse()
    assert response.status == 200, response.read()
    assert response.getheader("Content-Type", "").startswith("text/event-stream")
    stream = Stream()
    block: list[str] = []
    try:
        while not until(stream):
            line = response.readline().decode()
            assert line.endswith("\n"), f"the stream ended: {line!r}"
            line = line.rstrip("\n")
            stream.lines.append(line)
            if line.startswith(":"):
                assert not block, f"a comment inside an event block: {block}"
                stream.comments.append(line)
            elif line:
                block.append(line)
            elif block:
                stream.events.append(_event_of(block))
                block = []
    finally:
        connection.close()
    return stream


def _event_of(block: list[str]) -> tuple[int, dict[str, Any]]:
    assert len(block) == 2 and block[0].startswith("id: ") and block[1].startswith("data: "), block
    event = json.loads(block[1][len("data: ") :])
    assert isinstance(event, dict) and {"type", "run_id", "agent_id"} <= event.keys(), event
    return int(block[0][len("id: ") :]), event


def ended(stream: Stream) -> bool:
    """The latest run's agent_end has arrived."""
    return bool(stream.events) and stream.events[-1][1]["type"] == "agent_end"


def has(kind: str) -> Callable[[Stream], bool]:
    return lambda stream: any(event["type"] == kind for _, event in stream.events)
