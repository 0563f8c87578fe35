"""stop(), a cancel event, a superseding send and Ctrl-C end a model request in every phase,
whatever the server does with the connection (API.md §Details "Cancellation, in every phase").

Each scenario stalls until the client goes away, so a send that ends was ended by the
cancellation; the generous join bound only keeps a regression from hanging the suite.
No latency is asserted here: bench/cancel_latency.py measures it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from phases import cases, history_problems, scenario

from agentcore import Agent, AgentError
from agentcore.testing import ModelServer

ENDED_BOUND_S = 20.0  # far longer than any cancellation; the scenario would stall forever
REACHED_BOUND_S = 20.0
CASES = cases()


def _needs_cert(behaviour: str, request: pytest.FixtureRequest) -> tuple[str, str] | None:
    return request.getfixturevalue("cert") if behaviour.startswith("tls") else None


def _start(agent: Agent, text: str, **kwargs: Any) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = agent.send(text, **kwargs)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, name="test-send")
    thread.start()
    return thread, box


@pytest.mark.parametrize("method", ["stop", "cancel-event", "supersede"])
@pytest.mark.parametrize(("phase", "behaviour"), CASES, ids=[f"{p}-{b}" for p, b in CASES])
def test_cancellation_ends_the_request_in_every_phase(
    phase: str, behaviour: str, method: str, request: pytest.FixtureRequest
) -> None:
    cert = _needs_cert(behaviour, request)
    with scenario(phase, behaviour, cert) as s, ModelServer(["after"]) as fallback:
        agent = Agent(config=s.config, callbacks=s.callbacks)
        try:
            cancel = threading.Event()
            thread, box = _start(agent, s.input, cancel=cancel)
            assert s.reached(REACHED_BOUND_S), f"the request never reached phase {phase}"
            if method == "stop":
                assert agent.stop() is True
            elif method == "cancel-event":
                cancel.set()
            else:
                result = agent.send("next", config={"base_url": fallback.base_url, "stream": True})
                assert result.text == "after"
            thread.join(ENDED_BOUND_S)
            assert not thread.is_alive(), f"the send went on in phase {phase} against {behaviour}"
            error = box.get("error")
            assert isinstance(error, AgentError) and error.kind == "aborted", box
            assert history_problems(agent.history, s.input) == []
        finally:
            agent.close()


_CHILD = Path(__file__).with_name("ctrl_c_child.py")


def test_ctrl_c_ends_the_request_in_every_phase(cert_files: tuple[str, str]) -> None:
    """SIGINT to a process whose main thread is inside send(): KeyboardInterrupt, history closed."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path.cwd()), str(_CHILD.parent)]),
        "REQUESTS_CA_BUNDLE": cert_files[0],
    }
    done = subprocess.run(
        [sys.executable, str(_CHILD), json.dumps(list(cert_files))],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["failures"] == [], report["failures"]
    assert report["ran"] == len(CASES)
