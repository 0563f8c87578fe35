"""A small synchronous agent core: ask a model, run tools in parallel, repeat."""

from . import compact, context, history, llm, output, tools
from .agent import Agent, SendResult
from .errors import AgentError
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
    "text_tools",
    "tool",
    "tools",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # text_tools is only needed by tool_mode "text"/"auto"; load it on first use.
    if name == "text_tools":
        import importlib

        return importlib.import_module(f"{__name__}.text_tools")
    raise AttributeError(f"module 'agentcore' has no attribute {name!r}")
