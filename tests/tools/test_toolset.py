"""ToolSet, adopt, load, merge, pick, omit: schema and handlers always move together."""

from __future__ import annotations

import dataclasses
import importlib.util
import threading
from pathlib import Path
from typing import Any

import pytest

from agentcore.errors import AgentError
from agentcore.tools import ToolContext, ToolSet, adopt, execute, load, merge, omit, pick, tool
from agentcore.tools.handlers import MemoryTool

SCHEMA = {"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]}


def double(input: dict[str, Any]) -> Any:
    return input["a"] * 2


def _dict_tool(name: str, result: Any = "ok", **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": f"{name} tool", "execute": lambda input: result, **extra}


@tool
def greet(who: str) -> str:
    """Say hello."""
    return f"hello {who}"


class McpTool:
    """Shaped like an MCP client's tool: inputSchema and call(arguments)."""

    def __init__(self, name: str, result: Any) -> None:
        self.name = name
        self.description = f"{name} over MCP"
        self.inputSchema = {"type": "object", "properties": {"q": {"type": "string"}}}
        self.result = result
        self.calls: list[dict[str, Any]] = []

    def call(self, arguments: dict[str, Any]) -> Any:
        self.calls.append(arguments)
        return self.result


def test_dict_tool_schema_entry_and_handler_are_separate() -> None:
    def to_block(output: Any, input: Any) -> dict[str, Any]:
        return {"type": "text", "value": str(output)}

    tools = adopt(
        {
            "name": "double",
            "description": "Double a number",
            "input_schema": SCHEMA,
            "execute": double,
            "timeout": 3,
            "to_model_output": to_block,
            "touches_files": ["path"],
        }
    )
    assert tools.schema["double"] == {
        "name": "double",
        "description": "Double a number",
        "input_schema": SCHEMA,
        "touches_files": ["path"],
        "source": "memory",
    }
    handler = tools.handlers["double"]
    assert handler == MemoryTool(
        name="double", execute=double, takes_context=False, timeout=3.0, to_model_output=to_block
    )


def test_schema_is_a_copy_of_the_users_dict() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    tools = adopt({"name": "t", "input_schema": schema, "execute": double})
    schema["properties"]["x"] = {}
    assert tools.schema["t"]["input_schema"] == {"type": "object", "properties": {}}


def test_missing_input_schema_and_description_get_defaults_and_inputschema_alias_works() -> None:
    tools = adopt(
        [{"name": "bare", "execute": double}, {"name": "camel", "inputSchema": SCHEMA, "execute": double}]
    )
    assert tools.schema["bare"]["input_schema"] == {"type": "object", "properties": {}}
    assert tools.schema["bare"]["description"] == ""
    assert tools.schema["camel"]["input_schema"] == SCHEMA
    assert "inputSchema" not in tools.schema["camel"]


def test_function_tool_is_adopted_with_context() -> None:
    tools = adopt([greet])
    assert tools.schema["greet"] == {
        "name": "greet",
        "description": "Say hello.",
        "input_schema": greet.input_schema,
        "source": "memory",
    }
    handler = tools.handlers["greet"]
    assert isinstance(handler, MemoryTool) and handler.takes_context
    assert execute("greet", {"who": "ann"}, tools)["output"] == {"type": "text", "value": "hello ann"}


def test_execute_taking_two_positional_parameters_gets_the_context() -> None:
    seen: list[Any] = []

    def with_ctx(input: dict[str, Any], ctx: ToolContext) -> str:
        seen.append(ctx)
        return "ok"

    tools = adopt({"name": "c", "execute": with_ctx})
    assert tools.handlers["c"].takes_context  # type: ignore[union-attr]
    assert execute("c", {}, tools)["output"]["value"] == "ok"
    assert isinstance(seen[0], ToolContext) and seen[0].tool_name == "c"
    assert isinstance(seen[0].cancel, threading.Event)
    assert not adopt({"name": "d", "execute": double}).handlers["d"].takes_context  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("item", "words"),
    [
        ({"description": "x", "execute": double}, "has no name"),
        ({"name": "", "execute": double}, "has no name"),
        ({"name": "t"}, "'t' has no callable execute"),
        ({"name": "t", "execute": "double"}, "'t' has no callable execute"),
        ({"name": "t", "execute": double, "input_schema": "object"}, "'t': input_schema must be a dict"),
        ({"name": "t", "execute": double, "input_schema": ["a"]}, "'t': input_schema must be a dict"),
        ({"name": "t", "execute": double, "description": 5}, "'t': description must be a str"),
        ({"name": "t", "execute": double, "timeout": -1}, "'t': timeout"),
        ({"name": "t", "execute": double, "to_model_output": 1}, "'t': to_model_output must be callable"),
    ],
)
def test_invalid_tools_raise_config_errors_naming_tool_and_problem(item: dict[str, Any], words: str) -> None:
    with pytest.raises(AgentError) as info:
        adopt([item])
    assert info.value.kind == "config"
    assert words in str(info.value)


def test_plain_function_and_folder_are_not_tools() -> None:
    with pytest.raises(AgentError, match="decorate it with @tool"):
        adopt([double])
    with pytest.raises(AgentError, match="load"):
        adopt("./tools")


def test_record_key_names_a_tool_without_a_name() -> None:
    tools = adopt(
        {
            "shout": {"description": "loud", "execute": lambda input: "HEY"},
            "other_key": _dict_tool("own_name"),
            "wrapped": greet,
        }
    )
    assert list(tools) == ["shout", "own_name", "greet"]
    assert tools.schema["shout"]["description"] == "loud"


def test_record_whose_key_is_execute_is_still_a_record() -> None:
    tools = adopt({"execute": {"description": "runs", "execute": lambda input: 1}})
    assert list(tools) == ["execute"]


def test_two_tools_of_one_name_in_one_adopt_list_are_a_config_error() -> None:
    """API.md §Details "Names and shapes rejected early" (was: the later one won, silently)."""
    with pytest.raises(AgentError) as caught:
        adopt([_dict_tool("t", "first"), _dict_tool("t", "second")])
    assert caught.value.kind == "config"
    assert "two tools named 't'" in str(caught.value) and "item 0" in str(caught.value)
    assert "item 1" in str(caught.value)


def test_mcp_style_object() -> None:
    mcp = McpTool("search", {"content": [{"type": "text", "text": "found"}], "isError": False})
    tools = adopt([mcp])
    assert tools.schema["search"] == {
        "name": "search",
        "description": "search over MCP",
        "input_schema": mcp.inputSchema,
        "source": "memory",
    }
    assert execute("search", {"q": "x"}, tools)["output"] == {"type": "text", "value": "found"}
    assert mcp.calls == [{"q": "x"}]


def test_mcp_results_with_images_errors_and_plain_values() -> None:
    image = {
        "content": [
            {"type": "text", "text": "see"},
            {"type": "image", "data": "iVBO", "mimeType": "image/png"},
        ]
    }
    out = execute("m", {}, adopt(McpTool("m", image)))["output"]
    assert out == {
        "type": "content",
        "value": [
            {"type": "text", "text": "see"},
            {"type": "image", "image": "iVBO", "media_type": "image/png"},
        ],
    }
    failed = execute(
        "m", {}, adopt(McpTool("m", {"content": [{"type": "text", "text": "no db"}], "isError": True}))
    )
    assert failed["output"] == {"type": "error-text", "value": "no db"} and failed["error"] == "no db"
    assert execute("m", {}, adopt(McpTool("m", {"rows": 2})))["output"] == {
        "type": "json",
        "value": {"rows": 2},
    }


def test_mcp_result_objects_are_read_by_attribute() -> None:
    @dataclasses.dataclass
    class Text:
        text: str
        type: str = "text"

    @dataclasses.dataclass
    class Result:
        content: list[Any]
        isError: bool = False

    out = execute("m", {}, adopt(McpTool("m", Result([Text("a"), Text("b")]))))["output"]
    assert out == {"type": "text", "value": "a\nb"}


def test_object_with_input_schema_attribute_and_execute() -> None:
    class Custom:
        name = "custom"
        description = "custom tool"
        input_schema = SCHEMA

        def execute(self, input: dict[str, Any]) -> Any:
            return input["a"] + 1

    tools = adopt(Custom())
    assert tools.schema["custom"]["input_schema"] == SCHEMA
    assert execute("custom", {"a": 1}, tools)["output"]["value"] == 2


def test_toolset_protocol_and_frozen() -> None:
    tools = adopt([greet, _dict_tool("b")])
    assert "greet" in tools and "missing" not in tools
    assert list(tools) == ["greet", "b"] and len(tools) == 2
    assert repr(tools) == "ToolSet(['greet', 'b'])"
    with pytest.raises(dataclasses.FrozenInstanceError):
        tools.schema = {}  # type: ignore[misc]
    assert len(ToolSet()) == 0 and not ToolSet()


def test_toolset_rejects_mismatched_schema_and_handlers() -> None:
    with pytest.raises(AgentError, match="same names"):
        ToolSet({"a": {}}, {})


def test_adopt_none_and_toolset() -> None:
    tools = adopt([greet])
    assert adopt(tools) is tools
    assert len(adopt(None)) == 0


def test_merge_later_wins_and_none_is_safe() -> None:
    first = adopt([_dict_tool("a", 1), _dict_tool("b", 1)])
    second = adopt([_dict_tool("b", 2), _dict_tool("c", 2)])
    merged = merge(first, None, second)
    assert set(merged) == {"a", "b", "c"}
    assert execute("b", {}, merged)["output"]["value"] == 2
    assert execute("b", {}, merge(second, first))["output"]["value"] == 1
    assert len(merge()) == 0
    assert set(first) == {"a", "b"}, "inputs are not changed"


def test_pick_and_omit_filter_schema_and_handlers_together() -> None:
    tools = adopt([_dict_tool("read"), _dict_tool("write"), _dict_tool("shell")])
    readonly = pick(tools, ["read", "missing"])
    assert list(readonly.schema) == list(readonly.handlers) == ["read"]
    safe = omit(tools, ["shell", "write"])
    assert list(safe.schema) == list(safe.handlers) == ["read"]
    assert list(pick(tools, "write")) == ["write"]
    assert len(pick(None, ["read"])) == 0 and len(omit(None, ["read"])) == 0
    assert len(pick(tools, None)) == 0 and len(omit(tools, None)) == 3
    assert len(pick(ToolSet(), ["read"])) == 0
    assert len(tools) == 3, "the original set is unchanged"


def test_load_mixes_sources_and_later_wins() -> None:
    base = adopt([_dict_tool("a", "base"), _dict_tool("b", "base")])
    tools = load(
        base,
        [_dict_tool("b", "list"), greet],
        {"c": {"execute": lambda input: "record"}},
        _dict_tool("a", "single"),
        None,
        [[_dict_tool("d", "nested")]],
    )
    assert set(tools) == {"a", "b", "greet", "c", "d"}
    assert execute("a", {}, tools)["output"]["value"] == "single"
    assert execute("b", {}, tools)["output"]["value"] == "list"
    assert execute("c", {}, tools)["output"]["value"] == "record"
    assert execute("d", {}, tools)["output"]["value"] == "nested"
    assert len(load()) == 0


def test_load_hands_folders_to_scan(tmp_path: Path) -> None:
    (tmp_path / "echo.py").write_text(
        "def _run(input):\n    return input\n\n"
        "echo = {'name': 'echo', 'description': 'Echo', 'execute': _run}\n"
    )
    if importlib.util.find_spec("agentcore.tools.scan") is None:
        with pytest.raises(AgentError) as info:
            load(str(tmp_path))
        assert info.value.kind == "tool" and "file tools are not available" in str(info.value)
        return
    tools = load(tmp_path, [greet])
    assert set(tools) == {"echo", "greet"}
    assert tools.schema["echo"]["source"] == "file"
    assert tools.schema["greet"]["source"] == "memory"
