"""The demo model (API.md §Details "The local model server"): what a bare
`python -m agentcore.testing --port P` serves, and what `agentcore chat --demo` talks to.

Before: a bare server answered every request with "(script exhausted)" (the README's first
snippet showed no tool call). Now it streams text and calls the tools the request declares, on
all four protocols, with arguments made from each tool's schema.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Any

import pytest

from agentcore import Agent, tool
from agentcore.testing import ModelServer, demo

ROOT = Path(__file__).resolve().parents[2]
PROTOCOLS = ("chat", "responses", "anthropic", "gemini")


@tool
def word_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: Any text.
    """
    return len(text.split())


class Unit(Enum):
    C = "celsius"
    F = "fahrenheit"


@tool
def forecast(city: str, days: int, unit: Unit, detailed: bool = False) -> str:
    """The weather to come."""
    return f"{days} days of sun in {city} ({unit.value})"


@pytest.fixture(scope="module")
def bare_server() -> Iterator[str]:
    """`python -m agentcore.testing --port 0`, as a user starts it; its base URL."""
    child = subprocess.Popen(
        [sys.executable, "-m", "agentcore.testing", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    match = re.match(r"serving (http://127\.0\.0\.1:\d+/v1) \(the demo model\)", line)
    try:
        assert match, line
        yield match.group(1)
    finally:
        child.kill()
        child.wait()
        child.stdout.close()


README_SNIPPET = re.compile(r"```python\n(from agentcore import Agent, tool\n.*?)```", re.S)


def test_the_readmes_first_snippet_shows_a_tool_call(bare_server: str) -> None:
    code = README_SNIPPET.search((ROOT / "README.md").read_text()).group(1)  # type: ignore[union-attr]
    code = code.replace("http://127.0.0.1:8080/v1", bare_server)
    code += "\nprint([p['type'] for m in agent.history for p in m['content'] if isinstance(p, dict)])\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    first, parts = done.stdout.splitlines()
    assert first == "no-tool word_count returned 6."  # the words of 'to be or not to be'
    assert "tool-call" in parts and "tool-result" in parts


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_demo_calls_a_declared_tool_on_every_protocol(
    bare_server: str, protocol: str, stream: bool
) -> None:
    deltas: list[str] = []
    config = {
        "base_url": bare_server,
        "model": "demo",
        "protocol": protocol,
        "stream": stream,
        "no_tool_rounds": 1,
    }
    with Agent(
        config=config,
        tools=[word_count, forecast],
        callbacks={"on_llm_event": lambda e: deltas.append(e.get("text", ""))},
    ) as agent:
        result = agent.send("What is the forecast for Paris?")
    call = agent.history[1]["content"][-1]
    assert call["type"] == "tool-call" and call["tool_name"] == "forecast"  # the one the message names
    assert call["input"] == {"city": "What is the forecast for Paris?", "days": 6, "unit": "celsius"}
    assert (
        agent.history[2]["content"][0]["output"]["value"]
        == "6 days of sun in What is the forecast for Paris? (celsius)"
    )
    assert result.text.startswith("forecast returned ")
    if stream:
        assert len([d for d in deltas if d]) > 3  # streamed in pieces


def test_without_tools_the_demo_answers_in_words_and_goes_on_when_asked() -> None:
    with ModelServer(default=demo.reply) as server:
        with Agent(config={"base_url": server.base_url, "model": "demo"}) as agent:
            assert agent.send("hello").text == "(demo model) You said: hello"
        with Agent(config={"base_url": server.base_url, "model": "demo"}, tools=[word_count]) as agent:
            # no_tool_rounds 3: after its answer the model is asked to go on, and says it again.
            result = agent.send("count these words")
            assert result.reason == "no-tool" and result.text == "word_count returned 3."


def test_arguments_follow_the_schema() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "limit": {"type": ["integer", "null"]},
            "options": {"type": "object", "properties": {"deep": {"type": "boolean"}}, "required": ["deep"]},
        },
    }
    assert demo.arguments(schema, "two words") == {
        "path": "two words",
        "tags": ["two words"],
        "limit": 2,
        "options": {"deep": True},
    }
    assert demo.arguments({**schema, "required": ["limit"]}, "x") == {"limit": 1}
    assert demo.arguments({"properties": {"text": {"type": "string"}}}, 'count "a b c" now') == {
        "text": "a b c"
    }
