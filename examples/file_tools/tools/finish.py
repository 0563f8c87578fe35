"""A tool that ends the run: return {"stop": True, "output": ...}."""

from agentcore import tool


@tool
def finish(summary: str) -> dict:
    """Call this when the task is complete.

    Args:
        summary: What was done.
    """
    return {"stop": True, "output": {"type": "text", "value": summary}}
