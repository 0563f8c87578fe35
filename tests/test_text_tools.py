"""The text tool protocol: manual, history -> text messages, reading calls back, refusals."""

from __future__ import annotations

import copy
import json
import threading
from typing import Any

import pytest

import agentcore.text_tools as text_tools
from agentcore.protocols.base import ToolCall
from agentcore.text_tools import (
    TextToolSpec,
    is_refusal,
    prepare,
    read,
    remember,
    remembered,
    strip_calls,
    to_text_messages,
    wrap,
    wrap_system,
)

SCHEMA: dict[str, dict[str, Any]] = {
    "read_file": {
        "name": "read_file",
        "description": "Read a text file.",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "line": {"type": "integer"},
                "follow": {"type": "boolean"},
                "ratio": {"type": "number"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "options": {"type": "object"},
                "limit": {"type": ["integer", "null"]},
            },
            "required": ["path"],
        },
        "source": "memory",
    },
    "add": {
        "name": "add",
        "description": "Add two numbers.",
        "input_schema": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
        "source": "file",
    },
    "run": {
        "name": "run",
        "description": "Run a program with some input.",
        "input_schema": {
            "type": "object",
            "properties": {"input": {"type": "string"}, "type": {"type": "string"}},
        },
        "source": "memory",
    },
}


@pytest.fixture(scope="module")
def spec() -> TextToolSpec:
    return prepare(SCHEMA)


def calls_of(text: str, spec: TextToolSpec, **kwargs: Any) -> list[tuple[str, dict[str, Any]]]:
    found = read(text, spec, **kwargs)
    return [(c.name, c.arguments) for c in found.tool_calls]


# ---------------------------------------------------------------- prepare and the manual


def test_manual_explains_format_results_waiting_and_lists_every_tool(spec: TextToolSpec) -> None:
    manual = spec.manual
    assert '<tool_call>\n{"name": "tool_name", "arguments": {"parameter": "value"}}\n</tool_call>' in manual
    assert '<tool_result name="tool_name">' in manual
    assert "one <tool_call> block per call" in manual
    assert "stop and wait" in manual
    for name, tool in SCHEMA.items():
        assert f"## {name}\n{tool['description']}" in manual
        assert json.dumps(tool["input_schema"], ensure_ascii=False) in manual
    assert "source" not in manual


def test_prepare_accepts_a_list_and_a_toolset_like_object() -> None:
    from_list = prepare(list(SCHEMA.values()))
    holder = type("FakeToolSet", (), {"schema": SCHEMA})()
    assert from_list.manual == prepare(SCHEMA).manual == prepare(holder).manual
    assert list(from_list.tools) == ["read_file", "add", "run"]
    assert set(from_list.tools["add"]) == {"name", "description", "input_schema"}


def test_no_tools_means_nothing_is_injected() -> None:
    empty = prepare({})
    assert empty.manual == ""
    assert wrap_system("Be brief.", empty) == "Be brief."
    messages = [{"role": "user", "content": "hi"}]
    assert wrap(messages, empty) == messages


def test_manual_is_deterministic_for_prompt_caching() -> None:
    assert prepare(copy.deepcopy(SCHEMA)).manual == prepare(SCHEMA).manual


# ---------------------------------------------------------------- wrap


def test_wrap_system_appends_the_manual(spec: TextToolSpec) -> None:
    assert wrap_system("You are terse.", spec) == "You are terse.\n\n" + spec.manual
    assert wrap_system("", spec) == spec.manual


def test_wrap_appends_to_an_existing_system_message(spec: TextToolSpec) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    original = copy.deepcopy(messages)
    wrapped = wrap(messages, spec)
    assert wrapped[0] == {"role": "system", "content": "Be brief.\n\n" + spec.manual}
    assert wrapped[1] == {"role": "user", "content": "hi"}
    assert messages == original


def test_wrap_appends_a_text_part_to_a_list_system_message(spec: TextToolSpec) -> None:
    messages = [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]}]
    wrapped = wrap(messages, spec)
    assert wrapped[0]["content"] == [
        {"type": "text", "text": "Be brief."},
        {"type": "text", "text": "\n\n" + spec.manual},
    ]


def test_wrap_inserts_a_system_message_when_there_is_none(spec: TextToolSpec) -> None:
    wrapped = wrap([{"role": "user", "content": "hi"}], spec)
    assert wrapped == [{"role": "system", "content": spec.manual}, {"role": "user", "content": "hi"}]


