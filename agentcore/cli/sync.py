"""One send from the command line; with `--session`, from the store's history.

    result = send(agent, "next message", display)     # None: another process cut this reply short

Two terminals on one `--session` take turns on one conversation: each message goes on from what
the store holds now, whatever the other terminal wrote since, never a `conflict` the user must
resolve by hand. (Until runs hold the session's lease, two replies running at the same moment
still collide: the one whose write comes second is reported and the conversation reloaded.)
"""

from __future__ import annotations

from typing import Any

from ..agent import Agent
from ..errors import AgentError
from ..result import SendResult
from .display import Display


def send(agent: Agent, text: str, display: Display) -> SendResult | None:
    """`agent.send(text)`, first brought up to date with the session's store when it has one."""
    if agent.session is None:
        return agent.send(text)
    agent.reload()
    start = len(agent.history)
    try:
        return agent.send(text)
    except AgentError as error:
        if error.kind != "conflict":
            raise
        ours = agent.history[start] if len(agent.history) > start else None
        agent.reload()
        if not _stored(ours, agent.history):
            # Nothing of this send reached the store: it goes on from what is there now, once.
            display.notice("[the session changed in another process; continuing from its history]")
            return agent.send(text)
        display.notice(
            f"[another process wrote to this session during this reply; reloaded "
            f"{_messages(len(agent.history))} (/history shows them)]"
        )
        return None


def _stored(entry: dict[str, Any] | None, history: list[dict[str, Any]]) -> bool:
    if entry is None or "id" not in entry:
        return False
    return any(stored.get("id") == entry["id"] for stored in history)


def _messages(count: int) -> str:
    return f"{count} message{'' if count == 1 else 's'}"
