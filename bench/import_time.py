"""Import time of agentcore in fresh processes, this tree against another one side by side.

    python bench/import_time.py [--runs 9] [--against /tmp/ac-wt/base]

Each figure is the median over `--runs` fresh interpreters of the in-process time of one
statement (`import agentcore`, then `from agentcore import Agent, tool` in the same process), with
the trees' runs interleaved so that a busy machine slows both alike ("both": the median of the
sums). Two settings: "source" as the environment has it (here PYTHONDONTWRITEBYTECODE=1: every
module is compiled from source on each start) and "bytecode" (a warm cache under
PYTHONPYCACHEPREFIX, as an installed package has).
Target (issue 13): `import agentcore` <= 30 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNIPPET = (
    "import time\n"
    "t = time.perf_counter(); import agentcore; a = time.perf_counter() - t\n"
    "t = time.perf_counter(); from agentcore import Agent, tool; b = time.perf_counter() - t\n"
    "print(a * 1000, b * 1000)\n"
)


def once(tree: Path, env: dict[str, str]) -> tuple[float, float]:
    # cwd outside both trees: `-c` puts the working directory first on sys.path.
    done = subprocess.run(
        [sys.executable, "-c", SNIPPET],
        env={**env, "PYTHONPATH": str(tree)},
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        check=True,
    )
    first, second = done.stdout.split()
    return float(first), float(second)


def measure(trees: list[Path], runs: int, env: dict[str, str]) -> dict[Path, tuple[float, float, float]]:
    samples: dict[Path, list[tuple[float, float]]] = {tree: [] for tree in trees}
    for _ in range(runs):
        for tree in trees:
            samples[tree].append(once(tree, env))
    return {
        tree: (
            statistics.median(s[0] for s in got),
            statistics.median(s[1] for s in got),
            statistics.median(s[0] + s[1] for s in got),
        )
        for tree, got in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--against", type=Path, action="append", default=[], help="another tree")
    args = parser.parse_args()
    trees = [*args.against, ROOT]
    with tempfile.TemporaryDirectory() as cache:
        bytecode = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        bytecode["PYTHONPYCACHEPREFIX"] = cache
        measure(trees, 1, bytecode)  # fills the cache
        settings = {"source": dict(os.environ), "bytecode": bytecode}
        print(f"median of {args.runs} fresh processes, ms   import agentcore  + Agent, tool  both")
        for label, env in settings.items():
            for tree, (first, second, both) in measure(trees, args.runs, env).items():
                print(f"  {label:8} {tree!s:30} {first:8.1f}  {second:12.1f}  {both:6.1f}")


if __name__ == "__main__":
    main()
