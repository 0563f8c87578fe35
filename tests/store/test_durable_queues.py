"""With a session, the agent's steer / follow-up queues are the store's (API.md §Durable sessions).

`agent.steer()`, `follow_up()`, `queued()` and `clear_queues()` of an agent with a session use the
same durable queue as `store.steer()` / `store.follow_up()` from any process, on both stores.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentcore import Agent
from agentcore.testing import ModelServer

MakeStore = Callable[[], Any]


def agent_on(server: ModelServer, store: Any) -> Agent:
    config = {"base_url": server.base_url, "model": "m", "retry_base_delay": 0.01, "no_tool_rounds": 1}
    return Agent(config=config, session=store.session("q"))


def test_the_agents_queues_are_the_stores(make_store: MakeStore) -> None:
    with ModelServer() as server:
        agent = agent_on(server, make_store())
        other = make_store()  # another connection, as another process would have
        other.steer("q", "from elsewhere")
        agent.follow_up("from the agent")
        assert agent.queued() == {
            "steer": [{"role": "user", "content": "from elsewhere"}],
            "follow_up": [{"role": "user", "content": "from the agent"}],
        }
        assert agent_on(server, other).queued() == agent.queued(), "a second agent sees the same queue"
        removed = agent.clear_queues()
        assert removed["steer"] == [{"role": "user", "content": "from elsewhere"}]
        assert removed["follow_up"] == [{"role": "user", "content": "from the agent"}]
        assert agent.queued() == {"steer": [], "follow_up": []}
        assert other.session("q").queues().queued() == {"steer": [], "follow_up": []}
        agent.close()


def test_queued_messages_are_delivered_by_the_next_run_and_leave_the_queue(make_store: MakeStore) -> None:
    with ModelServer() as server:
        server.add("answered both")
        store = make_store()
        store.steer("q", "and be brief")
        agent = agent_on(server, store)
        result = agent.send("hello")
        assert [m["content"] for m in result.messages if m["role"] == "user"] == ["hello", "and be brief"]
        assert store.session("q").queues().queued() == {"steer": [], "follow_up": []}
        assert [m["role"] for m in make_store().load("q")] == ["user", "user", "assistant"]
        agent.close()
