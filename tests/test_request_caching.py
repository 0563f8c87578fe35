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
from agentcore.call_ids import open_calls, used_ids
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
    budget: float = float("inf"),
    ratio: float | None = None,
) -> bytes:
    try:
        return _body(history, protocol, capabilities, fallback, reuse, budget, ratio)
    except Exception as error:  # bad input (an edit put a number in a text): the same failure either way
        return f"{type(error).__name__}: {error}".encode()


def _body(
    history: list[dict[str, Any]],
    protocol: str,
    capabilities: dict[str, bool],
    fallback: str,
    reuse: context.Reuse | None,
    budget: float,
    ratio: float | None,
) -> bytes:
    """The request body the loop would send for `history`, built the way the loop builds it."""
    ctx = context.build(
        history,
        system="Be brief.",
        tools=TOOLS,
        max_context_tokens=budget,
        ratio=ratio,
        protocol=protocol,
        reasoning=capabilities.get("reasoning", False),
        reuse=reuse,
    )
    messages = list(ctx.messages)
    memo = memo_module.active()
    if memo is not None:
        memo.built = (messages, len(messages), ctx.shape)  # what the loop does: the adapters may reuse them
    request = Request(
        model="m",
        messages=messages,
        system=ctx.system,
        tools=TOOLS,
        base_url="http://127.0.0.1:1",
        capabilities=capabilities,
        media_fallback=fallback,
    )
    wire = get(protocol).build(request)
    encoded = encoded_body(wire.body, memo)  # json.dumps of the body without a memo
    return encoded + f" chars={ctx.chars} tokens={ctx.tokens}".encode()


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
def odd_entries(draw: st.DrawFn) -> list[dict[str, Any]]:
    """What a store or a hand-written history may hold: a result alone (for a call before it, after
    it, or none), a reply whose results were stored before it, replies in a row."""
    kind = draw(st.sampled_from(["result", "results first", "replies"]))
    if kind == "result":
        return [h.tool(draw(call_ids), "step", draw(texts))]
    if kind == "results first":
        turn = draw(turn_entries())
        return [*turn[1:], turn[0]]
    return [h.assistant(draw(texts)), h.assistant(draw(texts))]


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = [draw(user_entries())]
    for _ in range(draw(st.integers(0, 5))):
        entries.extend(
            draw(st.one_of(turn_entries(), user_entries().map(lambda e: [e]), summaries, odd_entries()))
        )
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


ROLES = ["user", "assistant", "tool", "system", "compact"]


def list_edit(history: list[dict[str, Any]], kind: str, i: int, j: int, entry: dict[str, Any]) -> None:
    """An edit of the list or of one entry's shape, between sends."""
    if not history:
        history.append(entry)
        return
    i, j = i % len(history), j % len(history)
    if kind == "insert":
        history.insert(i, entry)
    elif kind == "remove":
        del history[i]
    elif kind == "swap":
        history[i], history[j] = history[j], history[i]
    elif kind == "copy":  # an equal entry in its place, as a reloaded store gives
        history[i] = copy.deepcopy(history[i])
    elif kind == "role":  # another role, in place
        role = history[i].get("role")
        history[i]["role"] = ROLES[((ROLES.index(role) if role in ROLES else 0) + j + 1) % len(ROLES)]
    elif kind == "part":  # a part added to, or the content replaced in, an entry itself
        content = history[i].get("content")
        if isinstance(content, list):
            content.append({"type": "text", "text": "added"})
        else:
            history[i]["content"] = [{"type": "text", "text": str(content)}]


