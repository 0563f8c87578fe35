"""The call journal: a tool call is recorded as started before it runs, so it never runs twice.

    hash = input_hash({"path": "a.txt"})                  # sha256 hex of the canonical JSON
    journal.defer(call_id, "delete_file", input, hash)    # waits for a decision (no result yet)
    journal.decide(call_id, True)                         # from any process that opens the session
    outcome, reason = journal.claim(call_id, "delete_file", hash, replay=False)
    if outcome == "run": ...                              # the one and only start of this call

One row per call id. Its state only moves forward:

    (none) ──claim──▶ started                  a call that needs no decision
    (none) ──defer──▶ pending ──decide──▶ allowed ──claim──▶ started
                                      └─▶ denied
    pending / allowed / denied ──close──▶ closed   (a send moved on before it ran)

`claim` is the single atomic step that starts a call: it inserts the row, or consumes an
`allowed` decision, in the same transaction that marks it started — so a retried task, a second
worker or a crash between two steps can never start a call twice. A `started` call is started
again only for a tool marked `replay: "safe"`. A claim made under a lease carries its fence
(the holder and generation): a run that lost its session may no longer start anything.

`MemoryJournal` is the same journal for an agent without a session, for the life of the object;
`SessionJournal` is a session's, kept by its store (store/sql.py holds the SQL).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..errors import AgentError

State = Literal["pending", "allowed", "denied", "started", "closed"]
# What a claim found: "run" — claimed now, run the call; otherwise the call must not run:
# "started" (already started, not replayable), "pending" (no decision yet), "denied", "closed"
# (the conversation moved on), "changed" (approved for another input).
Outcome = Literal["run", "started", "pending", "denied", "closed", "changed"]

NO_DECISION = "no decision was made before the conversation moved on"
INPUT_CHANGED = "the call's input changed after it was approved"


def input_hash(input: Any) -> str:
    """sha256 hex of the input's canonical JSON (sorted keys, no spaces, non-ASCII as is)."""
    import hashlib  # here: a store-less agent that never journals a call never loads it

    text = json.dumps(input, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One journal row: what is known of a call's start and decision."""

    tool_call_id: str
    tool_name: str
    input_hash: str
    state: State
    input: Any = None
    reason: str | None = None

    def pending_view(self) -> dict[str, Any]:
        """The dict `agent.pending()`, `SendResult.pending` and `approval_required` carry."""
        return {
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "input": self.input,
            "input_hash": self.input_hash,
        }


class Journal(Protocol):
    """What a run asks of a journal (batch.py, the loop); both kinds below implement it."""

    def claim(self, call_id: str, tool_name: str, hash: str, *, replay: bool) -> tuple[Outcome, str | None]:
        """Start the call if it may start now; else say why not (with a denial's reason)."""
        ...

    def defer(self, call_id: str, tool_name: str, input: Any, hash: str) -> None: ...

    def stage(self, claims: Sequence[tuple[str, str, str]]) -> None:
        """Record `(call_id, tool_name, input_hash)` as started with the entry about to be
        committed (the reply that carries them): one transaction instead of one per call."""
        ...

    def records(self, call_ids: Sequence[str]) -> dict[str, CallRecord]: ...

    def pending(self) -> list[CallRecord]: ...

    def decide(self, call_id: str, allow: bool, reason: str | None, hash: str | None) -> None: ...

    def close(self, call_ids: Sequence[str]) -> list[dict[str, Any]]:
        """A send moved on from these open calls: close them; returns the result each gets."""
        ...

    def settle(self, call_ids: Iterable[str]) -> None:
        """The calls have their results in history: a memory journal forgets them."""
        ...


def closing_result(record: CallRecord | None) -> dict[str, Any]:
    """The result a send gives an open call it moves on from, by what the journal knows of it."""
    from ..tools.shape import denied_result, interrupted_result

    if record is not None and record.state in ("pending", "closed"):
        return denied_result(NO_DECISION)
    if record is not None and record.state == "denied":
        return denied_result(record.reason)
    return interrupted_result()


def claim_step(
    record: CallRecord | None, hash: str, replay: bool
) -> tuple[Outcome, State | None, str | None]:
    """The rule of a claim, shared by both journals: (outcome, the state to write, reason)."""
    if record is None:
        return "run", "started", None
    state = record.state
    if state == "allowed":
        if record.input_hash != hash:
            return "changed", None, INPUT_CHANGED
        return "run", "started", None
    if state == "started":
        return ("run", "started", None) if replay else ("started", None, None)
    if state == "denied":
        return "denied", None, record.reason
    if state == "closed":
        return "closed", None, NO_DECISION
    return "pending", None, None


def decide_step(record: CallRecord | None, call_id: str, hash: str | None) -> None:
    """Raise unless `record` may be decided now (`hash`, when given, must be the call's)."""
    if record is None or record.state != "pending":
        what = "unknown" if record is None else f"already {record.state}"
        raise AgentError(
            f"tool call {call_id!r} is not waiting for a decision ({what}); "
            "agent.pending() lists those that are",
            kind="request",
        )
    if hash is not None and hash != record.input_hash:
        raise AgentError(
            f"tool call {call_id!r}: input_hash {hash!r} is not the call's ({record.input_hash!r}); "
            "the decision was taken on a stale view",
            kind="conflict",
        )


def check_decision(call_id: Any, allow: Any, reason: Any, hash: Any) -> None:
    """What `decide()` accepts, checked before anything is written."""
    if not isinstance(call_id, str) or not call_id:
        raise AgentError(f"tool_call_id must be a non-empty str, got {call_id!r}", kind="request")
    if not isinstance(allow, bool):
        raise AgentError(f"allow must be True or False, got {allow!r}", kind="request")
    if reason is not None and not isinstance(reason, str):
        raise AgentError(f"reason must be a str or None, got {type(reason).__name__}", kind="request")
    if hash is not None and not isinstance(hash, str):
        raise AgentError(f"input_hash must be a str or None, got {type(hash).__name__}", kind="request")


class MemoryJournal:
    """The journal of an agent without a session: the same rules, in this object, for its life.

    Started calls are forgotten once their results are in history (`settle`), so a long-lived
    agent keeps only what still waits for a decision.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, CallRecord] = {}

    def claim(self, call_id: str, tool_name: str, hash: str, *, replay: bool) -> tuple[Outcome, str | None]:
        with self._lock:
            record = self._rows.get(call_id)
            outcome, state, reason = claim_step(record, hash, replay)
            if state is not None:
                self._rows[call_id] = CallRecord(call_id, tool_name, hash, state)
            return outcome, reason

    def defer(self, call_id: str, tool_name: str, input: Any, hash: str) -> None:
        with self._lock:
            self._rows.setdefault(call_id, CallRecord(call_id, tool_name, hash, "pending", input))

    def stage(self, claims: Sequence[tuple[str, str, str]]) -> None:
        with self._lock:
            for call_id, tool_name, hash in claims:
                self._rows.setdefault(call_id, CallRecord(call_id, tool_name, hash, "started"))

    def records(self, call_ids: Sequence[str]) -> dict[str, CallRecord]:
        """The records of `call_ids`; a call this object never met counts as started.

        An open call the agent did not make (a history loaded from elsewhere, written by a process
        that is gone) may have run: only a store's journal, which records every start, can say it
        did not. So `resume()` without a session gives it the interrupted result, as before.
        """
        with self._lock:
            return {i: self._rows.get(i) or CallRecord(i, "", "", "started") for i in call_ids}

    def pending(self) -> list[CallRecord]:
        with self._lock:
            return [r for r in self._rows.values() if r.state == "pending"]

    def decide(self, call_id: str, allow: bool, reason: str | None, hash: str | None) -> None:
        check_decision(call_id, allow, reason, hash)
        with self._lock:
            record = self._rows.get(call_id)
            decide_step(record, call_id, hash)
            assert record is not None
            self._rows[call_id] = CallRecord(
                call_id,
                record.tool_name,
                record.input_hash,
                "allowed" if allow else "denied",
                record.input,
                reason,
            )

    def close(self, call_ids: Sequence[str]) -> list[dict[str, Any]]:
        with self._lock:
            return [closing_result(self._rows.pop(call_id, None)) for call_id in call_ids]

    def settle(self, call_ids: Iterable[str]) -> None:
        with self._lock:
            for call_id in call_ids:
                record = self._rows.get(call_id)
                if record is not None and record.state != "pending":
                    del self._rows[call_id]
