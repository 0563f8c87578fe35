"""Tools from an MCP server, over stdio or streamable HTTP (extra `agentcore[mcp]`).

    from agentcore import Agent
    from agentcore import mcp

    with mcp.connect(command=["npx", "-y", "@modelcontextprotocol/server-filesystem", "."]) as files:
        agent = Agent(config=..., tools=files)

The official `mcp` SDK is asyncio-only, and the agent calls tools from plain threads. So each
connection owns one background thread running its own event loop: the session lives there, and a
tool call is a coroutine handed to that loop (`run_coroutine_threadsafe`), so calls from many tool
threads share one connection concurrently. This module and `aio.py` are the only ones that import
asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from ._utils import surrogates
from .errors import AgentError
from .tools.handlers import ToolSet
from .tools.toolset import adopt

__all__ = ["MCPTools", "connect"]

INSTALL_HINT = "pip install 'agentcore[mcp]'"
# How often a waiting tool thread looks at its cancel event (ToolContext.cancel is a plain
# threading.Event, which cannot be waited on together with the call's future).
_CANCEL_POLL_S = 0.02
_CLOSE_GRACE_S = 10.0
# mcp 1.x over HTTP: how often a ping checks the server while calls wait (see _probe_loop).
_PROBE_S = 1.0

Transport = Callable[[contextlib.AsyncExitStack], Any]
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def connect(
    command: Sequence[str] | None = None,
    url: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30,
) -> MCPTools:
    """Connect to one MCP server and list its tools.

    Args:
        command: the server's command line (stdio transport), e.g. `["python", "server.py"]`.
        url: the server's streamable HTTP endpoint, e.g. `"http://127.0.0.1:8000/mcp"`.
        env: variables added to the server process's environment (stdio only).
        headers: HTTP headers sent with every request (HTTP only), e.g. an Authorization header.
        timeout: seconds that connecting, and then each call, may take.

    Raises:
        AgentError: kind "config" for bad arguments or a missing `mcp` package; "timeout" when
            the server does not answer within `timeout`; "network" when the connection fails.
    """
    sdk = _sdk()
    if (command is None) == (url is None):
        raise AgentError("mcp.connect() takes exactly one of command=[...] or url=...", kind="config")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise AgentError("mcp.connect(): timeout must be a number of seconds > 0", kind="config")
    if command is not None:
        if isinstance(command, str) or not command or not all(isinstance(p, str) for p in command):
            raise AgentError("mcp.connect(): command must be a non-empty list of str", kind="config")
        if headers:
            raise AgentError("mcp.connect(): headers= is for url= servers", kind="config")
        label = " ".join(command)
        transport = _stdio(sdk, list(command), dict(env) if env else None)
    else:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise AgentError(f"mcp.connect(): url must be an http(s):// URL, got {url!r}", kind="config")
        if env:
            raise AgentError("mcp.connect(): env= is for command= servers", kind="config")
        label = url
        transport = _http(url, dict(headers) if headers else None)
    return MCPTools(sdk, transport, label, float(timeout), probe=url is not None)


class MCPTools:
    """A live connection to one MCP server; a ToolSet source (`Agent(tools=...)`, `tools.load()`).

    Attributes:
        name: the server's `serverInfo.name`, else its command line or URL.
        tools: the ToolSet of the server's tools (listed once, at connect).

    One connection's whole life is here — the public face, the background event loop that owns
    the SDK's session, the calls the agent's threads hand over to it — because each of them
    reads or hands over that loop's state; hence the number of methods.
    """

    def __init__(
        self, sdk: Any, transport: Transport, label: str, timeout: float, *, probe: bool = False
    ) -> None:
        self.name = label
        self.timeout = timeout
        self.tools = ToolSet()
        self._sdk = sdk
        self._transport = transport
        self._session: Any = None
        self._legacy_ids = False
        self._pending: set[asyncio.Future[BaseException]] = set()
        self._probe_http = probe
        self._probe: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._main: asyncio.Task[None] | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._dead: str | None = None
        self._abandoned = False  # connect() gave up: a session still starting must not go on
        self._thread = threading.Thread(target=self._serve, name=f"agentcore-mcp {label}"[:60], daemon=True)
        self._thread.start()
        self._await_ready()

    # ------------------------------------------------------------ public

    def as_toolset(self) -> ToolSet:
        """The server's tools (what `tools.adopt()` / `load()` take from this object)."""
        return self.tools

    def close(self) -> None:
        """End the session: the server process (stdio) or HTTP session ends; safe to call twice."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended between the check and the call
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not threading.current_thread():
            self._thread.join(_CLOSE_GRACE_S)
        self._dead = self._dead or "closed"

    def __enter__(self) -> MCPTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MCPTools({self.name!r}, tools={list(self.tools)!r})"

    # ------------------------------------------------------------ connecting (caller's thread)

    def _await_ready(self) -> None:
        if not self._ready.wait(self.timeout):
            self._abandoned = True
            self._cancel_main()
            self._thread.join(_CLOSE_GRACE_S)
            raise AgentError(
                f"MCP server {self.name!r} did not answer within {self.timeout:g} s", kind="timeout"
            )
        if self._failure is not None:
            self._thread.join(_CLOSE_GRACE_S)
            cause = self._failure
            if isinstance(cause, AgentError) and cause.kind == "config":  # a tool name we refuse
                raise AgentError(f"MCP server {self.name!r}: {cause.message}", kind="config") from cause
            raise AgentError(
                f"could not connect to MCP server {self.name!r}: {_describe(cause)}", kind="network"
            ) from cause

    def _cancel_main(self) -> None:
        loop, main = self._loop, self._main
        if loop is not None and main is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(main.cancel)

    # ------------------------------------------------------------ the session (background thread)

    def _serve(self) -> None:
        try:
            asyncio.run(self._session_main())
        except BaseException as exc:  # the caller's thread reports it; this thread has no one to tell
            self._failure = self._failure or exc
        finally:
            self._dead = self._dead or "exited"
            self._ready.set()

    async def _session_main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._main = asyncio.current_task()
        if self._abandoned:
            return
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._transport(stack)
                read = _EncodableReads(read, self._sdk, lambda: self.name)
                client = self._sdk.ClientSession(read, write, message_handler=self._on_message)
                session = await stack.enter_async_context(client)
                info = _wire(await session.initialize())
                self.name = (info.get("serverInfo") or {}).get("name") or self.name
                self._session = session
                # The 1.x client numbers requests itself, never announces a cancelled call, and
                # leaves a call waiting when its HTTP request fails; 2.x has a dispatcher that
                # sends `notifications/cancelled` and fails the call on its own.
                self._legacy_ids = not hasattr(session, "_dispatcher") and hasattr(session, "_request_id")
                self.tools = adopt([self._tool(spec) for spec in await self._list_tools(session)])
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:
            if not self._ready.is_set():
                self._failure = exc
            self._dead = f"the connection ended ({_describe(exc)})"
            if not isinstance(exc, Exception):
                raise
        finally:
            self._dead = self._dead or "closed"

    async def _list_tools(self, session: Any) -> list[dict[str, Any]]:
        listing = _wire(await session.list_tools())
        tools = list(listing.get("tools", []))
        cursor = listing.get("nextCursor")
        while cursor:
            page = _wire(
                await session.list_tools(params=self._sdk.types.PaginatedRequestParams(cursor=cursor))
            )
            tools += page.get("tools", [])
            cursor = page.get("nextCursor")
        return tools

    def _tool(self, spec: dict[str, Any]) -> dict[str, Any]:
        name = spec["name"]

        def execute(input: dict[str, Any], ctx: Any) -> Any:
            return self._call(name, input, ctx.cancel)

        return {
            "name": name,
            "description": spec.get("description") or "",
            "input_schema": spec.get("inputSchema") or {"type": "object", "properties": {}},
            "execute": execute,
            "timeout": self.timeout,
        }

    # ------------------------------------------------------------ calling (tool threads)

    def _call(self, name: str, arguments: dict[str, Any], cancel: threading.Event) -> Any:
        loop = self._loop
        if self._dead is not None or loop is None:
            return self._failed(f"is not running: {self._dead or 'not connected'}")
        try:
            future = asyncio.run_coroutine_threadsafe(self._call_async(name, arguments), loop)
        except RuntimeError:  # the loop closed after the check above
            return self._failed("is not running: the connection ended")
        done = threading.Event()
        future.add_done_callback(lambda _: done.set())
        while not done.wait(_CANCEL_POLL_S):
            if cancel.is_set():
                future.cancel()  # cancels the task; the server is told (notifications/cancelled)
                return _error(f"The call to MCP server {self.name!r} was cancelled.")
        return self._outcome(future, name)

    def _outcome(self, future: Future[dict[str, Any]], name: str) -> Any:
        try:
            result = future.result()
        except BaseException as exc:  # everything the SDK or a dying server throws is a tool error
            if self._dead is not None:
                return self._failed(f"stopped: {self._dead}")
            return self._failed(f"failed: {_describe(exc)}")
        where = f"the result of tool {name!r} of MCP server {self.name!r}"
        return mcp_result(surrogates.replaced(result, where))

    def _failed(self, what: str) -> dict[str, Any]:
        return _error(f"MCP server {self.name!r} {what}")

    async def _call_async(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        ids: list[Any] = []
        closed = asyncio.ensure_future(self._closed_wait())
        call = asyncio.ensure_future(self._numbered_call(name, arguments, ids))
        broken: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()
        self._pending.add(broken)
        self._start_probe()
        try:
            await asyncio.wait({call, closed, broken}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            call.cancel()
            if ids and ids[0] is not None:
                asyncio.get_running_loop().create_task(self._send_cancelled(ids[0]))
            raise
        finally:
            closed.cancel()
            self._pending.discard(broken)
        if not call.done():
            call.cancel()
            why = _describe(broken.result()) if broken.done() else self._dead
            raise ConnectionError(why or "the connection ended")
        return _wire(call.result())

    async def _on_message(self, message: Any) -> None:
        """The session's message handler: a transport error (1.x: a failed HTTP call) ends pending calls."""
        if isinstance(message, Exception) and self._legacy_ids:
            self._fail_pending(message)

    def _fail_pending(self, error: BaseException) -> None:
        for waiter in list(self._pending):
            if not waiter.done():
                waiter.set_result(error)

    def _start_probe(self) -> None:
        if self._legacy_ids and self._probe_http and (self._probe is None or self._probe.done()):
            self._probe = asyncio.ensure_future(self._probe_loop())

    async def _probe_loop(self) -> None:
        """mcp 1.x over HTTP drops a response stream that breaks (the server died) without failing
        the call, so while calls wait, a ping asks whether the server is still there."""
        while self._pending:
            await asyncio.sleep(_PROBE_S)
            if not self._pending:
                return
            try:
                await asyncio.wait_for(self._session.send_ping(), self.timeout)
            except Exception as exc:  # unreachable, or too slow to answer a ping: it is gone
                self._fail_pending(exc)
                return

    async def _numbered_call(self, name: str, arguments: dict[str, Any], ids: list[Any]) -> Any:
        session = self._session
        # 1.x numbers requests with a counter that call_tool takes before its first await, so
        # reading it here, in the same step, gives this call's id (needed to cancel it).
        ids.append(session._request_id if self._legacy_ids else None)
        return await session.call_tool(name, arguments)

    async def _closed_wait(self) -> None:
        """Ends when the session ends (close() or a dead server), so no call waits forever."""
        main = self._main
        if main is not None:
            await asyncio.wait({main})

    async def _send_cancelled(self, request_id: Any) -> None:
        types = self._sdk.types
        params = types.CancelledNotificationParams(requestId=request_id, reason="cancelled by the agent")
        note = types.ClientNotification(types.CancelledNotification(params=params))
        with contextlib.suppress(Exception):  # a dead connection needs no notice
            await self._session.send_notification(note)


