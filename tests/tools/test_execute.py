"""run_call / execute: validation, memory-tool threads, streaming, timeout, cancel, limits."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from background import returns_within

from agentcore._utils.cancel import Signal
from agentcore.protocols.base import ToolCall
from agentcore.tools import ToolContext, adopt, execute, tool
from agentcore.tools.execute import _validator, run_call
from agentcore.tools.handlers import FileTool
from agentcore.tools.toolset import ToolSet

NUMBER_SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


class Outputs:
    """Collects on_output payloads from any thread."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, payload: dict[str, Any]) -> None:
        with self.lock:
            self.items.append(payload)


def _run(tools: ToolSet, name: str, arguments: dict[str, Any], **options: Any) -> dict[str, Any]:
    options.setdefault("cancel", Signal())
    options.setdefault("on_output", None)
    options.setdefault("limit", None)
    options.setdefault("agent_id", "agent-1")
    return run_call(tools, ToolCall("call_1", name, arguments), **options)


# ---------------------------------------------------------------- calls that never run


def test_unknown_tool_is_an_invalid_call_listing_the_tools() -> None:
    tools = adopt(
        [{"name": "read", "execute": lambda input: 1}, {"name": "write", "execute": lambda input: 1}]
    )
    result = _run(tools, "raed", {})
    assert result["output"]["type"] == "error-text"
    assert "'raed'" in result["output"]["value"] and "read, write" in result["output"]["value"]
    assert result["error"]


def test_raw_arguments_are_quoted_and_the_tool_does_not_run() -> None:
    ran: list[Any] = []
    tools = adopt({"name": "read", "execute": ran.append})
    call = ToolCall("call_1", "read", {}, raw_arguments='{"path": "a.json",')
    result = run_call(tools, call, cancel=Signal(), on_output=None, limit=None, agent_id="")
    assert '{"path": "a.json",' in result["output"]["value"]
    assert result["output"]["type"] == "error-text" and ran == []


def test_invalid_input_names_the_path_and_the_tool_does_not_run() -> None:
    ran: list[Any] = []
    tools = adopt({"name": "add", "input_schema": NUMBER_SCHEMA, "execute": ran.append})
    result = _run(tools, "add", {"a": "x"})
    assert "input.a: 'x' is not of type 'integer'" in result["output"]["value"]
    assert "'add'" in result["output"]["value"] and result["error"]
    missing = _run(tools, "add", {})
    assert "input: missing required 'a'" in missing["output"]["value"]
    assert ran == []


def test_nested_paths_are_named() -> None:
    schema = {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "integer"}}}}
    tools = adopt({"name": "t", "input_schema": schema, "execute": lambda input: 1})
    assert (
        "input.items[1]: 'y' is not of type 'integer'"
        in _run(tools, "t", {"items": [1, "y"]})["output"]["value"]
    )


def test_invalid_input_schema_is_reported_not_raised() -> None:
    tools = adopt({"name": "t", "input_schema": {"type": "objekt"}, "execute": lambda input: 1})
    result = _run(tools, "t", {})
    assert result["output"]["type"] == "error-text" and "input_schema is invalid" in result["output"]["value"]


def test_validator_is_cached_per_schema_object() -> None:
    schema = {"type": "object"}
    assert _validator(schema) is _validator(schema)


def test_cancel_already_set_does_not_start_the_tool() -> None:
    ran: list[Any] = []
    cancel = Signal()
    cancel.set()
    result = _run(adopt({"name": "t", "execute": ran.append}), "t", {}, cancel=cancel)
    assert result["interrupted"] is True and ran == []


# ---------------------------------------------------------------- memory tools


def test_memory_tool_runs_on_another_thread_with_its_context() -> None:
    seen: dict[str, Any] = {}

    @tool
    def who(ctx: ToolContext) -> str:
        seen["ctx"] = ctx
        seen["thread"] = threading.current_thread()
        return "me"

    result = _run(adopt(who), "who", {})
    assert result == {"output": {"type": "text", "value": "me"}}
    ctx = seen["ctx"]
    assert (ctx.tool_call_id, ctx.tool_name, ctx.agent_id) == ("call_1", "who", "agent-1")
    assert isinstance(ctx.cancel, threading.Event) and not ctx.cancel.is_set()
    assert seen["thread"] is not threading.current_thread() and seen["thread"].daemon


def test_exception_becomes_an_error_result() -> None:
    @tool
    def fail() -> None:
        raise ValueError("boom")

    result = _run(adopt(fail), "fail", {})
    assert result["output"]["type"] == "error-text"
    assert result["output"]["value"].startswith("ValueError: boom")
    assert result["error"] == "ValueError: boom"


def test_async_execute_is_an_error_not_a_hang() -> None:
    async def fetch(input: dict[str, Any]) -> str:
        return "never"

    result = _run(adopt({"name": "fetch", "execute": fetch}), "fetch", {})
    assert result["output"]["type"] == "error-text" and "async" in result["output"]["value"]


