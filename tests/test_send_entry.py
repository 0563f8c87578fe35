"""`send()` of a user history entry: stored with the id it carries (how a task delivered twice
recognises its input, agentcore.celery); anything but a user entry is refused, nothing written."""

from __future__ import annotations

import pytest

from agentcore import Agent, AgentError
from agentcore.testing import ModelServer


def test_a_user_entry_is_stored_with_its_id_and_keys() -> None:
    with ModelServer(["hello"]) as server, Agent(config={"base_url": server.base_url, "model": "m"}) as agent:
        agent.send({"role": "user", "content": "hi", "id": "entry-1", "meta": {"from": "web"}})
        first = agent.history[0]
        assert first["id"] == "entry-1" and first["content"] == "hi" and first["meta"] == {"from": "web"}
        assert server.requests[0]["messages"][-1] == {"role": "user", "content": "hi"}


@pytest.mark.parametrize(
    "entry",
    [
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": "   "},
        {"role": "user", "content": "hi", "id": 7},
        {"role": "user", "content": "hi", "id": ""},
        {"role": "user", "content": "bad \ud800 text"},
    ],
)
def test_anything_but_a_user_entry_is_a_request_error_and_nothing_is_written(
    entry: dict[str, object],
) -> None:
    with ModelServer(["hello"]) as server, Agent(config={"base_url": server.base_url, "model": "m"}) as agent:
        with pytest.raises(AgentError) as raised:
            agent.send(entry)
        assert raised.value.kind == "request"
        assert agent.history == [] and server.requests == []