def _history() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Add 1 and 2, then read a.txt"},
        {
            "role": "assistant",
            "id": "m1",
            "content": [
                {
                    "type": "reasoning",
                    "text": "two tools",
                    "provider_metadata": {"protocol": "x", "sig": "s"},
                },
                {"type": "text", "text": "Working on it."},
                {"type": "tool-call", "tool_call_id": "c1", "tool_name": "add", "input": {"a": 1, "b": 2}},
                {
                    "type": "tool-call",
                    "tool_call_id": "c2",
                    "tool_name": "read_file",
                    "input": {"path": "a.txt"},
                },
            ],
        },
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool-result",
                    "tool_call_id": "c1",
                    "tool_name": "add",
                    "output": {"type": "json", "value": 3},
                },
                {
                    "type": "tool-result",
                    "tool_call_id": "c2",
                    "tool_name": "read_file",
                    "output": {"type": "error-text", "value": "no such file"},
                },
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "3, and a.txt is missing."}]},
    ]


def test_assistant_calls_become_text_after_the_text_and_reasoning_stays(spec: TextToolSpec) -> None:
    history = _history()
    original = copy.deepcopy(history)
    out = to_text_messages(history)
    assert history == original
    assistant = out[1]
    assert assistant["role"] == "assistant" and assistant["id"] == "m1"
    assert assistant["content"][0] == history[1]["content"][0]
    assert assistant["content"][1] == {
        "type": "text",
        "text": "Working on it.\n\n"
        '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>\n'
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.txt"}}\n</tool_call>',
    }
    assert len(assistant["content"]) == 2
    assert not any(p.get("type") == "tool-call" for p in assistant["content"])


def test_an_assistant_message_with_only_calls_gets_one_text_part() -> None:
    message = {
        "role": "assistant",
        "content": [{"type": "tool-call", "tool_call_id": "c", "tool_name": "add", "input": {"a": 1}}],
    }
    out = to_text_messages([message])
    assert out[0]["content"] == [
        {"type": "text", "text": '<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>'}
    ]


def test_tool_results_become_one_user_message_with_marked_errors() -> None:
    out = to_text_messages(_history())
    assert out[2] == {
        "role": "user",
        "content": [
            {
                "type": "text",
                "text": '<tool_result name="add">\n3\n</tool_result>\n'
                '<tool_result name="read_file" error="true">\nno such file\n</tool_result>',
            }
        ],
    }
    assert out[0] == _history()[0] and out[3] == _history()[3]


def test_denied_and_text_results_are_written_as_text() -> None:
    tool_message = {
        "role": "tool",
        "content": [
            {
                "type": "tool-result",
                "tool_call_id": "a",
                "tool_name": "run",
                "output": {"type": "text", "value": "ok"},
            },
            {
                "type": "tool-result",
                "tool_call_id": "b",
                "tool_name": "run",
                "output": {"type": "execution-denied", "value": "not allowed"},
            },
            {
                "type": "tool-result",
                "tool_call_id": "c",
                "tool_name": "run",
                "output": {"type": "error-json", "value": {"code": 2}},
            },
        ],
    }
    text = to_text_messages([tool_message])[0]["content"][0]["text"]
    assert '<tool_result name="run">\nok\n</tool_result>' in text
    assert '<tool_result name="run" error="true">\nTool execution denied: not allowed\n</tool_result>' in text
    assert '<tool_result name="run" error="true">\n{"code": 2}\n</tool_result>' in text


def test_content_results_keep_media_as_separate_parts() -> None:
    image = {"type": "image", "image": "data:image/png;base64,AAAA"}
    pdf = {"type": "file", "media_type": "application/pdf", "data": "BBBB", "filename": "a.pdf"}
    tool_message = {
        "role": "tool",
        "content": [
            {
                "type": "tool-result",
                "tool_call_id": "a",
                "tool_name": "shot",
                "output": {"type": "content", "value": [{"type": "text", "text": "see:"}, image, pdf]},
            }
        ],
    }
    out = to_text_messages([tool_message])
    assert out[0]["role"] == "user"
    assert out[0]["content"] == [
        {"type": "text", "text": '<tool_result name="shot">\nsee:'},
        image,
        pdf,
        {"type": "text", "text": "\n</tool_result>"},
    ]


