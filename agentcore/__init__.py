"""A small synchronous agent core: ask a model, run tools in parallel, repeat."""

from typing import TYPE_CHECKING

from . import tools
from .agent import Agent
from .errors import AgentError
from .result import SendResult
from .tools import ToolContext, tool
from .usage import Usage

if TYPE_CHECKING:
    from . import compact, context, history, llm, output, skills, store, text_tools, usage

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


_LAZY = ("aio", "compact", "context", "history", "llm", "output", "store", "text_tools")
# Integrations: `agentcore.skills`, `agentcore.mcp` and `agentcore.telemetry` (their SDKs, extras,
# load only when used: connect(), instrument()).
_INTEGRATIONS = ("mcp", "skills", "telemetry")


def __getattr__(name: str) -> object:
    # The namespaces load on first use (the loop loads them on the first send anyway), so that
    # `import agentcore` stays cheap.
    if name in _LAZY or name in _INTEGRATIONS:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'agentcore' has no attribute {name!r}")
