"""One model call: protocol adapter + HTTP + error kinds. No retries (that is the loop's job).

    result = chat(base_url="http://127.0.0.1:8080/v1", model="small",
                  messages=[{"role": "user", "content": "hi"}])
    result.text, result.tool_calls, result.usage, result.finish_reason

Every failure leaves as `AgentError` with a stable kind; the API key never appears in it.
This is the only module (with its transport `_http.py`) that touches `requests`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from ._utils import netfail, surrogates
from ._utils.cancel import Signal, child
from ._utils.memo import active, copied
from ._utils.secrets import redact
from ._utils.sse import SSEParser
from .connection import Connection
from .errors import AgentError
from .protocols import encoded_body, kind_for_status
from .protocols import get as get_adapter
from .protocols.base import LLMResult, Request, StreamParser, ToolCall

log = logging.getLogger("agentcore")

__all__ = ["LLMResult", "ModelAdapter", "ToolCall", "chat", "complete"]

EventCallback = Callable[[dict[str, Any]], None]
_ERROR_BODY_LIMIT = 64 * 1024
_SECRET_HEADER_WORDS = ("key", "auth", "token", "secret")
# Where a reply can carry a lone surrogate: JSON's "\ud83d" escapes, and (json.loads decodes
# bytes with surrogatepass) the UTF-8-style bytes ED A0..BF. A body with neither is not walked.
_MAYBE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_MAYBE_SURROGATE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")


class ModelAdapter(Protocol):
    """A model we don't ship a protocol for: pass an instance as `config["model"]`.

    `request` holds the protocol-neutral context: `system`, `messages` (history format),
    `tools` (`{"name", "description", "input_schema"}`), `provider`, `output`, `max_tokens`.
    Call `on_event` with stream events (`{"type": "text-delta", "text": ...}`, …) if you stream,
    stop when `cancel` is set (raise `AgentError(kind="aborted")`), and raise `AgentError` with
    a kind for failures so the loop's retry policy applies. Build the result with
    `agentcore.protocols.base.make_result(parts, usage, finish_reason, raw)`.
    """

    def chat(
        self,
        request: dict[str, Any],
        *,
        cancel: threading.Event | None,
        on_event: EventCallback | None,
        timeout: float | None,
    ) -> LLMResult: ...


def chat(
    *,
    base_url: str = "",
    api_key: str | Callable[[], str] = "",
    model: Any,
    messages: Sequence[Mapping[str, Any]],
    system: str = "",
    tools: Any = None,
    protocol: str = "chat",
    provider: Mapping[str, Any] | None = None,
    stream: bool = True,
    cache: bool | Mapping[str, Any] = True,
    capabilities: Mapping[str, bool] | None = None,
    media_fallback: str = "error",
    output: Any = None,
    max_tokens: int | None = None,
    on_llm_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
    request_timeout: float | None = None,
    stream_idle_timeout: float | None = None,
) -> LLMResult:
    """Send exactly one request to a model and return what it answered (no retries).

    `messages` are history-format (no system message: pass `system`); `tools` a ToolSet, its
    `schema` or `{"name", "description", "input_schema"}` dicts; `api_key` a key or a function
    called before the request. Setting `cancel` cuts the connection (kind "aborted"); a stream
    silent for `stream_idle_timeout` s fails (kind "timeout"). Raises AgentError with a kind.
    """
    connection = Connection(
        base_url=base_url,
        api_key=api_key,
        model=model,
        protocol=protocol,
        provider=dict(provider or {}),
        stream=stream,
        cache=dict(cache) if isinstance(cache, Mapping) else cache,
        capabilities=dict(capabilities or {}),
        media_fallback=media_fallback,
        max_tokens=max_tokens,
        request_timeout=request_timeout,
        stream_idle_timeout=stream_idle_timeout,
    )
    _check(connection)
    copies = [dict(m) for m in messages]
    request = connection.request(system=system, messages=copies, tools=tool_schemas(tools), output=output)
    signal, unfollow = child(cancel)
    try:
        return complete(connection, request, cancel=signal, on_event=on_llm_event)
    finally:
        unfollow()


def _check(connection: Connection) -> None:
    """The checks a config gets at `Agent()` (kind "config", naming the key), for a direct `chat()`."""
    from . import config as _config

    keys = ("protocol", "provider", "cache", "capabilities", "media_fallback", "model")
    _config.validate(_config.merge(_config.DEFAULTS, {key: getattr(connection, key) for key in keys}))


def tool_schemas(tools: Any) -> list[dict[str, Any]]:
    """Tool declarations for a request: name, description, input_schema."""
    if not tools:
        return []
    schema = getattr(tools, "schema", tools)
    items = schema.values() if isinstance(schema, Mapping) else schema
    return [
        {
            "name": t["name"],
            "description": t.get("description", ""),
            "input_schema": t.get("input_schema") or {"type": "object", "properties": {}},
        }
        for t in items
    ]


def complete(
    connection: Connection,
    request: Request,
    *,
    cancel: Signal | None,
    on_event: EventCallback | None,
) -> LLMResult:
    """One request (built by `connection.request`): through a custom adapter object or a built-in protocol.

    A callable `request.api_key` is called here, once per HTTP attempt (expiring tokens).
    """
    if cancel is not None and cancel.is_set():
        raise AgentError("the request was cancelled", kind="aborted")
    timeout = connection.request_timeout
    if connection.adapter is not None:
        return _custom(connection.adapter, request, cancel, on_event, timeout)
    _check_base_url(request.base_url)
    request = _with_current_key(request)
    secrets = _secrets(request)
    timeouts = (timeout, connection.stream_idle_timeout)
    try:
        return _http_request(request, connection.protocol, cancel, on_event, timeouts, secrets)
    except AgentError as error:
        if cancel is not None and cancel.is_set() and error.kind != "aborted":
            raise AgentError("the request was cancelled", kind="aborted", cause=error) from error
        raise


def _with_current_key(request: Request) -> Request:
    key: Any = request.api_key
    if not callable(key):
        return request
    try:
        value = key()
    except Exception as exc:
        # Likely a token service that failed: retried like a rejected key.
        raise AgentError(
            f"the api_key function raised {type(exc).__name__}: {exc}", kind="auth", cause=exc
        ) from exc
    if not isinstance(value, str):
        raise AgentError(f"the api_key function must return a str, got {type(value).__name__}", kind="config")
    return dataclasses.replace(request, api_key=value)


def _check_base_url(base_url: str) -> None:
    if not base_url:
        raise AgentError(
            "config base_url is empty: set it to the API root, e.g. https://api.openai.com/v1",
            kind="config",
        )


def _custom(
    adapter: Any,
    request: Request,
    cancel: Signal | None,
    on_event: EventCallback | None,
    timeout: float | None,
) -> LLMResult:
    where = _reply_where(request, "a custom adapter")
    payload = {
        "system": request.system,
        # Copies: the adapter may edit them in place, and the loop sends the originals again.
        "messages": _sendable(copied(request.messages), _request_where(request, "a custom adapter")),
        "tools": request.tools,
        "provider": request.provider,
        "output": request.output,
        "max_tokens": request.max_tokens,
    }
    if on_event is not None:
        on_event = _encodable_events(on_event)
    try:
        result = adapter.chat(payload, cancel=cancel, on_event=on_event, timeout=timeout)
    except AgentError:
        raise
    except Exception as exc:
        raise AgentError(
            f"the model adapter failed: {type(exc).__name__}: {exc}", kind="unknown", cause=exc
        ) from exc
    if not isinstance(result, LLMResult):
        raise AgentError(
            f"a model adapter's chat() must return an LLMResult, got {type(result).__name__}", kind="unknown"
        )
    return _encodable_result(result, where)


def _reply_where(request: Request, via: str) -> str:
    return f"the reply of model {request.model or '(adapter)'!r} ({via})"


def _request_where(request: Request, protocol: str) -> str:
    return f"the request to model {request.model or '(adapter)'!r} ({protocol})"


# A request holds such text only when its history did (loaded, or edited by hand).
_SENT_AS = "sent as U+FFFD; history is not edited"


def _sendable(messages: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
    found = surrogates.count(messages)
    if not found:
        return messages
    surrogates.warn(where, found, _SENT_AS)
    return surrogates.fixed(messages)


def _encodable_events(on_event: EventCallback) -> EventCallback:
    def forward(event: dict[str, Any]) -> None:
        on_event(surrogates.fixed(event))

    return forward


def _encodable_result(result: LLMResult, where: str) -> LLMResult:
    """A custom adapter's result with text UTF-8 cannot encode replaced (U+FFFD) before history."""
    found = surrogates.count([result.text, result.reasoning, result.message])
    found += sum(surrogates.count([c.id, c.name, c.arguments, c.raw_arguments]) for c in result.tool_calls)
    if not found:
        return result
    surrogates.replaced(result.message, where)  # the WARNING
    return dataclasses.replace(
        result,
        text=surrogates.fixed(result.text),
        reasoning=surrogates.fixed(result.reasoning),
        tool_calls=[
            ToolCall(
                surrogates.fixed(c.id),
                surrogates.fixed(c.name),
                surrogates.fixed(c.arguments),
                surrogates.fixed(c.raw_arguments),
            )
            for c in result.tool_calls
        ],
        message=surrogates.fixed(result.message),
        raw=surrogates.fixed(result.raw),
    )


