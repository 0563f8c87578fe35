"""Run the local model server until interrupted.

    python -m agentcore.testing --port 8080                        # the demo model
    python -m agentcore.testing --port 8080 --script replies.json

Without a script every request is answered by the demo model (`agentcore.testing.demo`: it
streams text and calls the tools the request declares). `replies.json` holds a JSON list of
script items (strings or dicts); once they are used up, requests get the "(script exhausted)"
text, or `--default` when given.
"""

from __future__ import annotations

import argparse
import json
import threading

from . import demo
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
    default = args.default if args.default is not None or args.script else demo.reply
    with ModelServer(script, default=default, port=args.port) as server:
        what = f"{server.remaining} scripted replies" if args.script else "the demo model"
        print(f"serving {server.base_url} ({what}); Ctrl-C stops", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
