"""Config: defaults, validation at Agent() and at send, the merge rules of send overrides."""

from __future__ import annotations

import copy
import pathlib
import re
from collections.abc import Callable
from typing import Any

import pytest

from agentcore import Agent, AgentError, tool
from agentcore.testing import ModelServer
from agentcore.tools import adopt

pytestmark = pytest.mark.usefixtures("no_thread_leak")
MakeAgent = Callable[..., Agent]


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def mul(a: int, b: int) -> int:
    """Multiply two numbers."""
    return a * b


INVALID = [
    ("unknown key", {"temprature": 0.2}),
    ("threshold zero", {"compact_threshold": 0}),
    ("threshold above one", {"compact_threshold": 1.5}),
    ("string budget", {"max_context_tokens": "100000"}),
    ("unknown protocol", {"protocol": "soap"}),
    ("unknown tool mode", {"tool_mode": "magic"}),
    ("unknown media fallback", {"media_fallback": "ignore"}),
    ("bool count", {"max_steps": True}),
    ("zero count", {"max_steps": 0}),
    ("negative count", {"max_tool_output": -1}),
    ("float count", {"max_tokens": 10.5}),
    ("infinite max_steps", {"max_steps": float("inf")}),
    ("infinite max_tokens", {"max_tokens": float("inf")}),
    ("None for a non-None default", {"system": None}),
    ("None stream", {"stream": None}),
    ("non-bool stream", {"stream": "yes"}),
    ("negative delay", {"retry_base_delay": -1}),
    ("string delay", {"retry_max_delay": "10"}),
    ("nan timeout", {"request_timeout": float("nan")}),
    ("bool timeout", {"request_timeout": True}),
    ("unknown capability", {"capabilities": {"telepathy": True}}),
    ("non-bool capability", {"capabilities": {"image": "no"}}),
    ("unknown provider key", {"provider": {"temperatur": 0.1}}),
    ("provider headers not strings", {"provider": {"headers": {"x": 1}}}),
    ("unknown compact key", {"compact": {"temperature": 0}}),
    ("unknown retry key", {"retry": {"skip": [400]}}),
    ("retry not callable or dict", {"retry": 3}),
    ("output not a spec", {"output": {"type": "object"}}),
    ("model not a name or adapter", {"model": 42}),
    ("system not a string", {"system": 3}),
    ("bool threshold", {"compact_threshold": True}),
    ("cache not bool or dict", {"cache": "yes"}),
    ("unknown cache key", {"cache": {"ttl": 5}}),
    ("capabilities not a dict", {"capabilities": ["image"]}),
    ("provider not a dict", {"provider": "fast"}),
    ("should_retry not callable", {"retry": {"should_retry": True}}),
    ("unknown retry kind", {"retry": {"skip_kinds": ["weather"]}}),
    ("string max_output_tokens", {"provider": {"max_output_tokens": "1024"}}),
    ("zero summary bound", {"compact": {"provider": {"max_output_tokens": 0}}}),
]

VALID = [
    {"max_steps": None},
    {"max_steps": 1},
    {"no_tool_rounds": float("inf")},
    {"max_context_tokens": float("inf")},
    {"compact_threshold": 1},
    {"retry_base_delay": 0},
    {"request_timeout": 2},
    {"retry_max_elapsed": 0.5},
    {"cache": {"key": "k", "retention": "24h"}},
    {"retry": lambda error: False},
    {"retry": {"skip_codes": [400], "skip_kinds": ["auth"], "skip_text": "quota"}},
    {"provider": {"temperature": 0, "headers": {"X-Trace": "1"}, "body": {"vendor": True}}},
    {"compact": {"model": "small", "base_url": "http://127.0.0.1:1/v1"}},
    {"compact": {"provider": {"max_output_tokens": 1500}}},
    {"no_tool_prompt": ""},
]


def kind_of(excinfo: pytest.ExceptionInfo[AgentError]) -> str:
    return excinfo.value.kind


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(("why", "config"), INVALID, ids=[why for why, _ in INVALID])
def test_invalid_config_is_a_config_error_at_agent(why: Any, config: Any) -> None:
    with pytest.raises(AgentError) as caught:
        Agent(config=config)
    assert kind_of(caught) == "config"