def _http_request(
    request: Request,
    protocol: str,
    cancel: Signal | None,
    on_event: EventCallback | None,
    timeouts: tuple[float | None, float | None],
    secrets: list[str],
) -> LLMResult:
    """POST the request; read the reply as SSE whenever a stream was asked for (and it is not JSON)."""
    from ._http import Call

    timeout, idle_timeout = timeouts
    adapter = get_adapter(protocol)
    wire = adapter.build(request)
    body = _encoded(wire.body, _request_where(request, protocol))
    headers = {"Content-Type": "application/json", **wire.headers}
    if request.stream:
        headers.setdefault("Accept", "text/event-stream")
    with Call(cancel) as call:
        response = _post(call, wire.url, body, headers, timeout, secrets)
        if response.status_code >= 400:
            raise _status_error(adapter, response, secrets)
        chunks = _guarded_chunks(call, response, secrets, idle_timeout if request.stream else None)
        if request.stream:
            # Some servers send SSE without its content type; the official SDKs go by the
            # request's stream flag. A server that ignored the flag answers with a JSON object.
            first = _first_chunk(chunks)
            chunks = _prepend(first, chunks)
            if not _is_json(response, first):
                parser = _Encodable(adapter.stream(request), _reply_where(request, protocol))
                return _read_stream(call, response, chunks, parser, on_event, secrets)
        return _read_json(response, chunks, adapter, request, on_event, secrets, protocol)


