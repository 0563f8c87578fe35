"""Budgets (API.md §Fallback models and budgets): each limit ends a run with reason "budget" before
the request that would pass it, counting retries, compaction and sub-agents; `limits_scope:
"session"` counts what the stored history says; `cost` and `usage.cost()` agree with prices.

Every test talks to the real local model server over HTTP and counts the requests it received:
"no request past a limit" is what the server saw, not what the client says.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from history_checks import history_is_valid

import agentcore
from agentcore import Agent, AgentError, Usage, tool
from agentcore.budget import spent
from agentcore.store import SQLiteStore
from agentcore.testing import ModelServer

MODEL = "test-model"
FAST_RETRY = {"retry_base_delay": 0.01, "retry_max_delay": 0.05}
PRICES = {MODEL: {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}}


@tool
def note(text: str) -> str:
    """Write a note.

    Args:
        text: What to note.
    """
    return f"noted {text}"


def _agent(server: ModelServer, *, tools: Any = (note,), **config: Any) -> Agent:
    base = {"base_url": server.base_url, "model": MODEL, "no_tool_rounds": 1, **FAST_RETRY}
    return Agent(config={**base, **config}, tools=list(tools) if tools else None)


def _call(id: str, text: str = "x") -> dict[str, Any]:
    return {"name": "note", "id": id, "arguments": {"text": text}}


def _research(id: str) -> dict[str, Any]:
    return {"name": "research", "id": id, "arguments": {"task": "dig"}}


def _usage(i: int, o: int, **cache: int) -> dict[str, int]:
    return {"input_tokens": i, "output_tokens": o, **cache}


def _tool_round(id: str, i: int = 10, o: int = 2) -> dict[str, Any]:
    return {"tool_calls": [_call(id)], "usage": _usage(i, o)}


def _events(agent: Agent) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    agent.subscribe(seen.append)
    return seen


def test_requests_limit_ends_the_run_before_the_next_request(server: ModelServer) -> None:
    """The model would call tools for ever: the third request is the last one made."""
    server.add(*[_tool_round(f"c{i}") for i in range(6)])
    with _agent(server, limits={"requests": 3}) as agent:
        events = _events(agent)
        result = agent.send("go")
    assert len(server.requests) == 3
    assert result.reason == "budget"
    assert result.limit == {"name": "requests", "limit": 3, "used": 3}
    assert result.steps == 3
    # The round in progress completed: its call ran and its result is written.
    assert [m["role"] for m in result.messages] == ["user", *["assistant", "tool"] * 3]
    assert history_is_valid(agent.history)
    budget = [e for e in events if e["type"] == "budget_reached"]
    assert [{k: e[k] for k in ("name", "limit", "used")} for e in budget] == [result.limit]
    end = events[-1]
    assert end["type"] == "agent_end" and end["reason"] == "budget"
    assert events.index(budget[0]) == len(events) - 2


def test_retried_attempts_count_as_requests_and_are_recorded(server: ModelServer) -> None:
    server.add({"status": 500, "error": "overloaded"}, _tool_round("c1"), _tool_round("c2"))
    with _agent(server, limits={"requests": 2}) as agent:
        result = agent.send("go")
    assert len(server.requests) == 2
    assert result.reason == "budget" and result.limit == {"name": "requests", "limit": 2, "used": 2}
    reply = result.messages[1]
    assert reply["attempts"] == 2 and reply["model"] == MODEL
    assert spent(agent.history).requests == 2


@pytest.mark.parametrize(
    ("name", "limit", "used"),
    [("input_tokens", 25, 30), ("output_tokens", 5, 6), ("total_tokens", 30, 36)],
)
def test_token_limits_stop_once_reached(server: ModelServer, name: str, limit: int, used: int) -> None:
    """Each reply uses 10 in + 2 out: the run stops before the request after the one that reached it."""
    server.add(*[_tool_round(f"c{i}") for i in range(6)])
    with _agent(server, limits={name: limit}) as agent:
        result = agent.send("go")
    assert result.reason == "budget"
    assert result.limit == {"name": name, "limit": limit, "used": used}
    assert len(server.requests) == 3
    assert history_is_valid(agent.history)


def test_a_retried_attempt_that_reported_usage_counts(server: ModelServer) -> None:
    """An invalid structured reply is a paid attempt: its 100 input tokens reach the limit."""
    spec = agentcore.output.object({"type": "object", "properties": {"n": {"type": "integer"}}})
    server.add({"text": "not json", "usage": _usage(100, 5)}, {"text": '{"n": 1}', "usage": _usage(100, 5)})
    with _agent(server, tools=None, output=spec, limits={"input_tokens": 100}) as agent:
        result = agent.send("go")
    assert len(server.requests) == 1
    assert result.reason == "budget" and result.limit == {"name": "input_tokens", "limit": 100, "used": 100}
    assert result.usage == Usage(100, 5, 105)


def test_retried_usage_is_stored_with_the_reply(server: ModelServer) -> None:
    spec = agentcore.output.object({"type": "object", "properties": {"n": {"type": "integer"}}})
    server.add({"text": "not json", "usage": _usage(100, 5)}, {"text": '{"n": 1}', "usage": _usage(40, 4)})
    with _agent(server, tools=None, output=spec) as agent:
        result = agent.send("go")
    reply = result.messages[-1]
    assert reply["usage"]["input_tokens"] == 40
    assert reply["retried_usage"]["input_tokens"] == 100 and reply["attempts"] == 2
    # What the history says equals what the send reported: a session budget counts the same.
    assert agentcore.usage.total(agent.history) == result.usage == Usage(140, 9, 149)
    assert spent(agent.history).requests == 2


def test_compaction_requests_count(server: ModelServer) -> None:
    """Round 2 compacts first: that request is the second, and round 2's own request is refused."""
    long = "word " * 400
    server.add(
        {"tool_calls": [_call("c1", long)], "usage": _usage(10, 2)},
        {"text": "summary of the work", "usage": _usage(50, 7)},
        _tool_round("c2"),
    )
    config = {"limits": {"requests": 2}, "max_context_tokens": 400, "compact_threshold": 0.5}
    with _agent(server, **config) as agent:
        result = agent.send("go")
    assert len(server.requests) == 2
    assert result.reason == "budget" and result.limit["used"] == 2
    compact = [m for m in result.messages if m["role"] == "compact"]
    assert len(compact) == 1 and compact[0]["model"] == MODEL
    assert compact[0]["usage"]["input_tokens"] == 50
    assert result.usage == Usage(60, 9, 69)


