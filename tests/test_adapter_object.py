"""A vendor we don't ship plugs in as an adapter object (`config["model"]`), through the whole loop."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agentcore import Agent, AgentError, Usage, tool
from agentcore.llm import LLMResult, ModelAdapter
from agentcore.protocols.base import make_result, tool_call_part


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class EchoModel:
    """Calls `add` once, then answers with the tool's result."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def chat(
        self, request: dict[str, Any], *, cancel: threading.Event | None, on_event: Any, timeout: float | None
    ) -> LLMResult:
        self.requests.append(request)
        last = request["messages"][-1]
        if last["role"] == "tool":
            value = last["content"][0]["output"]["value"]
            if on_event is not None:
                on_event({"type": "text-delta", "text": f"It is {value}."})
            return make_result([{"type": "text", "text": f"It is {value}."}], Usage.of(10, 3), "stop", None)
        part = tool_call_part("c1", "add", {"a": 2, "b": 3})
        return make_result([part], Usage.of(8, 2), "tool_calls", None)


def test_an_adapter_object_runs_the_loop() -> None:
    model = EchoModel()
    assert isinstance(model, object) and callable(model.chat)
    adapter: ModelAdapter = model
    events: list[dict[str, Any]] = []
    agent = Agent(
        config={"model": adapter, "system": "Be brief.", "no_tool_rounds": 1},
        tools=[add],
        callbacks={"on_llm_event": events.append},
    )
    result = agent.send("2+3?")
    assert result.text == "It is 5." and result.steps == 2
    assert result.usage.input_tokens == 18
    first = model.requests[0]
    assert set(first) >= {"system", "messages", "tools", "provider", "output", "max_tokens"}
    assert first["system"] == "Be brief." and first["tools"][0]["name"] == "add"
    assert any(e.get("text") == "It is 5." for e in events)


@pytest.mark.parametrize(
    "config",
    [{"provider": {"body": {"x": 1}}}, {"cache": {"key": "k"}}, {"capabilities": {"tool_choice": False}}],
)
def test_settings_that_need_a_built_in_protocol_are_config_errors(config: dict[str, Any]) -> None:
    with pytest.raises(AgentError) as info:
        Agent(config={"model": EchoModel(), **config})
    assert info.value.kind == "config"
