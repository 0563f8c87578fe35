"""Wire adapters, one per protocol, looked up by name.

    adapter = get("chat")            # chat / responses / anthropic / gemini
    wire = adapter.build(request)

Each adapter module is imported on first use, so an unused protocol costs nothing.
"""

from __future__ import annotations

import importlib
from typing import cast

from ..config import PROTOCOLS
from ..errors import AgentError
from ._common import encoded_body
from .base import Adapter
from .errors import kind_for_status


def get(name: str) -> Adapter:
    """The adapter of protocol `name` (its module's `adapter`).

    Raises:
        AgentError: kind "config" when the protocol is unknown or its module is missing.
    """
    if name not in PROTOCOLS:
        raise AgentError(f"unknown protocol {name!r}; expected one of {', '.join(PROTOCOLS)}", kind="config")
    module_name = f"{__name__}.{name}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # Only the adapter module itself being absent is a config problem; a missing
        # import inside it is a bug that should surface as is.
        if exc.name != module_name:
            raise
        message = f"protocol {name!r} is not available (no module {module_name})"
        raise AgentError(message, kind="config") from exc
    return cast(Adapter, module.adapter)


# For llm.py: the JSON text of a request body (reusing the run's earlier text), a status's kind.
__all__ = ["PROTOCOLS", "encoded_body", "get", "kind_for_status"]
