"""API.md, statement by statement: one quick probe per sentence of the public contract.

Written the way an outside tester reading only API.md would: public imports only
(`agentcore`, its namespaces, `agentcore.testing.ModelServer`), real HTTP on 127.0.0.1.
Breadth over depth: the other test files go deep on each subject.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import enum
import functools
import json
import logging
import math
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal, Optional

import pytest
from background import returns_within as _returns

import agentcore
from agentcore import Agent, AgentError, SendResult, ToolContext, Usage, tool
from agentcore.testing import ModelServer

FAST = {"retry_base_delay": 0.01, "retry_max_delay": 0.05}
KEY = "sk-contract-secret-123456"


# ---------------------------------------------------------------- helpers


@pytest.fixture
def srv() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


@pytest.fixture
def agents() -> Iterator[list[Agent]]:
    made: list[Agent] = []
    yield made
    for agent in made:
        agent.close()


def make(
    agents: list[Agent], server: ModelServer, *, tools: Any = None, callbacks: Any = None, **config: Any
) -> Agent:
    agent = Agent(
        config={"base_url": server.base_url, "model": "m", **FAST, **config}, tools=tools, callbacks=callbacks
    )
    agents.append(agent)
    return agent


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def call(tool_name: str = "add", /, *, id: str = "c1", **arguments: Any) -> dict[str, Any]:
    return {"name": tool_name, "id": id, "arguments": arguments or {"a": 1, "b": 2}}


def tool_results(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [part for m in history if m["role"] == "tool" for part in m["content"]]


def tool_file(name: str, params: str, returns: str, value: str) -> str:
    """The text of a file that defines one `@tool` function returning `value` (an expression)."""
    return (
        f"from agentcore import tool\n\n\n@tool\ndef {name}({params}) -> {returns}:\n"
        f'    """The {name} tool."""\n    return {value}\n'
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# ================================================================ Package


def test_top_level_names() -> None:
    for name in ("Agent", "tool", "ToolContext", "AgentError", "SendResult", "Usage", "__version__"):
        assert hasattr(agentcore, name), name
    for namespace in ("tools", "history", "context", "compact", "llm", "text_tools", "output"):
        assert getattr(agentcore, namespace).__name__ == f"agentcore.{namespace}"
    assert isinstance(agentcore.__version__, str)


def test_import_is_cheap_and_lazy() -> None:
    code = (
        "import sys, agentcore; from agentcore import Agent, tool, AgentError; "
        "print(any(m in sys.modules for m in ('requests', 'jsonschema')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_vendored_copy_works_without_agentcore_importable(tmp_path: Path) -> None:
    import shutil

    root = Path(agentcore.__file__).parent
    shutil.copytree(root, tmp_path / "acc_vendored_core", ignore=shutil.ignore_patterns("__pycache__"))
    code = textwrap.dedent(
        """
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "agentcore" or name.startswith("agentcore."):
                    raise ImportError("agentcore must not be imported")
        sys.meta_path.insert(0, Block())
        import acc_vendored_core as ac
        @ac.tool
        def double(x: int) -> int:
            return 2 * x
        print(ac.tools.execute("double", {"x": 21}, [double])["output"]["value"])
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "42"


# ================================================================ Agent


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


def test_appended_entries_carry_id_created_at_and_usage(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"tool_calls": [call()]}, "done")
    agent = make(agents, srv, tools=[add], no_tool_rounds=1)
    before = time.time()
    agent.send("go")
    for message in agent.history:
        assert re.fullmatch(r"[0-9a-f]{32}", message["id"])
        assert before - 1 <= message["created_at"] <= time.time() + 1
    for message in agent.history:
        if message["role"] == "assistant":
            assert isinstance(message["usage"], dict)
    json.dumps(agent.history)  # plain JSON throughout


def test_library_never_adds_keys_to_entries_it_did_not_create(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("ok")
    mine = {"role": "user", "content": "earlier", "custom": 1}
    reply = {"role": "assistant", "content": [{"type": "text", "text": "sure"}]}
    agent = make(agents, srv)
    agent.history.extend([mine, reply])
    agent.send("go on")
    assert mine == {"role": "user", "content": "earlier", "custom": 1}
    assert reply == {"role": "assistant", "content": [{"type": "text", "text": "sure"}]}
    # Extra keys are kept and never sent to the model.
    assert "custom" not in json.dumps(srv.requests[0])
    assert "created_at" not in json.dumps(srv.requests[0])


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


def test_cancel_already_set_writes_nothing(srv: ModelServer, agents: list[Agent]) -> None:
    agent = make(agents, srv)
    event = threading.Event()
    event.set()
    with pytest.raises(AgentError) as info:
        agent.send("hi", cancel=event)
    assert info.value.kind == "aborted"
    assert agent.history == [] and srv.requests == []


def test_running_has_cancel_event_and_thread(srv: ModelServer, agents: list[Agent]) -> None:
    seen: dict[str, Any] = {}

    def on_start() -> None:
        running = agent.running
        seen["cancel"] = running.cancel if running else None
        seen["thread"] = running.thread if running else None
        seen["current"] = threading.current_thread()

    srv.add("ok")
    agent = make(agents, srv, callbacks={"on_start": on_start})
    agent.send("hi")
    assert isinstance(seen["cancel"], threading.Event)
    assert isinstance(seen["thread"], threading.Thread) and seen["thread"] is seen["current"]
    assert agent.running is None


def test_stop_idle_false_and_running_true(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"text": "slow", "delay": 60})  # stop() must not wait for this stall
    agent = make(agents, srv)
    assert agent.stop() is False
    errors: list[AgentError] = []

    def send() -> None:
        try:
            agent.send("hi")
        except AgentError as error:
            errors.append(error)

    thread = threading.Thread(target=send)
    thread.start()
    _wait_for(lambda: agent.running is not None and srv.requests)
    assert _returns(agent.stop) is True
    thread.join(30)
    assert not thread.is_alive()
    assert errors and errors[0].kind == "aborted"
    assert agent.running is None
    assert agent.history[0]["role"] == "user"  # written before the first request


def test_cancel_event_stops_the_send(srv: ModelServer, agents: list[Agent]) -> None:
    event = threading.Event()

    def arrived(recorded: Any) -> dict[str, Any]:
        event.set()  # the request is in and its reply held back: cancel now
        return {"text": "slow", "delay": 60}

    srv.add(arrived)
    agent = make(agents, srv)
    with pytest.raises(AgentError) as info:
        agent.send("hi", cancel=event)
    assert info.value.kind == "aborted"


def test_latest_instruction_wins(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"text": "slow", "delay": 60}, "second")  # the second send must not wait for this stall
    agent = make(agents, srv)
    errors: list[AgentError] = []

    def first() -> None:
        try:
            agent.send("first")
        except AgentError as error:
            errors.append(error)

    thread = threading.Thread(target=first)
    thread.start()
    _wait_for(lambda: len(srv.requests) == 1)
    assert _returns(lambda: agent.send("second")).text == "second"
    thread.join(30)
    assert not thread.is_alive()
    assert errors and errors[0].kind == "aborted"


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


def test_stop_inside_a_callback_only_sets_cancel(srv: ModelServer, agents: list[Agent]) -> None:
    returned: list[bool] = []

    def on_llm_finish(result: Any) -> None:
        returned.append(agent.stop())

    srv.add({"tool_calls": [call()]}, "never")
    agent = make(agents, srv, tools=[add], callbacks={"on_llm_finish": on_llm_finish})
    with pytest.raises(AgentError) as info:
        agent.send("go")
    assert returned == [True] and info.value.kind == "aborted"
    results = tool_results(agent.history)
    assert len(results) == 1  # every call gets exactly one result


def test_close_and_context_manager(srv: ModelServer) -> None:
    srv.add("ok")
    with Agent(config={"base_url": srv.base_url, "model": "m"}) as agent:
        assert agent.send("hi").text == "ok"
    assert agent.running is None
    agent.close()  # idempotent


def test_compact_appends_summary_and_reports(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"text": "SUMMARY", "usage": {"input_tokens": 50, "output_tokens": 5}})
    events: list[dict[str, Any]] = []
    agent = make(agents, srv)
    agent.history.extend([agentcore.history.user("do it"), agentcore.history.assistant("done")])
    text = agent.compact(on_compact=events.append)
    assert text == "SUMMARY"
    assert agent.history[-1]["role"] == "compact" and agent.history[-1]["content"] == "SUMMARY"
    kinds = [e["type"] for e in events]
    assert kinds[0] == "compact-start" and kinds[-1] == "compact-finish"
    assert all(e.get("request") == "compact" for e in events[1:-1])
    assert isinstance(events[-1]["usage"], Usage) and events[-1]["usage"].input_tokens == 50


def test_empty_summary_is_unknown_and_appends_nothing(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"text": "  "})
    agent = make(agents, srv, retry_max_elapsed=0)
    agent.history.append(agentcore.history.user("hi"))
    with pytest.raises(AgentError) as info:
        agent.compact()
    assert info.value.kind == "unknown"
    assert len(agent.history) == 1


# ================================================================ The loop


