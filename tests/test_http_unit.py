"""Unit tests of the HTTP layer (`llm.chat` over `_http.py`) with `responses` mocking requests.

What travels on the wire (URL, headers, JSON body), how error bodies become `AgentError`, and
how `Retry-After` / `retry-after-ms` / HTTP dates are read. End-to-end behaviour over real
sockets lives in test_llm.py.
"""

from __future__ import annotations

import email.utils
import json
from collections.abc import Iterator
from typing import Any

import pytest
import responses

from agentcore import AgentError, llm
from agentcore._utils.retry import parse_retry_after

BASE = "http://model.test/v1"
URL = f"{BASE}/chat/completions"
KEY = "sk-unit-test-key-0123456789"
HELLO = [{"role": "user", "content": "hello"}]

REPLY: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
}


@pytest.fixture
def mock() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        yield rsps


def ask(**overrides: Any) -> llm.LLMResult:
    kwargs: dict[str, Any] = {
        "base_url": BASE,
        "api_key": KEY,
        "model": "m",
        "messages": HELLO,
        "stream": False,
    }
    kwargs.update(overrides)
    return llm.chat(**kwargs)


def failure(**overrides: Any) -> AgentError:
    with pytest.raises(AgentError) as caught:
        ask(**overrides)
    return caught.value


def sent(mock: responses.RequestsMock, index: int = 0) -> Any:
    return mock.calls[index].request


# ---------------------------------------------------------------- request


def test_headers_carry_bearer_key_provider_headers_and_json_type(mock: responses.RequestsMock) -> None:
    mock.add(responses.POST, URL, json=REPLY)
    ask(provider={"headers": {"X-Org": "acme", "X-Trace": "t1"}})
    headers = sent(mock).headers
    assert headers["Authorization"] == f"Bearer {KEY}"
    assert headers["X-Org"] == "acme"
    assert headers["X-Trace"] == "t1"
    assert headers["Content-Type"] == "application/json"


def test_no_authorization_header_without_a_key(mock: responses.RequestsMock) -> None:
    mock.add(responses.POST, URL, json=REPLY)
    ask(api_key="")
    assert "Authorization" not in sent(mock).headers


def test_streaming_request_asks_for_an_event_stream(mock: responses.RequestsMock) -> None:
    stream = (
        'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
        'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        "data: [DONE]\n\n"
    )
    mock.add(responses.POST, URL, body=stream, content_type="text/event-stream")
    result = ask(stream=True)
    assert result.text == "hi"
    assert sent(mock).headers["Accept"] == "text/event-stream"
    assert json.loads(sent(mock).body)["stream"] is True


@pytest.mark.parametrize(
    "base_url",
    [BASE, BASE + "/"],
    ids=["plain", "trailing-slash"],
)
def test_url_is_base_url_plus_chat_completions(mock: responses.RequestsMock, base_url: str) -> None:
    mock.add(responses.POST, URL, json=REPLY)
    ask(base_url=base_url)
    assert sent(mock).url == URL


def test_url_keeps_a_path_prefix_of_the_base_url(mock: responses.RequestsMock) -> None:
    mock.add(responses.POST, "http://gw.test/openai/v1/chat/completions", json=REPLY)
    ask(base_url="http://gw.test/openai/v1")
    assert sent(mock).url == "http://gw.test/openai/v1/chat/completions"


def test_body_is_the_chat_request_as_json(mock: responses.RequestsMock) -> None:
    mock.add(responses.POST, URL, json=REPLY)
    ask(
        system="Be brief.",
        max_tokens=50,
        provider={"temperature": 0.2, "body": {"vendor_flag": True}},
        cache=False,
    )
    body = json.loads(sent(mock).body)
    assert body["model"] == "m"
    assert body["stream"] is False
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello"},
    ]
    assert body["max_tokens"] == 50
    assert body["temperature"] == 0.2
    assert body["vendor_flag"] is True
    assert "prompt_cache_key" not in body
    assert "stream_options" not in body


def test_body_is_utf8_json_with_non_ascii_text(mock: responses.RequestsMock) -> None:
    mock.add(responses.POST, URL, json=REPLY)
    ask(messages=[{"role": "user", "content": "你好 — ça va?"}])
    raw = sent(mock).body
    assert isinstance(raw, bytes)
    assert json.loads(raw.decode("utf-8"))["messages"][0]["content"] == "你好 — ça va?"


def test_reply_is_parsed(mock: responses.RequestsMock) -> None:
    mock.add(responses.POST, URL, json=REPLY)
    result = ask()
    assert result.text == "hi"
    assert result.finish_reason == "stop"
    assert result.usage.input_tokens == 5
    assert result.usage.output_tokens == 1


# ---------------------------------------------------------------- error bodies


def test_openai_error_body_gives_the_vendor_message_and_status(mock: responses.RequestsMock) -> None:
    body = {
        "error": {
            "message": "Incorrect API key provided",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    }
    mock.add(responses.POST, URL, status=401, json=body)
    error = failure()
    assert error.kind == "auth"
    assert error.status == 401
    assert "Incorrect API key provided" in error.message
    assert error.body is not None and "invalid_api_key" in error.body
    assert error.retryable is True
    assert error.overflow is False


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"error": "model is loading"}, "model is loading"),
        ({"object": "error", "message": "vllm says no", "code": 400}, "vllm says no"),
        ({"detail": "fastapi says no"}, "fastapi says no"),
        ([{"error": {"message": "listed error"}}], "listed error"),
    ],
    ids=["string-error", "vllm", "detail", "list"],
)
def test_other_error_body_shapes_give_their_message(
    mock: responses.RequestsMock, body: Any, message: str
) -> None:
    mock.add(responses.POST, URL, status=400, json=body)
    error = failure()
    assert error.kind == "request"
    assert error.status == 400
    assert message in error.message


