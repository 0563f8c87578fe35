"""The per-run caches never change a request, byte for byte.

Those are the memo (agentcore/_utils/memo.py) and the reused prefix of the context build
(`context.Reuse`). Each case builds the request body of a sequence of sends twice: once with
one memo across all of them and one `Reuse` for as long as history is only added to or
swapped for another list, once with caching switched off; between sends the history is edited
the ways a user may edit it (appended entries, a reply whose results come a send later, a
replaced list, a loaded history, an in-place edit of an entry: a new run, so a new `Reuse`,
as in the loop). The bodies must be equal bytes, for all four protocols.
"""

from __future__ import annotations

import copy
import gc
import json
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore import Agent, context, tool
from agentcore import history as h
from agentcore._utils import memo as memo_module
from agentcore._utils import tokens
from agentcore._utils.memo import Memo, activated, snapshot
from agentcore.call_ids import used_ids
from agentcore.protocols import get
from agentcore.protocols._common import encoded_body
from agentcore.protocols.base import DEFAULT_CAPABILITIES, Request
from agentcore.testing import ModelServer

PROTOCOLS = ("chat", "responses", "anthropic", "gemini")
PNG = "data:image/png;base64,iVBORw0KGgo="
TOOLS = [{"name": "step", "description": "One step.", "input_schema": {"type": "object", "properties": {}}}]


@contextmanager
def caching(enabled: bool) -> Iterator[None]:
    saved = memo_module.ENABLED
    memo_module.ENABLED = enabled
    try:
        yield
    finally:
        memo_module.ENABLED = saved


def body(
    history: list[dict[str, Any]],
    protocol: str,
    capabilities: dict[str, bool],
    fallback: str,
    reuse: context.Reuse | None = None,
) -> bytes:
    try:
        return _body(history, protocol, capabilities, fallback, reuse)
    except Exception as error:  # bad input (an edit put a number in a text): the same failure either way
        return f"{type(error).__name__}: {error}".encode()


def _body(
    history: list[dict[str, Any]],
    protocol: str,
    capabilities: dict[str, bool],
    fallback: str,
    reuse: context.Reuse | None,
) -> bytes:
    ctx = context.build(
        history,
        system="Be brief.",
        tools=TOOLS,
        max_context_tokens=float("inf"),
        protocol=protocol,
        reasoning=capabilities.get("reasoning", False),
        reuse=reuse,
    )
    memo = memo_module.active()
    if memo is not None:
        memo.built = list(map(id, ctx.messages))  # what the loop does: the adapters may reuse them
    request = Request(
        model="m",
        messages=ctx.messages,
        system=ctx.system,
        tools=TOOLS,
        base_url="http://127.0.0.1:1",
        capabilities=capabilities,
        media_fallback=fallback,
    )
    wire = get(protocol).build(request)
    encoded = encoded_body(wire.body, memo)  # json.dumps of the body without a memo
    return f"{encoded} chars={ctx.chars} tokens={ctx.tokens}".encode()


# ---------------------------------------------------------------- random histories

texts = st.text(alphabet="ab é\n{}", max_size=8)
scalars = st.one_of(st.integers(-3, 3), st.booleans(), st.floats(-2, 2, allow_nan=False), st.none(), texts)
arguments = st.dictionaries(st.sampled_from(["n", "path", "flag"]), scalars, max_size=3)
# Few ids: duplicates (a loaded history) come up; unique ones too, which a reused prefix needs.
call_ids = st.one_of(st.sampled_from(["c1", "c2", "c3"]), st.uuids().map(lambda u: f"u{u.hex[:8]}"))