def test_sub_agent_runs_count_and_stop_at_the_callers_limit(server: ModelServer) -> None:
    """The child's tokens are charged to the caller as they are used: the child's second round
    pushes the caller past its limit, so the child's third request is never made, and neither is
    the caller's next one."""
    researcher = _agent(server, no_tool_rounds=1)
    lead = _agent(server, tools=[researcher.as_tool("research", "Research")], limits={"total_tokens": 50})
    server.add(
        {"tool_calls": [_research("r1")], "usage": _usage(8, 2)},
        {"tool_calls": [_call("n1")], "usage": _usage(25, 5)},
        {"tool_calls": [_call("n2")], "usage": _usage(25, 5)},
        "never asked",
        "never asked either",
    )
    with researcher, lead:
        result = lead.send("go")
    assert len(server.requests) == 3
    assert result.reason == "budget"
    assert result.limit == {"name": "total_tokens", "limit": 50, "used": 70}
    tool_message = next(m for m in lead.history if m["role"] == "tool")
    assert tool_message["sub_agent_usage"]["total_tokens"] == 60
    assert tool_message["sub_agent_spend"]["requests"] == 2
    assert tool_message["sub_agent_spend"]["tool_calls"] == 2
    # The stored history says the same: a session budget would count 70 too.
    assert spent(lead.history).usage().total_tokens == 70
    assert history_is_valid(lead.history)