def test_plain_text_error_body_is_the_message(mock: responses.RequestsMock) -> None:
    mock.add(responses.POST, URL, status=502, body="Bad Gateway from nginx", content_type="text/html")
    error = failure()
    assert error.kind == "server"
    assert error.status == 502
    assert "Bad Gateway from nginx" in error.message
    assert error.body == "Bad Gateway from nginx"


def test_empty_error_body_still_names_the_status(mock: responses.RequestsMock) -> None:
    mock.add(responses.POST, URL, status=503, body="")
    error = failure()
    assert error.kind == "server"
    assert "503" in error.message


def test_long_error_body_is_truncated(mock: responses.RequestsMock) -> None:
    mock.add(responses.POST, URL, status=500, body="x" * 100_000)
    error = failure()
    assert error.body is not None
    assert 0 < len(error.body) <= 10_000


def test_context_overflow_body_is_marked_and_not_retryable(mock: responses.RequestsMock) -> None:
    body = {
        "error": {
            "message": "This model's maximum context length is 8192 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
    mock.add(responses.POST, URL, status=400, json=body)
    error = failure()
    assert error.overflow is True
    assert error.kind == "request"
    assert error.retryable is False


def test_a_429_about_tokens_is_a_limit_not_an_overflow(mock: responses.RequestsMock) -> None:
    body = {"error": {"message": "Request too large: too many tokens per min", "code": "rate_limit_exceeded"}}
    mock.add(responses.POST, URL, status=429, json=body)
    error = failure()
    assert error.kind == "limit"
    assert error.overflow is False


def test_2xx_body_that_is_not_json_is_unknown_with_status(mock: responses.RequestsMock) -> None:
    mock.add(responses.POST, URL, status=200, body="<html>captive portal</html>", content_type="text/html")
    error = failure()
    assert error.kind == "unknown"
    assert error.status == 200
    assert error.body is not None and "captive portal" in error.body


def test_error_object_inside_a_200_reply_is_raised(mock: responses.RequestsMock) -> None:
    mock.add(responses.POST, URL, status=200, json={"error": {"message": "upstream failed", "code": 502}})
    error = failure()
    assert error.status == 502
    assert error.kind == "server"
    assert "upstream failed" in error.message


def test_echoed_key_is_redacted_from_message_and_body(mock: responses.RequestsMock) -> None:
    mock.add(responses.POST, URL, status=401, json={"error": {"message": f"bad key {KEY}"}})
    error = failure()
    assert KEY not in error.message
    assert KEY not in (error.body or "")
    assert KEY not in repr(error)
    assert "***" in error.message


def test_secret_provider_header_is_redacted_too(mock: responses.RequestsMock) -> None:
    token = "tok-very-secret-98765"
    mock.add(responses.POST, URL, status=403, json={"error": {"message": f"header was Bearer {token}"}})
    error = failure(provider={"headers": {"X-Api-Token": f"Bearer {token}"}})
    assert token not in error.message
    assert token not in (error.body or "")


# ---------------------------------------------------------------- Retry-After


def test_retry_after_header_is_read_into_the_error(mock: responses.RequestsMock) -> None:
    mock.add(
        responses.POST, URL, status=429, headers={"Retry-After": "7"}, json={"error": {"message": "slow"}}
    )
    assert failure().retry_after == 7.0


def test_retry_after_ms_header_is_read_into_the_error(mock: responses.RequestsMock) -> None:
    mock.add(
        responses.POST,
        URL,
        status=429,
        headers={"retry-after-ms": "1500"},
        json={"error": {"message": "slow"}},
    )
    assert failure().retry_after == 1.5


def test_no_retry_after_header_means_none(mock: responses.RequestsMock) -> None:
    mock.add(responses.POST, URL, status=500, json={"error": {"message": "boom"}})
    assert failure().retry_after is None


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "12"}, 12.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"RETRY-AFTER": "3"}, 3.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"Retry-After-Ms": "2000", "Retry-After": "9"}, 2.0),
        ({"retry-after-ms": "soon", "Retry-After": "9"}, 9.0),
        ({"Retry-After": "-4"}, 0.0),
        ({"Retry-After": "not a date"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after_seconds_and_ms(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers) == expected


def test_parse_retry_after_http_date_is_relative_to_now() -> None:
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"Retry-After": date}, now=lambda: now) == pytest.approx(30.0)


def test_parse_retry_after_http_date_in_the_past_is_zero() -> None:
    now = 1_700_000_000.0
    date = email.utils.formatdate(now - 60, usegmt=True)
    assert parse_retry_after({"Retry-After": date}, now=lambda: now) == 0.0


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"message": f"key {KEY} was revoked", "code": 401}},
        {"id": "x", "object": "chat.completion", "echo": f"Bearer {KEY}"},
    ],
    ids=["error-object-in-200", "no-choices"],
)
def test_echoed_key_is_redacted_from_an_unreadable_200_body(mock: responses.RequestsMock, body: Any) -> None:
    """Regression: a 200 reply the adapter refused kept the echoed key in `error.body`."""
    mock.add(responses.POST, URL, status=200, json=body)
    error = failure()
    assert error.status in (200, 401)
    assert error.body
    assert KEY not in error.body
    assert KEY not in error.message
