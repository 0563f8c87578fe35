"""History folded into turns, each with the messages a request carries of it; extended as history grows.

    fold = Fold.whole(history, protocol="chat", reasoning=False)   # at once (duplicate ids renamed)
    fold.turns[i].reduced, fold.messages, fold.chars, fold.summary
    reuse = Reuse()                                                 # one per agent: see below
    fold = reuse.fold(history, "chat", False)                       # the same fold, or None

A turn is what `history.turns` makes of history; its `reduced` messages keep role and content
only, without the reasoning the request must not carry and without empty replies.

Invariant: a fold extended piece by piece equals the fold of the whole list made at once. It
holds while each cut between a piece and what follows splits no turn (no result after the cut
for a call before it, no result before it waiting for a call after it, no assistant reply after
it continuing one before it) and no call id repeats; anything else is folded whole again.
"""

from __future__ import annotations

import operator
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from ._utils import memo as _memo
from ._utils import tokens as _tokens
from ._utils.memo import snapshot
from .call_ids import open_calls, paired, tool_calls_of, tool_results_of
from .history import Message, turns

CONTINUE_PROMPT = "Continue the task from where the summary in the system prompt leaves off."
Settings = tuple[str | None, bool]  # (protocol, reasoning): what a turn's reduced messages depend on


@dataclass(frozen=True, eq=False)
class Shape:
    """Which of a fold's messages a request's messages are: those of the `head` (the selected turns,
    and the opener line), then `fold.messages[start:end]`.

    A fold's messages are only ever added to (a turn folded again keeps the objects of the messages
    it had), so a later shape of the same fold with the same head and start opens with the very
    messages of an earlier one: the adapters may reuse what they made of those without comparing
    them one by one (`protocols/_common.rendered_all`).
    """

    fold: Fold
    head: tuple[Any, ...]
    start: int
    end: int

    def extends(self, earlier: Any) -> bool:
        return (
            isinstance(earlier, Shape)
            and earlier.fold is self.fold
            and earlier.head == self.head
            and earlier.start == self.start
            and earlier.end <= self.end
        )


class Turn:
    """One turn: its messages as `history.turns` gives them, and the ones a request carries."""

    __slots__ = ("_chars", "_each", "messages", "reduced", "role")

    def __init__(self, messages: list[Message], settings: Settings, earlier: Turn | None = None) -> None:
        """`earlier`: this turn as it was before more messages joined it; its reduced messages stay."""
        protocol, reasoning = settings
        kept = _kept(earlier, messages)
        self.messages: list[Message] = messages
        each = kept + [reduce(m, protocol, reasoning) for m in messages[len(kept) :]]
        self.reduced: list[Message] = [r for r in each if r is not None]
        # Per message, its reduced one or None; kept only when some are None (else `reduced` is it).
        self._each: list[Message | None] | None = each if len(self.reduced) < len(each) else None
        self.role = messages[0].get("role")
        self._chars: int | None = None

    @property
    def compact(self) -> bool:
        return bool(self.role == "compact")

    def tokens(self, ratio: float) -> float:
        """The estimate selection weighs this turn by: all of its messages, as history holds them."""
        if self._chars is None:
            self._chars = _tokens.messages_chars(self.messages)
        return self._chars * ratio


def _kept(earlier: Turn | None, messages: list[Message]) -> list[Message | None]:
    """The reduced messages of `earlier` for the messages `messages` opens with as `earlier` did."""
    if earlier is None:
        return []
    n = 0
    for mine, theirs in zip(messages, earlier.messages, strict=False):
        if mine is not theirs:
            break
        n += 1
    each: list[Message | None] = list(earlier.reduced) if earlier._each is None else earlier._each
    return each[:n]


