"""Every example runs against the local model server (no key, no network)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").rglob("main.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_example_runs(path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AGENTCORE_MODEL")
    }
    done = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


def test_minimal_example_prints_reply_reason_steps_and_usage() -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AGENTCORE_MODEL")
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "minimal" / "main.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    out = done.stdout
    assert "6 words" in out and "reason: no-tool" in out and "steps:  2" in out and "input_tokens" in out
