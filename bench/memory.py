"""Peak RSS of a process that runs one 100-step tool chain, and what each stage adds.

    python bench/memory.py [--steps 100] [--trace]

The process imports agentcore only (the model server runs in another process, as in
`cpu_per_step.py`), then prints its peak RSS (`VmHWM`) after each stage: the interpreter,
`from agentcore import Agent, tool`, `requests` + `jsonschema` (which the first send loads),
and the chain. `--trace` adds the largest Python allocations by file (`tracemalloc`).
Target (issue 13): <= 40 MB after 100 steps.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tracemalloc


def peak_mb() -> float:
    """The peak RSS of this process image. `ru_maxrss` is not it when a big process started this
    one: Linux carries the parent's peak over through fork and exec; `VmHWM` starts anew at exec."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--trace", action="store_true")
    args = parser.parse_args()
    print(f"{'interpreter':36} {peak_mb():6.1f} MB")
    if args.trace:
        tracemalloc.start(5)
    import cpu_per_step as bench  # from agentcore import Agent, tool

    print(f"{'+ from agentcore import Agent, tool':36} {peak_mb():6.1f} MB")
    import jsonschema  # noqa: F401
    import requests  # noqa: F401

    print(f"{'+ requests, jsonschema':36} {peak_mb():6.1f} MB")
    server = subprocess.Popen(
        [sys.executable, "-c", bench.SERVER, str(args.steps)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        bench.chain(server.stdout.readline().strip(), args.steps, False)
    finally:
        server.communicate("")
    print(f"{f'+ a {args.steps}-step chain':36} {peak_mb():6.1f} MB (target <= 40 MB)")
    if args.trace:
        stats = tracemalloc.take_snapshot().statistics("filename")
        print(f"traced Python allocations: {sum(s.size for s in stats) / 1e6:.1f} MB; largest:")
        for stat in stats[:12]:
            print(f"  {stat}")


if __name__ == "__main__":
    main()
