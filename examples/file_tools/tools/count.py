"""A streaming tool: every yield reaches on_tool_output as it happens."""

import time

from agentcore import tool


@tool(timeout=30)
def count(n: int):
    """Count from 1 to n, reporting each number.

    Args:
        n: Where to stop.
    """
    for i in range(1, n + 1):
        yield f"counted to {i}\n"
        time.sleep(0.01)