def test_no_tools_means_finished(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("answer")
    assert make(agents, srv).send("q").reason == "finished"


def test_no_tool_rounds_and_prompt(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("a", "b", "c")
    agent = make(agents, srv, tools=[add])
    result = agent.send("q")
    assert (result.reason, result.steps) == ("no-tool", 3)
    prompt = agent.config["no_tool_prompt"]
    last = [r["messages"][-1] for r in srv.requests]
    assert last[2] == {"role": "user", "content": prompt}
    assert all(m.get("content") != prompt for m in last[:2])
    assert all(m.get("content") != prompt for m in agent.history)


def test_no_tool_prompt_not_sent_for_one_round_or_empty(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("a")
    agent = make(agents, srv, tools=[add], no_tool_rounds=1)
    assert agent.send("q").reason == "no-tool"
    assert srv.requests[0]["messages"][-1]["content"] == "q"
    srv.add("a", "b", "c")
    quiet = make(agents, srv, tools=[add], no_tool_prompt="")
    assert quiet.send("q").reason == "no-tool"
    for request in srv.requests[1:]:
        assert [m["content"] for m in request["messages"] if m["role"] == "user"] == ["q"]


def test_tool_round_then_no_tool(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"tool_calls": [call(), call(id="c2", a=5, b=5)]}, "3 and 10")
    agent = make(agents, srv, tools=[add], no_tool_rounds=1)
    result = agent.send("sums")
    assert result.reason == "no-tool" and result.steps == 2 and result.text == "3 and 10"
    roles = [m["role"] for m in agent.history]
    assert roles == ["user", "assistant", "tool", "assistant"]
    results = agent.history[2]["content"]
    assert [r["tool_call_id"] for r in results] == ["c1", "c2"]
    assert [r["output"] for r in results] == [{"type": "json", "value": 3}, {"type": "json", "value": 10}]
    assert results[0]["type"] == "tool-result" and results[0]["tool_name"] == "add"
    part = agent.history[1]["content"][0]
    assert part == {"type": "tool-call", "tool_call_id": "c1", "tool_name": "add", "input": {"a": 1, "b": 2}}


def test_tool_stop(srv: ModelServer, agents: list[Agent]) -> None:
    @tool
    def finish(summary: str) -> dict[str, Any]:
        """Finish."""
        return {"stop": True, "output": {"type": "text", "value": summary}}

    srv.add({"tool_calls": [call("finish", summary="all done")]})
    agent = make(agents, srv, tools=[finish])
    result = agent.send("go")
    assert result.reason == "tool-stop"
    assert tool_results(agent.history)[0]["output"] == {"type": "text", "value": "all done"}


def test_step_limit_saves_last_results(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"tool_calls": [call()]}, {"tool_calls": [call(id="c2")]})
    agent = make(agents, srv, tools=[add], max_steps=2)
    result = agent.send("loop")
    assert (result.reason, result.steps) == ("step-limit", 2)
    assert len(tool_results(agent.history)) == 2 and agent.history[-1]["role"] == "tool"
    srv.add("x")
    plain = make(agents, srv, tools=[add], max_steps=1)
    assert plain.send("q").reason == "step-limit"


def test_capabilities_tools_false_means_empty_tool_set(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("plain")
    result = make(agents, srv, tools=[add], capabilities={"tools": False}).send("q")
    assert result.reason == "finished"
    assert not srv.requests[0].get("tools")


def test_unknown_tool_and_unparsable_arguments(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add(
        {
            "tool_calls": [
                {"name": "nope", "id": "u1", "arguments": {}},
                {"name": "add", "id": "u2", "arguments": '{"a": 1, "b": '},
            ]
        },
        "ok",
    )
    agent = make(agents, srv, tools=[add], no_tool_rounds=1)
    agent.send("q")
    calls = agent.history[1]["content"]
    assert calls[1]["input"] == {}
    unknown, broken = tool_results(agent.history)
    assert unknown["output"]["type"] == "error-text" and broken["output"]["type"] == "error-text"
    assert '{"a": 1, "b": ' in broken["output"]["value"]


def test_schema_failure_names_the_path_and_tool_does_not_run(srv: ModelServer, agents: list[Agent]) -> None:
    ran: list[Any] = []
    strict = {
        "name": "strict",
        "input_schema": {
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
        },
        "execute": ran.append,
    }
    srv.add({"tool_calls": [{"name": "strict", "id": "s1", "arguments": {"n": "seven"}}]}, "ok")
    agent = make(agents, srv, tools=[strict], no_tool_rounds=1)
    agent.send("q")
    result = tool_results(agent.history)[0]
    assert result["output"]["type"] == "error-text" and "n" in result["output"]["value"]
    assert ran == []


def test_structured_output_invalid_reply_retried(srv: ModelServer, agents: list[Agent]) -> None:
    schema = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}
    srv.add('{"wrong": 1}', '{"total": 42}')
    agent = make(agents, srv, tools=[add], output=agentcore.output.object(schema))
    result = agent.send("count")
    assert (result.reason, result.output, result.steps) == ("finished", {"total": 42}, 1)
    assert [m["role"] for m in agent.history] == ["user", "assistant"]


def test_structured_array_wrapped_on_the_wire(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add('{"items": [1, 2]}')
    result = make(agents, srv, output=agentcore.output.array({"type": "integer"})).send("list")
    assert result.output == [1, 2]
    schema = srv.requests[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["items"] == {"type": "array", "items": {"type": "integer"}}


def test_output_class_with_model_validate(srv: ModelServer, agents: list[Agent]) -> None:
    class Total:
        def __init__(self, total: float) -> None:
            self.total = total

        @classmethod
        def model_json_schema(cls) -> dict[str, Any]:
            return {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}

        @classmethod
        def model_validate(cls, data: Any) -> Total:
            return cls(data["total"])

    srv.add('{"total": 3}', '{"items": [{"total": 1}, {"total": 2}]}')
    one = make(agents, srv, output=agentcore.output.object(Total)).send("one").output
    assert isinstance(one, Total) and one.total == 3
    many = make(agents, srv, output=agentcore.output.array(Total)).send("many").output
    assert [t.total for t in many] == [1, 2]
    srv.add("[1, 2]")
    assert make(agents, srv, output=agentcore.output.json()).send("any").output == [1, 2]


def test_cancel_mid_stream_keeps_arrived_text(srv: ModelServer, agents: list[Agent]) -> None:
    # The stream stalls after a few chunks until the client leaves: the stop always lands mid-stream.
    srv.add({"text": "partial words then more", "chunk_size": 4, "stall_after": 3})
    agent = make(agents, srv)
    arrived = threading.Event()
    stopper = threading.Thread(target=lambda: arrived.wait(30) and agent.stop())
    stopper.start()

    def on_llm_event(event: dict[str, Any]) -> None:
        if event["type"] == "text-delta":
            arrived.set()

    with pytest.raises(AgentError) as info:
        agent.send("talk", callbacks={"on_llm_event": on_llm_event})
    arrived.set()
    stopper.join()
    assert info.value.kind == "aborted"
    assert agent.history[-1]["role"] == "assistant"
    text = agent.history[-1]["content"][0]["text"]
    assert text and "partial words then more".startswith(text)


def test_retried_stream_error_leaves_nothing(srv: ModelServer, agents: list[Agent]) -> None:
    retries: list[dict[str, Any]] = []
    srv.add({"text": "broken reply", "drop_after": 2}, "whole reply")
    agent = make(agents, srv, callbacks={"on_retry": retries.append})
    assert agent.send("q").text == "whole reply"
    assert [m["role"] for m in agent.history] == ["user", "assistant"]
    assert len(retries) == 1


# ================================================================ History helpers


def test_history_constructors() -> None:
    h = agentcore.history
    assert h.user("hi") == {"role": "user", "content": "hi"}
    assert h.compact("sum") == {"role": "compact", "content": "sum"}
    message = h.assistant("ok", tool_calls=[{"id": "c1", "name": "add", "arguments": '{"a": 1}'}])
    assert message["role"] == "assistant"
    assert message["content"] == [
        {"type": "text", "text": "ok"},
        {"type": "tool-call", "tool_call_id": "c1", "tool_name": "add", "input": {"a": 1}},
    ]
    ready = {"type": "tool-call", "tool_call_id": "c2", "tool_name": "x", "input": {}}
    assert h.assistant(tool_calls=[ready])["content"] == [ready]
    assert h.assistant(tool_calls=[{"id": "c3", "name": "x", "arguments": {"k": 1}}])["content"][0][
        "input"
    ] == {"k": 1}
    result = h.tool("c1", "add", 3)
    assert result == {
        "role": "tool",
        "content": [
            {
                "type": "tool-result",
                "tool_call_id": "c1",
                "tool_name": "add",
                "output": {"type": "json", "value": 3},
            }
        ],
    }
    assert h.tool("c1", "add", "three")["content"][0]["output"] == {"type": "text", "value": "three"}
    assert h.tool("c1", "add", None)["content"][0]["output"]["type"] == "text"


def test_turns_rules() -> None:
    h = agentcore.history
    user = h.user("go")
    call_message = h.assistant(tool_calls=[{"id": "c1", "name": "read", "arguments": {}}])
    result = h.tool("c1", "read", "x")
    orphan = h.tool("zz", "read", "y")
    more = h.assistant("and more")
    # The result sits before its call: it still joins the call's turn, after the call.
    assert h.turns([user, result, call_message]) == [[user], [call_message, result]]
    assert h.turns([user, call_message, orphan]) == [[user], [call_message]]
    # Each model reply is a turn with its results; only adjacent assistant messages fold together.
    assert h.turns([user, call_message, result, more]) == [[user], [call_message, result], [more]]
    assert h.turns([user, more, h.assistant("x"), h.user("u")]) == [
        [user],
        [more, h.assistant("x")],
        [h.user("u")],
    ]


def test_render_format() -> None:
    h = agentcore.history
    messages = [
        h.user("read the config"),
        h.assistant(
            [{"type": "reasoning", "text": "I will read"}],
            tool_calls=[{"id": "c1", "name": "read", "arguments": {"path": "a.json"}}],
        ),
        h.tool("c1", "read", {"port": 8080}),
        h.user([{"type": "text", "text": "and this?"}, {"type": "image", "image": "iVBORw0KGgo="}]),
        h.user([{"type": "file", "media_type": "application/pdf", "data": "JVBERi0="}]),
    ]
    assert h.render(messages).splitlines() == [
        "user: read the config",
        'assistant: [reasoning] I will read [call read {"path": "a.json"}]',
        'tool: [read returned] {"port": 8080}',
        "user: and this? [image]",
        "user: [file]",
    ]


# ================================================================ Context


def test_context_build_shape() -> None:
    h = agentcore.history
    history = [h.user("hello"), {**h.assistant("hi"), "id": "x", "usage": {}}]
    ctx = agentcore.context.build(history, system="Be brief.")
    assert ctx.system == "Be brief."
    assert ctx.messages == [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
    ]
    assert type(ctx.tokens) is int and ctx.tokens > 0
    assert all(m["role"] != "system" for m in ctx.messages)
    default = agentcore.context.build(history, system="Be brief.", ratio=None).tokens
    assert default == agentcore.context.build(history, system="Be brief.", ratio=0.6).tokens
    assert agentcore.context.build(history, system="Be brief.", ratio=1.2).tokens > default
    with_tools = agentcore.context.build(history, tools=[{"name": "add", "description": "x"}])
    assert with_tools.tokens > agentcore.context.build(history).tokens


def test_context_strips_reasoning_without_state() -> None:
    h = agentcore.history
    history = [
        h.user("q"),
        h.assistant([{"type": "reasoning", "text": "hmm"}, {"type": "text", "text": "a"}]),
    ]
    ctx = agentcore.context.build(history)
    assert ctx.messages[1]["content"] == [{"type": "text", "text": "a"}]


def test_context_with_summary() -> None:
    h = agentcore.history
    history = [h.user("GOAL: build it")]
    for i in range(8):
        history += [h.user(f"step {i}"), h.assistant(f"did {i}")]
    history += [h.compact("SUMMARY TEXT"), h.user("after summary")]
    ctx = agentcore.context.build(history, system="SYS", max_context_tokens=100_000)
    assert "SUMMARY TEXT" in ctx.system and ctx.system.startswith("SYS")
    assert "own" in ctx.system.lower() or "you" in ctx.system.lower()
    contents = [
        m["content"] if isinstance(m["content"], str) else m["content"][0]["text"] for m in ctx.messages
    ]
    assert contents[0] == "GOAL: build it"
    assert contents[-1] == "after summary"
    assert contents[:3] == ["GOAL: build it", "step 0", "step 1"]  # the first 3 user turns
    assert "step 3" not in contents and "did 7" in contents
    assert all(m["role"] != "compact" for m in ctx.messages)


def test_compaction_triggers_at_threshold(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("SUMMARY", "answer")
    events: list[str] = []
    agent = make(
        agents, srv, max_context_tokens=1000, callbacks={"on_compact": lambda e: events.append(e["type"])}
    )
    agent.history.extend([agentcore.history.user("x" * 2000), agentcore.history.assistant("y")])
    result = agent.send("go")
    assert result.text == "answer" and events[0] == "compact-start"
    assert [m["role"] for m in result.messages] == ["user", "compact", "assistant"]
    # The input is written before the first request; the round then compacts before asking.
    assert [m["role"] for m in agent.history][-3:] == ["user", "compact", "assistant"]
    assert "go" in json.dumps(srv.requests[1]["messages"])  # the latest user turn is kept
    assert result.usage.input_tokens > 0 and result.steps == 1


# ================================================================ Compaction


def test_compact_run(srv: ModelServer) -> None:
    srv.add({"text": "NEW SUMMARY", "usage": {"input_tokens": 30, "output_tokens": 4}})
    events: list[dict[str, Any]] = []
    history = [agentcore.history.user("the goal"), agentcore.history.assistant("done half")]
    out = agentcore.compact.run(
        history=history,
        system="SYS",
        tools=None,
        connection={"base_url": srv.base_url, "model": "m", "api_key": KEY},
        previous="OLD FACT 42",
        on_compact=events.append,
    )
    assert out["content"] == "NEW SUMMARY" and isinstance(out["usage"], Usage)
    assert out["usage"].input_tokens == 30
    sent = json.dumps(srv.requests[0])
    assert "OLD FACT 42" in sent and "the goal" in sent
    assert "goal" in sent.replace("the goal", "")  # asks to keep the user's original goal
    assert events[0]["type"] == "compact-start" and events[-1]["type"] == "compact-finish"
    assert len(history) == 2  # the caller appends


def test_compaction_does_not_inherit_output_or_forced_tool_choice(
    srv: ModelServer, agents: list[Agent]
) -> None:
    srv.add("SUMMARY")
    agent = make(
        agents,
        srv,
        output=agentcore.output.json(),
        provider={"tool_choice": "required", "temperature": 0.9},
    )
    agent.history.append(agentcore.history.user("hi"))
    agent.compact()
    body = srv.requests[0]
    assert "response_format" not in body and "tool_choice" not in body
    assert body["temperature"] == 0.9
    srv.add("SUMMARY 2")
    other = make(agents, srv, provider={"temperature": 0.9}, compact={"provider": {"temperature": 0.1}})
    other.history.append(agentcore.history.user("hi"))
    other.compact()
    assert srv.requests[1]["temperature"] == 0.1


def test_compaction_uses_compact_model(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("SUMMARY")
    agent = make(agents, srv, compact={"model": "small-model"})
    agent.history.append(agentcore.history.user("hi"))
    agent.compact()
    assert srv.requests[0]["model"] == "small-model"


def test_overflow_compacts_and_resends_at_most_three_times(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"overflow": True}, "S1", "answer")
    agent = make(agents, srv)
    assert agent.send("q").text == "answer"
    assert sum(m["role"] == "compact" for m in agent.history) == 1
    srv.add({"overflow": True}, "S1", {"overflow": True}, "S2", {"overflow": True}, "S3", {"overflow": True})
    retries: list[Any] = []
    failing = make(agents, srv, callbacks={"on_retry": retries.append})
    with pytest.raises(AgentError) as info:
        failing.send("q")
    assert info.value.kind == "request" and info.value.status == 400
    assert sum(m["role"] == "compact" for m in failing.history) == 3
    assert retries == []  # overflow never goes through retries


# ================================================================ Tools


def test_tool_decorator_schema() -> None:
    class Color(enum.Enum):
        RED = "red"
        BLUE = "blue"

    @tool
    def paint(
        wall: str,
        color: Color,
        coats: int = 2,
        finish: Literal["matte", "gloss"] = "matte",
        note: Optional[str] = None,  # noqa: UP045 - the contract names Optional
        ctx: ToolContext | None = None,
    ) -> str:
        """Paint a wall.

        Args:
            wall: Which wall.
            color: The paint color.
        """
        return f"{wall} {color.value} {coats} {finish} {note} {ctx is not None}"

    assert paint.name == "paint" and paint.description == "Paint a wall."
    schema = paint.input_schema
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"wall", "color", "coats", "finish", "note"}
    assert schema["required"] == ["wall", "color"]
    assert schema["properties"]["wall"]["description"] == "Which wall."
    assert schema["properties"]["color"]["enum"] == ["red", "blue"]
    assert schema["properties"]["finish"]["enum"] == ["matte", "gloss"]
    import jsonschema

    note_schema = schema["properties"]["note"]
    jsonschema.validate(None, note_schema)
    jsonschema.validate("text", note_schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(5, note_schema)
    assert paint("w", Color.RED) == "w red 2 matte None False"  # still callable
    result = agentcore.tools.execute("paint", {"wall": "north", "color": "blue"}, [paint])
    assert result["output"] == {"type": "text", "value": "north blue 2 matte None True"}


def test_tool_decorator_options() -> None:
    @tool(name="renamed", description="Custom.", timeout=2.5)
    def original(x: int) -> int:
        """Docstring."""
        return x

    tools = agentcore.tools.load([original])
    assert list(tools) == ["renamed"]
    entry = tools.schema["renamed"]
    assert entry["description"] == "Custom." and entry["source"] == "memory"
    assert "timeout" not in entry and "execute" not in entry
    assert original(3) == 3


def test_tool_context_fields_and_generated_call_id() -> None:
    seen: list[ToolContext] = []

    def execute(input: dict[str, Any], ctx: ToolContext) -> str:
        seen.append(ctx)
        return ctx.tool_call_id

    result = agentcore.tools.execute("who", {}, [{"name": "who", "execute": execute}])
    ctx = seen[0]
    assert ctx.tool_call_id and result["output"]["value"] == ctx.tool_call_id
    assert ctx.tool_name == "who" and isinstance(ctx.cancel, threading.Event)
    assert isinstance(ctx.agent_id, str)


def test_tool_context_in_a_run_has_agent_id(srv: ModelServer, agents: list[Agent]) -> None:
    seen: list[ToolContext] = []

    @tool
    def probe(ctx: ToolContext) -> str:
        """Probe."""
        seen.append(ctx)
        return "ok"

    srv.add({"tool_calls": [{"name": "probe", "id": "p1", "arguments": {}}]}, "done")
    agent = make(agents, srv, tools=[probe], no_tool_rounds=1)
    agent.send("go")
    assert seen[0].tool_call_id == "p1" and seen[0].agent_id == agent.id and seen[0].tool_name == "probe"


def _run(value: Any) -> dict[str, Any]:
    return agentcore.tools.execute("t", {}, [{"name": "t", "execute": lambda i: value}])


def test_return_value_shapes() -> None:
    assert _run("hi") == {"output": {"type": "text", "value": "hi"}}
    assert _run({"a": 1}) == {"output": {"type": "json", "value": {"a": 1}}}
    assert _run([1, 2]) == {"output": {"type": "json", "value": [1, 2]}}
    block = {"type": "error-json", "value": {"why": "x"}}
    assert _run({"output": block})["output"] == block
    stopped = _run({"stop": True, "output": "bye"})
    assert stopped["stop"] is True and stopped["output"] == {"type": "text", "value": "bye"}
    none = _run(None)["output"]
    assert none["type"] == "text" and none["value"]
    content = {
        "type": "content",
        "value": [
            {"type": "text", "text": "t"},
            {"type": "image", "image": "iVBORw0KGgo=", "media_type": "image/png"},
        ],
    }
    assert _run({"output": content})["output"] == content


def test_content_parts_other_than_text_image_file_rejected() -> None:
    result = _run({"output": {"type": "content", "value": [{"type": "audio", "data": "x"}]}})
    assert result["output"]["type"] == "error-text" and "error" in result


def test_raising_gives_an_error_result() -> None:
    def boom(input: dict[str, Any]) -> None:
        raise ValueError("kaput")

    result = agentcore.tools.execute("boom", {}, [{"name": "boom", "execute": boom}])
    assert result["output"]["type"] == "error-text" and "kaput" in result["output"]["value"]
    assert isinstance(result["error"], str) and result["error"]


def test_json_normalisation() -> None:
    value = {
        "when": dt.datetime(2024, 1, 2, 3, 4, 5),
        "set": {1},
        "tuple": (1, 2),
        "bytes": b"hi",
        "decimal": Decimal("1.5"),
        "nan": math.nan,
        "inf": math.inf,
    }
    out = _run(value)["output"]["value"]
    assert out == {
        "when": "2024-01-02T03:04:05",
        "set": [1],
        "tuple": [1, 2],
        "bytes": base64.b64encode(b"hi").decode(),
        "decimal": 1.5,
        "nan": None,
        "inf": None,
    }
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    assert _run(cyclic)["output"]["type"] == "error-text"
    assert _run(object())["output"]["type"] == "error-text"


def test_generators() -> None:
    events: list[dict[str, Any]] = []

    def words(input: dict[str, Any]) -> Iterator[str]:
        yield "a"
        yield "b"

    def numbers(input: dict[str, Any]) -> Iterator[int]:
        yield 1
        yield 2

    def returns(input: dict[str, Any]) -> Iterator[str]:
        yield "progress"
        return "final"

    tools = [
        {"name": "w", "execute": words},
        {"name": "n", "execute": numbers},
        {"name": "r", "execute": returns},
    ]
    assert agentcore.tools.execute("w", {}, tools, on_output=events.append)["output"] == {
        "type": "text",
        "value": "ab",
    }
    assert agentcore.tools.execute("n", {}, tools)["output"] == {"type": "json", "value": [1, 2]}
    assert agentcore.tools.execute("r", {}, tools)["output"] == {"type": "text", "value": "final"}
    assert [e["data"] for e in events] == ["a", "b"]
    assert all(set(e) == {"tool_call_id", "tool_name", "stream", "data"} for e in events)
    assert all(e["stream"] == "yield" and e["tool_name"] == "w" and e["tool_call_id"] for e in events)


def test_to_model_output() -> None:
    def shape(*, output: Any, input: Any) -> dict[str, Any]:
        return {"type": "text", "value": f"{input['x']}={output}"}

    tools = [{"name": "sq", "execute": lambda i: i["x"] ** 2, "to_model_output": shape}]
    assert agentcore.tools.execute("sq", {"x": 3}, tools)["output"] == {"type": "text", "value": "3=9"}
    assert "to_model_output" not in agentcore.tools.load(tools).schema["sq"]


def test_execute_unknown_name_returns_error_result() -> None:
    result = agentcore.tools.execute("missing", {}, [add])
    assert result["output"]["type"] == "error-text" and "error" in result


def test_execute_schema_validation() -> None:
    result = agentcore.tools.execute("add", {"a": "x", "b": 1}, [add])
    assert result["output"]["type"] == "error-text" and "a" in result["output"]["value"]


def test_memory_tool_timeout_sets_ctx_cancel() -> None:
    cancelled = threading.Event()
    release = threading.Event()
    finished = threading.Event()

    def slow(input: dict[str, Any], ctx: ToolContext) -> str:
        if ctx.cancel.wait(60):
            cancelled.set()
        release.wait(60)  # execute() must not wait for the tool to return
        finished.set()
        return "late"

    tools = [{"name": "slow", "execute": slow, "timeout": 0.1}]
    try:
        result = _returns(lambda: agentcore.tools.execute("slow", {}, tools))
        assert not finished.is_set()  # returned while the tool still ran
        assert result["error"] == "timeout"
        assert result["output"]["type"] == "error-text"
        assert "timed out after 0.1 s" in result["output"]["value"]
        assert cancelled.wait(30)
    finally:
        release.set()


def test_interrupted_result() -> None:
    event = threading.Event()
    release = threading.Event()

    entered = threading.Event()

    def wait(input: dict[str, Any]) -> str:
        entered.set()
        release.wait(30)
        return "late"

    threading.Thread(target=lambda: entered.wait(30) and event.set()).start()  # cancel mid-call
    try:
        result = agentcore.tools.execute("wait", {}, [{"name": "wait", "execute": wait}], cancel=event)
    finally:
        release.set()
    assert result["interrupted"] is True
    assert result["output"]["type"] == "error-text" and "interrupt" in result["output"]["value"].lower()


def test_max_tool_output_notice_and_media_untouched() -> None:
    text = "HEAD" + "x" * 5000 + "TAIL"
    for limit in (100, 2000):
        cut = agentcore.tools.execute("t", {}, [{"name": "t", "execute": lambda i: text}], limit=limit)
        value = cut["output"]["value"]
        assert value.startswith("HEAD") and value.endswith("TAIL") and len(value) < len(text)
        assert re.search(r"narrow|page", value, re.IGNORECASE), value
    big = base64.b64encode(b"\x89PNG" + b"\0" * 6000).decode()
    content = {"type": "content", "value": [{"type": "image", "image": big, "media_type": "image/png"}]}
    kept = agentcore.tools.execute(
        "i", {}, [{"name": "i", "execute": lambda i: {"output": content}}], limit=100
    )
    assert kept["output"] == content


def test_max_tool_output_in_a_run(srv: ModelServer, agents: list[Agent]) -> None:
    big = {"name": "big", "execute": lambda i: "A" * 10_000}
    srv.add({"tool_calls": [{"name": "big", "id": "b1", "arguments": {}}]}, "ok")
    agent = make(agents, srv, tools=[big], max_tool_output=1000, no_tool_rounds=1)
    agent.send("go")
    assert len(tool_results(agent.history)[0]["output"]["value"]) <= 1200


def test_toolset_is_a_frozen_dataclass() -> None:
    tools = agentcore.tools.load([add, {"name": "echo", "execute": lambda i: i, "tags": ["x"], "timeout": 3}])
    assert dataclasses.is_dataclass(tools)
    with pytest.raises(dataclasses.FrozenInstanceError):
        tools.schema = {}  # type: ignore[misc]
    assert "add" in tools and "nope" not in tools
    assert sorted(tools) == ["add", "echo"] and len(tools) == 2
    entry = tools.schema["echo"]
    assert entry["tags"] == ["x"] and entry["source"] == "memory"
    assert {"name", "description", "input_schema"} <= set(entry)
    assert not {"execute", "timeout", "to_model_output"} & set(entry)
    assert set(tools.handlers) == {"add", "echo"}


def test_adopt_mcp_style_objects() -> None:
    class McpTool:
        name = "weather"
        description = "Weather for a city."
        inputSchema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}

        def call(self, arguments: dict[str, Any]) -> Any:
            return {"city": arguments["city"], "temp": 21}

    tools = agentcore.tools.adopt([McpTool()])
    assert tools.schema["weather"]["input_schema"]["required"] == ["city"]
    assert tools.schema["weather"]["source"] == "memory"
    result = agentcore.tools.execute("weather", {"city": "Oslo"}, tools)
    assert result["output"] == {"type": "json", "value": {"city": "Oslo", "temp": 21}}

    class Snake:
        name = "snake"
        description = "d"
        input_schema = {"type": "object", "properties": {}}

        def call(self, arguments: dict[str, Any]) -> str:
            return "hiss"

    assert agentcore.tools.execute("snake", {}, agentcore.tools.adopt(Snake()))["output"]["value"] == "hiss"


def test_adopt_record_load_merge_pick_omit() -> None:
    record = agentcore.tools.adopt({"one": {"execute": lambda i: 1}, "two": {"execute": lambda i: 2}})
    assert sorted(record) == ["one", "two"]
    later = agentcore.tools.adopt([{"name": "one", "description": "later", "execute": lambda i: 11}])
    loaded = agentcore.tools.load(record, later)
    assert loaded.schema["one"]["description"] == "later"
    assert agentcore.tools.execute("one", {}, loaded)["output"]["value"] == 11
    merged = agentcore.tools.merge(record, later)
    assert merged.schema["one"]["description"] == "later"
    picked = agentcore.tools.pick(merged, ["two"])
    assert list(picked) == ["two"] and list(picked.handlers) == ["two"]
    omitted = agentcore.tools.omit(merged, ["two"])
    assert list(omitted) == ["one"] and list(omitted.handlers) == ["one"]
    assert sorted(merged) == ["one", "two"]  # the originals are unchanged


def test_file_tools_scan(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "helper.py").write_text("VALUE = 1\n")
    (first / "calc.py").write_text(
        tool_file("calc", "x: int", "int", "x + 1")
        + "\nother = {'name': 'other', 'description': 'o', 'execute': lambda i: 'first'}\n"
    )
    (second / "other.py").write_text("other = {'name': 'other', 'execute': lambda i: 'second'}\n")
    tools = agentcore.tools.scan(str(first), str(second))
    assert sorted(tools) == ["calc", "other"]
    assert tools.schema["calc"]["source"] == "file"
    assert agentcore.tools.execute("calc", {"x": 1}, tools)["output"] == {"type": "json", "value": 2}
    assert agentcore.tools.execute("other", {}, tools)["output"]["value"] == "second"
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "bad_file.py").write_text("raise RuntimeError('nope')\n")
    with pytest.raises(Exception, match="bad_file"):
        agentcore.tools.scan(str(broken))


# ================================================================ Callbacks


def test_callback_order_and_payloads(srv: ModelServer, agents: list[Agent]) -> None:
    log: list[tuple[str, Any]] = []
    lock = threading.Lock()

    def rec(name: str) -> Any:
        def callback(*args: Any) -> Any:
            with lock:
                log.append((name, args[0] if args else None))
            return True

        return callback

    names = [
        "on_start",
        "on_llm_start",
        "on_llm_event",
        "on_llm_finish",
        "on_tool_call",
        "on_permission",
        "on_tool_output",
        "on_tool_result",
        "on_step",
    ]

    @tool
    def talk(n: int) -> Iterator[str]:
        """Talk."""
        yield "x" * n

    srv.add({"tool_calls": [{"name": "talk", "id": "t1", "arguments": {"n": 2}}]}, "done")
    agent = make(agents, srv, tools=[talk], no_tool_rounds=1, callbacks={n: rec(n) for n in names})
    agent.send("go")
    order = [name for name, _ in log if name != "on_llm_event"]
    assert order[:9] == [
        "on_start",
        "on_llm_start",
        "on_llm_finish",
        "on_tool_call",
        "on_permission",
        "on_tool_output",
        "on_tool_result",
        "on_step",
        "on_llm_start",
    ]
    payload = {}
    for name, value in log:
        payload.setdefault(name, value)  # the first of each
    assert {"messages", "tools"} <= set(payload["on_llm_start"])
    assert payload["on_tool_call"] == {"tool_call_id": "t1", "tool_name": "talk", "input": {"n": 2}}
    permission = payload["on_permission"]
    assert {"tool_name", "input", "tool_call_id", "cancel"} <= set(permission)
    assert isinstance(permission["cancel"], threading.Event)
    assert payload["on_tool_output"] == {
        "tool_call_id": "t1",
        "tool_name": "talk",
        "stream": "yield",
        "data": "xx",
    }
    result = payload["on_tool_result"]
    assert result["output"] == {"type": "text", "value": "xx"}
    assert (result["tool_call_id"], result["tool_name"], result["input"]) == ("t1", "talk", {"n": 2})
    step = payload["on_step"]
    assert set(step) == {"step", "result", "tool_calls", "tool_results"}
    assert step["step"] == 1 and step["result"].tool_calls[0].name == "talk"
    assert step["tool_results"] == [result]
    assert step["tool_calls"][0]["name"] == "talk"
    steps = [p["step"] for n, p in log if n == "on_step"]
    assert steps == [1, 2]
    events = [p["type"] for n, p in log if n == "on_llm_event"]
    assert {"tool-call", "text-delta", "finish"} <= set(events)
    text_events = [p for n, p in log if n == "on_llm_event" and p["type"] == "text-delta"]
    assert "".join(e["text"] for e in text_events) == "done"


def test_permission_must_be_exactly_true(srv: ModelServer, agents: list[Agent]) -> None:
    results: list[dict[str, Any]] = []
    srv.add({"tool_calls": [call()]}, "ok")
    agent = make(
        agents,
        srv,
        tools=[add],
        no_tool_rounds=1,
        callbacks={"on_permission": lambda p: 1, "on_tool_result": results.append},
    )
    agent.send("go")
    assert tool_results(agent.history)[0]["output"]["type"] == "execution-denied"
    assert results[0]["output"]["type"] == "execution-denied" and results[0]["tool_call_id"] == "c1"


def test_permission_raising_fails_the_send(srv: ModelServer, agents: list[Agent]) -> None:
    class Mine(Exception):
        pass

    def deny(payload: Any) -> bool:
        raise Mine("no")

    srv.add({"tool_calls": [call()]}, "never")
    agent = make(agents, srv, tools=[add], callbacks={"on_permission": deny})
    with pytest.raises(AgentError) as info:
        agent.send("go")
    assert info.value.kind == "tool" and isinstance(info.value.__cause__, Mine)
    result = tool_results(agent.history)[0]
    assert result["output"]["type"] == "error-text"


def test_cancelled_while_permission_waits_is_interrupted(srv: ModelServer, agents: list[Agent]) -> None:
    def ask(payload: dict[str, Any]) -> bool:
        agent.stop()
        return False

    srv.add({"tool_calls": [call()]}, "never")
    agent = make(agents, srv, tools=[add], callbacks={"on_permission": ask})
    with pytest.raises(AgentError) as info:
        agent.send("go")
    assert info.value.kind == "aborted"
    result = tool_results(agent.history)[0]
    assert result["output"]["type"] == "error-text" and "interrupt" in result["output"]["value"].lower()


def test_notification_errors_swallowed_and_logged(
    srv: ModelServer, agents: list[Agent], caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: Any) -> None:
        raise RuntimeError("callback bug")

    srv.add("fine")
    agent = make(agents, srv, callbacks={"on_start": broken, "on_llm_finish": broken, "on_step": broken})
    with caplog.at_level(logging.WARNING, logger="agentcore"):
        assert agent.send("hi").text == "fine"
    records = [r for r in caplog.records if r.name == "agentcore" and r.levelno == logging.WARNING]
    assert records and all(r.exc_info for r in records)


def test_on_retry_payload(srv: ModelServer, agents: list[Agent]) -> None:
    retries: list[dict[str, Any]] = []
    srv.add({"status": 500, "error": "e1"}, {"status": 400, "error": "e2"}, "ok")
    agent = make(
        agents, srv, retry_base_delay=0.01, retry_max_delay=1, callbacks={"on_retry": retries.append}
    )
    assert agent.send("q").text == "ok"
    assert all(set(r) == {"attempt", "error", "delay"} for r in retries)
    assert [r["attempt"] for r in retries] == [1, 2]
    assert [r["delay"] for r in retries] == [0.01, 0.02]
    assert [r["error"].kind for r in retries] == ["server", "request"]


def test_retry_after_replaces_the_wait_capped(srv: ModelServer, agents: list[Agent]) -> None:
    retries: list[dict[str, Any]] = []
    srv.add(
        {"status": 429, "error": "slow", "headers": {"Retry-After": "0"}},
        {"status": 429, "error": "slow", "headers": {"Retry-After": "100"}},
        "ok",
    )
    agent = make(
        agents, srv, retry_base_delay=3, retry_max_delay=0.05, callbacks={"on_retry": retries.append}
    )
    agent.send("q")
    assert [r["delay"] for r in retries] == [0.0, 0.05]


def test_retry_max_elapsed_and_filters(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"status": 500, "error": "e"})
    agent = make(agents, srv, retry_base_delay=1, retry_max_delay=5, retry_max_elapsed=0.5)
    with pytest.raises(AgentError) as info:
        agent.send("q")
    assert info.value.kind == "server" and len(srv.requests) == 1
    srv.add({"status": 503, "error": "Overloaded now"})
    skip = make(agents, srv, retry={"skip_text": "overloaded"})
    with pytest.raises(AgentError):
        skip.send("q")
    srv.add({"status": 502, "error": "bad gateway"})
    codes = make(agents, srv, retry={"skip_codes": [502]})
    with pytest.raises(AgentError):
        codes.send("q")
    srv.add({"status": 401, "error": "who"})
    fn = make(agents, srv, retry=lambda error: error.kind != "auth")
    with pytest.raises(AgentError) as info:
        fn.send("q")
    assert info.value.kind == "auth"
    assert len(srv.requests) == 4


# ================================================================ Errors


def test_agent_error_attributes() -> None:
    cause = ValueError("root")
    error = AgentError("msg", kind="server", status=503, retryable=True, cause=cause)
    assert (error.message, error.kind, error.status, error.retryable, error.cause) == (
        "msg",
        "server",
        503,
        True,
        cause,
    )
    assert hasattr(error, "body") and isinstance(error, Exception)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, "auth"),
        (403, "auth"),
        (429, "limit"),
        (408, "timeout"),
        (500, "server"),
        (503, "server"),
        (400, "request"),
        (404, "request"),
    ],
)
def test_status_kinds(srv: ModelServer, status: int, kind: str) -> None:
    srv.add({"status": status, "error": "vendor says no"})
    with pytest.raises(AgentError) as info:
        agentcore.llm.chat(
            base_url=srv.base_url, api_key="", model="m", messages=[{"role": "user", "content": "q"}]
        )
    assert info.value.kind == kind and info.value.status == status
    assert "vendor says no" in info.value.message
    assert len(srv.requests) == 1  # exactly one request, no retries


