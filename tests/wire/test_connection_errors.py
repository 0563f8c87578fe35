"""A failed connection reads as one line naming the address and the cause (API.md §Details
"Command line, when things go wrong"), whatever went wrong and whoever reads it: the CLI's error
line, a retry WARNING, `AgentError.message`.

Before: `ConnectionError: TrackedHTTPPool(host='127.0.0.1', port=9): Max retries exceeded with url:
/v1/chat/completions (Caused by NewConnectionError("TrackedHTTPConnection(host='127.0.0.1',
port=9): Failed to establish a new connection: [Errno 111] Connection refused"))` — our own pool
class, urllib3's, and the cause at the very end.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from agentcore import Agent, AgentError
from agentcore._utils.netfail import describe
from agentcore.testing import ModelServer
from agentcore.testing.tls import self_signed

NEVER = ("Tracked", "HTTPConnectionPool", "urllib3", "Max retries", "\n")


def _failure(base_url: str, **config: object) -> AgentError:
    config = {"base_url": base_url, "model": "m", "retry_max_elapsed": 0, **config}
    with Agent(config=config) as agent, pytest.raises(AgentError) as caught:
        agent.send("hi")
    error = caught.value
    assert not any(word in error.message for word in NEVER), error.message
    return error


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_nothing_listening() -> None:
    port = _closed_port()
    error = _failure(f"http://127.0.0.1:{port}/v1")
    assert error.kind == "network"
    assert error.message == f"cannot connect to 127.0.0.1:{port}: connection refused"
    assert error.cause is not None  # the wrapped exceptions are still there for a debugger


def test_a_server_that_hangs_up_before_answering() -> None:
    with ModelServer([{"reset_before_headers": True}]) as server:
        error = _failure(server.base_url)
    assert error.kind == "network"
    assert error.message.startswith(f"the connection to 127.0.0.1:{server.port} failed: ")


def test_a_stream_cut_in_the_middle() -> None:
    with ModelServer([{"text": "a long reply that is cut", "chunk_size": 2, "drop_after": 3}]) as server:
        error = _failure(server.base_url)
    assert error.kind == "network"
    assert error.message == (
        f"the connection to 127.0.0.1:{server.port} failed: the server closed the connection in the "
        "middle of its reply"
    )


def test_an_untrusted_tls_certificate(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    with ModelServer(["never read"], tls=(str(cert), str(key))) as server:
        error = _failure(server.base_url)
    assert error.message.startswith(f"cannot connect to localhost:{server.port}: ")
    assert "certificate" in error.message


def test_an_unknown_host_as_requests_reports_it() -> None:
    """Name resolution is not tried for real (that would ask a DNS server off this machine): the
    exception requests raises for it is built from the real requests / urllib3 classes."""
    import requests
    from urllib3.connection import HTTPConnection
    from urllib3.exceptions import MaxRetryError, NameResolutionError

    gai = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    reason = NameResolutionError("no-such-host.invalid", HTTPConnection("no-such-host.invalid"), gai)
    wrapped = requests.exceptions.ConnectionError(MaxRetryError(None, "/v1/chat/completions", reason))  # type: ignore[arg-type]
    text = describe(wrapped, "http://no-such-host.invalid/v1/chat/completions")
    assert text == "cannot connect to no-such-host.invalid:80: unknown host (the name does not resolve)"


def test_addresses_keep_their_port_and_brackets() -> None:
    refused = ConnectionRefusedError(111, "Connection refused")
    assert (
        describe(refused, "https://api.example.com/v1")
        == "cannot connect to api.example.com:443: connection refused"
    )
    assert describe(refused, "http://[::1]:8080/v1") == "cannot connect to [::1]:8080: connection refused"