@st.composite
def user_entries(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        return h.user(draw(texts))
    parts: list[dict[str, Any]] = [{"type": "text", "text": draw(texts)}]
    if draw(st.booleans()):
        parts.append({"type": "image", "image": PNG, "media_type": "image/png"})
    return h.user(parts)


@st.composite
def turn_entries(draw: st.DrawFn) -> list[dict[str, Any]]:
    """An assistant reply, and (mostly) the results of its calls."""
    parts: list[dict[str, Any]] = []
    if draw(st.booleans()):
        parts.append({"type": "reasoning", "text": draw(texts)})
    if draw(st.booleans()):
        parts.append({"type": "text", "text": draw(texts)})
    calls = draw(st.lists(st.tuples(call_ids, arguments), max_size=2))
    entries = [h.assistant(parts, tool_calls=[{"id": i, "name": "step", "arguments": a} for i, a in calls])]
    for call_id, _ in calls:
        if draw(st.booleans()):
            value = draw(st.one_of(texts, arguments, st.just([{"type": "image", "image": PNG}])))
            result = {"content": value} if isinstance(value, list) else value
            entries.append(h.tool(call_id, "step", result))
        else:
            entries.append(h.tool(call_id, "step", "fine"))
    return entries


summaries = texts.map(lambda text: [h.compact(f"summary {text}")])


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = [draw(user_entries())]
    for _ in range(draw(st.integers(0, 5))):
        entries.extend(draw(st.one_of(turn_entries(), user_entries().map(lambda e: [e]), summaries)))
    return entries


def in_place_edit(history: list[dict[str, Any]], choice: int, value: Any) -> None:
    """Change one leaf of one entry inside the dicts themselves (what a user or hook may do)."""
    leaves = list(_leaves(history))
    if not leaves:
        return
    container, key = leaves[choice % len(leaves)]
    container[key] = value


def _leaves(value: Any) -> Iterator[tuple[Any, Any]]:
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(item, (dict, list)):
            yield from _leaves(item)
        elif key not in ("role", "type", "tool_call_id"):
            yield value, key


edits = st.lists(
    st.one_of(
        st.tuples(st.just("append"), turn_entries()),
        st.tuples(st.just("one by one"), turn_entries()),  # a send sees a reply before its results
        st.tuples(st.just("append"), st.one_of(user_entries().map(lambda e: [e]), summaries)),
        st.tuples(st.just("replace"), histories()),
        st.tuples(st.just("load"), st.none()),
        st.tuples(st.just("edit"), st.tuples(st.integers(0, 50), scalars)),
    ),
    max_size=4,
)
capability_sets = st.fixed_dictionaries(
    {"image": st.booleans(), "reasoning": st.booleans(), "usage": st.booleans()}
).map(lambda c: {**DEFAULT_CAPABILITIES, **c})


def sends(
    first: list[dict[str, Any]], steps: list[tuple[str, Any]]
) -> Iterator[tuple[list[dict[str, Any]], bool]]:
    """Each history to build, and whether it follows an edit in place (then: the next run)."""
    history = first
    yield history, False
    for kind, arg in steps:
        if kind == "append":
            history.extend(arg)
        elif kind == "one by one":
            for entry in arg[:-1]:
                history.append(entry)
                yield history, False
            history.extend(arg[-1:])
        elif kind == "replace":
            history = arg
        elif kind == "load":
            history = json.loads(json.dumps(history))
        else:
            in_place_edit(history, *arg)
        yield history, kind == "edit"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=histories(),
    steps=edits,
    protocol=st.sampled_from(PROTOCOLS),
    capabilities=capability_sets,
    fallback=st.sampled_from(["strip", "error"]),
)
def test_the_same_bytes_with_and_without_the_memo(
    first: list[dict[str, Any]],
    steps: list[tuple[str, Any]],
    protocol: str,
    capabilities: dict[str, bool],
    fallback: str,
) -> None:
    plain_first, plain_steps = copy.deepcopy(first), copy.deepcopy(steps)
    with caching(False):
        expected = [
            body(hist, protocol, capabilities, fallback) for hist, _ in sends(plain_first, plain_steps)
        ]
    memo, reuse = Memo(), context.Reuse()
    got = []
    with caching(True), activated(memo):
        for hist, next_run in sends(first, steps):
            if next_run:
                reuse = context.Reuse()
            # Every history twice: a hit must give what the miss gave.
            got.append(
                (
                    body(hist, protocol, capabilities, fallback, reuse),
                    body(hist, protocol, capabilities, fallback, reuse),
                )
            )
    assert got == [(e, e) for e in expected]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=histories(), steps=edits)
def test_the_call_ids_a_build_knows_are_those_in_history(
    first: list[dict[str, Any]], steps: list[tuple[str, Any]]
) -> None:
    reuse = context.Reuse()
    for hist, next_run in sends(first, steps):
        if next_run:
            reuse = context.Reuse()
        body(hist, "chat", dict(DEFAULT_CAPABILITIES), "error", reuse)
        known = reuse.call_ids(hist)
        assert known is None or known == used_ids(hist)


# ---------------------------------------------------------------- the edits one by one


