"""OpenTelemetry spans for agent runs, following the GenAI semantic conventions.

    from agentcore import telemetry
    telemetry.instrument()                      # the global tracer provider; or tracer_provider=
    agent.send("...")                           # invoke_agent → chat {model} / execute_tool {name}
    telemetry.uninstrument()

Extra `agentcore[otel]` (opentelemetry-api + opentelemetry-sdk); `import agentcore` never loads
it. The spans are fed from the run events (events.observe): the same points that feed the
callbacks and listeners, plus the internal `chat_*` points (one per HTTP attempt), so a retried
request shows as failed `chat` spans before the one that succeeded; a compaction's requests
(`agentcore.request = "compact"`) too. Parents are set explicitly: `chat` and `execute_tool` under
their run's `invoke_agent` whatever thread they run on, and a sub-agent's `invoke_agent` under the
`execute_tool` span of the call that started it. While a call runs, its `execute_tool` span is the
current span on the thread running it, so spans the tool starts itself nest under it. Message
contents, tool arguments and results are recorded only with `capture_content=True`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from . import events as _events
from ._utils.tracecontext import set_traceparent
from .connection import Connection
from .errors import AgentError

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = ["instrument", "uninstrument"]

_INSTALL = "pip install 'agentcore[otel]'"
# gen_ai.provider.name per protocol (the well-known values of the conventions).
_PROVIDERS = {"chat": "openai", "responses": "openai", "anthropic": "anthropic", "gemini": "gcp.gemini"}

_state_lock = threading.Lock()
_remove: Callable[[], None] | None = None


def instrument(tracer_provider: TracerProvider | None = None, capture_content: bool = False) -> None:
    """Emit spans for every agent run started from now on (replacing an earlier instrument()).

    Raises:
        AgentError: kind "config" when OpenTelemetry is not installed.
    """
    global _remove
    trace = _otel()
    tracer = trace.get_tracer("agentcore", _version(), tracer_provider=tracer_provider)
    spans = _Spans(tracer, capture_content=bool(capture_content))
    with _state_lock:
        if _remove is not None:
            _remove()
        _remove = _events.observe(spans.observe)


def uninstrument() -> None:
    """Stop emitting spans for runs started from now on (running ones finish their spans)."""
    global _remove
    with _state_lock:
        if _remove is not None:
            _remove()
            _remove = None


def _otel() -> Any:
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise AgentError(
            f"agentcore.telemetry needs OpenTelemetry, which is not installed: {_INSTALL}",
            kind="config",
            cause=exc,
        ) from exc
    return trace


def _version() -> str:
    import importlib

    package = importlib.import_module(__name__.rpartition(".")[0])  # agentcore, or its vendored name
    return str(getattr(package, "__version__", ""))


class _Spans:
    """The open spans of every instrumented run, keyed by run id (and tool call id)."""

    def __init__(self, tracer: Tracer, *, capture_content: bool) -> None:
        from opentelemetry import trace

        self._trace = trace
        self._tracer = tracer
        self._content = capture_content
        self._lock = threading.Lock()
        self._runs: dict[str, Span] = {}
        self._chats: dict[str, Span] = {}
        self._tools: dict[tuple[str, str], Span] = {}
        # The context tokens of execute_tool spans made current on the threads running the calls.
        self._current: dict[tuple[str, str], Any] = {}
        self._handlers: dict[str, Callable[[Any, dict[str, Any]], None]] = {
            "agent_start": self._agent_start,
            "agent_end": self._agent_end,
            "chat_start": self._chat_start,
            "chat_end": self._chat_end,
            "chat_error": self._chat_error,
            "tool_execution_start": self._tool_start,
            "tool_execution_end": self._tool_end,
            "tool_enter": self._tool_enter,
            "tool_leave": self._tool_leave,
            "retry": self._retry,
        }

    def observe(self, emitter: Any, event: dict[str, Any]) -> None:
        handler = self._handlers.get(event["type"])
        if handler is not None:
            handler(emitter, event)

    # ------------------------------------------------------------ invoke_agent

    def _agent_start(self, emitter: Any, event: dict[str, Any]) -> None:
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.id": emitter.agent_id,
            "agentcore.run.id": event["run_id"],
            **_model_attributes(Connection.of(emitter.config)),
        }
        parent = emitter.parent
        if parent is not None:
            attributes["gen_ai.agent.name"] = parent.call.name
        span = self._tracer.start_span(
            "invoke_agent",
            context=self._parent_context(parent),
            kind=self._trace.SpanKind.INTERNAL,
            attributes=attributes,
        )
        with self._lock:
            self._runs[event["run_id"]] = span

    def _parent_context(self, parent: Any) -> Any:
        """A sub-agent run nests under its call's execute_tool span; others under the caller's context."""
        if parent is None:
            return None
        with self._lock:
            span = self._tools.get((parent.events.run_id, parent.call.id))
        return self._trace.set_span_in_context(span) if span is not None else None

    def _agent_end(self, emitter: Any, event: dict[str, Any]) -> None:
        run_id = event["run_id"]
        with self._lock:
            span = self._runs.pop(run_id, None)
            chat = self._chats.pop(run_id, None)
            tools = [key for key in self._tools if key[0] == run_id]
            left = [self._tools.pop(key) for key in tools]
        for open_span in [s for s in (chat, *left) if s is not None]:
            open_span.end()
        if span is None:
            return
        usage = event.get("usage") or {}
        span.set_attribute("gen_ai.usage.input_tokens", int(usage.get("input_tokens", 0)))
        span.set_attribute("gen_ai.usage.output_tokens", int(usage.get("output_tokens", 0)))
        if self._content and event.get("text"):
            span.set_attribute("gen_ai.output.messages", _json([_text_message(str(event["text"]))]))
        error = event.get("error")
        if error is not None:
            self._fail(span, error)
        span.end()

    # ------------------------------------------------------------ chat {model}

    def _chat_start(self, emitter: Any, event: dict[str, Any]) -> None:
        # Each attempt names its connection (a compaction's may be another model: config["compact"]).
        connection = event.get("connection") or Connection.of(emitter.config)
        attributes = {"gen_ai.operation.name": "chat", **_model_attributes(connection)}
        if event.get("request"):
            attributes["agentcore.request"] = str(event["request"])
        if self._content:
            attributes["gen_ai.input.messages"] = _json(event.get("messages", []))
            if event.get("system"):
                attributes["gen_ai.system_instructions"] = _json(
                    [{"type": "text", "content": event["system"]}]
                )
            if event.get("tools"):
                attributes["gen_ai.tool.definitions"] = _json(event["tools"])
        model = attributes.get("gen_ai.request.model", "")
        span = self._tracer.start_span(
            f"chat {model}".strip(),
            context=self._run_context(event["run_id"]),
            kind=self._trace.SpanKind.CLIENT,
            attributes=attributes,
        )
        with self._lock:
            previous = self._chats.pop(event["run_id"], None)
            self._chats[event["run_id"]] = span
        if previous is not None:
            previous.end()

    def _chat_end(self, emitter: Any, event: dict[str, Any]) -> None:
        with self._lock:
            span = self._chats.pop(event["run_id"], None)
        if span is None:
            return
        result = event["result"]
        span.set_attribute("gen_ai.response.finish_reasons", [str(result.finish_reason)])
        span.set_attribute("gen_ai.usage.input_tokens", int(result.usage.input_tokens))
        span.set_attribute("gen_ai.usage.output_tokens", int(result.usage.output_tokens))
        if self._content:
            span.set_attribute("gen_ai.output.messages", _json([result.message]))
        span.end()

    def _chat_error(self, emitter: Any, event: dict[str, Any]) -> None:
        with self._lock:
            span = self._chats.pop(event["run_id"], None)
        if span is not None:
            self._fail(span, event["error"])
            span.end()

    def _retry(self, emitter: Any, event: dict[str, Any]) -> None:
        with self._lock:
            span = self._runs.get(event["run_id"])
        if span is not None:
            error = event.get("error") or {}
            span.add_event(
                "retry",
                {"attempt": int(event.get("attempt") or 0), "error.type": str(error.get("kind", "unknown"))},
            )

    # ------------------------------------------------------------ execute_tool {name}

    def _tool_start(self, emitter: Any, event: dict[str, Any]) -> None:
        span = self._start_tool(event)
        if self._content:
            span.set_attribute("gen_ai.tool.call.arguments", _json(event.get("input")))
        with self._lock:
            self._tools[(event["run_id"], event["tool_call_id"])] = span
        # Observers run on the call's own thread: a tool process started from here gets it.
        set_traceparent(_traceparent(span))

    def _tool_enter(self, emitter: Any, event: dict[str, Any]) -> None:
        """The call's span is the current span on its thread: a tool's own spans nest under it."""
        from opentelemetry import context

        key = (event["run_id"], event["tool_call_id"])
        with self._lock:
            span = self._tools.get(key)
        if span is not None:
            token = context.attach(self._trace.set_span_in_context(span))
            with self._lock:
                self._current[key] = token

    def _tool_leave(self, emitter: Any, event: dict[str, Any]) -> None:
        from opentelemetry import context

        with self._lock:
            token = self._current.pop((event["run_id"], event["tool_call_id"]), None)
        if token is not None:
            context.detach(token)

    def _start_tool(self, event: dict[str, Any]) -> Span:
        name = str(event["tool_name"])
        return self._tracer.start_span(
            f"execute_tool {name}",
            context=self._run_context(event["run_id"]),
            kind=self._trace.SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": str(event["tool_call_id"]),
                "gen_ai.tool.type": "function",
            },
        )

    def _tool_end(self, emitter: Any, event: dict[str, Any]) -> None:
        with self._lock:
            span = self._tools.pop((event["run_id"], event["tool_call_id"]), None)
        set_traceparent(None)
        if span is None:
            # Denied, invalid or unknown calls never start: they still get their (empty) span.
            span = self._start_tool(event)
        result: Mapping[str, Any] = event.get("result") or {}
        if self._content:
            span.set_attribute("gen_ai.tool.call.result", _json(result.get("output")))
        kind = _tool_error(result)
        if kind is not None:
            self._fail(span, {"kind": kind, "message": _output_text(result)})
        span.end()

    # ------------------------------------------------------------ helpers

    def _run_context(self, run_id: str) -> Any:
        with self._lock:
            span = self._runs.get(run_id)
        return self._trace.set_span_in_context(span) if span is not None else None

    def _fail(self, span: Span, error: Mapping[str, Any]) -> None:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", str(error.get("kind") or "unknown"))
        span.set_status(Status(StatusCode.ERROR, str(error.get("message") or "")))


def _model_attributes(connection: Connection) -> dict[str, Any]:
    """gen_ai.provider.name, gen_ai.request.model, server.address / port of a connection."""
    attributes: dict[str, Any] = {}
    model = connection.model
    if isinstance(model, str):
        attributes["gen_ai.provider.name"] = _PROVIDERS.get(connection.protocol, "openai")
        attributes["gen_ai.request.model"] = model
    elif model is not None:  # an adapter object
        attributes["gen_ai.provider.name"] = type(model).__name__
        attributes["gen_ai.request.model"] = str(getattr(model, "model", "") or type(model).__name__)
    base_url = connection.base_url
    if isinstance(base_url, str) and base_url:
        parts = urlsplit(base_url)
        if parts.hostname:
            attributes["server.address"] = parts.hostname
        if parts.port:
            attributes["server.port"] = parts.port
    return attributes


def _traceparent(span: Span) -> str | None:
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get("traceparent")


def _tool_error(result: Mapping[str, Any]) -> str | None:
    """error.type of a tool result: "aborted" (interrupted), "timeout", "tool" (failed), else None."""
    if result.get("interrupted"):
        return "aborted"
    error = result.get("error")
    if not error:
        return None
    return "timeout" if error == "timeout" else "tool"


def _output_text(result: Mapping[str, Any]) -> str:
    output = result.get("output")
    if isinstance(output, Mapping) and isinstance(output.get("value"), str):
        return str(output["value"])[:300]
    return ""


def _text_message(text: str) -> dict[str, Any]:
    return {"role": "assistant", "parts": [{"type": "text", "content": text}]}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
