"""agentcore.history: constructors, turns() and render()."""

from __future__ import annotations

import json

import pytest

from agentcore import AgentError, history


def call(call_id: str, name: str = "read", arguments: object = None) -> dict[str, object]:
    return {
        "id": call_id,
        "name": name,
        "arguments": arguments if arguments is not None else {"path": "a.json"},
    }


def result_message(*pairs: tuple[str, str], value: object = "ok") -> dict[str, object]:
    return {
        "role": "tool",
        "content": [
            {
                "type": "tool-result",
                "tool_call_id": cid,
                "tool_name": name,
                "output": {"type": "text", "value": value},
            }
            for cid, name in pairs
        ],
    }


def test_user_keeps_text_or_parts() -> None:
    assert history.user("hi") == {"role": "user", "content": "hi"}
    parts = [
        {"type": "text", "text": "what is this"},
        {"type": "image", "image": "data:image/png;base64,AAAA"},
    ]
    assert history.user(parts) == {"role": "user", "content": parts}


def test_assistant_builds_text_and_tool_call_parts() -> None:
    message = history.assistant("Let me look", tool_calls=[call("c1")])
    assert message == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look"},
            {"type": "tool-call", "tool_call_id": "c1", "tool_name": "read", "input": {"path": "a.json"}},
        ],
    }


def test_assistant_accepts_json_string_arguments_and_ready_parts() -> None:
    ready = {"type": "tool-call", "tool_call_id": "c2", "tool_name": "x", "input": {}}
    message = history.assistant(tool_calls=[call("c1", arguments='{"a": 1}'), ready])
    assert message["content"][0]["input"] == {"a": 1}
    assert message["content"][1] == ready
    assert history.assistant()["content"] == []


def test_assistant_rejects_bad_arguments() -> None:
    with pytest.raises(AgentError) as info:
        history.assistant(tool_calls=[call("c1", arguments="{not json")])
    assert info.value.kind == "request"
    with pytest.raises(AgentError):
        history.assistant(tool_calls=[{"name": "x"}])


def test_tool_shapes_content_like_a_return_value() -> None:
    assert history.tool("c1", "read", "text")["content"][0]["output"] == {"type": "text", "value": "text"}
    assert history.tool("c1", "read", {"port": 8080})["content"][0]["output"] == {
        "type": "json",
        "value": {"port": 8080},
    }
    part = history.tool("c1", "read", "x")["content"][0]
    assert part["type"] == "tool-result" and part["tool_call_id"] == "c1" and part["tool_name"] == "read"


def test_compact_message() -> None:
    assert history.compact("summary") == {"role": "compact", "content": "summary"}


def test_turns_fold_user_and_model_responses() -> None:
    h = [
        history.user("read it"),
        history.assistant("ok", tool_calls=[call("c1")]),
        result_message(("c1", "read")),
        history.user("thanks"),
    ]
    assert history.turns(h) == [[h[0]], [h[1], h[2]], [h[3]]]


def test_turns_match_results_by_id_even_when_stored_before_their_call() -> None:
    """A store that restores by id may give a result before its call; it still joins the call's turn."""
    results = result_message(("c1", "read"))
    calling = history.assistant(tool_calls=[call("c1")])
    h = [history.user("go"), results, calling]
    assert history.turns(h) == [[h[0]], [calling, results]]


def test_turns_split_a_tool_message_across_the_turns_of_its_calls() -> None:
    first = history.assistant(tool_calls=[call("a")])
    second = history.assistant(tool_calls=[call("b")])
    both = result_message(("a", "read"), ("b", "read"))
    h = [history.user("go"), first, history.user("more"), second, both]
    folded = history.turns(h)
    assert [m["role"] for m in folded[1]] == ["assistant", "tool"]
    assert [p["tool_call_id"] for p in folded[1][1]["content"]] == ["a"]
    assert [p["tool_call_id"] for p in folded[3][1]["content"]] == ["b"]


def test_turns_drop_orphan_results_and_join_adjacent_assistant_messages() -> None:
    orphan = result_message(("zzz", "read"))
    a1, a2 = history.assistant("part one"), history.assistant("part two")
    h = [history.user("go"), orphan, a1, a2]
    assert history.turns(h) == [[h[0]], [a1, a2]]


def test_turns_keep_a_tool_message_object_when_it_belongs_to_one_turn() -> None:
    calling = history.assistant(tool_calls=[call("c1")])
    results = result_message(("c1", "read"))
    assert history.turns([calling, results])[0][1] is results


def test_render_one_line_per_message() -> None:
    h = [
        history.user("read the config"),
        {
            "role": "assistant",
            "content": [
                {"type": "reasoning", "text": "I will read it"},
                {"type": "tool-call", "tool_call_id": "c1", "tool_name": "read", "input": {"path": "a.json"}},
            ],
        },
        result_message(("c1", "read"), value={"port": 8080}),
        history.user([{"type": "text", "text": "and this?"}, {"type": "image", "image": "https://x/y.png"}]),
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool-result",
                    "tool_call_id": "c2",
                    "tool_name": "rm",
                    "output": {"type": "execution-denied", "value": "no"},
                }
            ],
        },
    ]
    lines = history.render(h).splitlines()
    assert lines[0] == "user: read the config"
    assert lines[1] == 'assistant: [reasoning] I will read it [call read {"path": "a.json"}]'
    assert lines[2] == "tool: [read returned] " + json.dumps({"port": 8080})
    assert lines[3] == "user: and this? [image]"
    assert lines[4].startswith("tool: [rm denied]")
    assert len(lines) == len(h)


def test_render_keeps_one_line_per_message_even_for_multiline_text() -> None:
    h = [history.user("first line\nsecond line"), history.assistant("ok")]
    lines = history.render(h).splitlines()
    assert lines == ["user: first line\\nsecond line", "assistant: ok"]


def test_open_calls_counts_a_repeated_id_apart() -> None:
    """history.open_calls and call_ids.open_calls once disagreed when a server repeated an id: the
    history one called both `c1` calls answered by the one result, the other found one open."""
    h = [
        history.assistant(tool_calls=[{"id": "c1", "name": "read", "arguments": {"n": 1}}]),
        history.tool("c1", "read", "first"),
        history.assistant(tool_calls=[{"id": "c1", "name": "read", "arguments": {"n": 2}}]),
    ]
    assert [p["input"] for p in history.open_calls(h)] == [{"n": 2}]