# ---------------------------------------------------------------- results


def mcp_result(result: Mapping[str, Any]) -> Any:
    """A tool return value from a `CallToolResult` in wire form (camelCase keys).

    `isError` → error text; `structuredContent` → that alone, as json; otherwise text when every
    item is text, else a content block of text / image / file parts.
    """
    parts = [_part(item) for item in result.get("content") or []]
    if result.get("isError"):
        texts = [p["text"] for p in parts if p["type"] == "text"]
        return _error("\n".join(texts) or "The MCP tool reported an error.")
    if result.get("structuredContent") is not None:
        return {"output": {"type": "json", "value": result["structuredContent"]}}
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return {"output": {"type": "content", "value": parts}}


def _error(text: str) -> dict[str, Any]:
    return {"output": {"type": "error-text", "value": text}}


def _part(item: Mapping[str, Any]) -> dict[str, Any]:
    kind = item.get("type")
    if kind == "text":
        return {"type": "text", "text": str(item.get("text", ""))}
    if kind == "image":
        return {
            "type": "image",
            "image": item.get("data", ""),
            "media_type": item.get("mimeType") or "image/png",
        }
    if kind == "audio":
        return {
            "type": "file",
            "data": item.get("data", ""),
            "media_type": item.get("mimeType") or "audio/wav",
        }
    if kind == "resource":
        resource = item.get("resource") or {}
        if "text" in resource:
            return {"type": "text", "text": str(resource["text"])}
        media_type = resource.get("mimeType") or "application/octet-stream"
        return {"type": "file", "data": resource.get("blob", ""), "media_type": media_type}
    if kind == "resource_link":
        return {"type": "text", "text": f"[resource {item.get('name', '')}: {item.get('uri', '')}]"}
    return {"type": "text", "text": str(item)}


