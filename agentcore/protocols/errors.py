"""How a vendor error is read: its message, its kind, and whether the context overflowed.

    message, overflow = http_error(status, body_text)   # an HTTP error body, any protocol
    message, error = vendor_error(body_text)            # the message and the error object
    is_overflow(message, error)                         # also for in-stream error events
    raise reply_error(error, raw, kinds)                # an error inside a 200 reply or a stream
    context_limit(agent_error)                          # the context size an overflow names

Every adapter asks `is_overflow` about its HTTP errors and its in-stream error events, so a
wording is recognised whichever protocol carries it: llama.cpp, vLLM, Ollama and LM Studio
answer `/v1/chat/completions`, `/v1/responses` and `/v1/messages` from one error path each, and
gateways pass any vendor's text through. The caller keeps the one rule that needs the status:
a 429 is never an overflow ("Request too large ... tokens per min" is a rate limit).

Each wording says who writes it and where; tests/protocols/test_overflow.py replays every one
through a local server that answers as that server does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import AgentError


@dataclass(frozen=True)
class Wording:
    """One server's way of saying "too long". `pattern` (case-insensitive) recognises it; its
    optional group `limit` is the context size the message names."""

    source: str
    pattern: str


# Error `code` / `type` values that mean an overflow whatever the message says.
OVERFLOW_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})

OVERFLOW_WORDINGS: tuple[Wording, ...] = (
    # llama.cpp tools/server/server-context.cpp (send_error, ERROR_TYPE_EXCEED_CONTEXT_SIZE):
    # "request (9139 tokens) exceeds the available context size (8192 tokens), try increasing it";
    # before 2025: "the request exceeds the available context size, try increasing it".
    Wording("llama.cpp", r"exceeds the available context size(?: \((?P<limit>\d+) tokens\))?"),
    # llama.cpp, models that cannot split a batch: "input (9139 tokens) is larger than the max
    # context size (8192 tokens). skipping" (older: "input is larger than the max context size").
    Wording("llama.cpp", r"larger than the max context size(?: \((?P<limit>\d+) tokens\))?"),
    # OpenAI, DeepSeek, Groq, OpenRouter ("This endpoint's ..."), vLLM's renderer
    # (vllm/entrypoints/renderer.py: "This model's maximum context length is 8192 tokens.
    # However, your request has 9139 input tokens. Please reduce the length of the input
    # messages."), vLLM < 0.8 ("... you requested 9163 tokens (9139 in the messages, 24 in the
    # completion) ...") and vLLM renderers/params.py ("... you requested 64 output tokens and
    # your prompt contains at least 8129 input tokens ...").
    Wording("OpenAI, vLLM", r"maximum context length is (?P<limit>\d+)"),
    Wording("OpenAI", r"reduce the length of the messages"),
    # vLLM V1 engine (vllm/v1/engine/processor.py, later input_processor.py): "The decoder
    # prompt (length 9139) is longer than the maximum model length of 8192. Make sure that ...".
    Wording("vLLM", r"maximum model length(?: of (?P<limit>\d+))?"),
    # vLLM renderers/params.py (_token_len_check): "You passed 9139 input tokens and requested
    # 1024 output tokens. However, the model's context length is only 8192 tokens, ..."
    Wording("vLLM", r"context length is only (?P<limit>\d+) tokens"),
    # Ollama x/mlxrunner/pipeline.go (HTTP 500): "input length (9139 tokens) exceeds the
    # model's maximum context length (8192 tokens)".
    Wording("Ollama", r"maximum context length \((?P<limit>\d+) tokens\)"),
    # LM Studio (lmstudio-bug-tracker #2322, 0.4.21, an `event: error` in a 200 stream): "Input
    # does not fit in context length. The input has 31430 tokens, but the context length only
    # supports 30000 tokens."
    Wording("LM Studio", r"context length only supports (?P<limit>\d+) tokens"),
    # LM Studio (openclaude #353, HTTP 400 {"error": "..."}): "The number of tokens to keep from
    # the initial prompt is greater than the context length (n_keep: 13055>= n_ctx: 4096). ...";
    # (secintel-ai #1): "Cannot truncate prompt with n_keep (14169) >= n_ctx (4096)".
    Wording("LM Studio", r"n_keep\W+\d+\W*>=\s*n_ctx\W+(?P<limit>\d+)"),
    # LM Studio before 0.3.16 (lmstudio-bug-tracker #237, HTTP 400): "Trying to keep the first
    # 15857 tokens when context the overflows. However, the model is loaded with context length
    # of only 8192 tokens, which is not enough. ..."
    Wording("LM Studio", r"context length of only (?P<limit>\d+) tokens"),
    # LM Studio MLX engine (lmstudio-bug-tracker #2339): "Context size has been exceeded".
    Wording("LM Studio", r"context size has been exceeded"),
    # Ollama llm/llama_server.go (HTTP 400): "the prompt is longer than the context length
    # currently available to the model; shorten the prompt, ...", server/routes.go: "the input
    # length exceeds the context length"; and every wording above that says "context length".
    Wording("Ollama and others", r"context length"),
    # OpenAI Responses: "Your input exceeds the context window of this model. Please adjust your
    # input and try again."; Anthropic and gateways in front of it.
    Wording("OpenAI Responses", r"context window"),
    # OpenAI (newer models): "Input tokens exceed the configured limit of 272000 tokens. ..."
    Wording("OpenAI", r"tokens exceed the configured limit(?: of (?P<limit>\d+))?"),
    # Anthropic: "prompt is too long: 214564 tokens > 200000 maximum".
    Wording("Anthropic", r"prompt is too long(?:: \d+ tokens > (?P<limit>\d+) maximum)?"),
    # Anthropic: "input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, ..."
    Wording("Anthropic", r"exceed context limit(?:: \d+ \+ \d+ > (?P<limit>\d+))?"),
    # Gemini: "The input token count (1200293) exceeds the maximum number of tokens allowed
    # (1048576)."
    Wording("Gemini", r"exceeds the maximum number of tokens(?: allowed \((?P<limit>\d+)\))?"),
    Wording("Gemini", r"input token count.*exceeds the maximum"),
    # Gateways in front of other vendors, and the code spelled in a message.
    Wording("gateways", r"too many tokens"),
    Wording("gateways", r"context_length_exceeded"),
)

_PATTERNS = tuple(re.compile(w.pattern, re.IGNORECASE | re.DOTALL) for w in OVERFLOW_WORDINGS)
# llama.cpp also puts the numbers in the error object (server-task.cpp, server_task_result_error):
# {"error": {"code": 400, "message": ..., "type": "exceed_context_size_error",
#            "n_prompt_tokens": 9139, "n_ctx": 8192}}
_N_CTX = re.compile(r'"n_ctx"\s*:\s*(?P<limit>\d+)')


def http_error(status: int, body_text: str) -> tuple[str, bool]:
    """The vendor's message in an HTTP error body, and whether it reports a context overflow."""
    message, error = vendor_error(body_text)
    return message, status != 429 and is_overflow(message, error)


