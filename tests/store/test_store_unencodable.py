"""Every store accepts and returns entries holding a lone surrogate unchanged (SQLite and PostgreSQL).

API.md §Details "Text that cannot be encoded": a history written before the library cleaned such
text (or edited by hand) may hold `"\\udcff"`; the store keeps it byte-for-byte as `json.dumps`
writes it, gives it back equal, and an agent on that session sends it with U+FFFD — its stored
entries untouched, its new ones clean.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from store_workers import Spec, raw_texts

from agentcore import Agent, tool
from agentcore.testing import ModelServer

NAME = "report-\udcff.txt"

POISONED: list[dict[str, Any]] = [
    {"role": "user", "content": "list " + NAME},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "caf\ud83d"},
            {"type": "tool-call", "tool_call_id": "c1", "tool_name": "listing", "input": {"d\udcfe": NAME}},
        ],
    },
    {
        "role": "tool",
        "content": [
            {
                "type": "tool-result",
                "tool_call_id": "c1",
                "tool_name": "listing",
                "output": {"type": "json", "value": {NAME: [NAME]}},
            }
        ],
    },
]


@tool
def listing() -> str:
    """List the folder."""
    return NAME


def test_a_store_keeps_entries_with_lone_surrogates_unchanged(
    store: Any, store_spec: Spec, make_store: Callable[[], Any]
) -> None:
    assert store.append("s", POISONED, expected_length=0) == 3
    assert store.load("s") == POISONED
    assert raw_texts(store_spec, "s") == [json.dumps(entry) for entry in POISONED]
    assert make_store().load("s") == POISONED  # another connection reads the same
    assert [s["length"] for s in store.sessions() if s["id"] == "s"] == [3]


def test_an_agent_on_a_poisoned_session_sends_and_its_store_stays_as_it_was(
    store: Any, make_store: Callable[[], Any]
) -> None:
    store.append("s", POISONED, expected_length=0)
    with ModelServer([{"tool_calls": [{"name": "listing", "arguments": {}}]}, "done"]) as server:
        config = {"base_url": server.base_url, "model": "m", "retry_base_delay": 0.01, "no_tool_rounds": 1}
        with Agent(config=config, tools=[listing], session=store.session("s")) as agent:
            assert agent.send("again").text == "done"
        body = server.log[0].raw.decode("utf-8")  # valid UTF-8: sent with U+FFFD
        assert "report-\ufffd.txt" in json.loads(body).__str__()
    stored = make_store().load("s")
    assert stored[:3] == POISONED  # the old entries, unchanged
    new = json.dumps(stored[3:], ensure_ascii=False)
    new.encode("utf-8")  # the new ones hold no lone surrogate
    assert "report-\ufffd.txt" in new
