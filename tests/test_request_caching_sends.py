"""What an agent keeps from one send to the next never changes a request, byte for byte.

An agent keeps the fold of its history and the memo of its entries' wire forms across sends
(`loop.Kept`), and compares history with them at each send, since API.md lets the user read and
write `agent.history` freely between sends. Each case runs the same sends through two agents on
equal histories, each against its own scripted server: one keeps its caches, the other runs with
every cache off (`memo.ENABLED = False`). Between sends both histories get the same random edits:
entries appended, edited in place at any depth, inserted, removed, reordered, replaced by equal
copies, the list replaced or reloaded from JSON. The request bodies the two servers received must
be the same bytes, for all four protocols, with the default budget and with a large one.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_request_caching import (
    PROTOCOLS,
    histories,
    in_place_edit,
    list_edit,
    scalars,
    turn_entries,
    user_entries,
)

from agentcore import Agent, AgentError, tool
from agentcore._utils import memo as memo_module
from agentcore.testing import ModelServer


@tool
def step(n: int = 0) -> str:
    """One step.

    Args:
        n: The step number.
    """
    return f"step {n} done"


@contextmanager
def caches(enabled: bool) -> Iterator[None]:
    saved = memo_module.ENABLED
    memo_module.ENABLED = enabled
    try:
        yield
    finally:
        memo_module.ENABLED = saved


def replies(plan: list[int]) -> list[Any]:
    """The server's script: per send, `calls` tool-call rounds, then two text replies (with
    `no_tool_rounds=2` the second one follows the first in the same turn, with a reminder)."""
    items: list[Any] = []
    for send, calls in enumerate(plan):
        items += [{"tool_calls": [{"name": "step", "arguments": {"n": n}}]} for n in range(calls)]
        items += [f"reply {send}", f"reply {send}, again"]
    return items


between_sends = st.one_of(
    st.tuples(st.just("append"), st.one_of(turn_entries(), user_entries().map(lambda e: [e]))),
    st.tuples(st.just("edit"), st.tuples(st.integers(0, 80), scalars)),
    st.tuples(
        st.sampled_from(["insert", "remove", "swap", "copy", "role", "part"]),
        st.tuples(st.integers(0, 80), st.integers(0, 80), user_entries()),
    ),
    st.tuples(st.just("load"), st.none()),
    st.tuples(st.just("replace"), histories()),
    st.tuples(st.just("nothing"), st.none()),
)


def edit(agent: Agent, kind: str, arg: Any) -> None:
    if kind == "append":
        agent.history.extend(arg)
    elif kind == "edit":
        in_place_edit(agent.history, *arg)
    elif kind == "load":
        agent.history = json.loads(json.dumps(agent.history))
    elif kind == "replace":
        agent.history = arg
    elif kind != "nothing":
        list_edit(agent.history, kind, *arg)


def outcome(agent: Agent, text: str) -> str:
    try:
        result = agent.send(text)
    except AgentError as error:  # an edit made history unsendable: the same failure either way
        return f"{error.kind}: {error.message}"
    return f"{result.reason}: {result.text}"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=histories(),
    sends=st.lists(st.tuples(between_sends, st.integers(0, 2)), min_size=1, max_size=4),
    protocol=st.sampled_from(PROTOCOLS),
    budget=st.sampled_from([128000, float("inf")]),
)
def test_sends_carry_the_same_bytes_with_and_without_the_kept_caches(
    first: list[dict[str, Any]],
    sends: list[tuple[tuple[str, Any], int]],
    protocol: str,
    budget: float,
) -> None:
    plan = [calls for _, calls in sends]
    with ModelServer(replies(plan)) as kept_server, ModelServer(replies(plan)) as plain_server:
        agents = {}
        for name, server, history in (
            ("kept", kept_server, first),
            ("plain", plain_server, copy.deepcopy(first)),
        ):
            config = {
                "base_url": server.base_url,
                "model": "m",
                "protocol": protocol,
                "max_context_tokens": budget,
                "no_tool_rounds": 2,
                "cache": False,  # a prompt-cache key would name each server's own address
                "retry": lambda error: False,
            }
            agents[name] = Agent(config=config, tools=[step], history=history)
        results: dict[str, list[str]] = {"kept": [], "plain": []}
        plain_sends = copy.deepcopy(sends)  # before the kept agent appends to what they hold
        for n in range(len(sends)):
            for name, enabled, steps in (("kept", True, sends), ("plain", False, plain_sends)):
                edit(agents[name], *steps[n][0])
                with caches(enabled):
                    results[name].append(outcome(agents[name], f"question {n}"))
        for agent in agents.values():
            agent.close()
        kept_bodies = numbered([r.raw for r in kept_server.log])
        plain_bodies = numbered([r.raw for r in plain_server.log])
    assert results["kept"] == results["plain"]
    assert kept_bodies == plain_bodies


# Ids that differ from server to server and travel back: the scripted server's random item ids
# (Responses), and the call ids made from a reply that carries none (Gemini, from its response id).
RANDOM_ID = re.compile(rb"\b(?:(?:fc|msg|rs|resp)_[0-9a-f]{32}|call_\d+_[0-9a-f]{8})")


def numbered(bodies: list[bytes]) -> list[bytes]:
    """The bodies with each made-up id replaced by its number in order of first appearance."""
    seen: dict[bytes, bytes] = {}
    return [RANDOM_ID.sub(lambda m: seen.setdefault(m.group(0), b"id%d" % len(seen)), b) for b in bodies]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_history_holding_a_lone_surrogate_sends_the_same_bytes_send_after_send(protocol: str) -> None:
    """An unencodable entry makes the kept encoding fail; the body is then made from scratch with
    U+FFFD, at every send, and the kept text stays what it was (never a half-encoded piece)."""
    poisoned = {"role": "assistant", "content": [{"type": "text", "text": "caf\udce9"}]}
    first = [{"role": "user", "content": "hello"}, poisoned]
    script: list[Any] = [{"tool_calls": [{"name": "step", "arguments": {"n": 0}}]}, "one", "two", "three"]
    with ModelServer(script) as kept_server, ModelServer(script) as plain_server:
        bodies = []
        for server, enabled in ((kept_server, True), (plain_server, False)):
            agent = Agent(
                config={
                    "base_url": server.base_url,
                    "model": "m",
                    "protocol": protocol,
                    "cache": False,
                    "no_tool_rounds": 1,
                },
                tools=[step],
                history=copy.deepcopy(first),
            )
            with caches(enabled):
                for n in range(3):
                    if n == 2:  # the poisoned entry edited away in place: the kept text takes over again
                        agent.history[1]["content"][0]["text"] = "café"
                    agent.send(f"question {n}")
            agent.close()
            bodies.append(numbered([r.raw for r in server.log]))
    assert len(bodies[0]) == 4 and bodies[0] == bodies[1]
    assert all("caf\ufffd".encode() in body for body in bodies[0][:3])
    assert "café".encode() in bodies[0][3] and "\ufffd".encode() not in bodies[0][3]