def test_consecutive_tool_messages_merge_into_one_user_message() -> None:
    def result(call_id: str, value: str) -> dict[str, Any]:
        return {
            "role": "tool",
            "content": [
                {
                    "type": "tool-result",
                    "tool_call_id": call_id,
                    "tool_name": "run",
                    "output": {"type": "text", "value": value},
                }
            ],
        }

    out = to_text_messages([result("a", "one"), result("b", "two"), {"role": "user", "content": "next"}])
    assert len(out) == 2
    assert out[0]["content"] == [
        {
            "type": "text",
            "text": '<tool_result name="run">\none\n</tool_result>\n'
            '<tool_result name="run">\ntwo\n</tool_result>',
        }
    ]
    assert out[1] == {"role": "user", "content": "next"}


def test_result_names_are_escaped_in_the_attribute() -> None:
    message = {
        "role": "tool",
        "content": [
            {
                "type": "tool-result",
                "tool_call_id": "a",
                "tool_name": 'x"><b',
                "output": {"type": "text", "value": "v"},
            }
        ],
    }
    assert to_text_messages([message])[0]["content"][0]["text"].startswith(
        '<tool_result name="x&quot;&gt;&lt;b">'
    )


def test_round_trip_history_to_text_and_back(spec: TextToolSpec) -> None:
    """What the model sees for its earlier calls reads back as the same calls."""
    history = _history()
    wrapped = wrap(history, spec)
    assert wrapped[0]["role"] == "system"
    seen = "".join(p["text"] for p in wrapped[2]["content"] if p["type"] == "text")
    found = read(seen, spec)
    assert [(c.name, c.arguments) for c in found.tool_calls] == [
        (p["tool_name"], p["input"]) for p in history[1]["content"] if p["type"] == "tool-call"
    ]
    assert found.text == "Working on it."
    assert found.invalid == []
    # A reply written in the same format, including a result the model invented.
    reply = (
        "Next step.\n"
        + text_tools.format_call("read_file", {"path": "b.txt", "line": 3})
        + '\n<tool_result name="read_file">\nhello\n</tool_result>'
    )
    found = read(reply, spec)
    assert [(c.name, c.arguments) for c in found.tool_calls] == [("read_file", {"path": "b.txt", "line": 3})]
    assert found.text == "Next step."


# ---------------------------------------------------------------- read: the lenient forms

LENIENT_FORMS = {
    "plain": '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>',
    "arguments as a string": '<tool_call>{"name": "add", "arguments": "{\\"a\\": 1, \\"b\\": 2}"}'
    "</tool_call>",
    "function wrapper": (
        '<tool_call>{"type": "function", "function": '
        '{"name": "add", "arguments": "{\\"a\\": 1, \\"b\\": 2}"}}'
        "</tool_call>"
    ),
    "function key": '<tool_call>{"function": {"name": "add", "arguments": {"a": 1, "b": 2}}}</tool_call>',
    "function name outside": '<tool_call>{"function": "add", "arguments": {"a": 1, "b": 2}}</tool_call>',
    "tool key": '<tool_call>{"tool": "add", "parameters": {"a": 1, "b": 2}}</tool_call>',
    "tool_name key": '<tool_call>{"tool_name": "add", "input": {"a": 1, "b": 2}}</tool_call>',
    "args key": '<tool_call>{"name": "add", "args": {"a": 1, "b": 2}}</tool_call>',
    "flattened": '<tool_call>{"name": "add", "a": 1, "b": 2}</tool_call>',
    "fence inside": '<tool_call>\n```json\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n```\n</tool_call>',
    "trailing comma": '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2,},}</tool_call>',
    "python literal": "<tool_call>{'name': 'add', 'arguments': {'a': 1, 'b': 2}}</tool_call>",
    "unclosed last block": '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}',
    "unclosed and cut off JSON": '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2',
    "upper-case tag": '<TOOL_CALL>{"name": "add", "arguments": {"a": 1, "b": 2}}</TOOL_CALL>',
    "attribute name": '<tool_call name="add">{"a": 1, "b": 2}</tool_call>',
    "functions. prefix": '<tool_call>{"name": "functions.add", "arguments": {"a": 1, "b": 2}}</tool_call>',
    "other case": '<tool_call>{"name": "ADD", "arguments": {"a": 1, "b": 2}}</tool_call>',
    "tool_calls list": '<tool_call>{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}'
    "</tool_call>",
    "numbers as strings": '<tool_call>{"name": "add", "arguments": {"a": "1", "b": "2"}}</tool_call>',
    "Roo XML": "<add>\n<a>1</a>\n<b>2</b>\n</add>",
    "JSON inside the tool tag": '<add>{"a": 1, "b": 2}</add>',
    "XML inside tool_call": "<tool_call>\n<add><a>1</a><b>2</b></add>\n</tool_call>",
}


