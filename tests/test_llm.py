"""`llm.chat` end to end over real HTTP against the local ModelServer.

Results (JSON and streamed), stream events, error kinds per status and transport failure,
`request_timeout`, custom adapter objects, and cancellation of a blocking request — before the
headers arrive and in the middle of a stream.

No verdict here depends on how fast the machine runs: the server stalls forever where a test
needs something to block, so a request that returns at all was cut by what the test did (the
100 ms latency promise is measured by bench/cancel_latency.py).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from background import Background

from agentcore import Agent, AgentError, Usage, llm
from agentcore._utils.cancel import Signal
from agentcore.testing import ModelServer

KEY = "sk-llm-test-key-0123456789"
HELLO = [{"role": "user", "content": "hello"}]
TOOLS = [
    {
        "name": "add",
        "description": "Add",
        "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}}},
    },
    {
        "name": "read",
        "description": "Read",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
]
# How long a test waits for a call that must return; a passing run needs milliseconds, a
# regression waits on a stall that never ends, so it fails here instead of hanging.
JOIN_S = 30.0
# A request_timeout that a busy machine's scheduling (the server thread sending the first bytes)
# cannot exceed in a passing run: 10x any scheduling delay seen here.
SAFE_TIMEOUT_S = 2.0


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as s:
        yield s


def chat(server: ModelServer, **overrides: Any) -> llm.LLMResult:
    kwargs: dict[str, Any] = {"base_url": server.base_url, "api_key": KEY, "model": "m", "messages": HELLO}
    kwargs.update(overrides)
    return llm.chat(**kwargs)


def chat_error(server: ModelServer, **overrides: Any) -> AgentError:
    with pytest.raises(AgentError) as caught:
        chat(server, **overrides)
    return caught.value


# ---------------------------------------------------------------- results and events

RICH = {
    "text": "Let me add and read those for you.",
    "reasoning": "The user wants two things; call both tools.",
    "tool_calls": [
        {"name": "add", "arguments": {"a": 1}, "id": "call_a"},
        {"name": "read", "arguments": {"path": "notes/a b.json"}, "id": "call_b"},
    ],
    "usage": {"input_tokens": 40, "output_tokens": 12, "cache_read_tokens": 8},
    "chunk_size": 5,
}


def comparable(result: llm.LLMResult) -> dict[str, Any]:
    return {
        "text": result.text,
        "reasoning": result.reasoning,
        "tool_calls": [(c.id, c.name, c.arguments) for c in result.tool_calls],
        "usage": result.usage.to_dict(),
        "finish_reason": result.finish_reason,
        "message": result.message,
    }


def test_json_and_streamed_results_are_equal(server: ModelServer) -> None:
    server.add(RICH, RICH)
    streamed = chat(server, stream=True, tools=TOOLS)
    whole = chat(server, stream=False, tools=TOOLS)
    assert server.requests[0]["stream"] is True
    assert server.requests[1]["stream"] is False
    assert comparable(streamed) == comparable(whole)
    assert streamed.text == RICH["text"]
    assert streamed.reasoning == RICH["reasoning"]
    assert [c["name"] for c in streamed.tool_calls] == ["add", "read"]
    assert streamed.tool_calls[1]["arguments"] == {"path": "notes/a b.json"}
    assert streamed.finish_reason == "tool_calls"
    assert streamed.usage.input_tokens == 40
    assert streamed.usage.cache_read_tokens == 8
    assert isinstance(streamed.raw, list)
    assert isinstance(whole.raw, dict)


def test_plain_text_json_and_streamed_results_are_equal(server: ModelServer) -> None:
    item = {"text": "Just words.", "usage": {"input_tokens": 9, "output_tokens": 3}}
    server.add(item, item)
    assert comparable(chat(server, stream=True)) == comparable(chat(server, stream=False))


def test_stream_events_in_order(server: ModelServer) -> None:
    server.add(RICH)
    events: list[dict[str, Any]] = []
    result = chat(server, stream=True, tools=TOOLS, on_llm_event=events.append)
    types = [e["type"] for e in events]
    assert types[-1] == "finish"
    assert types.count("finish") == 1
    reasoning = "".join(e["text"] for e in events if e["type"] == "reasoning-delta")
    text = "".join(e["text"] for e in events if e["type"] == "text-delta")
    assert reasoning == RICH["reasoning"]
    assert text == RICH["text"]
    assert types.count("reasoning-delta") > 1
    assert types.count("text-delta") > 1
    # reasoning, then text, then the calls: deltas first, a complete tool-call each at the end
    assert types.index("reasoning-delta") < types.index("text-delta") < types.index("tool-call-delta")
    deltas = [e for e in events if e["type"] == "tool-call-delta"]
    assert (
        "".join(e["delta"] for e in deltas if e["tool_call_id"] == "call_b") == '{"path": "notes/a b.json"}'
    )
    calls = [e for e in events if e["type"] == "tool-call"]
    assert [(c["tool_call_id"], c["tool_name"], c["input"]) for c in calls] == [
        ("call_a", "add", {"a": 1}),
        ("call_b", "read", {"path": "notes/a b.json"}),
    ]
    # Each call is announced complete as soon as the next one starts (so a cancel keeps it),
    # the last one at the end of the stream.
    positions = {e.get("tool_call_id"): i for i, e in enumerate(events) if e["type"] == "tool-call"}
    a_deltas = [
        i for i, e in enumerate(events) if e["type"] == "tool-call-delta" and e["tool_call_id"] == "call_a"
    ]
    b_deltas = [
        i for i, e in enumerate(events) if e["type"] == "tool-call-delta" and e["tool_call_id"] == "call_b"
    ]
    assert max(a_deltas) < positions["call_a"] < min(b_deltas)
    assert positions["call_b"] > max(b_deltas)
    finish = events[-1]
    assert finish["finish_reason"] == "tool_calls"
    assert isinstance(finish["usage"], Usage)
    assert finish["usage"] == result.usage


def test_non_streamed_request_gives_one_finish_event_only(server: ModelServer) -> None:
    server.add(RICH)
    events: list[dict[str, Any]] = []
    result = chat(server, stream=False, tools=TOOLS, on_llm_event=events.append)
    assert [e["type"] for e in events] == ["finish"]
    assert events[0]["finish_reason"] == "tool_calls"
    assert events[0]["usage"] == result.usage


def test_a_failing_event_callback_does_not_stop_the_request(server: ModelServer) -> None:
    server.add("still arrives")

    def broken(event: dict[str, Any]) -> None:
        raise RuntimeError("ui bug")

    assert chat(server, on_llm_event=broken).text == "still arrives"


def test_request_sends_bearer_key_model_and_messages(server: ModelServer) -> None:
    server.add("ok")
    chat(server, system="Be brief.")
    recorded = server.log[0]
    assert recorded.headers["authorization"] == f"Bearer {KEY}"
    assert recorded.path == "/v1/chat/completions"
    assert recorded.body["model"] == "m"
    assert recorded.body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert recorded.body["stream_options"] == {"include_usage": True}


# ---------------------------------------------------------------- error kinds


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "request"),
        (401, "auth"),
        (403, "auth"),
        (404, "request"),
        (408, "timeout"),
        (409, "request"),
        (422, "request"),
        (429, "limit"),
        (500, "server"),
        (502, "server"),
        (503, "server"),
        (504, "server"),
        (529, "server"),
    ],
)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
def test_error_kind_per_status(server: ModelServer, status: int, kind: str, stream: bool) -> None:
    server.add({"status": status, "error": f"scripted {status} failure"})
    error = chat_error(server, stream=stream)
    assert error.kind == kind
    assert error.status == status
    assert f"scripted {status} failure" in error.message
    assert error.retryable is True
    assert error.overflow is False
    assert error.body is not None and f"scripted {status} failure" in error.body


def test_error_attributes(server: ModelServer) -> None:
    long_message = "rate limited; " + "details " * 2000
    server.add({"status": 429, "error": long_message, "headers": {"Retry-After": "3"}})
    error = chat_error(server)
    assert isinstance(error, Exception)
    assert error.kind == "limit"
    assert error.status == 429
    assert error.retryable is True
    assert error.cause is None
    assert error.retry_after == 3.0
    assert error.message.startswith("HTTP 429")
    assert str(error) == error.message
    assert error.body is not None
    assert len(error.body) < len(long_message)
    assert error.body.startswith('{"error"')


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
def test_malformed_2xx_body_is_unknown_with_status_200(server: ModelServer, stream: bool) -> None:
    server.add({"status": 200, "body": "this is { not json", "content_type": "application/json"})
    error = chat_error(server, stream=stream)
    assert error.kind == "unknown"
    assert error.status == 200
    assert error.retryable is True
    assert error.body is not None and "not json" in error.body
    assert error.cause is not None


def test_2xx_json_without_choices_is_unknown_with_status_200(server: ModelServer) -> None:
    server.add({"status": 200, "body": {"id": "x", "object": "chat.completion"}})
    error = chat_error(server, stream=False)
    assert (error.kind, error.status) == ("unknown", 200)


def test_malformed_stream_chunk_is_unknown_with_status_200(server: ModelServer) -> None:
    server.add({"chunks": ['data: {"choices": [{"delta": {"content": "a"}}]}\n\n', "data: {oops\n\n"]})
    error = chat_error(server, stream=True)
    assert (error.kind, error.status) == ("unknown", 200)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_connection_refused_is_network() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    call = Background(lambda: llm.chat(base_url=url, api_key=KEY, model="m", messages=HELLO))
    error = call.join().agent_error()  # refused at once, never retried or waited on
    assert error.kind == "network"
    assert error.status is None
    assert error.retryable is True
    assert error.cause is not None
    assert KEY not in error.message


def test_stalled_stream_is_cut_by_request_timeout(server: ModelServer) -> None:
    # The stall never ends on its own: a call that returns was cut by request_timeout.
    server.add({"text": "a" * 100, "stall_after": 3})
    events: list[dict[str, Any]] = []
    started = time.monotonic()
    call = Background(lambda: chat(server, request_timeout=SAFE_TIMEOUT_S, on_llm_event=events.append))
    error = call.join().agent_error()
    took = time.monotonic() - started
    assert error.kind == "timeout"
    assert error.retryable is True
    assert any(e["type"] == "text-delta" for e in events)
    assert took >= SAFE_TIMEOUT_S * 0.9  # it did wait (socket timeouts run on the monotonic clock)


def test_no_headers_within_request_timeout_is_timeout(server: ModelServer) -> None:
    server.add({"text": "late", "stall_before_headers": True})  # headers never come
    error = Background(lambda: chat(server, request_timeout=SAFE_TIMEOUT_S)).join().agent_error()
    assert error.kind == "timeout"


def test_long_healthy_stream_with_short_gaps_is_not_cut(server: ModelServer) -> None:
    """request_timeout bounds each wait for the next byte, not the whole stream."""
    text = "0123456789" * 15
    # Gaps of 0.1 s against a 2 s limit: a 20x margin for a busy machine's scheduling. The 29
    # gaps are waited by the server (at least 2.9 s in all), so the stream outlasts the limit.
    server.add({"text": text, "chunk_size": 5, "chunk_delay": 0.1})
    started = time.monotonic()
    result = chat(server, request_timeout=SAFE_TIMEOUT_S)
    took = time.monotonic() - started
    assert result.text == text
    assert took > SAFE_TIMEOUT_S, "the stream should have lasted longer than request_timeout"


def test_stream_ending_without_terminator_is_an_error(server: ModelServer) -> None:
    server.add({"text": "cut short", "truncate": True})
    error = chat_error(server)
    assert error.kind == "network"
    assert error.retryable is True


def test_dropped_stream_is_network(server: ModelServer) -> None:
    server.add({"text": "x" * 100, "drop_after": 3})
    assert chat_error(server).kind == "network"


def test_in_stream_error_event_is_raised(server: ModelServer) -> None:
    server.add({"text": "partial", "stream_error": "the upstream model crashed"})
    error = chat_error(server)
    assert error.kind == "server"
    assert "the upstream model crashed" in error.message
    assert error.retryable is True


# ---------------------------------------------------------------- context overflow


OVERFLOW_MESSAGES = [
    "This model's maximum context length is 65536 tokens. However, you requested 70000 tokens.",
    "Input tokens exceed the configured limit of 272000 tokens.",
    "Prompt length of 5016 is longer than the maximum model length of 4096",
    "request (4476 tokens) exceeds the available context size (4096 tokens)",
    "input length exceeds the context length",
    "Your input exceeds the context window of this model",
    "prompt is too long: 210000 tokens > 200000 maximum",
]


def test_scripted_overflow_body_is_recognised(server: ModelServer) -> None:
    server.add({"overflow": True})
    error = chat_error(server)
    assert error.overflow is True
    assert error.kind == "request"
    assert error.status == 400
    assert error.retryable is False


@pytest.mark.parametrize("message", OVERFLOW_MESSAGES)
def test_overflow_wordings_are_recognised(server: ModelServer, message: str) -> None:
    server.add({"status": 400, "error": message})
    error = chat_error(server)
    assert error.overflow is True
    assert error.retryable is False


@pytest.mark.parametrize(
    "item",
    [
        {"status": 400, "error": "messages[0].content must be a string"},
        {"status": 429, "error": "Request too large for gpt-4o: too many tokens per min"},
        {"status": 500, "error": "internal error"},
    ],
    ids=["plain-400", "tpm-429", "500"],
)
def test_other_errors_are_not_overflow(server: ModelServer, item: dict[str, Any]) -> None:
    server.add(item)
    assert chat_error(server).overflow is False


# ---------------------------------------------------------------- custom adapter objects


class EchoAdapter:
    """A model adapter object: answers with the last user text, records each request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.kwargs: list[dict[str, Any]] = []

    def chat(
        self,
        request: dict[str, Any],
        *,
        cancel: threading.Event | None,
        on_event: Callable[[dict[str, Any]], None] | None,
        timeout: float | None,
    ) -> llm.LLMResult:
        self.requests.append(request)
        self.kwargs.append({"cancel": cancel, "on_event": on_event, "timeout": timeout})
        last = request["messages"][-1]["content"]
        text = f"echo: {last if isinstance(last, str) else last[0]['text']}"
        if on_event is not None:
            on_event({"type": "text-delta", "text": text})
        return llm.LLMResult(
            text=text,
            reasoning=None,
            tool_calls=[],
            usage=Usage(input_tokens=3, output_tokens=2, total_tokens=5),
            finish_reason="stop",
            message={"role": "assistant", "content": [{"type": "text", "text": text}]},
        )