def test_malformed_2xx_is_unknown_with_status_200(srv: ModelServer) -> None:
    srv.add({"body": "this is not json", "status": 200, "content_type": "application/json"})
    with pytest.raises(AgentError) as info:
        agentcore.llm.chat(
            base_url=srv.base_url, model="m", messages=[{"role": "user", "content": "q"}], stream=False
        )
    assert info.value.kind == "unknown" and info.value.status == 200


def test_network_and_timeout_kinds(srv: ModelServer) -> None:
    messages = [{"role": "user", "content": "q"}]
    with pytest.raises(AgentError) as info:
        agentcore.llm.chat(base_url=f"http://127.0.0.1:{free_port()}/v1", model="m", messages=messages)
    assert info.value.kind == "network"
    srv.add({"text": "late", "delay": 60})  # returning at all proves the 60 s stall was cut
    with pytest.raises(AgentError) as info:
        _returns(
            lambda: agentcore.llm.chat(
                base_url=srv.base_url, model="m", messages=messages, request_timeout=0.2
            )
        )
    assert info.value.kind == "timeout"


def test_long_healthy_stream_is_not_cut_by_request_timeout(srv: ModelServer) -> None:
    # The stream outlasts request_timeout (30 gaps of at least 0.1 s = 3 s > 2 s); each gap is far
    # below it (a 20x, 1.9 s margin for a busy machine's scheduling).
    srv.add({"text": "a" * 120, "chunk_size": 4, "chunk_delay": 0.1})
    result = agentcore.llm.chat(
        base_url=srv.base_url, model="m", messages=[{"role": "user", "content": "q"}], request_timeout=2.0
    )
    assert result.text == "a" * 120


