"""agentcore.context.build: turn-based selection by budget, and the learned token ratio."""

from __future__ import annotations

from agentcore import context, history
from agentcore._utils import tokens
from agentcore.context import SUMMARY_INTRO


def call_turn(call_id: str, size: int = 10) -> list[dict[str, object]]:
    return [
        history.assistant(tool_calls=[{"id": call_id, "name": "read", "arguments": {}}]),
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool-result",
                    "tool_call_id": call_id,
                    "tool_name": "read",
                    "output": {"type": "text", "value": "x" * size},
                }
            ],
        },
    ]


def ids(ctx: context.Context) -> list[str]:
    found = []
    for m in ctx.messages:
        if isinstance(m["content"], str):
            found.append(m["content"][:20])
        else:
            for p in m["content"]:
                if p.get("type") == "tool-call":
                    found.append(p["tool_call_id"])
    return found


def test_without_summary_everything_is_sent_reduced_to_role_and_content() -> None:
    h = [history.user("hi"), {**history.assistant("hello"), "id": "x", "usage": {}}]
    ctx = context.build(h, system="sys")
    assert ctx.messages == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
    ]
    assert ctx.system == "sys" and isinstance(ctx.tokens, int) and ctx.tokens > 0


def test_system_is_never_in_messages_and_summary_is_folded_into_it() -> None:
    h = [history.user("goal"), history.compact("we did A"), history.user("next")]
    ctx = context.build(h, system="Be brief.")
    assert all(m["role"] != "compact" for m in ctx.messages)
    assert ctx.system.startswith("Be brief.") and "we did A" in ctx.system and SUMMARY_INTRO in ctx.system


def test_only_the_latest_summary_is_folded() -> None:
    h = [
        history.user("goal"),
        history.compact("old summary"),
        history.user("b"),
        history.compact("new summary"),
    ]
    ctx = context.build(h)
    assert "new summary" in ctx.system and "old summary" not in ctx.system


def test_selection_keeps_goal_recent_turns_and_everything_after_the_summary() -> None:
    h: list[dict[str, object]] = [history.user("GOAL")]
    for i in range(10):
        h += call_turn(f"old{i}")
    h.append(history.compact("summary"))
    h += call_turn("new1")
    h.append(history.user("after"))
    ctx = context.build(h, max_context_tokens=100000)
    assert ids(ctx) == ["GOAL", "old7", "old8", "old9", "new1", "after"]


def test_call_and_result_are_never_split() -> None:
    h: list[dict[str, object]] = [history.user("GOAL")]
    for i in range(5):
        h += call_turn(f"c{i}", size=2000)
    h.append(history.compact("summary"))
    ctx = context.build(h, max_context_tokens=5000)
    calls = {
        p["tool_call_id"]
        for m in ctx.messages
        if isinstance(m["content"], list)
        for p in m["content"]
        if p.get("type") == "tool-call"
    }
    results = {p["tool_call_id"] for m in ctx.messages if m["role"] == "tool" for p in m["content"]}
    assert calls == results


def test_a_huge_first_message_does_not_crowd_out_the_budget() -> None:
    """Count-based selection kept a 200k-character first message forever; selection is by budget."""
    h: list[dict[str, object]] = [history.user("L" * 200_000)]
    for i in range(6):
        h += call_turn(f"c{i}")
    h.append(history.compact("summary"))
    ctx = context.build(h, max_context_tokens=20000)
    assert ctx.tokens < 20000 * 0.8
    assert all(not (isinstance(m["content"], str) and m["content"].startswith("LLL")) for m in ctx.messages)


def test_latest_user_turn_before_summary_is_kept_past_the_turn_count() -> None:
    h: list[dict[str, object]] = [history.user("GOAL"), history.user("LATEST" + "u" * 500)]
    for i in range(4):
        h += call_turn(f"c{i}")
    h.append(history.compact("summary"))
    ctx = context.build(h, max_context_tokens=10000)
    assert any(isinstance(m["content"], str) and m["content"].startswith("LATEST") for m in ctx.messages)
    assert ids(ctx)[-3:] == ["c1", "c2", "c3"]


