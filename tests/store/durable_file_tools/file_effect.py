"""A file tool (it runs in a tool process) whose every start is recorded in $AGENTCORE_EFFECTS."""

import os
import time


def _execute(input, ctx):
    path = os.environ.get("AGENTCORE_EFFECTS")
    if path:
        with open(path, "a") as file:
            file.write(f"file_effect {ctx.tool_call_id}\n")
    time.sleep(0.02)
    return f"file {input['tag']}"


file_effect = {
    "name": "file_effect",
    "description": "Do something in a tool process that must happen once.",
    "input_schema": {"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]},
    "execute": _execute,
}
