"""The memo of what each history entry costs to render: its token estimate, its wire form.

    with activated(memo):                   # the loop does this for the length of one run
        chars = recall(("chars",), content, lambda: count(content))

History is append-only for the library's own writes, so an entry's rendering could be kept
forever, but a user may edit an entry in place between two requests (or a hook may), replace
`agent.history`, or load another one. So a hit is never trusted on identity alone: each memo
entry keeps a *snapshot* of the value it was computed from (containers copied, strings shared)
and a hit is served only when the snapshot still equals the live value. That comparison runs in
C and stops at shared strings by identity, so it costs a small fraction of rendering again.
Numbers and booleans are compared by type too (`1 == True == 1.0` in Python, not in JSON).
The one edit not detected: reordering a dict's keys while keeping every value.

One memo serves all the runs of one agent (the loop activates it in a context variable for
each run). Its entries serve the run that made them and are dropped when the next run begins:
from one send to the next, the kept fold (`fold.Reuse`) and `wire`, the wire forms and JSON text
of the latest request, carry what is still valid, and an agent between sends holds no more.
`ENABLED = False` switches every request cache off, this one and the kept fold (the equivalence
tests).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

ENABLED = True
_active: ContextVar[Memo | None] = ContextVar("agentcore_memo", default=None)


class Memo:
    """Values computed from history-format data, each kept with a snapshot of its source.

    Callers key an entry by the identities of its parts, not of its content list: the context
    builder passes fresh lists of the same parts. The snapshot, not the key, decides a hit.
    """

    def __init__(self) -> None:
        self._store: dict[Hashable, tuple[Any, Any]] = {}
        # The current request's message list, how many of its first messages the loop's context
        # build made (objects the build keeps while the entries they come from are unchanged; see
        # `fold.Reuse`) and which of the fold's messages they are (`fold.Shape`, or None). None
        # when the request's messages are not the build's.
        self.built: tuple[list[Any], int, Any] | None = None
        # The latest request's build messages with their wire forms and the JSON text of those,
        # for the protocol and render settings they were made for (`_common.rendered_all`).
        self.wire: Any = None

    def new_run(self) -> None:
        """A run begins or ends: the entries of the last one go (`wire` stays, for the next request)."""
        self._store = {}
        self.built = None

    def recall(self, key: Hashable, source: Any, compute: Callable[[], T]) -> T:
        hit = self._store.get(key)
        # The snapshot goes on the left, so its strict scalars decide the comparison.
        if hit is not None and hit[0] == source:
            value: T = hit[1]
            return value
        value = compute()
        self._store[key] = (snapshot(source), value)
        return value

    def __len__(self) -> int:
        return len(self._store)


def active() -> Memo | None:
    return _active.get() if ENABLED else None


def recall(key: Hashable, source: Any, compute: Callable[[], T], memo: Memo | None = None) -> T:
    """`compute()`, or its value from `memo` (default: the active one) when `source` is unchanged since.

    A caller looking up every entry of a request passes `memo=active()` fetched once.
    """
    if memo is None:
        memo = active()
        if memo is None:
            return compute()
    return memo.recall(key, source, compute)


@contextmanager
def activated(memo: Memo) -> Iterator[Memo]:
    token = _active.set(memo)
    try:
        yield memo
    finally:
        _active.reset(token)


def snapshot(value: Any) -> Any:
    """A copy of `value`'s containers (strings shared), with scalars that compare by type too."""
    kind = type(value)
    if kind is str:
        return value
    if kind is dict:
        return {key: snapshot(item) for key, item in value.items()}
    if kind is list:
        return [snapshot(item) for item in value]
    if kind is tuple:
        return tuple(snapshot(item) for item in value)
    return _Strict(value)


def copied(value: Any) -> Any:
    """A copy of `value`'s dicts, lists and tuples, leaves shared: what user code is handed.

    Hooks, callbacks and custom adapters may edit what they get in place, at any depth; a copy
    this deep keeps such edits out of history and out of the caches that reuse rendered entries.
    """
    kind = type(value)
    if kind is dict:
        return {key: copied(item) for key, item in value.items()}
    if kind is list:
        return [copied(item) for item in value]
    if kind is tuple:
        return tuple(copied(item) for item in value)
    return value


_IMMUTABLE = (type(None), bool, int, float, bytes)


class _Strict:
    """A scalar (or any other leaf) equal only to a value of the very same type."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        # A leaf of another type (an object a user put in history) may change unseen: never equal.
        if type(self.value) not in _IMMUTABLE or type(other) is not type(self.value):
            return False
        return other is self.value or bool(other == self.value)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]
