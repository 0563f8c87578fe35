"""The agent's configuration: defaults, validation and the merge rules of `send(config=…)`.

    config = resolve({"base_url": "http://127.0.0.1:8080/v1", "model": "small"})
    config = merge(config, {"capabilities": {"image": False}})   # validated again

Validation happens at the entry (Agent(), send()): a bad value written into an append-only
history would poison every later turn, so nothing is written before the config is valid.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from ._utils.capabilities import DEFAULT_CAPABILITIES
from ._utils.secrets import mask
from .errors import KINDS, AgentError, ConfigTypeError

# The wire protocols, here once: the adapters (protocols/), the CLI and the test server import it.
PROTOCOLS = ("chat", "responses", "anthropic", "gemini")
TOOL_MODES = ("native", "text", "auto")
MEDIA_FALLBACKS = ("error", "strip")
PROVIDER_KEYS = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "max_output_tokens",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "seed",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning_effort",
        "headers",
        "body",
    }
)
COMPACT_KEYS = frozenset({"model", "base_url", "api_key", "protocol", "provider"})
CACHE_KEYS = frozenset({"key", "retention", "body"})
RETRY_KEYS = frozenset({"skip_codes", "skip_kinds", "skip_text", "should_retry"})
# What a fallback entry may override of the primary's connection (API.md §Fallback models).
FALLBACK_KEYS = frozenset(
    {"base_url", "api_key", "model", "protocol", "provider", "capabilities", "tool_mode"}
)
# The kinds a model error can have that another model might not share (config, aborted and tool
# errors are ours, not the model's).
MODEL_ERROR_KINDS = ("auth", "limit", "timeout", "server", "network", "request", "unknown")
FALLBACK_ON = ["server", "limit", "timeout", "network", "unknown"]

NO_TOOL_PROMPT = (
    "You have not called any tool for a while. If the task is not finished, continue by calling "
    "the tools you need. If it is finished, reply with your final answer."
)

DEFAULTS: dict[str, Any] = {
    "base_url": "",
    "api_key": "",
    "model": "",
    "protocol": "chat",
    "system": "",
    "stream": True,
    "cache": True,
    "tool_mode": "native",
    "capabilities": dict(DEFAULT_CAPABILITIES),
    "media_fallback": "error",
    "provider": {},
    "max_tokens": None,
    "max_context_tokens": 128000,
    "compact_threshold": 0.8,
    "compact": None,
    "output": None,
    "max_steps": None,
    "max_tool_output": None,
    "max_tool_concurrency": None,
    "retry_base_delay": 5.0,
    "retry_max_delay": 600.0,
    "retry_max_elapsed": None,
    "retry": None,
    "request_timeout": None,
    "stream_idle_timeout": None,
    "output_retries": 3,
    "no_tool_prompt": NO_TOOL_PROMPT,
    "no_tool_rounds": 3,
    "tool_execution": "parallel",
    "steering_mode": "one-at-a-time",
    "follow_up_mode": "one-at-a-time",
    "session_lease": 10.0,
    "fallback": None,
    "fallback_on": list(FALLBACK_ON),
    "limits": None,
    "limits_scope": "run",
    "prices": None,
}

# Keys whose value is replaced whole by a send override; capabilities and compact merge by key.
_MERGED_BY_KEY = ("capabilities", "compact")
_COUNTS = (
    "max_steps",
    "max_tool_output",
    "max_tool_concurrency",
    "no_tool_rounds",
    "max_context_tokens",
    "max_tokens",
    "output_retries",
)
_INFINITE_ALLOWED = ("no_tool_rounds", "max_context_tokens")
_ZERO_ALLOWED = ("output_retries",)  # 0: an invalid structured reply fails at once
_SECONDS = (
    "retry_base_delay",
    "retry_max_delay",
    "retry_max_elapsed",
    "request_timeout",
    "stream_idle_timeout",
)
_STRINGS = ("system", "no_tool_prompt")
# scheme://host, then an optional port and path: what `requests` can reach.
_CLOSE = 0.75  # difflib similarity for a "did you mean" (typos, not merely related words)
# What the adapters append to the API root (API.md §Details "Wire").
ENDPOINT_PATHS = ("/chat/completions", "/responses", "/messages")
_GEMINI_ENDPOINT = re.compile(r"/models/[^/]+:(stream)?generateContent$", re.IGNORECASE)
_BASE_URL = re.compile(r"^https?://(\[[0-9a-f:.]+\]|[^/\s?#:@\[\]]+)(:\d+)?([/?#]\S*)?$", re.IGNORECASE)


class Config(dict[str, Any]):
    """A config dict whose repr never shows an API key.

    `checked`: `merge` validated these values (kept by `Config(config)`, a copy of the same values;
    any other way of making one, `agent.config` included, starts unchecked).
    """

    checked = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if len(args) == 1 and not kwargs and isinstance(args[0], Config) and args[0].checked:
            self.checked = True

    def __repr__(self) -> str:
        shown = dict(self)
        if shown.get("api_key"):
            shown["api_key"] = _masked_key(shown["api_key"])
        compact = shown.get("compact")
        if isinstance(compact, dict) and compact.get("api_key"):
            shown["compact"] = {**compact, "api_key": _masked_key(compact["api_key"])}
        fallback = shown.get("fallback")
        if isinstance(fallback, list):
            shown["fallback"] = [
                {**entry, "api_key": _masked_key(entry["api_key"])}
                if isinstance(entry, dict) and entry.get("api_key")
                else entry
                for entry in fallback
            ]
        return f"Config({shown!r})"

    __str__ = __repr__


def _masked_key(key: Any) -> str:
    return "<api_key function>" if callable(key) else mask(key)


def resolve(overrides: Mapping[str, Any] | None) -> Config:
    """Defaults merged with `overrides`, validated."""
    return merge(DEFAULTS, overrides or {})  # merge copies what it starts from


def merge(base: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> Config:
    """Apply send-time overrides: capabilities/compact merge key by key, the rest replaces."""
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ConfigTypeError(f"config must be a dict, got {type(overrides).__name__}")
    if not overrides and isinstance(base, Config) and base.checked:
        # An agent's own config, checked when it was made and never handed out (`agent.config`
        # is a copy): nothing in it can have changed, and each send would check it again. Its
        # values are never changed in place (a send's overrides replace them), so they are shared.
        return Config(base)
    merged = Config(copy_config(dict(base)))
    for key, value in (overrides or {}).items():
        if key not in DEFAULTS:
            raise AgentError(f"unknown config key {key!r}{_hint(key)}", kind="config")
        if key in _MERGED_BY_KEY and isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **copy_config(dict(value))}
        else:
            merged[key] = copy_config(value)
    validate(merged)
    merged.checked = True
    return merged


def _hint(key: Any) -> str:
    """Where an unknown key probably belongs: `provider`, or a close spelling."""
    import difflib  # only on the error path: `import agentcore` stays cheap

    if not isinstance(key, str):
        return ""
    if key in PROVIDER_KEYS:
        example = f"config={{'provider': {{{key!r}: ...}}}}"
        return f"; {key!r} is a generation parameter: it belongs in provider, e.g. {example}"
    close = difflib.get_close_matches(key, [*DEFAULTS, *PROVIDER_KEYS], n=1, cutoff=_CLOSE)
    if not close:
        return ""
    where = f"provider[{close[0]!r}]" if close[0] in PROVIDER_KEYS else repr(close[0])
    return f"; did you mean {where}?"


def copy_config(value: Any) -> Any:
    """Copy the plain-JSON parts of a config; objects (adapters, output specs, callables) are shared."""
    if isinstance(value, dict):
        return {k: copy_config(v) if isinstance(v, dict | list) else v for k, v in value.items()}
    if isinstance(value, list):
        return [copy_config(v) if isinstance(v, dict | list) else v for v in value]
    return value


def validate(config: Mapping[str, Any]) -> None:
    for key in DEFAULTS:
        value = config.get(key)
        if value is None:
            if DEFAULTS[key] is not None:
                _fail(key, value, "cannot be None")
            continue
        _check(key, value)
    if is_adapter(config.get("model")):
        _check_adapter_config(config)
    _check_cost_prices(config)


def _check(key: str, value: Any) -> None:
    if key in _COUNTS:
        _check_count(key, value)
    elif key in _SECONDS:
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not value >= 0
            or math.isnan(value)
        ):
            _fail(key, value, "must be a number of seconds ≥ 0")
    elif key in _STRINGS:
        if not isinstance(value, str):
            _fail(key, value, "must be a string")
    elif key == "base_url":
        _check_base_url(key, value)
    elif key == "api_key":
        _check_api_key(key, value)
    elif key in ("stream",):
        if not isinstance(value, bool):
            _fail(key, value, "must be True or False")
    else:
        _CHECKS[key](key, value)


def check_sendable(config: Mapping[str, Any]) -> None:
    """What a send needs beyond valid values: a built-in protocol needs a server to talk to."""
    if is_adapter(config.get("model")):
        return
    if not config.get("base_url"):
        raise AgentError(
            "config base_url is empty: set it to the API root, e.g. https://api.openai.com/v1 "
            "or http://127.0.0.1:8080/v1",
            kind="config",
        )
    if not str(config.get("model") or "").strip():
        raise AgentError(
            "config model is empty: name the model to ask, e.g. {'model': 'gpt-4o-mini'}", kind="config"
        )


def _check_base_url(key: str, value: Any) -> None:
    """An empty URL is allowed until a request needs one (an adapter object needs none)."""
    if not isinstance(value, str):
        _fail(key, value, "must be a string")
    if value and not _BASE_URL.match(value):
        _fail(key, value, "must be an http:// or https:// URL with a host, e.g. https://api.openai.com/v1")
    problem = host_problem(value) if value else None
    if problem is not None:
        _fail(key, value, problem)
    root = endpoint_root(value) if value else None
    if root is not None:
        _fail(key, value, f"ends with an endpoint path, which the library appends: use the API root {root!r}")


def host_problem(base_url: str) -> str | None:
    """Why the URL's host name can never be looked up (`a..b`: an empty label), or None."""
    from urllib.parse import urlsplit

    try:
        host = urlsplit(base_url).hostname or ""
    except ValueError as exc:
        return f"is not a valid URL ({exc})"
    if ":" in host or _encodes(host):  # an IPv6 literal, or a name DNS can carry
        return None
    return f"has a host name that is not valid ({host!r})"


