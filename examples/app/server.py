"""A chat service to start from: sessions, live streaming, approvals, stop, restart.

    python examples/app/server.py [--port 8000] [--db chats.db] [--token SECRET] [--host 127.0.0.1]
    python examples/app/server.py --postgres DSN --broker redis://...   # runs on Celery workers


Standard library only (http.server). Without model settings it runs on agentcore's local model
server with a scripted demo model that decides by keywords in your message: `slow` → a slow tool
with progress, `delete` → a `delete_file` tool that needs your approval, `research` → a helper
agent used as a tool, anything else → a fast tool; then a streamed reply. Set OPENAI_BASE_URL,
OPENAI_API_KEY and AGENTCORE_MODEL (and --protocol) to talk to a real endpoint. The design is
explained in examples/app/README.md.
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import re
import secrets
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from agentcore import Agent, AgentError, ToolContext, tool
from agentcore.store import SQLiteStore
from agentcore.testing import ModelServer, Recorded
from agentcore.usage import cost

PAGE = Path(__file__).with_name("index.html")
MAX_MESSAGE_BYTES = 1024 * 1024  # a bigger message is refused (413) before anything is written
DISCARD_LIMIT = 16 * MAX_MESSAGE_BYTES  # an oversized body is read away up to this, never kept
HEARTBEAT_S = 15.0  # default --heartbeat: keeps proxies and browsers from closing an idle event stream
EVENT_LOG_LIMIT = 20_000  # events kept per session for Last-Event-ID replay (oldest dropped first)
SESSION_ID = re.compile(r"[A-Za-z0-9_-]{16,128}")

# Production settings (agentcore's defaults are "no limit"; a service must choose), one reason each.
PRODUCTION_CONFIG: dict[str, Any] = {
    # One `cat` of a 1 MB log is ~300k tokens: more than most context windows, and it stays in history.
    "max_tool_output": 32_000,
    # A model sometimes asks for dozens of calls in one round; cap the tool processes started at once.
    "max_tool_concurrency": 8,
    # A hung request would otherwise wait forever; this ends (and retries) one attempt.
    "request_timeout": 120.0,
    # A stream that stops sending bytes mid-reply is failed and retried instead of freezing the chat.
    "stream_idle_timeout": 30.0,
    # Retries are unbounded by default; give up after two minutes and tell the user.
    "retry_max_elapsed": 120.0,
    # End the run once the model answers without calling a tool (the chat waits for the user).
    "no_tool_rounds": 1,
}


FILE_NAME = re.compile(r"[\w./-]*\w\.\w+")
SECONDS = re.compile(r"slow (\d+)")


# --- tools of the demo ---------------------------------------------------------------------------


@tool
def word_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: Any text.
    """
    return len(text.split())


@tool
def slow_task(ctx: ToolContext, seconds: float = 5.0) -> Iterator[str]:
    """A long job that reports progress every half second.

    Args:
        seconds: How long the job takes.
    """
    steps = max(1, int(seconds / 0.5))
    for step in range(1, steps + 1):
        if ctx.cancel.wait(0.5):  # stop() sets it: end promptly, the loop records "interrupted"
            return
        yield f"progress {step}/{steps}\n"
    yield "slow task finished\n"


@tool(needs_approval=True)  # each call waits, in the store, for agent.decide() (README: Approvals)
def delete_file(path: str) -> str:
    """Delete a file (a demo: nothing is touched).

    Args:
        path: The file to delete.
    """
    return f"deleted {path} (demo: nothing was touched)"


TOOLS: list[Any] = [word_count, slow_task, delete_file]


def research_tool(config: dict[str, Any]) -> dict[str, Any]:
    """A sub-agent as a tool: its events reach the page as `sub_agent` events inside the call."""
    researcher = Agent(config={**config, "system": "You research a question in depth."}, tools=[word_count])
    return researcher.as_tool("research", "Research a question in depth with a helper agent")


# --- the scripted demo model ---------------------------------------------------------------------