def test_api_key_never_leaks(srv: ModelServer, agents: list[Agent], caplog: pytest.LogCaptureFixture) -> None:
    srv.add({"status": 401, "error": f"invalid key {KEY}"})
    agent = make(agents, srv, api_key=KEY, retry=lambda e: False)
    with caplog.at_level(logging.DEBUG), pytest.raises(AgentError) as info:
        agent.send("q")
    error = info.value
    for text in (
        error.message,
        str(error),
        repr(error),
        error.body or "",
        caplog.text,
        json.dumps(agent.history),
    ):
        assert KEY not in text
    assert KEY not in repr(agent) and KEY not in repr(agent.config)


# ================================================================ Lower layers: llm.chat


def test_llm_chat_result(srv: ModelServer) -> None:
    srv.add({"text": "calling", "reasoning": None, "tool_calls": [call()], "finish_reason": "stop"})
    events: list[dict[str, Any]] = []
    result = agentcore.llm.chat(
        base_url=srv.base_url,
        api_key=KEY,
        model="m",
        messages=[{"role": "user", "content": "q"}],
        system="S",
        tools=[{"name": "add", "description": "d", "input_schema": add.input_schema}],
        on_llm_event=events.append,
    )
    assert isinstance(result, agentcore.llm.LLMResult)
    assert result.text == "calling" and result.finish_reason == "tool_calls"
    first = result.tool_calls[0]
    assert (first.id, first.name, first.arguments) == ("c1", "add", {"a": 1, "b": 2})
    assert first["name"] == "add" and dict(first) == {
        "id": "c1",
        "name": "add",
        "arguments": {"a": 1, "b": 2},
    }
    assert isinstance(result.usage, Usage)
    assert result.message["role"] == "assistant"
    assert result.message["content"][-1]["type"] == "tool-call"
    assert isinstance(result.raw, list)  # stream events
    assert sum(e["type"] == "finish" for e in events) == 1
    assert srv.requests[0]["messages"][0] == {"role": "system", "content": "S"}


@pytest.mark.parametrize(
    ("scripted", "expected"),
    [("stop", "stop"), ("length", "length"), ("content_filter", "content_filter")],
)
def test_llm_finish_reasons(srv: ModelServer, scripted: str, expected: str) -> None:
    srv.add({"text": "t", "finish_reason": scripted})
    result = agentcore.llm.chat(base_url=srv.base_url, model="m", messages=[{"role": "user", "content": "q"}])
    assert result.finish_reason == expected
    assert result.reasoning is None or isinstance(result.reasoning, str)


def test_stream_false_gives_one_finish_event(srv: ModelServer, agents: list[Agent]) -> None:
    events: list[dict[str, Any]] = []
    srv.add("hello there")
    result = agentcore.llm.chat(
        base_url=srv.base_url,
        model="m",
        messages=[{"role": "user", "content": "q"}],
        stream=False,
        on_llm_event=events.append,
    )
    assert result.text == "hello there" and not isinstance(result.raw, list)
    assert [e["type"] for e in events] == ["finish"]
    assert not srv.requests[0].get("stream")
    agent_events: list[dict[str, Any]] = []
    srv.add("again")
    make(agents, srv, stream=False, callbacks={"on_llm_event": agent_events.append}).send("q")
    assert [e["type"] for e in agent_events] == ["finish"]


def test_llm_chat_validates_provider(srv: ModelServer) -> None:
    with pytest.raises(AgentError) as info:
        agentcore.llm.chat(base_url=srv.base_url, model="m", messages=[], provider={"bogus": 1})
    assert info.value.kind == "config"


# ================================================================ text_tools


def test_text_tools_prepare_wrap_read() -> None:
    tools = agentcore.tools.load([add])
    spec = agentcore.text_tools.prepare(tools.schema)
    h = agentcore.history
    messages = [
        h.user("add 1 and 2"),
        h.assistant(tool_calls=[{"id": "c1", "name": "add", "arguments": {"a": 1, "b": 2}}]),
        h.tool("c1", "add", 3),
    ]
    wrapped = agentcore.text_tools.wrap(messages, spec)
    text = json.dumps(wrapped)
    assert "add" in text and "<tool_result" in text
    assert all(m["role"] != "tool" for m in wrapped)
    assert "<tool_call>" in json.dumps([m for m in wrapped if m["role"] == "system"])  # the manual
    found = agentcore.text_tools.read(
        'Sure. <tool_call>{"name": "add", "arguments": {"a": 4, "b": 5}}</tool_call>', spec
    )
    assert found.text.strip() == "Sure."
    assert [(c.name, c.arguments) for c in found.tool_calls] == [("add", {"a": 4, "b": 5})]
    assert found.invalid == []
    bad = agentcore.text_tools.read("<tool_call>{not json at all</tool_call>", spec, loose=False)
    assert bad.tool_calls == [] and len(bad.invalid) == 1


def test_text_mode_result_text_has_calls_removed(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add('Let me add. <tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>')
    agent = make(agents, srv, tools=[add], tool_mode="text", max_steps=1)
    result = agent.send("q")
    assert result.reason == "step-limit" and "<tool_call>" not in result.text and "Let me add." in result.text
    assert "tools" not in srv.requests[0]
    assert tool_results(agent.history)[0]["output"] == {"type": "json", "value": 3}


# ================================================================ Custom adapter


class EchoAdapter:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def chat(self, request: dict[str, Any], *, cancel: Any, on_event: Any, timeout: Any) -> Any:
        self.requests.append(request)
        message = {"role": "assistant", "content": [{"type": "text", "text": "adapted"}]}
        return agentcore.llm.LLMResult(
            text="adapted",
            reasoning=None,
            tool_calls=[],
            usage=Usage(input_tokens=1, output_tokens=1, total_tokens=2),
            finish_reason="stop",
            message=message,
            raw=None,
        )


def test_custom_adapter(agents: list[Agent]) -> None:
    adapter = EchoAdapter()
    agent = Agent(config={"model": adapter, "system": "S", "max_tokens": 10})
    agents.append(agent)
    result = agent.send("hi")
    assert result.text == "adapted"
    request = adapter.requests[0]
    assert {"system", "messages", "tools", "provider", "output", "max_tokens"} <= set(request)
    assert request["system"] == "S" and request["max_tokens"] == 10
    for bad in (
        {"provider": {"body": {"x": 1}}},
        {"cache": {"key": "k"}},
        {"capabilities": {"tool_choice": False}},
    ):
        with pytest.raises(AgentError) as info:
            Agent(config={"model": adapter, **bad})
        assert info.value.kind == "config"


# ================================================================ Wire


def _wire(srv: ModelServer, protocol: str, *, stream: bool = True, **config: Any) -> Any:
    srv.add("ok")
    agent = Agent(
        config={
            "base_url": srv.base_url,
            "model": "mdl",
            "api_key": KEY,
            "protocol": protocol,
            "stream": stream,
            **FAST,
            **config,
        }
    )
    try:
        agent.send("hi")
    finally:
        agent.close()
    return srv.log[-1]


def test_wire_paths_and_auth(srv: ModelServer) -> None:
    chat = _wire(srv, "chat")
    assert chat.path == "/v1/chat/completions" and chat.headers["authorization"] == f"Bearer {KEY}"
    responses = _wire(srv, "responses")
    assert responses.path == "/v1/responses" and responses.headers["authorization"] == f"Bearer {KEY}"
    anthropic = _wire(srv, "anthropic")
    assert anthropic.path == "/v1/messages"
    assert anthropic.headers["x-api-key"] == KEY and anthropic.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in anthropic.headers
    gemini = _wire(srv, "gemini")
    assert gemini.path == "/v1/models/mdl:streamGenerateContent" and gemini.query.get("alt") == "sse"
    assert gemini.headers["x-goog-api-key"] == KEY and "key" not in gemini.query
    plain = _wire(srv, "gemini", stream=False)
    assert plain.path == "/v1/models/mdl:generateContent" and "key" not in plain.query
    assert KEY not in plain.path and "authorization" not in plain.headers


def test_wire_anthropic_max_tokens(srv: ModelServer) -> None:
    assert _wire(srv, "anthropic").body["max_tokens"] == 8192
    assert _wire(srv, "anthropic", max_tokens=100).body["max_tokens"] == 100
    assert (
        _wire(srv, "anthropic", max_tokens=100, provider={"max_output_tokens": 50}).body["max_tokens"] == 50
    )


def test_wire_max_output_tokens_wins(srv: ModelServer) -> None:
    body = _wire(srv, "responses", max_tokens=100, provider={"max_output_tokens": 50}).body
    assert body["max_output_tokens"] == 50
    gemini = _wire(srv, "gemini", max_tokens=100, provider={"max_output_tokens": 50}).body
    assert gemini["generationConfig"]["maxOutputTokens"] == 50
    chat = _wire(srv, "chat", max_tokens=100, provider={"max_output_tokens": 50}).body
    assert 50 in (chat.get("max_tokens"), chat.get("max_completion_tokens"))
    assert 100 not in (chat.get("max_tokens"), chat.get("max_completion_tokens"))


def test_wire_responses_stateless(srv: ModelServer) -> None:
    body = _wire(srv, "responses").body
    assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]


