"""Logger "agentcore" is the library's only output channel, and it never carries the API key.

A full scenario — tools (one failing), retries of errors whose bodies echo the key, a compaction
after a context overflow, a callback that raises — runs with a capturing handler; nothing may
reach stdout/stderr and no record may contain the key.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
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


def _handlers() -> dict[str, list[logging.Handler]]:
    """Every handler on the root logger and on each "agentcore" logger, by logger name."""
    manager = logging.getLogger().manager
    names = [name for name in manager.loggerDict if name == "agentcore" or name.startswith("agentcore.")]
    return {name: list(logging.getLogger(name).handlers) for name in ["", *sorted(names)]}


def _ours(handlers: dict[str, list[logging.Handler]]) -> list[str]:
    return [
        f"{name or 'root'}: {type(handler).__qualname__}"
        for name, found in handlers.items()
        for handler in found
        if type(handler).__module__.split(".")[0] == "agentcore"
    ]


def test_a_full_run_prints_nothing_and_never_logs_the_key(
    captured: Capture, capfd: pytest.CaptureFixture[str], server: ModelServer, make_agent: Any
) -> None:
    # What the test runner attached (pytest ≥ 9.2 also adds its capture handlers to
    # non-propagating loggers) is not the library's: compare before and after the run.
    before = _handlers()
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
    after = _handlers()
    assert {name: found for name, found in after.items() if found} == {
        name: found for name, found in before.items() if found
    }  # the library adds no handler itself, to its loggers or to the root
    assert captured in after["agentcore"] and not _ours(after)
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


def test_the_library_configures_no_logging_in_a_plain_interpreter(tmp_path: Any) -> None:
    """No test runner in the way: after a full run, neither the root nor an agentcore logger has a handler."""
    script = tmp_path / "run.py"
    script.write_text(
        textwrap.dedent(
            """
            import logging
            from agentcore import Agent, tool
            from agentcore.testing import ModelServer

            @tool
            def lookup(word: str) -> str:
                \"""Look a word up.\"""
                return word

            with ModelServer() as server:
                server.add({"status": 500, "error": "once"},
                           {"tool_calls": [{"name": "lookup", "arguments": {"word": "cat"}}]}, "done")
                config = {"base_url": server.base_url, "model": "m", "retry_base_delay": 0.01}
                with Agent(config=config, tools=[lookup]) as agent:
                    assert agent.send("go", config={"no_tool_rounds": 1}).text == "done"
            manager = logging.getLogger().manager
            loggers = [logging.getLogger(), *(v for k, v in manager.loggerDict.items()
                                              if isinstance(v, logging.Logger)
                                              and k.split(".")[0] == "agentcore")]
            print([(lg.name, h) for lg in loggers for h in lg.handlers])
            """
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    # With no handler anywhere, Python's last-resort handler prints the retry WARNING on stderr.
    assert "retry 1 in" in done.stderr
