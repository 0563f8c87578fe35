"""Child-process halves of tests/store/test_run_state.py, run as `python run_state_workers.py COMMAND JSON`.

    claim     each stdin line: claim that call id (no lease); print the outcome
    hold      hold the session's lease; print `held GEN`, then `lost T` when asked to stop
              (T = time.time()), then release (unless told to keep it) and print `released`
    watch     print `ready`, then each watched event as a JSON line until the watch ends
    steer     queue one steer or follow-up message and exit
    stop      `store.stop()`; print its result and the time it returned

Every child opens the store named by `spec` itself: a real second process, with its own
connection.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from store_workers import open_store


def claim(args: dict[str, Any]) -> None:
    store = open_store(args["spec"])
    print("ready", flush=True)
    for line in sys.stdin:
        call_id = line.strip()
        outcome, _ = store.claim_call(args["session"], call_id, "tool", args["hash"], False, None)
        print(outcome, flush=True)
    store.close()


def hold(args: dict[str, Any]) -> None:
    store = open_store(args["spec"])
    session = store.session(args["session"])
    session.load()
    lost = threading.Event()
    lease = session.acquire(
        "child", lease_s=args["lease_s"], cancel=threading.Event(), on_lost=lambda _handover: lost.set()
    )
    print(f"held {lease.generation}", flush=True)
    lost.wait()
    print(f"lost {time.time()!r}", flush=True)
    if not args.get("keep"):
        session.release()
        print("released", flush=True)
    sys.stdin.read()
    store.close()


def watch(args: dict[str, Any]) -> None:
    store = open_store(args["spec"])
    with store.watch(args["session"], after=args.get("after"), timeout=args["timeout"]) as events:
        print("ready", flush=True)
        for event in events:
            print(json.dumps(event), flush=True)
    store.close()


def steer(args: dict[str, Any]) -> None:
    store = open_store(args["spec"])
    getattr(store, args["queue"])(args["session"], args["message"])
    store.close()


def stop(args: dict[str, Any]) -> None:
    store = open_store(args["spec"])
    stopped = store.stop(args["session"], timeout=args.get("timeout"))
    print(json.dumps({"stopped": stopped, "at": time.time()}), flush=True)
    store.close()


if __name__ == "__main__":
    commands = {"claim": claim, "hold": hold, "watch": watch, "steer": steer, "stop": stop}
    commands[sys.argv[1]](json.loads(sys.argv[2]))
