"""Child processes the store tests drive: stdout read by a thread, so every wait has a bound.

child = Child([sys.executable, "durable_agents.py", "run", json.dumps(job)], env)
child.line()           # the next line, or an AssertionError after LONG_S (never a hang)
child.until(lambda line: line.startswith("result "))
child.finish()
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

LONG_S = 120.0  # bounds that only a hang reaches
ROOT = Path(__file__).resolve().parents[2]


def child_env(**extra: str) -> dict[str, str]:
    """This checkout's agentcore and the store test helpers, whatever else is installed."""
    paths = (str(ROOT), str(Path(__file__).parent), os.environ.get("PYTHONPATH", ""))
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), **extra}


class Child:
    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env or child_env()
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for text in self.process.stdout:
            self.lines.put(text.rstrip("\n"))
        self.lines.put(None)

    def line(self, timeout: float = LONG_S) -> str:
        """The next line; a failure (not a hang) when none comes within `timeout`."""
        try:
            text = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line from the child within {timeout} s") from None
        assert text is not None, f"the child ended early (status {self.process.poll()}); it wrote {self.seen}"
        self.seen.append(text)
        return text

    def until(self, wanted: Callable[[str], bool]) -> str:
        """Lines up to the first one `wanted` accepts (returned)."""
        while True:
            text = self.line()
            if wanted(text):
                return text

    def write(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()

    def finish(self) -> int:
        process = self.process
        if process.poll() is None and process.stdin is not None:
            try:
                process.stdin.close()
            except BrokenPipeError:
                pass
        try:
            return process.wait(timeout=LONG_S)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()