def demo_model(recorded: Recorded) -> dict[str, Any]:
    """Decide like a model would, from keywords of the latest user message (chat protocol)."""
    messages = (recorded.body or {}).get("messages") or []
    last = messages[-1] if messages else {}
    user_text = next((_text_of(m) for m in reversed(messages) if m.get("role") == "user"), "")
    if last.get("role") == "tool":
        reply = (
            f"Here is what I found. You wrote: {user_text} — and the tool answered: {_text_of(last)}. "
            "That is all for this turn; ask me something else, or try slow, delete or research."
        )
        return {"text": reply, "chunk_size": 5, "chunk_delay": 0.03}
    lowered = user_text.lower()
    offered = {t.get("function", {}).get("name") for t in (recorded.body or {}).get("tools") or []}
    if "research" in lowered and "research" in offered:  # the helper agent has no research tool
        return {
            "tool_calls": [{"name": "research", "arguments": {"task": f"count the words of: {user_text}"}}]
        }
    if "slow" in lowered:
        named = SECONDS.search(lowered)  # "slow 30": a 30 s job
        seconds = min(float(named.group(1)), 600.0) if named else 5.0
        return {"tool_calls": [{"name": "slow_task", "arguments": {"seconds": seconds}}]}
    if "delete" in lowered:
        # The file the message names ("delete pending.txt"), else a placeholder.
        named = FILE_NAME.search(user_text)
        path = named.group(0) if named else "notes.txt"
        return {"tool_calls": [{"name": "delete_file", "arguments": {"path": path}}]}
    return {"tool_calls": [{"name": "word_count", "arguments": {"text": user_text}}]}


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def model_config(stack: ExitStack, protocol: str | None) -> dict[str, Any]:
    """A real endpoint from the environment, else the local demo model (no key, no network)."""
    if os.environ.get("OPENAI_BASE_URL"):
        return {
            "base_url": os.environ["OPENAI_BASE_URL"],
            "api_key": os.environ.get("OPENAI_API_KEY", ""),
            "model": os.environ.get("AGENTCORE_MODEL", "gpt-4o-mini"),
            "protocol": protocol or "chat",
        }
    server = stack.enter_context(ModelServer(default=demo_model))
    return {"base_url": server.base_url, "model": "demo", "protocol": "chat"}


def prices_config(path: str | None) -> dict[str, Any]:
    """config["prices"] from --prices FILE.json or the AGENTCORE_PRICES environment variable (JSON)."""
    text = Path(path).read_text(encoding="utf-8") if path else os.environ.get("AGENTCORE_PRICES")
    return {"prices": json.loads(text)} if text else {}


# --- live sessions -------------------------------------------------------------------------------


def record_decision(agent: Agent, call_id: str, allow: bool) -> bool:
    """Record a tab's decision on a pending call in the store; False when nothing waits for it
    (an unknown call, or one decided already — by another tab, or another web process)."""
    try:
        agent.decide(call_id, allow, reason=None if allow else "the user denied it")
    except AgentError as error:
        if error.kind in ("request", "conflict"):
            return False
        raise
    return True