@pytest.mark.parametrize("form", list(LENIENT_FORMS))
def test_lenient_forms_read_as_the_same_call(form: str, spec: TextToolSpec) -> None:
    found = read("Adding now.\n" + LENIENT_FORMS[form], spec)
    assert [(c.name, c.arguments) for c in found.tool_calls] == [("add", {"a": 1, "b": 2})], found
    assert found.invalid == []
    assert found.text == "Adding now."


def test_several_calls_in_one_reply_in_order(spec: TextToolSpec) -> None:
    text = (
        "First.\n"
        '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>\n'
        '<tool_call>{"name": "read_file", "arguments": {"path": "x"}}</tool_call>\n'
        "Then.\n"
        "<read_file><path>y</path></read_file>"
    )
    found = read(text, spec)
    assert [(c.name, c.arguments) for c in found.tool_calls] == [
        ("add", {"a": 1, "b": 2}),
        ("read_file", {"path": "x"}),
        ("read_file", {"path": "y"}),
    ]
    assert found.text == "First.\n\nThen."
    assert len({c.id for c in found.tool_calls}) == 3


def test_several_objects_or_a_list_in_one_block(spec: TextToolSpec) -> None:
    two = '{"name": "add", "arguments": {"a": 1, "b": 2}}\n{"name": "read_file", "arguments": {"path": "x"}}'
    listed = f"[{two.replace(chr(10), ',')}]"
    for body in (two, listed):
        assert calls_of(f"<tool_call>{body}</tool_call>", spec) == [
            ("add", {"a": 1, "b": 2}),
            ("read_file", {"path": "x"}),
        ]


def test_fence_around_the_blocks_is_removed_with_them(spec: TextToolSpec) -> None:
    text = (
        "Sure:\n```xml\n"
        '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>\n'
        '<tool_call>{"name": "add", "arguments": {"a": 3, "b": 4}}</tool_call>\n'
        "```\nDone."
    )
    found = read(text, spec)
    assert len(found.tool_calls) == 2
    assert found.text == "Sure:\n\nDone."


def test_code_blocks_next_to_a_call_are_kept_whole(spec: TextToolSpec) -> None:
    text = (
        "```py\nx = 1\n```\n"
        '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>\n'
        "```py\ny = 2\n```"
    )
    found = read(text, spec)
    assert len(found.tool_calls) == 1
    assert found.text == "```py\nx = 1\n```\n\n```py\ny = 2\n```"


def test_closing_tag_inside_a_string_argument_does_not_end_the_block(spec: TextToolSpec) -> None:
    text = (
        '<tool_call>{"name": "run", "arguments": {"input": "echo </tool_call> <tool_result>"}}</tool_call> ok'
    )
    found = read(text, spec)
    assert calls_of(text, spec) == [("run", {"input": "echo </tool_call> <tool_result>"})]
    assert found.text == "ok"


def test_multiline_string_with_raw_newlines_is_accepted(spec: TextToolSpec) -> None:
    text = '<tool_call>{"name": "run", "arguments": {"input": "line 1\nline 2"}}</tool_call>'
    assert calls_of(text, spec) == [("run", {"input": "line 1\nline 2"})]


def test_a_flat_parameter_named_like_an_arguments_key_stays_a_parameter(spec: TextToolSpec) -> None:
    text = '<tool_call>{"name": "run", "input": "hello", "type": "shell"}</tool_call>'
    assert calls_of(text, spec) == [("run", {"input": "hello", "type": "shell"})]
    # "type" is dropped as wrapper noise when the tool has no such parameter.
    text = '<tool_call>{"type": "function", "name": "add", "a": 1, "b": 2}</tool_call>'
    assert calls_of(text, spec) == [("add", {"a": 1, "b": 2})]


