"""Sub-agents (API.md §Sub-agents): `agent.as_tool(...)`, isolation, cancel, usage, events."""

from __future__ import annotations

import json
import os
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import agentcore
from agentcore import Agent, AgentError, Usage
from agentcore.testing import ModelServer
from agentcore.testing.script import Recorded
from agentcore.usage import total

MODEL = "test-model"  # as conftest's agents; importing conftest is ambiguous beside tests/*/conftest.py
FAST_RETRY = {"retry_base_delay": 0.01, "retry_max_delay": 0.05}


def _agent(
    server: ModelServer, *, system: str = "", tools: Any = None, history: Any = None, **extra: Any
) -> Agent:
    config = {
        "base_url": server.base_url,
        "model": MODEL,
        "system": system,
        "no_tool_rounds": 1,
        **FAST_RETRY,
    }
    return Agent(config={**config, **extra}, tools=tools, history=history)


def _call(name: str, id: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "id": id, "arguments": arguments}


def _usage(i: int, o: int) -> dict[str, int]:
    return {"input_tokens": i, "output_tokens": o}


def _system_of(recorded: Recorded) -> str:
    messages = recorded.body.get("messages", [])
    return str(messages[0]["content"]) if messages and messages[0]["role"] == "system" else ""


def _tool_messages(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in history if m["role"] == "tool"]


def test_a_call_runs_a_copy_and_returns_its_text(server: ModelServer) -> None:
    priming = [{"role": "user", "content": "You work for ACME."}, {"role": "assistant", "content": "Noted."}]
    researcher = _agent(server, system="You research.", history=[dict(m) for m in priming])
    lead = _agent(server, tools=[researcher.as_tool("research", "Research a question")])
    server.add(
        {"tool_calls": [_call("research", "r1", task="Who wrote Dune?")], "usage": _usage(10, 2)},
        {"text": "Frank Herbert.", "usage": _usage(7, 3)},
        {"text": "It was Frank Herbert.", "usage": _usage(20, 5)},
    )
    with researcher, lead:
        result = lead.send("Ask the researcher.")
        assert result.text == "It was Frank Herbert."
        tool = _tool_messages(lead.history)[0]
        assert tool["content"][0]["output"] == {"type": "text", "value": "Frank Herbert."}
        # The child ran on a copy: priming history + the task, under its own system prompt.
        child_request = server.requests[1]
        assert child_request["messages"][0] == {"role": "system", "content": "You research."}
        assert [m["content"] for m in child_request["messages"][1:]] == [
            "You work for ACME.",
            "Noted.",
            "Who wrote Dune?",
        ]
        assert researcher.history == priming  # the template is never touched
        assert tool["sub_agent_usage"] == Usage(7, 3, 10).to_dict()
        # SendResult.usage is the lead's own replies; total() adds what was delegated.
        assert result.usage == Usage(30, 7, 37)
        assert total(lead.history) == Usage(37, 10, 47)
        assert agentcore.usage.total(lead.history) == total(lead.history)


def test_default_schema_and_custom_input(server: ModelServer) -> None:
    researcher = _agent(server)
    record = researcher.as_tool("research", "Research")
    assert record["input_schema"]["required"] == ["task"]
    assert record["input_schema"]["properties"]["task"]["type"] == "string"
    schema = {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]}
    lead = _agent(server, tools=[researcher.as_tool("study", "Study a topic", input_schema=schema)])
    server.add({"tool_calls": [_call("study", "s1", topic="owls")]}, "Owls hunt at night.", "done")
    with researcher, lead:
        assert lead.tools.schema["study"]["input_schema"] == schema
        lead.send("go")
        # Without a `task` string, the child gets the whole arguments as JSON.
        assert server.requests[1]["messages"][-1]["content"] == json.dumps({"topic": "owls"})