def test_tool_calls_limit_lets_the_round_finish(server: ModelServer) -> None:
    """Three calls in one round with a limit of 2: all three run and are answered, then it stops."""
    server.add({"tool_calls": [_call("a"), _call("b"), _call("c")]}, _tool_round("d"))
    with _agent(server, limits={"tool_calls": 2}) as agent:
        result = agent.send("go")
    assert len(server.requests) == 1
    assert result.reason == "budget" and result.limit == {"name": "tool_calls", "limit": 2, "used": 3}
    results = result.messages[-1]["content"]
    assert [r["output"]["value"] for r in results] == ["noted x"] * 3


def test_a_limit_already_reached_makes_no_request(server: ModelServer) -> None:
    """With limits_scope "session", a history that already spent its budget sends nothing."""
    history = [
        {"role": "user", "content": "earlier"},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "usage": _usage(90, 20)},
    ]
    server.add("never asked")
    agent = Agent(
        config={
            "base_url": server.base_url,
            "model": MODEL,
            "limits": {"total_tokens": 100},
            "limits_scope": "session",
        },
        history=history,
    )
    with agent:
        result = agent.send("more")
    assert server.requests == []
    assert result.reason == "budget" and result.limit == {"name": "total_tokens", "limit": 100, "used": 110}
    assert result.text == "" and result.steps == 0
    assert agent.history[-1] == result.messages[0]  # the input is written, as for any send


def test_run_scope_counts_from_the_start_of_each_send(server: ModelServer) -> None:
    server.add(*[_tool_round(f"c{i}") for i in range(2)], *[_tool_round(f"d{i}") for i in range(2)])
    with _agent(server, limits={"requests": 2}) as agent:
        first = agent.send("one")
        second = agent.send("two")
    assert first.reason == second.reason == "budget"
    assert first.limit == second.limit == {"name": "requests", "limit": 2, "used": 2}
    assert len(server.requests) == 4


_SESSION_CHILD = textwrap.dedent(
    """
    import json, sys
    from agentcore import Agent
    from agentcore.store import SQLiteStore

    db, base_url = sys.argv[1], sys.argv[2]
    store = SQLiteStore(db)
    config = {"base_url": base_url, "model": "test-model", "limits": {"requests": 3, "total_tokens": 1000},
              "limits_scope": "session", "retry_base_delay": 0.01}
    with Agent(config=config, session=store.session("s1")) as agent:
        result = agent.send(sys.argv[3])
    print(json.dumps({"reason": result.reason, "limit": result.limit, "steps": result.steps}))
    """
)