def test_latest_user_turn_is_dropped_when_it_alone_exceeds_the_budget() -> None:
    h: list[dict[str, object]] = [history.user("GOAL"), history.user("U" * 50_000)]
    h += call_turn("c1")
    h.append(history.compact("summary"))
    ctx = context.build(h, max_context_tokens=10000)
    assert not any(isinstance(m["content"], str) and m["content"].startswith("UUU") for m in ctx.messages)


def test_reasoning_is_stripped_unless_the_protocol_owns_it_or_reasoning_is_on() -> None:
    signed = {
        "type": "reasoning",
        "text": "t",
        "provider_metadata": {"protocol": "anthropic", "signature": "s"},
    }
    plain = {"type": "reasoning", "text": "plain"}
    h = [history.user("q"), {"role": "assistant", "content": [signed, plain, {"type": "text", "text": "a"}]}]
    assert [p["type"] for p in context.build(h).messages[1]["content"]] == ["text"]
    kept = context.build(h, protocol="anthropic").messages[1]["content"]
    assert kept[0] == signed and len(kept) == 2
    assert len(context.build(h, reasoning=True).messages[1]["content"]) == 3


def test_empty_assistant_replies_are_not_sent() -> None:
    h = [history.user("q"), history.assistant(""), history.user("again")]
    assert [m["role"] for m in context.build(h).messages] == ["user", "user"]


def test_ratio_changes_the_estimate() -> None:
    h = [history.user("x" * 1000)]
    assert context.build(h, ratio=1.0).tokens > context.build(h, ratio=0.25).tokens * 3


def test_learned_ratio_rules() -> None:
    ratios = tokens.Ratios()
    key = ("chat", "u", "m")
    assert ratios.get(key) == tokens.DEFAULT_RATIO
    ratios.learn(key, 100, 90)  # under 200 chars: ignored
    assert ratios.get(key) == tokens.DEFAULT_RATIO
    ratios.learn(key, 1000, 250)  # first sample sets it
    assert ratios.get(key) == 0.25
    ratios.learn(key, 1000, 350)  # smoothed with weight 0.3
    assert abs(ratios.get(key) - (0.25 * 0.7 + 0.35 * 0.3)) < 1e-9
    before = ratios.get(key)
    ratios.learn(key, 1000, 5000)  # over 3x off: dropped
    assert ratios.get(key) == before
    ratios.learn(("chat", "u", "other"), 1000, 50_000)  # clamped to 2
    assert ratios.get(("chat", "u", "other")) == tokens.MAX_RATIO


def test_a_selection_that_starts_mid_task_opens_with_a_request_only_user_line() -> None:
    """Anthropic and Gemini reject a conversation that opens with the assistant."""
    h: list[dict[str, object]] = [history.user("U" * 50_000)]
    h += call_turn("c1")
    h.append(history.compact("summary"))
    ctx = context.build(h, max_context_tokens=10000)
    assert ctx.messages[0] == {"role": "user", "content": context.CONTINUE_PROMPT}
    assert all(m.get("content") != context.CONTINUE_PROMPT for m in h)


def test_the_characters_counted_are_those_of_the_request() -> None:
    """`chars` is the system prompt (summary folded in) + the selected messages + the tools."""
    h: list[dict[str, object]] = [history.user("first goal")]
    for n in range(6):
        h += call_turn(f"c{n}")
    h.append(history.compact("summary so far"))
    h += [history.user("after"), *call_turn("c9")]
    for budget in (128000, 400, float("inf")):
        ctx = context.build(h, system="sys", max_context_tokens=budget)
        assert ctx.chars == len(ctx.system) + tokens.messages_chars(ctx.messages)