edits = st.lists(
    st.one_of(
        st.tuples(st.just("append"), turn_entries()),
        st.tuples(st.just("one by one"), turn_entries()),  # a run's steps: a reply before its results
        st.tuples(st.just("append"), st.one_of(user_entries().map(lambda e: [e]), summaries)),
        st.tuples(st.sampled_from(["append", "one by one"]), odd_entries()),
        st.tuples(st.just("replace"), histories()),
        st.tuples(st.just("load"), st.none()),
        st.tuples(st.just("edit"), st.tuples(st.integers(0, 50), scalars)),
        st.tuples(
            st.sampled_from(["insert", "remove", "swap", "copy", "role", "part"]),
            st.tuples(st.integers(0, 60), st.integers(0, 60), user_entries()),
        ),
    ),
    max_size=6,
)
capability_sets = st.fixed_dictionaries(
    {"image": st.booleans(), "reasoning": st.booleans(), "usage": st.booleans()}
).map(lambda c: {**DEFAULT_CAPABILITIES, **c})
# The default budget (the selection of turns around a summary), a small one (turns dropped by
# budget) and one large enough to send everything.
budgets = st.sampled_from([128000, 40, float("inf")])
# The learned token ratio moves between sends: what the selection weighs changes with it.
ratio_lists = st.lists(st.sampled_from([None, 0.25, 0.6, 1.5]), min_size=8, max_size=8)


def sends(
    first: list[dict[str, Any]], steps: list[tuple[str, Any]]
) -> Iterator[tuple[list[dict[str, Any]], bool]]:
    """Each history to build, and whether it is the first build of a send (a new run).

    Every step is a send; what a user does (appends, a replaced or loaded list, edits in place)
    comes between sends, and within a send the loop only appends ("one by one": a build after
    each entry, as each step of a run builds the next request).
    """
    history = first
    yield history, True
    for kind, arg in steps:
        if kind == "append":
            history.extend(arg)
        elif kind == "one by one":
            for n, entry in enumerate(arg[:-1]):
                history.append(entry)
                yield history, n == 0
            history.extend(arg[-1:])
            if len(arg) > 1:
                yield history, False
                continue
        elif kind == "replace":
            history = arg
        elif kind == "load":
            history = json.loads(json.dumps(history))
        elif kind == "edit":
            in_place_edit(history, *arg)
        else:
            list_edit(history, kind, *arg)
        yield history, True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=histories(),
    steps=edits,
    protocol=st.sampled_from(PROTOCOLS),
    capabilities=capability_sets,
    fallback=st.sampled_from(["strip", "error"]),
    budget=budgets,
    ratios=ratio_lists,
)
def test_the_same_bytes_with_and_without_the_caches(
    first: list[dict[str, Any]],
    steps: list[tuple[str, Any]],
    protocol: str,
    capabilities: dict[str, bool],
    fallback: str,
    budget: float,
    ratios: list[float | None],
) -> None:
    """Sends over a random history with random edits between them: every request body is the
    same bytes as the one built from scratch, for the four protocols and three budgets."""
    assert_same_bytes(first, steps, lambda n: (protocol, capabilities, fallback), budget, ratios)


settings_of_sends = st.lists(
    st.tuples(st.sampled_from(PROTOCOLS), capability_sets, st.sampled_from(["strip", "error"])),
    min_size=1,
    max_size=4,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=histories(), steps=edits, budget=budgets, ratios=ratio_lists, chosen=settings_of_sends)
def test_the_same_bytes_when_the_protocol_or_capabilities_change_between_sends(
    first: list[dict[str, Any]],
    steps: list[tuple[str, Any]],
    budget: float,
    ratios: list[float | None],
    chosen: list[tuple[str, dict[str, bool], str]],
) -> None:
    """`send(config=...)` may change the protocol and the capabilities from one send to the next."""
    assert_same_bytes(first, steps, lambda n: chosen[n % len(chosen)], budget, ratios)


