"""Compaction against a model whose context is smaller than the agent was told (issues 24, 25).

The server here answers as llama.cpp's `llama-server -c 8192` does: a prompt of 8192 tokens or
more is refused with HTTP 400 `request (N tokens) exceeds the available context size (8192
tokens), try increasing it` (tools/server/server-context.cpp), anything smaller is answered. It
counts a request's tokens as its body's bytes / 4, and reports the same count as usage, so the
client's learned tokens-per-character ratio follows it as it would follow a real tokenizer.

What must hold: the overflow compacts and resends on every protocol the server speaks; the
summary request itself fits (prompt + its output bound within the context); the limit the
server named is remembered, so later rounds compact before the server has to refuse; and every
summary request carries an output bound, on each protocol.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agentcore import Agent, AgentError, tool
from agentcore.compact import SUMMARY_MAX_TOKENS, SUMMARY_SYSTEM
from agentcore.testing import ModelServer, Recorded

MakeAgent = Callable[..., Agent]
N_CTX = 8192
SERVED = ["chat", "responses", "anthropic"]  # llama-server's paths (no Gemini)


def is_summary(recorded: Recorded) -> bool:
    return SUMMARY_SYSTEM[:40] in recorded.raw.decode("utf-8", "replace")


def output_bound(body: dict[str, Any]) -> int | None:
    """The output bound a request body carries, whatever its protocol."""
    for key in ("max_tokens", "max_output_tokens", "max_completion_tokens"):
        if key in body:
            return int(body[key])
    generation = body.get("generationConfig") or {}
    return generation.get("maxOutputTokens")


class LlamaServer:
    """`llama-server -c 8192`: refuses prompts that do not fit, answers the others by `reply`."""

    def __init__(self, reply: Callable[[Recorded], Any], n_ctx: int = N_CTX) -> None:
        self.n_ctx = n_ctx
        self.reply = reply
        self.refused = 0
        self.accepted: list[tuple[int, int | None, bool]] = []  # (prompt tokens, bound, summary?)

    def __call__(self, recorded: Recorded) -> Any:
        tokens = len(recorded.raw) // 4
        if tokens >= self.n_ctx:
            self.refused += 1
            message = (
                f"request ({tokens} tokens) exceeds the available context size ({self.n_ctx} tokens), "
                "try increasing it"
            )
            error = {"code": 400, "message": message, "type": "exceed_context_size_error"}
            body = {"error": {**error, "n_prompt_tokens": tokens, "n_ctx": self.n_ctx}}
            return {
                "status": 400,
                "body": json.dumps(body),
                "content_type": "application/json; charset=utf-8",
                "headers": {"Server": "llama.cpp"},
            }
        self.accepted.append((tokens, output_bound(recorded.body), is_summary(recorded)))
        return self.reply(recorded)


def _answer(recorded: Recorded) -> str:
    return (
        "SUMMARY: the user asked about the history; nothing is pending." if is_summary(recorded) else "done"
    )


def _long_history(turns: int = 40) -> list[dict[str, Any]]:
    """A conversation of about 14k tokens at 4 bytes a token: more than the server holds."""
    history: list[dict[str, Any]] = []
    for n in range(turns):
        history.append({"role": "user", "content": f"question {n}: " + "why is the sky blue? " * 30})
        history.append(
            {"role": "assistant", "content": [{"type": "text", "text": f"answer {n}. " + "light. " * 60}]}
        )
    return history


@pytest.mark.parametrize("protocol", SERVED)
def test_an_overflow_compacts_with_a_summary_request_that_fits_and_the_resend_succeeds(
    protocol: str, make_agent: MakeAgent
) -> None:
    """Issue 24 defect 2: the summary request carried the whole history and overflowed too."""
    llama = LlamaServer(_answer)
    with ModelServer(default=llama) as server:
        agent = make_agent(server, protocol=protocol, history=_long_history())
        result = agent.send("what did we find?")
    assert result.text == "done" and result.steps == 1
    assert llama.refused == 1, "only the first request, sent before the limit was known, is refused"
    summaries = [entry for entry in llama.accepted if entry[2]]
    assert len(summaries) == 1
    tokens, bound, _ = summaries[0]
    assert bound is not None and tokens + bound <= N_CTX, "the summary's prompt and output fit the context"
    assert [m["role"] for m in result.messages] == ["user", "compact", "assistant"]


@tool
def read_log(part: int) -> str:
    """Read one part of the log.

    Args:
        part: The part number.
    """
    return f"part {part}: " + "a line of the log. " * 100


def test_the_named_limit_is_remembered_so_later_rounds_compact_before_the_server_refuses(
    make_agent: MakeAgent,
) -> None:
    """After one refusal, the 8192 the server named is the budget: no request is refused again."""
    calls = 0

    def reply(recorded: Recorded) -> Any:
        nonlocal calls
        if is_summary(recorded):
            return f"SUMMARY: parts 1 to {calls} of the log were read; all lines are fine."
        calls += 1
        return {"tool_calls": [{"name": "read_log", "arguments": {"part": calls}}]}

    llama = LlamaServer(reply)
    with ModelServer(default=llama) as server:
        agent = make_agent(server, tools=[read_log], max_steps=40)  # max_context_tokens left at 128000
        result = agent.send("read the whole log, part by part")
    assert result.reason == "step-limit"
    summaries = [entry for entry in llama.accepted if entry[2]]
    assert llama.refused == 1 and len(summaries) >= 3, (llama.refused, len(summaries))
    assert all(tokens < N_CTX for tokens, _, _ in llama.accepted)
    assert all(tokens + (bound or 0) <= N_CTX for tokens, bound, summary in llama.accepted if summary)


def test_an_overflow_of_the_summary_request_itself_is_raised_and_its_limit_kept(
    make_agent: MakeAgent,
) -> None:
    """The compaction model has a smaller context than the main one: its refusal is raised (API.md),
    and the next compaction fits the limit it named."""
    with ModelServer(default=LlamaServer(_answer, n_ctx=1000)) as small, ModelServer(["fine"]) as big:
        agent = make_agent(big, compact={"base_url": small.base_url}, history=_long_history(8))
        with pytest.raises(AgentError) as caught:
            agent.compact()
        assert caught.value.overflow and [m["role"] for m in agent.history].count("compact") == 0
        assert agent.compact().startswith("SUMMARY")
        summary = small.log[-1]
    assert len(summary.raw) // 4 + output_bound(summary.body) <= 1000  # type: ignore[operator]


# ---------------------------------------------------------------- the summary's output bound (issue 25)

PROTOCOLS = ["chat", "responses", "anthropic", "gemini"]


def _summary_bound(make_agent: MakeAgent, protocol: str, **config: Any) -> int | None:
    with ModelServer(["SUMMARY"]) as server:
        agent = make_agent(server, protocol=protocol, history=_long_history(2), **config)
        agent.compact()
        return output_bound(server.requests[0])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_summary_request_carries_an_output_bound(protocol: str, make_agent: MakeAgent) -> None:
    """Issue 25 defect 1: chat and responses sent none, anthropic sent 8192 whatever max_tokens said."""
    assert _summary_bound(make_agent, protocol) == SUMMARY_MAX_TOKENS
    assert _summary_bound(make_agent, protocol, max_tokens=300) == 300
    assert _summary_bound(make_agent, protocol, provider={"max_output_tokens": 400}, max_tokens=9000) == 400


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_compact_provider_sets_the_bound_within_half_the_context(
    protocol: str, make_agent: MakeAgent
) -> None:
    own = {"provider": {"max_output_tokens": 3000}}
    assert _summary_bound(make_agent, protocol, compact=own, max_tokens=300) == 3000
    assert _summary_bound(make_agent, protocol, compact=own, max_context_tokens=4000) == 2000
    # A small context gets a short default summary: an eighth of it.
    assert _summary_bound(make_agent, protocol, max_context_tokens=8192) == 1024


def test_a_long_system_prompt_leaves_the_summary_only_what_the_context_has_left(
    make_agent: MakeAgent,
) -> None:
    """The bound never exceeds what the context leaves once the prompt is in (estimated)."""
    system = "Always follow this rule. " * 520  # about 7,800 of the 8,192 tokens at the default ratio
    bound = _summary_bound(make_agent, "chat", max_context_tokens=8192, system=system)
    assert bound is not None and 256 <= bound < 1024


def test_a_summary_cut_by_its_bound_is_logged(
    make_agent: MakeAgent, caplog: pytest.LogCaptureFixture
) -> None:
    with ModelServer([{"text": "SUMMARY: a long", "finish_reason": "length"}]) as server:
        agent = make_agent(server, history=_long_history(2))
        with caplog.at_level("WARNING", logger="agentcore"):
            assert agent.compact() == "SUMMARY: a long"
    assert any("output bound" in r.getMessage() for r in caplog.records)
