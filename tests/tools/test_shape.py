"""Return value → result shaping, JSON normalisation, truncation and the standard results."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import re
import uuid
from decimal import Decimal
from pathlib import PurePosixPath
from typing import Any

import pytest

from agentcore.tools.shape import (
    DENIED_TEXT,
    NO_OUTPUT_TEXT,
    cut_middle,
    denied_result,
    error_result,
    exception_result,
    generator_value,
    interrupted_result,
    invalid_call_result,
    shape,
    shape_model_output,
    timeout_result,
    to_json,
    truncate,
    truncate_result,
)


class Mode(enum.Enum):
    FAST = "fast"


@dataclasses.dataclass
class Point:
    x: int
    when: dt.date


def _text(result: dict[str, Any]) -> str:
    return str(result["output"]["value"])


# ---------------------------------------------------------------- return values


def test_str_is_text() -> None:
    assert shape("hi") == {"output": {"type": "text", "value": "hi"}}


def test_none_says_the_tool_succeeded_without_output() -> None:
    assert shape(None) == {"output": {"type": "text", "value": NO_OUTPUT_TEXT}}
    assert "no output" in NO_OUTPUT_TEXT


@pytest.mark.parametrize("value", [3, 2.5, True, [1, "a"], {"a": {"b": [None]}}])
def test_other_json_values_are_json(value: Any) -> None:
    assert shape(value) == {"output": {"type": "json", "value": value}}


def test_json_normalisation() -> None:
    value = {
        "at": dt.datetime(2024, 1, 2, 3, 4, 5),
        "day": dt.date(2024, 1, 2),
        "clock": dt.time(3, 4),
        "tags": {"b", "a"},
        "pair": (1, 2),
        "blob": b"\x00\xff",
        "price": Decimal("1.5"),
        "nan": float("nan"),
        "inf": float("inf"),
        "mode": Mode.FAST,
        "point": Point(1, dt.date(2024, 1, 2)),
        "path": PurePosixPath("/tmp/x"),
        "id": uuid.UUID(int=1),
        1: "int key",
    }
    assert to_json(value) == {
        "at": "2024-01-02T03:04:05",
        "day": "2024-01-02",
        "clock": "03:04:00",
        "tags": ["a", "b"],
        "pair": [1, 2],
        "blob": "AP8=",
        "price": 1.5,
        "nan": None,
        "inf": None,
        "mode": "fast",
        "point": {"x": 1, "when": "2024-01-02"},
        "path": "/tmp/x",
        "id": "00000000-0000-0000-0000-000000000001",
        "1": "int key",
    }
    json.dumps(shape(value), allow_nan=False)


def test_shared_references_are_not_cycles() -> None:
    item = [1]
    assert shape({"a": item, "b": item})["output"]["value"] == {"a": [1], "b": [1]}


def test_cyclic_structure_is_an_error_naming_the_type() -> None:
    loop: list[Any] = []
    loop.append(loop)
    result = shape({"x": loop})
    assert result["output"]["type"] == "error-text"
    assert "cyclic" in _text(result) and "list" in _text(result)
    assert result["error"] == _text(result)


def test_arbitrary_object_is_an_error_naming_the_type() -> None:
    class Widget:
        pass

    result = shape({"w": Widget()})
    assert result["output"]["type"] == "error-text"
    assert "Widget" in _text(result)


def test_output_block_is_passed_as_is() -> None:
    for block in (
        {"type": "text", "value": "t"},
        {"type": "json", "value": {"a": 1}},
        {"type": "execution-denied", "value": "no"},
        {"type": "content", "value": [{"type": "text", "text": "see"}]},
    ):
        assert shape({"output": block}) == {"output": block}


def test_error_blocks_set_error() -> None:
    assert shape({"output": {"type": "error-text", "value": "bad"}})["error"] == "bad"
    assert shape({"output": {"type": "error-json", "value": {"code": 1}}})["error"] == '{"code": 1}'


def test_content_parts_text_image_file_with_media_type() -> None:
    parts = [
        {"type": "text", "text": "Screen:"},
        {"type": "image", "image": "iVBORw0KGgo=", "media_type": "image/jpeg"},
        {"type": "file", "media_type": "application/pdf", "data": "JVBERi0=", "filename": "a.pdf"},
    ]
    assert shape({"output": {"type": "content", "value": parts}})["output"]["value"] == parts


def test_unknown_content_part_type_is_rejected_by_name() -> None:
    result = shape({"output": {"type": "content", "value": [{"type": "media", "data": "x"}]}})
    assert result["output"]["type"] == "error-text"
    assert "'media'" in _text(result) and "rejected" in _text(result)


@pytest.mark.parametrize(
    ("block", "words"),
    [
        ({"type": "picture", "value": "x"}, "unknown output block type 'picture'"),
        ({"type": "text", "value": 3}, "needs a str value"),
        ({"type": "content", "value": "x"}, "list of parts"),
        ({"type": "content", "value": [{"type": "image"}]}, "'image'"),
        ({"type": "content", "value": [{"type": "file", "data": "x"}]}, "'media_type'"),
    ],
)
def test_invalid_blocks_become_error_results(block: dict[str, Any], words: str) -> None:
    result = shape({"output": block})
    assert result["output"]["type"] == "error-text"
    assert words in _text(result)


def test_stop_with_block_str_value_and_nothing() -> None:
    assert shape({"stop": True, "output": {"type": "text", "value": "done"}}) == {
        "output": {"type": "text", "value": "done"},
        "stop": True,
    }
    assert shape({"stop": True, "output": "done"}) == {
        "output": {"type": "text", "value": "done"},
        "stop": True,
    }
    assert shape({"stop": True, "output": [1]}) == {"output": {"type": "json", "value": [1]}, "stop": True}
    assert shape({"stop": True}) == {"output": {"type": "text", "value": NO_OUTPUT_TEXT}, "stop": True}


def test_output_key_with_a_plain_value_is_shaped_like_a_return_value() -> None:
    assert shape({"output": "hi"}) == {"output": {"type": "text", "value": "hi"}}
    assert shape({"output": {"a": 1}}) == {"output": {"type": "json", "value": {"a": 1}}}


def test_dict_with_other_keys_is_plain_json() -> None:
    value = {"output": "x", "count": 2}
    assert shape(value) == {"output": {"type": "json", "value": value}}
    assert shape({"stop": False}) == {"output": {"type": "json", "value": {"stop": False}}}


# ---------------------------------------------------------------- generators, to_model_output


def test_generator_value_rules() -> None:
    assert generator_value("ret", ["a"]) == "ret"
    assert generator_value(None, ["a", "b"]) == "ab"
    assert generator_value(None, ["a", 1]) == ["a", 1]
    assert generator_value(None, []) is None
    assert generator_value(0, ["a"]) == 0


def test_to_model_output_gets_output_and_input() -> None:
    def to_block(output: Any, input: Any) -> dict[str, Any]:
        return {"type": "text", "value": f"{input['q']}={output['n']}"}

    assert shape_model_output(to_block, {"n": 3}, {"q": "n"}) == {"output": {"type": "text", "value": "n=3"}}


def test_to_model_output_keeps_stop_of_the_raw_value() -> None:
    def to_block(output: Any, input: Any) -> dict[str, Any]:
        return {"type": "text", "value": "bye"}

    assert shape_model_output(to_block, {"stop": True, "output": "x"}, {})["stop"] is True


def test_to_model_output_errors_and_invalid_blocks_become_error_results() -> None:
    def boom(output: Any, input: Any) -> Any:
        raise RuntimeError("nope")

    result = shape_model_output(boom, 1, {})
    assert result["output"]["type"] == "error-text" and "RuntimeError: nope" in _text(result)
    result = shape_model_output(lambda output, input: "plain", 1, {})
    assert result["output"]["type"] == "error-text" and "invalid output block" in _text(result)


# ---------------------------------------------------------------- truncation


def test_truncate_text_keeps_head_and_tail_with_a_notice() -> None:
    text = "HEAD" + "x" * 10_000 + "TAIL"
    block = truncate({"type": "text", "value": text}, 1000)
    value = block["value"]
    assert value.startswith("HEAD") and value.endswith("TAIL")
    assert len(value) <= 1000
    assert "characters omitted" in value and "Narrow the request" in value
    head = value[: value.index("\n\n[...")]
    tail = value[value.index("...]\n\n") + len("...]\n\n") :]
    omitted = int(re.search(r"\[\.\.\. (\d+) characters omitted", value).group(1))  # type: ignore[union-attr]
    assert len(head) + omitted + len(tail) == len(text)
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) > 400 and len(tail) > 400


def test_truncate_leaves_short_text_alone() -> None:
    block = {"type": "text", "value": "short"}
    assert truncate(block, 100) == block
    assert truncate({"type": "text", "value": "x" * 500}, None)["value"] == "x" * 500


def test_truncate_error_text_too() -> None:
    value = truncate({"type": "error-text", "value": "e" * 5000}, 600)["value"]
    assert len(value) <= 600 and "omitted" in value


def test_long_json_becomes_cut_text() -> None:
    data = list(range(5000))
    block = truncate({"type": "json", "value": data}, 500)
    assert block["type"] == "text" and len(block["value"]) <= 500
    assert block["value"].startswith("[0, 1, 2")
    assert truncate({"type": "error-json", "value": data}, 500)["type"] == "error-text"
    small = {"type": "json", "value": [1]}
    assert truncate(small, 500) is small


def test_content_text_parts_are_cut_and_media_untouched() -> None:
    image = {"type": "image", "image": "A" * 50_000}
    file = {"type": "file", "media_type": "audio/wav", "data": "B" * 50_000}
    parts = [{"type": "text", "text": "a" * 3000}, image, {"type": "text", "text": "b" * 1000}, file]
    value = truncate({"type": "content", "value": parts}, 1000)["value"]
    assert value[1] == image and value[3] == file
    texts = [p["text"] for p in value if p["type"] == "text"]
    assert sum(len(t) for t in texts) <= 1000
    assert all("omitted" in t for t in texts)
    assert texts[0].startswith("a") and texts[1].endswith("b")


def test_denied_block_is_never_cut() -> None:
    block = {"type": "execution-denied", "value": "r" * 1000}
    assert truncate(block, 10) is block


def test_tiny_limit_uses_a_short_notice() -> None:
    value = cut_middle("z" * 1000, 60)
    assert "omitted" in value and len(value) <= 60


def test_truncate_result_keeps_other_keys() -> None:
    result = {"output": {"type": "text", "value": "x" * 1000}, "stop": True}
    cut = truncate_result(result, 400)
    assert cut["stop"] is True and len(cut["output"]["value"]) <= 400
    assert truncate_result(result, None) is result


# ---------------------------------------------------------------- standard results


def test_standard_results() -> None:
    interrupted = interrupted_result()
    assert interrupted["interrupted"] is True
    assert interrupted["output"]["type"] == "error-text" and "interrupted" in _text(interrupted)

    assert denied_result() == {"output": {"type": "execution-denied", "value": DENIED_TEXT}}
    assert denied_result("too risky")["output"]["value"] == "too risky"

    assert error_result("bad") == {"output": {"type": "error-text", "value": "bad"}, "error": "bad"}
    assert error_result("bad", error="x")["error"] == "x"

    timeout = timeout_result(2.0)
    assert "timed out after 2 s" in _text(timeout) and timeout["error"] == "timeout"
    assert "timed out after 0.5 s" in _text(timeout_result(0.5))


def test_invalid_call_quotes_raw_arguments_and_lists_tools() -> None:
    result = invalid_call_result("read", '{"path": "a.json"', "the arguments are not a valid JSON object")
    text = _text(result)
    assert '{"path": "a.json"' in text and "read" in text and "JSON object" in text
    assert result["output"]["type"] == "error-text"
    listed = _text(invalid_call_result("reed", None, "no such tool", available=["write", "read"]))
    assert "Available tools: read, write." in listed


def test_exception_result_names_the_type_and_where() -> None:
    def fail() -> None:
        raise ValueError("boom")

    try:
        fail()
    except ValueError as exc:
        result = exception_result(exc)
    assert result["error"] == "ValueError: boom"
    assert _text(result).startswith("ValueError: boom")
    assert "fail" in _text(result) and "test_shape.py" in _text(result)
    assert exception_result(KeyError())["error"] == "KeyError"