def a_history() -> list[dict[str, Any]]:
    return [
        h.user("hi"),
        h.assistant("look", tool_calls=[{"id": "c1", "name": "step", "arguments": {"n": 1}}]),
        h.tool("c1", "step", "one"),
    ]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_edit_in_place_is_seen(protocol: str) -> None:
    history = a_history()
    caps = dict(DEFAULT_CAPABILITIES)
    cached, fresh = [], []
    edits = [
        lambda: None,
        lambda: history[1]["content"][1]["input"].update(n=True),  # == 1 in Python, not on the wire
        lambda: history[2]["content"][0]["output"].update(value="two"),
        lambda: history[0].update(content=[{"type": "text", "text": "hello"}]),
    ]
    memo = Memo()
    for edit in edits:
        edit()
        with activated(memo):
            cached.append(body(history, protocol, caps, "error"))
        with caching(False):
            fresh.append(body(history, protocol, caps, "error"))
    assert cached == fresh
    assert len(set(cached)) == len(edits)  # every edit changed the request


def test_the_memo_serves_hits() -> None:
    history = a_history()
    memo = Memo()
    with activated(memo):
        body(history, "chat", dict(DEFAULT_CAPABILITIES), "error")
        filled = len(memo)
        body(history, "chat", dict(DEFAULT_CAPABILITIES), "error")
    assert filled > 0 and len(memo) == filled  # the second request adds nothing: all hits


def test_a_capability_change_renders_again() -> None:
    history = a_history()
    history[1]["content"].insert(0, {"type": "reasoning", "text": "thinking"})
    with activated(Memo()):
        without = body(history, "chat", {**DEFAULT_CAPABILITIES, "reasoning": False}, "error")
        with_reasoning = body(history, "chat", {**DEFAULT_CAPABILITIES, "reasoning": True}, "error")
    assert b"reasoning_content" in with_reasoning and b"reasoning_content" not in without


def test_no_memo_outside_a_run_means_no_caching() -> None:
    assert memo_module.active() is None
    content = [{"type": "text", "text": "abc"}]
    assert tokens.message_chars({"role": "user", "content": content}) == 7
    content[0]["text"] = "abcdef"
    assert tokens.message_chars({"role": "user", "content": content}) == 10


def test_snapshot_compares_scalars_by_type() -> None:
    value = {"a": [1, {"b": 1.0}], "c": None, "d": "x"}
    assert snapshot(value) == value
    assert snapshot(value) != {"a": [True, {"b": 1.0}], "c": None, "d": "x"}
    assert snapshot(value) != {"a": [1, {"b": 1}], "c": None, "d": "x"}
    odd = {"a": bytearray(b"x")}  # a leaf that could change unseen is never a hit
    assert snapshot(odd) != odd


# ---------------------------------------------------------------- the reused prefix of the context


def a_turn(n: int) -> list[dict[str, Any]]:
    call = {"id": f"call{n}", "name": "step", "arguments": {"n": n}}
    return [h.assistant(f"step {n}", tool_calls=[call]), h.tool(f"call{n}", "step", f"done {n}")]