def test_missing_arguments_mean_an_empty_object(spec: TextToolSpec) -> None:
    for text in (
        '<tool_call>{"name": "add"}</tool_call>',
        '<tool_call>{"name": "add", "arguments": null}</tool_call>',
        '<tool_call>{"name": "add", "arguments": ""}</tool_call>',
        "<add></add>",
    ):
        assert calls_of(text, spec) == [("add", {})], text


# ---------------------------------------------------------------- Roo-style XML and coercion


def test_xml_values_are_coerced_by_the_schema(spec: TextToolSpec) -> None:
    text = (
        "<read_file>\n<path>src/a.js</path>\n<line>7</line>\n<follow>true</follow>\n<ratio>0.5</ratio>\n"
        '<tags>["a", "b"]</tags>\n<options>{"deep": true}</options>\n<limit>null</limit>\n</read_file>'
    )
    assert calls_of(text, spec) == [
        (
            "read_file",
            {
                "path": "src/a.js",
                "line": 7,
                "follow": True,
                "ratio": 0.5,
                "tags": ["a", "b"],
                "options": {"deep": True},
                "limit": None,
            },
        )
    ]


def test_xml_values_that_do_not_convert_stay_strings_for_validation(spec: TextToolSpec) -> None:
    text = "<read_file><path>7</path><line>seven</line><follow>maybe</follow></read_file>"
    assert calls_of(text, spec) == [("read_file", {"path": "7", "line": "seven", "follow": "maybe"})]


def test_xml_multiline_values_keep_their_content(spec: TextToolSpec) -> None:
    text = "<run>\n<input>\n  indented\n  <b>bold</b>\n</input>\n</run>"
    assert calls_of(text, spec) == [("run", {"input": "  indented\n  <b>bold</b>"})]


def test_xml_single_parameter_shorthand_and_unclosed_tool_tag(spec: TextToolSpec) -> None:
    schema = {"open": {"name": "open", "description": "", "input_schema": {"properties": {"path": {}}}}}
    one = prepare(schema)
    assert calls_of("<open>a.txt</open>", one) == [("open", {"path": "a.txt"})]
    assert calls_of("Reading.\n<read_file>\n<path>a</path>\n", spec) == [("read_file", {"path": "a"})]


def test_a_mention_of_a_tool_tag_in_prose_is_not_a_call(spec: TextToolSpec) -> None:
    text = "I can use <read_file> to look at it, or <add> numbers."
    found = read(text, spec)
    assert found.tool_calls == [] and found.invalid == []
    assert found.text == text


def test_xml_of_an_unknown_tag_stays_text(spec: TextToolSpec) -> None:
    text = "<div><p>hello</p></div>"
    assert read(text, spec) == text_tools.TextToolRead(text, [], [], {})


def test_numbers_in_json_strings_are_coerced_only_where_the_schema_forbids_strings(
    spec: TextToolSpec,
) -> None:
    text = '<tool_call>{"name": "read_file", "arguments": {"path": "12", "line": "12"}}</tool_call>'
    assert calls_of(text, spec) == [("read_file", {"path": "12", "line": 12})]


# ---------------------------------------------------------------- invalid entries


def test_unparseable_json_is_an_invalid_entry_not_text(spec: TextToolSpec) -> None:
    text = 'Hmm.\n<tool_call>{"name": "add", "arguments": {a: one two}}</tool_call>\nok'
    found = read(text, spec)
    assert found.tool_calls == []
    assert len(found.invalid) == 1
    bad = found.invalid[0]
    assert isinstance(bad, ToolCall)
    assert bad.name == "add"
    assert bad.arguments == {}
    assert bad.raw_arguments == '{"name": "add", "arguments": {a: one two}}'
    assert bad.id.startswith("call_")
    assert "JSON" in found.reasons[bad.id]
    assert found.text == "Hmm.\n\nok"


def test_unknown_tool_is_an_invalid_entry_keeping_the_name(spec: TextToolSpec) -> None:
    found = read('<tool_call>{"name": "delete_all", "arguments": {"really": true}}</tool_call>', spec)
    assert found.tool_calls == []
    assert [(c.name, c.raw_arguments) for c in found.invalid] == [
        ("delete_all", '{"name": "delete_all", "arguments": {"really": true}}')
    ]
    assert "unknown tool" in found.reasons[found.invalid[0].id]