def test_custom_adapter_through_llm_chat() -> None:
    adapter = EchoAdapter()
    events: list[dict[str, Any]] = []
    result = llm.chat(
        model=adapter,
        messages=HELLO,
        system="sys",
        tools=TOOLS,
        max_tokens=7,
        provider={"temperature": 0.1},
        request_timeout=4.0,
        on_llm_event=events.append,
    )
    assert result.text == "echo: hello"
    request = adapter.requests[0]
    assert set(request) == {"system", "messages", "tools", "provider", "output", "max_tokens"}
    assert request["system"] == "sys"
    assert request["messages"] == HELLO
    assert [t["name"] for t in request["tools"]] == ["add", "read"]
    assert request["provider"] == {"temperature": 0.1}
    assert request["max_tokens"] == 7
    assert adapter.kwargs[0]["timeout"] == 4.0
    assert isinstance(adapter.kwargs[0]["cancel"], threading.Event)
    assert events == [{"type": "text-delta", "text": "echo: hello"}]


def test_custom_adapter_as_agent_model() -> None:
    adapter = EchoAdapter()
    agent = Agent(config={"model": adapter, "system": "Be kind."})
    result = agent.send("ping")
    assert result.text == "echo: ping"
    assert result.reason == "finished"
    assert result.usage.total_tokens == 5
    assert adapter.requests[0]["system"] == "Be kind."
    assert adapter.requests[0]["messages"] == [{"role": "user", "content": "ping"}]
    assert agent.history[-1]["content"] == [{"type": "text", "text": "echo: ping"}]