class Fold:
    """The turns of `history[:len(entries)]`, their reduced messages in order, and what a cut needs."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.turns: list[Turn] = []
        self.messages: list[Message] = []  # every turn's reduced messages, in order
        self.starts = array("q")  # where each turn's messages start in `messages`
        self.chars = 0  # messages_chars(messages)
        self.char_starts = array("q")  # chars of the messages before each turn's
        self.summary: int | None = None  # the index of the latest compact turn
        self._continue: Message | None = None
        # Only for a fold that is extended (`Reuse`):
        self.entries: list[Any] = []  # the entry objects folded
        self.roles: list[Any] = []  # and snapshots of what a request reads of each
        self.contents: list[Any] = []
        self.calls: set[str] = set()  # call ids
        self.unmatched: set[str] = set()  # result ids with no call
        self.last_role: Any = None  # of the last entry
        self.last_start: int | None = None  # the last turn is exactly `entries[last_start:]`

    @classmethod
    def whole(cls, history: Sequence[Mapping[str, Any]], protocol: str | None, reasoning: bool) -> Fold:
        """The fold of all of `history` at once; duplicate call ids are renamed first (`paired`)."""
        fold = cls((protocol, reasoning))
        folded = turns(paired([m if isinstance(m, dict) else dict(m) for m in history]))
        fold._add([Turn(t, fold.settings) for t in folded])
        return fold

    def continue_message(self) -> Message:
        """The request-only user line that opens a selection starting mid-task (one object per fold)."""
        if self._continue is None:
            self._continue = {"role": "user", "content": CONTINUE_PROMPT}
        return self._continue

    def turn_chars(self, index: int) -> int:
        """messages_chars of turn `index`'s reduced messages."""
        end = self.char_starts[index + 1] if index + 1 < len(self.turns) else self.chars
        return end - self.char_starts[index]

    def _add(self, added: list[Turn]) -> None:
        for turn in added:
            if turn.compact:
                self.summary = len(self.turns)
            self.starts.append(len(self.messages))
            self.char_starts.append(self.chars)
            self.turns.append(turn)
            self.messages += turn.reduced
            self.chars += _tokens.messages_chars(turn.reduced)

    def _drop_last(self) -> None:
        self.turns.pop()
        del self.messages[self.starts.pop() :]
        self.chars = self.char_starts.pop()
        if self.summary == len(self.turns):
            self.summary = None

    # ------------------------------------------------------------ extended by what follows

    def holds(self, history: Sequence[Any]) -> bool:
        """History still opens with the very entry objects folded (the trust rule within a run)."""
        n = len(self.entries)
        return len(history) >= n and all(map(operator.is_, self.entries, history[:n]))

    def matches(self, history: Sequence[Any]) -> bool:
        """History still opens with entries of the roles and contents folded (the rule between runs).

        Contents are compared with their snapshots: containers were copied, so an edit in place
        at any depth shows; strings compare by value, other scalars by type and value. Entries
        replaced by equal ones (a reloaded session) match, and are the ones trusted from then on.
        """
        n = len(self.entries)
        if len(history) < n:
            return False
        head = history[:n] if isinstance(history, list) else list(history[:n])
        try:
            # The snapshots on the left: their strict scalars decide each comparison.
            same = self.roles == list(map(dict.get, head, repeat("role")))
            same = same and self.contents == list(map(dict.get, head, repeat("content")))
        except TypeError:  # an entry that is not a dict
            return False
        if same:
            self.entries = head
        return same

    def extend(self, tail: Sequence[Any]) -> list[Turn] | None:
        """Fold `tail` (the entries after this fold) onto it; None when the cut would split a turn.

        Returns the fold's turns. When `tail` leaves a call without its result, nothing is kept:
        the result joins that call's turn, so the turn is folded again with it next time.
        """
        if not tail:
            return self.turns
        if any(type(m) is not dict for m in tail):
            return None
        reopened: list[Any] = []
        if (
            self.last_role == "assistant"
            and tail[0].get("role") == "assistant"
            and self.last_start is not None
        ):
            # The reply continues the last turn: fold that turn again, with the reply.
            reopened = self.entries[self.last_start :]
        piece = _Piece(reopened + list(tail), self.settings, self.turns[-1] if reopened else None)
        base_calls = self.calls - piece.reopened_calls(len(reopened)) if reopened else self.calls
        if not piece.fits(base_calls, self.unmatched, self.last_role if not reopened else None):
            return None
        if piece.open_calls:
            return self.turns[: len(self.turns) - bool(reopened)] + piece.turns
        if reopened:
            self._drop_last()
            del self.entries[self.last_start :]
            del self.roles[self.last_start :]
            del self.contents[self.last_start :]
            self.calls = base_calls
        self._commit(piece)
        return self.turns

    def _commit(self, piece: _Piece) -> None:
        start = len(self.entries)
        self._add(piece.turns)
        self.entries += piece.entries
        self.roles += [snapshot(m.get("role")) for m in piece.entries]
        self.contents += [snapshot(m.get("content")) for m in piece.entries]
        self.calls |= piece.calls
        self.unmatched |= piece.results - self.calls
        self.last_role = piece.entries[-1].get("role")
        # The last turn can be folded again (a reply continuing it) only while it is exactly the
        # last entries: then the fold without it is the fold of the entries before them.
        last = piece.turns[-1].messages if piece.turns else []
        first = len(piece.entries) - len(last)
        exact = bool(last) and first >= 0 and all(map(operator.is_, last, piece.entries[first:]))
        self.last_start = start + first if exact else None

    def open_tail_calls(self, history: Sequence[Any]) -> list[dict[str, Any]] | None:
        """`call_ids.open_calls(history)` from the entries after this fold only, or None when it cannot tell.

        Every call in a kept fold has its result. A call after it could still be answered by a
        result folded without its call (stored before it), or share an id with a folded call.
        """
        tail = list(history[len(self.entries) :])
        if any(type(m) is not dict for m in tail):
            return None
        calls = {str(p.get("tool_call_id")) for m in tail for p in tool_calls_of(m)}
        if not self.calls.isdisjoint(calls) or not self.unmatched.isdisjoint(calls):
            return None
        return open_calls(tail)


