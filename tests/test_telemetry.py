"""OpenTelemetry spans (API.md §Logging and telemetry), read back with the SDK's in-memory exporter."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import agentcore
from agentcore import Agent, AgentError, telemetry, tool
from agentcore.testing import ModelServer

MODEL = "test-model"  # as conftest's agents; importing conftest is ambiguous beside tests/*/conftest.py
FAST_RETRY = {"retry_base_delay": 0.01, "retry_max_delay": 0.05}

KEY = "sk-telemetry-secret-123456"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    telemetry.instrument(tracer_provider=provider)
    yield memory
    telemetry.uninstrument()


def _agent(server: ModelServer, tools: Any = None, callbacks: Any = None, **extra: Any) -> Agent:
    config = {"base_url": server.base_url, "model": MODEL, "api_key": KEY, "no_tool_rounds": 1, **FAST_RETRY}
    return Agent(config={**config, **extra}, tools=tools, callbacks=callbacks)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _named(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def _parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def _id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def test_a_run_with_a_tool_call(server: ModelServer, exporter: InMemorySpanExporter) -> None:
    server.add(
        {
            "tool_calls": [{"name": "add", "id": "c1", "arguments": {"a": 2, "b": 3}}],
            "usage": {"input_tokens": 11, "output_tokens": 4},
        },
        {"text": "5", "usage": {"input_tokens": 20, "output_tokens": 1}},
    )
    with _agent(server, tools=[add]) as agent:
        agent.send("What is 2 + 3?")
        spans = exporter.get_finished_spans()
        assert sorted(s.name for s in spans) == [
            "chat test-model",
            "chat test-model",
            "execute_tool add",
            "invoke_agent",
        ]
        (run,) = _named(spans, "invoke_agent")
        chats = _named(spans, "chat ")
        (call,) = _named(spans, "execute_tool")
        assert run.parent is None
        assert all(_parent_id(s) == _id(run) for s in [*chats, call])
        assert run.attributes is not None and run.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert run.attributes["gen_ai.agent.id"] == agent.id
        assert run.attributes["gen_ai.usage.input_tokens"] == 31
        assert run.attributes["gen_ai.usage.output_tokens"] == 5
        first, second = sorted(chats, key=lambda s: s.start_time or 0)
        assert first.attributes is not None and second.attributes is not None
        assert first.attributes["gen_ai.operation.name"] == "chat"
        assert first.attributes["gen_ai.provider.name"] == "openai"
        assert first.attributes["gen_ai.request.model"] == MODEL
        assert first.attributes["server.address"] == "127.0.0.1"
        assert tuple(first.attributes["gen_ai.response.finish_reasons"]) == ("tool_calls",)
        assert tuple(second.attributes["gen_ai.response.finish_reasons"]) == ("stop",)
        assert first.attributes["gen_ai.usage.input_tokens"] == 11
        assert first.attributes["gen_ai.usage.output_tokens"] == 4
        assert call.attributes is not None
        assert call.attributes["gen_ai.operation.name"] == "execute_tool"
        assert call.attributes["gen_ai.tool.name"] == "add"
        assert call.attributes["gen_ai.tool.call.id"] == "c1"
        # The call ran between the two requests, and every span is ended inside the run's.
        assert first.end_time <= call.start_time and call.end_time <= second.start_time  # type: ignore[operator]
        assert all(s.end_time <= run.end_time for s in spans)  # type: ignore[operator]
        # No content by default, and never the API key.
        for span in spans:
            attributes = dict(span.attributes or {})
            assert not any(
                k.endswith(("messages", ".arguments", ".result", "instructions")) for k in attributes
            )
            assert KEY not in json.dumps(attributes, default=str)


def test_content_only_when_asked(server: ModelServer, exporter: InMemorySpanExporter) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    telemetry.instrument(tracer_provider=provider, capture_content=True)
    server.add({"tool_calls": [{"name": "add", "id": "c1", "arguments": {"a": 2, "b": 3}}]}, "five")
    with _agent(server, tools=[add], system="Be brief.") as agent:
        agent.send("What is 2 + 3?")
    spans = memory.get_finished_spans()
    first = sorted(_named(spans, "chat "), key=lambda s: s.start_time or 0)[0]
    assert first.attributes is not None
    assert "What is 2 + 3?" in str(first.attributes["gen_ai.input.messages"])
    assert "Be brief." in str(first.attributes["gen_ai.system_instructions"])
    assert '"add"' in str(first.attributes["gen_ai.output.messages"])
    (call,) = _named(spans, "execute_tool")
    assert call.attributes is not None
    assert json.loads(str(call.attributes["gen_ai.tool.call.arguments"])) == {"a": 2, "b": 3}
    assert json.loads(str(call.attributes["gen_ai.tool.call.result"])) == {"type": "json", "value": 5}
    assert not exporter.get_finished_spans()  # instrument() replaced the earlier instrumentation


def test_retries_are_failed_chat_spans(server: ModelServer, exporter: InMemorySpanExporter) -> None:
    server.add({"status": 503, "error": "busy"}, {"status": 429, "error": "slow down"}, "ok")
    with _agent(server) as agent:
        assert agent.send("hi").text == "ok"
    spans = exporter.get_finished_spans()
    (run,) = _named(spans, "invoke_agent")
    chats = sorted(_named(spans, "chat "), key=lambda s: s.start_time or 0)
    assert len(chats) == 3 and all(_parent_id(s) == _id(run) for s in chats)
    assert [dict(s.attributes or {}).get("error.type") for s in chats] == ["server", "limit", None]
    assert [s.status.status_code for s in chats] == [StatusCode.ERROR, StatusCode.ERROR, StatusCode.UNSET]
    assert run.status.status_code is StatusCode.UNSET
    assert [e.name for e in run.events] == ["retry", "retry"]


def test_a_failed_run(server: ModelServer, exporter: InMemorySpanExporter) -> None:
    server.add({"status": 401, "error": "bad key"})
    with _agent(server, retry={"skip_codes": [401]}) as agent, pytest.raises(AgentError) as caught:
        agent.send("hi")
    spans = exporter.get_finished_spans()
    (run,) = _named(spans, "invoke_agent")
    (chat,) = _named(spans, "chat ")
    for span in (run, chat):
        assert span.status.status_code is StatusCode.ERROR
        assert dict(span.attributes or {})["error.type"] == caught.value.kind == "auth"


def test_tool_errors_and_parallel_calls_on_tool_threads(
    server: ModelServer, exporter: InMemorySpanExporter
) -> None:
    threads: set[int] = set()
    both = threading.Barrier(2, timeout=10)

    @tool
    def slow(n: int) -> int:
        """Wait for the other call."""
        threads.add(threading.get_ident())
        both.wait()
        return n

    @tool
    def broken() -> str:
        """Fails."""
        raise RuntimeError("kaput")

    calls = [
        {"name": "slow", "id": "s1", "arguments": {"n": 1}},
        {"name": "slow", "id": "s2", "arguments": {"n": 2}},
        {"name": "broken", "id": "b1", "arguments": {}},
        {"name": "missing", "id": "m1", "arguments": {}},
    ]
    server.add({"tool_calls": calls}, "done")
    with _agent(server, tools=[slow, broken]) as agent:
        agent.send("go")
    spans = exporter.get_finished_spans()
    (run,) = _named(spans, "invoke_agent")
    tools = {dict(s.attributes or {})["gen_ai.tool.call.id"]: s for s in _named(spans, "execute_tool")}
    assert set(tools) == {"s1", "s2", "b1", "m1"}
    assert all(_parent_id(s) == _id(run) for s in tools.values())
    assert len(threads) == 2  # the two slow calls ran on tool threads of their own
    assert "error.type" not in dict(tools["s1"].attributes or {})
    assert dict(tools["b1"].attributes or {})["error.type"] == "tool"
    assert dict(tools["m1"].attributes or {})["error.type"] == "tool"  # an unknown tool still gets its span
    assert tools["m1"].name == "execute_tool missing"


def test_a_tools_own_spans_nest_under_its_call_span(
    server: ModelServer, exporter: InMemorySpanExporter
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = provider.get_tracer("app")
    both = threading.Barrier(2, timeout=10)

    @tool
    def lookup(key: str) -> str:
        """Look a key up (with a span of the tool's own)."""
        both.wait()  # the two calls run at once, each on its own tool thread
        with app.start_as_current_span(f"lookup {key}"):
            return key

    @tool
    def single() -> str:
        """Runs alone, so inline on the run's thread."""
        with app.start_as_current_span("single"):
            return "ok"

    server.add(
        {
            "tool_calls": [
                {"name": "lookup", "id": "k1", "arguments": {"key": "a"}},
                {"name": "lookup", "id": "k2", "arguments": {"key": "b"}},
            ]
        },
        {"tool_calls": [{"name": "single", "id": "s1", "arguments": {}}]},
        "done",
    )
    current: list[int] = []  # the current span on the run's thread at each request

    def on_llm_start(payload: Any) -> None:
        current.append(trace.get_current_span().get_span_context().span_id)

    callbacks = {"on_llm_start": on_llm_start}
    with _agent(server, tools=[lookup, single], callbacks=callbacks) as agent:
        agent.send("go")
        spans = exporter.get_finished_spans()
        calls = {dict(s.attributes or {})["gen_ai.tool.call.id"]: s for s in _named(spans, "execute_tool")}
        own = {s.name: s for s in spans if s.instrumentation_scope and s.instrumentation_scope.name == "app"}
        assert set(own) == {"lookup a", "lookup b", "single"}
        assert _parent_id(own["lookup a"]) == _id(calls["k1"])
        assert _parent_id(own["lookup b"]) == _id(calls["k2"])
        assert _parent_id(own["single"]) == _id(calls["s1"])
        # The call's span is current only while the call runs: the run's thread has it no more.
        assert current[-1] not in {_id(s) for s in calls.values()}


def test_compaction_requests_are_chat_spans_of_their_run(
    server: ModelServer, exporter: InMemorySpanExporter
) -> None:
    server.add({"status": 503, "error": "busy"}, "the summary")
    with _agent(server, compact={"model": "cheap-model"}) as agent:
        agent.history.append({"role": "user", "content": "goal"})
        agent.compact()
    spans = exporter.get_finished_spans()
    (run,) = _named(spans, "invoke_agent")
    chats = sorted(_named(spans, "chat "), key=lambda s: s.start_time or 0)
    assert [s.name for s in chats] == ["chat cheap-model", "chat cheap-model"]
    assert all(_parent_id(s) == _id(run) for s in chats)
    assert [dict(s.attributes or {}).get("error.type") for s in chats] == ["server", None]
    assert all(dict(s.attributes or {})["agentcore.request"] == "compact" for s in chats)
    assert [e.name for e in run.events] == ["retry"]


def test_a_compaction_inside_a_send_gets_its_chat_span(
    server: ModelServer, exporter: InMemorySpanExporter
) -> None:
    server.add({"overflow": True}, "the summary", "answer")
    with _agent(server) as agent:
        assert agent.send("hello").text == "answer"
    spans = exporter.get_finished_spans()
    (run,) = _named(spans, "invoke_agent")
    chats = sorted(_named(spans, "chat "), key=lambda s: s.start_time or 0)
    assert len(chats) == 3 and all(_parent_id(s) == _id(run) for s in chats)
    assert [dict(s.attributes or {}).get("agentcore.request") for s in chats] == [None, "compact", None]
    assert dict(chats[0].attributes or {})["error.type"] == "request"  # the overflow
    assert chats[0].status.status_code is StatusCode.ERROR
    assert tuple(dict(chats[1].attributes or {})["gen_ai.response.finish_reasons"]) == ("stop",)


def test_file_tool_call_span(server: ModelServer, exporter: InMemorySpanExporter, tmp_path: Path) -> None:
    (tmp_path / "echo.py").write_text(
        textwrap.dedent(
            """\
            import os

            from agentcore import tool


            @tool
            def trace() -> str:
                \"\"\"The trace context this call runs in.\"\"\"
                return os.environ.get("TRACEPARENT", "none")
            """
        )
    )
    server.add({"tool_calls": [{"name": "trace", "id": "t1", "arguments": {}}]}, "done")
    with _agent(server, tools=agentcore.tools.scan(tmp_path)) as agent:
        agent.send("go")
        spans = exporter.get_finished_spans()
        (run,) = _named(spans, "invoke_agent")
        (call,) = _named(spans, "execute_tool trace")
        assert _parent_id(call) == _id(run) and "error.type" not in dict(call.attributes or {})
        # The tool process ran inside the call's span: TRACEPARENT names it.
        context = call.get_span_context()
        output = next(m for m in agent.history if m["role"] == "tool")["content"][0]["output"]
        assert output["value"].startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")
        # Untraced, the same process sees none.
        telemetry.uninstrument()
        server.add({"tool_calls": [{"name": "trace", "id": "t2", "arguments": {}}]}, "done")
        agent.send("again")
        output = [m for m in agent.history if m["role"] == "tool"][-1]["content"][0]["output"]
        assert output == {"type": "text", "value": "none"}


def test_sub_agent_runs_nest_under_the_calling_tool_span(
    server: ModelServer, exporter: InMemorySpanExporter
) -> None:
    checker = _agent(server)
    researcher = _agent(server, tools=[checker.as_tool("check", "Check")])
    lead = _agent(server, tools=[researcher.as_tool("research", "Research")])
    server.add(
        {"tool_calls": [{"name": "research", "id": "r1", "arguments": {"task": "a"}}]},
        {"tool_calls": [{"name": "check", "id": "c1", "arguments": {"task": "b"}}]},
        "checked",
        "researched",
        "led",
    )
    with checker, researcher, lead:
        lead.send("go")
    spans = exporter.get_finished_spans()
    runs = _named(spans, "invoke_agent")
    assert len(runs) == 3 and len({s.context.trace_id for s in spans if s.context}) == 1
    by_agent = {dict(s.attributes or {}).get("gen_ai.agent.name"): s for s in runs}
    research_call = next(s for s in spans if s.name == "execute_tool research")
    check_call = next(s for s in spans if s.name == "execute_tool check")
    assert by_agent[None].parent is None
    assert _parent_id(research_call) == _id(by_agent[None])
    assert _parent_id(by_agent["research"]) == _id(research_call)
    assert _parent_id(check_call) == _id(by_agent["research"])
    assert _parent_id(by_agent["check"]) == _id(check_call)
    chats_of_checker = [s for s in _named(spans, "chat ") if _parent_id(s) == _id(by_agent["check"])]
    assert len(chats_of_checker) == 1


def test_the_callers_span_is_the_parent(server: ModelServer, exporter: InMemorySpanExporter) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    server.add("hi")
    with _agent(server) as agent, provider.get_tracer("app").start_as_current_span("request") as outer:
        agent.send("hello")
    (run,) = _named(exporter.get_finished_spans(), "invoke_agent")
    assert _parent_id(run) == outer.get_span_context().span_id


def test_uninstrument_stops_spans(server: ModelServer, exporter: InMemorySpanExporter) -> None:
    telemetry.uninstrument()
    server.add("hi")
    with _agent(server) as agent:
        agent.send("hello")
    assert exporter.get_finished_spans() == ()
    telemetry.uninstrument()  # twice is fine


def test_missing_opentelemetry_is_a_config_error_and_import_agentcore_never_loads_it() -> None:
    code = textwrap.dedent(
        """\
        import sys
        import agentcore
        agentcore.Agent(config={"base_url": "http://127.0.0.1:9/v1", "model": "m"})
        assert not any(m.startswith("opentelemetry") for m in sys.modules), "loaded by import agentcore"
        sys.modules["opentelemetry"] = None  # as if not installed
        from agentcore import telemetry
        try:
            telemetry.instrument()
        except agentcore.AgentError as error:
            print(error.kind, error.message)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("config ") and "pip install 'agentcore[otel]'" in out
