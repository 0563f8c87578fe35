"""A file tool (it runs in a tool process) whose every start is a line in $AGENTCORE_EFFECTS.

A tag "hang-once" hangs at the first start of a call (a test kills the worker there); "nap"
takes up to 0.2 s.
"""

import os
import random
import time
from pathlib import Path


def _execute(input, ctx):
    path = os.environ.get("AGENTCORE_EFFECTS")
    first = True
    if path:
        first = not os.path.exists(path) or f"file_effect {ctx.tool_call_id} " not in Path(path).read_text()
        with open(path, "a") as file:
            file.write(f"file_effect {ctx.tool_call_id} {os.getpid()}\n")
    if input["tag"] == "hang-once" and first:
        time.sleep(600)
    if input["tag"] == "nap":
        time.sleep(random.uniform(0, 0.2))
    return f"file_effect {input['tag']} done"


file_effect = {
    "name": "file_effect",
    "description": "Do something in a tool process that must happen once.",
    "input_schema": {"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]},
    "execute": _execute,
}
