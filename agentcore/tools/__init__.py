"""Tools: declare them, gather them into sets, run one.

    from agentcore.tools import tool, load, pick, execute

    @tool
    def add(a: int, b: int) -> int:
        \"\"\"Add two numbers.\"\"\"
        return a + b

    tools = load("./tools", [add])            # file tools + memory tools; later wins
    execute("add", {"a": 1, "b": 2}, tools)   # {"output": {"type": "json", "value": 3}}

Memory tools (`adopt`) run on threads of this process; file tools (`scan`) run in tool
processes that can be killed; `warm(n)` starts n of those ahead of need.
"""

from __future__ import annotations

from .decorator import ToolContext, tool
from .execute import execute

# `scan` is imported eagerly on purpose: importing the submodule `tools.scan` later would
# rebind the package attribute `scan` to the module, hiding the function of the same name.
from .scan import scan
from .spares import warm
from .toolset import ToolSet, adopt, load, merge, omit, pick

__all__ = [
    "ToolContext",
    "ToolSet",
    "adopt",
    "execute",
    "load",
    "merge",
    "omit",
    "pick",
    "scan",
    "tool",
    "warm",
]