# ---------------------------------------------------------------- transports and the SDK


class _EncodableReads:
    """A transport's read stream, with the messages the SDK refused only for a lone surrogate
    parsed again with U+FFFD in its place.

    JSON may escape half of a surrogate pair (`"\\udcff"`: Python's json.dumps of an os.listdir()
    name, JavaScript's JSON.stringify of a string cut inside an emoji). The SDK's parser rejects
    such a line, and the call it answers would wait for its timeout.
    """

    def __init__(self, stream: Any, sdk: Any, server: Callable[[], str]) -> None:
        self._stream = stream
        self._sdk = sdk
        self._server = server

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)  # e.g. the SDK's `last_context`

    async def receive(self) -> Any:
        return self._salvaged(await self._stream.receive())

    def __aiter__(self) -> _EncodableReads:
        return self

    async def __anext__(self) -> Any:
        return self._salvaged(await self._stream.__anext__())

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> _EncodableReads:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._stream.__aexit__(*exc)

    def _salvaged(self, item: Any) -> Any:
        line = _refused_json(item)
        if line is None or not _SURROGATE_ESCAPE.search(line):
            return item
        try:
            value = json.loads(line)
        except ValueError:
            return item
        found = surrogates.count(value)
        if not found:
            return item
        try:
            message = _parse_message(self._sdk, json.dumps(surrogates.fixed(value)))
        except Exception:
            return item  # refused for another reason too: the SDK's error stands
        surrogates.warn(f"a message from MCP server {self._server()!r}", found)
        from mcp.shared.message import SessionMessage

        return SessionMessage(message)