class Live:
    """One session in this process: its agent and its numbered event log.

    Events are numbered and kept here so that any number of tabs can follow one run and a tab
    that (re)connects replays exactly what it missed. `mirror` is the history as the events have
    announced it, so a snapshot (history + the event id it reflects) never overlaps the replay.
    """

    def __init__(self, hub: Hub, session_id: str) -> None:
        self.hub = hub
        self.id = session_id
        self.cond = threading.Condition()
        self.events: list[tuple[int, str]] = []
        self.counter = 0
        self.mirror: list[dict[str, Any]] = hub.store.load(session_id)
        self.mirror_event = 0  # the id of the event that appended mirror's last entry
        self.busy = False
        self.stopped = False  # the user pressed stop: what is still queued waits for their next message
        self.run_id: str | None = None
        self.resume_next = False  # a decision came while a run was going: resume after it
        self.stats = TurnStats(self)
        self.agent = Agent(
            config=hub.config, tools=[*TOOLS, hub.research], session=hub.store.session(session_id)
        )
        self.agent.subscribe(self._on_event)

    # Events --------------------------------------------------------------------------------------

    def _on_event(self, event: dict[str, Any]) -> None:
        if event["type"] == "agent_start":
            self.run_id = event["run_id"]
        extra = self.stats.observe(event)
        self.publish(event)
        if extra is not None:
            self.publish(extra)

    def publish(self, event: dict[str, Any]) -> None:
        with self.cond:
            self.counter += 1
            self.events.append((self.counter, json.dumps(event)))
            if len(self.events) > EVENT_LOG_LIMIT:
                del self.events[: len(self.events) - EVENT_LOG_LIMIT]
            if event["type"] == "message_end":
                self.mirror.append(event["message"])
                self.mirror_event = self.counter
            self.cond.notify_all()

    def snapshot(self) -> dict[str, Any]:
        with self.cond:
            return {
                "id": self.id,
                "history": list(self.mirror),
                "last_event_id": self.mirror_event,
                "running": self.busy,
                # Calls waiting for a decision, from the store: they survive a restart.
                "pending": self.agent.pending(),
            }

    def events_after(self, last_id: int, timeout: float) -> list[tuple[int, str]]:
        """Events with an id above `last_id`, waiting up to `timeout` for one to arrive."""
        with self.cond:
            if last_id > self.counter:  # an id from an earlier process: replay what we have
                last_id = 0
            if self.counter <= last_id:
                self.cond.wait_for(lambda: self.counter > last_id or self.hub.closing, timeout)
            if not self.events:
                return []
            start = max(0, last_id - self.events[0][0] + 1)  # ids are consecutive
            return self.events[start:]

    def batches(self, last_id: int, timeout: float) -> Iterator[list[tuple[int, str]]]:
        """What the event stream writes: batches of events after `last_id`; [] after `timeout`."""
        while not self.hub.closing:
            batch = self.events_after(last_id, timeout)
            if batch:
                last_id = batch[-1][0]
            yield batch

    # Runs ----------------------------------------------------------------------------------------

    def post(self, text: str) -> str:
        """Start a run, or steer the running one (the run takes it before its next model request)."""
        with self.cond:
            if self.busy:
                self.agent.steer(text)
                return "steered"
            self.busy, self.stopped = True, False
        threading.Thread(target=self._work, args=(text,), name=f"run-{self.id[:8]}", daemon=True).start()
        return "started"

    def _work(self, text: Any) -> None:
        """Run `text` (None: resume after a decision), then whatever arrived meanwhile."""
        while True:
            try:
                self.agent.send(text) if text is not None else self.agent.resume()
            except AgentError as error:  # announced to the page by agent_end's `error`
                log({"session": self.id, "error": error.kind, "message": str(error)})
            with self.cond:
                # A steer that arrived after the run's last delivery point is still queued: run it
                # (unless the run was stopped: then agentcore delivers it with the next message).
                left = [] if self.stopped else self.agent.clear_queues()["steer"]
                resume, self.resume_next = self.resume_next, False
                if not left and not resume:
                    self.busy = False
                    self.cond.notify_all()
                    return
            if not left:
                text = None
                continue
            text = left[0]["content"]
            for message in left[1:]:
                self.agent.steer(message)

    def stop(self) -> bool:
        with self.cond:
            self.stopped = True
        return self.agent.stop()

    # Approvals -----------------------------------------------------------------------------------

    def answer(self, call_id: str, allow: bool) -> bool:
        """Record a tab's decision (in the store), then resume: the call runs, or is denied.

        False when nothing waits for that call (unknown, or decided already).
        """
        if not record_decision(self.agent, call_id, allow):
            return False
        with self.cond:
            if self.busy:
                self.resume_next = True  # the running run ends first; then the decision is acted on
                return True
            self.busy, self.stopped = True, False
        threading.Thread(target=self._work, args=(None,), name=f"resume-{self.id[:8]}", daemon=True).start()
        return True


