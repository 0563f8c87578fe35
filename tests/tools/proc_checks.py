"""Checks the tool tests share: is a pid alive, waiting until pids are gone, a call that must return."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


def alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie counts as gone: it runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def gone(pids: Iterable[int], within_s: float = 30.0) -> bool:
    """Poll until none of `pids` is alive; False if some still are after `within_s`."""
    pids = list(pids)
    deadline = time.monotonic() + within_s
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def returns_within(call: Callable[[], T], join_s: float = 30.0) -> T:
    """Run `call` in a thread and give back its result; fail (not hang) if it is still busy after
    `join_s`. The tests make whatever the call must NOT wait for block far longer than that."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = call()
        except BaseException as error:  # handed to the test thread below
            box["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(join_s)
    assert not thread.is_alive(), f"the call had not returned after {join_s} s"
    if "error" in box:
        raise box["error"]
    return box["result"]  # type: ignore[no-any-return]