def test_custom_adapter_errors_become_agent_errors() -> None:
    class Broken(EchoAdapter):
        def chat(self, request: dict[str, Any], **kwargs: Any) -> llm.LLMResult:
            raise ValueError("adapter bug")

    class Wrong(EchoAdapter):
        def chat(self, request: dict[str, Any], **kwargs: Any) -> Any:
            return "a string"

    with pytest.raises(AgentError) as caught:
        llm.chat(model=Broken(), messages=HELLO)
    assert "adapter bug" in caught.value.message
    assert isinstance(caught.value.cause, ValueError)
    with pytest.raises(AgentError) as caught:
        llm.chat(model=Wrong(), messages=HELLO)
    assert caught.value.kind == "unknown"


@pytest.mark.parametrize(
    "config",
    [
        {"provider": {"body": {"x": 1}}},
        {"cache": {"key": "k"}},
        {"capabilities": {"tool_choice": False}},
    ],
    ids=["provider.body", "cache-dict", "tool_choice-off"],
)
def test_builtin_protocol_options_with_an_adapter_are_config_errors(config: dict[str, Any]) -> None:
    with pytest.raises(AgentError) as caught:
        Agent(config={"model": EchoAdapter(), **config})
    assert caught.value.kind == "config"
    agent = Agent(config={"model": EchoAdapter()})
    with pytest.raises(AgentError) as caught:
        agent.send("hi", config=config)
    assert caught.value.kind == "config"
    assert agent.history == []
    with pytest.raises(AgentError) as caught:
        llm.chat(model=EchoAdapter(), messages=HELLO, **config)
    assert caught.value.kind == "config"


