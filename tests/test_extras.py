"""The core without the extras: a fresh venv with only `requests` and `jsonschema`.

Proves that `import agentcore` and a send work there, and that `agentcore.mcp` and
`agentcore.celery` then name the install command. Needs PyPI for the two packages (marked
`network`); skipped if pip cannot reach it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import sys
    import agentcore
    from agentcore import Agent, AgentError
    from agentcore.testing import ModelServer

    assert "mcp" not in sys.modules
    with ModelServer(["Hello from the core."]) as server:
        agent = Agent(config={"base_url": server.base_url, "model": "m"})
        print("send:", agent.send("hi").text)
        agent.close()
    try:
        import mcp  # noqa: F401
    except ImportError:
        print("no mcp SDK")
    import agentcore.mcp
    try:
        agentcore.mcp.connect(command=["server"])
    except AgentError as exc:
        print("mcp:", exc.kind, exc.message)
    import agentcore.celery
    try:
        agentcore.celery.agent_task(object(), lambda session_id: None)
    except AgentError as exc:
        print("celery:", exc.kind, exc.message)
    assert not {"celery", "kombu", "redis"} & set(sys.modules)
    """
)


@pytest.mark.network
def test_the_core_works_without_the_extras_and_mcp_names_the_install_command(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    # No pip inside (ensurepip is the slow part): this interpreter's pip installs into the venv.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "requests", "jsonschema"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if install.returncode != 0:
        pytest.skip(f"pip could not install requests and jsonschema (no PyPI?): {install.stderr[-500:]}")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = str(ROOT)  # the source tree, nothing else: no site-packages of this interpreter
    done = subprocess.run(
        [str(python), "-c", SCRIPT], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "send: Hello from the core." in lines
    assert "no mcp SDK" in lines
    assert "mcp: config agentcore.mcp needs the MCP SDK: pip install 'agentcore[mcp]'" in lines
    assert "celery: config agentcore.celery needs Celery: pip install 'agentcore[celery]'" in lines
