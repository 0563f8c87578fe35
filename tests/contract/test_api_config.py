"""API.md §Config and Details §Validation: defaults, bad values, wrong types, unknown callbacks.

Fixtures and the contract's conventions: tests/contract/conftest.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from api_helpers import make

from agentcore import Agent, AgentError
from agentcore.testing import ModelServer


def test_config_defaults_table() -> None:
    config = Agent().config
    expected = {
        "base_url": "",
        "api_key": "",
        "model": "",
        "protocol": "chat",
        "system": "",
        "stream": True,
        "cache": True,
        "tool_mode": "native",
        "media_fallback": "error",
        "provider": {},
        "max_tokens": None,
        "max_context_tokens": 128000,
        "compact_threshold": 0.8,
        "compact": None,
        "output": None,
        "max_steps": None,
        "max_tool_output": None,
        "max_tool_concurrency": None,
        "retry_base_delay": 5.0,
        "retry_max_delay": 600.0,
        "retry_max_elapsed": None,
        "retry": None,
        "request_timeout": None,
        "no_tool_rounds": 3,
    }
    for key, value in expected.items():
        assert config[key] == value, key
    capabilities = config["capabilities"]
    names = [
        "image",
        "audio",
        "video",
        "file",
        "tools",
        "structured_output",
        "tool_choice",
        "reasoning",
        "usage",
    ]
    assert set(capabilities) == set(names)
    assert all(capabilities[n] is True for n in names if n != "reasoning")
    assert capabilities["reasoning"] is False
    assert isinstance(config["no_tool_prompt"], str) and config["no_tool_prompt"]


@pytest.mark.parametrize(
    "bad",
    [
        {"nope": 1},
        {"compact_threshold": 0},
        {"compact_threshold": 1.5},
        {"max_context_tokens": "1000"},
        {"protocol": "soap"},
        {"tool_mode": "magic"},
        {"media_fallback": "drop"},
        {"stream": None},
        {"max_steps": 0},
        {"max_steps": True},
        {"max_steps": 2.5},
        {"max_steps": float("inf")},
        {"max_tool_output": -1},
        {"max_tokens": float("inf")},
        {"retry_base_delay": -1},
        {"request_timeout": "10"},
        {"provider": {"foo": 1}},
        {"capabilities": {"telepathy": True}},
        {"compact": {"temperature": 1}},
        {"output": {"type": "object"}},
        {"retry": 5},
        {"no_tool_rounds": 0},
    ],
)
def test_invalid_config_is_a_config_error_at_agent(bad: dict[str, Any]) -> None:
    with pytest.raises(AgentError) as info:
        Agent(config=bad)
    assert info.value.kind == "config"


def test_config_valid_edges() -> None:
    Agent(config={"compact_threshold": 1, "max_context_tokens": float("inf"), "no_tool_rounds": float("inf")})
    Agent(config={"retry_base_delay": 0, "request_timeout": 0.5, "max_steps": 1, "max_tokens": None})


def test_wrong_python_types_raise_type_error() -> None:
    for kwargs in ({"config": 5}, {"history": "x"}, {"id": 5}, {"callbacks": [print]}):
        with pytest.raises(TypeError):
            Agent(**kwargs)  # type: ignore[arg-type]


def test_folder_given_to_agent_tools_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(AgentError) as info:
        Agent(tools=str(tmp_path))
    assert info.value.kind == "config"


def test_unknown_callback_and_non_callable_are_config_errors() -> None:
    for callbacks in ({"on_nothing": print}, {"on_start": 5}):
        with pytest.raises(AgentError) as info:
            Agent(callbacks=callbacks)
        assert info.value.kind == "config"


def test_send_rejects_unknown_callback(srv: ModelServer, agents: list[Agent]) -> None:
    agent = make(agents, srv)
    for callbacks in ({"on_bogus": print}, {"on_step": "not callable"}):
        with pytest.raises(AgentError) as info:
            agent.send("hi", callbacks=callbacks)
        assert info.value.kind == "config"
    assert agent.history == []
