"""When and how long to wait before trying a failed model request again.

    policy = RetryPolicy.from_config(config)
    result = call(lambda: llm_request(), policy, cancel=signal, on_retry=notify_retry)
    result = over_chain(lambda index: ask(models[index]), policy, models=names, ...)

The default retries everything but cancellation, context overflow, config and local
validation errors, with `base × 2^n` waits capped at `max_delay` and no elapsed limit
(the seed's rule, taken from Roo Code). Over a chain of models (config `fallback`), an error of
a kind in `fallback_on` moves to the next model at once, with no wait; after the last, the chain
starts again at the first after the usual wait. Time is injected (`sleep`, `now`) so tests never sleep.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import AgentError
from .cancel import Signal

log = logging.getLogger("agentcore")
T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    base_delay: float = 5.0
    max_delay: float = 600.0
    max_elapsed: float | None = None
    filter: Any = None
    # The kinds that move a chain of models on to the next one (config `fallback_on`).
    fallback_on: frozenset[str] = frozenset({"server", "limit", "timeout", "network", "unknown"})

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RetryPolicy:
        return cls(
            base_delay=float(config.get("retry_base_delay", 5.0)),
            max_delay=float(config.get("retry_max_delay", 600.0)),
            max_elapsed=config.get("retry_max_elapsed"),
            filter=config.get("retry"),
            fallback_on=frozenset(config.get("fallback_on") or cls.fallback_on),
        )

    def allows(self, error: AgentError) -> bool:
        """Whether `error` may be retried at all (before looking at time)."""
        if not error.retryable or error.kind in ("aborted", "config", "tool") or error.overflow:
            return False
        return _filter_allows(self.filter, error)

    def delay(self, retries_done: int, error: AgentError) -> float:
        """Seconds to wait before retry number `retries_done + 1`."""
        if error.retry_after is not None:
            return float(max(0.0, min(float(error.retry_after), self.max_delay)))
        return float(min(self.base_delay * (2.0**retries_done), self.max_delay))


def _filter_allows(rule: Any, error: AgentError) -> bool:
    if rule is None:
        return True
    try:
        if callable(rule):
            return rule(error) is not False
        if error.status is not None and error.status in (rule.get("skip_codes") or ()):
            return False
        if error.kind in (rule.get("skip_kinds") or ()):
            return False
        if _text_matches(rule.get("skip_text"), error):
            return False
        should = rule.get("should_retry")
        return should is None or should(error) is not False
    except Exception:
        log.warning("the retry filter raised; not retrying", exc_info=True)
        return False


def _text_matches(patterns: Any, error: AgentError) -> bool:
    if patterns is None:
        return False
    if not isinstance(patterns, (list, tuple)):
        patterns = [patterns]
    haystacks = [error.message, error.body or ""]
    for pattern in patterns:
        for text in haystacks:
            if isinstance(pattern, re.Pattern):
                if pattern.search(text):
                    return True
            elif str(pattern).lower() in text.lower():
                return True
    return False


def call(
    attempt: Callable[[], T],
    policy: RetryPolicy,
    *,
    cancel: Signal | None = None,
    on_retry: Callable[[dict[str, Any]], None] | None = None,
    sleep: Callable[[float], bool] | None = None,
    now: Callable[[], float] = time.monotonic,
    model: str | None = None,
) -> T:
    """Run `attempt` until it succeeds or its error may not be retried.

    `sleep(seconds)` returns True when it was interrupted (cancel); the default waits on
    `cancel`, so a stop ends a backoff at once. `model`, when given, is named in each
    `on_retry` payload. Raises the last error, or an `aborted` error.
    """
    return over_chain(
        lambda _index: attempt(),
        policy,
        models=[model] if model is not None else [],
        cancel=cancel,
        on_retry=on_retry,
        sleep=sleep,
        now=now,
    )


def over_chain(
    attempt: Callable[[int], T],
    policy: RetryPolicy,
    *,
    models: Sequence[str],
    cancel: Signal | None = None,
    on_retry: Callable[[dict[str, Any]], None] | None = None,
    sleep: Callable[[float], bool] | None = None,
    now: Callable[[], float] = time.monotonic,
) -> T:
    """`call` over a chain of models: `attempt(index)` asks `models[index]`.

    A retryable error of a kind in `policy.fallback_on` moves to the next model at once (no
    wait, and no `max_elapsed` check: another model is not a wait); after the last model the
    chain starts again at the first after the backoff wait. Another retryable kind is retried
    on the same model after the backoff wait. Each `on_retry` payload names the next model.
    """
    started = now()
    retries = waits = index = 0
    while True:
        if cancel is not None and cancel.is_set():
            raise AgentError("the request was cancelled", kind="aborted")
        try:
            return attempt(index)
        except AgentError as error:
            if cancel is not None and cancel.is_set():
                raise AgentError("the request was cancelled", kind="aborted", cause=error) from error
            if not policy.allows(error):
                raise
            moves = len(models) > 1 and error.kind in policy.fallback_on
            switched = moves and index + 1 < len(models)
            if switched:
                index, wait = index + 1, 0.0
            else:
                wait = policy.delay(waits, error)
                if policy.max_elapsed is not None and now() - started + wait > policy.max_elapsed:
                    raise
                waits += 1
                index = 0 if moves else index
            retries += 1
            _log_retry(error, retries, wait, models[index] if len(models) > 1 else None)
            if on_retry is not None:
                payload: dict[str, Any] = {"attempt": retries, "error": error, "delay": wait}
                if models:
                    payload["model"] = models[index]
                on_retry(payload)
            if not switched and _wait(wait, cancel, sleep):
                raise AgentError(
                    f"the request was cancelled while waiting to retry after: {error.message}",
                    kind="aborted",
                    cause=error,
                ) from error


def _log_retry(error: AgentError, attempt: int, wait: float, model: str | None) -> None:
    """Every retry is visible: a misconfigured agent (wrong port, key, host) is never silent.

    `error.message` is already redacted by the HTTP layer, which knows the keys.
    """
    on = f" on {model}" if model is not None else ""
    log.warning(
        "model request failed (kind=%s, status=%s); retry %d%s in %.2f s: %s",
        error.kind,
        error.status,
        attempt,
        on,
        wait,
        error.message,
    )


def _wait(seconds: float, cancel: Signal | None, sleep: Callable[[float], bool] | None) -> bool:
    if sleep is not None:
        return bool(sleep(seconds))
    if cancel is not None:
        return cancel.wait(seconds)
    time.sleep(seconds)
    return False


def parse_retry_after(headers: Mapping[str, str], now: Callable[[], float] = time.time) -> float | None:
    """Seconds from `retry-after-ms`, or `Retry-After` as seconds or an HTTP date."""
    lowered = {k.lower(): v for k, v in headers.items()}
    value = lowered.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    import email.utils

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now())
