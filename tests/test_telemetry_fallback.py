"""Telemetry over a chain of models (API.md §Fallback models): each `chat {model}` span names the
model that attempt asked — the failing primary's span records the error, the fallback's the answer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agentcore import Agent, telemetry
from agentcore.testing import ModelServer


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    telemetry.instrument(tracer_provider=provider)
    yield memory
    telemetry.uninstrument()


def test_each_chat_span_names_the_model_asked(exporter: InMemorySpanExporter, server: ModelServer) -> None:
    with ModelServer() as claude:
        server.add({"status": 500, "error": "down"})
        claude.add("From Claude.")
        fallback = [{"base_url": claude.base_url, "protocol": "anthropic", "model": "claude-x"}]
        config = {
            "base_url": server.base_url,
            "model": "gpt-x",
            "retry_base_delay": 600.0,
            "fallback": fallback,
        }
        with Agent(config=config) as agent:
            assert agent.send("hi").model == "claude-x"
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert [s.name for s in chats] == ["chat gpt-x", "chat claude-x"]
    assert [s.attributes["gen_ai.request.model"] for s in chats] == ["gpt-x", "claude-x"]
    assert chats[0].status.status_code == StatusCode.ERROR
    assert chats[1].attributes["gen_ai.provider.name"] == "anthropic"