def test_structured_output(server: ModelServer) -> None:
    spec = agentcore.output.object(
        {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    )
    solver = _agent(server)
    lead = _agent(server, tools=[solver.as_tool("solve", "Solve", output=spec)])
    server.add({"tool_calls": [_call("solve", "s1", task="2+3")]}, '{"answer": 5}', "five")
    with solver, lead:
        lead.send("go")
        output = _tool_messages(lead.history)[0]["content"][0]["output"]
        assert output == {"type": "json", "value": {"answer": 5}}


def test_bad_arguments_are_config_errors(server: ModelServer) -> None:
    with _agent(server) as agent:
        with pytest.raises(AgentError) as caught:
            agent.as_tool("", "x")
        assert caught.value.kind == "config"
        with pytest.raises(AgentError) as caught:
            agent.as_tool("x", "y", output="not a spec")
        assert caught.value.kind == "config"


def test_parallel_calls_run_in_their_own_copies(server: ModelServer) -> None:
    # Both children block until both have started: proves they run concurrently, and the
    # replies are chosen by the task each request carries (arrival order does not matter).
    both_started = threading.Barrier(2, timeout=60)  # a bound for a broken run, never a delay

    def child_reply(recorded: Recorded) -> dict[str, Any]:
        last = recorded.body["messages"][-1]
        if last["role"] == "user":
            both_started.wait()
            return {"text": f"answer to {last['content']}", "usage": _usage(5, 1)}
        return {"text": "unexpected"}

    researcher = _agent(server, system="You research.")
    lead = _agent(server, tools=[researcher.as_tool("research", "Research")])
    server.add(
        {"tool_calls": [_call("research", "a", task="apples"), _call("research", "b", task="pears")]},
        child_reply,
        child_reply,
        "both done",
    )
    with researcher, lead:
        lead.send("compare")
        outputs = [p["output"]["value"] for p in _tool_messages(lead.history)[0]["content"]]
        assert outputs == ["answer to apples", "answer to pears"]
        children = [r for r in server.requests if r["messages"][0]["content"] == "You research."]
        assert sorted(len(r["messages"]) for r in children) == [2, 2]  # system + its own task only
        assert {r["messages"][1]["content"] for r in children} == {"apples", "pears"}
        assert _tool_messages(lead.history)[0]["sub_agent_usage"] == Usage(10, 2, 12).to_dict()
        assert researcher.history == []


def test_nested_two_levels_usage_and_events(server: ModelServer) -> None:
    checker = _agent(server, system="You check facts.")
    researcher = _agent(server, system="You research.", tools=[checker.as_tool("check", "Check a fact")])
    lead = _agent(server, system="You lead.", tools=[researcher.as_tool("research", "Research")])
    server.add(
        {"tool_calls": [_call("research", "r1", task="Dune author?")], "usage": _usage(100, 10)},
        {"tool_calls": [_call("check", "c1", task="Herbert wrote Dune?")], "usage": _usage(50, 5)},
        {"text": "Confirmed.", "usage": _usage(20, 2)},
        {"text": "Frank Herbert (checked).", "usage": _usage(60, 6)},
        {"text": "Frank Herbert.", "usage": _usage(120, 12)},
    )
    heard: list[dict[str, Any]] = []
    lead.subscribe(heard.append)
    with checker, researcher, lead:
        with lead.stream("Who wrote Dune?") as run:
            streamed = list(run)
        assert run.result is not None and run.result.text == "Frank Herbert."
        for event in streamed:
            json.dumps(event)
        assert streamed == heard  # listeners and the stream hear the same sub-agent events
        lead_tool = _tool_messages(lead.history)[0]
        # The researcher's two replies plus the fact-checker's one.
        assert lead_tool["sub_agent_usage"] == Usage(130, 13, 143).to_dict()
        assert total(lead.history) == Usage(350, 35, 385)

        subs = [e for e in streamed if e["type"] == "sub_agent"]
        assert {e["tool_call_id"] for e in subs} == {"r1"} and {e["tool_name"] for e in subs} == {"research"}
        inner = [e["event"] for e in subs]
        assert inner[0]["type"] == "agent_start" and inner[-1]["type"] == "agent_end"
        assert inner[-1]["text"] == "Frank Herbert (checked)."
        grandchild = [e["event"] for e in inner if e["type"] == "sub_agent"]
        assert grandchild and {e["tool_call_id"] for e in inner if e["type"] == "sub_agent"} == {"c1"}
        assert grandchild[0]["type"] == "agent_start" and grandchild[-1]["type"] == "agent_end"
        assert grandchild[-1]["text"] == "Confirmed."
        # The child's own tool message carries the grandchild's usage.
        end = inner[-1]
        assert end["usage"] == Usage(110, 11, 121).to_dict()  # the researcher's own replies
        # Sub-agent events arrive while the lead's call runs, before its tool_execution_end.
        types = [e["type"] for e in streamed]
        assert types.index("sub_agent") > types.index("tool_execution_start")
        assert max(i for i, t in enumerate(types) if t == "sub_agent") < types.index("tool_execution_end")


def test_a_failing_child_gives_an_error_result(server: ModelServer) -> None:
    researcher = _agent(server, retry={"skip_codes": [400]})
    lead = _agent(server, tools=[researcher.as_tool("research", "Research")])
    server.add(
        {"tool_calls": [_call("research", "r1", task="x")]},
        {"status": 400, "error": "bad request for the child"},
        "the researcher failed",
    )
    with researcher, lead:
        assert lead.send("go").text == "the researcher failed"
        result = _tool_messages(lead.history)[0]["content"][0]["output"]["value"]
        assert "bad request for the child" in result


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie counts as gone
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_stopping_the_parent_stops_the_child_and_kills_its_tool_process(
    server: ModelServer, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "hang.py").write_text(
        textwrap.dedent(
            f"""\
            import os, time

            from agentcore import tool


            @tool
            def hang() -> str:
                \"\"\"Hang.\"\"\"
                with open({str(pid_file)!r} + ".tmp", "w") as f:
                    f.write(str(os.getpid()))
                os.replace({str(pid_file)!r} + ".tmp", {str(pid_file)!r})
                time.sleep(120)
                return "never"
            """
        )
    )
    worker = _agent(server, tools=agentcore.tools.scan(tmp_path / "tools"))
    lead = _agent(server, tools=[worker.as_tool("work", "Work")])
    server.add({"tool_calls": [_call("work", "w1", task="hang")]}, {"tool_calls": [_call("hang", "h1")]})
    started = threading.Event()

    def on_event(event: dict[str, Any]) -> None:
        inner = event.get("event", {})
        if event["type"] == "sub_agent" and inner.get("type") == "tool_execution_start":
            started.set()

    lead.subscribe(on_event)
    with worker, lead:
        run = lead.stream("go")
        assert started.wait(30)
        deadline = time.monotonic() + 30
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.01)  # waiting for the tool process to write its pid (a condition, not a delay)
        pid = int(pid_file.read_text())
        assert _pid_alive(pid)
        assert lead.stop() is True
        assert not _pid_alive(pid)  # gone once the parent's stop() returned
        with pytest.raises(AgentError) as caught:
            run.wait()
        assert caught.value.kind == "aborted"
        assert _tool_messages(lead.history)[-1]["content"][0]["output"]["value"]