@pytest.mark.parametrize(
    "body",
    [
        "",
        "just words",
        '{"arguments": {"a": 1}}',
        '{"name": 5}',
        '{"name": "add", "arguments": [1, 2]}',
        '{"name": "add", "arguments": "not json"}',
        '"add"',
        "[1, 2]",
    ],
)
def test_blocks_that_are_not_calls_become_invalid_entries(body: str, spec: TextToolSpec) -> None:
    found = read(f"<tool_call>{body}</tool_call>", spec)
    assert found.tool_calls == []
    assert len(found.invalid) >= 1
    assert all(c.raw_arguments is not None for c in found.invalid)
    assert found.text == ""


def test_valid_and_invalid_calls_in_one_reply_keep_their_positions(spec: TextToolSpec) -> None:
    text = (
        '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
        "<tool_call>{broken</tool_call>"
        '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
    )
    found = read(text, spec)
    assert len(found.tool_calls) == 2 and len(found.invalid) == 1
    ids = [found.tool_calls[0].id, found.invalid[0].id, found.tool_calls[1].id]
    assert len(set(ids)) == 3


def test_ids_are_deterministic_and_salted(spec: TextToolSpec) -> None:
    text = LENIENT_FORMS["plain"]
    first, again = read(text, spec), read(text, spec)
    assert first.tool_calls[0].id == again.tool_calls[0].id
    assert first.tool_calls[0].id.startswith("call_")
    assert read(text, spec, id_salt="round-2").tool_calls[0].id != first.tool_calls[0].id


# ---------------------------------------------------------------- invented results and text


def test_an_invented_tool_result_cuts_the_reply(spec: TextToolSpec) -> None:
    text = (
        "Checking.\n"
        '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>\n'
        '<tool_result name="add">3</tool_result>\nSo the answer is 3.\n'
        '<tool_call>{"name": "add", "arguments": {"a": 5, "b": 5}}</tool_call>'
    )
    found = read(text, spec)
    assert calls_of(text, spec) == [("add", {"a": 1, "b": 2})]
    assert found.text == "Checking."
    assert "answer" not in found.text


def test_an_invented_result_ends_an_unclosed_block(spec: TextToolSpec) -> None:
    text = '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}\n<tool_result>fake 3</tool_result>'
    found = read(text, spec)
    assert [(c.name, c.arguments) for c in found.tool_calls] == [("add", {"a": 1, "b": 2})]
    assert found.text == ""


def test_invented_results_without_calls_are_cut_too(spec: TextToolSpec) -> None:
    assert read("The result:\n<tool_response>42</tool_response>", spec).text == "The result:"
    assert strip_calls("ok <tool_result name='x'>1</tool_result>") == "ok"


def test_text_without_markup_is_returned_exactly(spec: TextToolSpec) -> None:
    text = "  Indented start.\n\n\n```py\nx = {'name': 'add'}\n```\n  "
    assert read(text, spec).text == text


def test_text_after_a_block_keeps_its_indentation(spec: TextToolSpec) -> None:
    text = 'Code:\n<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>\n    indented()\n'
    assert read(text, spec).text == "Code:\n\n    indented()"


def test_strip_calls_without_a_spec_removes_every_call_block() -> None:
    text = 'Before <tool_call>{"name": "x", "arguments": {}}</tool_call> after</tool_call>'
    assert strip_calls(text) == "Before\n\nafter"


# ---------------------------------------------------------------- strict mode


def test_strict_mode_reads_only_well_formed_blocks(spec: TextToolSpec) -> None:
    good = '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
    assert calls_of(good, spec, loose=False) == [("add", {"a": 1, "b": 2})]
    for form in ("function wrapper", "flattened", "trailing comma", "python literal", "unclosed last block"):
        found = read(LENIENT_FORMS[form], spec, loose=False)
        assert found.tool_calls == [], form
        assert len(found.invalid) == 1, form
    roo = LENIENT_FORMS["Roo XML"]
    assert read(roo, spec, loose=False) == text_tools.TextToolRead(roo, [], [], {})


def test_strict_mode_still_cuts_invented_results(spec: TextToolSpec) -> None:
    text = 'a <tool_call>{"name": "add", "arguments": {}}</tool_call> <tool_result>x</tool_result> b'
    found = read(text, spec, loose=False)
    assert found.text == "a"
    assert [c.name for c in found.tool_calls] == ["add"]


# ---------------------------------------------------------------- refusals