# ---------------------------------------------------------------- cancellation


def wait_until(condition: Callable[[], bool], timeout: float = JOIN_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.002)


# Both stall forever (until the client leaves): whatever ends the request is the cancel.
SCENARIOS = {
    "before-headers": {"text": "never sent", "stall_before_headers": True},
    "mid-stream": {"text": "y" * 400, "stall_after": 4},
}


def blocked(server: ModelServer, where: str, events: list[dict[str, Any]]) -> Callable[[], bool]:
    """True once the request is in its phase: the server has stalled (and, mid-stream, text arrived)."""
    if where == "before-headers":
        return server.stalled.is_set
    return lambda: server.stalled.is_set() and bool(events)


@pytest.mark.parametrize("warm", [False, True], ids=["new-connection", "pooled-connection"])
@pytest.mark.parametrize("event_type", [threading.Event, Signal], ids=["Event", "Signal"])
@pytest.mark.parametrize("where", list(SCENARIOS))
def test_cancel_interrupts_a_blocking_request(
    server: ModelServer, where: str, event_type: type[threading.Event], warm: bool
) -> None:
    if warm:
        server.add("warm-up")
        chat(server)
        server.requests.clear()
    server.add(SCENARIOS[where], "after the cancel")
    cancel = event_type()
    events: list[dict[str, Any]] = []
    call = Background(lambda: chat(server, cancel=cancel, on_llm_event=events.append))
    wait_until(blocked(server, where, events))
    cancel.set()
    error = call.join().agent_error()
    assert error.kind == "aborted"
    assert error.retryable is False
    # The next request works, on a new connection: the cut one is not reused.
    connections = server.connections
    assert chat(server).text == "after the cancel"
    assert server.connections == connections + 1


