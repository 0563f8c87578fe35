"""Fallback models (API.md §Fallback models and budgets): faults injected into the primary move
the next attempt to the next model at once; the answer comes from the first model that works;
the history stays valid for both protocols and goes on on either.

Primaries fail the way real servers do (tests/fault_servers.py): a refused port, uvicorn stalling
or dying mid-stream, 500 and 429 answers; the fallback is fakellm (a third-party OpenAI/Anthropic
mock server) speaking the Anthropic protocol, or our ModelServer where a test reads the bodies.
Backoff delays are set to 10 minutes: a run that waited between models would hit the suite's
timeout instead of passing.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fault_servers import PARTIAL, ChatFault, FakeLLM, refused_port
from history_checks import history_is_valid

from agentcore import Agent, AgentError, tool
from agentcore.testing import ModelServer

NEVER = {"retry_base_delay": 600.0, "retry_max_delay": 600.0}
CLAUDE = "claude-fallback"
FAKE_RULES = [
    {"name": "claude", "when": {"model_matches": "claude-*"}, "respond": {"content": "Answer from Claude."}},
    {"name": "primary-500", "when": {"model_matches": "p500"}, "respond": {"status": 500, "error": "down"}},
    {"name": "primary-429", "when": {"model_matches": "p429"}, "respond": {"status": 429, "error": "slow"}},
    {"name": "gpt", "when": {"model_matches": "gpt-*"}, "respond": {"content": "Answer from GPT."}},
]


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    return f"value of {key}"


def _retries(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "retry"]


def _texts(history: list[dict[str, Any]]) -> str:
    return json.dumps(history)


@pytest.fixture
def fake(tmp_path: Path) -> Any:
    with FakeLLM(FAKE_RULES, tmp_path) as server:
        yield server


@pytest.mark.parametrize("fault", ["refused", "stall", "drop-after-deltas", "500", "429"])
def test_a_failing_primary_is_answered_by_the_fallback_at_once(fault: str, fake: FakeLLM) -> None:
    """Whatever the fault, the next attempt goes to the Anthropic fallback with no wait."""
    with _primary(fault, fake) as (base_url, model, extra):
        fallback = {"base_url": fake.base_url, "protocol": "anthropic", "model": CLAUDE, "api_key": "k2"}
        config = {"base_url": base_url, "model": model, **NEVER, **extra, "fallback": [fallback]}
        seen: list[dict[str, Any]] = []
        with Agent(config=config) as agent:
            agent.subscribe(seen.append)
            result = agent.send("hello")
    assert result.text == "Answer from Claude."
    assert result.model == CLAUDE
    reply = agent.history[-1]
    assert reply["model"] == CLAUDE and reply["fallback"] is True and reply["attempts"] == 2
    retries = _retries(seen)
    assert [(r["model"], r["delay"]) for r in retries] == [(CLAUDE, 0.0)]
    assert "PARTIAL" not in _texts(agent.history)  # a dropped or stalled stream's text never lands
    assert fake.answered().get("claude") == 1
    # The partial reply of the primary opened a message and never closed it; the fallback's did.
    ends = [e for e in seen if e["type"] == "message_end" and e["message"]["role"] == "assistant"]
    assert [e["message"]["model"] for e in ends] == [CLAUDE]


class _primary:
    """The failing primary for `fault`: (base_url, model, extra config)."""

    def __init__(self, fault: str, fake: FakeLLM) -> None:
        self.fault, self.fake = fault, fake
        self._close: Any = None

    def __enter__(self) -> tuple[str, str, dict[str, Any]]:
        if self.fault == "refused":
            self._close = refused_port()
            return self._close.__enter__(), "gpt-primary", {}
        if self.fault in ("stall", "drop-after-deltas"):
            self._close = ChatFault("stall" if self.fault == "stall" else "drop")
            self._close.__enter__()
            return self._close.base_url, "gpt-primary", {"stream_idle_timeout": 0.5}
        # fakellm answers a rule's status only to a request that does not stream.
        return self.fake.base_url, "p" + self.fault, {"stream": False}

    def __exit__(self, *exc: object) -> None:
        if self._close is not None:
            self._close.__exit__(*exc)


def test_fakellm_on_both_protocols_keeps_the_conversation_going(fake: FakeLLM) -> None:
    """Primary chat (429) → Anthropic fallback; then a healthy chat model; three sends, one history."""
    fallback = [{"base_url": fake.base_url, "protocol": "anthropic", "model": CLAUDE}]
    config = {"base_url": fake.base_url, "model": "p429", "stream": False, **NEVER, "fallback": fallback}
    with Agent(config=config) as agent:
        assert agent.send("one").model == CLAUDE
        healthy = agent.send("two", config={"model": "gpt-4o"})
        assert healthy.text == "Answer from GPT." and healthy.model == "gpt-4o"
        assert "fallback" not in agent.history[-1]
        again = agent.send("three", config={"model": "p500"})
        assert again.model == CLAUDE
    assert fake.answered() == {"primary-429": 1, "claude": 2, "gpt": 1, "primary-500": 1}
    assert history_is_valid(agent.history)


# ---------------------------------------------------------------- the history on both protocols


def test_the_history_continues_valid_on_either_protocol() -> None:
    """Tool rounds answered by an Anthropic fallback (with signed thinking) and by the chat
    primary, alternately: every body each server receives is valid for its protocol, Anthropic's
    signed thinking goes back to Anthropic only, and no call is left without its result."""
    with ModelServer() as primary, ModelServer() as anthropic:
        primary.add(
            {"status": 503, "error": "overloaded"},  # round 1 → fallback
            {"tool_calls": [{"name": "lookup", "id": "p1", "arguments": {"key": "b"}}]},  # round 2
            {"status": 500, "error": "down"},  # round 3 → fallback
            "All done, from the primary.",  # send 2, round 1
        )
        anthropic.add(
            {
                "reasoning": "I should look a up.",
                "tool_calls": [{"name": "lookup", "id": "toolu_1", "arguments": {"key": "a"}}],
            },
            {"reasoning": "Both known.", "text": "a and b are known."},
        )
        fallback = [{"base_url": anthropic.base_url, "protocol": "anthropic", "model": CLAUDE}]
        config = {"base_url": primary.base_url, "model": "gpt-4o", **NEVER, "fallback": fallback}
        with Agent(config=config, tools=[lookup]) as agent:
            first = agent.send("look up a and b", config={"no_tool_rounds": 1})
            second = agent.send("thanks")
        assert first.text == "a and b are known." and first.model == CLAUDE
        assert second.text == "All done, from the primary." and second.model == "gpt-4o"
        models = [m.get("model") for m in agent.history if m["role"] == "assistant"]
        assert models == [CLAUDE, "gpt-4o", CLAUDE, "gpt-4o"]
        assert history_is_valid(agent.history)
        chat_bodies = [body for body in primary.requests if body.get("messages")]
        for body in chat_bodies:
            assert _chat_problems(body) == []
            assert "signature" not in json.dumps(body) and "thinking" not in json.dumps(body)
        for body in anthropic.requests:
            assert _anthropic_problems(body) == []
        # Anthropic gets its own signed thinking back: the second request carries the first's.
        blocks = anthropic.requests[1]["messages"][1]["content"]
        assert blocks[0]["type"] == "thinking" and blocks[0]["signature"]


def _chat_problems(body: dict[str, Any]) -> list[str]:
    """Chat completions rules: each assistant tool call answered by a tool message right after."""
    problems: list[str] = []
    messages = body["messages"]
    for index, message in enumerate(messages):
        calls = [c["id"] for c in message.get("tool_calls") or []]
        answers = []
        for later in messages[index + 1 :]:
            if later["role"] != "tool":
                break
            answers.append(later["tool_call_id"])
        if sorted(calls) != sorted(answers):
            problems.append(f"message {index}: calls {calls} answered by {answers}")
        if message["role"] == "tool" and not any(
            m.get("tool_calls") and message["tool_call_id"] in [c["id"] for c in m["tool_calls"]]
            for m in messages[:index]
        ):
            problems.append(f"message {index}: a result for no call")
    return problems


def _anthropic_problems(body: dict[str, Any]) -> list[str]:
    """Messages API rules: roles alternate from a user turn; each tool_use is answered by a
    tool_result in the next user message; thinking blocks carry a signature."""
    problems: list[str] = []
    messages = body["messages"]
    if not messages or messages[0]["role"] != "user":
        problems.append("the first message is not the user's")
    for index, message in enumerate(messages):
        if index and message["role"] == messages[index - 1]["role"]:
            problems.append(f"message {index}: two {message['role']} messages in a row")
        blocks = message["content"] if isinstance(message["content"], list) else []
        uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
        if any(b.get("type") == "thinking" and not b.get("signature") for b in blocks):
            problems.append(f"message {index}: thinking without its signature")
        if uses:
            following = messages[index + 1]["content"] if index + 1 < len(messages) else []
            results = [b.get("tool_use_id") for b in following if b.get("type") == "tool_result"]
            if sorted(uses) != sorted(results):
                problems.append(f"message {index}: tool_use {uses} answered by {results}")
    return problems


# ---------------------------------------------------------------- which errors move


def test_request_and_auth_errors_stay_on_the_model(server: ModelServer) -> None:
    with ModelServer() as backup:
        backup.add("from the backup")
        server.add(
            {"status": 400, "error": "bad field"}, {"status": 401, "error": "bad key"}, "from the primary"
        )
        fallback = [{"base_url": backup.base_url, "model": "backup"}]
        config = {
            "base_url": server.base_url,
            "model": "main",
            "retry_base_delay": 0.01,
            "fallback": fallback,
        }
        seen: list[dict[str, Any]] = []
        with Agent(config=config) as agent:
            agent.subscribe(lambda event: seen.append(event) if event["type"] == "retry" else None)
            result = agent.send("go")
        assert result.text == "from the primary" and result.model == "main"
        assert [p["model"] for p in seen] == ["main", "main"]
        assert [p["delay"] > 0 for p in seen] == [True, True]  # the usual backoff on the same model
        assert backup.requests == []
        assert "fallback" not in agent.history[-1]


def test_fallback_on_lists_the_kinds_that_move(server: ModelServer) -> None:
    with ModelServer() as backup:
        backup.add("from the backup")
        server.add({"status": 400, "error": "unsupported field"})
        fallback = [{"base_url": backup.base_url, "model": "backup"}]
        config = {"base_url": server.base_url, "model": "main", **NEVER, "fallback": fallback}
        with Agent(config={**config, "fallback_on": ["request"]}) as agent:
            assert agent.send("go").model == "backup"
        # A 500 is retried on the primary when "server" is not listed.
        server.add({"status": 500, "error": "down"}, "primary again")
        quick = {**config, "retry_base_delay": 0.01, "fallback_on": ["request"]}
        with Agent(config=quick) as agent:
            assert agent.send("go").model == "main"
        assert len(backup.requests) == 1


def test_after_the_last_model_the_chain_starts_again_at_the_primary(server: ModelServer) -> None:
    with ModelServer() as second, ModelServer() as third:
        server.add({"status": 500, "error": "a"}, "primary, second time round")
        second.add({"status": 503, "error": "b"})
        third.add({"status": 429, "error": "c"})
        fallback = [
            {"base_url": second.base_url, "model": "second"},
            {"base_url": third.base_url, "model": "third"},
        ]
        config = {
            "base_url": server.base_url,
            "model": "first",
            "retry_base_delay": 0.02,
            "fallback": fallback,
        }
        seen: list[dict[str, Any]] = []
        with Agent(config=config) as agent:
            agent.subscribe(lambda event: seen.append(event) if event["type"] == "retry" else None)
            result = agent.send("go")
        assert result.model == "first" and result.text == "primary, second time round"
        assert [(p["model"], p["delay"]) for p in seen] == [("second", 0.0), ("third", 0.0), ("first", 0.02)]
        assert agent.history[-1]["attempts"] == 4


def test_retry_max_elapsed_bounds_the_waits_not_the_switches(server: ModelServer) -> None:
    """retry_max_elapsed 0 (no retries, as the CLI's --retry-for 0) still tries each model once."""
    with ModelServer() as backup:
        server.add({"status": 500, "error": "down"})
        backup.add({"status": 500, "error": "down too"})
        fallback = [{"base_url": backup.base_url, "model": "backup"}]
        config = {"base_url": server.base_url, "model": "main", "retry_max_elapsed": 0, "fallback": fallback}
        with Agent(config=config) as agent, pytest.raises(AgentError) as caught:
            agent.send("go")
        assert caught.value.kind == "server" and "down too" in caught.value.message
        assert len(server.requests) == len(backup.requests) == 1


# ---------------------------------------------------------------- cancellation


def test_cancel_stops_the_chain_at_once(server: ModelServer) -> None:
    """A stop while the primary stalls ends the send; the fallback is never asked."""
    with ModelServer() as backup:
        backup.add("never asked")
        server.add({"stall_before_headers": True})
        fallback = [{"base_url": backup.base_url, "model": "backup"}]
        config = {"base_url": server.base_url, "model": "main", **NEVER, "fallback": fallback}
        agent = Agent(config=config)
        failure: list[BaseException] = []

        def send() -> None:
            try:
                agent.send("go")
            except BaseException as error:
                failure.append(error)

        worker = threading.Thread(target=send)
        worker.start()
        assert server.stalled.wait(30)
        assert agent.stop() is True
        worker.join(30)
        agent.close()
    assert not worker.is_alive()
    assert isinstance(failure[0], AgentError) and failure[0].kind == "aborted"
    assert backup.requests == []
    assert history_is_valid(agent.history)


def test_cancel_during_the_fallbacks_stream_keeps_its_text(server: ModelServer) -> None:
    """Cut mid-reply on the fallback: the text that arrived is kept, recorded as the fallback's."""
    with ModelServer() as backup:
        server.add({"status": 500, "error": "down"})
        backup.add({"text": "Half of a long answer " * 8, "stall_after": 3})
        fallback = [{"base_url": backup.base_url, "model": "backup"}]
        config = {"base_url": server.base_url, "model": "main", **NEVER, "fallback": fallback}
        with Agent(config=config) as agent:
            run = agent.stream("go")
            assert backup.stalled.wait(30)
            run.close()
        reply = agent.history[-1]
        assert reply["role"] == "assistant" and reply["model"] == "backup" and reply["fallback"] is True
        assert reply["content"][0]["text"].startswith("Half of")


# ---------------------------------------------------------------- connection keys


def test_a_key_is_never_sent_to_another_host(server: ModelServer) -> None:
    with ModelServer() as backup, ModelServer() as same_host:
        server.add({"status": 500, "error": "down"}, {"status": 500, "error": "down"})
        backup.add("backup")
        fallback = [{"base_url": backup.base_url, "model": "backup"}]
        config = {"base_url": server.base_url, "api_key": "sk-primary", "model": "main", **NEVER}
        with Agent(config={**config, "fallback": fallback}) as agent:
            agent.send("go")
        assert backup.log[-1].headers.get("authorization") is None
        # A fallback on the primary's own base_url (another model) keeps its key.
        server.add("second model")
        with Agent(config={**config, "fallback": [{"model": "cheaper"}]}) as agent:
            assert agent.send("go").model == "cheaper"
        assert server.log[-1].headers["authorization"] == "Bearer sk-primary"
        assert server.requests[-1]["model"] == "cheaper"
        assert same_host.requests == []
    assert "sk-primary" not in repr(Agent(config={**config, "fallback": [{"api_key": "sk-second"}]}).config)


def test_a_fallback_may_use_the_text_tool_protocol(server: ModelServer) -> None:
    with ModelServer() as chat_only:
        server.add({"status": 500, "error": "down"}, "the primary is back")
        chat_only.add('<tool_call>{"name": "lookup", "arguments": {"key": "k"}}</tool_call>')
        fallback = [{"base_url": chat_only.base_url, "model": "small", "tool_mode": "text"}]
        config = {
            "base_url": server.base_url,
            "model": "main",
            **NEVER,
            "fallback": fallback,
            "no_tool_rounds": 1,
        }
        with Agent(config=config, tools=[lookup]) as agent:
            result = agent.send("look k up")
        assert "tools" not in chat_only.requests[0]
        assert result.text == "the primary is back"
        tool_message = next(m for m in agent.history if m["role"] == "tool")
        assert tool_message["content"][0]["output"]["value"] == "value of k"
        assert "tools" in server.requests[1]  # back on the primary: native tools again


def test_budget_counts_attempts_on_every_model(server: ModelServer) -> None:
    with ModelServer() as backup:
        server.add({"status": 500, "error": "down"})
        backup.add({"tool_calls": [{"name": "lookup", "id": "c1", "arguments": {"key": "k"}}]})
        fallback = [{"base_url": backup.base_url, "model": "backup"}]
        config = {"base_url": server.base_url, "model": "main", **NEVER, "fallback": fallback}
        with Agent(config={**config, "limits": {"requests": 2}}, tools=[lookup]) as agent:
            result = agent.send("go")
        assert result.reason == "budget" and result.limit == {"name": "requests", "limit": 2, "used": 2}
        assert len(server.requests) == 1 and len(backup.requests) == 1


def test_fallback_prices_are_applied_to_its_usage(server: ModelServer) -> None:
    with ModelServer() as backup:
        server.add({"status": 500, "error": "down"})
        backup.add({"text": "cheap", "usage": {"input_tokens": 1000, "output_tokens": 100}})
        prices = {"main": {"input": 10.0, "output": 30.0}, "backup": {"input": 1.0, "output": 2.0}}
        fallback = [{"base_url": backup.base_url, "model": "backup"}]
        config = {
            "base_url": server.base_url,
            "model": "main",
            **NEVER,
            "fallback": fallback,
            "prices": prices,
        }
        with Agent(config=config) as agent:
            result = agent.send("go")
        assert result.cost == pytest.approx((1000 * 1.0 + 100 * 2.0) / 1e6)


def test_partial_text_of_a_dropped_stream_is_announced_then_discarded() -> None:
    """The UI sees the primary's deltas, then `retry` naming the fallback, then the fallback's reply."""
    with ChatFault("drop") as primary, ModelServer() as backup:
        backup.add("a whole answer")
        fallback = [{"base_url": backup.base_url, "model": "backup"}]
        config = {"base_url": primary.base_url, "model": "main", **NEVER, "fallback": fallback}
        with Agent(config=config) as agent, agent.stream("go") as run:
            events = list(run)
    kinds = [e["type"] for e in events]
    deltas = [e["delta"].get("text") for e in events if e["type"] == "message_update"]
    assert deltas[: len(PARTIAL[:2])] == PARTIAL[:2]
    retry = kinds.index("retry")
    assert events[retry]["model"] == "backup"
    assert "message_end" not in kinds[kinds.index("message_update") : retry]
    assert run.result.text == "a whole answer"


def test_compaction_goes_along_the_chain_too(server: ModelServer) -> None:
    """The primary is down when a summary is due: the fallback writes it, and answers the round."""
    with ModelServer() as backup:
        long = "word " * 400
        server.add(
            {"tool_calls": [{"name": "lookup", "id": "c1", "arguments": {"key": long}}]},
            {"status": 503, "error": "down"},  # the summary request
            {"status": 503, "error": "down"},  # round 2
        )
        backup.add("summary written by the backup", "answer from the backup")
        fallback = [{"base_url": backup.base_url, "model": "backup"}]
        config = {"base_url": server.base_url, "model": "main", **NEVER, "fallback": fallback}
        config.update(max_context_tokens=400, compact_threshold=0.5, no_tool_rounds=1)
        with Agent(config=config, tools=[lookup]) as agent:
            result = agent.send("go")
        compact = next(m for m in agent.history if m["role"] == "compact")
        assert compact["content"] == "summary written by the backup" and compact["model"] == "backup"
        assert result.text == "answer from the backup" and result.model == "backup"
        assert history_is_valid(agent.history)


# ---------------------------------------------------------------- reasoning state across vendors

SECRET = "ENC-RESPONSES-SECRET"


def test_reasoning_state_goes_back_to_its_own_vendor_only(server: ModelServer) -> None:
    """A chain of three protocols — Responses, then Gemini, then Anthropic — over one history that
    holds each one's opaque reasoning state: every vendor gets back its own state and never another's."""
    from agentcore.testing.encoders import anthropic as anthropic_wire
    from agentcore.testing.encoders import gemini as gemini_wire

    earlier = [
        {"role": "user", "content": "earlier"},
        {
            "role": "assistant",
            "model": "gpt-resp",
            "content": [
                {
                    "type": "reasoning",
                    "text": "",
                    "provider_metadata": {"protocol": "responses", "id": "rs_1", "encrypted_content": SECRET},
                },
                {"type": "text", "text": "ok"},
            ],
        },
    ]
    with ModelServer() as gemini, ModelServer() as anthropic:
        down = {"status": 500, "error": "down"}
        server.add(down, down, down, "back on Responses")
        gemini.add(
            {"reasoning": "look", "tool_calls": [{"name": "lookup", "id": "g1", "arguments": {"key": "a"}}]},
            {"status": 503, "error": "overloaded"},
            "Gemini again.",
        )
        anthropic.add({"reasoning": "known now", "text": "a is known."})
        fallback = [
            {"base_url": gemini.base_url, "protocol": "gemini", "model": "gemini-fallback"},
            {"base_url": anthropic.base_url, "protocol": "anthropic", "model": CLAUDE},
        ]
        config = {"base_url": server.base_url, "protocol": "responses", "model": "gpt-resp", **NEVER}
        with Agent(config={**config, "fallback": fallback}, tools=[lookup], history=earlier) as agent:
            sends = [agent.send("look up a", config={"no_tool_rounds": 1})]
            sends += [agent.send("and?"), agent.send("ok")]
        assert [r.model for r in sends] == [CLAUDE, "gemini-fallback", "gpt-resp"]
        assert history_is_valid(agent.history)
        gemini_signature = gemini_wire.fake_signature("lookup")
        claude_signature = anthropic_wire.fake_signature("known now")
        assert len(gemini.requests) == 3 and len(anthropic.requests) == 1
        for body in gemini.requests:
            assert SECRET not in json.dumps(body) and claude_signature not in json.dumps(body)
        # Gemini gets its own signature back on its call (rounds after the call).
        for body in gemini.requests[1:]:
            calls = [p for c in body["contents"] for p in c["parts"] if "functionCall" in p]
            assert calls[0]["thoughtSignature"] == gemini_signature
        anthropic_body = json.dumps(anthropic.requests[0])
        assert SECRET not in anthropic_body and gemini_signature not in anthropic_body
        assert "thoughtSignature" not in anthropic_body
        last = json.dumps(server.requests[-1])
        assert SECRET in last  # Responses' own reasoning goes back by value
        assert gemini_signature not in last and claude_signature not in last
        assert "thoughtSignature" not in last


# ---------------------------------------------------------------- which errors move (auth)


def test_auth_moves_when_listed_in_fallback_on(server: ModelServer) -> None:
    """A key the primary refuses: with "auth" listed, the fallback (its own key) answers at once."""
    with ModelServer() as backup:
        backup.add("from the backup")
        server.add({"status": 401, "error": "bad key"})
        fallback = [{"base_url": backup.base_url, "model": "backup", "api_key": "sk-backup"}]
        config = {"base_url": server.base_url, "model": "main", **NEVER, "fallback": fallback}
        seen: list[dict[str, Any]] = []
        with Agent(config={**config, "fallback_on": ["auth", "server"]}) as agent:
            agent.subscribe(lambda event: seen.append(event) if event["type"] == "retry" else None)
            result = agent.send("go")
        assert result.model == "backup" and result.text == "from the backup"
        assert [(p["model"], p["delay"], p["error"]["kind"]) for p in seen] == [("backup", 0.0, "auth")]
        assert backup.log[-1].headers["authorization"] == "Bearer sk-backup"


# ---------------------------------------------------------------- cancellation (the wait)


def test_cancel_during_the_wait_after_the_last_model(server: ModelServer) -> None:
    """Both models failed; the run waits (10 minutes) before the primary again: a stop ends it at
    once, with no further request."""
    with ModelServer() as backup:
        server.add({"status": 500, "error": "down"}, "never asked")
        backup.add({"status": 500, "error": "down too"})
        fallback = [{"base_url": backup.base_url, "model": "backup"}]
        config = {"base_url": server.base_url, "model": "main", **NEVER, "fallback": fallback}
        waiting = threading.Event()
        agent = Agent(config=config)
        agent.subscribe(lambda e: waiting.set() if e["type"] == "retry" and e["delay"] > 0 else None)
        failure: list[BaseException] = []

        def send() -> None:
            try:
                agent.send("go")
            except BaseException as error:
                failure.append(error)

        worker = threading.Thread(target=send)
        worker.start()
        assert waiting.wait(30)
        assert agent.stop() is True
        worker.join(60)  # the wait is 600 s: joining at all means the stop ended it
        alive = worker.is_alive()
        agent.close()
    assert not alive
    assert isinstance(failure[0], AgentError) and failure[0].kind == "aborted"
    assert len(server.requests) == 1 and len(backup.requests) == 1
    assert history_is_valid(agent.history)


# ---------------------------------------------------------------- stress: cancels at random instants


def test_cancels_at_random_instants_over_the_chain() -> None:
    """Many sends over a chain (a chat primary that fails in every way, an Anthropic fallback that
    streams tool rounds slowly), stopped at random instants: after each, the history is valid;
    after close(), no agentcore thread is left."""
    import random

    rng = random.Random(20261202)
    faults: list[Any] = [
        {"status": 500, "error": "down"},
        {"status": 429, "error": "slow down"},
        {"text": "PARTIAL words of the primary", "drop_after": 2},
    ]
    before = {t for t in threading.enumerate() if t.name.startswith("agentcore")}
    with ModelServer() as primary, ModelServer() as backup:
        fallback = [{"base_url": backup.base_url, "protocol": "anthropic", "model": CLAUDE}]
        config = {"base_url": primary.base_url, "model": "gpt-4o", **NEVER, "fallback": fallback}
        agent = Agent(config={**config, "no_tool_rounds": 1}, tools=[lookup])
        for number in range(40):
            primary.add(*[rng.choice(faults) for _ in range(3)])
            call = {"name": "lookup", "id": f"t{number}", "arguments": {"key": str(number)}}
            backup.add(
                {"tool_calls": [call], "chunk_delay": 0.002},
                {"text": "done " * 20, "chunk_delay": 0.002},
                {"text": "done " * 20, "chunk_delay": 0.002},
            )
            timer = threading.Timer(rng.uniform(0, 0.08), agent.stop)
            timer.start()
            start, aborted = len(agent.history), False
            try:
                agent.send(f"task {number}")
            except AgentError as error:
                assert error.kind == "aborted"
                aborted = True
            timer.join()
            assert history_is_valid(agent.history), number
            # The primary's text is kept only as a reply a stop cut, never once it was retried.
            holding = [m for m in agent.history[start:] if "PARTIAL" in _texts([m])]
            assert holding == [] or (aborted and holding == [agent.history[-1]]), number
            assert all(m.get("model") == "gpt-4o" and "fallback" not in m for m in holding)
        agent.close()
    # Threads end soon after close(); the wait only outlasts a busy machine's scheduling.
    for _ in range(300):
        left = [t.name for t in threading.enumerate() if t.name.startswith("agentcore") and t not in before]
        if not left:
            break
        time.sleep(0.1)
    assert left == []


# ---------------------------------------------------------------- calibration per model


def test_the_token_ratio_is_learned_for_the_model_that_answered(server: ModelServer) -> None:
    """The fallback's usage calibrates the fallback's ratio, never the primary's."""
    from agentcore._utils import tokens
    from agentcore.connection import Connection

    with ModelServer() as backup:
        server.add({"status": 500, "error": "down"})
        backup.add({"text": "ok", "usage": {"input_tokens": 3000, "output_tokens": 5}})
        fallback = [{"base_url": backup.base_url, "model": "backup"}]
        config = {"base_url": server.base_url, "model": "main", "system": "S" * 4000, **NEVER}
        with Agent(config={**config, "fallback": fallback}) as agent:
            assert agent.send("hello").model == "backup"
        primary_key = Connection.of(agent.config).model_key
        backup_key = Connection.of({**agent.config, **fallback[0]}).model_key
    assert primary_key != backup_key
    assert tokens.ratios.get(primary_key) == tokens.DEFAULT_RATIO
    assert tokens.ratios.get(backup_key) != tokens.DEFAULT_RATIO
