"""The `--demo` model: a scripted local server that shows streaming text and a tool call.

    server = demo.start()            # agentcore.testing.ModelServer, in this process
    config = {"base_url": server.base_url, "model": demo.MODEL}
    Agent(config, tools=demo.TOOLS)
    server.close()

Any message gets a `word_count` tool call and then a streamed answer; a message asking for a
story (or anything long or slow) gets a long, slow reply, to try Ctrl-C on. No key and no
network: it is all on 127.0.0.1.
"""

from __future__ import annotations

from typing import Any

from ..config import NO_TOOL_PROMPT
from ..testing import ModelServer, Recorded
from ..tools import tool

MODEL = "demo"
WELCOME = (
    "agentcore demo: a scripted model on this machine (no key, no network).\n"
    "Type anything and it counts your words with a tool; ask for a story to see a long,\n"
    "slow reply you can stop with Ctrl-C. /help lists the commands."
)
STORY = (
    "Once upon a time, a small agent lived in a terminal. Every morning it read the history, "
    "every word of it, from the first user message to the last tool result, and it never "
    "changed a line: history only grows. One day the user asked for a long story. The agent "
    "began to stream it, piece by piece, so the user could read while it wrote. Halfway "
    "through, the user pressed Ctrl-C. The agent stopped at once, kept the words it had "
    "already written, and waited for the next message. The end."
)
_STREAM = {"chunk_size": 4, "chunk_delay": 0.02}
_SLOW_STREAM = {"chunk_size": 3, "chunk_delay": 0.06}
_SLOW_WORDS = ("story", "long", "slow")


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
    return ModelServer(default=reply)


def reply(recorded: Recorded) -> dict[str, Any]:
    """The demo model: answer one chat-completions request."""
    body = recorded.body if isinstance(recorded.body, dict) else {}
    messages = body.get("messages") or [{}]
    if "tools" not in body:
        # Only a compaction request comes without the tool (the summary needs none).
        return {"text": "Summary: the user chatted with the agentcore demo model.", **_STREAM}
    last = messages[-1]
    if last.get("role") == "tool":
        return {"text": f"Your message has {last.get('content')} words.", **_STREAM}
    text = _text(last.get("content"))
    if last.get("role") != "user" or text == NO_TOOL_PROMPT:
        # A request that only asks "go on" (agentcore run keeps going until the model stops
        # calling tools): repeat the answer already given.
        return {"text": _last_answer(messages), **_STREAM}
    if any(word in text.lower() for word in _SLOW_WORDS):
        return {"text": STORY, **_SLOW_STREAM}
    return {"text": "Let me count.", "tool_calls": [{"name": "word_count", "arguments": {"text": text}}]}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _last_answer(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "assistant" and _text(message.get("content")):
            return _text(message.get("content"))
    return "Done."