def assert_same_bytes(
    first: list[dict[str, Any]],
    steps: list[tuple[str, Any]],
    settings_for: Any,
    budget: float,
    ratios: list[float | None],
) -> None:
    plain_first, plain_steps = copy.deepcopy(first), copy.deepcopy(steps)
    expected, runs = [], -1
    with caching(False):
        for n, (hist, new_run) in enumerate(sends(plain_first, plain_steps)):
            runs += new_run
            expected.append(body(hist, *settings_for(runs), None, budget, ratios[n % len(ratios)]))
    memo, reuse = Memo(), context.Reuse()  # one of each for all the sends, as an agent keeps them
    got, runs = [], -1
    with caching(True), activated(memo):
        for n, (hist, new_run) in enumerate(sends(first, steps)):
            if new_run:
                reuse.new_run()
                memo.new_run()
            runs += new_run
            args = (*settings_for(runs), reuse, budget, ratios[n % len(ratios)])
            # Every history twice: a hit must give what the miss gave.
            got.append((body(hist, *args), body(hist, *args)))
    assert got == [(e, e) for e in expected]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=histories(), steps=edits)
def test_the_call_ids_and_open_calls_the_fold_knows_are_those_in_history(
    first: list[dict[str, Any]], steps: list[tuple[str, Any]]
) -> None:
    reuse = context.Reuse()
    for hist, new_run in sends(first, steps):
        if new_run:
            reuse.new_run()
            # What a send asks first (agent._write_input): the calls still waiting for a result.
            known_open = reuse.open_calls(hist)
            assert known_open is None or known_open == open_calls(hist)
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


# ---------------------------------------------------------------- the kept fold: one test per rule


def a_turn(n: int) -> list[dict[str, Any]]:
    call = {"id": f"call{n}", "name": "step", "arguments": {"n": n}}
    return [h.assistant(f"step {n}", tool_calls=[call]), h.tool(f"call{n}", "step", f"done {n}")]


CAPS = dict(DEFAULT_CAPABILITIES)


def fresh(history: list[dict[str, Any]], protocol: str = "chat", **kwargs: Any) -> bytes:
    with caching(False):
        return body(history, protocol, CAPS, "error", None, **kwargs)


def kept_turns(reuse: context.Reuse, history: list[dict[str, Any]], protocol: str = "chat") -> list[Any]:
    fold = reuse.fold(history, protocol, False)
    assert fold is not None
    return list(fold.turns)


