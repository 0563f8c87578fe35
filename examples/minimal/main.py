"""The smallest complete agent: one tool, one question, the built-in local model.

    python examples/minimal/main.py

With no environment set it starts agentcore's scripted local model server (no key, no
network). Set OPENAI_BASE_URL, OPENAI_API_KEY and AGENTCORE_MODEL to talk to a real
OpenAI-compatible endpoint instead.
"""

from __future__ import annotations

import os
from contextlib import ExitStack

from agentcore import Agent, tool
from agentcore.testing import ModelServer


@tool
def word_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: Any text.
    """
    return len(text.split())


# What the local model answers, request by request: first a tool call, then the final text.
SCRIPT = [
    {"tool_calls": [{"name": "word_count", "arguments": {"text": "to be or not to be"}}]},
    "There are 6 words in 'to be or not to be'.",
]


def connection(stack: ExitStack) -> dict[str, str]:
    if os.environ.get("OPENAI_BASE_URL"):
        return {
            "base_url": os.environ["OPENAI_BASE_URL"],
            "api_key": os.environ.get("OPENAI_API_KEY", ""),
            "model": os.environ.get("AGENTCORE_MODEL", "gpt-4o-mini"),
        }
    server = stack.enter_context(ModelServer(SCRIPT))
    return {"base_url": server.base_url, "model": "local-scripted"}


def main() -> None:
    with ExitStack() as stack:
        config = {
            **connection(stack),
            "system": "Use the tools to answer. Be brief.",
            "no_tool_rounds": 1,
            "request_timeout": 60.0,
            "retry_max_elapsed": 60.0,
        }
        with Agent(config=config, tools=[word_count]) as agent:
            result = agent.send("How many words are in 'to be or not to be'?")
        print("reply: ", result.text)
        print("reason:", result.reason)
        print("steps: ", result.steps)
        print("usage: ", result.usage)


if __name__ == "__main__":
    main()
