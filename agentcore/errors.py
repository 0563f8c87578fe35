"""The one exception agentcore raises, with a stable `kind`.

    raise AgentError("rate limited", kind="limit", status=429)

`kind` values never change between releases; code above the HTTP layer reasons in kinds,
never in status codes or `requests` exceptions.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

Kind = Literal[
    "aborted",
    "auth",
    "limit",
    "timeout",
    "server",
    "network",
    "request",
    "unknown",
    "config",
    "tool",
    "conflict",
]
KINDS: tuple[str, ...] = get_args(Kind)

# Never retried whatever the filter says (API.md §Retries): a retry cannot fix them.
_NEVER_RETRYABLE = frozenset({"aborted", "config", "tool", "conflict"})
_BODY_LIMIT = 2000


class AgentError(Exception):
    """Base of every error agentcore raises.

    Attributes:
        message: readable text (secrets already redacted).
        kind: one of `KINDS`.
        status: HTTP status when a server answered (200 for a malformed 2xx body).
        retryable: whether the retry policy may try again.
        cause: the underlying exception, if any (also `__cause__` when raised `from` it).
        body: the server's response body, truncated.
        overflow: True when the server said the context is too long.
        retry_after: seconds the server asked to wait (Retry-After), if it did.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: Kind | str = "unknown",
        status: int | None = None,
        retryable: bool | None = None,
        cause: BaseException | None = None,
        body: str | None = None,
        overflow: bool = False,
        retry_after: float | None = None,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown AgentError kind {kind!r}")
        super().__init__(message)
        self.message = message
        self.kind: str = kind
        self.status = status
        self.overflow = overflow
        self.retry_after = retry_after
        if retryable is None:
            retryable = kind not in _NEVER_RETRYABLE and not overflow
        self.retryable = retryable
        self.cause = cause
        self.body = body[:_BODY_LIMIT] if body else body

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        status = f", status={self.status}" if self.status is not None else ""
        return f"AgentError({self.message!r}, kind={self.kind!r}{status})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.message, self.__dict__.copy()))


def _rebuild(message: str, state: dict[str, Any]) -> AgentError:
    error = AgentError(message)
    error.__dict__.update(state)
    return error


class ConfigTypeError(AgentError, TypeError):
    """`config` that is not a mapping: kind "config" (API.md §Details "Names and shapes rejected
    early"), and a TypeError like every wrong Python type given to `Agent()` (§Details "Validation")."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="config")