def test_wire_tool_choice_omitted_unless_set(srv: ModelServer) -> None:
    srv.add("ok")
    agent = Agent(config={"base_url": srv.base_url, "model": "m", "no_tool_rounds": 1}, tools=[add])
    agent.send("hi")
    assert "tool_choice" not in srv.requests[-1] and srv.requests[-1]["tools"]
    srv.add("ok")
    agent.send("hi", config={"provider": {"tool_choice": "required"}})
    assert srv.requests[-1]["tool_choice"] == "required"
    for protocol, field_name in (
        ("anthropic", "tool_choice"),
        ("responses", "tool_choice"),
        ("gemini", "toolConfig"),
    ):
        srv.add("ok")
        Agent(
            config={"base_url": srv.base_url, "model": "m", "no_tool_rounds": 1, "protocol": protocol},
            tools=[add],
        ).send("hi")
        assert field_name not in srv.requests[-1], protocol
    agent.close()


def test_wire_body_cannot_override_reserved(srv: ModelServer, caplog: pytest.LogCaptureFixture) -> None:
    reserved = {"model": "x", "messages": [], "input": [], "contents": [], "stream": False, "vendor_flag": 1}
    with caplog.at_level(logging.WARNING, logger="agentcore"):
        chat = _wire(srv, "chat", provider={"body": reserved}).body
    assert chat["model"] == "mdl" and chat["messages"] and chat["stream"] is True and chat["vendor_flag"] == 1
    assert caplog.records
    responses = _wire(srv, "responses", provider={"body": reserved}).body
    assert responses["model"] == "mdl" and responses["input"] and responses["stream"] is True
    gemini = _wire(srv, "gemini", provider={"body": reserved}).body
    assert gemini["contents"] and gemini["vendor_flag"] == 1
    anthropic = _wire(srv, "anthropic", provider={"body": reserved}).body
    assert anthropic["model"] == "mdl" and anthropic["messages"] and anthropic["stream"] is True


def test_wire_cache(srv: ModelServer) -> None:
    default = _wire(srv, "chat").body
    assert isinstance(default["prompt_cache_key"], str) and default["prompt_cache_key"]
    assert "prompt_cache_key" not in _wire(srv, "chat", cache=False).body
    keyed = _wire(srv, "chat", cache={"key": "k1", "retention": "24h", "body": {"extra_cache": 1}}).body
    assert (keyed["prompt_cache_key"], keyed["prompt_cache_retention"], keyed["extra_cache"]) == (
        "k1",
        "24h",
        1,
    )
    responses = _wire(srv, "responses", cache={"retention": "24h"}).body
    assert responses["prompt_cache_retention"] == "24h"
    wins = _wire(srv, "chat", cache={"key": "k1"}, provider={"body": {"prompt_cache_key": "mine"}}).body
    assert wins["prompt_cache_key"] == "mine"
    anthropic = _wire(srv, "anthropic", system="SYS", cache={"retention": "1h"}).body
    assert '"ttl": "1h"' in json.dumps(anthropic)
    assert "cache_control" in json.dumps(anthropic["system"])
    assert "cache_control" not in json.dumps(_wire(srv, "anthropic", system="SYS", cache=False).body)


def test_wire_system_sent_exactly(srv: ModelServer) -> None:
    body = _wire(srv, "chat", system="Exactly this.").body
    assert body["messages"][0] == {"role": "system", "content": "Exactly this."}


def test_gemini_function_response_and_call_ids(srv: ModelServer, agents: list[Agent]) -> None:
    def fail(input: dict[str, Any]) -> None:
        raise RuntimeError("broken tool")

    srv.add({"tool_calls": [call(), call(id="ignored"), {"name": "fail", "arguments": {}}]}, "done")
    agent = make(
        agents, srv, protocol="gemini", tools=[add, {"name": "fail", "execute": fail}], no_tool_rounds=1
    )
    agent.send("go")
    ids = [p["tool_call_id"] for p in agent.history[1]["content"] if p["type"] == "tool-call"]
    assert len(ids) == 3 and len(set(ids)) == 3
    responses = [
        part["functionResponse"]["response"]
        for content in srv.requests[1]["contents"]
        for part in content.get("parts", [])
        if "functionResponse" in part
    ]
    assert responses[0] == {"output": 3} and responses[1] == {"output": 3}
    assert set(responses[2]) == {"error"} and "broken tool" in responses[2]["error"]


def test_reasoning_state_round_trips_same_protocol_only(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"text": "first", "reasoning": "deep thought"}, "second")
    agent = make(agents, srv, protocol="anthropic")
    agent.send("one")
    part = agent.history[1]["content"][0]
    assert part["type"] == "reasoning" and part["provider_metadata"]["protocol"] == "anthropic"
    agent.send("two")
    assert '"signature"' in json.dumps(srv.requests[1]["messages"])
    srv.add("third")
    agent.send("three", config={"protocol": "chat"})
    assert "deep thought" not in json.dumps(srv.requests[2])
    srv.add("fourth")
    agent.send("four", config={"capabilities": {"reasoning": True}})
    assert "reasoning_content" in json.dumps(srv.requests[3])


def test_empty_assistant_reply_stored_not_sent(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"text": ""}, "now")
    agent = make(agents, srv)
    agent.send("one")
    assert agent.history[1]["role"] == "assistant"
    agent.send("two")
    roles = [m["role"] for m in srv.requests[1]["messages"]]
    assert roles.count("assistant") == 0


def _wait_for(condition: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition never became true"
        time.sleep(0.01)


# ================================================================ Signatures (names and defaults)


def _params(fn: Any) -> dict[str, tuple[Any, Any]]:
    import inspect

    return {name: (p.kind, p.default) for name, p in inspect.signature(fn).parameters.items()}


def test_public_signatures() -> None:
    import inspect

    empty = inspect.Parameter.empty
    kw = inspect.Parameter.KEYWORD_ONLY
    init = _params(Agent.__init__)
    names = [n for n in init if n != "self"]
    assert names == ["config", "tools", "callbacks", "history", "id", "hooks", "session"]
    assert all(default is None for n, (_, default) in init.items() if n != "self")
    send = _params(Agent.send)
    assert list(send)[1] == "input"
    for name in ("config", "history", "tools", "callbacks", "cancel"):
        assert send[name] == (kw, None), name
    resume = _params(Agent.resume)
    assert {n for n in resume if n != "self"} == {"config", "callbacks", "cancel"}
    assert all(kind == kw for n, (kind, _) in resume.items() if n != "self")
    compact = _params(Agent.compact)
    assert {n for n in compact if n != "self"} == {"on_compact", "on_retry"}
    chat = _params(agentcore.llm.chat)
    expected_chat = {
        "system": "",
        "tools": None,
        "protocol": "chat",
        "provider": None,
        "stream": True,
        "cache": True,
        "capabilities": None,
        "media_fallback": "error",
        "output": None,
        "max_tokens": None,
        "on_llm_event": None,
        "cancel": None,
        "request_timeout": None,
    }
    for name, default in expected_chat.items():
        assert chat[name] == (kw, default), name
    for name in ("base_url", "api_key", "model", "messages"):
        assert chat[name][0] == kw, name
    assert chat["messages"][1] is empty and chat["model"][1] is empty
    build = _params(agentcore.context.build)
    assert list(build)[:5] == ["history", "system", "tools", "max_context_tokens", "ratio"]
    assert [build[n][1] for n in ("system", "tools", "max_context_tokens", "ratio")] == [
        "",
        None,
        128000,
        None,
    ]
    run = _params(agentcore.compact.run)
    for name in ("history", "system", "tools", "connection"):
        assert run[name][0] == kw, name
    assert (run["previous"], run["on_compact"], run["cancel"]) == ((kw, None), (kw, None), (kw, None))
    execute = _params(agentcore.tools.execute)
    assert list(execute)[:3] == ["name", "input", "tools"]
    for name in ("cancel", "on_output", "limit", "concurrency"):
        assert execute[name] == (kw, None), name
    read = _params(agentcore.text_tools.read)
    assert list(read)[:3] == ["text", "spec", "loose"] and read["loose"][1] is True
    assert list(_params(agentcore.text_tools.prepare)) == ["schema"]
    assert list(_params(agentcore.text_tools.wrap))[:2] == ["messages", "spec"]
    assert list(_params(agentcore.history.assistant))[:2] == ["content", "tool_calls"]
    assert _params(agentcore.history.assistant)["content"][1] == ""
    assert list(_params(agentcore.history.tool)) == ["tool_call_id", "tool_name", "content"]
    for fn in (agentcore.tools.scan, agentcore.tools.load, agentcore.tools.merge):
        assert next(iter(_params(fn).values()))[0] == inspect.Parameter.VAR_POSITIONAL
    assert list(_params(agentcore.tools.pick))[:2] == list(_params(agentcore.tools.omit))[:2]
    for name in ("object", "array", "json"):
        assert callable(getattr(agentcore.output, name))
    result_fields = [f.name for f in dataclasses.fields(SendResult)]
    assert set(result_fields) == {"text", "steps", "usage", "reason", "output", "messages", "pending"}
    llm_fields = {f.name for f in dataclasses.fields(agentcore.llm.LLMResult)}
    assert {"text", "reasoning", "tool_calls", "usage", "finish_reason", "message", "raw"} <= llm_fields
    read_fields = {f.name for f in dataclasses.fields(agentcore.text_tools.TextToolRead)}
    assert {"text", "tool_calls", "invalid"} <= read_fields
    assert {f.name for f in dataclasses.fields(agentcore.tools.ToolSet)} == {"schema", "handlers"}
    context_fields = {f.name for f in dataclasses.fields(agentcore.context.Context)}
    assert {"messages", "system", "tokens"} <= context_fields


def test_send_rejects_unknown_callback(srv: ModelServer, agents: list[Agent]) -> None:
    agent = make(agents, srv)
    for callbacks in ({"on_bogus": print}, {"on_step": "not callable"}):
        with pytest.raises(AgentError) as info:
            agent.send("hi", callbacks=callbacks)
        assert info.value.kind == "config"
    assert agent.history == []


# ================================================================ More of the loop and its invariants


def test_steps_and_usage_exclude_retries_but_include_compaction(
    srv: ModelServer, agents: list[Agent]
) -> None:
    srv.add(
        {"status": 500, "error": "e"},
        {"text": "SUMMARY", "usage": {"input_tokens": 100, "output_tokens": 7}},
        {"text": "answer", "usage": {"input_tokens": 10, "output_tokens": 2}},
    )
    agent = make(agents, srv, max_context_tokens=1000)
    agent.history.extend([agentcore.history.user("x" * 2000), agentcore.history.assistant("y")])
    result = agent.send("go")
    assert result.steps == 1 and result.text == "answer"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (110, 9)
    assert result.usage.total_tokens == 119


def test_stop_with_a_blocked_memory_tool(srv: ModelServer, agents: list[Agent]) -> None:
    release = threading.Event()
    seen: list[ToolContext] = []
    tool_threads: list[threading.Thread] = []

    def block(input: dict[str, Any], ctx: ToolContext) -> str:
        seen.append(ctx)
        tool_threads.append(threading.current_thread())
        release.wait(60)
        return "late"

    srv.add({"tool_calls": [{"name": "block", "id": "b1", "arguments": {}}]}, "never")
    agent = make(agents, srv, tools=[{"name": "block", "execute": block}])
    errors: list[AgentError] = []

    def send() -> None:
        try:
            agent.send("go")
        except AgentError as error:
            errors.append(error)

    thread = threading.Thread(target=send)
    thread.start()
    try:
        _wait_for(lambda: bool(seen))
        assert _returns(agent.stop) is True
        assert not release.is_set()  # stop() did not wait for the tool's thread
        thread.join(30)
        assert not thread.is_alive()
        assert errors[0].kind == "aborted"
        assert seen[0].cancel.is_set()
        result = tool_results(agent.history)[0]
        # API.md §Details "Stored results say what happened": the part says it was interrupted.
        assert set(result) == {"type", "tool_call_id", "tool_name", "output", "interrupted"}
        assert result["interrupted"] is True
        assert result["output"]["type"] == "error-text" and "interrupt" in result["output"]["value"].lower()
    finally:
        release.set()
    tool_threads[0].join(30)  # the tool has returned its late value
    assert not tool_threads[0].is_alive()
    assert len(tool_results(agent.history)) == 1  # the late return value is dropped


def test_keyboard_interrupt_closes_history_and_reraises(srv: ModelServer, agents: list[Agent]) -> None:
    import os
    import signal

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("not applicable: signals reach the main thread only")
    release = threading.Event()
    started = threading.Event()

    def block(input: dict[str, Any]) -> str:
        started.set()
        release.wait(60)
        return "late"

    srv.add({"tool_calls": [{"name": "block", "id": "k1", "arguments": {}}]}, "never")
    agent = make(agents, srv, tools=[{"name": "block", "execute": block}])

    def interrupt() -> None:
        if started.wait(30):
            os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    killer = threading.Thread(target=interrupt)
    killer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            agent.send("go")
    finally:
        killer.join()
        release.set()
        signal.signal(signal.SIGINT, previous)
    assert agent.running is None
    assert tool_results(agent.history)[0]["output"]["type"] == "error-text"


def test_auto_tool_mode_falls_back_and_remembers(srv: ModelServer, agents: list[Agent]) -> None:
    model = f"auto-{time.monotonic_ns()}"
    srv.add(
        {"status": 400, "error": "tools are not supported by this model"},
        '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 2}}</tool_call>',
        "four",
    )
    agent = make(agents, srv, tools=[add], tool_mode="auto", no_tool_rounds=1)
    agent.send("2+2", config={"model": model})
    assert "tools" in srv.requests[0] and "tools" not in srv.requests[1]
    assert tool_results(agent.history)[0]["output"] == {"type": "json", "value": 4}
    assert any("<tool_call>" in json.dumps(m) for m in srv.requests[1]["messages"][:1])
    srv.add("fresh")
    other = make(agents, srv, tools=[add], tool_mode="auto", no_tool_rounds=1, model=model)
    other.send("hi")
    assert "tools" not in srv.requests[-1]  # remembered process-wide per (base_url, model)


def test_latest_user_turn_before_summary_kept() -> None:
    h = agentcore.history
    history = [h.user("GOAL"), h.assistant("ok"), h.user("a"), h.user("b"), h.user("LATEST INSTRUCTION")]
    for i in range(5):
        history += [
            h.assistant(tool_calls=[{"id": f"c{i}", "name": "t", "arguments": {}}]),
            h.tool(f"c{i}", "t", i),
        ]
    history += [h.compact("SUM"), h.user("after")]
    ctx = agentcore.context.build(history, max_context_tokens=100_000)
    assert "LATEST INSTRUCTION" in json.dumps(ctx.messages)
    assert "c0" not in json.dumps(ctx.messages) and "c4" in json.dumps(ctx.messages)
    # A call never travels without its result.
    sent = json.dumps(ctx.messages)
    for i in range(5):
        assert (f'"c{i}"' in sent) == (sent.count(f'"c{i}"') == 2)


def test_compaction_events_only_to_on_compact(srv: ModelServer, agents: list[Agent]) -> None:
    llm_events: list[Any] = []
    compact_events: list[dict[str, Any]] = []
    srv.add("SUMMARY")
    agent = make(
        agents, srv, callbacks={"on_llm_event": llm_events.append, "on_compact": compact_events.append}
    )
    agent.history.append(agentcore.history.user("hi"))
    agent.compact()
    assert llm_events == []
    assert compact_events and any(
        e["type"] == "text-delta" and e["request"] == "compact" for e in compact_events
    )


def test_overflow_of_the_compaction_request_is_raised(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"overflow": True}, {"overflow": True})
    agent = make(agents, srv)
    with pytest.raises(AgentError) as info:
        agent.send("q")
    assert info.value.status == 400 and len(srv.requests) == 2
    assert all(m["role"] != "compact" for m in agent.history)