class _Piece:
    """The turns of some entries folded on their own, and what deciding a cut before them needs."""

    def __init__(self, entries: list[Any], settings: Settings, reopened: Turn | None = None) -> None:
        self.entries = entries
        self.call_list = [str(p.get("tool_call_id")) for m in entries for p in tool_calls_of(m)]
        self.calls = set(self.call_list)
        self.results = {str(p.get("tool_call_id")) for m in entries for p in tool_results_of(m)}
        self.open_calls = not self.calls <= self.results
        # A reopened turn is folded again first: the messages it had keep their reduced objects, so
        # a request still opens with the very messages of the one before (see `_common.rendered_all`).
        folded = turns(entries)
        self.turns = [Turn(t, settings, reopened if i == 0 else None) for i, t in enumerate(folded)]

    def reopened_calls(self, count: int) -> set[str]:
        return {str(p.get("tool_call_id")) for m in self.entries[:count] for p in tool_calls_of(m)}

    def fits(self, calls: set[str], unmatched: set[str], last_role: Any) -> bool:
        """The cut between a fold (its call ids, its results without a call) and these splits no turn."""
        if last_role == "assistant" and self.entries[0].get("role") == "assistant":
            return False
        if len(self.calls) != len(self.call_list) or not calls.isdisjoint(self.calls):
            return False
        return calls.isdisjoint(self.results) and unmatched.isdisjoint(self.calls)


# ---------------------------------------------------------------- kept from one build to the next


