"""API.md §Tools and Details §Tools: the decorator, return values, execute, ToolSet.

Fixtures and the contract's conventions: tests/contract/conftest.py.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import enum
import math
import re
import threading
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, Literal, Optional

import pytest
from api_helpers import add, make, tool_results
from background import returns_within as _returns

import agentcore
from agentcore import Agent, ToolContext, tool
from agentcore.testing import ModelServer


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