def test_mid_stream_failures_are_retried(srv: ModelServer, agents: list[Agent]) -> None:
    retries: list[dict[str, Any]] = []
    starts: list[Any] = []
    srv.add(
        {"text": "one two three", "stream_error": "overloaded"},
        {"text": "one two three", "truncate": True},
        "final",
    )
    agent = make(agents, srv, callbacks={"on_retry": retries.append, "on_llm_start": starts.append})
    result = agent.send("q")
    assert result.text == "final" and result.steps == 1
    assert [r["attempt"] for r in retries] == [1, 2]
    assert all(r["error"].kind in ("network", "timeout", "server", "unknown") for r in retries)
    assert len(starts) == 3  # on_llm_start per HTTP attempt
    assert [m["role"] for m in agent.history] == ["user", "assistant"]


def test_retry_after_ms_and_pattern_skip_text(srv: ModelServer, agents: list[Agent]) -> None:
    retries: list[dict[str, Any]] = []
    srv.add({"status": 429, "error": "slow", "headers": {"retry-after-ms": "20"}}, "ok")
    agent = make(agents, srv, retry_base_delay=3, retry_max_delay=10, callbacks={"on_retry": retries.append})
    agent.send("q")
    assert [r["delay"] for r in retries] == [pytest.approx(0.02)]
    srv.add({"status": 503, "error": "Quota EXCEEDED for today"})
    skip = make(agents, srv, retry={"skip_text": re.compile(r"quota \w+", re.IGNORECASE)})
    with pytest.raises(AgentError) as info:
        skip.send("q")
    assert info.value.kind == "server"
    assert srv.remaining == 0 and len(srv.requests) == 3


def test_on_tool_result_for_invalid_calls(srv: ModelServer, agents: list[Agent]) -> None:
    results: list[dict[str, Any]] = []
    srv.add({"tool_calls": [{"name": "ghost", "id": "g1", "arguments": {"x": 1}}]}, "ok")
    agent = make(agents, srv, tools=[add], no_tool_rounds=1, callbacks={"on_tool_result": results.append})
    agent.send("q")
    assert len(results) == 1 and results[0]["tool_call_id"] == "g1" and results[0]["tool_name"] == "ghost"
    assert results[0]["input"] == {"x": 1} and results[0]["output"]["type"] == "error-text"


# ================================================================ More of the wire


def test_chat_keeps_consecutive_user_messages(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("ok")
    agent = make(agents, srv)
    agent.history.append(agentcore.history.user("first"))
    agent.send("second")
    users = [m["content"] for m in srv.requests[0]["messages"] if m["role"] == "user"]
    assert users == ["first", "second"]


def test_anthropic_structured_output_uses_a_forced_tool(srv: ModelServer, agents: list[Agent]) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    srv.add({"tool_calls": [{"name": "output", "arguments": {"n": 5}}]})
    agent = make(agents, srv, protocol="anthropic", output=agentcore.output.object(schema))
    result = agent.send("q")
    body = srv.requests[0]
    assert body["tool_choice"]["type"] == "tool"
    forced = body["tool_choice"]["name"]
    assert any(t["name"] == forced for t in body["tools"])
    assert result.output == {"n": 5} and result.reason == "finished"


def test_gemini_call_ids_deterministic_for_a_response(srv: ModelServer) -> None:
    part = {"functionCall": {"name": "add", "args": {"a": 1, "b": 2}}}
    body = {
        "candidates": [{"content": {"role": "model", "parts": [part, part]}, "finishReason": "STOP"}],
        "responseId": "resp-1",
    }
    reply = {"body": json.dumps(body), "status": 200, "content_type": "application/json"}
    srv.add(reply, reply)
    messages = [{"role": "user", "content": "q"}]
    options: dict[str, Any] = {"base_url": srv.base_url, "model": "m", "protocol": "gemini", "stream": False}
    first = agentcore.llm.chat(messages=messages, **options)
    second = agentcore.llm.chat(messages=messages, **options)
    assert [c.id for c in first.tool_calls] == [c.id for c in second.tool_calls]
    assert len({c.id for c in first.tool_calls}) == 2


# ================================================================ More file tools


def test_file_tools_details(tmp_path: Path, srv: ModelServer, agents: list[Agent]) -> None:
    import os

    folder = tmp_path / "tools"
    folder.mkdir()
    marker = tmp_path / "imported.txt"
    (folder / "sibling.py").write_text(
        f"import os\nopen({str(marker)!r}, 'a').write(str(os.getpid()) + '\\n')\nBASE = 100\n"
    )
    (folder / "pair.py").write_text(
        textwrap.dedent(
            """\
            import os, sys, time

            import sibling
            from agentcore import tool

            __all__ = ["TOOLS"]


            @tool
            def plus(x: int) -> int:
                \"\"\"Plus.\"\"\"
                return sibling.BASE + x


            @tool
            def shout(text: str) -> str:
                \"\"\"Shout.\"\"\"
                print("to stdout", flush=True)
                sys.stderr.write("to stderr\\n")
                sys.stderr.flush()
                return text.upper()


            @tool(timeout=0.3)
            def hang() -> str:
                \"\"\"Hang.\"\"\"
                time.sleep(120)
                return "never"


            @tool
            def die() -> str:
                \"\"\"Die.\"\"\"
                os._exit(3)


            @tool
            def hidden() -> str:
                \"\"\"Not exported.\"\"\"
                return "no"


            TOOLS = [plus, shout, hang, die]
            """
        )
    )
    tools = agentcore.tools.scan(folder)
    assert sorted(tools) == ["die", "hang", "plus", "shout"]
    pids = marker.read_text().split()
    assert pids and str(os.getpid()) not in pids  # imported in a tool process, never here
    assert agentcore.tools.execute("plus", {"x": 1}, tools)["output"] == {"type": "json", "value": 101}
    output: list[dict[str, Any]] = []
    shouted = agentcore.tools.execute("shout", {"text": "hi"}, tools, on_output=output.append)
    assert shouted["output"] == {"type": "text", "value": "HI"}
    streams = {e["stream"]: "".join(x["data"] for x in output if x["stream"] == e["stream"]) for e in output}
    assert "to stdout" in streams["stdout"] and "to stderr" in streams["stderr"]
    assert all(isinstance(e["data"], str) for e in output)
    hung = _returns(lambda: agentcore.tools.execute("hang", {}, tools))  # not the 120 s sleep
    assert hung["error"] == "timeout" and "timed out after 0.3 s" in hung["output"]["value"]
    died = agentcore.tools.execute("die", {}, tools)
    assert died["output"]["type"] == "error-text"
    # The agent goes on after a crash.
    srv.add(
        {
            "tool_calls": [
                {"name": "die", "id": "d1", "arguments": {}},
                {"name": "plus", "id": "p1", "arguments": {"x": 2}},
            ]
        },
        "ok",
    )
    agent = make(agents, srv, tools=tools, no_tool_rounds=1)
    assert agent.send("go").text == "ok"
    died_result, plus_result = tool_results(agent.history)
    assert died_result["output"]["type"] == "error-text" and plus_result["output"]["value"] == 102


# ================================================================ Third pass: the fine print


def test_superseded_send_applies_nothing(srv: ModelServer, agents: list[Agent]) -> None:
    release = threading.Event()

    def held_finish(result: Any) -> None:
        release.wait(60)  # A's run cannot end before the test has started B and C

    srv.add("A", "C")
    agent = make(agents, srv, callbacks={"on_llm_finish": held_finish})
    outcomes: dict[str, Any] = {}

    def send(name: str, **kwargs: Any) -> None:
        try:
            outcomes[name] = agent.send(name, **kwargs)
        except AgentError as error:
            outcomes[name] = error

    a = threading.Thread(target=send, args=("A",))
    a.start()
    _wait_for(lambda: len(srv.requests) == 1, timeout=30)
    running_a = agent.running
    b = threading.Thread(target=send, args=("B",), kwargs={"config": {"system": "from B"}})
    b.start()
    # B has taken over `agent.running` and waits for A to end; then C supersedes B.
    _wait_for(lambda: agent.running is not running_a, timeout=30)
    running_b = agent.running
    c = threading.Thread(target=send, args=("C",))
    c.start()
    _wait_for(lambda: agent.running is not running_b, timeout=30)
    release.set()
    for thread in (a, b, c):
        thread.join(30)
    assert isinstance(outcomes["B"], AgentError) and outcomes["B"].kind == "aborted"
    assert "B" not in [m["content"] for m in agent.history if m["role"] == "user"]
    assert agent.config["system"] == ""
    assert isinstance(outcomes["C"], SendResult)


def test_cancel_set_leaves_a_running_send_alone(srv: ModelServer, agents: list[Agent]) -> None:
    release = threading.Event()

    def held(recorded: Any) -> str:
        release.wait(60)  # the first send is still running while the second one is refused
        return "finished anyway"

    srv.add(held)
    agent = make(agents, srv)
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(agent.send("first")))
    thread.start()
    _wait_for(lambda: len(srv.requests) == 1)
    event = threading.Event()
    event.set()
    try:
        with pytest.raises(AgentError) as info:
            agent.send("second", cancel=event)
        assert info.value.kind == "aborted"
    finally:
        release.set()
    thread.join(30)
    assert outcome and outcome[0].text == "finished anyway"


def test_on_step_runs_after_history_is_written(srv: ModelServer, agents: list[Agent]) -> None:
    seen: list[list[str]] = []
    srv.add({"tool_calls": [call()]}, "done")
    agent = make(
        agents,
        srv,
        tools=[add],
        no_tool_rounds=1,
        callbacks={"on_step": lambda p: seen.append([m["role"] for m in agent.history])},
    )
    agent.send("go")
    assert seen == [["user", "assistant", "tool"], ["user", "assistant", "tool", "assistant"]]


def test_401_and_400_are_retried_by_default(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"status": 401, "error": "who"}, {"status": 400, "error": "bad"}, "ok")
    assert make(agents, srv).send("q").text == "ok"
    assert len(srv.requests) == 3