def _encodes(host: str) -> bool:
    try:
        host.encode("idna")
    except UnicodeError:
        return False
    return True


def endpoint_root(base_url: str) -> str | None:
    """The API root when `base_url` ends with an endpoint path (`…/v1/chat/completions`), else None."""
    url = base_url.split("?", 1)[0].split("#", 1)[0].rstrip("/")
    for suffix in ENDPOINT_PATHS:
        if url.endswith(suffix):
            return url[: -len(suffix)]
    match = _GEMINI_ENDPOINT.search(url)
    return url[: match.start()] if match else None


def _check_api_key(key: str, value: Any) -> None:
    if not isinstance(value, str) and not callable(value):
        _fail(key, value, "must be a string or a function () -> str")


def _check_count(key: str, value: Any) -> None:
    if isinstance(value, float) and math.isinf(value) and value > 0 and key in _INFINITE_ALLOWED:
        return
    least = 0 if key in _ZERO_ALLOWED else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        allowed = ' or float("inf")' if key in _INFINITE_ALLOWED else ""
        _fail(key, value, f"must be an int {'≥ 0' if least == 0 else '> 0'}{allowed}")


def _check_model(key: str, value: Any) -> None:
    if not isinstance(value, str) and not is_adapter(value):
        _fail(key, value, "must be a model name or an adapter object with a chat(request, ...) method")