def test_cancel_already_set_sends_nothing(server: ModelServer) -> None:
    cancel = threading.Event()
    cancel.set()
    error = chat_error(server, cancel=cancel)
    assert error.kind == "aborted"
    assert server.requests == []


def test_connection_is_reused_between_healthy_requests(server: ModelServer) -> None:
    server.add("one", "two", "three")
    for _ in range(3):
        chat(server)
    assert server.connections == 1


@pytest.mark.parametrize("how", ["stop", "cancel-event", "new-send"])
@pytest.mark.parametrize("where", list(SCENARIOS))
def test_agent_cancel_while_a_request_blocks(server: ModelServer, where: str, how: str) -> None:
    server.add(SCENARIOS[where], "second send works")
    events: list[dict[str, Any]] = []
    agent = Agent(
        config={"base_url": server.base_url, "api_key": KEY, "model": "m", "retry_base_delay": 0.001},
        callbacks={"on_llm_event": events.append},
    )
    cancel = threading.Event()
    first = Background(lambda: agent.send("first", cancel=cancel))
    wait_until(blocked(server, where, events))
    if how == "stop":
        # stop() waits for the run to end: it must return although the stall never ends.
        assert Background(agent.stop).join().result is True
    elif how == "cancel-event":
        cancel.set()
    if how == "new-send":
        # The stall never ends: the second send can only run once it has cut the first.
        second = Background(lambda: agent.send("second")).join()
        assert second.error is None, second.error
        result = second.result
        first.join()
    else:
        first.join()
        result = agent.send("second")
    assert first.agent_error().kind == "aborted"
    assert result.text == "second send works"
    assert len(server.requests) == 2
    roles = [m["role"] for m in agent.history]
    if where == "mid-stream":
        # The text that had arrived is kept as a cut-off assistant message.
        assert roles == ["user", "assistant", "user", "assistant"]
        assert set(agent.history[1]["content"][0]["text"]) == {"y"}
    else:
        assert roles == ["user", "user", "assistant"]