class Reuse:
    """The fold of a history prefix, kept from build to build and extended by what was appended.

        reuse = Reuse()                      # one per agent (the loop's Run.reuse)
        reuse.new_run()                      # at the start of each run
        build(history, ..., reuse=reuse)     # the same as without `reuse`, entry for entry

    Two rules say when the kept fold still describes history:
    - Within a run the loop is history's only writer (API.md: `agent.history` is read and written
      freely *between* sends), so the fold stands while history opens with the very entry
      objects it folded: an identity check, in C.
    - A new run first compares every folded entry's role and content with the snapshots taken
      when it was folded (`Fold.matches`): an edit in place at any depth, a replaced, shortened
      or reordered list, an insertion or a removal shows there, and the fold is made again
      from the whole history. One comparison per run, in C, however long history is.
    A fold that does not describe history, other settings (protocol, reasoning), an entry that is
    not a dict, or a cut that would split a turn: the build starts over from the whole history.
    """

    def __init__(self) -> None:
        self._fold: Fold | None = None
        self._trusted = False  # this run has compared the fold with history
        self._compared: Sequence[Any] | None = None  # the history it compared, until the next use
        self._checked: tuple[Sequence[Any], int] | None = None  # what the latest build covered

    def new_run(self) -> None:
        """History may have been edited since the last build: the next use compares it with the fold."""
        self._trusted = False
        self._compared = None

    def _kept(self, history: Sequence[Any]) -> Fold | None:
        fold = self._fold
        if fold is not None and not self._describes(fold, history):
            fold = self._fold = None
        self._trusted = True
        return fold

    def _describes(self, fold: Fold, history: Sequence[Any]) -> bool:
        if not self._trusted:
            matched = fold.matches(history)
            self._compared = history if matched else None
            return matched
        if self._compared is history:
            # Compared with its entries a moment ago, in this run (the send's first step): since
            # then only the loop wrote to it, which appends.
            self._compared = None
            return len(history) >= len(fold.entries)
        return fold.holds(history)

    def fold(self, history: Sequence[Any], protocol: str | None, reasoning: bool) -> Fold | None:
        """The fold of all of `history`, extended from the kept one; None when it must be made whole."""
        if not _memo.ENABLED:  # every cache off: the equivalence tests
            return None
        fold = self._kept(history)
        if fold is None or fold.settings != (protocol, reasoning):
            fold = Fold((protocol, reasoning))
        found = fold.extend(history[len(fold.entries) :])
        if found is None:
            self._fold = self._checked = None
            return None
        self._fold = fold if fold.entries else None
        self._checked = (history, len(history))
        if found is fold.turns and len(fold.entries) == len(history):
            return fold
        return _view(fold, found)  # a call waiting for its result: not kept

    def call_ids(self, history: Sequence[Any]) -> set[str] | None:
        """The tool-call ids in `history` (`call_ids.used_ids`), from the latest build.

        None unless that build was of this very list at this length.
        """
        fold, checked = self._fold, self._checked
        if fold is None or checked is None or checked[0] is not history or checked[1] != len(history):
            return None
        tail = history[len(fold.entries) :]
        return fold.calls | {str(p.get("tool_call_id")) for m in tail for p in tool_calls_of(m)}

    def open_calls(self, history: Sequence[Any]) -> list[dict[str, Any]] | None:
        """`call_ids.open_calls(history)` from the kept fold (compared with history first), or None."""
        if not _memo.ENABLED:
            return None
        fold = self._kept(history)
        return None if fold is None else fold.open_tail_calls(history)


def _view(fold: Fold, found: list[Turn]) -> Fold:
    """A fold of `found` turns that is not kept (a call in them still waits for its result)."""
    view = Fold(fold.settings)
    view._add(found)
    return view


# ---------------------------------------------------------------- one entry's request message


def reduce(message: Mapping[str, Any], protocol: str | None, reasoning: bool) -> Message | None:
    """Keep role and content only; drop reasoning the request must not carry and empty replies."""
    role = message.get("role")
    content = message.get("content")
    if role == "compact":
        return None
    if role == "assistant" and isinstance(content, list):
        content = [p for p in content if _keep_part(p, protocol, reasoning)]
        if not content:
            return None
    elif role == "assistant" and isinstance(content, str) and not content:
        return None
    return {"role": role, "content": content}


def _keep_part(part: Any, protocol: str | None, reasoning: bool) -> bool:
    if not isinstance(part, Mapping):
        return False
    kind = part.get("type")
    if kind == "text":
        return bool(part.get("text"))
    if kind != "reasoning":
        return True
    meta = part.get("provider_metadata")
    if protocol is not None and isinstance(meta, Mapping) and meta.get("protocol") == protocol:
        return True
    return reasoning and bool(part.get("text"))
