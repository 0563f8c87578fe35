"""The `--demo` model: the local model server with the demo model, in this process.

    server = demo.start()            # agentcore.testing.ModelServer answered by testing.demo
    config = {"base_url": server.base_url, "model": demo.MODEL}
    Agent(config, tools=demo.TOOLS)
    server.close()

Any message gets a `word_count` tool call and then a streamed answer; a message asking for a
story (or anything long or slow) gets a long, slow reply, to try Ctrl-C on. No key and no
network: it is all on 127.0.0.1. The model itself is `agentcore.testing.demo`, the one
`python -m agentcore.testing` serves.
"""

from __future__ import annotations

from ..testing import ModelServer, demo
from ..tools import tool

MODEL = "demo"
WELCOME = (
    "agentcore demo: a scripted model on this machine (no key, no network).\n"
    "Type anything and it counts your words with a tool; ask for a story to see a long,\n"
    "slow reply you can stop with Ctrl-C. /help lists the commands."
)


@tool
def word_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: Any text.
    """
    return len(text.split())


TOOLS = [word_count]


def start() -> ModelServer:
    """Start the demo model server on a free port of 127.0.0.1 (close it when done)."""
    return ModelServer(default=demo.reply)
