"""Checks the tool tests share: is a pid alive, waiting until pids are gone (and `returns_within`)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TypeVar

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