@pytest.mark.parametrize(("why", "config"), INVALID, ids=[why for why, _ in INVALID])
def test_invalid_send_config_is_a_config_error_and_writes_nothing_back(
    server: ModelServer, make_agent: MakeAgent, why: Any, config: Any
) -> None:
    started: list[bool] = []
    agent = make_agent(server, system="before")
    history = agent.history
    before = agent.config
    with pytest.raises(AgentError) as caught:
        agent.send(
            "hi", config=config, history=[], callbacks={"on_start": lambda: started.append(True)}, tools=[add]
        )
    assert kind_of(caught) == "config"
    assert agent.history is history and history == []
    assert repr(agent.config) == repr(before) and len(agent.tools) == 0
    assert server.requests == []
    server.add("fine")
    agent.send("ok")
    assert started == [] and "tools" not in server.requests[0]
    assert server.requests[0]["messages"][0] == {"role": "system", "content": "before"}


@pytest.mark.parametrize("config", VALID)
def test_valid_values_are_accepted(config: Any) -> None:
    Agent(config=config)


def test_defaults_follow_the_table() -> None:
    config = Agent().config
    assert {k: config[k] for k in ("base_url", "api_key", "model", "system")} == dict.fromkeys(
        ("base_url", "api_key", "model", "system"), ""
    )
    assert (config["protocol"], config["stream"], config["cache"], config["tool_mode"]) == (
        "chat",
        True,
        True,
        "native",
    )
    assert config["capabilities"] == {
        "image": True,
        "audio": True,
        "video": True,
        "file": True,
        "tools": True,
        "structured_output": True,
        "tool_choice": True,
        "reasoning": False,
        "usage": True,
    }
    assert (config["media_fallback"], config["provider"], config["max_tokens"]) == ("error", {}, None)
    assert (config["max_context_tokens"], config["compact_threshold"], config["compact"]) == (
        128000,
        0.8,
        None,
    )
    assert all(
        config[k] is None
        for k in (
            "output",
            "max_steps",
            "max_tool_output",
            "max_tool_concurrency",
            "retry_max_elapsed",
            "retry",
            "request_timeout",
        )
    )
    assert (config["retry_base_delay"], config["retry_max_delay"]) == (5.0, 600.0)
    assert config["no_tool_rounds"] == 3 and config["no_tool_prompt"]


# ---------------------------------------------------------------- Agent() arguments


@pytest.mark.parametrize(
    "kwargs",
    [
        {"config": ["base_url"]},
        {"config": "model=x"},
        {"callbacks": "on_start"},
        {"callbacks": [print]},
        {"history": ({"role": "user", "content": "hi"},)},
        {"history": "hi"},
        {"id": 42},
        {"tools": 5},
    ],
    ids=lambda kwargs: next(iter(kwargs)),
)
def test_wrong_python_types_at_agent_raise_type_error(kwargs: Any) -> None:
    with pytest.raises(TypeError):
        Agent(**kwargs)


@pytest.mark.parametrize(
    "folder", ["tools/", pathlib.Path("tools"), ["tools/"], [add, pathlib.Path("tools")]], ids=str
)
def test_a_folder_given_to_agent_tools_is_a_config_error(folder: Any) -> None:
    with pytest.raises(AgentError) as caught:
        Agent(tools=folder)
    assert kind_of(caught) == "config"


@pytest.mark.parametrize(
    "callbacks",
    [{"on_finish": print}, {"on_step": "print"}, {"on_permission": 1}],
    ids=["unknown", "str", "int"],
)
def test_unknown_or_non_callable_callbacks_are_config_errors(
    server: ModelServer, make_agent: MakeAgent, callbacks: Any
) -> None:
    with pytest.raises(AgentError) as caught:
        Agent(callbacks=callbacks)
    assert kind_of(caught) == "config"
    agent = make_agent(server)
    with pytest.raises(AgentError) as caught:
        agent.send("hi", callbacks=callbacks)
    assert kind_of(caught) == "config"
    assert agent.history == []


def test_tools_are_accepted_as_a_toolset_list_or_record() -> None:
    assert list(Agent(tools=adopt([add])).tools) == ["add"]
    assert sorted(Agent(tools=[add, mul]).tools) == ["add", "mul"]
    assert list(Agent(tools={"plus": {"description": "Add", "execute": lambda i: 0}}).tools) == ["plus"]


# ---------------------------------------------------------------- attributes


def test_agent_config_is_a_deep_copy() -> None:
    agent = Agent(config={"provider": {"temperature": 0.5}, "capabilities": {"image": False}})
    copied = agent.config
    copied["provider"]["temperature"] = 2.0
    copied["capabilities"]["image"] = True
    copied["model"] = "changed"
    assert agent.config["provider"] == {"temperature": 0.5}
    assert agent.config["capabilities"]["image"] is False
    assert agent.config["model"] == ""


def test_agent_config_repr_masks_the_api_key() -> None:
    secret = "sk-test-0123456789abcdefSECRET"
    agent = Agent(config={"api_key": secret, "compact": {"api_key": secret + "2"}})
    for text in (repr(agent.config), str(agent.config), repr(agent)):
        assert "0123456789abcdefSECRET" not in text
    assert agent.config["api_key"] == secret


