"""What the contract tests share: the agent factory, a tool, and small builders (tests/contract/)."""

from __future__ import annotations

import socket
import time
from typing import Any

from agentcore import Agent, tool
from agentcore.testing import ModelServer

FAST = {"retry_base_delay": 0.01, "retry_max_delay": 0.05}


KEY = "sk-contract-secret-123456"


def make(
    agents: list[Agent], server: ModelServer, *, tools: Any = None, callbacks: Any = None, **config: Any
) -> Agent:
    agent = Agent(
        config={"base_url": server.base_url, "model": "m", **FAST, **config}, tools=tools, callbacks=callbacks
    )
    agents.append(agent)
    return agent


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def call(tool_name: str = "add", /, *, id: str = "c1", **arguments: Any) -> dict[str, Any]:
    return {"name": tool_name, "id": id, "arguments": arguments or {"a": 1, "b": 2}}


def tool_results(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [part for m in history if m["role"] == "tool" for part in m["content"]]


def tool_file(name: str, params: str, returns: str, value: str) -> str:
    """The text of a file that defines one `@tool` function returning `value` (an expression)."""
    return (
        f"from agentcore import tool\n\n\n@tool\ndef {name}({params}) -> {returns}:\n"
        f'    """The {name} tool."""\n    return {value}\n'
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _wait_for(condition: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition never became true"
        time.sleep(0.01)
