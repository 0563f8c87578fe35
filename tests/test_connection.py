"""One connection value: the connection keys of a config, the request built from them, the model key.

Once a model request was built in three places (loop, compaction, `llm.chat`) and the model key
computed three ways; these tests pin that each of them now reads the one `Connection`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agentcore import compact
from agentcore._utils import tokens
from agentcore.config import resolve
from agentcore.connection import KEYS, Connection
from agentcore.protocols.base import DEFAULT_CAPABILITIES
from agentcore.testing import ModelServer
from agentcore.text_tools import forget, remember
from agentcore.text_tools.mode import effective_mode

MakeAgent = Any


def test_a_connection_holds_exactly_the_connection_keys_of_a_config() -> None:
    config = resolve(
        {
            "base_url": "http://127.0.0.1:9/v1",
            "api_key": "sk-connection-test",
            "model": "m",
            "protocol": "anthropic",
            "provider": {"temperature": 0.5},
            "stream": False,
            "max_tokens": 77,
            "request_timeout": 9.0,
        }
    )
    connection = Connection.of(config)
    assert {key: getattr(connection, key) for key in KEYS} == {key: config[key] for key in KEYS}
    assert "sk-connection-test" not in repr(connection)
    with pytest.raises(dataclasses.FrozenInstanceError):
        connection.model = "other"  # type: ignore[misc]


def test_a_request_carries_the_connection_and_fills_in_the_capabilities() -> None:
    connection = Connection(base_url="http://x/v1", model="m", capabilities={"image": False}, max_tokens=5)
    request = connection.request(system="S", messages=[{"role": "user", "content": "hi"}])
    assert request.model == "m" and request.base_url == "http://x/v1" and request.max_tokens == 5
    assert request.capabilities == {**DEFAULT_CAPABILITIES, "image": False}
    assert request.tools == [] and request.system == "S"


def test_an_adapter_object_is_keyed_by_its_identity_and_sends_no_model_name() -> None:
    class Adapter:
        def chat(self, request: dict[str, Any], **kwargs: Any) -> Any:
            raise NotImplementedError

    adapter = Adapter()
    connection = Connection(model=adapter)
    assert connection.adapter is adapter and connection.model_name == ""
    assert connection.model_key == ("chat", "", f"adapter:{id(adapter)}")
    assert Connection(model="m").adapter is None


def test_the_loop_and_compaction_learn_one_ratio_per_model_key(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    usage = {"input_tokens": 3000, "output_tokens": 5}
    server.add({"text": "ok", "usage": usage}, {"text": "the summary", "usage": usage})
    agent = make_agent(server, system="S" * 4000)
    key = Connection.of(agent.config).model_key
    tokens.ratios.clear()
    agent.send("hello")
    learned = tokens.ratios.get(key)
    assert learned != tokens.DEFAULT_RATIO
    agent.compact()
    assert tokens.ratios.get(key) != learned  # the compaction request taught the same key
    assert compact.connection_of(agent.config).model_key == key


def test_compaction_overrides_apply_to_the_agents_connection() -> None:
    config = resolve(
        {"base_url": "http://a/v1", "model": "big", "max_tokens": 50, "compact": {"model": "small"}}
    )
    connection = compact.connection_of(config)
    assert connection.model == "small" and connection.base_url == "http://a/v1"
    # A summary is not bound by the agent's own reply limit.
    assert connection.max_tokens is None


def test_auto_tool_mode_remembers_a_refusal_per_connection() -> None:
    one = Connection(base_url="http://one/v1", model="m")
    two = Connection(base_url="http://two/v1", model="m")
    try:
        remember(one.base_url, one.model_id)
        assert effective_mode("auto", one) == "text"
        assert effective_mode("auto", two) == "native"
        assert effective_mode("native", one) == "native" and effective_mode("text", two) == "text"
    finally:
        forget(one.base_url, one.model_id)
