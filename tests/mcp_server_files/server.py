"""A real MCP server for the tests, written with the SDK's own server class.

    python server.py stdio NAME          # speaks MCP on stdin/stdout
    python server.py http NAME           # streamable HTTP on 127.0.0.1; prints the port first
    python server.py stdio-ascii NAME    # stdio, its JSON written with non-ASCII as \\uXXXX escapes

`MARKERS` (environment) is a folder where the slow tool records what the server saw:
`<tag>.started` when the call began, `<tag>.cancelled` when the client's cancellation arrived.
"""

from __future__ import annotations

import base64
import os
import socket
import sys
from pathlib import Path
from typing import Any

import anyio

try:  # mcp 2.x renamed FastMCP to MCPServer
    from mcp.server.mcpserver import MCPServer as Server
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server  # type: ignore[no-redef]
    from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]

from mcp import types

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
MARKERS = Path(os.environ.get("MARKERS", "."))

server = Server(sys.argv[2] if len(sys.argv) > 2 else "test-server")
gathered = {"count": 0}
together = anyio.Event()


@server.tool(structured_output=False)
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool(structured_output=False)
def image() -> list[Any]:
    """An image and a caption."""
    return [
        types.TextContent(type="text", text="a picture"),
        types.ImageContent.model_validate({"type": "image", "data": PNG, "mimeType": "image/png"}),
    ]


@server.tool(structured_output=False)
def readme() -> list[Any]:
    """An embedded text resource."""
    resource = {"uri": "file:///README.md", "mimeType": "text/markdown", "text": "# Title\nbody"}
    return [types.EmbeddedResource.model_validate({"type": "resource", "resource": resource})]


@server.tool()
def stats(values: list[int]) -> dict[str, int]:
    """Structured result: count and sum."""
    return {"count": len(values), "total": sum(values)}


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ToolError(f"refused: {reason}")


@server.tool(structured_output=False)
async def slow(tag: str) -> str:
    """Waits for a minute unless cancelled."""
    (MARKERS / f"{tag}.started").write_text("started")
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        (MARKERS / f"{tag}.cancelled").write_text("cancelled")
        raise
    return "slept"


@server.tool(structured_output=False)
async def gather(n: int) -> str:
    """Returns once n calls are running at the same time (a server-side barrier)."""
    gathered["count"] += 1
    if gathered["count"] >= n:
        together.set()
    with anyio.move_on_after(30):
        await together.wait()
        return "together"
    return f"alone ({gathered['count']} of {n} arrived)"


@server.tool(structured_output=False)
def crash() -> str:
    """The server process dies in the middle of the call."""
    os._exit(3)


@server.tool(structured_output=False)
def listing() -> str:
    """A file name as os.listdir() returns it for a name that is not UTF-8."""
    return "report-\udcff.txt"


@server.tool()
def listing_json() -> types.CallToolResult:
    """Structured: names cut in the middle of an emoji (a lone high surrogate)."""
    names = ["caf\ud83d", "ok.txt"]
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=" ".join(names))], structuredContent={"names": names}
    )


def serve_stdio_ascii() -> None:
    """stdio whose JSON escapes non-ASCII (as Python's json.dumps does, and JSON.stringify for a
    lone surrogate): the only way a lone surrogate crosses the wire — the SDK's own writer fails."""
    import json

    from mcp.server.stdio import stdio_server

    lowlevel = getattr(server, "_lowlevel_server", None) or server._mcp_server  # type: ignore[attr-defined]
    out = sys.stdout.buffer

    async def main() -> None:
        stdin = anyio.wrap_file(sys.stdin)
        async with stdio_server(stdin=stdin, stdout=anyio.wrap_file(sys.stderr)) as (read, write):
            sender, receiver = anyio.create_memory_object_stream[Any](0)

            async def write_ascii() -> None:
                async for message in receiver:
                    wire = message.message.model_dump(mode="json", by_alias=True, exclude_unset=True)
                    out.write(json.dumps(wire).encode() + b"\n")
                    out.flush()

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(write_ascii)
                await lowlevel.run(read, sender, lowlevel.create_initialization_options())
                tasks.cancel_scope.cancel()
            del write

    anyio.run(main)


def serve_http() -> None:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(sock.getsockname()[1], flush=True)  # listening already: clients may connect now
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    if sys.argv[1] == "http":
        serve_http()
    elif sys.argv[1] == "stdio-ascii":
        serve_stdio_ascii()
    else:
        server.run("stdio")