REFUSALS = [
    (
        400,
        '{"error": {"message": "tools is not supported in this model. For a list of supported models, '
        'refer to https://platform.openai.com/docs/guides/function-calling", "param": "tools"}}',
    ),
    (400, '{"error":"registry.ollama.ai/library/gemma3:27b does not support tools"}'),
    (
        400,
        '{"error":{"message":"deepseek-reasoner does not support Function Calling",'
        '"type":"invalid_request_error"}}',
    ),
    (400, "Thinking mode does not support this tool_choice"),
    (
        400,
        '{"code":"Client specified an invalid argument","error":"Invalid request content: The model does not '
        'support tool use or function calling but tools or tool_choice have been specified on the request."}',
    ),
    (400, '{"error":{"message":"tool calling is not supported with this model","param":"tool calling"}}'),
    (
        400,
        '{"error":{"code":400,"message":"Function calling is not enabled for models/gemma-3-12b-it",'
        '"status":"INVALID_ARGUMENT"}}',
    ),
    (
        400,
        '{"object":"error","message":"\\"auto\\" tool choice requires --enable-auto-tool-choice and '
        '--tool-call-parser to be set","type":"BadRequestError","code":400}',
    ),
    (400, "named tool choice requires --tool-call-parser"),
    (500, '{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}'),
    (400, '{"error":{"message":"Unsupported param: tool_choice"}}'),
    (
        404,
        '{"error":{"message":"No endpoints found that support tool use. '
        "To learn more about provider routing, "
        'visit: https://openrouter.ai/docs/provider-routing","code":404}}',
    ),
    (404, "No endpoints found that support the provided 'tool_choice' value."),
    (
        422,
        '{"detail":[{"type":"extra_forbidden","loc":["body","tools"],'
        '"msg":"Extra inputs are not permitted"}]}',
    ),
    (
        400,
        "[{'type': 'extra_forbidden', 'loc': ('body', 'tool_choice'), "
        "'msg': 'Extra inputs are not permitted'}]",
    ),
    (422, "body -> tools\n  Extra inputs are not permitted (type=extra_forbidden)"),
    (400, "tool_choice: Extra inputs are not permitted"),
    (400, "Failed to deserialize the JSON body: unknown field `tools`, expected one of `model`, `messages`"),
    (400, "Unrecognized request argument supplied: functions"),
    (400, "Unsupported parameter: 'tools' is not supported with this model."),
]

NOT_REFUSALS = [
    (401, "tools is not supported in this model"),
    (429, "does not support tools"),
    (503, "tools param requires --jinja flag"),
    (
        400,
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens "
        "(including 120 in the functions). Please reduce the length.",
    ),
    (
        400,
        '{"error":{"message":"Failed to call a function. Please adjust your prompt.",'
        '"code":"tool_use_failed"}}',
    ),
    (400, "tool call validation failed: parameters for tool x did not match schema"),
    (400, "Invalid schema for function 'add': 'integer' is not valid under any of the given schemas"),
    (400, "messages.65.content.1.tool_use.text: Extra inputs are not permitted"),
    (400, "tools.0.function.strict: Extra inputs are not permitted"),
    (400, "'messages.1' : property 'tool_calls' is unsupported, did you mean 'tool_call_id'?"),
    (400, "Function calling with a response mime type: 'application/json' is unsupported"),
    (
        400,
        '{"detail":[{"type":"extra_forbidden","loc":["body","stream_options"],'
        '"msg":"Extra inputs are not permitted"}]}',
    ),
    (400, "Invalid 'tools[0].function.name': string does not match pattern."),
    (400, ""),
    (None, "does not support tools"),
]


@pytest.mark.parametrize(("status", "body"), REFUSALS)
def test_refusal_bodies_are_recognised(status: int, body: str) -> None:
    assert is_refusal(status, body)


@pytest.mark.parametrize(("status", "body"), NOT_REFUSALS)
def test_other_errors_are_not_refusals(status: int | None, body: str) -> None:
    assert not is_refusal(status, body)


def test_refusal_memory_is_per_endpoint_and_thread_safe() -> None:
    base = "http://127.0.0.1:9/v1-text-tools-test"
    assert not remembered(base, "m0")
    threads = [threading.Thread(target=remember, args=(base + "/", f"m{i % 5}")) for i in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(remembered(base, f"m{i}") for i in range(5))
    assert not remembered(base, "m5")
    assert not remembered("http://other", "m0")
    for i in range(5):
        text_tools.forget(base, f"m{i}")
    assert not remembered(base, "m0")
