"""A scripted local model server for tests, examples and benchmarks.

    from agentcore.testing import ModelServer

    with ModelServer(["Hello!", {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}]) as server:
        agent = Agent(config={"base_url": server.base_url, "model": "any"})
        ...
        assert server.requests[0]["model"] == "any"

Script items are described in docs/INTERNALS.md ("Model server script"). Stdlib only.
"""

from __future__ import annotations

from .script import Headers, Recorded, Reply
from .server import ModelServer

__all__ = ["Headers", "ModelServer", "Recorded", "Reply"]