def _encoded(body: Any, where: str) -> bytes:
    """The UTF-8 body. A lone surrogate (a loaded or hand-edited history) goes out as U+FFFD."""
    try:
        return encoded_body(body, active())
    except UnicodeEncodeError:
        # Nothing kept is changed by a failed encoding: the kept text only ever holds valid UTF-8.
        text, found = surrogates.sub_text(json.dumps(body, ensure_ascii=False, separators=(",", ":")))
        surrogates.warn(where, found, _SENT_AS)
        return text.encode("utf-8")


class _Encodable:
    """A stream parser fed events whose JSON has its lone surrogates replaced (one WARNING per reply)."""

    def __init__(self, parser: StreamParser, where: str) -> None:
        self.parser = parser
        self.where = where
        self.found = 0

    @property
    def done(self) -> bool:
        return self.parser.done

    @done.setter
    def done(self, value: bool) -> None:
        self.parser.done = value

    def feed(self, event: Any) -> list[dict[str, Any]]:
        if _MAYBE_SURROGATE.search(event.data):
            event = self._cleaned(event)
        return self.parser.feed(event)

    def _cleaned(self, event: Any) -> Any:
        try:
            value = json.loads(event.data)
        except ValueError:
            return event  # the parser reports what it cannot read
        found = surrogates.count(value)
        if not found:
            return event
        self.found += found
        fixed = json.dumps(surrogates.fixed(value), ensure_ascii=False)
        return dataclasses.replace(event, data=fixed)

    def result(self) -> LLMResult:
        if self.found:
            surrogates.warn(self.where, self.found)
        return self.parser.result()


