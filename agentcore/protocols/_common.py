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
import operator
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
    """What an entry's wire form depends on besides the entry: the capabilities, the media fallback.

    One object per distinct value in the process: the memos of many agents hold it, not copies.
    """
    settings = (tuple(sorted(request.capabilities.items())), request.media_fallback)
    return _SETTINGS.setdefault(settings, settings) if len(_SETTINGS) < 256 else settings


_SETTINGS: dict[Hashable, Hashable] = {}


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
    lead: Iterable[T] = (),
) -> list[T]:
    """`lead`, then the wire forms of all `request.messages`, one `rendered` entry after another.

    When the request opens with messages the loop's context build made (`memo.built`), the wire
    forms of those that the latest request of this protocol and these settings sent as the very
    same objects are reused whole, so a request renders only what was added since. The build
    makes new message objects whenever the entries they come from are not the ones it folded
    (`fold.Reuse`), and code outside the library only ever gets copies of them (hooks, callbacks,
    custom adapters). Those earlier messages are the same objects when both requests have the
    same shape (`fold.Shape.extends`), else when an identity check says so; they are kept alive in
    `memo.wire`, so that check cannot be fooled by a new object at a freed address. Other messages
    render entry by entry. The list returned is the one the caller puts in its body as it is (or
    with items appended): `encoded_body` finds the reused wire forms in it by identity.
    """
    settings = render_settings(request)
    messages = request.messages
    built = memo.built if memo is not None else None
    own = built[1] if built is not None and built[0] is messages else 0
    shape = built[2] if built is not None and own else None
    key = (protocol, settings)
    out: list[T] = list(lead)
    first = len(out)
    start = 0
    earlier: _Rendered | None = memo.wire if memo is not None and own else None
    if earlier is not None and not (earlier.key == key and _opens_with(messages, own, shape, earlier)):
        earlier = None
    if earlier is not None:
        out += earlier.wire
        start = len(earlier.messages)

    def add(begin: int, end: int) -> None:
        for message in messages[begin:end]:
            role, content = message.get("role"), message.get("content")
            out.extend(rendered((protocol, role, settings), render, role, content, request, memo))

    add(start, own)
    if memo is not None and own:
        text, texted = (earlier.text, earlier.texted) if earlier is not None else ([], 0)
        memo.wire = _Rendered(key, messages[:own], out[first:], list(text), texted, shape, out, first)
    # What the loop adds after the build's messages (a reminder), or all of them when not its own.
    add(own, len(messages))
    return out


def _opens_with(messages: list[Any], own: int, shape: Any, earlier: _Rendered) -> bool:
    """The build's `own` first `messages` open with the messages of `earlier`, object for object."""
    if len(earlier.messages) > own:
        return False
    if shape is not None and shape.extends(earlier.shape):
        return True
    return all(map(operator.is_, messages, earlier.messages))


@dataclass
class _Rendered:
    """The build messages of one request, their wire forms, and the JSON text of the first `texted`.

    `body`: the list `rendered_all` returned, whose items from `first` on are `wire`.
    """

    key: Hashable
    messages: list[Any]
    wire: list[Any]
    text: list[bytes]  # pieces: b"".join(text) is the encoded wire[:texted], joined with ","
    texted: int
    shape: Any
    body: list[Any]
    first: int


# `json.dumps` with these arguments builds a new encoder on every call; one does for all.
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_TEXT_PIECES = 32  # past this many pieces, the text is joined into one


def encoded_body(body: Any, memo: Memo | None) -> bytes:
    """`json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()`, reusing earlier text.

    The wire messages `rendered_all` reused for the build's messages (`memo.wire`) are the same
    objects from one request to the next while their entries are unchanged, and nothing changes
    them after they are made; the JSON text of them is kept, and only what follows is encoded.
    The body is joined once, in bytes: the same bytes as one `json.dumps`, which joins the
    encodings of a dict's items and a list's elements with "," in order, as done here.
    """
    rendered: _Rendered | None = memo.wire if memo is not None else None
    if (
        rendered is None
        or not rendered.wire
        or type(body) is not dict
        or any(type(k) is not str for k in body)
    ):
        return _dumps(body).encode()
    pieces: list[bytes] = []
    for key, value in body.items():
        pieces += [b"," if pieces else b"{", _dumps(key).encode(), b":"]
        if not _add_list_with_run(pieces, value, rendered):
            pieces.append(_dumps(value).encode())
    pieces.append(b"}" if pieces else b"{}")
    return b"".join(pieces)


def _add_list_with_run(pieces: list[bytes], value: Any, rendered: _Rendered) -> bool:
    """Append the text of `value` when it is a list holding `rendered.wire` as it is; else False."""
    found = _run_in(value, rendered)
    if found is None:
        return False
    lead, end = found
    # The run's text goes in as the pieces it is kept in: the body is copied once, when joined.
    pieces.append(b"[")
    for item in value[:lead]:
        pieces += [_dumps(item).encode(), b","]
    pieces += _run_text(rendered)
    for item in value[end:]:
        pieces += [b",", _dumps(item).encode()]
    pieces.append(b"]")
    return True


def _run_in(value: Any, rendered: _Rendered) -> tuple[int, int] | None:
    """Where `value` holds the very objects of `rendered.wire`, one after another, if it does."""
    run = rendered.wire
    if type(value) is not list:
        return None
    if value is rendered.body:
        # The list `rendered_all` made, as the adapter put it in its body (maybe with more after).
        lead, end = rendered.first, rendered.first + len(run)
        if end <= len(value) and value[lead] is run[0] and value[end - 1] is run[-1]:
            return lead, end
        return None
    # A list made from it: the run opens it or follows its first item (a system message).
    for lead in (0, 1):
        end = lead + len(run)
        if end <= len(value) and value[lead] is run[0] and all(map(operator.is_, value[lead:end], run)):
            return lead, end
    return None


def _run_text(rendered: _Rendered) -> list[bytes]:
    """The text of all of `rendered.wire`, in pieces; what is new is encoded and kept for the next request."""
    run, text = rendered.wire, rendered.text
    if rendered.texted < len(run):
        added = ",".join(_dumps(item) for item in run[rendered.texted :]).encode()
        text.append(b"," + added if text else added)
        if len(text) > _TEXT_PIECES:
            text[:] = [b"".join(text)]
        rendered.texted = len(run)
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
