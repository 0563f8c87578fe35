"""The one place that calls notification callbacks and swallows their errors.

    notify(callbacks.get("on_step"), payload)

A display callback failing must never stop the run or change a result; its error is
logged on the "agentcore" logger at WARNING with the traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("agentcore")


def notify(callback: Callable[..., Any] | None, *args: Any) -> None:
    if callback is None:
        return
    try:
        callback(*args)
    except Exception:
        name = getattr(callback, "__name__", repr(callback))
        log.warning("callback %s raised; the run goes on", name, exc_info=True)