def test_agent_history_is_the_list_passed_in() -> None:
    history = [{"role": "user", "content": "hi"}]
    agent = Agent(history=history)
    assert agent.history is history


def test_agent_id_is_a_generated_uuid4_hex_unless_given() -> None:
    first, second = Agent().id, Agent().id
    assert re.fullmatch(r"[0-9a-f]{32}", first) and first != second
    assert Agent(id="mine").id == "mine"


# ---------------------------------------------------------------- send overrides


def test_provider_and_retry_overrides_replace_the_previous_value_whole(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add("one", "two")
    agent = make_agent(server, provider={"temperature": 0.5, "top_p": 0.9}, retry={"skip_codes": [400]})
    agent.send("hi", config={"provider": {"seed": 7}, "retry": {"skip_kinds": ["auth"]}})
    assert agent.config["provider"] == {"seed": 7}
    assert agent.config["retry"] == {"skip_kinds": ["auth"]}
    assert server.requests[0].get("seed") == 7 and "temperature" not in server.requests[0]
    agent.send("again")
    assert server.requests[1].get("seed") == 7 and "top_p" not in server.requests[1]


def test_capabilities_and_compact_overrides_merge_key_by_key(
    server: ModelServer, make_agent: MakeAgent
) -> None:
    server.add("one")
    agent = make_agent(server, capabilities={"image": False}, compact={"model": "small"})
    agent.send(
        "hi", config={"capabilities": {"audio": False}, "compact": {"base_url": "http://127.0.0.1:9/v1"}}
    )
    capabilities = agent.config["capabilities"]
    assert (capabilities["image"], capabilities["audio"], capabilities["video"]) == (False, False, True)
    assert agent.config["compact"] == {"model": "small", "base_url": "http://127.0.0.1:9/v1"}


def test_other_overrides_overwrite_and_stay_in_force(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add("one", "two")
    agent = make_agent(server, system="first", max_tokens=100)
    agent.send("hi", config={"system": "second"})
    agent.send("again")
    assert agent.config["system"] == "second" and agent.config["max_tokens"] == 100
    assert server.requests[1]["messages"][0] == {"role": "system", "content": "second"}


def test_send_history_replaces_the_agents_history(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add("answer")
    agent = make_agent(server, history=[{"role": "user", "content": "old"}])
    fresh: list[dict[str, Any]] = []
    agent.send("new", history=fresh)
    assert agent.history is fresh
    assert [m["content"] for m in fresh if m["role"] == "user"] == ["new"]
    assert server.requests[0]["messages"] == [{"role": "user", "content": "new"}]


def test_send_tools_replace_the_agents_tools(server: ModelServer, make_agent: MakeAgent) -> None:
    server.add("one", "two")
    agent = make_agent(server, tools=[add], no_tool_rounds=1)
    agent.send("hi", tools=[mul])
    assert list(agent.tools) == ["mul"]
    agent.send("again")
    assert [t["function"]["name"] for t in server.requests[1]["tools"]] == ["mul"]


def test_send_callbacks_merge_into_the_agents_callbacks(server: ModelServer, make_agent: MakeAgent) -> None:
    starts: list[str] = []
    steps: list[int] = []
    server.add("one", "two")
    agent = make_agent(server, callbacks={"on_start": lambda: starts.append("start")})
    agent.send("hi", callbacks={"on_step": lambda p: steps.append(p["step"])})
    agent.send("again")
    assert starts == ["start", "start"] and steps == [1, 1]


def test_send_config_errors_name_the_key() -> None:
    with pytest.raises(AgentError) as caught:
        Agent(config={"compact_threshold": 2})
    assert "compact_threshold" in str(caught.value)


def test_config_given_to_agent_is_not_kept_by_reference() -> None:
    given = {"provider": {"temperature": 0.1}}
    snapshot = copy.deepcopy(given)
    agent = Agent(config=given)
    given["provider"]["temperature"] = 1.0
    assert agent.config["provider"] == snapshot["provider"]


@pytest.mark.parametrize(
    "kwargs",
    [{"config": ["system"]}, {"history": ({"role": "user", "content": "x"},)}, {"callbacks": [print]}],
    ids=["config", "history", "callbacks"],
)
def test_wrong_types_given_to_send_are_config_errors(
    server: ModelServer, make_agent: MakeAgent, kwargs: dict[str, Any]
) -> None:
    agent = make_agent(server)
    with pytest.raises(AgentError) as caught:
        agent.send("hi", **kwargs)
    assert caught.value.kind == "config" and agent.history == []