def _refused_json(item: Any) -> str | None:
    """The JSON text a transport could not parse, when `item` is the parser's error."""
    errors = getattr(item, "errors", None)
    if not isinstance(item, Exception) or not callable(errors):
        return None
    try:
        details = errors()
    except Exception:
        return None
    for detail in details:
        if detail.get("type") == "json_invalid" and isinstance(detail.get("input"), (str, bytes)):
            text = detail["input"]
            return text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    return None


def _parse_message(sdk: Any, text: str) -> Any:
    adapter = getattr(sdk.types, "jsonrpc_message_adapter", None)
    if adapter is not None:  # mcp 2.x
        return adapter.validate_json(text, by_name=False)
    return sdk.types.JSONRPCMessage.model_validate_json(text)  # mcp 1.x


def _stdio(sdk: Any, command: list[str], env: dict[str, str] | None) -> Transport:
    async def open(stack: contextlib.AsyncExitStack) -> Any:
        from mcp.client.stdio import get_default_environment

        # 1.x replaces the environment with `env`, 2.x merges it: merging here gives both the same.
        full_env = {**get_default_environment(), **env} if env else None
        params = sdk.StdioServerParameters(command=command[0], args=command[1:], env=full_env)
        streams = await stack.enter_async_context(sdk.stdio_client(params))
        return streams[0], streams[1]

    return open


def _http(url: str, headers: dict[str, str] | None) -> Transport:
    async def open(stack: contextlib.AsyncExitStack) -> Any:
        streams = await stack.enter_async_context(_http_client(url, headers))
        return streams[0], streams[1]

    return open


def _http_client(url: str, headers: dict[str, str] | None) -> Any:
    from mcp.client import streamable_http

    modern = getattr(streamable_http, "streamable_http_client", None)
    if modern is None:  # mcp 1.x before the http_client= form
        return streamable_http.streamablehttp_client(url, headers=headers)  # type: ignore[attr-defined]
    from mcp.shared._httpx_utils import create_mcp_http_client

    return _with_client(modern, url, create_mcp_http_client(headers=headers))


@contextlib.asynccontextmanager
async def _with_client(open_transport: Any, url: str, client: Any) -> AsyncIterator[Any]:
    async with client, open_transport(url, http_client=client) as streams:
        yield streams


def _sdk() -> Any:
    try:
        import mcp
    except ImportError as exc:
        raise AgentError(f"agentcore.mcp needs the MCP SDK: {INSTALL_HINT}", kind="config") from exc
    return mcp


def _wire(model: Any) -> dict[str, Any]:
    """An SDK result as its JSON wire form (the same keys in mcp 1.x and 2.x)."""
    if isinstance(model, Mapping):
        return dict(model)
    dumped: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


def _describe(exc: BaseException) -> str:
    inner = getattr(exc, "exceptions", None)  # an exception group from the SDK's task groups
    while isinstance(inner, tuple | list) and len(inner) == 1 and isinstance(inner[0], BaseException):
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