def test_no_tool_rounds_two_and_infinite(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("a", "b")
    agent = make(agents, srv, tools=[add], no_tool_rounds=2)
    assert agent.send("q").reason == "no-tool"
    prompt = agent.config["no_tool_prompt"]
    assert srv.requests[1]["messages"][-1] == {"role": "user", "content": prompt}
    assert srv.requests[0]["messages"][-1]["content"] == "q"
    srv.add("a", "b", "c", "d")
    endless = make(agents, srv, tools=[add], no_tool_rounds=float("inf"), max_steps=4)
    assert endless.send("q").reason == "step-limit"
    assert all(prompt not in json.dumps(r) for r in srv.requests[2:])


def test_video_file_part_forbidden(srv: ModelServer, agents: list[Agent]) -> None:
    agent = make(agents, srv, capabilities={"video": False})
    with pytest.raises(AgentError) as info:
        agent.send([{"type": "file", "media_type": "video/mp4", "data": "AAAA"}])
    assert info.value.kind == "request"


def test_compact_on_compact_replaces_agent_callback(srv: ModelServer, agents: list[Agent]) -> None:
    agent_events: list[Any] = []
    call_events: list[Any] = []
    srv.add("SUMMARY")
    agent = make(agents, srv, callbacks={"on_compact": agent_events.append})
    agent.history.append(agentcore.history.user("hi"))
    agent.compact(on_compact=call_events.append)
    assert agent_events == [] and call_events


def test_compact_protocol_override(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("SUMMARY")
    agent = make(agents, srv, compact={"protocol": "anthropic", "model": "claude-small"})
    agent.history.append(agentcore.history.user("hi"))
    agent.compact()
    assert srv.log[-1].path == "/v1/messages" and srv.requests[-1]["model"] == "claude-small"


@pytest.mark.parametrize("protocol", ["chat", "responses", "anthropic", "gemini"])
def test_overflow_recognised_per_protocol(srv: ModelServer, agents: list[Agent], protocol: str) -> None:
    srv.add({"overflow": True}, "SUMMARY", "answer")
    agent = make(agents, srv, protocol=protocol)
    assert agent.send("q").text == "answer"
    assert [m["role"] for m in agent.history].count("compact") == 1


def test_provider_mapping(srv: ModelServer) -> None:
    provider = {"temperature": 0.3, "headers": {"X-Trace": "t1"}, "stop": ["END"]}
    chat = _wire(srv, "chat", provider=provider)
    assert (
        chat.body["temperature"] == 0.3 and chat.body["stop"] == ["END"] and chat.headers["x-trace"] == "t1"
    )
    anthropic = _wire(srv, "anthropic", provider=provider)
    assert anthropic.body["temperature"] == 0.3 and anthropic.body["stop_sequences"] == ["END"]
    assert anthropic.headers["x-trace"] == "t1"
    gemini = _wire(srv, "gemini", provider=provider)
    config = gemini.body["generationConfig"]
    assert (
        config["temperature"] == 0.3
        and config["stopSequences"] == ["END"]
        and gemini.headers["x-trace"] == "t1"
    )
    responses = _wire(srv, "responses", provider={"temperature": 0.3, "reasoning_effort": "low"})
    assert responses.body["temperature"] == 0.3 and responses.body["reasoning"]["effort"] == "low"
    assert _wire(srv, "chat", provider={"reasoning_effort": "low"}).body["reasoning_effort"] == "low"


def test_anthropic_cache_breakpoint_on_last_message(srv: ModelServer) -> None:
    body = _wire(srv, "anthropic", system="SYS").body
    assert "cache_control" in json.dumps(body["messages"][-1])
    assert "prompt_cache_key" not in _wire(srv, "gemini").body


def test_responses_sends_whole_input(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("first answer", "second answer")
    agent = make(agents, srv, protocol="responses")
    agent.send("one")
    agent.send("two")
    sent = json.dumps(srv.requests[1]["input"])
    assert "one" in sent and "first answer" in sent and "two" in sent
    assert "previous_response_id" not in srv.requests[1]


def test_gemini_thought_signature_sent_back(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"reasoning": "thinking", "tool_calls": [call()]}, "done")
    agent = make(agents, srv, protocol="gemini", tools=[add], no_tool_rounds=1)
    agent.send("go")
    model_turns = [c for c in srv.requests[1]["contents"] if c.get("role") == "model"]
    calls = [p for c in model_turns for p in c["parts"] if "functionCall" in p]
    assert calls and "thoughtSignature" in calls[0]


def test_structured_output_without_native_support(srv: ModelServer, agents: list[Agent]) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    srv.add('{"n": 1}')
    agent = make(
        agents,
        srv,
        system="SYS",
        capabilities={"structured_output": False},
        output=agentcore.output.object(schema),
    )
    assert agent.send("q").output == {"n": 1}
    body = srv.requests[0]
    assert "response_format" not in body
    assert '"n"' in body["messages"][0]["content"] and body["messages"][0]["content"].startswith("SYS")


def test_stream_events_and_reasoning(srv: ModelServer) -> None:
    events: list[dict[str, Any]] = []
    srv.add({"text": "answer", "reasoning": "because", "tool_calls": [call()]})
    result = agentcore.llm.chat(
        base_url=srv.base_url,
        model="m",
        messages=[{"role": "user", "content": "q"}],
        tools=agentcore.tools.load([add]),
        on_llm_event=events.append,
    )
    kinds = [e["type"] for e in events]
    assert {"text-delta", "reasoning-delta", "tool-call-delta", "tool-call", "finish"} <= set(kinds)
    assert kinds[-1] == "finish" and kinds.count("finish") == 1
    assert "".join(e["text"] for e in events if e["type"] == "reasoning-delta") == "because"
    assert result.reasoning == "because"
    assert result.tool_calls[0] == {"id": "c1", "name": "add", "arguments": {"a": 1, "b": 2}}
    assert [p["type"] for p in result.message["content"]] == ["reasoning", "text", "tool-call"]


def test_unknown_vendor_finish_reason_is_other(srv: ModelServer) -> None:
    body = {
        "id": "x",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "banana"}
        ],
    }
    srv.add({"body": json.dumps(body), "status": 200, "content_type": "application/json"})
    result = agentcore.llm.chat(
        base_url=srv.base_url, model="m", messages=[{"role": "user", "content": "q"}], stream=False
    )
    assert result.finish_reason == "other" and result.text == "hi"


def test_stall_mid_stream_is_timeout(srv: ModelServer) -> None:
    srv.add({"text": "a long reply that stalls", "stall_after": 2})
    with pytest.raises(AgentError) as info:
        agentcore.llm.chat(
            base_url=srv.base_url, model="m", messages=[{"role": "user", "content": "q"}], request_timeout=0.2
        )
    assert info.value.kind == "timeout"


def test_file_tool_edited_between_scans(tmp_path: Path) -> None:
    path = tmp_path / "version.py"
    path.write_text(tool_file("version", "", "str", "'v1'"))
    first = agentcore.tools.scan(tmp_path)
    assert agentcore.tools.execute("version", {}, first)["output"]["value"] == "v1"
    path.write_text(tool_file("version", "", "str", "'v2!'"))
    second = agentcore.tools.load(str(tmp_path))
    assert agentcore.tools.execute("version", {}, second)["output"]["value"] == "v2!"


# ================================================================ Recorded traffic through the public API

RECORDED = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "recorded"
RECORDED_PATHS = sorted(RECORDED.glob("*/*.json"))


@pytest.fixture(scope="module")
def replay_server() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


@pytest.mark.skipif(not RECORDED_PATHS, reason="no recorded fixtures")
@pytest.mark.parametrize("path", RECORDED_PATHS, ids=[p.stem for p in RECORDED_PATHS])
def test_recorded_reply_through_llm_chat(replay_server: ModelServer, path: Path) -> None:
    fixture = json.loads(path.read_text(encoding="utf-8"))
    response, expect = fixture["response"], fixture["expect"]
    replay_server.add(
        {"body": response["body"], "status": response["status"], "content_type": response["content_type"]}
    )
    events: list[dict[str, Any]] = []
    options: dict[str, Any] = {
        "base_url": replay_server.base_url,
        "api_key": KEY,
        "model": "recorded-model",
        "messages": [{"role": "user", "content": "replay"}],
        "protocol": fixture["protocol"],
        "stream": fixture["stream"],
        "on_llm_event": events.append,
    }
    if expect["error"]:
        with pytest.raises(AgentError) as info:
            agentcore.llm.chat(**options)
        assert info.value.status == expect["error"]["status"] == response["status"]
        assert expect["error"]["message_contains"] in info.value.message
        assert info.value.kind == "request"
        return
    result = agentcore.llm.chat(**options)
    assert result.text == expect["text"]
    assert result.reasoning == expect["reasoning"]
    assert result.finish_reason == expect["finish_reason"]
    calls = [(c.name, c.arguments) for c in result.tool_calls]
    assert calls == [
        (c["name"], c["arguments"] if c["arguments"] != "" else {}) for c in expect["tool_calls"]
    ]
    for mine, theirs in zip(result.tool_calls, expect["tool_calls"], strict=True):
        if theirs["id"] is not None:
            assert mine.id == theirs["id"]
        assert isinstance(mine.id, str) and mine.id
    usage = expect["usage"] or {}
    for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
        assert getattr(result.usage, name) == (usage.get(name) or 0), name
    assert [e["type"] for e in events].count("finish") == 1
    assert result.message["role"] == "assistant"
    json.dumps(result.message)  # plain JSON, ready for history


# ================================================================ Fourth pass