class Remote:
    """One session whose runs go to Celery workers (--broker): its state and its events are the
    store's, so every web process serves the same session the same way (README: several processes).

    The event ids of the stream are the store's `seq`; the agent here only reads pending approvals
    and records decisions — it never runs.
    """

    def __init__(self, hub: Hub, session_id: str) -> None:
        self.hub = hub
        self.id = session_id
        self.agent = Agent(config=hub.config, session=hub.store.session(session_id))

    def snapshot(self) -> dict[str, Any]:
        store = self.hub.store
        history = store.load(self.id)
        return {
            "id": self.id,
            "history": history,
            "last_event_id": self._event_of(history),
            "running": store.lease_state(self.id).live,
            "pending": self.agent.pending(),
        }

    def _event_of(self, history: list[dict[str, Any]]) -> int:
        """The seq of the event that announced history's last entry (read after the history, so
        a replay from it repeats nothing and misses nothing); the newest seq when it is gone."""
        newest, wrote = 0, {}
        with self.hub.store.watch(self.id, after=0, timeout=0) as events:
            for event in events:
                newest = int(event["seq"])
                if event["type"] == "message_end":
                    wrote[event["message"].get("id")] = newest
        if not history:
            return 0
        return wrote.get(history[-1].get("id"), newest)

    def batches(self, last_id: int, timeout: float) -> Iterator[list[tuple[int, str]]]:
        while not self.hub.closing:
            with self.hub.store.watch(self.id, after=last_id, timeout=timeout) as events:
                quiet = True
                for event in events:
                    quiet, last_id = False, int(event["seq"])
                    yield [(last_id, json.dumps(event))]
            if quiet:
                yield []

    def post(self, text: str) -> str:
        """Steer the run going on a worker, or start one (on whichever worker takes it)."""
        if self.hub.store.lease_state(self.id).live:
            self.hub.store.steer(self.id, text)
            return "steered"
        self.hub.run_agent.start(self.id, text)
        return "started"

    def stop(self) -> bool:
        return bool(self.hub.store.stop(self.id, timeout=30.0))

    def answer(self, call_id: str, allow: bool) -> bool:
        if not record_decision(self.agent, call_id, allow):
            return False
        self.hub.run_agent.start(self.id)
        return True


class TurnStats:
    """Per turn: model time, tool times and tokens — published as a `turn_stats` event and logged.

    With prices configured (`--prices FILE.json` or AGENTCORE_PRICES), also the turn's cost: what
    `agentcore.usage.cost` makes of the entries the turn appended (its reply, retried attempts,
    a compaction, sub-agents), and the model that answered when it was a fallback.
    """

    def __init__(self, live: Live) -> None:
        self.live = live
        self.first_entry = 0  # where the turn's entries start in the live mirror
        self.turn_started = 0.0
        self.model_ms = 0.0
        self.tools_started = 0.0
        self.tool_starts: dict[str, float] = {}
        self.tools: list[dict[str, Any]] = []

    def observe(self, event: dict[str, Any]) -> dict[str, Any] | None:
        now = time.monotonic()
        kind = event["type"]
        if kind == "turn_start":
            self.turn_started, self.model_ms, self.tools = now, 0.0, []
            self.first_entry = len(self.live.mirror)
            self.tools_started = 0.0
        elif kind == "message_end" and event["message"].get("role") == "assistant":
            self.model_ms = (now - self.turn_started) * 1000
            self.tools_started = now
        elif kind == "tool_execution_start":
            self.tool_starts[event["tool_call_id"]] = now
        elif kind == "tool_execution_end":
            started = self.tool_starts.pop(event["tool_call_id"], now)
            call = {"tool_call_id": event["tool_call_id"], "tool_name": event["tool_name"]}
            self.tools.append({**call, "ms": _ms(now - started)})
        elif kind == "turn_end":
            return self._finish(event, now)
        return None

    def _finish(self, event: dict[str, Any], now: float) -> dict[str, Any]:
        usage = event["message"].get("usage") or {}
        tool_ms = _ms(now - self.tools_started) if event["tool_results"] else 0
        line = {
            "session": self.live.id,
            "step": event["step"],
            "model_ms": _ms(self.model_ms / 1000),
            "tool_ms": tool_ms,
            "input_tokens": usage.get("input_tokens", 0),
            "output_tokens": usage.get("output_tokens", 0),
        }
        prices = self.live.hub.config.get("prices")
        if prices:
            line["cost"] = cost(self.live.mirror[self.first_entry :], prices)
        if event["message"].get("fallback"):
            line["model"] = event["message"].get("model")
        log(line)
        # message_id names the turn's reply, so that a page that drew this turn from history
        # (opened while the turn was being written) replaces its line instead of adding one.
        ids = {
            "run_id": event["run_id"],
            "agent_id": event["agent_id"],
            "message_id": event["message"].get("id"),
        }
        return {"type": "turn_stats", **ids, **line, "tools": self.tools}


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def log(line: dict[str, Any]) -> None:
    print(json.dumps(line), file=sys.stderr, flush=True)


