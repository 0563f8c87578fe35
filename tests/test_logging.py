"""Logger "agentcore" is the library's only output channel, and it never carries the API key.

A full scenario — tools (one failing), retries of errors whose bodies echo the key, a compaction
after a context overflow, a callback that raises — runs with a capturing handler; nothing may
reach stdout/stderr and no record may contain the key.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from agentcore import tool
from agentcore.testing import ModelServer

KEY = "sk-test-a1b2c3d4e5f6-SECRET-KEY"


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.texts: list[str] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.texts.append(self.format(record))  # message, args and traceback as a handler shows them


@pytest.fixture
def captured() -> Iterator[Capture]:
    logger = logging.getLogger("agentcore")
    handler = Capture()
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False  # only our handler: anything else would have to be printed by the library
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)
    logger.propagate = propagate


@tool
def lookup(word: str) -> str:
    """Look a word up."""
    return f"{word}: a word"


@tool
def broken(word: str) -> str:
    """Always raises."""
    raise RuntimeError(f"cannot handle {word}")


def failing_callback(payload: dict[str, Any]) -> None:
    raise ValueError("the UI callback broke")


def test_a_full_run_prints_nothing_and_never_logs_the_key(
    captured: Capture, capfd: pytest.CaptureFixture[str], server: ModelServer, make_agent: Any
) -> None:
    server.add(
        {"status": 500, "error": f"upstream rejected key {KEY}"},
        {"status": 429, "error": f"rate limited: {KEY}", "headers": {"Retry-After": "0"}},
        {
            "tool_calls": [
                {"name": "lookup", "arguments": {"word": "cat"}},
                {"name": "broken", "arguments": {"word": "dog"}},
            ]
        },
        "Looked it up.",
        {"overflow": True},
        "Summary: the user looked up cat.",
        {"stream_error": f"stream broke for {KEY}"},
        "Second answer.",
    )
    agent = make_agent(
        server,
        api_key=KEY,
        tools=[lookup, broken],
        no_tool_rounds=1,
        callbacks={"on_tool_result": failing_callback, "on_step": failing_callback},
    )
    assert agent.send("look up cat").text == "Looked it up."
    assert agent.send("and again").text == "Second answer."
    assert any(entry["role"] == "compact" for entry in agent.history)

    out, err = capfd.readouterr()
    assert out == "" and err == ""
    # The library adds no handler itself (pytest >= 9 attaches its capture handlers here too).
    handlers = [
        h for h in logging.getLogger("agentcore").handlers if not type(h).__module__.startswith("_pytest")
    ]
    assert handlers == [captured]
    levels = [r.levelno for r in captured.records]
    assert levels.count(logging.WARNING) >= 3  # the retries and the swallowed callback errors
    assert any("the UI callback broke" in text for text in captured.texts)
    retries = [text for text in captured.texts if "retry" in text]
    assert any(
        "kind=server, status=500); retry 1 in" in text and "rejected key ***" in text for text in retries
    )
    assert any("kind=limit, status=429); retry 2 in" in text for text in retries)
    leaked = [text for text in captured.texts if KEY in text]
    assert not leaked, leaked
    assert all(KEY not in repr(r.args) for r in captured.records)
