"""The grammar of a run's events (API.md "Order of a run"), shared by the event tests.

events = collect(agent.stream("hi"))     # every event, json.dumps'd and order-checked
assert check_order(events) == []
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

Event = dict[str, Any]


def check_order(events: list[Event]) -> list[str]:
    """Problems with an event sequence of one run (empty when it follows API.md "Order of a run")."""
    problems: list[str] = []
    if not events:
        return ["no events"]
    for event in events:
        try:
            json.dumps(event)
        except (TypeError, ValueError) as exc:
            problems.append(f"{event['type']} is not JSON: {exc}")
    if events[0]["type"] != "agent_start":
        problems.append(f"first event is {events[0]['type']}")
    if events[-1]["type"] != "agent_end":
        problems.append(f"last event is {events[-1]['type']}")
    if [e["type"] for e in events].count("agent_end") != 1:
        problems.append("agent_end is not there exactly once")
    if len({(e["run_id"], e["agent_id"]) for e in events}) != 1:
        problems.append("events of one run carry different run_id / agent_id")
    step = 0
    open_reply = False
    in_turn = False
    started: set[str] = set()
    pending_start: Event | None = None
    for index, event in enumerate(events):
        kind = event["type"]
        where = f"event {index} ({kind})"
        if pending_start is not None:
            if kind != "message_end" or event["message"] is not pending_start["message"]:
                problems.append(f"{where}: a whole entry's message_start is not followed by its message_end")
            pending_start = None
            continue
        if open_reply and kind not in ("message_update", "message_end", "retry", "agent_end"):
            problems.append(f"{where} inside an open assistant reply")
        if kind == "turn_start":
            step += 1
            in_turn = True
            if event["step"] != step:
                problems.append(f"{where}: step {event['step']}, expected {step}")
        elif kind == "turn_end":
            if not in_turn or event["step"] != step:
                problems.append(f"{where}: turn_end without its turn_start")
            in_turn = False
        elif kind == "message_start":
            message = event["message"]
            if message["role"] == "assistant" and not message["content"]:
                open_reply = True
            else:
                pending_start = event
        elif kind == "message_update":
            if not open_reply:
                problems.append(f"{where}: message_update outside a reply")
            if event["delta"]["type"] not in (
                "text-delta",
                "reasoning-delta",
                "tool-call-delta",
                "tool-call",
            ):
                problems.append(f"{where}: delta type {event['delta']['type']}")
        elif kind == "message_end":
            if not open_reply:
                problems.append(f"{where}: message_end without message_start")
            open_reply = False
        elif kind == "retry":
            open_reply = False
            if set(event["error"]) != {"kind", "status", "message"}:
                problems.append(f"{where}: error keys {sorted(event['error'])}")
        elif kind == "tool_execution_start":
            if event["tool_call_id"] in started:
                problems.append(f"{where}: started twice")
            started.add(event["tool_call_id"])
        elif kind == "tool_execution_end":
            if "output" not in event["result"]:
                problems.append(f"{where}: result without output")
        elif kind == "tool_execution_update" and event["tool_call_id"] not in started:
            problems.append(f"{where}: output of a call that did not start")
    if pending_start is not None:
        problems.append("a message_start was never ended")
    last = events[-1]
    if last["type"] == "agent_end" and set(last) - {"error"} != {
        "type",
        "run_id",
        "agent_id",
        "reason",
        "steps",
        "usage",
        "text",
    }:
        problems.append(f"agent_end keys {sorted(last)}")
    return problems


def _whole_entry_problems(events: list[Event]) -> list[str]:
    """A tool message's message_end comes after the tool_execution_end of each of its calls."""
    problems: list[str] = []
    ended: set[str] = set()
    for event in events:
        if event["type"] == "tool_execution_end":
            ended.add(event["tool_call_id"])
        if event["type"] == "message_end" and event["message"]["role"] == "tool":
            for part in event["message"]["content"]:
                if part["tool_call_id"] not in ended:
                    problems.append(f"tool message before the end of call {part['tool_call_id']}")
    return problems


def collect(run: Iterable[Event]) -> list[Event]:
    """All events of a stream, checked; a failed run's AgentError is re-raised after the check."""
    events: list[Event] = []
    try:
        for event in run:
            events.append(event)
    finally:
        assert check_order(events) + _whole_entry_problems(events) == []
    return events


def types(events: list[Event]) -> list[str]:
    return [e["type"] for e in events]


def compressed(events: list[Event]) -> list[str]:
    """Event types with runs of message_update folded into one, for readable order assertions."""
    out: list[str] = []
    for kind in types(events):
        if kind == "message_update" and out and out[-1] == "message_update*":
            continue
        out.append("message_update*" if kind == "message_update" else kind)
    return out
