"""The W3C trace context of the tool call a thread runs, for tool processes.

    set_traceparent("00-<trace id>-<span id>-01")   # telemetry.py, when a call's span starts
    traceparent()                                   # tools/runner.py, into the call message

A context variable (threads spawned by the library inherit it), so parallel calls on their own
threads never see each other's value. The tool process sets `TRACEPARENT` for the call's
duration (the environment-variable carrier of OpenTelemetry's context propagation).
"""

from __future__ import annotations

import contextvars

_traceparent: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "agentcore_traceparent", default=None
)


def traceparent() -> str | None:
    return _traceparent.get()


def set_traceparent(value: str | None) -> None:
    _traceparent.set(value)
