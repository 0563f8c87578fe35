"""How a streamed reply is read from servers that are not ours: streams without
`Content-Type: text/event-stream` (defect 10) and streams that go quiet (`stream_idle_timeout`,
defect 9)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agentcore import Agent, AgentError
from agentcore.testing import ModelServer

PROTOCOLS = ["chat", "responses", "anthropic", "gemini"]
LONG = "Streamed words arriving in many small pieces. " * 4
BOUND_S = 60.0  # only keeps a regression from hanging the suite


def _agent(server: ModelServer, protocol: str, callbacks: Any = None, **config: Any) -> Agent:
    base = {"base_url": server.base_url, "model": "m", "protocol": protocol, "retry_base_delay": 0.01}
    return Agent(config={**base, **config}, callbacks=callbacks)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("content_type", [None, "application/octet-stream", "text/plain"])
def test_a_stream_without_the_sse_content_type_is_read_as_sse(
    protocol: str, content_type: str | None
) -> None:
    reply = {"text": LONG, "tool_calls": [{"name": "add", "arguments": {"a": 1}}]}
    with ModelServer([reply], event_stream_type=content_type) as server:
        agent = _agent(server, protocol, max_steps=1)
        add = {
            "name": "add",
            "description": "add",
            "input_schema": {"type": "object"},
            "execute": lambda _: 1,
        }
        agent.tools = __import__("agentcore").tools.adopt([add])
        events: list[dict[str, Any]] = []
        result = agent.send("hi", callbacks={"on_llm_event": events.append})
        agent.close()
    assert result.steps == 1 and result.text == LONG
    assert any(e["type"] == "text-delta" for e in events)  # it was read as a stream, piece by piece
    calls = [p for p in agent.history[1]["content"] if p["type"] == "tool-call"]
    assert [c["tool_name"] for c in calls] == ["add"] and calls[0]["input"] == {"a": 1}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_json_error_body_on_a_stream_request_is_the_vendors_error(protocol: str) -> None:
    with ModelServer(
        default={"status": 400, "error": "the frobnicator is unknown"}, event_stream_type=None
    ) as server:
        agent = _agent(server, protocol, retry={"skip_codes": [400]})
        with pytest.raises(AgentError) as info:
            agent.send("hi")
        agent.close()
    assert info.value.kind == "request" and info.value.status == 400
    assert "the frobnicator is unknown" in info.value.message


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("content_type", ["application/json", "text/plain"])
def test_a_server_that_ignores_the_stream_flag_is_read_as_json(protocol: str, content_type: str) -> None:
    # The protocol's non-stream JSON reply, sent to a stream request.
    with ModelServer([{"body": _json_reply(protocol), "content_type": content_type}]) as server:
        agent = _agent(server, protocol, stream=True)
        assert agent.send("hi").text == "plain answer"
        agent.close()


def _json_reply(protocol: str) -> bytes:
    from agentcore.testing import encoders
    from agentcore.testing.script import Headers, Recorded, build

    recorded = Recorded("POST", "/v1/x", {}, Headers(), {"stream": False, "model": "m"}, b"{}")
    reply = build("plain answer", recorded, lambda: "call_1")
    encoder = encoders.get(protocol)
    assert encoder is not None
    _, _, body = encoder.encode_json(reply, recorded)
    return __import__("json").dumps(body).encode()


@pytest.mark.parametrize("behaviour", [{}, {"chunked": False}, {"keep_alive": False}])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_stream_that_goes_quiet_fails_as_timeout_and_is_retried(
    protocol: str, behaviour: dict[str, Any]
) -> None:
    stalled = {"text": LONG, "stall_after": 2}
    # `default`: should a busy machine pause the healthy reply past the limit, its retry gets it too.
    with ModelServer([stalled], default="after the stall", **behaviour) as server:
        retries: list[dict[str, Any]] = []
        agent = _agent(server, protocol, stream_idle_timeout=0.3, callbacks={"on_retry": retries.append})
        box: dict[str, Any] = {}
        thread = threading.Thread(target=lambda: box.update(result=agent.send("hi")))
        thread.start()
        thread.join(BOUND_S)
        agent.close()
    assert not thread.is_alive(), "a stalled stream hung the send"
    assert box["result"].text == "after the stall"
    first = retries[0]["error"]
    assert first.kind == "timeout" and "stream_idle_timeout" in first.message
    assert [m["role"] for m in agent.history] == ["user", "assistant"]  # the cut reply left nothing


def test_the_idle_limit_is_per_gap_not_for_the_whole_stream() -> None:
    # 8 gaps of 0.15 s: the stream takes longer than the limit, but no gap comes close to it.
    with ModelServer([{"text": LONG, "chunk_size": 24, "chunk_delay": 0.15}]) as server:
        agent = _agent(server, "chat", stream_idle_timeout=1.0, retry={"skip_kinds": ["timeout"]})
        assert agent.send("hi").text == LONG
        agent.close()
