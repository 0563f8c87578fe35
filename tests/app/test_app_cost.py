"""The example app's per-turn cost (examples/app/README.md): with prices configured, each
`turn_stats` event, its JSON log line and the page's stats line carry the turn's cost, computed
from what the turn stored (`agentcore.usage.cost` by hand here); without prices, none of them do.
"""

from __future__ import annotations

import json
from typing import Any

from test_app_api import run_to_end
from test_app_browser import App, open_page, send, turn_stats, wait_for

PRICES = {"demo": {"input": 2.5, "output": 10.0}}


def _by_hand(entries: list[dict[str, Any]]) -> float:
    used = [m["usage"] for m in entries if m.get("role") == "assistant"]
    return sum(u["input_tokens"] * 2.5 + u["output_tokens"] * 10.0 for u in used) / 1e6


def test_each_turn_reports_its_cost_when_prices_are_configured(app: App) -> None:
    server = app(env={"AGENTCORE_PRICES": json.dumps(PRICES)})
    session = server.new_session()
    stream = run_to_end(server, session, "hello")
    stats = [e for _, e in stream.events if e["type"] == "turn_stats"]
    history = server.history(session)
    # Turn 1: the input, the reply with its call, the tool message; turn 2: the final reply.
    turns = [history[:3], history[3:]]
    assert [s["cost"] for s in stats] == [_by_hand(turns[0]), _by_hand(turns[1])]
    assert all(s["cost"] > 0 for s in stats)
    assert [line["cost"] for line in server.turn_lines()] == [s["cost"] for s in stats]


def test_without_prices_there_is_no_cost(app: App) -> None:
    server = app()
    stream = run_to_end(server, server.new_session(), "hello")
    stats = [e for _, e in stream.events if e["type"] == "turn_stats"]
    assert stats and all("cost" not in s for s in stats)


def test_the_page_shows_each_turns_cost(app: App, browser: Any) -> None:
    server = app(env={"AGENTCORE_PRICES": json.dumps(PRICES)})
    session = server.new_session()
    open_page(browser, server, session)
    send(browser, "hello world")
    wait_for(browser, lambda d: len(turn_stats(d)) == 2)
    history = server.history(session)
    lines = turn_stats(browser)
    assert f"cost {_by_hand(history[:3]):.6f}" in lines[0]
    assert f"cost {_by_hand(history[3:]):.6f}" in lines[1]
