"""Pure helpers the four wire adapters share: provider keys, cache settings, body merging.

    check_provider(request.provider)                      # unknown key -> AgentError(kind="config")
    cache = cache_settings(request.cache, base_url=..., model=..., system=...)
    merge_body(body, provider.get("body"), source="provider.body", protected=("model", "messages", "stream"))

Everything here is protocol-neutral; how a value is spelled on the wire stays in each adapter.
How a vendor error is read (message, kind, context overflow) lives in `errors.py`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from .._utils.memo import Memo
from ..config import PROVIDER_KEYS as _PROVIDER_KEYS
from ..config import check_provider as _check_provider
from ..errors import AgentError

if TYPE_CHECKING:
    from .base import Request

T = TypeVar("T")

log = logging.getLogger("agentcore")

# API.md §Wire: the only provider keys (config.py validates them); vendor fields travel in `body`.
PROVIDER_KEYS = _PROVIDER_KEYS
CACHE_KEYS = frozenset({"key", "retention", "body"})
TOOL_CHOICE_MODES = ("auto", "none", "required")


def check_provider(provider: Mapping[str, Any]) -> None:
    """Reject provider keys outside API.md §Wire and malformed `headers` / `body` (config's own rule).

    Raises:
        AgentError: kind "config", naming the offending key.
    """
    _check_provider("provider", dict(provider))


def base_headers(provider: Mapping[str, Any], auth: Mapping[str, str]) -> dict[str, str]:
    """JSON content type, the protocol's auth headers, then `provider['headers']` (which win)."""
    headers = {"Content-Type": "application/json", **auth}
    headers.update(provider.get("headers") or {})
    return headers


# ---------------------------------------------------------------- cache


@dataclass(frozen=True)
class CacheSettings:
    """What `config["cache"]` asks for: a routing key, an optional retention, extra body fields."""

    key: str
    retention: str | None = None
    body: dict[str, Any] = field(default_factory=dict)


@functools.lru_cache(maxsize=64)  # asked again on every request, with the same long system prompt
def default_cache_key(base_url: str, model: str, system: str) -> str:
    """The key used when `cache` is True: stable for one agent's consecutive requests."""
    return short_hash(base_url, model, system, length=32)


def cache_settings(cache: Any, *, base_url: str, model: str, system: str) -> CacheSettings | None:
    """Read `cache` (True / False / None / `{key, retention, body}`); None when caching is off.

    Raises:
        AgentError: kind "config" for another type, unknown dict keys or wrongly typed values.
    """
    if cache is None or cache is False:
        return None
    if cache is True:
        return CacheSettings(default_cache_key(base_url, model, system))
    if not isinstance(cache, Mapping):
        raise AgentError("cache must be True, False or a dict {key, retention, body}", kind="config")
    unknown = sorted(set(cache) - CACHE_KEYS)
    if unknown:
        raise AgentError(
            f"unknown cache key(s) {', '.join(map(repr, unknown))}; allowed: body, key, retention",
            kind="config",
        )
    key, retention, body = cache.get("key"), cache.get("retention"), cache.get("body")
    if key is not None and not (isinstance(key, str) and key):
        raise AgentError("cache['key'] must be a non-empty str", kind="config")
    if retention is not None and not isinstance(retention, str):
        raise AgentError("cache['retention'] must be a str", kind="config")
    if body is not None and not isinstance(body, Mapping):
        raise AgentError("cache['body'] must be a dict", kind="config")
    return CacheSettings(key or default_cache_key(base_url, model, system), retention, dict(body or {}))


# ---------------------------------------------------------------- body


def merge_body(
    body: dict[str, Any], extra: Mapping[str, Any] | None, *, source: str, protected: Iterable[str]
) -> None:
    """Merge `extra` into `body` in place; keys in `protected` are kept and a warning is logged."""
    if not extra:
        return
    guarded = set(protected)
    for key, value in extra.items():
        if key in guarded:
            log.warning("%s cannot override %r; the value is ignored", source, key)
            continue
        body[key] = _deep_merge(body.get(key), value)


def _deep_merge(ours: Any, theirs: Any) -> Any:
    """Dicts merge key by key (`{"generationConfig": {"x": 1}}` keeps our temperature); else theirs wins."""
    if isinstance(ours, dict) and isinstance(theirs, Mapping):
        merged = dict(ours)
        for key, value in theirs.items():
            merged[key] = _deep_merge(merged.get(key), value)
        return merged
    return theirs


def tool_choice(value: Any) -> tuple[str, str | None]:
    """Normalise `provider['tool_choice']` to (mode, tool name).

    Accepted: "auto", "none", "required" (also "any"), a tool name as `{"name": ...}`,
    `{"type": "tool"|"function", "name": ...}` or the chat shape
    `{"type": "function", "function": {"name": ...}}`. A forced tool gives ("required", name).

    Raises:
        AgentError: kind "config" for anything else.
    """
    if isinstance(value, str):
        mode = "required" if value == "any" else value
        if mode in TOOL_CHOICE_MODES:
            return mode, None
    elif isinstance(value, Mapping):
        function = value.get("function")
        name = function.get("name") if isinstance(function, Mapping) else value.get("name")
        if isinstance(name, str) and name:
            return "required", name
        if value.get("type") in ("auto", "none", "required", "any"):
            return tool_choice(value["type"])
    raise AgentError(
        f"provider['tool_choice'] must be 'auto', 'none', 'required' or {{'name': tool}}, not {value!r}",
        kind="config",
    )


# ---------------------------------------------------------------- ids


def short_hash(*parts: object, length: int = 8) -> str:
    """A deterministic hex digest (sha256) of the parts, cut to `length` characters."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8", "replace"))
    return digest.hexdigest()[:length]


def generated_call_id(index: int, *seed: object) -> str:
    """A deterministic tool-call id for servers that send none: `call_<index>_<hash>`."""
    return f"call_{index}_{short_hash(index, *seed)}"


def data_url(media_type: str, data: str) -> str:
    return f"data:{media_type};base64,{data}"


# ---------------------------------------------------------------- one entry's wire form, once per run


def render_settings(request: Request) -> Hashable:
    """What an entry's wire form depends on besides the entry: the capabilities, the media fallback."""
    return (tuple(sorted(request.capabilities.items())), request.media_fallback)


def rendered(
    key: tuple[Any, ...],
    render: Callable[[Any, Any, Request], T],
    role: Any,
    content: Any,
    request: Request,
    memo: Memo | None,
) -> T:
    """`render(role, content, request)` of one entry, remembered in `memo` (see `_utils/memo.py`).

    `key` names the protocol, the role and `render_settings`; `memo` is `memo.active()`, fetched
    once per request. A text entry costs next to nothing to render, so only part lists are
    remembered. Callers never change what they get.
    """
    if memo is None or type(content) is not list:
        return render(role, content, request)
    return memo.recall((*key, *map(id, content)), content, lambda: render(role, content, request))


def rendered_all(
    protocol: str,
    render: Callable[[Any, Any, Request], list[T]],
    request: Request,
    memo: Memo | None,
) -> list[T]:
    """The wire forms of all `request.messages`, one `rendered` entry after another, concatenated.

    Within a run, when the request opens with the messages the loop's context build made
    (`memo.built`), the part for those that an earlier request of this protocol sent as the very
    same objects is reused whole, so a request renders only what was added since. The build makes
    new message objects whenever the entries they come from are not the ones it folded before
    (`context.Reuse`), and code outside the library only ever gets copies of them
    (hooks, callbacks, custom adapters). The earlier messages are kept alive here, so their ids
    cannot be taken by other objects while compared. Other messages render entry by entry.
    """
    settings = render_settings(request)
    messages = request.messages
    built = memo.built if memo is not None else []
    own = len(built) if built and list(map(id, messages[: len(built)])) == built else 0
    out: list[T] = []
    start = 0
    key = (protocol, settings)
    if memo is not None and own:
        kept = memo.requests.get(key)
        if kept is not None and built[: len(kept[1])] == kept[1]:
            out, start = list(kept[2]), len(kept[1])

    def add(begin: int, end: int) -> None:
        for message in messages[begin:end]:
            role, content = message.get("role"), message.get("content")
            out.extend(rendered((protocol, role, settings), render, role, content, request, memo))

    add(start, own)
    if memo is not None and start < own:
        memo.requests[key] = (messages[:own], list(built), list(out))
    if memo is not None and own and out:
        memo.runs = {id(out[0]): (list(out), list(map(id, out)))}  # the latest run only
    # What the loop adds after the build's messages (a reminder), or all of them when not its own.
    add(max(start, own), len(messages))
    return out


# `json.dumps` with these arguments builds a new encoder on every call; one does for all.
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def encoded_body(body: Any, memo: Memo | None) -> str:
    """`json.dumps(body, ensure_ascii=False, separators=(",", ":"))`, reusing earlier text of its messages.

    Within a run, the wire messages `rendered_all` made for the loop's own messages (`memo.runs`)
    are the same objects from one request to the next while their entries are unchanged, and
    nothing changes them after they are made; the JSON text of such a run is kept and only what
    follows it is encoded again. The same bytes as one `json.dumps` of the body: that joins the
    encodings of a dict's items and a list's elements with "," in order, as done here.
    """
    if memo is None or not memo.runs or type(body) is not dict or any(type(k) is not str for k in body):
        return _dumps(body)
    items = [f"{_dumps(key)}:{_encoded_value(value, memo)}" for key, value in body.items()]
    return "{" + ",".join(items) + "}"


def _encoded_value(value: Any, memo: Memo) -> str:
    if type(value) is not list or not value:
        return _dumps(value)
    # A run opens the list, or follows its first element (chat's system message, made anew each time).
    for lead in (0, 1):
        run = memo.runs.get(id(value[lead])) if lead < len(value) else None
        if run is not None and list(map(id, value[lead : lead + len(run[1])])) == run[1]:
            end = lead + len(run[1])
            pieces = [_dumps(item) for item in value[:lead]]
            pieces.append(_run_text(run[0], run[1], memo))
            pieces += [_dumps(item) for item in value[end:]]
            return "[" + ",".join(pieces) + "]"
    return _dumps(value)


def _run_text(objects: list[Any], ids: list[int], memo: Memo) -> str:
    """The elements of a run encoded and joined with ","; the text of an earlier, shorter run reused."""
    kept = memo.encoded.get(ids[0])
    # The earlier run's objects are kept with its text, so its ids are still theirs.
    if kept is not None and ids[: len(kept[1])] == kept[1]:
        head, start = kept[2], len(kept[1])
    else:
        head, start = "", 0
    tail = ",".join(_dumps(item) for item in objects[start:])
    text = head + "," + tail if head and tail else head or tail
    memo.encoded = {ids[0]: (objects, ids, text)}
    return text


# ---------------------------------------------------------------- stream events


def stream_object(data: str, protocol: str, *, one_item_list: bool = False) -> dict[str, Any]:
    """One stream event's JSON object (`one_item_list`: `[{...}]` counts as its object, as Gemini
    sends it).

    Raises:
        AgentError: kind "unknown" (status 200) when the data is not a JSON object.
    """
    try:
        value = json.loads(data)
    except ValueError:
        value = None
    if one_item_list and isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, dict):
        raise AgentError(
            f"malformed {protocol} stream event: {data[:200]!r}", kind="unknown", status=200, body=data
        )
    return value