def test_stop_result_passes_through() -> None:
    tools = adopt({"name": "finish", "execute": lambda input: {"stop": True, "output": "done"}})
    assert _run(tools, "finish", {}) == {"output": {"type": "text", "value": "done"}, "stop": True}


def test_to_model_output_is_used_and_its_errors_caught() -> None:
    def to_block(output: Any, input: Any) -> dict[str, Any]:
        return {"type": "text", "value": f"{input['a']} -> {output}"}

    def broken(output: Any, input: Any) -> Any:
        raise KeyError("k")

    tools = adopt(
        [
            {"name": "good", "execute": lambda input: 7, "to_model_output": to_block},
            {"name": "bad", "execute": lambda input: 7, "to_model_output": broken},
        ]
    )
    assert _run(tools, "good", {"a": 1})["output"] == {"type": "text", "value": "1 -> 7"}
    bad = _run(tools, "bad", {"a": 1})
    assert bad["output"]["type"] == "error-text" and "KeyError" in bad["output"]["value"]


def test_generator_yields_stream_and_str_yields_join() -> None:
    @tool
    def count(n: int) -> Iterator[str]:
        for i in range(n):
            yield f"{i};"

    outputs = Outputs()
    result = _run(adopt(count), "count", {"n": 3}, on_output=outputs)
    assert result == {"output": {"type": "text", "value": "0;1;2;"}}
    assert outputs.items == [
        {"tool_call_id": "call_1", "tool_name": "count", "stream": "yield", "data": f"{i};"} for i in range(3)
    ]


def test_generator_mixed_yields_become_a_json_list_and_return_value_wins() -> None:
    def mixed(input: dict[str, Any]) -> Iterator[Any]:
        yield "a"
        yield {"b": 1}

    def returns(input: dict[str, Any]) -> Any:
        yield "progress"
        return {"final": True}

    tools = adopt([{"name": "mixed", "execute": mixed}, {"name": "returns", "execute": returns}])
    assert _run(tools, "mixed", {})["output"] == {"type": "json", "value": ["a", {"b": 1}]}
    assert _run(tools, "returns", {})["output"] == {"type": "json", "value": {"final": True}}


def test_on_output_errors_are_swallowed(caplog: pytest.LogCaptureFixture) -> None:
    def gen(input: dict[str, Any]) -> Iterator[str]:
        yield "x"

    def broken(payload: dict[str, Any]) -> None:
        raise RuntimeError("display failed")

    with caplog.at_level(logging.WARNING, logger="agentcore"):
        result = _run(adopt({"name": "g", "execute": gen}), "g", {}, on_output=broken)
    assert result["output"] == {"type": "text", "value": "x"}
    assert "display failed" in caplog.text


def test_timeout_sets_ctx_cancel_and_reports_timed_out() -> None:
    seen: dict[str, Any] = {}
    saw_cancel, release, finished = threading.Event(), threading.Event(), threading.Event()

    @tool(timeout=0.1)
    def slow(ctx: ToolContext) -> str:
        seen["ctx"] = ctx
        if ctx.cancel.wait(60):
            saw_cancel.set()
        release.wait(60)  # still blocked after its timeout: the call must not wait for it
        finished.set()
        return "late"

    try:
        result = returns_within(lambda: _run(adopt(slow), "slow", {}))
        assert not finished.is_set(), "the call returned while the tool was still blocked"
        assert result["error"] == "timeout"
        assert "timed out after 0.1 s" in result["output"]["value"]
        assert saw_cancel.wait(30), "the tool itself observed ctx.cancel"
        assert seen["ctx"].cancel.is_set()
    finally:
        release.set()


def test_cancel_returns_at_once_while_the_tool_is_blocked_and_drops_the_late_return() -> None:
    release = threading.Event()
    started = threading.Event()
    finished = threading.Event()
    seen: dict[str, Any] = {}

    def blocked(input: dict[str, Any], ctx: ToolContext) -> Iterator[str]:
        seen["ctx"] = ctx
        yield "before"
        started.set()
        release.wait(60)
        try:
            yield "after"
            seen["resumed"] = True
        finally:
            finished.set()

    outputs = Outputs()
    cancel = Signal()
    tools = adopt({"name": "b", "execute": blocked})

    def cancel_once_started() -> None:
        assert started.wait(30)
        cancel.set()

    threading.Thread(target=cancel_once_started, daemon=True).start()
    try:
        result = returns_within(lambda: _run(tools, "b", {}, cancel=cancel, on_output=outputs))
        assert not finished.is_set(), "the tool was still blocked when the call returned"
    finally:
        release.set()
    assert result["interrupted"] is True and result["output"]["type"] == "error-text"
    assert seen["ctx"].cancel.is_set()
    assert finished.wait(30)
    assert "resumed" not in seen, "a cancelled generator is not iterated further"
    assert [item["data"] for item in outputs.items] == ["before"], "nothing delivered after the return"