def folded_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of entries each call of `history.turns` inside the context build folds."""
    sizes: list[int] = []
    original = context.turns

    def counting(entries: Any) -> Any:
        sizes.append(len(entries))
        return original(entries)

    monkeypatch.setattr(context, "turns", counting)
    return sizes


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_growing_history_is_folded_only_where_it_grew(
    protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    history, reuse, caps = [h.user("go")], context.Reuse(), dict(DEFAULT_CAPABILITIES)
    sizes = folded_sizes(monkeypatch)
    for n in range(30):
        history.extend(a_turn(n))
        with activated(Memo()):
            cached = body(history, protocol, caps, "error", reuse)
        with caching(False):
            assert cached == body(history, protocol, caps, "error")
    with_reuse = sizes[::2]  # each round builds with reuse, then without
    assert with_reuse == [3] + [2] * 29
    assert reuse.call_ids(history) == used_ids(history) == {f"call{n}" for n in range(30)}
    history.append(h.user("one more"))
    assert reuse.call_ids(history) is None  # not what the latest build checked


def test_a_reply_waiting_for_its_results_is_folded_again_then_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    history, reuse, caps = [h.user("go")], context.Reuse(), dict(DEFAULT_CAPABILITIES)
    sizes = folded_sizes(monkeypatch)
    reply, result = a_turn(1)
    for entry in (reply, result, *a_turn(2)):
        history.append(entry)
        cached = body(history, "chat", caps, "error", reuse)
        assert cached == body(history, "chat", caps, "error")
    # go+reply (open call: not kept), go+reply+result (kept), then the next reply, then its result
    assert sizes[::2] == [2, 3, 1, 2]


IN_PLACE = [
    lambda history: history[1]["content"][1]["input"].update(n=True),  # == 1 in Python only
    lambda history: history[2]["content"][0]["output"].update(value="changed"),
]


@pytest.mark.parametrize("edit", IN_PLACE, ids=["bool-for-int", "result"])
def test_an_edit_in_place_between_runs_gives_the_request_built_from_scratch(edit: Any) -> None:
    history, caps = [h.user("go"), *a_turn(0), *a_turn(1)], dict(DEFAULT_CAPABILITIES)
    memo = Memo()
    with activated(memo):
        first = body(history, "anthropic", caps, "error", context.Reuse())
    edit(history)
    with activated(memo):  # the memo remembers the entries' renderings: it must see the edit
        edited = body(history, "anthropic", caps, "error", context.Reuse())
    assert edited == body(history, "anthropic", caps, "error") != first


def test_an_edit_in_place_between_sends_reaches_the_next_request() -> None:
    script = [{"tool_calls": [{"name": "step", "arguments": {"n": 1}}]}, "one", "two"]
    with ModelServer(script) as server:
        agent = Agent(config={"base_url": server.base_url, "model": "m"}, tools=[step])
        agent.send("first question")
        # In place, between sends: a top-level value and one deep inside the tool result.
        agent.history[0]["content"] = "first question, edited"
        result = next(p for p in agent.history[2]["content"] if p["type"] == "tool-result")
        result["output"]["value"] = "an edited result"
        agent.send("second question")
        sent = server.requests[-1]["messages"]
        agent.close()
    assert next(m["content"] for m in sent if m["role"] == "user") == "first question, edited"
    assert [m["content"] for m in sent if m["role"] == "tool"] == ["an edited result"]


@pytest.mark.parametrize(
    "edit",
    [
        lambda history: history.__setitem__(0, h.user("another start")),
        lambda history: history.insert(1, h.user("inserted")),
        lambda history: history.__delitem__(slice(1, 3)),
        lambda history: history.insert(3, h.compact("a summary")),
        lambda history: history.append(h.tool("call0", "step", "a second result")),
        lambda history: history.append(h.assistant("no", tool_calls=[{"id": "call1", "name": "step"}])),
    ],
    ids=["replaced", "inserted", "deleted", "summary", "result-again", "id-again"],
)
def test_a_list_edit_between_builds_gives_the_request_built_from_scratch(edit: Any) -> None:
    history, reuse, caps = [h.user("go"), *a_turn(0), *a_turn(1)], context.Reuse(), dict(DEFAULT_CAPABILITIES)
    first = body(history, "anthropic", caps, "error", reuse)
    edit(history)
    edited = body(history, "anthropic", caps, "error", reuse)
    assert edited == body(history, "anthropic", caps, "error") != first
    history.extend(a_turn(5))
    assert body(history, "anthropic", caps, "error", reuse) == body(history, "anthropic", caps, "error")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_growing_request_renders_only_the_new_entries(protocol: str) -> None:
    history, reuse, caps = [h.user("go")], context.Reuse(), dict(DEFAULT_CAPABILITIES)
    memo = Memo()
    computed: list[int] = []
    original = memo.recall

    def counting(key: Any, source: Any, compute: Any) -> Any:
        computed.append(1)
        return original(key, source, compute)

    memo.recall = counting  # type: ignore[method-assign]
    for n in range(20):
        history.extend(a_turn(n))
        computed.clear()
        with activated(memo):
            cached = body(history, protocol, caps, "error", reuse)
        assert cached == body(history, protocol, caps, "error")
        # The two new entries (reply, result): their token counts and their wire forms only.
        assert len(computed) <= 4, (n, len(computed))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_body_text_of_earlier_messages_is_reused_and_equal_to_json_dumps(protocol: str) -> None:
    history, reuse, caps = [h.user("go")], context.Reuse(), dict(DEFAULT_CAPABILITIES)
    memo = Memo()
    for n in range(10):
        history.extend(a_turn(n))
        with activated(memo):
            cached = body(history, protocol, caps, "error", reuse)
        assert cached == body(history, protocol, caps, "error")
    if protocol != "anthropic":  # its turns merge entries: made anew for each request
        assert memo.encoded and len(next(iter(memo.encoded.values()))[1]) >= 20


def test_a_prepare_request_hook_editing_messages_in_place_changes_its_own_request_only() -> None:
    def reply(recorded: Any) -> dict[str, Any]:
        done = sum(1 for m in recorded.body["messages"] if m["role"] == "tool")
        if done < 3:
            return {"tool_calls": [{"name": "step", "arguments": {"n": done + 1}}]}
        return {"text": "done"}

    def prepare(request: dict[str, Any]) -> dict[str, Any]:
        if request["step"] == 2:
            for message in request["messages"]:
                if message["role"] == "user":
                    message["content"] = "edited by the hook"  # in place, in the message dicts given
        return request

    with ModelServer(default=reply) as server:
        config = {"base_url": server.base_url, "model": "m", "no_tool_rounds": 1}
        agent = Agent(config=config, tools=[step], hooks={"prepare_request": prepare})
        agent.send("go")
        bodies = [r["messages"] for r in server.requests]
    assert [m["content"] for m in bodies[1] if m["role"] == "user"] == ["edited by the hook"]
    assert [m["content"] for m in bodies[2] if m["role"] == "user"] == ["go"]
    assert not any(m["content"] == "edited by the hook" for later in bodies[2:] for m in later)


def three_steps(recorded: Any) -> dict[str, Any]:
    done = sum(1 for m in recorded.body["messages"] if m["role"] == "tool")
    if done < 3:
        return {"tool_calls": [{"name": "step", "arguments": {"n": done + 1}}]}
    return {"text": "done"}


def test_an_on_llm_start_callback_editing_messages_in_place_changes_no_request() -> None:
    def on_llm_start(payload: dict[str, Any]) -> None:
        for message in payload["messages"]:
            message["content"] = "edited by the callback"

    with ModelServer(default=three_steps) as server:
        config = {"base_url": server.base_url, "model": "m", "no_tool_rounds": 1}
        agent = Agent(config=config, tools=[step], callbacks={"on_llm_start": on_llm_start})
        agent.send("go")
        bodies = [r["messages"] for r in server.requests]
    assert len(bodies) == 4
    assert not any(m.get("content") == "edited by the callback" for later in bodies for m in later)


def test_a_custom_adapter_editing_messages_in_place_changes_no_later_request() -> None:
    from agentcore import Usage
    from agentcore.protocols.base import LLMResult, make_result, tool_call_part

    seen: list[list[Any]] = []

    class Editing:
        def chat(self, payload: dict[str, Any], **_: Any) -> LLMResult:
            seen.append([m["content"] for m in payload["messages"]])
            for message in payload["messages"]:
                message["content"] = "edited by the adapter"
            done = sum(1 for m in payload["messages"] if m["role"] == "tool")
            if done < 2:
                part = tool_call_part(f"c{done}", "step", {"n": done})
                return make_result([part], Usage.of(1, 1), "tool_calls", None)
            return make_result([{"type": "text", "text": "done"}], Usage.of(1, 1), "stop", None)

    agent = Agent(
        config={"model": Editing(), "no_tool_rounds": 1, "retry": lambda error: False}, tools=[step]
    )
    agent.send("go")
    assert len(seen) >= 2 and all(contents[0] == "go" for contents in seen)


# ---------------------------------------------------------------- memory


@tool
def step(n: int) -> str:
    """One step.

    Args:
        n: The step number.
    """
    return f"step {n}"


def test_nothing_stays_behind_after_1000_steps() -> None:
    """1,000 steps over 50 agents of 20 steps each: no agent's entries survive it."""
    agents, steps = 50, 20

    def reply(recorded: Any) -> dict[str, Any]:
        done = sum(1 for m in recorded.body["messages"] if m["role"] == "tool")
        server.log.clear()  # the server's own record of each request is not the agent's memory
        server.requests.clear()
        if done < steps:
            return {"tool_calls": [{"name": "step", "arguments": {"n": done + 1}}]}
        return {"text": "done"}

    def one_agent() -> int:
        agent = Agent(config={**config, "max_steps": steps + 5}, tools=[step])
        assert agent.send("go").steps == steps + 1
        size = _deep_size(agent.history)
        agent.close()
        return size

    with ModelServer(default=reply) as server:
        config = {
            "base_url": server.base_url,
            "model": "m",
            "max_context_tokens": float("inf"),
            "no_tool_rounds": 1,
        }
        one_agent()  # imports, the connection pool and the learned ratio, before measuring
        gc.collect()
        tracemalloc.start()
        try:
            baseline = tracemalloc.get_traced_memory()[0]
            history_size = max(one_agent() for _ in range(agents))
            gc.collect()
            left = tracemalloc.get_traced_memory()[0] - baseline
        finally:
            tracemalloc.stop()
    # A memo kept past its run would leave about one history per agent (50 of them) behind.
    assert left < history_size * 2, (left, history_size)


def _deep_size(value: Any) -> int:
    import sys

    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(_deep_size(k) + _deep_size(v) for k, v in value.items())
    elif isinstance(value, list):
        size += sum(_deep_size(v) for v in value)
    return size