def _first_chunk(chunks: Iterator[bytes]) -> bytes:
    for chunk in chunks:
        if chunk.strip():
            return chunk
    return b""


def _prepend(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if first:
        yield first
    yield from rest


def _is_json(response: Any, first: bytes) -> bool:
    """A JSON content type is believed; without one, a body opening with `{` or `[` is JSON."""
    content_type = response.headers.get("Content-Type", "").lower()
    if "event-stream" in content_type:
        return False
    return "json" in content_type or first.lstrip()[:1] in (b"{", b"[")


def _post(
    call: Any, url: str, body: bytes, headers: dict[str, str], timeout: float | None, secrets: list[str]
) -> Any:
    import requests

    try:
        return call.post(url, body, headers, timeout)
    except requests.exceptions.Timeout as exc:
        raise _transport_error(call, exc, "timeout", secrets, url) from exc
    except (requests.exceptions.RequestException, OSError) as exc:
        raise _transport_error(call, exc, "network", secrets, url) from exc


def _transport_error(call: Any, exc: BaseException, kind: str, secrets: list[str], url: str) -> AgentError:
    if call.aborted:
        return AgentError("the request was cancelled", kind="aborted", cause=exc)
    if call.idle_expired:
        return _idle_error(call.idle_s, exc)
    if kind == "network" and _is_timeout(exc):
        kind = "timeout"
    # One line naming the address and the cause; the wrapped urllib3 errors stay in `cause`.
    return AgentError(redact(netfail.describe(exc, url), secrets), kind=kind, cause=exc)


def _is_timeout(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, TimeoutError) or "timeout" in type(current).__name__.lower():
            return True
        if "timed out" in str(current).lower():
            return True
        current = current.__cause__ or current.__context__
        if current is None and exc.args and isinstance(exc.args[0], BaseException):
            current = exc.args[0]
    return False


def _status_error(adapter: Any, response: Any, secrets: list[str]) -> AgentError:
    from ._utils.retry import parse_retry_after

    status = int(response.status_code)
    text = _read_limited(response)
    message, overflow = adapter.error(status, text)
    message = redact(message or response.reason or f"HTTP {status}", secrets)
    # `x-should-retry: false` (OpenAI's servers and SDKs use it): the server says retrying is futile.
    final = str(response.headers.get("x-should-retry", "")).strip().lower() == "false"
    return AgentError(
        f"HTTP {status}: {message}",
        kind=kind_for_status(status),
        status=status,
        retryable=False if final else None,
        body=redact(text, secrets),
        overflow=overflow,
        retry_after=parse_retry_after(dict(response.headers)),
    )


def _read_limited(response: Any) -> str:
    try:
        data = response.raw.read(_ERROR_BODY_LIMIT)
    except Exception:
        data = b""
    return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else str(data)


def _read_json(
    response: Any,
    chunks: Iterator[bytes],
    adapter: Any,
    request: Request,
    on_event: EventCallback | None,
    secrets: list[str],
    protocol: str,
) -> LLMResult:
    data = b"".join(chunks)
    status = int(response.status_code)
    try:
        body = json.loads(data)
        if _MAYBE_SURROGATE_BYTES.search(data):
            body = surrogates.replaced(body, _reply_where(request, protocol))
    except ValueError as exc:
        snippet = redact(data[:200].decode("utf-8", errors="replace"), secrets)
        raise _unreadable(f"a body that is not JSON: {snippet!r}", status, data, secrets, exc) from exc
    try:
        result: LLMResult = adapter.parse(body, request)
    except AgentError as error:
        _redact_error(error, secrets)
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        what = f"a body this protocol cannot read: {type(exc).__name__}: {exc}"
        raise _unreadable(what, status, data, secrets, exc) from exc
    _emit(on_event, {"type": "finish", "finish_reason": result.finish_reason, "usage": result.usage})
    return result


def _unreadable(what: str, status: int, data: bytes, secrets: list[str], cause: Exception) -> AgentError:
    """A reply whose body cannot be used (kind "unknown"); the body is kept, keys masked."""
    body = redact(data.decode("utf-8", errors="replace"), secrets)
    return AgentError(
        f"the server answered {status} with {what}", kind="unknown", status=status, body=body, cause=cause
    )


def _read_stream(
    call: Any,
    response: Any,
    chunks: Iterator[bytes],
    parser: StreamParser,
    on_event: EventCallback | None,
    secrets: list[str],
) -> LLMResult:
    sse = SSEParser()
    status = int(response.status_code)
    for chunk in chunks:
        for event in sse.feed(chunk):
            _feed(parser, event, on_event, status, secrets)
    for event in sse.flush():
        _feed(parser, event, on_event, status, secrets)
    if call.aborted:
        raise AgentError("the request was cancelled", kind="aborted")
    if not parser.done:
        raise AgentError("the stream ended before its end marker", kind="network", status=status)
    try:
        result = parser.result()
    except AgentError as error:
        _redact_error(error, secrets)
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise AgentError(
            f"the stream could not be read: {exc}", kind="unknown", status=status, cause=exc
        ) from exc
    _emit(on_event, {"type": "finish", "finish_reason": result.finish_reason, "usage": result.usage})
    return result


def _feed(
    parser: StreamParser, event: Any, on_event: EventCallback | None, status: int, secrets: list[str]
) -> None:
    try:
        events = parser.feed(event)
    except AgentError as error:
        _redact_error(error, secrets)
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise AgentError(
            redact(f"a stream event could not be read: {type(exc).__name__}: {exc}", secrets),
            kind="unknown",
            status=status,
            cause=exc,
        ) from exc
    for item in events:
        _emit(on_event, item)


def _guarded_chunks(
    call: Any, response: Any, secrets: list[str], idle_timeout: float | None
) -> Iterator[bytes]:
    """Body chunks; transport failures become network/timeout errors, a cancel becomes aborted."""
    iterator = call.chunks(response, idle_timeout)
    while True:
        try:
            chunk = next(iterator)
        except StopIteration:
            break
        except Exception as exc:
            kind = "timeout" if _is_timeout(exc) else "network"
            raise _transport_error(call, exc, kind, secrets, str(getattr(response, "url", ""))) from exc
        yield chunk
    if call.idle_expired and not call.aborted:
        # The cut by the idle watch may read as a clean end of a close-delimited body.
        raise _idle_error(idle_timeout)


def _idle_error(idle_timeout: float | None, cause: BaseException | None = None) -> AgentError:
    return AgentError(
        f"the stream delivered no data for {idle_timeout} s (stream_idle_timeout)",
        kind="timeout",
        cause=cause,
    )


def _redact_error(error: AgentError, secrets: list[str]) -> None:
    """Mask the keys in an adapter's error: its message and its body may quote the reply."""
    error.message = redact(error.message, secrets)
    error.args = (error.message,)
    if error.body:
        error.body = redact(error.body, secrets)


def _emit(on_event: EventCallback | None, event: dict[str, Any]) -> None:
    if on_event is None:
        return
    try:
        on_event(event)
    except Exception:
        log.warning("on_llm_event raised; the request goes on", exc_info=True)


def _secrets(request: Request) -> list[str]:
    secrets = [request.api_key] if request.api_key else []
    headers = request.provider.get("headers") or {}
    for name, value in headers.items():
        if any(word in name.lower() for word in _SECRET_HEADER_WORDS) and isinstance(value, str):
            secrets.append(value)
            if value.lower().startswith("bearer "):
                secrets.append(value[7:])
    return secrets
