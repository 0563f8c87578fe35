"""Fuzzing the text tool reader: no input may make it raise or return a call to an unknown tool.

Run size: each of the `FUZZ_TESTS` property tests below runs `FUZZ_EXAMPLES` examples
(so `FUZZ_EXAMPLES * FUZZ_TESTS` reader inputs per run, each read in loose and strict mode).
"""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore.protocols.base import ToolCall
from agentcore.text_tools import TextToolRead, TextToolSpec, format_call, prepare, read

FUZZ_EXAMPLES = 500
FUZZ_TESTS = 4

FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

SPEC: TextToolSpec = prepare(
    [
        {"name": "echo", "description": "Echo anything.", "input_schema": {"type": "object"}},
        {
            "name": "add",
            "description": "Add.",
            "input_schema": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": ["number", "null"]}},
            },
        },
        {
            "name": "read_file",
            "description": "Read.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "flags": {"type": "array"},
                    "opts": {"type": "object"},
                    "on": {"type": "boolean"},
                },
            },
        },
    ]
)
INVENTED_RESULT = re.compile(r"<tool[_-]?(?:results?|responses?|outputs?)(?![\w-])", re.IGNORECASE)

TOKENS = [
    "<tool_call>",
    "</tool_call>",
    '<tool_call name="add">',
    "<TOOL_CALL>",
    "<tool-call>",
    "<tool_calls>",
    "</tool_calls>",
    "<tool_result>",
    '<tool_result name="add">',
    "</tool_result>",
    "<tool_response>",
    "<echo>",
    "</echo>",
    "<add>",
    "</add>",
    "<read_file>",
    "</read_file>",
    "<a>",
    "</a>",
    "<path>",
    "</path>",
    "<flags>",
    "</flags>",
    "```",
    "```json\n",
    "{",
    "}",
    "[",
    "]",
    '"',
    "'",
    ",",
    ":",
    "\\",
    "\n",
    " ",
    '"name"',
    '"arguments"',
    '"function"',
    '"type"',
    '"tool_calls"',
    '"add"',
    '"echo"',
    '"nope"',
    "'add'",
    "true",
    "True",
    "null",
    "None",
    "NaN",
    "1e999",
    "-7",
    "7",
    "99999999999999999999999",
    '{"name": "add", "arguments": {"a": 1}}',
    '{"type": "function", "function": {"name": "echo", "arguments": "{}"}}',
]

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.sampled_from(TOKENS)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)
json_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=4)
markup_text = st.lists(st.sampled_from(TOKENS) | st.text(max_size=6), max_size=40).map("".join)


def nested(depth: int) -> st.SearchStrategy[str]:
    """Random nesting of tags, fences and brackets around random content."""
    leaf = st.sampled_from(TOKENS) | st.text(max_size=4)
    if depth == 0:
        return leaf
    inner = nested(depth - 1)
    wrappers = st.sampled_from(
        [
            ("<tool_call>", "</tool_call>"),
            ("<tool_call>", ""),
            ("<add>", "</add>"),
            ("<read_file><path>", "</path></read_file>"),
            ("```json\n", "\n```"),
            ("{", "}"),
            ("[", "]"),
            ('{"name": "add", "arguments": ', "}"),
            ('{"name": "echo", "arguments": "', '"}'),
            ("<tool_result>", "</tool_result>"),
            ("'", "'"),
        ]
    )
    return st.builds(
        lambda pair, parts: pair[0] + "".join(parts) + pair[1],
        wrappers,
        st.lists(inner, min_size=1, max_size=3),
    )


def check(found: TextToolRead) -> None:
    """What every read must satisfy, whatever the input."""
    assert isinstance(found.text, str)
    assert not INVENTED_RESULT.search(found.text)
    for call in found.tool_calls:
        assert isinstance(call, ToolCall)
        assert call.name in SPEC.tools
        assert isinstance(call.arguments, dict)
        assert all(isinstance(key, str) for key in call.arguments)
        json.dumps(call.arguments, allow_nan=False)
        assert call.raw_arguments is None
    for call in found.invalid:
        assert isinstance(call.raw_arguments, str)
        assert call.arguments == {}
        assert isinstance(call.name, str)
        assert call.id in found.reasons
    ids = [c.id for c in found.tool_calls + found.invalid]
    assert all(i.startswith("call_") for i in ids)


def read_both_ways(text: str) -> None:
    for loose in (True, False):
        found = read(text, SPEC, loose=loose)
        check(found)
        assert read(text, SPEC, loose=loose) == found


@FUZZ
@given(markup_text)
def test_random_text_never_breaks_the_reader(text: str) -> None:
    read_both_ways(text)


@FUZZ
@given(nested(3), st.text(max_size=10), st.text(max_size=10))
def test_random_nesting_of_tags_fences_and_braces(core: str, before: str, after: str) -> None:
    read_both_ways(before + core + after)


@st.composite
def mutated_calls(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from([*SPEC.tools, "nope", ""]))
    block = format_call(name, draw(json_objects))
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["delete", "insert", "duplicate", "truncate", "swap-quotes"]))
        at = draw(st.integers(0, len(block)))
        if kind == "delete":
            block = block[:at] + block[at + draw(st.integers(1, 6)) :]
        elif kind == "insert":
            block = block[:at] + draw(st.sampled_from(TOKENS) | st.text(max_size=3)) + block[at:]
        elif kind == "duplicate" and len(block) < 2000:
            block = block + "\n" + block
        elif kind == "truncate":
            block = block[:at]
        else:
            block = block.replace('"', "'")
    return draw(st.text(max_size=8)) + block + draw(st.text(max_size=8))


@FUZZ
@given(mutated_calls())
def test_mutated_call_blocks_never_break_the_reader(text: str) -> None:
    read_both_ways(text)


@FUZZ
@given(json_objects, st.text(max_size=20).filter(lambda t: "<" not in t))
def test_any_well_formed_call_reads_back_exactly(arguments: dict[str, Any], prose: str) -> None:
    """Whatever the argument strings hold (tags, fences, quotes), a well-formed call survives."""
    text = prose + "\n" + format_call("echo", arguments) + "\n" + prose
    for loose in (True, False):
        found = read(text, SPEC, loose=loose)
        assert [(c.name, c.arguments) for c in found.tool_calls] == [("echo", arguments)]
        assert found.invalid == []