def test_usage_total_sums_replies_and_delegated_usage() -> None:
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "x", "usage": Usage(3, 1, 4).to_dict()},
        {"role": "tool", "content": [], "sub_agent_usage": Usage(10, 2, 12, 1, 0).to_dict()},
        {"role": "compact", "content": "summary", "usage": Usage(5, 5, 10).to_dict()},
    ]
    assert total(history) == Usage(18, 8, 26, 1, 0)
    assert total([]) == Usage()


def test_the_copy_keeps_the_agents_hooks_and_callbacks(server: ModelServer) -> None:
    seen: list[str] = []

    @agentcore.tool
    def rm(path: str) -> str:
        """Remove a file."""
        return f"removed {path}"

    researcher = Agent(
        config={"base_url": server.base_url, "model": MODEL, "no_tool_rounds": 1, **FAST_RETRY},
        tools=[rm],
        hooks={"before_tool_call": lambda call: {"block": "read-only"}},
        callbacks={"on_tool_result": lambda payload: seen.append(payload["tool_name"])},
    )
    lead = _agent(server, tools=[researcher.as_tool("research", "Research")])
    server.add(
        {"tool_calls": [_call("research", "r1", task="clean up")]},
        {"tool_calls": [_call("rm", "x1", path="/tmp/a")]},
        "could not",
        "done",
    )
    with researcher, lead:
        lead.send("go")
        child_tool = server.requests[2]["messages"][-1]
        assert child_tool["role"] == "tool" and "read-only" in child_tool["content"]
        assert seen == ["rm"]