class CreatedSessions:
    """Ids handed out by POST /api/sessions, in a table of the same SQLite file.

    The store lists only sessions that hold entries; this keeps a new, still empty session
    across a restart too.
    """

    def __init__(self, path: str) -> None:
        self.lock = threading.Lock()
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS app_sessions (id TEXT PRIMARY KEY, created_at REAL NOT NULL)"
        )

    def add(self, session_id: str) -> None:
        with self.lock:
            self.db.execute("INSERT INTO app_sessions VALUES (?, ?)", (session_id, time.time()))

    def has(self, session_id: str) -> bool:
        with self.lock:
            row = self.db.execute("SELECT 1 FROM app_sessions WHERE id = ?", (session_id,)).fetchone()
        return row is not None

    def all(self) -> list[tuple[str, float]]:
        with self.lock:
            return [(str(i), float(t)) for i, t in self.db.execute("SELECT id, created_at FROM app_sessions")]

    def close(self) -> None:
        with self.lock:
            self.db.close()


class Hub:
    """Every session of this process; agents are made on first use and kept while the server runs."""

    def __init__(
        self, store: Any, created: CreatedSessions, config: dict[str, Any], run_agent: Any = None
    ) -> None:
        self.store = store
        self.run_agent = run_agent  # the Celery task (--broker): runs go to workers
        self.created = created
        self.config = config
        self.research = research_tool(config)
        self.lock = threading.Lock()
        self.live: dict[str, Live | Remote] = {}
        self.closing = False

    def create(self) -> str:
        session_id = secrets.token_urlsafe(24)  # 192 random bits: unguessable, safe in a URL
        self.created.add(session_id)
        return session_id

    def exists(self, session_id: str) -> bool:
        with self.lock:
            if session_id in self.live:
                return True
        return self.created.has(session_id) or bool(self.store.load(session_id))

    def get(self, session_id: str) -> Live | Remote:
        with self.lock:
            live = self.live.get(session_id)
            if live is None:
                kind = Live if self.run_agent is None else Remote
                live = self.live[session_id] = kind(self, session_id)
            return live

    def sessions(self) -> list[dict[str, Any]]:
        stored = self.store.sessions()
        known = {s["id"] for s in stored}
        fresh = [{"id": i, "length": 0, "updated_at": t} for i, t in self.created.all() if i not in known]
        return sorted(fresh + stored, key=lambda s: -float(s["updated_at"]))

    def close(self) -> None:
        self.closing = True
        with self.lock:
            lives = list(self.live.values())
        for live in lives:
            if isinstance(live, Live):
                with live.cond:
                    live.cond.notify_all()
            live.agent.close()


# --- HTTP ----------------------------------------------------------------------------------------


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class MethodNotAllowed(ApiError):
    def __init__(self, method: str, allowed: tuple[str, ...]) -> None:
        super().__init__(405, f"method {method} is not allowed here; use {' or '.join(allowed)}")
        self.allowed = allowed


Route = Callable[["Handler", "list[str]"], None]