def _send_in_new_process(tmp_path: Path, db: Path, base_url: str, text: str) -> dict[str, Any]:
    script = tmp_path / "child.py"
    script.write_text(_SESSION_CHILD)
    done = subprocess.run(
        [sys.executable, str(script), str(db), base_url, text],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_session_scope_survives_a_new_process(server: ModelServer, tmp_path: Path) -> None:
    """Each process opens the session anew: the counts come from the stored entries only."""
    db = tmp_path / "chats.db"
    server.add("first answer", {"status": 503, "error": "busy"}, "second answer", "never asked")
    first = _send_in_new_process(tmp_path, db, server.base_url, "one")
    assert first["reason"] == "finished" and len(server.requests) == 1
    # The retried 503 is stored as the second reply's `attempts`: 3 requests in all.
    second = _send_in_new_process(tmp_path, db, server.base_url, "two")
    assert second["reason"] == "finished" and len(server.requests) == 3
    third = _send_in_new_process(tmp_path, db, server.base_url, "three")
    assert third == {"reason": "budget", "limit": {"name": "requests", "limit": 3, "used": 3}, "steps": 0}
    assert len(server.requests) == 3
    stored = SQLiteStore(str(db))
    try:
        history = stored.load("s1")
    finally:
        stored.close()
    assert spent(history).requests == 3
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant", "user"]


def test_cost_agrees_with_a_hand_computation(server: ModelServer) -> None:
    server.add(
        {
            "tool_calls": [_call("c1")],
            "usage": _usage(1000, 200, cache_read_tokens=600, cache_write_tokens=100),
        },
        {"text": "done", "usage": _usage(2000, 50, cache_read_tokens=1500)},
    )
    with _agent(server, prices=PRICES) as agent:
        result = agent.send("go")
    # Reply 1: 300 uncached × 3 + 600 read × 0.3 + 100 written × 3.75 + 200 out × 15 (per million).
    first = (300 * 3.0 + 600 * 0.3 + 100 * 3.75 + 200 * 15.0) / 1e6
    # Reply 2: 500 uncached × 3 + 1500 read × 0.3 + 50 out × 15.
    second = (500 * 3.0 + 1500 * 0.3 + 50 * 15.0) / 1e6
    assert result.cost == pytest.approx(first + second)
    assert agentcore.usage.cost(agent.history, PRICES) == pytest.approx(first + second)
    assert agentcore.usage.cost(agent.history, {"other": {"input": 1, "output": 1}}) is None


def test_cache_prices_default_to_the_input_price(server: ModelServer) -> None:
    server.add({"text": "done", "usage": _usage(1000, 10, cache_read_tokens=400, cache_write_tokens=100)})
    prices = {MODEL: {"input": 2.0, "output": 10.0}}
    with _agent(server, tools=None, prices=prices) as agent:
        result = agent.send("go")
    assert result.cost == pytest.approx((1000 * 2.0 + 10 * 10.0) / 1e6)


def test_no_prices_means_no_cost(server: ModelServer) -> None:
    server.add("done")
    with _agent(server, tools=None) as agent:
        assert agent.send("go").cost is None


def test_cost_limit(server: ModelServer) -> None:
    """Each round costs 10 × 3 + 2 × 15 = 60 per million: a limit of 0.0001 stops after two."""
    server.add(*[_tool_round(f"c{i}") for i in range(5)])
    with _agent(server, prices=PRICES, limits={"cost": 0.0001}) as agent:
        result = agent.send("go")
    assert len(server.requests) == 2
    assert result.reason == "budget" and result.limit["name"] == "cost"
    assert result.limit["used"] == pytest.approx(0.00012)
    assert result.cost == pytest.approx(0.00012)


@pytest.mark.parametrize(
    "config",
    [
        {"limits": {"cost": 1.0}},
        {"limits": {"cost": 1.0}, "prices": PRICES, "fallback": [{"model": "unpriced"}]},
        {"limits": {"cost": 1.0}, "prices": PRICES, "compact": {"model": "summariser"}},
        {"limits": {"requests": 0}},
        {"limits": {"requests": 1.5}},
        {"limits": {"tokens": 10}},
        {"limits": {"cost": -1}, "prices": PRICES},
        {"limits_scope": "process"},
        {"prices": {MODEL: {"input": 1.0}}},
        {"prices": {MODEL: {"input": 1.0, "output": -2}}},
        {"prices": {MODEL: {"input": 1.0, "output": 2.0, "cached": 0.1}}},
    ],
)
def test_bad_budget_config_is_a_config_error(server: ModelServer, config: dict[str, Any]) -> None:
    with pytest.raises(AgentError) as caught:
        Agent(config={"base_url": server.base_url, "model": MODEL, **config})
    assert caught.value.kind == "config"
    with Agent(config={"base_url": server.base_url, "model": MODEL}) as agent:
        with pytest.raises(AgentError) as at_send:
            agent.send("go", config=config)
        assert at_send.value.kind == "config"
        assert agent.history == []  # a rejected send writes nothing
    assert server.requests == []


def test_manual_compact_past_a_session_limit_makes_no_request(server: ModelServer) -> None:
    history = [
        {"role": "user", "content": "earlier"},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "usage": _usage(90, 20)},
    ]
    agent = Agent(
        config={
            "base_url": server.base_url,
            "model": MODEL,
            "limits": {"requests": 1},
            "limits_scope": "session",
        },
        history=history,
    )
    with agent, pytest.raises(AgentError) as caught:
        agent.compact()
    assert caught.value.kind == "limit" and "requests" in caught.value.message
    assert server.requests == []