def same_objects(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_growing_history_is_folded_only_where_it_grew(protocol: str) -> None:
    """Rule: within a run, the fold stands while history opens with the entries it folded; a build
    folds only what was appended (the turns before are the very objects of the last build)."""
    history, reuse = [h.user("go")], context.Reuse()
    before: list[Any] = []
    for n in range(30):
        history.extend(a_turn(n))
        with activated(Memo()):
            assert body(history, protocol, CAPS, "error", reuse) == fresh(history, protocol)
        now = kept_turns(reuse, history, protocol)
        assert same_objects(now[: len(before)], before) and len(now) == len(before) + (2 if n == 0 else 1)
        before = now
    assert reuse.call_ids(history) == used_ids(history) == {f"call{n}" for n in range(30)}
    history.append(h.user("one more"))
    assert reuse.call_ids(history) is None  # not what the latest build covered


def test_the_fold_is_kept_from_send_to_send_when_history_is_unchanged_or_equal() -> None:
    """Rule: a new run compares each folded entry's role and content with its snapshot; entries
    replaced by equal ones (a session reloaded from its store) keep the fold, now trusting them."""
    history, reuse = [h.user("go"), *a_turn(0), *a_turn(1)], context.Reuse()
    first = kept_turns(reuse, history)
    reuse.new_run()
    assert same_objects(kept_turns(reuse, history), first)
    loaded = json.loads(json.dumps(history))
    reuse.new_run()
    assert same_objects(kept_turns(reuse, loaded), first)
    assert reuse.fold(loaded, "chat", False) is not None and reuse.call_ids(loaded) == used_ids(loaded)


EDITS_BETWEEN_SENDS = {
    "text in place": lambda history: history[0].update(content="another start"),
    "deep in place": lambda history: history[2]["content"][0]["output"].update(value="changed"),
    "bool for int": lambda history: history[1]["content"][1]["input"].update(n=True),  # == 0 in Python
    "float for int": lambda history: history[1]["content"][1]["input"].update(n=0.0),
    "role in place": lambda history: history[3].update(role="user"),
    "parts instead": lambda history: history[0].update(
        content=[{"type": "text", "text": "go"}, {"type": "text", "text": "on"}]
    ),
    "part added": lambda history: history[2]["content"].append(
        h.tool_result_part("call0", "step", {"type": "text", "value": "+"})
    ),
    "entry replaced": lambda history: history.__setitem__(0, h.user("another start")),
    "inserted": lambda history: history.insert(1, h.user("inserted")),
    "removed": lambda history: history.__delitem__(slice(3, 5)),
    "reordered": lambda history: history.__setitem__(slice(1, 5), history[3:5] + history[1:3]),
    "summary inserted": lambda history: history.insert(3, h.compact("a summary")),
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("edit", EDITS_BETWEEN_SENDS.values(), ids=EDITS_BETWEEN_SENDS.keys())
def test_an_edit_between_sends_gives_the_request_built_from_scratch(edit: Any, protocol: str) -> None:
    """Rule: whatever changed between sends shows in the comparison, and the fold is made again."""
    history, reuse, memo = [h.user("go"), *a_turn(0), *a_turn(1)], context.Reuse(), Memo()
    with activated(memo):
        first = body(history, protocol, CAPS, "error", reuse)
    edit(history)
    reuse.new_run()
    memo.new_run()
    with activated(memo):
        edited = body(history, protocol, CAPS, "error", reuse)
    assert edited == fresh(history, protocol) != first
    history.extend(a_turn(5))  # and it goes on from there
    with activated(memo):
        assert body(history, protocol, CAPS, "error", reuse) == fresh(history, protocol)


def test_within_a_run_only_the_entry_objects_are_checked() -> None:
    """Rule: during a run the loop is history's only writer, so an entry edited in place during a
    run (by a listener, say) is seen from the next run on; a replaced entry is seen at once."""
    history, reuse = [h.user("go"), *a_turn(0)], context.Reuse()
    first = body(history, "chat", CAPS, "error", reuse)
    history[0]["content"] = "edited during the run"
    assert body(history, "chat", CAPS, "error", reuse) == first
    reuse.new_run()
    assert body(history, "chat", CAPS, "error", reuse) == fresh(history) != first
    history[0] = h.user("replaced during the run")
    assert body(history, "chat", CAPS, "error", reuse) == fresh(history)


CUTS = {
    "a second result for a folded call": [h.tool("call0", "step", "again")],
    "a result folded before its call": [h.assistant("x", tool_calls=[{"id": "early", "name": "step"}])],
    "a call id used again": [h.assistant("x", tool_calls=[{"id": "call0", "name": "step"}])],
    "an entry that is not a dict": [type("Entry", (dict,), {})(role="user", content="odd")],
}


@pytest.mark.parametrize("tail", CUTS.values(), ids=CUTS.keys())
def test_a_cut_that_would_split_a_turn_folds_the_whole_history(tail: list[Any]) -> None:
    """Rule: the fold is extended only where the cut before the new entries splits no turn; else
    the build starts over from the whole history (duplicate ids renamed), as without `reuse`."""
    history = [h.user("go"), h.tool("early", "step", "stored first"), *a_turn(0)]
    reuse = context.Reuse()
    body(history, "chat", CAPS, "error", reuse)
    history.extend(tail)
    assert body(history, "chat", CAPS, "error", reuse) == fresh(history)
    # The next build folds the whole history at once (when its ids are unique), and goes on.
    history.extend(a_turn(1))
    assert body(history, "chat", CAPS, "error", reuse) == fresh(history)


def test_a_reply_continuing_the_last_turn_folds_that_turn_again_keeping_its_messages() -> None:
    """Rule: a reply right after a reply joins its turn; when that turn is exactly the last
    entries, only it is folded again, and the messages it had keep their objects, so the next
    request still opens with the very messages of the one before (its wire text is reused)."""
    history, reuse, memo = [h.user("go"), *a_turn(0), h.assistant("first")], context.Reuse(), Memo()
    with activated(memo):
        body(history, "chat", CAPS, "error", reuse)
        turns_before, wire_before = kept_turns(reuse, history), memo.wire.wire
        history.append(h.assistant("second, in the same turn"))
        assert body(history, "chat", CAPS, "error", reuse) == fresh(history)
    turns_after = kept_turns(reuse, history)
    assert same_objects(turns_after[:-1], turns_before[:-1]) and len(turns_after) == len(turns_before)
    assert turns_after[-1].reduced[0] is turns_before[-1].reduced[0]
    assert same_objects(memo.wire.wire[: len(wire_before)], wire_before)


def test_a_reply_continuing_a_turn_stored_out_of_order_folds_the_whole_history() -> None:
    history = [h.user("go"), h.tool("c1", "step", "stored before its call")]
    history.append(h.assistant("x", tool_calls=[{"id": "c1", "name": "step"}]))
    reuse = context.Reuse()
    body(history, "chat", CAPS, "error", reuse)
    history.append(h.assistant("continues that turn"))
    assert body(history, "chat", CAPS, "error", reuse) == fresh(history)


def test_a_call_waiting_for_its_result_is_folded_but_not_kept() -> None:
    """Rule: when the new entries leave a call without its result, the build uses their fold but
    keeps the one before: the result will join that call's turn."""
    history, reuse = [h.user("go")], context.Reuse()
    base = kept_turns(reuse, history)
    reply, result = a_turn(0)
    history.append(reply)
    assert body(history, "chat", CAPS, "error", reuse) == fresh(history)
    history.append(result)
    assert same_objects(kept_turns(reuse, history)[:1], base)
    assert body(history, "chat", CAPS, "error", reuse) == fresh(history)


def test_other_settings_make_a_new_fold() -> None:
    """Rule: a turn's reduced messages depend on the protocol and on capabilities.reasoning."""
    history = [
        h.user("go"),
        h.assistant([{"type": "reasoning", "text": "hm"}, {"type": "text", "text": "x"}]),
    ]
    reuse = context.Reuse()
    for protocol, reasoning in (("chat", False), ("chat", True), ("anthropic", True), ("chat", False)):
        caps = {**CAPS, "reasoning": reasoning}
        with activated(Memo()):
            got = body(history, protocol, caps, "error", reuse)
        with caching(False):
            assert got == body(history, protocol, caps, "error")


def test_the_open_calls_a_send_closes_come_from_the_fold_when_it_can_tell() -> None:
    """Rule: a send answers the calls history left open (entries.close_open_calls); the fold says
    which from the entries it has not folded, unless a call there shares an id with its own."""
    history, reuse = [h.user("go"), *a_turn(0)], context.Reuse()
    body(history, "chat", CAPS, "error", reuse)
    history.append(h.assistant("x", tool_calls=[{"id": "open", "name": "step"}]))
    reuse.new_run()
    assert reuse.open_calls(history) == open_calls(history) != []
    history.append(h.assistant("y", tool_calls=[{"id": "call0", "name": "step"}]))
    reuse.new_run()
    assert reuse.open_calls(history) is None  # shares an id with a folded call: walk the history
    history[0]["content"] = "edited"
    reuse.new_run()
    assert reuse.open_calls(history) is None  # the fold no longer describes history


def test_the_memo_keeps_its_entries_for_one_run_and_the_latest_wire_forms_for_the_next() -> None:
    """Rule: the per-entry memo serves the run that filled it and is emptied when a run begins or
    ends; what the next send reuses is the kept fold and the latest request's wire forms."""
    history, memo, reuse = [h.user("go"), *a_turn(0)], Memo(), context.Reuse()
    with activated(memo):
        body(history, "anthropic", CAPS, "error", reuse)
    assert len(memo) > 0 and memo.built is not None and memo.wire is not None
    wire = memo.wire
    memo.new_run()
    assert len(memo) == 0 and memo.built is None and memo.wire is wire


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
        if n % 5 == 0:  # a new send now and then: nothing changed, so nothing is rendered again
            reuse.new_run()
            memo.new_run()
        with activated(memo):
            cached = body(history, protocol, caps, "error", reuse)
        assert cached == body(history, protocol, caps, "error")
        # The two new entries (reply, result): their token counts and their wire forms only.
        assert len(computed) <= 4, (n, len(computed))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_body_text_of_earlier_messages_is_reused_and_equal_to_json_dumps(protocol: str) -> None:
    """Rule: the wire forms of the build's messages are reused when the request opens with the very
    message objects of the latest request (`memo.built` is the request's own list), and their JSON
    text when the body holds those wire objects as they are."""
    history, reuse, caps = [h.user("go")], context.Reuse(), dict(DEFAULT_CAPABILITIES)
    memo = Memo()
    for n in range(10):
        history.extend(a_turn(n))
        if n == 5:
            reuse.new_run()
            memo.new_run()
        with activated(memo):
            cached = body(history, protocol, caps, "error", reuse)
        assert cached == body(history, protocol, caps, "error")
    assert memo.wire is not None and len(memo.wire.wire) >= 20
    if protocol != "anthropic":  # its turns merge entries: made anew for each request
        assert memo.wire.texted == len(memo.wire.wire) and len(memo.wire.text) >= 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_selection_that_no_longer_needs_its_opening_line_is_rendered_again(protocol: str) -> None:
    """Rule: a request reuses what it rendered for the messages of the one before when both have
    the same shape (fold.Shape): the same selected turns, the same opener line (or none), then the
    fold's later messages; a request that opens with the user where the last one needed the
    request-only opener line has another shape."""
    history = [h.user("x" * 4000), h.compact("a summary")]  # nothing before it fits: the opener alone
    reuse, memo = context.Reuse(), Memo()
    for entry in (None, h.user("after the summary"), *a_turn(1)):
        if entry is not None:
            history.append(entry)
        with activated(memo):
            got = body(history, protocol, CAPS, "error", reuse, budget=600)
        assert got == fresh(history, protocol, budget=600)


def test_the_wire_forms_are_reused_only_for_the_render_settings_they_were_made_with() -> None:
    history = [h.user([{"type": "text", "text": "look"}, {"type": "image", "image": PNG}]), *a_turn(0)]
    reuse, memo = context.Reuse(), Memo()
    for image in (True, False, True):
        caps = {**CAPS, "image": image}
        with activated(memo):
            got = body(history, "chat", caps, "strip", reuse)
        with caching(False):
            assert got == body(history, "chat", caps, "strip")


def test_the_body_text_is_reused_only_where_the_body_holds_all_the_wire_forms() -> None:
    history, memo = [h.user("go"), *a_turn(0)], Memo()
    with activated(memo):
        body(history, "chat", CAPS, "error", context.Reuse())
    wire = memo.wire.wire
    for messages in (
        [wire[0], {"role": "user", "content": "other"}],
        [*wire[:-1], {"role": "user", "content": "x"}],
    ):
        made = {"model": "m", "messages": messages}
        assert (
            encoded_body(made, memo) == json.dumps(made, ensure_ascii=False, separators=(",", ":")).encode()
        )


def test_the_body_text_is_json_dumps_even_when_the_wire_forms_are_not_the_builds() -> None:
    history, memo = [h.user("go"), *a_turn(0)], Memo()
    with activated(memo):
        body(history, "chat", CAPS, "error", context.Reuse())
        memo.built = None  # a hook or text mode made the messages: not the build's own
        wire = get("chat").build(
            Request(model="m", messages=[dict(m) for m in history[:1]], system="", base_url="http://x/v1")
        )
        assert (
            encoded_body(wire.body, memo)
            == json.dumps(wire.body, ensure_ascii=False, separators=(",", ":")).encode()
        )


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