def _check_choice(choices: tuple[str, ...]) -> Callable[[str, Any], None]:
    def check(key: str, value: Any) -> None:
        if value not in choices:
            _fail(key, value, f"must be one of {', '.join(choices)}")

    return check


def _check_cache(key: str, value: Any) -> None:
    if isinstance(value, bool):
        return
    if not isinstance(value, dict):
        _fail(key, value, "must be True, False or a dict {key, retention, body}")
    _check_keys(key, value, CACHE_KEYS)
    if value.get("key") is not None and not isinstance(value["key"], str):
        _fail("cache.key", value["key"], "must be a string")
    if value.get("body") is not None and not isinstance(value["body"], dict):
        _fail("cache.body", value["body"], "must be a dict")


def _check_capabilities(key: str, value: Any) -> None:
    if not isinstance(value, dict):
        _fail(key, value, "must be a dict")
    _check_keys(key, value, frozenset(DEFAULT_CAPABILITIES))
    for name, flag in value.items():
        if not isinstance(flag, bool):
            _fail(f"capabilities.{name}", flag, "must be True or False")


def check_provider(key: str, value: Any) -> None:
    """The rule of `provider` (API.md §Wire): known keys only, `headers` of strings, `body` a dict.

    Raises:
        AgentError: kind "config", naming the offending key (`key` is where the value came from).
    """
    if not isinstance(value, dict):
        _fail(key, value, "must be a dict")
    _check_keys(key, value, PROVIDER_KEYS, then=f"vendor-specific fields go in {key}['body']")
    headers = value.get("headers")
    if headers is not None and (
        not isinstance(headers, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
    ):
        _fail(f"{key}.headers", headers, "must be a dict of strings")
    if value.get("body") is not None and not isinstance(value["body"], dict):
        _fail(f"{key}.body", value["body"], "must be a dict")
    if value.get("max_output_tokens") is not None:
        _check_count(f"{key}.max_output_tokens", value["max_output_tokens"])


def _check_compact(key: str, value: Any) -> None:
    if not isinstance(value, dict):
        _fail(key, value, "must be a dict of overrides for the compaction model")
    _check_keys(key, value, COMPACT_KEYS)
    if "protocol" in value:
        _check_choice(PROTOCOLS)("compact.protocol", value["protocol"])
    if "provider" in value and value["provider"] is not None:
        check_provider("compact.provider", value["provider"])
    if "base_url" in value:
        _check_base_url("compact.base_url", value["base_url"])
    if "api_key" in value:
        _check_api_key("compact.api_key", value["api_key"])
    if "model" in value:
        _check_model("compact.model", value["model"])


def _check_threshold(key: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        _fail(key, value, "must be a number in (0, 1]")


def _check_lease(key: str, value: Any) -> None:
    # The keeper renews a lease every lease / 4, on a 100 ms tick: a shorter one could lapse while
    # its holder is alive.
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not value >= 0.2
        or math.isinf(value)
    ):
        _fail(key, value, "must be a number of seconds ≥ 0.2 (how long a silent run keeps its session)")


def _check_output(key: str, value: Any) -> None:
    from .output import OutputSpec

    if not isinstance(value, OutputSpec):
        _fail(key, value, "must be agentcore.output.object(...), .array(...) or .json()")


def _check_retry(key: str, value: Any) -> None:
    if callable(value):
        return
    if not isinstance(value, dict):
        _fail(
            key,
            value,
            "must be a function(error) -> bool or a dict {skip_codes, skip_kinds, skip_text, should_retry}",
        )
    _check_keys(key, value, RETRY_KEYS)
    codes = value.get("skip_codes")
    if codes is not None and (
        not isinstance(codes, (list, tuple, set, frozenset))
        or not all(isinstance(c, int) and not isinstance(c, bool) for c in codes)
    ):
        _fail("retry.skip_codes", codes, "must be a list of HTTP status codes")
    kinds = value.get("skip_kinds")
    if kinds is not None and (
        not isinstance(kinds, (list, tuple, set, frozenset)) or not set(kinds) <= set(KINDS)
    ):
        _fail("retry.skip_kinds", kinds, f"must be a list of kinds ({', '.join(KINDS)})")
    text = value.get("skip_text")
    if text is not None and not isinstance(text, (str, re.Pattern, list, tuple)):
        _fail("retry.skip_text", text, "must be a string, a compiled pattern or a list of them")
    should = value.get("should_retry")
    if should is not None and not callable(should):
        _fail("retry.should_retry", should, "must be a function(error) -> bool")


def _check_keys(key: str, value: Mapping[str, Any], allowed: frozenset[str], *, then: str = "") -> None:
    """Unknown keys of `value` fail, with a close spelling when there is one; `then` says what to do
    instead (default: the allowed keys)."""
    unknown = sorted(set(value) - allowed)
    if unknown:
        then = then or f"allowed: {', '.join(sorted(allowed))}"
        raise AgentError(
            f"unknown {key} key(s) {', '.join(map(repr, unknown))}{_close(unknown, allowed)}; {then}",
            kind="config",
        )


def _close(unknown: list[Any], allowed: frozenset[str]) -> str:
    import difflib

    guesses = [
        f"{match[0]!r}" if len(unknown) == 1 else f"{match[0]!r} for {name!r}"
        for name in unknown
        if isinstance(name, str)
        and (match := difflib.get_close_matches(name, sorted(allowed), n=1, cutoff=_CLOSE))
    ]
    return f" (did you mean {', '.join(guesses)}?)" if guesses else ""


def _check_adapter_config(config: Mapping[str, Any]) -> None:
    if (config.get("provider") or {}).get("body") is not None:
        raise AgentError(
            "provider['body'] needs a built-in protocol; it cannot be used with an adapter object",
            kind="config",
        )
    if isinstance(config.get("cache"), dict):
        raise AgentError(
            "a cache dict needs a built-in protocol; it cannot be used with an adapter object", kind="config"
        )
    if (config.get("capabilities") or {}).get("tool_choice") is False:
        raise AgentError(
            "capabilities.tool_choice=False needs a built-in protocol; "
            "it cannot be used with an adapter object",
            kind="config",
        )


def _check_fallback(key: str, value: Any) -> None:
    if not isinstance(value, list) or not all(isinstance(entry, dict) for entry in value):
        _fail(key, value, "must be a list of dicts of connection overrides")
    for index, entry in enumerate(value):
        name = f"fallback[{index}]"
        _check_keys(name, entry, FALLBACK_KEYS)
        for field_name, field_value in entry.items():
            where = f"{name}.{field_name}"
            if field_value is None:
                _fail(where, field_value, "cannot be None (leave the key out to keep the primary's)")
            if field_name == "base_url":
                _check_base_url(where, field_value)
            elif field_name == "api_key":
                _check_api_key(where, field_value)
            elif field_name == "protocol":
                _check_choice(PROTOCOLS)(where, field_value)
            elif field_name == "tool_mode":
                _check_choice(TOOL_MODES)(where, field_value)
            elif field_name == "model" and field_value == "":
                _fail(where, field_value, "must be a model name (not empty)")
            else:
                _CHECKS[field_name](where, field_value)


def _check_fallback_on(key: str, value: Any) -> None:
    if not isinstance(value, (list, tuple)) or not set(value) <= set(MODEL_ERROR_KINDS):
        _fail(key, value, f"must be a list of model error kinds ({', '.join(MODEL_ERROR_KINDS)})")


def _check_limits(key: str, value: Any) -> None:
    from .budget import LIMITS

    if not isinstance(value, dict):
        _fail(key, value, f"must be a dict of limits ({', '.join(LIMITS)})")
    _check_keys(key, value, frozenset(LIMITS))
    for name, limit in value.items():
        if name == "cost":
            if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit > 0:
                _fail(f"limits.{name}", limit, "must be a number > 0 (currency units)")
            if math.isinf(limit):
                _fail(f"limits.{name}", limit, "must be finite (leave it out for no limit)")
        else:
            _check_count(f"limits.{name}", limit)


def _check_prices(key: str, value: Any) -> None:
    from .budget import PRICE_KEYS

    if not isinstance(value, dict):
        _fail(key, value, "must be a dict {model: {input, output, cache_read, cache_write}}")
    for model, price in value.items():
        where = f"prices[{model!r}]"
        if not isinstance(model, str) or not model:
            _fail(key, model, "must have model names as keys")
        if not isinstance(price, dict):
            _fail(where, price, "must be a dict {input, output, cache_read, cache_write} per million tokens")
        _check_keys(where, price, PRICE_KEYS)
        for name in ("input", "output"):
            if name not in price:
                _fail(where, price, f"needs {name!r} (currency units per million tokens)")
        for name, amount in price.items():
            if (
                isinstance(amount, bool)
                or not isinstance(amount, (int, float))
                or not amount >= 0
                or math.isinf(amount)
            ):
                _fail(f"{where}.{name}", amount, "must be a number ≥ 0 (currency units per million tokens)")


def _check_cost_prices(config: Mapping[str, Any]) -> None:
    """A cost limit needs a price for every model the run may ask (primary, fallbacks, compaction)."""
    if "cost" not in (config.get("limits") or {}):
        return
    from .budget import model_name

    prices = config.get("prices") or {}
    models = [config.get("model"), *(entry.get("model") for entry in config.get("fallback") or [])]
    models.append((config.get("compact") or {}).get("model"))
    unpriced = sorted({model_name(m) for m in models if m} - set(prices))
    if unpriced:
        raise AgentError(
            f"config limits['cost'] needs config prices for every model: none for {', '.join(unpriced)}",
            kind="config",
        )


def is_adapter(value: Any) -> bool:
    return not isinstance(value, str) and callable(getattr(value, "chat", None))


def _fail(key: str, value: Any, why: str) -> None:
    shown = mask(value) if key.endswith("api_key") and isinstance(value, str) else repr(value)
    if key.endswith("base_url") and isinstance(value, str):
        shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    raise AgentError(f"config {key} {why} (got {shown})", kind="config")


_CHECKS: dict[str, Callable[[str, Any], None]] = {
    "model": _check_model,
    "protocol": _check_choice(PROTOCOLS),
    "tool_mode": _check_choice(TOOL_MODES),
    "media_fallback": _check_choice(MEDIA_FALLBACKS),
    "cache": _check_cache,
    "capabilities": _check_capabilities,
    "provider": check_provider,
    "compact": _check_compact,
    "compact_threshold": _check_threshold,
    "output": _check_output,
    "retry": _check_retry,
    "tool_execution": _check_choice(("parallel", "sequential")),
    "steering_mode": _check_choice(("one-at-a-time", "all")),
    "follow_up_mode": _check_choice(("one-at-a-time", "all")),
    "session_lease": _check_lease,
    "fallback": _check_fallback,
    "fallback_on": _check_fallback_on,
    "limits": _check_limits,
    "limits_scope": _check_choice(("run", "session")),
    "prices": _check_prices,
}