def test_late_cancel_never_cuts_another_call_reusing_the_connection(server: ModelServer) -> None:
    """Regression: call A's cancel, set after A had read its whole body (its connection back in
    the pool) but before A returned, shut down the pooled socket that call B was now waiting on,
    so B failed with a network error. A call may only cut connections it still owns."""
    b_may_answer = threading.Event()

    def answer_b(recorded: Any) -> str:
        b_may_answer.wait(JOIN_S)  # B waits on the pooled socket until A's cancel has had its say
        return "second"

    server.add("first", answer_b)
    # A Signal runs its listeners inside set(): once set() returns, any cut it makes is made.
    a_cancel = Signal()
    a_has_read, a_may_return = threading.Event(), threading.Event()
    out: dict[str, Any] = {}

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "finish":
            a_has_read.set()
            a_may_return.wait(JOIN_S)

    def call_a() -> None:
        out["a"] = chat(server, cancel=a_cancel, on_llm_event=on_event).text

    def call_b() -> None:
        try:
            out["b"] = chat(server).text
        except AgentError as error:
            out["b"] = error

    a = threading.Thread(target=call_a)
    a.start()
    assert a_has_read.wait(JOIN_S)
    b = threading.Thread(target=call_b)
    b.start()
    wait_until(lambda: len(server.requests) == 2)
    assert server.connections == 1, "B should be reusing A's pooled connection"
    a_cancel.set()
    b_may_answer.set()
    a_may_return.set()
    a.join(JOIN_S)
    b.join(JOIN_S)
    assert out["b"] == "second"
    assert out["a"] == "first"


def test_concurrent_calls_only_the_cancelled_one_is_aborted(server: ModelServer) -> None:
    # Call 2 stalls forever, so it is surely still running when it is cancelled.
    def reply(recorded: Any) -> dict[str, Any]:
        content = recorded.body["messages"][-1]["content"]
        if content == "call 2":
            return {"text": "never finished", "stall_after": 1}
        return {"text": f"reply to {content}", "chunk_size": 2, "chunk_delay": 0.01}

    server.add(*[reply] * 6)
    cancels = [threading.Event() for _ in range(6)]
    results: dict[int, Any] = {}

    def worker(i: int) -> None:
        messages = [{"role": "user", "content": f"call {i}"}]
        try:
            results[i] = chat(server, messages=messages, cancel=cancels[i]).text
        except AgentError as error:
            results[i] = error.kind

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(6)]
    for thread in threads:
        thread.start()
    wait_until(lambda: len(server.requests) == 6 and server.stalled.is_set())
    cancels[2].set()
    for thread in threads:
        thread.join(JOIN_S)
        assert not thread.is_alive()
    assert results.pop(2) == "aborted"
    assert results == {i: f"reply to call {i}" for i in (0, 1, 3, 4, 5)}


# ---------------------------------------------------------------- HTTPS

DATA = Path(__file__).parent / "data"


class TLSProxy:
    """A TLS front for a ModelServer (self-signed cert in tests/data), so HTTPS runs for real."""

    def __init__(self, upstream_port: int) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(DATA / "localhost-cert.pem", DATA / "localhost-key.pem")
        self.upstream_port = upstream_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"https://127.0.0.1:{self.listener.getsockname()[1]}/v1"
        self.sockets: list[socket.socket] = []
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
                secure = self.context.wrap_socket(client, server_side=True)
            except OSError:
                if self.listener.fileno() == -1:
                    return
                continue
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self.sockets += [secure, upstream]
            for a, b in ((secure, upstream), (upstream, secure)):
                thread = threading.Thread(target=self._pipe, args=(a, b), daemon=True)
                self.threads.append(thread)
                thread.start()

    @staticmethod
    def _pipe(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except (OSError, ValueError):
            pass
        for sock in (source, target):
            with contextlib.suppress(OSError, ValueError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listener.close()
        for sock in self.sockets:
            with contextlib.suppress(OSError, ValueError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in self.threads:
            thread.join(5)


@pytest.fixture
def https(server: ModelServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(DATA / "localhost-cert.pem"))
    proxy = TLSProxy(server.port)
    try:
        yield proxy.base_url
    finally:
        proxy.close()


@pytest.mark.parametrize("where", list(SCENARIOS))
def test_cancel_interrupts_a_blocking_https_request(server: ModelServer, https: str, where: str) -> None:
    """Real endpoints are HTTPS: shutting down the TLS socket must wake the read too."""
    server.add("warm-up", SCENARIOS[where], "after the cancel")
    assert chat(server, base_url=https).text == "warm-up"
    server.requests.clear()
    cancel = threading.Event()
    events: list[dict[str, Any]] = []
    call = Background(lambda: chat(server, base_url=https, cancel=cancel, on_llm_event=events.append))
    wait_until(blocked(server, where, events))
    cancel.set()
    assert call.join().agent_error().kind == "aborted"
    assert chat(server, base_url=https).text == "after the cancel"