def test_history_can_be_replaced_between_sends(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("one", "two")
    agent = make(agents, srv)
    agent.send("first")
    mine = [agentcore.history.user("stored earlier"), agentcore.history.assistant("noted")]
    agent.history = mine
    agent.send("second")
    assert agent.history is mine and len(mine) == 4
    assert "stored earlier" in json.dumps(srv.requests[1]) and "first" not in json.dumps(srv.requests[1])


def test_infinite_budget_never_compacts(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("answer")
    agent = make(agents, srv, max_context_tokens=float("inf"))
    agent.history.extend([agentcore.history.user("x" * 300_000), agentcore.history.assistant("y")])
    assert agent.send("go").text == "answer"
    assert len(srv.requests) == 1 and all(m["role"] != "compact" for m in agent.history)


def test_cancelled_calls_reach_on_tool_result(srv: ModelServer, agents: list[Agent]) -> None:
    release = threading.Event()
    results: list[dict[str, Any]] = []

    entered = threading.Event()

    def block(input: dict[str, Any]) -> str:
        entered.set()
        release.wait(30)
        return "late"

    srv.add({"tool_calls": [{"name": "block", "id": "b1", "arguments": {}}]})
    agent = make(
        agents, srv, tools=[{"name": "block", "execute": block}], callbacks={"on_tool_result": results.append}
    )
    threading.Thread(target=lambda: entered.wait(30) and agent.stop()).start()  # stop mid-call
    try:
        with pytest.raises(AgentError):
            agent.send("go")
    finally:
        release.set()
    assert len(results) == 1 and results[0]["interrupted"] is True and results[0]["tool_call_id"] == "b1"
    assert results[0]["input"] == {} and results[0]["tool_name"] == "block"


def _pid_alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie counts as gone
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_agent_file_tool_processes(tmp_path: Path, srv: ModelServer) -> None:
    import gc

    (tmp_path / "proc.py").write_text(
        textwrap.dedent(
            """\
            import os, time

            from agentcore import tool


            @tool
            def pid(wait: float = 0) -> dict:
                \"\"\"Pid.\"\"\"
                start = time.time()
                time.sleep(wait)
                return {"pid": os.getpid(), "start": start}


            @tool
            def hang() -> str:
                \"\"\"Hang.\"\"\"
                time.sleep(60)
                return "never"
            """
        )
    )
    tools = agentcore.tools.scan(tmp_path)
    srv.add(
        {
            "tool_calls": [
                {"name": "pid", "id": "p1", "arguments": {"wait": 0.3}},
                {"name": "pid", "id": "p2", "arguments": {"wait": 0.3}},
            ]
        },
        "ok",
    )
    agent = Agent(
        config={
            "base_url": srv.base_url,
            "model": "m",
            "no_tool_rounds": 1,
            "max_tool_concurrency": 1,
            **FAST,
        },
        tools=tools,
    )
    agent.send("go")
    first, second = (r["output"]["value"] for r in tool_results(agent.history))
    assert abs(second["start"] - first["start"]) >= 0.25  # one process at a time
    # stop() kills a running tool process and returns once the run has ended.
    srv.add({"tool_calls": [{"name": "hang", "id": "h1", "arguments": {}}]})
    pids = {first["pid"], second["pid"]}

    def stop_once_hang_runs(target: Agent) -> None:
        # The call h1 is written (its round's tools start right after): stop mid-call.
        _wait_for(lambda: "h1" in json.dumps(target.history[-1:]), timeout=30)
        target.stop()

    stopper = threading.Thread(target=stop_once_hang_runs, args=(agent,))
    stopper.start()
    with pytest.raises(AgentError):
        _returns(functools.partial(agent.send, "hang"), 45)  # never the tool's 60 s sleep
    stopper.join(30)
    assert "interrupt" in tool_results(agent.history)[-1]["output"]["value"].lower()
    # Garbage collection closes the agent: its idle tool processes go away.
    del agent
    gc.collect()
    deadline = time.monotonic() + 30
    while any(_pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(_pid_alive(p) for p in pids)


def test_setting_running_cancel_stops_the_run(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"text": "slow", "delay": 60})  # the send must not wait for this stall
    agent = make(agents, srv)

    def cancel_later() -> None:
        _wait_for(lambda: agent.running is not None and srv.requests)
        running = agent.running
        if running is not None:
            running.cancel.set()

    threading.Thread(target=cancel_later).start()
    with pytest.raises(AgentError) as info:
        _returns(lambda: agent.send("hi"))
    assert info.value.kind == "aborted"


def test_stop_from_a_memory_tool(srv: ModelServer, agents: list[Agent]) -> None:
    returned: list[bool] = []
    release = threading.Event()

    def quit_now(input: dict[str, Any], ctx: ToolContext) -> str:
        returned.append(agent.stop())
        release.wait(60)  # the send must not wait for the tool that stopped it
        return "stopped"

    srv.add({"tool_calls": [{"name": "quit", "id": "q1", "arguments": {}}]}, "never")
    agent = make(agents, srv, tools=[{"name": "quit", "execute": quit_now}])
    try:
        with pytest.raises(AgentError) as info:
            _returns(lambda: agent.send("go"))
        assert not release.is_set()
        assert info.value.kind == "aborted" and returned == [True]
    finally:
        release.set()


def test_compact_stops_the_running_send(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"text": "slow", "delay": 60}, "SUMMARY")  # compact() must not wait for this stall
    agent = make(agents, srv)
    errors: list[AgentError] = []

    def send() -> None:
        try:
            agent.send("long task")
        except AgentError as error:
            errors.append(error)

    thread = threading.Thread(target=send)
    thread.start()
    _wait_for(lambda: len(srv.requests) == 1)
    assert _returns(agent.compact) == "SUMMARY"
    thread.join(30)
    assert not thread.is_alive()
    assert errors and errors[0].kind == "aborted"
    assert agent.history[-1] == {**agent.history[-1], "role": "compact", "content": "SUMMARY"}


# ================================================================ Fifth pass: precedence and learned state


def test_reason_precedence(srv: ModelServer, agents: list[Agent]) -> None:
    @tool
    def done() -> dict[str, Any]:
        """Done."""
        return {"stop": True, "output": "bye"}

    srv.add({"tool_calls": [{"name": "done", "id": "d1", "arguments": {}}]})
    assert make(agents, srv, tools=[done], max_steps=1).send("q").reason == "tool-stop"
    srv.add("plain")
    assert make(agents, srv, max_steps=1).send("q").reason == "finished"
    srv.add("plain")
    assert make(agents, srv, tools=[add], max_steps=1, no_tool_rounds=1).send("q").reason == "step-limit"


def test_max_steps_counts_replies_not_attempts(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add({"status": 500, "error": "e"}, {"tool_calls": [call()]}, {"overflow": True}, "SUM", "final")
    agent = make(agents, srv, tools=[add], max_steps=2, no_tool_rounds=1)
    result = agent.send("q")
    assert result.steps == 2 and result.text == "final" and result.reason == "step-limit"


def test_tool_calls_of_a_round_run_in_parallel(srv: ModelServer, agents: list[Agent]) -> None:
    together = threading.Barrier(4, timeout=30)

    def nap(input: dict[str, Any]) -> str:
        together.wait()  # passes only when all four calls run at the same time
        return "rested"

    calls = [{"name": "nap", "id": f"n{i}", "arguments": {}} for i in range(4)]
    srv.add({"tool_calls": calls}, "ok")
    agent = make(agents, srv, tools=[{"name": "nap", "execute": nap}], no_tool_rounds=1)
    agent.send("go")  # a broken barrier (calls not together) gives error results below
    assert [r["tool_call_id"] for r in tool_results(agent.history)] == ["n0", "n1", "n2", "n3"]
    assert [r["output"] for r in tool_results(agent.history)] == [{"type": "text", "value": "rested"}] * 4


def test_compaction_at_most_once_per_round(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("SUMMARY", "answer")
    agent = make(agents, srv, max_context_tokens=100, system="s" * 1000)
    assert agent.send("go").text == "answer"
    assert len(srv.requests) == 2


def test_token_ratio_learned_from_usage(srv: ModelServer, agents: list[Agent]) -> None:
    model = f"ratio-{time.monotonic_ns()}"
    srv.add({"text": "ok", "usage": {"input_tokens": 5000, "output_tokens": 1}}, "SUMMARY", "answer")
    agent = make(agents, srv, model=model, max_context_tokens=3000)
    agent.send("a" * 1500)
    assert len(srv.requests) == 1  # 1500 chars x 0.6 is under the threshold
    agent.send("next")
    assert len(srv.requests) == 3  # the learned ratio (clamped to 2) now puts it over
    assert any(m["role"] == "compact" for m in agent.history)


def test_file_part_filename_reaches_the_wire(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("read it")
    part = {"type": "file", "media_type": "application/pdf", "data": "JVBERi0xLjQ=", "filename": "report.pdf"}
    make(agents, srv).send([{"type": "text", "text": "summarise"}, part])
    assert "report.pdf" in json.dumps(srv.requests[0])


def test_same_file_names_in_two_folders(tmp_path: Path) -> None:
    for folder, name in (("one", "alpha"), ("two", "beta")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "common.py").write_text(tool_file(name, "", "str", repr(name)))
    tools = agentcore.tools.scan(tmp_path / "one", tmp_path / "two")
    assert sorted(tools) == ["alpha", "beta"]
    assert agentcore.tools.execute("beta", {}, tools)["output"]["value"] == "beta"


def test_compact_api_key_redacted(srv: ModelServer, agents: list[Agent]) -> None:
    other = "sk-compact-only-987654"
    srv.add({"status": 401, "error": f"key {other} is invalid"})
    agent = make(agents, srv, compact={"api_key": other}, retry=lambda e: False)
    agent.history.append(agentcore.history.user("hi"))
    with pytest.raises(AgentError) as info:
        agent.compact()
    assert other not in info.value.message and other not in (info.value.body or "")
    assert srv.log[-1].headers["authorization"] == f"Bearer {other}"
    assert other not in repr(agent.config)


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (400, "tools are not supported"),
        (422, "Unknown field: tool_choice"),
        (400, "functions are not allowed"),
    ],
)
def test_auto_mode_refusal_wordings(srv: ModelServer, agents: list[Agent], status: int, message: str) -> None:
    srv.add({"status": status, "error": message}, "plain answer")
    agent = make(
        agents, srv, tools=[add], tool_mode="auto", no_tool_rounds=1, model=f"refuse-{time.monotonic_ns()}"
    )
    assert agent.send("q").text == "plain answer"
    assert "tools" not in srv.requests[1]


@pytest.mark.parametrize("protocol", ["chat", "responses", "anthropic", "gemini"])
def test_stream_and_non_stream_give_the_same_result(srv: ModelServer, protocol: str) -> None:
    reply = {
        "text": "the answer",
        "tool_calls": [call(id="s1")],
        "usage": {"input_tokens": 40, "output_tokens": 6, "cache_read_tokens": 10},
    }
    results = []
    for stream in (True, False):
        srv.add(reply)
        results.append(
            agentcore.llm.chat(
                base_url=srv.base_url,
                model="m",
                messages=[{"role": "user", "content": "q"}],
                tools=agentcore.tools.load([add]),
                protocol=protocol,
                stream=stream,
            )
        )
    streamed, plain = results
    assert streamed.text == plain.text == "the answer"
    assert [(c.name, c.arguments) for c in streamed.tool_calls] == [
        (c.name, c.arguments) for c in plain.tool_calls
    ]
    assert streamed.usage == plain.usage and streamed.usage.input_tokens == 40
    assert streamed.usage.cache_read_tokens == 10
    assert streamed.finish_reason == plain.finish_reason == "tool_calls"


def test_tool_choice_mapping(srv: ModelServer) -> None:
    def body(protocol: str) -> Any:
        srv.add("ok")
        agentcore.llm.chat(
            base_url=srv.base_url,
            model="m",
            messages=[{"role": "user", "content": "q"}],
            tools=agentcore.tools.load([add]),
            protocol=protocol,
            provider={"tool_choice": "required"},
        )
        return srv.requests[-1]

    assert body("chat")["tool_choice"] == "required"
    assert body("responses")["tool_choice"] == "required"
    assert body("anthropic")["tool_choice"]["type"] == "any"
    assert body("gemini")["toolConfig"]["functionCallingConfig"]["mode"] == "ANY"


def test_per_call_callbacks_run_on_tool_threads(srv: ModelServer, agents: list[Agent]) -> None:
    threads: dict[str, threading.Thread] = {}
    nested: list[BaseException] = []

    def on_start() -> None:
        threads["run"] = threading.current_thread()

    def on_tool_call(payload: dict[str, Any]) -> None:
        threads["call"] = threading.current_thread()
        try:
            agent.send("nested from a tool thread")
        except BaseException as exc:
            nested.append(exc)

    srv.add({"tool_calls": [call()]}, "ok")
    agent = make(
        agents,
        srv,
        tools=[add],
        no_tool_rounds=1,
        callbacks={"on_start": on_start, "on_tool_call": on_tool_call},
    )
    agent.send("go")
    assert threads["call"] is not threads["run"]
    assert isinstance(nested[0], AgentError) and nested[0].kind == "request"


def test_per_call_callbacks_run_concurrently(srv: ModelServer, agents: list[Agent]) -> None:
    second_seen = threading.Event()
    waited: list[bool] = []

    def on_tool_call(payload: dict[str, Any]) -> None:
        if payload["tool_call_id"] == "c1":
            waited.append(second_seen.wait(30))  # only returns early if c2's callback runs meanwhile
        else:
            second_seen.set()

    srv.add({"tool_calls": [call(), call(id="c2")]}, "ok")
    agent = make(agents, srv, tools=[add], no_tool_rounds=1, callbacks={"on_tool_call": on_tool_call})
    agent.send("go")
    assert waited == [True]


@pytest.mark.parametrize("protocol", ["chat", "responses", "anthropic", "gemini"])
def test_text_tools_around_a_direct_llm_chat(srv: ModelServer, protocol: str) -> None:
    spec = agentcore.text_tools.prepare(agentcore.tools.load([add]))
    h = agentcore.history
    messages = [
        h.user("add"),
        h.assistant(tool_calls=[{"id": "c1", "name": "add", "arguments": {"a": 1, "b": 2}}]),
        h.tool("c1", "add", 3),
    ]
    srv.add('<tool_call>{"name": "add", "arguments": {"a": 3, "b": 4}}</tool_call>')
    reply = agentcore.llm.chat(
        base_url=srv.base_url,
        model="m",
        messages=agentcore.text_tools.wrap(messages, spec),
        system="SYS",
        protocol=protocol,
    )
    sent = json.dumps(srv.requests[-1])
    assert "SYS" in sent and "## add" in sent and "<tool_result" in sent
    assert "functionDeclarations" not in sent and '"tools"' not in sent
    found = agentcore.text_tools.read(reply.text, spec)
    assert [(c.name, c.arguments) for c in found.tool_calls] == [("add", {"a": 3, "b": 4})]


def test_default_cache_key_hashes_base_url_model_system(srv: ModelServer, agents: list[Agent]) -> None:
    srv.add("1", "2", "3", "4")
    agent = make(agents, srv, system="A")
    agent.send("x")
    agent.send("y")
    agent.send("z", config={"system": "B"})
    agent.send("w", config={"model": "other"})
    keys = [r["prompt_cache_key"] for r in srv.requests]
    assert keys[0] == keys[1] and len(set(keys[1:])) == 3


@pytest.mark.parametrize("protocol", ["chat", "anthropic"])
def test_cancel_mid_stream_keeps_text_and_complete_calls(
    srv: ModelServer, agents: list[Agent], protocol: str
) -> None:
    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "tool-call":
            agent.stop()  # inside the run: only sets the cancel event

    srv.add(
        {
            "text": "Checking both.",
            "tool_calls": [call(), call(id="c2", a=30, b=40)],
            "chunk_delay": 0.03,
            "chunk_size": 4,
        }
    )
    agent = make(agents, srv, protocol=protocol, tools=[add], callbacks={"on_llm_event": on_event})
    with pytest.raises(AgentError) as info:
        agent.send("go")
    assert info.value.kind == "aborted"
    roles = [m["role"] for m in agent.history]
    assert roles == ["user", "assistant", "tool"]
    parts = agent.history[1]["content"]
    assert parts[0] == {"type": "text", "text": "Checking both."}
    calls = [p for p in parts if p["type"] == "tool-call"]
    assert [c["tool_call_id"] for c in calls] == ["c1"] and calls[0]["input"] == {"a": 1, "b": 2}
    result = agent.history[2]["content"][0]
    assert result["tool_call_id"] == "c1" and "interrupt" in result["output"]["value"].lower()


def test_native_structured_output_per_protocol(srv: ModelServer, agents: list[Agent]) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    for protocol in ("responses", "gemini"):
        srv.add('{"n": 7}')
        agent = make(agents, srv, protocol=protocol, output=agentcore.output.object(schema))
        assert agent.send("q").output == {"n": 7}
    responses, gemini = srv.requests
    assert responses["text"]["format"]["type"] == "json_schema"
    assert responses["text"]["format"]["schema"] == schema
    assert gemini["generationConfig"]["responseMimeType"] == "application/json"
    assert gemini["generationConfig"]["responseJsonSchema"] == schema


@pytest.mark.parametrize("protocol", ["chat", "responses", "anthropic", "gemini"])
def test_history_is_plain_json_and_reloads(srv: ModelServer, protocol: str) -> None:
    srv.add(
        {"reasoning": "think", "text": "calling", "tool_calls": [call()]},
        {"reasoning": "more", "text": "3"},
        {"text": "again"},
    )
    config = {"base_url": srv.base_url, "model": "m", "protocol": protocol, "no_tool_rounds": 1, **FAST}
    with Agent(config=config, tools=[add]) as agent:
        agent.send("add")
        stored = json.dumps(agent.history)
    assert json.loads(stored) == agent.history  # no tuples, objects or NaN hiding in it
    with Agent(config=config, tools=[add], history=json.loads(stored)) as reloaded:
        assert reloaded.send("once more").text == "again"
    assert json.loads(stored)[-1]["usage"]["input_tokens"] >= 0


def test_retry_after_http_date(srv: ModelServer, agents: list[Agent]) -> None:
    retries: list[dict[str, Any]] = []
    srv.add(
        {"status": 503, "error": "later", "headers": {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}},
        "ok",
    )
    agent = make(agents, srv, retry_base_delay=3, retry_max_delay=10, callbacks={"on_retry": retries.append})
    assert agent.send("q").text == "ok"
    assert [r["delay"] for r in retries] == [0.0]  # a date in the past: no wait
