"""Shared fixtures: a scripted model server, agents pointed at it, and a thread-leak check.

    def test_x(server, make_agent):
        server.add("Hello!")
        agent = make_agent(server, max_steps=3)
        assert agent.send("hi").text == "Hello!"

Everything talks over real HTTP on 127.0.0.1; retry delays are made tiny so a retried
request costs milliseconds.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentcore import Agent
from agentcore._utils import tokens
from agentcore.testing import ModelServer


def pytest_configure(config: pytest.Config) -> None:
    # A shell starts background jobs (`cmd &`, nohup, CI runners) with SIGINT ignored, and
    # Python then installs no KeyboardInterrupt handler — in this process or in the programs
    # it starts, which inherit "ignored". The Ctrl-C tests need a real Ctrl-C: restore it here
    # (a handled signal is reset to its default in a child, so children get Python's too).
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


# A skip whose reason starts with this is a case the wire cannot carry, not a missing component.
NOT_APPLICABLE = "not applicable: "

MODEL = "test-model"
FAST_RETRY = {"retry_base_delay": 0.01, "retry_max_delay": 0.05}
_THREAD_GRACE_S = 2.0

MakeAgent = Callable[..., Agent]


@pytest.fixture(autouse=True)
def _fresh_token_estimates() -> Iterator[None]:
    """Each test starts with nothing learned. The learned token ratios and context limits are
    process-wide, keyed by (protocol, base_url, model), and a port is reused by a later test's
    server: what one test's scripted usage taught would change when another test compacts."""
    tokens.ratios.clear()
    tokens.limits.clear()
    yield


@pytest.fixture
def server() -> Iterator[ModelServer]:
    """An empty scripted model server; add replies with `server.add(...)`."""
    with ModelServer() as model_server:
        yield model_server


@pytest.fixture
def make_agent() -> Iterator[MakeAgent]:
    """`make_agent(server, tools=, callbacks=, history=, id=, **config)`: an agent on `server`.

    Every agent made here is closed when the test ends.
    """
    agents: list[Agent] = []

    def make(
        server: ModelServer,
        *,
        tools: Any = None,
        callbacks: dict[str, Any] | None = None,
        history: list[dict[str, Any]] | None = None,
        id: str | None = None,
        **config: Any,
    ) -> Agent:
        agent = Agent(
            config={"base_url": server.base_url, "model": MODEL, **FAST_RETRY, **config},
            tools=tools,
            callbacks=callbacks,
            history=history,
            id=id,
        )
        agents.append(agent)
        return agent

    yield make
    for agent in agents:
        agent.close()


def _leftover_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    """Threads started by the test that are still alive: non-daemon ones and agentcore's own."""
    return [
        t
        for t in threading.enumerate()
        if t not in before and t.is_alive() and (not t.daemon or t.name.startswith("agentcore"))
    ]


@pytest.fixture
def no_thread_leak() -> Iterator[None]:
    """Fail the test if it leaves a non-daemon or agentcore thread running.

    Threads get a short grace period: a finished run's helpers end just after it returns.
    Memory-tool threads abandoned on purpose (they cannot be killed) must be released by the test.
    """
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + _THREAD_GRACE_S
    leftovers = _leftover_threads(before)
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.01)
        leftovers = _leftover_threads(before)
    assert not leftovers, f"threads left running: {[t.name for t in leftovers]}"


# ---------------------------------------------------------------- CI: a missing component fails


def _ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def _skip_reason(report: Any) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _fail_skip_under_ci(report: Any) -> None:
    """Under CI=true a skipped test or module is a failure, unless the case does not apply at all."""
    if not (_ci() and report.skipped) or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    if NOT_APPLICABLE in reason:
        return
    report.outcome = "failed"
    report.longrepr = f"skipped under CI=true, where a missing component is a failure: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    _fail_skip_under_ci(outcome.get_result())  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield
    _fail_skip_under_ci(outcome.get_result())  # type: ignore[attr-defined]