def kind_for_status(status: int | None) -> str:
    """The AgentError kind of an HTTP status (API.md §Errors and retries)."""
    if status is None:
        return "server"
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "limit"
    if status == 408:
        return "timeout"
    if status >= 500:
        return "server"
    if status >= 400:
        return "request"
    return "unknown"


def vendor_error(body_text: str) -> tuple[str, dict[str, Any]]:
    """The vendor's message from an error body, and the error object (or {}).

    Reads `{"error": {"message": ...}}` (OpenAI, Anthropic, Gemini, llama.cpp, Ollama),
    `{"error": "..."}`, top-level `message` (vLLM's `{"object": "error", ...}`), `detail`
    (FastAPI-based servers), and a list holding one of those. Falls back to the trimmed text.
    """
    try:
        data: Any = json.loads(body_text)
    except ValueError:
        data = None
    if isinstance(data, list) and data:
        data = data[0]
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str) and error["message"]:
            return error["message"], error
        if isinstance(error, str) and error:
            return error, data
        for key in ("message", "detail"):
            if isinstance(data.get(key), str) and data[key]:
                return data[key], data
    text = (body_text or "").strip()
    return (text[:1000] if text else "empty error body"), {}


def is_overflow(message: str, error: Mapping[str, Any] | None = None) -> bool:
    """Whether `message` (and the vendor's error object, when there is one) says the request
    does not fit the model's context."""
    if error and (error.get("code") in OVERFLOW_CODES or error.get("type") in OVERFLOW_CODES):
        return True
    return any(pattern.search(message) for pattern in _PATTERNS)


def reply_error(
    error: Any, raw: str, kinds: Mapping[str, str], *, kind_keys: tuple[str, ...] = ("code", "type")
) -> AgentError:
    """An error object a vendor sent inside a 200 reply or a stream, as an AgentError.

    Its message is the object's `message` (else the object as JSON), its `status` an HTTP
    status in the object's `status` or `code` field. Its kind: "request" for a context overflow;
    else what `kinds` (the adapter's table of the vendor's codes) says of the first field of
    `kind_keys` the object has; else the kind of its status; else "server" (so it is retried).
    """
    if not isinstance(error, Mapping):
        error = {"message": str(error)}
    message = error.get("message")
    if not isinstance(message, str) or not message:
        message = json.dumps(dict(error), ensure_ascii=False)
    status = _status_of(error.get("status")) or _status_of(error.get("code"))
    overflow = is_overflow(message, error)
    code = next((str(error[key]) for key in kind_keys if error.get(key)), "")
    if overflow:
        kind = "request"
    elif code in kinds:
        kind = kinds[code]
    else:
        kind = kind_for_status(status) if status is not None else "server"
    return AgentError(message, kind=kind, status=status, body=raw, overflow=overflow)


def _status_of(value: Any) -> int | None:
    """`value` as an HTTP status (an int or a string of digits, 100–599), else None."""
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
        return value
    return None


def context_limit(error: AgentError) -> int | None:
    """The model's context size (tokens) that an overflow error names, or None.

    Read from the message first, then from the body (llama.cpp's `n_ctx` field).
    """
    if not error.overflow:
        return None
    for text in (error.message, error.body or ""):
        for pattern in (*_PATTERNS, _N_CTX):
            found = pattern.search(text)
            if found is not None and found.groupdict().get("limit"):
                limit = int(found.group("limit"))
                if limit > 0:
                    return limit
    return None
