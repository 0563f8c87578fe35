"""Run a scripted model server until interrupted.

    python -m agentcore.testing --port 8080 --script replies.json

`replies.json` holds a JSON list of script items (strings or dicts). Without a script every
request gets the "(script exhausted)" text, or `--default` when given.
"""

from __future__ import annotations

import argparse
import json
import threading

from .server import ModelServer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m agentcore.testing", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (0 picks a free one)")
    parser.add_argument("--script", help="a JSON file holding a list of script items")
    parser.add_argument("--default", help="text of the reply once the script is exhausted")
    args = parser.parse_args(argv)
    script = []
    if args.script:
        with open(args.script, encoding="utf-8") as file:
            script = json.load(file)
    with ModelServer(script, default=args.default, port=args.port) as server:
        print(f"serving {server.base_url} ({server.remaining} scripted replies); Ctrl-C stops", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
