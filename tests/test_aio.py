"""Async callers (API.md §Async callers): asend / aresume / astream never block the event loop."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from event_checks import check_order

from agentcore import Agent, AgentError, ToolContext
from agentcore.testing import ModelServer

PACKAGE = Path(__file__).resolve().parents[1] / "agentcore"


def make(server: ModelServer, **config: Any) -> Agent:
    tools = config.pop("tools", None)
    return Agent(config={"base_url": server.base_url, "model": "m", **config}, tools=tools)


def test_asend_aresume_and_astream(server: ModelServer) -> None:
    server.add("first", "second", {"text": "third reply", "chunk_size": 3})

    async def main() -> tuple[Any, Any, list[dict[str, Any]]]:
        with make(server) as agent:
            first = await agent.asend("hello")
            agent.history.append({"role": "assistant", "content": [{"type": "text", "text": "more?"}]})
            second = await agent.aresume()
            events = [event async for event in agent.astream("again")]
            return first, second, events

    first, second, events = asyncio.run(main())
    assert (first.text, second.text) == ("first", "second")
    assert check_order(events) == []
    assert events[-1]["text"] == "third reply"


def test_async_errors_are_raised_like_send(server: ModelServer) -> None:
    server.add({"status": 400, "error": "bad"}, {"status": 400, "error": "bad"})

    async def main() -> list[BaseException]:
        caught: list[BaseException] = []
        with make(server, retry=lambda e: False) as agent:
            with pytest.raises(AgentError) as bad_input:
                await agent.asend("  ")
            caught.append(bad_input.value)
            assert agent.history == []
            try:
                await agent.asend("hi")
            except AgentError as error:
                caught.append(error)
            events: list[dict[str, Any]] = []
            try:
                async for event in agent.astream("hi"):
                    events.append(event)
            except AgentError as error:
                caught.append(error)
            assert events[-1]["type"] == "agent_end" and events[-1]["error"]["kind"] == "request"
        return caught

    kinds = [e.kind for e in asyncio.run(main())]  # type: ignore[attr-defined]
    assert kinds == ["request", "request", "request"]


AGENTS = 20
HOLD_S = 60.0  # a phase the loop never opens fails the test after this instead of hanging it
JOIN_S = 30.0


class Gate:
    """Holds the AGENTS runs in one phase until the event loop, having seen them all there, opens it.

    `arrive()` runs inside the phase (a server handler, a tool); `open_when_all_in()` on the loop.
    The phase can only end through the loop, so runs that got past it prove the loop kept running
    while all of them were in flight at once. A loop blocked by a run never opens the gate.
    """

    def __init__(self) -> None:
        self.all_in = threading.Barrier(AGENTS + 1, timeout=HOLD_S)
        self.opened = threading.Event()
        self.released: list[bool] = []

    def arrive(self) -> None:
        self.all_in.wait()
        self.released.append(self.opened.wait(HOLD_S))

    async def open_when_all_in(self) -> None:
        await asyncio.to_thread(self.all_in.wait)
        self.opened.set()


def test_twenty_agents_run_concurrently_without_blocking_the_loop() -> None:
    """20 agents run at once (a streamed tool round each) while the event loop goes on running:
    twice — with all 20 model requests waiting for their reply, then with all 20 tools running —
    the runs can only go on once a coroutine on the loop lets them."""
    requesting, in_tools = Gate(), Gate()

    def reply(recorded: Any) -> dict[str, Any]:
        if len(recorded.body["messages"]) == 1:  # a conversation's first request: call the tool
            requesting.arrive()
            return {"tool_calls": [{"name": "work", "arguments": {}}], "chunk_size": 16}
        return {"text": "all done " * 10, "chunk_size": 16}

    def work(input: dict[str, Any], ctx: ToolContext) -> str:
        in_tools.arrive()
        return "tool done"

    tools = [{"name": "work", "description": "Work.", "input_schema": {}, "execute": work}]
    with ModelServer(default=reply) as server:
        # Not retried: a broken gate (a blocked loop) fails the runs instead of looping.
        config = {"base_url": server.base_url, "model": "m", "no_tool_rounds": 1, "retry": lambda e: False}
        agents = [Agent(config=config, tools=tools) for _ in range(AGENTS)]

        async def main() -> list[Any]:
            runs = asyncio.gather(*(agent.asend(f"task {i}") for i, agent in enumerate(agents)))
            await requesting.open_when_all_in()
            await in_tools.open_when_all_in()
            return list(await asyncio.wait_for(runs, JOIN_S))

        results = asyncio.run(main())
        for agent in agents:
            agent.close()
    assert [r.text for r in results] == ["all done " * 10] * AGENTS
    assert all(r.steps == 2 for r in results)
    assert requesting.released == [True] * AGENTS
    assert in_tools.released == [True] * AGENTS


def test_cancelling_the_awaiting_task_stops_the_run(server: ModelServer) -> None:
    started = threading.Event()
    released = threading.Event()

    def hang(input: dict[str, Any], ctx: ToolContext) -> str:
        started.set()
        if ctx.cancel.wait(HOLD_S):  # only the task's cancellation ends the tool
            released.set()
        return "late"

    tools = [{"name": "hang", "description": "Hang.", "input_schema": {"type": "object"}, "execute": hang}]
    server.add({"tool_calls": [{"name": "hang", "arguments": {}}]})
    agent = make(server, tools=tools)

    async def main() -> None:
        other = make(server)
        server.add("the other agent is unaffected")
        task = asyncio.create_task(agent.asend("go"))
        while not started.is_set():
            await asyncio.sleep(0.005)
        assert agent.running is not None
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert agent.running is None  # like stop(): the run has ended when the task is done
        assert (await other.asend("hi")).text == "the other agent is unaffected"
        other.close()

    asyncio.run(main())
    assert released.wait(JOIN_S)
    tool_message = agent.history[-1]
    assert tool_message["role"] == "tool"
    assert "interrupted" in tool_message["content"][0]["output"]["value"].lower()
    agent.close()


def test_breaking_out_of_astream_stops_the_run(server: ModelServer) -> None:
    # The stream stalls forever after 10 chunks: only closing the iterator can end the run.
    server.add({"text": "word " * 200, "chunk_size": 5, "stall_after": 10})

    async def main() -> Agent:
        agent = make(server)
        stream = agent.astream("talk")
        async for event in stream:
            if event["type"] == "message_update":
                break
        await stream.aclose()  # type: ignore[attr-defined]
        return agent

    agent = asyncio.run(main())
    running = agent.running
    if running is not None:
        assert running.done.wait(JOIN_S)
    assert agent.history[-1]["role"] == "assistant"
    assert len(agent.history[-1]["content"][0]["text"]) < len("word " * 200)
    agent.close()


def test_no_module_but_aio_imports_asyncio() -> None:
    """Statically: no other module of the package imports asyncio (mcp.py may, for its SDK)."""
    for path in PACKAGE.rglob("*.py"):
        # Tool processes may run async tools (API.md): the worker is not the agent's process.
        if path.name in ("aio.py", "mcp.py", "worker.py"):
            continue
        text = path.read_text()
        assert "import asyncio" not in text and "from asyncio" not in text, path


SCRIPT = textwrap.dedent(
    """
    import sys
    from agentcore import Agent, tool
    from agentcore.testing import ModelServer

    @tool
    def add(a: int, b: int) -> int:
        '''Add.'''
        return a + b

    script = [{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}, "3", "4", "summary"]
    with ModelServer(script) as server:
        agent = Agent(config={"base_url": server.base_url, "model": "m", "no_tool_rounds": 1}, tools=[add])
        agent.subscribe(lambda event: None)
        agent.send("add")
        list(agent.stream("again"))
        agent.compact()
        agent.close()
    loaded = sorted(name for name in sys.modules if name == "asyncio" or name.startswith("asyncio."))
    print("LOADED", loaded)
    """
)


def test_asyncio_is_not_loaded_by_a_run_in_a_fresh_process() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "LOADED []" in out.stdout, out.stdout
