"""Skills: the model reads a skill (and a file of its folder) when a task needs it.

    python examples/skills/main.py

The system prompt lists the two skills of ./skills by name and description only; the model reads
`commit-message` and its template with the `skill` tool. With no environment set it runs against
agentcore's scripted local model server (no key, no network); set OPENAI_BASE_URL, OPENAI_API_KEY
and AGENTCORE_MODEL to use a real OpenAI-compatible endpoint.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from pathlib import Path

from agentcore import Agent, skills

HERE = Path(__file__).resolve().parent

# What the local model answers, request by request.
SCRIPT = [
    {"tool_calls": [{"name": "skill", "arguments": {"name": "commit-message"}}]},
    {
        "tool_calls": [
            {"name": "skill", "arguments": {"name": "commit-message", "file": "templates/conventional.txt"}}
        ]
    },
    "parser: accept quoted keys\n\nQuoted keys were rejected, so configs from other tools failed to load.",
]


def connection(stack: ExitStack) -> dict[str, str]:
    if os.environ.get("OPENAI_BASE_URL"):
        return {
            "base_url": os.environ["OPENAI_BASE_URL"],
            "api_key": os.environ.get("OPENAI_API_KEY", ""),
            "model": os.environ.get("AGENTCORE_MODEL", "gpt-4o-mini"),
        }
    from agentcore.testing import ModelServer

    server = stack.enter_context(ModelServer(SCRIPT))
    return {"base_url": server.base_url, "model": "local-scripted"}


def main() -> None:
    found = skills.load(HERE / "skills")
    print("skills:", ", ".join(found.names))
    with ExitStack() as stack:
        config = {
            **connection(stack),
            "system": "You help with git.\n\n" + found.system(),
            "no_tool_rounds": 1,
        }
        agent = Agent(config=config, tools=[found.tool()], callbacks={"on_tool_call": show_call})
        result = agent.send("Write a commit message for: the config parser now accepts quoted keys.")
        print(result.text)


def show_call(call: dict[str, object]) -> None:
    print(f"[tool] {call['tool_name']}({call['input']})")


if __name__ == "__main__":
    main()
