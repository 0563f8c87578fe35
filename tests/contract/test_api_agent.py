"""API.md §Agent: construction, attributes, `send`, `SendResult` and what a send writes.

Fixtures and the contract's conventions: tests/contract/conftest.py.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from api_helpers import KEY, add, call, make, tool_file, tool_results

import agentcore
from agentcore import Agent, AgentError, SendResult, Usage
from agentcore.testing import ModelServer


def test_agent_defaults() -> None:
    agent = Agent()
    assert re.fullmatch(r"[0-9a-f]{32}", agent.id)
    assert agent.history == [] and isinstance(agent.history, list)
    assert agent.running is None
    assert len(agent.tools) == 0
    assert Agent(id="me").id == "me"


def test_agent_history_kept_by_reference() -> None:
    history: list[dict[str, Any]] = []
    agent = Agent(history=history)
    assert agent.history is history


def test_agent_config_is_a_deep_copy_masking_the_key() -> None:
    agent = Agent(config={"api_key": KEY, "capabilities": {"image": False}})
    config = agent.config
    config["capabilities"]["image"] = True
    config["model"] = "changed"
    assert agent.config["capabilities"]["image"] is False
    assert agent.config["model"] == ""
    assert KEY not in repr(agent.config) and KEY not in str(agent.config)
    assert agent.config["api_key"] == KEY


def test_agent_tools_accepts_what_load_accepts() -> None:
    record = {"mul": {"description": "d", "execute": lambda i: 1}}
    dict_tool = {"name": "echo", "execute": lambda i: i}
    assert set(Agent(tools=[add, dict_tool]).tools) == {"add", "echo"}
    assert set(Agent(tools=record).tools) == {"mul"}
    assert set(Agent(tools=agentcore.tools.load([add])).tools) == {"add"}


def test_send_returns_send_result(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"text": "Hello!", "usage": {"input_tokens": 10, "output_tokens": 3, "cache_read_tokens": 4}})
    agent = make(agents, srv)
    result = agent.send("hi")
    assert isinstance(result, SendResult)
    assert (result.text, result.steps, result.reason, result.output) == ("Hello!", 1, "finished", None)
    assert isinstance(result.usage, Usage)
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.total_tokens) == (10, 3, 13)
    assert result.usage.cache_read_tokens == 4 and result.usage.cache_write_tokens == 0
    for f in dataclasses.fields(Usage):
        assert type(getattr(result.usage, f.name)) is int
    assert result.messages == agent.history
    assert result.messages[0]["role"] == "user" and result.messages[0]["content"] == "hi"
    assert result.messages[1]["role"] == "assistant"


@pytest.mark.parametrize(
    "bad_input",
    [
        "",
        "   \n\t ",
        [],
        [{"type": "text", "text": "  "}],
        [{"type": "audio", "data": "x"}],
        [{"type": "text"}],
        [{"type": "file", "data": "abc"}],
        ["plain string part"],
        5,
    ],
)
def test_bad_input_is_a_request_error_and_writes_nothing(
    srv: ModelServer, agents: list[Agent], bad_input: Any
) -> None:
    agent = make(agents, srv)
    with pytest.raises(AgentError) as info:
        agent.send(bad_input)
    assert info.value.kind == "request"
    assert agent.history == [] and srv.requests == []


def test_media_the_capabilities_forbid(srv: ModelServer, agents: list[Agent]) -> None:
    image = [{"type": "text", "text": "what is this"}, {"type": "image", "image": "iVBORw0KGgo="}]
    audio = [{"type": "file", "media_type": "audio/wav", "data": "UklGRg=="}]
    agent = make(agents, srv, capabilities={"image": False, "audio": False})
    for content in (image, audio):
        with pytest.raises(AgentError) as info:
            agent.send(content)
        assert info.value.kind == "request"
    assert agent.history == []
    srv.add("a picture")
    stripping = make(agents, srv, capabilities={"image": False}, media_fallback="strip")
    assert stripping.send(image).text == "a picture"
    assert "image" not in json.dumps(srv.requests[-1]["messages"])


def test_image_part_media_type_defaults_to_png(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("ok")
    make(agents, srv).send([{"type": "image", "image": "iVBORw0KGgo="}])
    assert "data:image/png;base64,iVBORw0KGgo=" in json.dumps(srv.requests[0])


def test_rejected_send_config_writes_nothing_back(srv: ModelServer, agents: list[Agent]) -> None:
    agent = make(agents, srv, system="before")
    with pytest.raises(AgentError) as info:
        agent.send("hi", config={"system": "after", "compact_threshold": 7})
    assert info.value.kind == "config"
    assert agent.config["system"] == "before" and agent.history == []


def test_send_overrides_stay_in_force_with_merge_rules(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("one", "two")
    agent = make(
        agents,
        srv,
        provider={"temperature": 0.5, "top_p": 0.9},
        capabilities={"image": False},
        compact={"model": "small"},
        retry={"skip_codes": [400]},
    )
    new_history: list[dict[str, Any]] = []
    seen: list[str] = []
    agent.send(
        "hi",
        config={
            "provider": {"seed": 7},
            "capabilities": {"audio": False},
            "compact": {"base_url": "http://x"},
            "retry": {"skip_kinds": ["auth"]},
            "system": "S",
        },
        history=new_history,
        tools=[add],
        callbacks={"on_start": lambda: seen.append("start")},
    )
    config = agent.config
    assert config["provider"] == {"seed": 7}
    assert config["capabilities"]["image"] is False and config["capabilities"]["audio"] is False
    assert config["compact"] == {"model": "small", "base_url": "http://x"}
    assert config["retry"] == {"skip_kinds": ["auth"]}
    assert config["system"] == "S"
    assert agent.history is new_history and len(new_history) >= 2
    assert "add" in agent.tools
    agent.send("again", config={"no_tool_rounds": 1})
    assert seen == ["start", "start"]
    assert srv.requests[1]["seed"] == 7 and "temperature" not in srv.requests[1]


def test_send_tools_may_be_a_folder(srv: ModelServer, agents: list[Agent], tmp_path: Path) -> None:
    (tmp_path / "greet.py").write_text(tool_file("greet", "name: str", "str", '"hello " + name'))
    srv.add({"tool_calls": [call("greet", name="bob")]}, "done")
    agent = make(agents, srv, no_tool_rounds=1)
    agent.send("greet bob", tools=str(tmp_path))
    assert agent.tools.schema["greet"]["source"] == "file"
    assert tool_results(agent.history)[0]["output"] == {"type": "text", "value": "hello bob"}


def test_resume_rules(srv: ModelServer, agents: list[Agent]) -> None:
    agent = make(agents, srv)
    with pytest.raises(TypeError):
        agent.resume("x")  # type: ignore[misc]
    with pytest.raises(TypeError):
        agent.resume(input="x")  # type: ignore[call-arg]
    with pytest.raises(AgentError) as info:
        agent.resume()
    assert info.value.kind == "request"
    agent.history.append(agentcore.history.compact("summary"))
    with pytest.raises(AgentError) as info:
        agent.resume()
    assert info.value.kind == "request"
    agent.history.clear()
    agent.history.append(agentcore.history.user("hi"))
    agent.history.append(agentcore.history.assistant("partial answer"))
    srv.add("continued")
    result = agent.resume()
    assert result.text == "continued"
    assert [m["role"] for m in agent.history] == ["user", "assistant", "assistant"]
    assert all(m["role"] != "user" for m in result.messages)


def test_send_inside_own_callback_is_request_error_and_swallowed(
    srv: ModelServer, agents: list[Agent]
) -> None:
    inner: list[BaseException] = []

    def on_start() -> None:
        try:
            agent.send("nested")
        except BaseException as exc:
            inner.append(exc)
            raise

    srv.add("outer done")
    agent = make(agents, srv, callbacks={"on_start": on_start})
    assert agent.send("outer").text == "outer done"
    assert isinstance(inner[0], AgentError) and inner[0].kind == "request"
    assert [m.get("content") for m in agent.history if m["role"] == "user"] == ["outer"]


def test_close_and_context_manager(srv: ModelServer) -> None:
    srv.add("ok")
    with Agent(config={"base_url": srv.base_url, "model": "m"}) as agent:
        assert agent.send("hi").text == "ok"
    assert agent.running is None
    agent.close()  # idempotent


def test_video_file_part_forbidden(srv: ModelServer, agents: list[Agent]) -> None:
    agent = make(agents, srv, capabilities={"video": False})
    with pytest.raises(AgentError) as info:
        agent.send([{"type": "file", "media_type": "video/mp4", "data": "AAAA"}])
    assert info.value.kind == "request"


def test_history_can_be_replaced_between_sends(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("one", "two")
    agent = make(agents, srv)
    agent.send("first")
    mine = [agentcore.history.user("stored earlier"), agentcore.history.assistant("noted")]
    agent.history = mine
    agent.send("second")
    assert agent.history is mine and len(mine) == 4
    assert "stored earlier" in json.dumps(srv.requests[1]) and "first" not in json.dumps(srv.requests[1])
