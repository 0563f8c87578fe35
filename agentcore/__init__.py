"""A small synchronous agent core: ask a model, run tools in parallel, repeat."""

# Not `from typing import TYPE_CHECKING`: importing typing alone costs more than this whole module.
# Type checkers treat this name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import (
        compact,
        context,
        history,
        llm,
        output,
        skills,
        store,
        text_tools,
        tools,
        usage,
    )
    from .agent import Agent
    from .errors import AgentError
    from .result import SendResult
    from .tools import ToolContext, tool
    from .usage import Usage

__all__ = [
    "Agent",
    "AgentError",
    "SendResult",
    "ToolContext",
    "Usage",
    "compact",
    "context",
    "history",
    "llm",
    "output",
    "skills",
    "store",
    "text_tools",
    "tool",
    "tools",
    "usage",
]
__version__ = "0.1.0"

# Every public name loads on first use (`from agentcore import Agent` loads the agent then), so
# that `import agentcore` itself costs well under a millisecond: the agent, the tools and their
# standard-library needs (dataclasses, inspect, logging…) come in with the first name used.
_NAMES = {
    "Agent": "agent",
    "AgentError": "errors",
    "SendResult": "result",
    "ToolContext": "tools",
    "tool": "tools",
    "Usage": "usage",
}
_NAMESPACES: tuple[str, ...] = ("aio", "compact", "context", "history", "llm", "output", "store")
_NAMESPACES += ("text_tools", "tools", "usage")
# Integrations: `agentcore.skills`, `agentcore.mcp` and `agentcore.telemetry` (their SDKs, extras,
# load only when used: connect(), instrument()).
_INTEGRATIONS = ("mcp", "skills", "telemetry")


def __getattr__(name: str) -> object:
    import importlib

    if name in _NAMES:
        value = getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    if name in _NAMESPACES or name in _INTEGRATIONS:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    dunders = (name for name in globals() if name.startswith("__"))
    return sorted({*dunders, *_NAMES, *_NAMESPACES, *_INTEGRATIONS})
