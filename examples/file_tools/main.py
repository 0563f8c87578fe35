"""File tools: Python files in a folder, run in killable tool processes.

    python examples/file_tools/main.py

Scans ./tools, then plays a scripted conversation on the local model server that calls each
tool, asks permission before shell commands, and prints what the tools stream.
"""

from __future__ import annotations

from pathlib import Path

from agentcore import Agent
from agentcore.testing import ModelServer
from agentcore.tools import load

TOOLS = Path(__file__).resolve().parent / "tools"

SCRIPT = [
    {
        "tool_calls": [
            {"name": "add", "arguments": {"a": 2, "b": 3}},
            {"name": "power", "arguments": {"base": 3}},
            {"name": "count", "arguments": {"n": 3}},
            {"name": "run_script", "arguments": {"command": "echo hello from a child process"}},
            {"name": "run_script", "arguments": {"command": "rm -rf /tmp/nothing-here"}},
            {"name": "screenshot", "arguments": {}},
            {
                "name": "route",
                "arguments": {"stops": [{"name": "A", "at": [0, 0]}, {"name": "B", "at": [3, 4]}]},
            },
        ]
    },
    {"tool_calls": [{"name": "finish", "arguments": {"summary": "All tools ran."}}]},
]


def ask_permission(request: dict) -> bool:
    """Allow everything but shell commands that remove files (a real app would ask a person)."""
    if request["tool_name"] == "run_script" and "rm " in request["input"]["command"]:
        print(f"  permission denied: {request['input']['command']}")
        return False
    return True


def show_output(event: dict) -> None:
    print(f"  [{event['tool_name']} {event['stream']}] {str(event['data']).rstrip()}")


def main() -> None:
    tools = load(TOOLS)
    print("tools:", ", ".join(sorted(tools)))
    with ModelServer(SCRIPT) as server:
        config = {"base_url": server.base_url, "model": "local-scripted", "max_tool_concurrency": 4}
        callbacks = {"on_permission": ask_permission, "on_tool_output": show_output}
        with Agent(config=config, tools=tools, callbacks=callbacks) as agent:
            result = agent.send("Try every tool, then finish.")
    for part in agent.history[2]["content"]:
        output = part["output"]
        shown = (
            output["value"] if output["type"] != "content" else f"{len(output['value'])} parts (text + image)"
        )
        print(f"  {part['tool_name']}: {output['type']} {shown!r}")
    print("reason:", result.reason, "| steps:", result.steps)


if __name__ == "__main__":
    main()
