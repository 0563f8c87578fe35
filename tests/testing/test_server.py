"""The scripted model server, driven with `requests` exactly as a client would."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from background import returns_within
from recorded import RECORDED

from agentcore import Agent, AgentError
from agentcore._utils.sse import SSEParser
from agentcore.testing import ModelServer, Recorded

FIXTURES = RECORDED / "chat"
CHAT = "/chat/completions"


@pytest.fixture
def session() -> Iterator[requests.Session]:
    with requests.Session() as s:
        yield s


def post(server: ModelServer, body: dict[str, Any] | None = None, **kwargs: Any) -> requests.Response:
    body = {"model": "test-model", "messages": [{"role": "user", "content": "hi"}], **(body or {})}
    kwargs.setdefault("timeout", 30)  # a busy machine may be slow; only a hang should fail
    return requests.post(server.base_url + CHAT, json=body, **kwargs)


def stream(server: ModelServer, include_usage: bool | None = None, **kwargs: Any) -> requests.Response:
    body: dict[str, Any] = {"stream": True}
    if include_usage is not None:
        body["stream_options"] = {"include_usage": include_usage}
    return post(server, body, stream=True, **kwargs)


def events(response: requests.Response) -> list[str]:
    """The SSE `data` fields of a whole response, parsed as a client would."""
    parser = SSEParser()
    data = [e.data for chunk in response.iter_content(None) for e in parser.feed(chunk)]
    return data + [e.data for e in parser.flush()]


def chunks(data: list[str]) -> list[dict[str, Any]]:
    return [json.loads(d) for d in data if d != "[DONE]"]


def deltas(data: list[str]) -> list[dict[str, Any]]:
    return [c["choices"][0]["delta"] for c in chunks(data) if c.get("choices")]


def server_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("ModelServer")]


# ---------------------------------------------------------------- JSON replies


def test_json_text_reply_is_a_chat_completion() -> None:
    with ModelServer(["Hello there"]) as server:
        response = post(server)
    body = response.json()
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    assert body["model"] == "test-model" and isinstance(body["created"], int)
    choice = body["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "Hello there", "refusal": None}
    assert choice["finish_reason"] == "stop" and choice["index"] == 0
    usage = body["usage"]
    assert usage["prompt_tokens"] == len(response.request.body or b"") // 4 > 0
    assert usage["completion_tokens"] == len("Hello there") // 4
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["prompt_tokens_details"] == {"cached_tokens": 0}


def test_json_tool_calls_reasoning_and_given_usage() -> None:
    item = {
        "reasoning": "Let me add.",
        "tool_calls": [
            {"name": "add", "arguments": {"a": 1, "b": 2}},
            {"name": "raw", "arguments": "{not json", "id": "call_mine"},
        ],
        "usage": {"input_tokens": 100, "output_tokens": 7, "cache_read_tokens": 40},
    }
    with ModelServer([item]) as server:
        body = post(server).json()
    message = body["choices"][0]["message"]
    assert message["content"] is None
    assert message["reasoning_content"] == "Let me add."
    assert message["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}},
        {"id": "call_mine", "type": "function", "function": {"name": "raw", "arguments": "{not json"}},
    ]
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert body["usage"]["prompt_tokens"] == 100 and body["usage"]["completion_tokens"] == 7
    assert body["usage"]["total_tokens"] == 107
    assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 40


def test_finish_reason_is_scripted() -> None:
    with ModelServer([{"text": "cut", "finish_reason": "length"}]) as server:
        assert post(server).json()["choices"][0]["finish_reason"] == "length"


# ---------------------------------------------------------------- streams


def test_stream_looks_like_openai_chat_traffic() -> None:
    text = "The capital of the UK is London."
    with ModelServer([text]) as server:
        response = stream(server)
        data = events(response)
    assert response.headers["Content-Type"].startswith("text/event-stream")
    assert response.headers["Transfer-Encoding"] == "chunked"
    assert data[-1] == "[DONE]"
    parsed = chunks(data)
    assert {c["object"] for c in parsed} == {"chat.completion.chunk"}
    assert len({c["id"] for c in parsed}) == 1 and parsed[0]["model"] == "test-model"
    assert all("usage" not in c for c in parsed), "no usage unless include_usage"
    assert deltas(data)[0] == {"role": "assistant", "content": ""}
    contents = [d["content"] for d in deltas(data)[1:] if "content" in d]
    assert "".join(contents) == text and len(contents) == 4, "8 characters per delta"
    assert parsed[-1]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}


def test_stream_usage_chunk_only_with_include_usage() -> None:
    item = {"text": "hi", "usage": {"input_tokens": 12, "output_tokens": 3, "cache_read_tokens": 5}}
    with ModelServer([item, item]) as server:
        with_usage = events(stream(server, include_usage=True))
        without = events(stream(server, include_usage=False))
    last = chunks(with_usage)[-1]
    assert last["choices"] == []
    assert last["usage"]["prompt_tokens"] == 12 and last["usage"]["completion_tokens"] == 3
    assert last["usage"]["prompt_tokens_details"]["cached_tokens"] == 5
    assert all(c["usage"] is None for c in chunks(with_usage)[:-1])
    assert chunks(without)[-1]["choices"][0]["finish_reason"] == "stop"
    assert all("usage" not in c for c in chunks(without))


def test_stream_tool_calls_are_split_over_several_deltas() -> None:
    arguments = {"city": "Mexico City", "days": 3}
    item = {"tool_calls": [{"name": "weather", "arguments": arguments}, {"name": "noop"}], "chunk_size": 5}
    with ModelServer([item, item]) as server:
        data = events(stream(server))
        second = events(stream(server))
    calls = [call for d in deltas(data) for call in d.get("tool_calls", [])]
    first = calls[0]
    assert first == {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "weather", "arguments": ""},
    }
    pieces = [c["function"]["arguments"] for c in calls if c["index"] == 0][1:]
    assert len(pieces) > 2 and all(set(c) == {"index", "function"} for c in calls[1 : len(pieces) + 1])
    assert json.loads("".join(pieces)) == arguments
    noop = [c for c in calls if c["index"] == 1]
    assert noop[0]["id"] == "call_2" and "".join(c["function"]["arguments"] for c in noop) == "{}"
    assert chunks(data)[-1]["choices"][0]["finish_reason"] == "tool_calls"
    later_ids = [c["id"] for d in deltas(second) for c in d.get("tool_calls", []) if "id" in c]
    assert later_ids == ["call_3", "call_4"], "ids are unique per server"


def test_stream_reasoning_goes_in_reasoning_content() -> None:
    with ModelServer([{"reasoning": "Think about it first.", "text": "Answer"}]) as server:
        data = events(stream(server))
    reasoning = [d["reasoning_content"] for d in deltas(data) if "reasoning_content" in d]
    assert len(reasoning) == 3 and "".join(reasoning) == "Think about it first."
    first_content = next(i for i, d in enumerate(deltas(data)) if d.get("content"))
    last_reasoning = max(i for i, d in enumerate(deltas(data)) if "reasoning_content" in d)
    assert last_reasoning < first_content


def test_stream_error_ends_with_an_error_event_and_no_done() -> None:
    with ModelServer([{"text": "partial", "stream_error": "upstream overloaded"}]) as server:
        data = events(stream(server))
    assert "[DONE]" not in data
    assert json.loads(data[-1]) == {
        "error": {"message": "upstream overloaded", "type": "server_error", "code": None}
    }
    assert not any(c.get("choices") and c["choices"][0]["finish_reason"] for c in chunks(data)[:-1])


def test_truncate_ends_cleanly_without_finish_or_done() -> None:
    with ModelServer([{"text": "half an ans", "truncate": True}]) as server:
        data = events(stream(server, include_usage=True))
    assert "[DONE]" not in data
    assert "".join(d.get("content", "") for d in deltas(data)) == "half an ans"
    assert all(c["choices"] and c["choices"][0]["finish_reason"] is None for c in chunks(data))


# ---------------------------------------------------------------- errors and raw bodies


def test_error_status_body_and_retry_after_header() -> None:
    script: list[dict[str, Any]] = [
        {"status": 429, "error": "Rate limit reached", "headers": {"Retry-After": "2"}},
        {"status": 503},
        {"error": "boom"},
        {"status": 401, "error": "Incorrect API key"},
    ]
    with ModelServer(script) as server:
        limited, unavailable, boom, auth = (post(server) for _ in script)
    assert limited.status_code == 429 and limited.headers["Retry-After"] == "2"
    assert limited.json()["error"]["message"] == "Rate limit reached"
    assert limited.json()["error"]["code"] == "rate_limit_exceeded"
    assert unavailable.status_code == 503 and unavailable.json()["error"]["type"] == "server_error"
    assert "503" in unavailable.json()["error"]["message"]
    assert boom.status_code == 500 and boom.json()["error"]["message"] == "boom"
    assert auth.status_code == 401 and auth.json()["error"]["code"] == "invalid_api_key"


def test_error_is_json_even_for_a_stream_request() -> None:
    with ModelServer([{"status": 500, "error": "down"}]) as server:
        response = stream(server)
        assert response.content  # read before the server closes: a late read races its shutdown
    assert response.status_code == 500 and response.json()["error"]["message"] == "down"


def test_overflow_sends_the_context_length_body() -> None:
    with ModelServer([{"overflow": True}]) as server:
        response = post(server)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["type"] == "invalid_request_error"
    assert error["message"] == (
        "This model's maximum context length is 128000 tokens. "
        "However, your messages resulted in 130000 tokens."
    )


def test_raw_body_is_sent_as_is() -> None:
    script: list[dict[str, Any]] = [
        {"body": "{not json", "status": 200},
        {"body": "<html>bad gateway</html>", "status": 502, "content_type": "text/html"},
        {"body": {"weird": True}},
    ]
    with ModelServer(script) as server:
        broken, gateway, weird = (post(server) for _ in script)
    assert broken.status_code == 200 and broken.content == b"{not json"
    assert gateway.status_code == 502 and gateway.headers["Content-Type"] == "text/html"
    assert gateway.text == "<html>bad gateway</html>"
    assert weird.json() == {"weird": True}


def test_raw_body_replays_a_recorded_stream() -> None:
    fixture = json.loads((FIXTURES / "chat-test_run_stream_sync_streams_real_model-1.json").read_text())
    recorded = fixture["response"]["body"]
    with ModelServer([{"body": recorded}]) as server:
        response = stream(server)
        assert response.content  # read before the server closes: a late read races its shutdown
    assert response.headers["Content-Type"].startswith("text/event-stream")
    assert response.text == recorded


def test_raw_chunks_stream_and_obey_drop_after() -> None:
    script: list[dict[str, Any]] = [
        {"chunks": ["data: 1\n\n", b"data: 2\n\n"]},
        {"chunks": ["data: 1\n\n", "data: 2\n\n"], "drop_after": 1},
    ]
    with ModelServer(script) as server:
        assert events(stream(server)) == ["1", "2"]
        lines = []
        with pytest.raises(requests.exceptions.RequestException):
            for line in stream(server).iter_lines():
                lines.append(line)
        assert lines[0] == b"data: 1"


# ---------------------------------------------------------------- timing and broken connections


def test_delay_and_chunk_delay() -> None:
    script = [{"text": "x", "delay": 0.2}, {"text": "abcdefghijklmnopqrstuvwx", "chunk_delay": 0.05}]
    with ModelServer(script) as server:
        start = time.monotonic()
        post(server)
        assert time.monotonic() - start >= 0.2
        start = time.monotonic()
        events(stream(server))
        # role + 3 content + finish + [DONE] = 6 chunks, 5 gaps
        assert time.monotonic() - start >= 0.25


def test_drop_after_breaks_the_stream() -> None:
    with ModelServer([{"text": "a long enough answer to need several chunks", "drop_after": 2}]) as server:
        response = stream(server)
        received = []
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            for line in response.iter_lines():
                received.append(line)
    data = [line for line in received if line]
    assert len(data) == 2 and all(line.startswith(b"data: {") for line in data)


def test_stall_after_times_out_the_client_and_close_is_fast() -> None:
    server = ModelServer([{"text": "stall in the middle of this", "stall_after": 2}])
    try:
        # The stall lasts until close(), so the 2 s read timeout fires whatever the machine's speed;
        # the chunks before the stall are written back to back, far within 2 s of each other.
        response = stream(server, timeout=(30, 2))
        received = []
        with pytest.raises(requests.exceptions.ConnectionError):
            for line in response.iter_lines():
                received.append(line)
        assert server.stalled.is_set()
    finally:
        returns_within(server.close)
    assert len([line for line in received if line]) == 2, "chunks before the stall arrive at once"
    assert server_threads() == []


def test_close_ends_a_stalled_handler_promptly() -> None:
    server = ModelServer([{"text": "stall forever", "stall_after": 1}])
    # A read timeout far beyond returns_within's 30 s: only close() can end this read in time.
    response = stream(server, timeout=(30, 120))
    outcome: list[BaseException | None] = []

    def read_all() -> None:
        try:
            events(response)
            outcome.append(None)
        except requests.exceptions.RequestException as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    assert server.stalled.wait(30)
    returns_within(server.close)
    reader.join(30)
    assert not reader.is_alive() and outcome and outcome[0] is not None
    assert not isinstance(outcome[0], requests.exceptions.Timeout), "close() ended the read"
    assert server_threads() == []


def test_stall_after_on_a_json_reply_counts_body_bytes() -> None:
    server = ModelServer([{"text": "hello", "stall_after": 0}])
    with server, pytest.raises(requests.exceptions.ConnectionError):
        post(server, timeout=(2, 0.2))


# ---------------------------------------------------------------- the script


def test_callable_items_see_the_recorded_request() -> None:
    seen: list[Recorded] = []

    def echo(recorded: Recorded) -> dict[str, Any]:
        seen.append(recorded)
        return {"text": f"you said {recorded.body['messages'][-1]['content']}"}

    with ModelServer([echo, lambda r: "plain"]) as server:
        first = post(server, headers={"X-Trace": "abc"}).json()
        second = post(server).json()
    assert first["choices"][0]["message"]["content"] == "you said hi"
    assert second["choices"][0]["message"]["content"] == "plain"
    assert seen[0].headers["x-trace"] == "abc" and seen[0].path == "/v1/chat/completions"


def test_a_failing_callable_answers_500_and_is_kept() -> None:
    """API.md §Details "The local model server". Before: a plain 500 that the default retry policy
    retried for ever, so a test hung instead of failing with the real error."""

    def broken(recorded: Recorded) -> str:
        raise RuntimeError("bug in the test")

    server = ModelServer([broken, "next", broken])
    response = post(server)
    assert post(server).json()["choices"][0]["message"]["content"] == "next"
    post(server)
    assert response.status_code == 500
    assert response.json()["error"]["message"] == "ModelServer script error: RuntimeError: bug in the test"
    assert response.headers["x-should-retry"] == "false"
    assert [str(e) for e in server.errors] == ["bug in the test", "bug in the test"]
    with pytest.raises(RuntimeError, match="bug in the test") as raised:
        server.close()
    assert raised.value is server.errors[0]  # the first one
    server.close()  # once: a second close is quiet


def test_leaving_the_with_block_raises_what_a_callable_raised_and_the_agent_did_not_retry() -> None:
    def broken(recorded: Recorded) -> str:
        raise KeyError("no such fixture")

    failure: list[AgentError] = []
    with pytest.raises(KeyError, match="no such fixture"), ModelServer([broken, "never asked"]) as server:
        agent = Agent(config={"base_url": server.base_url, "model": "m", "retry_base_delay": 0.01})
        try:
            agent.send("hi")
        except AgentError as error:
            failure.append(error)
        finally:
            agent.close()
    (error,) = failure
    assert error.kind == "server" and error.status == 500 and not error.retryable
    assert "KeyError: 'no such fixture'" in error.message
    assert len(server.requests) == 1  # not retried


def test_exhausted_script_uses_the_default() -> None:
    with ModelServer(["only"]) as plain, ModelServer([], default={"text": "fallback"}) as fallback:
        assert plain.remaining == 1
        assert post(plain).json()["choices"][0]["message"]["content"] == "only"
        assert plain.remaining == 0
        exhausted = post(plain).json()["choices"][0]["message"]
        assert exhausted["content"] == "(script exhausted)" and "tool_calls" not in exhausted
        plain.add("added", "later")
        assert plain.remaining == 2
        assert post(plain).json()["choices"][0]["message"]["content"] == "added"
        for _ in range(2):
            assert post(fallback).json()["choices"][0]["message"]["content"] == "fallback"


def test_bad_items_fail_when_added() -> None:
    with ModelServer() as server:
        with pytest.raises(ValueError, match="tool_call"):
            server.add({"tool_call": []})
        with pytest.raises(TypeError):
            server.add({"text": 3})
        with pytest.raises(TypeError):
            server.add({"tool_calls": [{"arguments": {}}]})
        with pytest.raises(ValueError):
            server.add({"usage": {"prompt_tokens": 3}})
        assert server.remaining == 0


def test_requests_and_log_are_recorded_in_order() -> None:
    with ModelServer(["a", "b"]) as server:
        first = {"messages": [{"role": "user", "content": "first"}]}
        post(server, first, headers={"Authorization": "Bearer k"})
        missing = requests.get(server.base_url + "/models?limit=2", timeout=30)
        post(server, {"messages": [{"role": "user", "content": "second"}]})
    assert [r["messages"][0]["content"] for r in server.requests] == ["first", "second"]
    assert [(r.method, r.path) for r in server.log] == [
        ("POST", "/v1/chat/completions"),
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
    ]
    assert server.log[1].query == {"limit": "2"} and server.log[1].body is None
    assert server.log[0].headers["authorization"] == "Bearer k" == server.log[0].headers["Authorization"]
    assert json.loads(server.log[0].raw) == server.requests[0]
    assert missing.status_code == 404 and "/v1/models" in missing.json()["error"]["message"]
    assert server.remaining == 0


def test_concurrent_requests_each_get_one_item() -> None:
    with ModelServer([str(n) for n in range(20)]) as server:
        answers: list[str] = []
        lock = threading.Lock()

        def ask() -> None:
            text = post(server).json()["choices"][0]["message"]["content"]
            with lock:
                answers.append(text)

        workers = [threading.Thread(target=ask) for _ in range(20)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    assert sorted(answers, key=int) == [str(n) for n in range(20)]
    assert len(server.requests) == 20


# ---------------------------------------------------------------- connections and lifecycle


def test_keep_alive_connection_is_reused(session: requests.Session) -> None:
    with ModelServer(default="ok") as server:
        for n in range(40):
            body = {"model": "m", "messages": [], "stream": n % 2 == 0}
            response = session.post(server.base_url + CHAT, json=body, timeout=30)
            assert response.status_code == 200 and response.content
        assert server.connections == 1
        assert len(server.requests) == 40


def test_close_leaves_no_threads_or_sockets() -> None:
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc")
    threads_before, fds_before = set(threading.enumerate()), open_fds()
    for _ in range(10):
        with requests.Session() as idle, requests.Session() as client:
            server = ModelServer(["a", {"text": "stalled", "stall_after": 1}], default="z")
            # `idle` keeps its connection open (keep-alive) while the server closes
            assert idle.post(server.base_url + CHAT, json={"stream": True}, timeout=30).ok
            # The stalled client would wait 120 s: close() must end its connection, not wait.
            stalled = client.post(
                server.base_url + CHAT, json={"stream": True}, stream=True, timeout=(30, 120)
            )
            next(stalled.iter_lines())
            assert server.stalled.wait(30)
            returns_within(lambda server=server: (server.close(), server.close()))
            stalled.close()
    assert set(threading.enumerate()) <= threads_before
    assert open_fds() <= fds_before


def test_closed_server_refuses_connections() -> None:
    server = ModelServer()
    url = server.base_url
    server.close()
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.post(url + CHAT, json={}, timeout=2)
    with pytest.raises(RuntimeError):
        server.start()


def test_a_request_whose_client_left_mid_body_uses_no_script_item() -> None:
    """A client killed while sending (tests/store SIGKILL runs): before, its half-received request
    took a script item and reached script functions with no body (which then raised)."""
    import socket

    seen: list[Any] = []

    def reply(recorded: Recorded) -> str:
        seen.append(recorded.body)
        return f"answered {recorded.body['messages'][0]['content']}"

    with ModelServer(default=reply) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n"
            sock.sendall(head + b'{"model": "m", "mess')
        response = post(server)
        assert response.json()["choices"][0]["message"]["content"] == "answered hi"
    assert len(seen) == 1 and len(server.requests) == 1  # close() joined every handler
    assert b'{"model": "m", "mess' in [r.raw for r in server.log] and len(server.log) == 2