def test_late_plain_return_is_never_delivered() -> None:
    started, release, done = threading.Event(), threading.Event(), threading.Event()

    def slow(input: dict[str, Any]) -> str:
        started.set()
        release.wait(60)
        done.set()
        return "late"

    cancel = Signal()

    def cancel_once_started() -> None:
        assert started.wait(30)
        cancel.set()

    threading.Thread(target=cancel_once_started, daemon=True).start()
    try:
        result = returns_within(lambda: _run(adopt({"name": "s", "execute": slow}), "s", {}, cancel=cancel))
        assert not done.is_set(), "the call returned before the tool did"
    finally:
        release.set()
    assert done.wait(30)
    assert result["interrupted"] is True and "late" not in str(result)


def test_limit_truncates_the_output() -> None:
    tools = adopt({"name": "big", "execute": lambda input: "a" * 5000 + "b" * 5000})
    value = _run(tools, "big", {}, limit=1000)["output"]["value"]
    assert len(value) <= 1000 and value.startswith("a") and value.endswith("b") and "omitted" in value


# ---------------------------------------------------------------- file tools: the pool seam


class FakePool:
    def __init__(self, result: dict[str, Any]) -> None:
        self.result = result
        self.calls: list[tuple[Any, ...]] = []

    def run(self, handler: FileTool, input: dict[str, Any], **options: Any) -> dict[str, Any]:
        self.calls.append((handler, input, options))
        return self.result


def _file_tools() -> ToolSet:
    handler = FileTool(name="grep", path="/t/grep.py", folder="/t")
    entry = {"name": "grep", "description": "", "input_schema": {"type": "object"}, "source": "file"}
    return ToolSet({"grep": entry}, {"grep": handler})


def test_file_tool_goes_to_the_pool_and_its_result_is_limited() -> None:
    pool = FakePool({"output": {"type": "text", "value": "x" * 3000}})
    cancel = Signal()
    outputs = Outputs()
    result = _run(_file_tools(), "grep", {"q": 1}, pool=pool, cancel=cancel, on_output=outputs, limit=500)
    assert len(result["output"]["value"]) <= 500
    handler, input, options = pool.calls[0]
    assert handler.name == "grep" and input == {"q": 1}
    assert options == {
        "tool_call_id": "call_1",
        "cancel": cancel,
        "on_output": outputs,
        "agent_id": "agent-1",
    }
    _run(_file_tools(), "grep", {}, pool=pool, concurrency=3)
    assert pool.calls[1][2]["concurrency"] == 3


def test_a_failing_pool_is_one_calls_error() -> None:
    class Broken:
        def run(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            raise OSError("no processes")

    result = _run(_file_tools(), "grep", {}, pool=Broken())
    assert result["output"]["type"] == "error-text" and "OSError: no processes" in result["output"]["value"]


# ---------------------------------------------------------------- execute()


def test_execute_generates_a_call_id_and_accepts_a_plain_event() -> None:
    seen: dict[str, Any] = {}

    @tool
    def probe(ctx: ToolContext) -> int:
        seen["ctx"] = ctx
        return 1

    result = execute("probe", {}, [probe], cancel=threading.Event())
    assert result == {"output": {"type": "json", "value": 1}}
    assert re.fullmatch(r"call_[0-9a-f]{12}", seen["ctx"].tool_call_id)
    assert seen["ctx"].agent_id == ""


def test_execute_plain_event_interrupts_a_blocked_tool() -> None:
    started, release, done = threading.Event(), threading.Event(), threading.Event()
    cancel = threading.Event()

    def blocked(input: dict[str, Any]) -> str:
        started.set()
        release.wait(60)
        done.set()
        return "late"

    def cancel_once_started() -> None:
        assert started.wait(30)
        cancel.set()

    threading.Thread(target=cancel_once_started, daemon=True).start()
    tools = adopt({"name": "b", "execute": blocked})
    try:
        result = returns_within(lambda: execute("b", {}, tools, cancel=cancel))
        assert not done.is_set(), "execute() returned before the tool did"
    finally:
        release.set()
    assert result["interrupted"] is True


def test_execute_unknown_name_limit_and_on_output() -> None:
    def gen(input: dict[str, Any]) -> Iterator[str]:
        yield "z" * 3000

    tools = adopt({"name": "g", "execute": gen})
    unknown = execute("nope", {}, tools)
    assert unknown["output"]["type"] == "error-text" and "'nope'" in unknown["output"]["value"]
    outputs = Outputs()
    result = execute("g", {}, tools, on_output=outputs, limit=300)
    assert len(result["output"]["value"]) <= 300
    assert outputs.items[0]["stream"] == "yield" and outputs.items[0]["tool_name"] == "g"
    assert outputs.items[0]["tool_call_id"].startswith("call_")


def test_execute_rejects_non_dict_input() -> None:
    result = execute("g", [1], adopt({"name": "g", "execute": lambda input: 1}))  # type: ignore[arg-type]
    assert result["output"]["type"] == "error-text" and "must be a dict" in result["output"]["value"]
