"""Retries: the policy and `call()` with injected time, then end to end through an Agent.

Unit tests never sleep: `sleep` and `now` are injected (a fake clock). The end-to-end tests
run an Agent against the local ModelServer with a tiny `retry_base_delay`, so the real retry
path — mid-stream failures included — runs over real sockets.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from background import Background

from agentcore import Agent, AgentError, tool
from agentcore._utils.cancel import Signal
from agentcore._utils.retry import RetryPolicy, call
from agentcore.testing import ModelServer

KEY = "sk-retry-secret-0123456789abcdef"


class Clock:
    """A fake clock: `sleep` advances `now` and records each wait."""

    def __init__(self) -> None:
        self.t = 1000.0
        self.waits: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.t += seconds
        return False


class Flaky:
    """An attempt that raises the given errors in order, then returns "ok"."""

    def __init__(self, *errors: AgentError) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def err(kind: str = "server", status: int | None = 500, message: str = "boom", **extra: Any) -> AgentError:
    return AgentError(message, kind=kind, status=status, **extra)


def run(attempt: Callable[[], str], policy: RetryPolicy, clock: Clock, **kwargs: Any) -> str:
    return call(attempt, policy, sleep=clock.sleep, now=clock.now, **kwargs)


def fails(attempt: Callable[[], str], policy: RetryPolicy, clock: Clock, **kwargs: Any) -> AgentError:
    with pytest.raises(AgentError) as caught:
        run(attempt, policy, clock, **kwargs)
    return caught.value


# How long a test waits for a call that must return; a passing run needs milliseconds, a
# regression waits on something far longer (a 60 s backoff, a stall that never ends).
JOIN_S = 30.0


# ---------------------------------------------------------------- backoff


def test_defaults_are_the_seed_rule() -> None:
    policy = RetryPolicy.from_config({})
    assert (policy.base_delay, policy.max_delay, policy.max_elapsed, policy.filter) == (
        5.0,
        600.0,
        None,
        None,
    )


def test_backoff_doubles_from_base_and_is_capped_without_jitter() -> None:
    clock = Clock()
    attempt = Flaky(*[err() for _ in range(9)])
    assert run(attempt, RetryPolicy(base_delay=5.0, max_delay=600.0), clock) == "ok"
    assert clock.waits == [5, 10, 20, 40, 80, 160, 320, 600, 600]
    assert attempt.calls == 10


def test_same_failures_give_the_same_waits_every_time() -> None:
    runs = []
    for _ in range(3):
        clock = Clock()
        run(Flaky(err(), err(), err()), RetryPolicy(base_delay=0.3, max_delay=1.0), clock)
        runs.append(clock.waits)
    assert runs[0] == runs[1] == runs[2] == [0.3, 0.6, 1.0]


def test_success_at_first_try_never_waits() -> None:
    clock = Clock()
    assert run(Flaky(), RetryPolicy(), clock) == "ok"
    assert clock.waits == []


def test_retry_after_replaces_the_computed_wait() -> None:
    clock = Clock()
    run(Flaky(err(), err(retry_after=42.0), err()), RetryPolicy(base_delay=5.0), clock)
    assert clock.waits == [5.0, 42.0, 20.0]


def test_retry_after_is_capped_by_max_delay() -> None:
    clock = Clock()
    run(Flaky(err(kind="limit", status=429, retry_after=3600.0)), RetryPolicy(max_delay=60.0), clock)
    assert clock.waits == [60.0]


def test_retry_after_zero_retries_at_once() -> None:
    clock = Clock()
    run(Flaky(err(kind="limit", status=429, retry_after=0.0)), RetryPolicy(), clock)
    assert clock.waits == [0.0]


# ---------------------------------------------------------------- max_elapsed


def test_gives_up_when_the_next_wait_would_end_past_max_elapsed() -> None:
    clock = Clock()
    # waits 1, 2, 4 end at 1, 3, 7; the next (8) would end at 15 > 10.
    attempt = Flaky(*[err(message=f"e{i}") for i in range(10)])
    error = fails(attempt, RetryPolicy(base_delay=1.0, max_elapsed=10.0), clock)
    assert clock.waits == [1.0, 2.0, 4.0]
    assert error.message == "e3"
    assert attempt.calls == 4


def test_a_wait_ending_exactly_at_max_elapsed_is_allowed() -> None:
    clock = Clock()
    run(Flaky(err(), err()), RetryPolicy(base_delay=1.0, max_elapsed=3.0), clock)
    assert clock.waits == [1.0, 2.0]


def test_time_spent_in_attempts_counts_toward_max_elapsed() -> None:
    clock = Clock()

    def slow_failure() -> str:
        clock.t += 9.0
        raise err()

    error = fails(slow_failure, RetryPolicy(base_delay=2.0, max_elapsed=10.0), clock)
    assert clock.waits == []
    assert error.kind == "server"


def test_max_elapsed_also_applies_to_retry_after() -> None:
    clock = Clock()
    fails(Flaky(err(kind="limit", status=429, retry_after=30.0)), RetryPolicy(max_elapsed=20.0), clock)
    assert clock.waits == []


# ---------------------------------------------------------------- what is retried


@pytest.mark.parametrize(
    "error",
    [
        err(kind="request", status=400, message="bad request"),
        err(kind="auth", status=401),
        err(kind="auth", status=403),
        err(kind="limit", status=429),
        err(kind="timeout", status=408),
        err(kind="timeout", status=None),
        err(kind="server", status=500),
        err(kind="server", status=529),
        err(kind="network", status=None),
        err(kind="unknown", status=200),
        err(kind="request", status=404),
    ],
    ids=lambda e: f"{e.kind}-{e.status}",
)
def test_everything_else_is_retried_by_default(error: AgentError) -> None:
    clock = Clock()
    attempt = Flaky(error)
    assert run(attempt, RetryPolicy(base_delay=1.0), clock) == "ok"
    assert attempt.calls == 2


@pytest.mark.parametrize(
    "error",
    [
        err(kind="aborted", status=None),
        err(kind="config", status=None),
        err(kind="tool", status=None),
        err(kind="request", status=400, overflow=True),
        err(kind="request", status=None, retryable=False),
    ],
    ids=["aborted", "config", "tool", "overflow", "local-validation"],
)
def test_never_retried_whatever_the_filter_says(error: AgentError) -> None:
    clock = Clock()
    attempt = Flaky(error)
    raised = fails(attempt, RetryPolicy(filter=lambda e: True), clock)
    assert raised is error
    assert attempt.calls == 1
    assert clock.waits == []


def test_local_media_validation_error_is_not_retried() -> None:
    """A request the capabilities forbid fails before any HTTP, and no retry can fix it."""
    from agentcore.protocols.base import allowed_parts

    with pytest.raises(AgentError) as caught:
        allowed_parts([{"type": "image", "image": "https://x/y.png"}], {"image": False}, "error")
    assert not RetryPolicy().allows(caught.value)


# ---------------------------------------------------------------- the retry filter


def test_callable_filter_decides() -> None:
    seen: list[AgentError] = []

    def only_server(error: AgentError) -> bool:
        seen.append(error)
        return error.kind == "server"

    clock = Clock()
    policy = RetryPolicy(base_delay=1.0, filter=only_server)
    assert run(Flaky(err(kind="server")), policy, clock) == "ok"
    limit = err(kind="limit", status=429)
    assert fails(Flaky(limit), policy, clock) is limit
    assert [e.kind for e in seen] == ["server", "limit"]


def test_filter_that_raises_means_no_retry(caplog: pytest.LogCaptureFixture) -> None:
    def broken(error: AgentError) -> bool:
        raise RuntimeError("filter bug")

    clock = Clock()
    with caplog.at_level(logging.WARNING, logger="agentcore"):
        fails(Flaky(err()), RetryPolicy(filter=broken), clock)
    assert clock.waits == []
    assert any("retry filter" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("rule", "error", "retried"),
    [
        ({"skip_codes": [400, 401]}, err(kind="request", status=400), False),
        ({"skip_codes": [400, 401]}, err(kind="auth", status=401), False),
        ({"skip_codes": [400, 401]}, err(kind="server", status=500), True),
        ({"skip_codes": [500]}, err(kind="network", status=None), True),
        ({"skip_kinds": ["auth", "limit"]}, err(kind="limit", status=429), False),
        ({"skip_kinds": ["auth", "limit"]}, err(kind="server", status=503), True),
        ({"skip_text": "QUOTA"}, err(message="You exceeded your quota"), False),
        ({"skip_text": "quota"}, err(message="x", body='{"error": "Insufficient Quota"}'), False),
        ({"skip_text": "quota"}, err(message="server overloaded"), True),
        ({"skip_text": ["nope", "overload"]}, err(message="Server Overloaded"), False),
        ({"skip_text": re.compile(r"billing|quota")}, err(message="check billing details"), False),
        ({"skip_text": re.compile(r"billing")}, err(message="x", body="see billing page"), False),
        ({"skip_text": re.compile(r"^quota")}, err(message="over quota"), True),
        ({"skip_text": re.compile(r"QUOTA")}, err(message="over quota"), True),
        ({"should_retry": lambda e: e.status != 502}, err(status=502), False),
        ({"should_retry": lambda e: e.status != 502}, err(status=503), True),
        ({"skip_codes": [], "skip_kinds": [], "should_retry": None}, err(), True),
    ],
)
def test_filter_dict_forms(rule: dict[str, Any], error: AgentError, retried: bool) -> None:
    clock = Clock()
    attempt = Flaky(error)
    policy = RetryPolicy(base_delay=1.0, filter=rule)
    if retried:
        assert run(attempt, policy, clock) == "ok"
    else:
        assert fails(attempt, policy, clock) is error
    assert attempt.calls == (2 if retried else 1)


def test_skip_text_is_checked_on_a_missing_body() -> None:
    clock = Clock()
    error = err(message="quota", body=None)
    assert fails(Flaky(error), RetryPolicy(filter={"skip_text": "QUOTA"}), clock) is error


def test_from_config_reads_the_retry_keys() -> None:
    rule = {"skip_codes": [401]}
    policy = RetryPolicy.from_config(
        {"retry_base_delay": 0.5, "retry_max_delay": 4.0, "retry_max_elapsed": 30.0, "retry": rule}
    )
    assert (policy.base_delay, policy.max_delay, policy.max_elapsed, policy.filter) == (0.5, 4.0, 30.0, rule)


# ---------------------------------------------------------------- on_retry and cancel


def test_on_retry_payload_attempt_error_delay() -> None:
    clock = Clock()
    first, second = err(message="one"), err(kind="limit", status=429, message="two", retry_after=7.0)
    payloads: list[dict[str, Any]] = []
    run(Flaky(first, second), RetryPolicy(base_delay=2.0), clock, on_retry=payloads.append)
    assert payloads == [
        {"attempt": 1, "error": first, "delay": 2.0},
        {"attempt": 2, "error": second, "delay": 7.0},
    ]


def test_on_retry_is_not_called_when_giving_up() -> None:
    clock = Clock()
    payloads: list[dict[str, Any]] = []
    fails(Flaky(err(kind="config")), RetryPolicy(), clock, on_retry=payloads.append)
    fails(Flaky(err(), err()), RetryPolicy(base_delay=5.0, max_elapsed=1.0), clock, on_retry=payloads.append)
    assert payloads == []


def test_cancel_set_before_the_first_attempt_raises_aborted() -> None:
    cancel = Signal()
    cancel.set()
    attempt = Flaky()
    with pytest.raises(AgentError) as caught:
        call(attempt, RetryPolicy(), cancel=cancel)
    assert caught.value.kind == "aborted"
    assert attempt.calls == 0


def test_error_while_cancelled_becomes_aborted_not_retried() -> None:
    cancel = Signal()
    original = err(kind="network", status=None)

    def attempt() -> str:
        cancel.set()
        raise original

    clock = Clock()
    error = fails(attempt, RetryPolicy(), clock, cancel=cancel)
    assert error.kind == "aborted"
    assert error.cause is original
    assert clock.waits == []


def test_cancel_interrupts_a_backoff_sleep_at_once() -> None:
    """Real Signal, real wait: a 60 s backoff ends as soon as the cancel is set."""
    cancel = Signal()
    retrying = threading.Event()
    attempt = Flaky(err(), err())
    policy = RetryPolicy(base_delay=60.0, max_delay=60.0)
    worker = Background(lambda: call(attempt, policy, cancel=cancel, on_retry=lambda p: retrying.set()))
    assert retrying.wait(JOIN_S)
    cancel.set()
    assert worker.join().agent_error().kind == "aborted"
    assert attempt.calls == 1  # the 60 s wait had not run out: no second attempt was made


def test_injected_sleep_reporting_interruption_raises_aborted() -> None:
    attempt = Flaky(err(), err())
    with pytest.raises(AgentError) as caught:
        call(attempt, RetryPolicy(), sleep=lambda s: True, now=lambda: 0.0)
    assert caught.value.kind == "aborted"
    assert attempt.calls == 1


# ---------------------------------------------------------------- end to end through an Agent


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


FAST = {"retry_base_delay": 0.001, "retry_max_delay": 0.01, "no_tool_rounds": 1}


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as s:
        yield s


def make_agent(server: ModelServer, **extra: Any) -> tuple[Agent, list[dict[str, Any]]]:
    retries: list[dict[str, Any]] = []
    config = {"base_url": server.base_url, "api_key": KEY, "model": "m", **FAST, **extra.pop("config", {})}
    callbacks = {"on_retry": retries.append, **extra.pop("callbacks", {})}
    return Agent(config=config, callbacks=callbacks, **extra), retries


def assert_clean_history(history: list[dict[str, Any]], *, forbidden: str) -> None:
    """No partial reply from a failed attempt ever reached history."""
    for message in history:
        assert forbidden not in repr(message["content"]), message


def test_500_then_success_is_one_step_with_one_retry(server: ModelServer) -> None:
    server.add({"status": 500, "error": "overloaded"}, "fine")
    agent, retries = make_agent(server)
    result = agent.send("hi")
    assert result.text == "fine"
    assert result.steps == 1
    assert result.reason == "finished"
    assert len(server.requests) == 2
    assert len(retries) == 1
    assert retries[0]["attempt"] == 1
    assert retries[0]["error"].status == 500
    assert retries[0]["delay"] == pytest.approx(0.001)
    assert [m["role"] for m in agent.history] == ["user", "assistant"]


def test_429_retry_after_is_honoured_end_to_end(server: ModelServer) -> None:
    server.add({"status": 429, "error": "slow down", "headers": {"retry-after-ms": "5"}}, "ok")
    agent, retries = make_agent(server, config={"retry_max_delay": 1.0})
    assert agent.send("hi").text == "ok"
    assert retries[0]["delay"] == pytest.approx(0.005)


def test_400_is_retried_by_default_and_skip_codes_stops_it(server: ModelServer) -> None:
    server.add({"status": 400, "error": "flaky validation"}, "ok")
    agent, retries = make_agent(server)
    assert agent.send("hi").text == "ok"
    assert len(retries) == 1

    server.add({"status": 400, "error": "bad"}, "never")
    with pytest.raises(AgentError) as caught:
        agent.send("again", config={"retry": {"skip_codes": [400]}})
    assert caught.value.kind == "request"
    assert caught.value.status == 400
    assert len(retries) == 1


def test_overflow_is_not_retried_as_an_error(server: ModelServer) -> None:
    server.add({"overflow": True}, "summary", "after compaction")
    agent, retries = make_agent(server)
    result = agent.send("hi")
    assert retries == []
    assert result.text == "after compaction"


PARTIAL = "PARTIAL-REPLY-THAT-MUST-NOT-STAY"


@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        ({"drop_after": 3}, "network"),
        ({"stall_after": 3}, "timeout"),
        ({"stream_error": "upstream blew up"}, "server"),
        ({"truncate": True}, "network"),
    ],
    ids=["drop", "stall", "stream-error", "truncate"],
)
def test_mid_stream_failure_is_retried_and_the_partial_reply_is_dropped(
    server: ModelServer, failure: dict[str, Any], kind: str
) -> None:
    events: list[dict[str, Any]] = []
    server.add({"text": PARTIAL * 3, "chunk_size": 4, **failure}, "the real answer")
    agent, retries = make_agent(
        server, config={"request_timeout": 0.3}, callbacks={"on_llm_event": events.append}
    )
    result = agent.send("hi")
    assert result.text == "the real answer"
    assert result.steps == 1
    assert len(retries) == 1
    assert retries[0]["error"].kind == kind
    # Part of the failed reply did stream (a UI saw it, then on_retry told it to discard it).
    assert any(e["type"] == "text-delta" and e["text"] in PARTIAL for e in events)
    assert_clean_history(agent.history, forbidden=PARTIAL[:4])
    assert [m["role"] for m in agent.history] == ["user", "assistant"]
    assert result.messages[-1]["content"] == [{"type": "text", "text": "the real answer"}]


def test_mid_stream_failure_with_tool_calls_runs_no_tool_and_leaves_no_call(server: ModelServer) -> None:
    ran: list[str] = []

    @tool
    def mark(text: str) -> str:
        """Record a call."""
        ran.append(text)
        return "marked"

    server.add(
        {"text": PARTIAL, "tool_calls": [{"name": "mark", "arguments": {"text": "bad"}}], "truncate": True},
        {"tool_calls": [{"name": "mark", "arguments": {"text": "good"}}]},
        "done",
    )
    agent, retries = make_agent(server, tools=[mark])
    result = agent.send("hi")
    assert result.reason == "no-tool"
    assert ran == ["good"]
    assert len(retries) == 1
    assert_clean_history(agent.history, forbidden=PARTIAL)
    assert_clean_history(agent.history, forbidden="bad")


def test_stall_longer_than_request_timeout_gives_timeout_when_not_retried(server: ModelServer) -> None:
    server.add({"text": "x" * 200, "stall_after": 2})
    agent, _ = make_agent(server, config={"request_timeout": 0.2, "retry": {"skip_kinds": ["timeout"]}})
    # The stall never ends: the send returns only because request_timeout cut it.
    assert Background(lambda: agent.send("hi")).join().agent_error().kind == "timeout"
    assert len(server.requests) == 1  # not retried
    assert [m["role"] for m in agent.history] == ["user"]


def test_retry_max_elapsed_gives_up_with_the_last_error(server: ModelServer) -> None:
    server.add(*[{"status": 503, "error": f"down {i}"} for i in range(10)])
    agent, retries = make_agent(
        server, config={"retry_base_delay": 1.0, "retry_max_delay": 10.0, "retry_max_elapsed": 6.5}
    )
    with pytest.raises(AgentError) as caught:
        agent.send("hi")
    # Waits 1 and 2 end at 3 s plus the attempts; the next (4) ends past 7 s > 6.5 s whatever
    # the attempts cost. The second wait is allowed unless the first two attempts took 3.5 s:
    # hundreds of times what they take, so a busy machine gives the same verdict.
    assert caught.value.status == 503
    assert len(retries) == 2
    assert len(server.requests) == 3


def test_stop_during_backoff_ends_the_send_at_once(server: ModelServer) -> None:
    server.add({"status": 500, "error": "down"})
    entered = threading.Event()
    agent, _ = make_agent(
        server,
        config={"retry_base_delay": 60.0, "retry_max_delay": 60.0},
        callbacks={"on_retry": lambda payload: entered.set()},
    )
    worker = Background(lambda: agent.send("hi"))
    assert entered.wait(JOIN_S)
    # stop() waits for the run to end: it too must return while the 60 s backoff is still on.
    assert Background(agent.stop).join().result is True
    assert worker.join().agent_error().kind == "aborted"
    assert len(server.requests) == 1  # the 60 s backoff had not run out: no second attempt


# ---------------------------------------------------------------- secrets


def test_api_key_never_leaks_even_when_the_server_echoes_it(
    server: ModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    echo_body = f"Incorrect API key provided: {KEY}. You can find your key at ..."
    server.add(
        {"status": 401, "error": echo_body},
        {"status": 500, "error": f"internal: auth header was Bearer {KEY}"},
        {"text": "x" * 50, "stream_error": f"upstream rejected key {KEY}"},
        {"status": 200, "content_type": "application/json", "body": {"error": {"message": f"bad key {KEY}"}}},
        {
            "status": 200,
            "content_type": "application/json",
            "body": {"object": "chat.completion", "key": KEY},
        },
        "ok",
    )
    errors: list[AgentError] = []
    agent, _ = make_agent(server, callbacks={"on_retry": lambda p: errors.append(p["error"])})
    with caplog.at_level(logging.DEBUG):
        result = agent.send("hi")
        # A failure that is raised, not retried, must be clean too.
        server.add({"status": 401, "error": echo_body})
        with pytest.raises(AgentError) as caught:
            agent.send("again", config={"retry": {"skip_kinds": ["auth"]}})
    assert result.text == "ok"
    assert len(errors) == 5
    errors.append(caught.value)
    for error in errors:
        for text in (error.message, str(error), repr(error), error.body or "", str(error.args)):
            assert KEY not in text
    assert "***" in errors[0].message
    for record in caplog.records:
        assert KEY not in record.getMessage()
        assert KEY not in (record.exc_text or "")
    assert KEY not in caplog.text
    assert KEY not in repr(agent)
    assert KEY not in repr(agent.config)
    assert KEY not in str(agent.config)
    assert KEY not in repr(agent.history)
    # It was sent, though: as the bearer token.
    assert server.log[0].headers["authorization"] == f"Bearer {KEY}"


def test_logged_callback_errors_do_not_carry_the_key(
    server: ModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.add({"status": 500, "error": f"echo {KEY}"}, "ok")

    def on_retry(payload: dict[str, Any]) -> None:
        raise RuntimeError(f"ui failed on: {payload['error']}")

    agent, _ = make_agent(server, callbacks={"on_retry": on_retry})
    with caplog.at_level(logging.WARNING, logger="agentcore"):
        assert agent.send("hi").text == "ok"
    assert caplog.records, "the failing callback should have been logged"
    assert KEY not in caplog.text
