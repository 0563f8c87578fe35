"""Context overflow as the common local servers say it, recognised on every protocol they serve.

Each case is one server's real answer (status, body shape, headers), replayed by a local HTTP
server at the path of each protocol that server serves, and read through `llm.chat`: the error
must be an overflow (never retried, compacted by the loop) and name the context size when the
server's message does. Where each wording comes from is quoted next to it. Which paths serve
what (checked in each server's sources and docs):

| server    | /v1/chat/completions | /v1/responses | /v1/messages | Gemini paths |
|-----------|----------------------|---------------|--------------|--------------|
| llama.cpp | yes                  | yes           | yes          | no           |
| vLLM      | yes                  | yes           | yes          | no           |
| Ollama    | yes                  | yes           | yes          | no           |
| LM Studio | yes                  | yes           | yes          | no           |

None serves Gemini's paths, so the gemini protocol is checked once, as a gateway passing a
llama.cpp message through (the table is the same for all four adapters).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from agentcore import AgentError, llm
from agentcore.protocols import get
from agentcore.protocols.errors import context_limit
from agentcore.testing import ModelServer

SERVED = ("chat", "responses", "anthropic")
JSON_UTF8 = "application/json; charset=utf-8"


@dataclass(frozen=True)
class Case:
    server: str
    source: str  # where the wording and the body shape come from
    message: str
    limit: int | None
    status: int = 400
    # The body as the server sends it for `message`, per protocol (None: the same on every path).
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = JSON_UTF8


# llama.cpp tools/server: every endpoint answers errors with `{"error": format_error_response(...)}`
# (server-common.cpp), and an overflow adds n_prompt_tokens / n_ctx (server-task.cpp,
# server_task_result_error::to_json). cpp-httplib keeps the connection alive.
def _llama(message: str, code: int = 400) -> dict[str, Any]:
    error = {"code": code, "message": message, "type": "exceed_context_size_error"}
    return {"error": {**error, "n_prompt_tokens": 9139, "n_ctx": 8192}}


LLAMA_HEADERS = {"Server": "llama.cpp", "Access-Control-Allow-Origin": ""}


# vLLM: ErrorResponse{error: ErrorInfo{message, type, param, code}} (entrypoints/openai/engine/
# protocol.py) on /v1/chat/completions and /v1/responses; /v1/messages translates it to
# AnthropicErrorResponse{type: "error", error: {type, message}} (entrypoints/anthropic/api_router.py).
def _vllm(message: str, protocol: str) -> dict[str, Any]:
    if protocol == "anthropic":
        return {"type": "error", "error": {"type": "BadRequestError", "message": message}}
    return {"error": {"message": message, "type": "BadRequestError", "param": "input_tokens", "code": 400}}


# Ollama: openai.NewError (openai/openai.go) on /v1/chat/completions and /v1/responses (the
# ResponsesWriter writes errors the same way), anthropic.NewError (anthropic/anthropic.go) on
# /v1/messages; gin sends JSON as "application/json; charset=utf-8".
def _ollama(message: str, protocol: str, status: int = 400) -> dict[str, Any]:
    kind = "invalid_request_error" if status == 400 else "api_error"
    if protocol == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_01"}
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


LLAMA_BODY_TEXT = json.dumps(
    _llama("request (9139 tokens) exceeds the available context size (8192 tokens), try increasing it")
)

CASES = [
    Case(
        "llama.cpp",
        "tools/server/server-context.cpp, send_error(..., ERROR_TYPE_EXCEED_CONTEXT_SIZE)",
        "request (9139 tokens) exceeds the available context size (8192 tokens), try increasing it",
        8192,
        headers=LLAMA_HEADERS,
    ),
    Case(
        "llama.cpp",
        "the same check before the numbers were added to the message (n_ctx still in the body)",
        "the request exceeds the available context size, try increasing it",
        8192,
        headers=LLAMA_HEADERS,
    ),
    Case(
        "llama.cpp",
        "server-context.cpp, a model that cannot split a batch",
        "input (9139 tokens) is larger than the max context size (8192 tokens). skipping",
        8192,
        headers=LLAMA_HEADERS,
    ),
    Case(
        "vLLM",
        "vllm/entrypoints/renderer.py, _create_tokens_prompt",
        "This model's maximum context length is 8192 tokens. However, your request has 9139 input "
        "tokens. Please reduce the length of the input messages.",
        8192,
        content_type="application/json",
    ),
    Case(
        "vLLM",
        "vllm/renderers/params.py, _token_len_check (VLLMValidationError)",
        "You passed 9139 input tokens and requested 1024 output tokens. However, the model's context "
        "length is only 8192 tokens, resulting in a maximum input length of 7168 tokens. Please "
        "reduce the length of the input prompt.",
        8192,
        content_type="application/json",
    ),
    Case(
        "vLLM",
        "vllm/v1/engine/processor.py (input_processor.py later), _validate_model_input",
        "The decoder prompt (length 9139) is longer than the maximum model length of 8192. Make sure "
        "that `max_model_len` is no smaller than the number of text tokens.",
        8192,
        content_type="application/json",
    ),
    Case(
        "vLLM",
        "renderers/params.py before v0.26: the prompt and the requested output against the context",
        "This model's maximum context length is 8192 tokens. However, you requested 64 output tokens "
        "and your prompt contains at least 8129 input tokens, for a total of at least 8193 tokens. "
        "Please reduce the length of the input prompt or the number of requested output tokens.",
        8192,
        content_type="application/json",
    ),
    Case(
        "vLLM",
        "vLLM < 0.8 (serving_engine.py), which sent ErrorResponse flat: {object, message, type, param, code}",
        "This model's maximum context length is 8192 tokens. However, you requested 9163 tokens (9139 "
        "in the messages, 24 in the completion). Please reduce the length of the messages or completion.",
        8192,
        body={"object": "error", "message": "MESSAGE", "type": "BadRequestError", "param": None, "code": 400},
        content_type="application/json",
    ),
    Case(
        "Ollama",
        "llm/llama_server.go: a prompt longer than the context with context shift off",
        "the prompt is longer than the context length currently available to the model; shorten the "
        "prompt, adjust the context length in settings, or use a model with a longer context length",
        None,
    ),
    Case(
        "Ollama",
        "x/mlxrunner/pipeline.go, answered as a 500 (runner.go wraps it in a StatusError 500)",
        "input length (9139 tokens) exceeds the model's maximum context length (8192 tokens)",
        8192,
        status=500,
    ),
    Case(
        "Ollama",
        "llm/llama_server.go passes a llama-server error body through as the message (statusErrorMessage)",
        LLAMA_BODY_TEXT,
        8192,
    ),
    Case(
        "LM Studio",
        'openclaude #353 (LM Studio 0.4): HTTP 400 {"error": "..."}',
        "The number of tokens to keep from the initial prompt is greater than the context length "
        "(n_keep: 13055>= n_ctx: 4096). Try to load the model with a larger context length, or "
        "provide a shorter input.",
        4096,
        body={"error": "MESSAGE"},
        headers={"X-Powered-By": "Express"},
    ),
    Case(
        "LM Studio",
        "secintel-ai #1 (LM Studio 0.4): Error code: 400 - {'error': '...'}",
        "Cannot truncate prompt with n_keep (14169) >= n_ctx (4096)",
        4096,
        body={"error": "MESSAGE"},
        headers={"X-Powered-By": "Express"},
    ),
    Case(
        "LM Studio",
        "lmstudio-bug-tracker #237 (LM Studio 0.3): BadRequestError 400",
        "Trying to keep the first 15857 tokens when context the overflows. However, the model is "
        "loaded with context length of only 8192 tokens, which is not enough. Try to load the "
        "model with a larger context length, or provide a shorter input.",
        8192,
        body={"error": "MESSAGE"},
        headers={"X-Powered-By": "Express"},
    ),
]


def _body(case: Case, protocol: str) -> dict[str, Any]:
    if case.body is not None:
        return json.loads(json.dumps(case.body).replace("MESSAGE", case.message.replace('"', '\\"')))
    if case.server == "llama.cpp":
        return _llama(case.message)
    if case.server == "vLLM":
        return _vllm(case.message, protocol)
    return _ollama(case.message, protocol, case.status)


def _chat(server: ModelServer, protocol: str, stream: bool = True) -> AgentError:
    with pytest.raises(AgentError) as caught:
        llm.chat(
            base_url=server.base_url,
            model="m",
            protocol=protocol,
            stream=stream,
            messages=[{"role": "user", "content": "a long conversation"}],
        )
    return caught.value


@pytest.mark.parametrize("protocol", SERVED)
@pytest.mark.parametrize("case", CASES, ids=[f"{c.server}-{i}" for i, c in enumerate(CASES)])
def test_a_local_servers_overflow_is_recognised_on_every_path_it_serves(case: Case, protocol: str) -> None:
    item = {
        "status": case.status,
        "body": json.dumps(_body(case, protocol)),
        "content_type": case.content_type,
        "headers": case.headers,
    }
    with ModelServer([item]) as server:
        error = _chat(server, protocol)
    assert error.overflow, f"{case.server} ({case.source}) not recognised on {protocol}: {error.message}"
    assert not error.retryable
    assert error.status == case.status
    assert context_limit(error) == case.limit


# LM Studio 0.4.21 (lmstudio-bug-tracker #2322): the overflow arrives as HTTP 200 with an SSE
# `event: error` (Express, keep-alive, chunked). That event is documented for chat; on the other
# paths the protocol's own error event carries the same message.
LM_STUDIO_STREAM_MESSAGE = (
    "Input does not fit in context length. The input has 31430 tokens, but the context length only "
    "supports 30000 tokens."
)
LM_STUDIO_STREAM = {
    "chat": {"error": {"message": LM_STUDIO_STREAM_MESSAGE}, "message": LM_STUDIO_STREAM_MESSAGE},
    "responses": {"type": "error", "code": None, "message": LM_STUDIO_STREAM_MESSAGE, "param": None},
    "anthropic": {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": LM_STUDIO_STREAM_MESSAGE},
    },
}


@pytest.mark.parametrize("protocol", SERVED)
def test_lm_studio_overflow_inside_a_200_stream_is_recognised(protocol: str) -> None:
    event = f"event: error\ndata: {json.dumps(LM_STUDIO_STREAM[protocol])}\n\n"
    item = {"status": 200, "chunks": [event], "headers": {"X-Powered-By": "Express"}}
    with ModelServer([item]) as server:
        error = _chat(server, protocol)
    assert error.overflow and not error.retryable and error.kind == "request"
    assert context_limit(error) == 30000


@pytest.mark.parametrize("stream", [True, False])
def test_a_gateway_passing_llama_cpp_through_gemini_paths_is_recognised(stream: bool) -> None:
    body = {"error": {"code": 400, "message": CASES[0].message, "status": "INVALID_ARGUMENT"}}
    with ModelServer([{"status": 400, "body": json.dumps(body)}]) as server:
        error = _chat(server, "gemini", stream=stream)
    assert error.overflow and context_limit(error) == 8192


@pytest.mark.parametrize("protocol", ["chat", "responses", "anthropic", "gemini"])
def test_a_429_that_mentions_tokens_is_a_rate_limit_on_every_protocol(protocol: str) -> None:
    body = json.dumps({"error": {"message": "Request too large: too many tokens per min (TPM)"}})
    message, overflow = get(protocol).error(429, body)
    assert not overflow and "too many tokens" in message
    assert get(protocol).error(400, body)[1]


def test_an_error_that_is_not_an_overflow_names_no_limit() -> None:
    error = AgentError("maximum context length is 8192", kind="request", overflow=False)
    assert context_limit(error) is None
    assert not get("chat").error(400, json.dumps({"error": {"message": "Invalid 'messages[3]'."}}))[1]