class Handler(BaseHTTPRequestHandler):
    server: AppServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # stderr carries one JSON line per turn; access logs would drown it

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors (a method it has no do_X for, a malformed request line) as JSON,
        like every other answer of the API; an unsupported method is a 405."""
        if code == 501:
            code, message = 405, f"method {self.command} is not allowed"
        self.close_connection = True
        try:
            self._json(code, {"error": message or HTTPStatus(code).phrase})
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _dispatch(self, method: str) -> None:
        path = self.path.split("?", 1)[0]
        try:
            if path in ("/", "/index.html"):
                if method != "GET":
                    raise MethodNotAllowed(method, ("GET",))
                self._send(200, PAGE.read_bytes(), "text/html; charset=utf-8")
                return
            if not path.startswith("/api/"):
                raise ApiError(404, "not found")
            self._authorize()
            route, args = self._route(method, path.split("/")[2:])
            route(self, args)
        except MethodNotAllowed as error:
            self._json(405, {"error": str(error)}, {"Allow": ", ".join(error.allowed)})
        except ApiError as error:
            self._json(error.status, {"error": str(error)})
        except AgentError as error:  # bad input the library refused is the client's error
            status = 400 if error.kind == "request" else 500
            self._json(status, {"error": str(error), "kind": error.kind})
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _authorize(self) -> None:
        token = self.server.token
        if token is None:
            return
        given = self.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            raise ApiError(401, "missing or wrong bearer token")

    def _route(self, method: str, parts: list[str]) -> tuple[Route, list[str]]:
        if parts and parts[0] == "sessions":
            rest = parts[1:]
            if not rest or rest == [""]:
                return _pick(method, {"GET": Handler.list_sessions, "POST": Handler.create_session}), []
            session_id = rest[0]
            if not SESSION_ID.fullmatch(session_id) or not self.server.hub.exists(session_id):
                raise ApiError(404, "no such session")
            what = rest[1] if len(rest) > 1 else ""
            expected = {"": 1, "messages": 2, "events": 2, "stop": 2, "approvals": 3}
            if what in SESSION_ROUTES and len(rest) == expected[what]:
                return _pick(method, SESSION_ROUTES[what]), rest
        raise ApiError(404, "not found")

    # Routes --------------------------------------------------------------------------------------

    def list_sessions(self, _args: list[str]) -> None:
        self._json(200, {"sessions": self.server.hub.sessions()})

    def create_session(self, _args: list[str]) -> None:
        self._json(200, {"id": self.server.hub.create()})

    def show_session(self, args: list[str]) -> None:
        self._json(200, self.server.hub.get(args[0]).snapshot())

    def post_message(self, args: list[str]) -> None:
        body = self._body()
        text = body.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ApiError(400, '"text" must be a non-empty string')
        try:
            size = len(text.encode())
        except UnicodeEncodeError:  # JSON's "\ud83d": half of an emoji, which no model can be sent
            raise ApiError(400, '"text" holds a lone surrogate (half of a UTF-16 pair): not valid Unicode')
        if size > MAX_MESSAGE_BYTES:
            raise ApiError(413, "the message is larger than 1 MB")
        self._json(202, {"status": self.server.hub.get(args[0]).post(text)})

    def stop_run(self, args: list[str]) -> None:
        self._json(200, {"stopped": self.server.hub.get(args[0]).stop()})

    def answer_approval(self, args: list[str]) -> None:
        allow = self._body().get("allow")
        if not isinstance(allow, bool):
            raise ApiError(400, '"allow" must be true or false')
        if not self.server.hub.get(args[0]).answer(args[2], allow):
            raise ApiError(404, "no pending approval for this tool call")
        self._json(200, {"allow": allow})

    def stream_events(self, args: list[str]) -> None:
        """Server-Sent Events: `id:` + one agent event per `data:`; comments as heartbeats."""
        live = self.server.hub.get(args[0])
        try:
            last_id = int(self.headers.get("Last-Event-ID") or 0)
        except ValueError:
            raise ApiError(400, "Last-Event-ID must be an integer")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Accel-Buffering", "no")  # nginx would otherwise hold events back
        self.end_headers()
        self.close_connection = True
        self.wfile.write(b": connected\n\n")
        self.wfile.flush()
        for batch in live.batches(last_id, self.server.heartbeat):
            if not batch:
                self.wfile.write(b": heartbeat\n\n")
            for number, data in batch:
                self.wfile.write(f"id: {number}\ndata: {data}\n\n".encode())
            self.wfile.flush()

    # Helpers -------------------------------------------------------------------------------------

    def _body(self) -> dict[str, Any]:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise ApiError(400, "bad Content-Length")
        if length > MAX_MESSAGE_BYTES + 4096:
            self._discard(length)
            raise ApiError(413, "the request body is larger than 1 MB")
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            raise ApiError(400, "the body must be JSON")
        if not isinstance(body, dict):
            raise ApiError(400, "the body must be a JSON object")
        return body

    def _discard(self, length: int) -> None:
        """Read an oversized body away without keeping it, so the client sees the 413 rather than a
        reset connection; past DISCARD_LIMIT the connection is just closed."""
        self.close_connection = True
        left = min(length, DISCARD_LIMIT)
        while left > 0:
            chunk = self.rfile.read(min(left, 65536))
            if not chunk:
                return
            left -= len(chunk)

    def _json(self, status: int, body: dict[str, Any], extra: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(body).encode(), "application/json", extra)

    def _send(self, status: int, data: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(data)


def _pick(method: str, by_method: dict[str, Route]) -> Route:
    if method not in by_method:
        raise MethodNotAllowed(method, tuple(by_method))
    return by_method[method]


# /api/sessions/<id>/<what>: the handler of each method.
SESSION_ROUTES: dict[str, dict[str, Route]] = {
    "": {"GET": Handler.show_session},
    "messages": {"POST": Handler.post_message},
    "events": {"GET": Handler.stream_events},
    "stop": {"POST": Handler.stop_run},
    "approvals": {"POST": Handler.answer_approval},
}


class AppServer(ThreadingHTTPServer):
    daemon_threads = True  # an open event stream must not keep the process alive at shutdown

    def __init__(self, address: tuple[str, int], hub: Hub, token: str | None, heartbeat: float) -> None:
        super().__init__(address, Handler)
        self.hub = hub
        self.token = token
        self.heartbeat = heartbeat


def open_store(db: str, postgres: str | None) -> Any:
    if postgres is None:
        return SQLiteStore(db)
    from agentcore.store import PostgresStore

    return PostgresStore(postgres)


def run_agent(broker: str | None, postgres: str | None) -> Any:
    """The Celery task of workers.py (--broker), which the workers run; None: runs stay here."""
    if broker is None:
        return None
    os.environ["APP_BROKER"], os.environ["APP_POSTGRES"] = broker, postgres or ""
    import workers  # this folder is on sys.path (the script's own)

    return workers.run_agent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default: this machine only)")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--db", default="chats.db", help="SQLite file holding the sessions")
    parser.add_argument("--postgres", default=None, help="keep the sessions in PostgreSQL (DSN) instead")
    parser.add_argument(
        "--broker",
        default=None,
        help="with --postgres: runs go to Celery workers (workers.py) via this broker",
    )
    parser.add_argument("--token", default=None, help="require Authorization: Bearer TOKEN on /api/")
    parser.add_argument("--heartbeat", type=float, default=HEARTBEAT_S, help="seconds between SSE heartbeats")
    parser.add_argument("--protocol", default=None, help="the real endpoint's protocol")
    parser.add_argument(
        "--prices",
        default=None,
        help="JSON file {model: {input, output, ...}} per million tokens: shows cost",
    )
    args = parser.parse_args(argv)
    if args.broker and not args.postgres:
        parser.error("--broker needs --postgres: web processes and workers share the sessions there")
    with ExitStack() as stack:
        config = {**model_config(stack, args.protocol), **PRODUCTION_CONFIG, **prices_config(args.prices)}
        store = open_store(args.db, args.postgres)
        stack.callback(store.close)
        created = CreatedSessions(args.db)
        stack.callback(created.close)
        hub = Hub(store, created, config, run_agent(args.broker, args.postgres))
        stack.callback(hub.close)
        server = AppServer((args.host, args.port), hub, args.token, args.heartbeat)
        stack.callback(server.server_close)
        # SIGTERM (systemd, docker stop) unwinds like Ctrl-C: running calls are closed as interrupted.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        print(f"serving on http://{args.host}:{server.server_address[1]}/", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
