"""The phases of a model request × the ways real servers handle connections, as scenarios.

    with scenario("stream", "tls-close", cert) as s:
        agent = Agent(config=s.config, callbacks=s.callbacks)
        ... start agent.send(s.input) on a thread ...
        assert s.reached(10)          # the request is now in that phase, and stays there
        agent.stop()

Every scenario stalls forever in its phase (until the client leaves), so a send that ends has
been ended by its cancellation, never by the server. Shared by tests/wire/test_cancel_phases.py,
its Ctrl-C child process and bench/cancel_latency.py.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agentcore.testing import ModelServer
from agentcore.testing.peers import Blackhole, SilentPeer

# ModelServer options per server behaviour; "tls" ones get the certificate added.
BEHAVIOURS: dict[str, dict[str, Any]] = {
    "keep-alive": {},
    "close": {"keep_alive": False},
    "http1.0": {"http10": True},
    "unframed": {"chunked": False, "content_length": False},
    "no-sse-type": {"event_stream_type": None},
    "tls": {"tls": True},
    "tls-close": {"tls": True, "keep_alive": False},
}
# Phases before the server answers do not depend on how it frames its answer: plain or TLS only.
EARLY_PHASES = ("connect", "send-body")
LATE_PHASES = ("headers", "stream", "body", "retry-wait")
PHASES = EARLY_PHASES + LATE_PHASES
BIG_INPUT_CHARS = 8 * 1024 * 1024  # more than loopback buffers hold: send() must block
LONG_TEXT = "The quick brown fox jumps over the lazy dog. " * 40


def cases() -> list[tuple[str, str]]:
    """(phase, behaviour) pairs worth running."""
    out = [(phase, name) for phase in EARLY_PHASES for name in ("keep-alive", "tls")]
    out += [(phase, name) for phase in LATE_PHASES for name in BEHAVIOURS]
    return out


@dataclass
class Scenario:
    base_url: str
    config: dict[str, Any]
    input: str
    reached: Callable[[float], bool]
    callbacks: dict[str, Any] = field(default_factory=dict)


@contextlib.contextmanager
def scenario(phase: str, behaviour: str, cert: tuple[str, str] | None) -> Iterator[Scenario]:
    options = dict(BEHAVIOURS[behaviour])
    wants_tls = options.pop("tls", False)
    if wants_tls and cert is None:
        raise RuntimeError("a TLS behaviour needs a certificate")
    tls = cert if wants_tls else None
    base = {"model": "m", "retry_base_delay": 0.01, "retry_max_delay": 0.05}
    if phase == "connect":
        with _connect_stall(tls) as (url, reached):
            yield Scenario(url, {**base, "base_url": url}, "hi", reached)
        return
    if phase == "send-body":
        with SilentPeer(tls=tls) as peer:
            config = {**base, "base_url": peer.base_url, "max_context_tokens": float("inf")}
            yield Scenario(peer.base_url, config, "x" * BIG_INPUT_CHARS, peer.heard.wait)
        return
    item, extra = _late_item(phase)
    with ModelServer([item], tls=tls, **options) as server:
        config = {**base, **extra, "base_url": server.base_url}
        if phase == "retry-wait":
            waiting = threading.Event()
            yield Scenario(server.base_url, config, "hi", waiting.wait, {"on_retry": lambda _: waiting.set()})
        else:
            yield Scenario(server.base_url, config, "hi", server.stalled.wait)


def _late_item(phase: str) -> tuple[dict[str, Any], dict[str, Any]]:
    if phase == "headers":
        return {"stall_before_headers": True}, {}
    if phase == "stream":
        return {"text": LONG_TEXT, "stall_after": 3}, {"stream": True}
    if phase == "body":
        return {"text": LONG_TEXT, "stall_after": 40}, {"stream": False}
    # A failure whose retry waits a minute: the send must end during that wait.
    return {"status": 503, "error": "overloaded"}, {"retry_base_delay": 60.0, "retry_max_delay": 60.0}


@contextlib.contextmanager
def _connect_stall(tls: tuple[str, str] | None) -> Iterator[tuple[str, Callable[[float], bool]]]:
    if tls is None:
        with Blackhole() as hole:
            yield hole.base_url, hole.wait_connecting
    else:
        # TCP connects at once; the TLS handshake (part of connecting) never gets an answer.
        with SilentPeer(tls=tls, handshake=False) as peer:
            yield peer.base_url, peer.heard.wait


def history_problems(history: list[dict[str, Any]], first_input: str) -> list[str]:
    """What is wrong with a history after a cancelled send (empty list: nothing)."""
    problems: list[str] = []
    if not history or history[0].get("role") != "user" or history[0].get("content") != first_input:
        problems.append("the first entry is not the user's input")
    calls: list[str] = []
    answered: list[str] = []
    for index, message in enumerate(history):
        if message.get("role") not in ("user", "assistant", "tool", "compact"):
            problems.append(f"entry {index} has role {message.get('role')!r}")
        if not isinstance(message.get("id"), str):
            problems.append(f"entry {index} has no id")
        parts = message.get("content") if isinstance(message.get("content"), list) else []
        calls += [p["tool_call_id"] for p in parts if p.get("type") == "tool-call"]
        answered += [p["tool_call_id"] for p in parts if p.get("type") == "tool-result"]
    if sorted(calls) != sorted(answered):
        problems.append(f"calls {calls} answered by {answered}")
    return problems
