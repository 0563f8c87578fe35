"""What callers hand the agent as user input: checked before anything is written.

    message = user_message("Fix the test", config)          # {"role": "user", "content": ...}
    message = user_message([{"type": "text", "text": "Look:"}, image_part], config)

Bad input raises `AgentError(kind="request")` naming the problem; nothing is appended.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import config as _config
from ._utils import surrogates
from ._utils.capabilities import media_kind
from .errors import AgentError, ConfigTypeError
from .hooks import check_hooks
from .tools.handlers import ToolSet
from .tools.toolset import load

Message = dict[str, Any]
_PART_TYPES = ("text", "image", "file")
CALLBACKS = frozenset(
    {
        "on_start",
        "on_llm_start",
        "on_llm_finish",
        "on_llm_event",
        "on_permission",
        "on_tool_call",
        "on_tool_output",
        "on_tool_result",
        "on_step",
        "on_retry",
        "on_compact",
    }
)


def user_message(input: Any, config: Mapping[str, Any]) -> Message:
    """Validate send input; nothing is written when it is rejected."""
    # history.py builds every entry; loaded here, at the first send, so building an agent stays cheap.
    from .history import user

    if isinstance(input, str):
        if not input.strip():
            raise AgentError("the input is empty", kind="request")
        check_encodable(input, "the input")
        return user(input)
    if not isinstance(input, list):
        raise AgentError(
            f"input must be a str or a list of content parts, got {type(input).__name__}", kind="request"
        )
    if not input:
        raise AgentError("the input is empty (no content parts)", kind="request")
    for index, part in enumerate(input):
        _check_part(index, part, config)
        check_encodable(part, f"input part {index}")
    if not any(p.get("type") != "text" or str(p.get("text", "")).strip() for p in input):
        raise AgentError("the input is empty (only blank text parts)", kind="request")
    return user([dict(p) for p in input])


def check_encodable(value: Any, what: str) -> None:
    """Text UTF-8 cannot encode (a lone surrogate) would fail every request: refused here."""
    problem = surrogates.first(value)
    if problem is not None:
        raise AgentError(
            f"{what} holds {problem}, which UTF-8 cannot encode, so no model can be sent it "
            "(os.listdir() gives such text for file names that are not UTF-8; "
            "text.encode('utf-8', 'replace').decode() cleans it)",
            kind="request",
        )


def _check_part(index: int, part: Any, config: Mapping[str, Any]) -> None:
    where = f"input part {index}"
    if not isinstance(part, dict):
        raise AgentError(f"{where} must be a dict, got {type(part).__name__}", kind="request")
    kind = part.get("type")
    if kind not in _PART_TYPES:
        raise AgentError(f"{where} has type {kind!r}; allowed: text, image, file", kind="request")
    if kind == "text" and not isinstance(part.get("text"), str):
        raise AgentError(f"{where} (text) needs a str 'text'", kind="request")
    if kind == "image" and (not isinstance(part.get("image"), str) or not part["image"]):
        raise AgentError(f"{where} (image) needs 'image': a data URL, a URL or base64 text", kind="request")
    if kind == "file":
        if not isinstance(part.get("media_type"), str) or not part["media_type"]:
            raise AgentError(f"{where} (file) needs a 'media_type' such as 'application/pdf'", kind="request")
        if not isinstance(part.get("data"), str) or not part["data"]:
            raise AgentError(f"{where} (file) needs 'data': base64 text or a URL", kind="request")
    media = media_kind(part)
    if (
        media is not None
        and not config["capabilities"].get(media, True)
        and config["media_fallback"] == "error"
    ):
        raise AgentError(
            f"{where} is {media} content, which capabilities.{media}=False forbids "
            '(set media_fallback="strip" to drop it instead)',
            kind="request",
        )


# ---------------------------------------------------------------- tools, history, callbacks


def check_types(*, config: Any, callbacks: Any, history: Any, id: Any, tools: Any) -> None:
    """Wrong Python types given to `Agent()` raise TypeError (API.md §Details "Validation")."""
    if config is not None and not isinstance(config, Mapping):
        raise ConfigTypeError(f"config must be a dict, got {type(config).__name__}")
    if callbacks is not None and not isinstance(callbacks, Mapping):
        raise TypeError(f"callbacks must be a dict, got {type(callbacks).__name__}")
    if history is not None and not isinstance(history, list):
        raise TypeError(f"history must be a list, got {type(history).__name__}")
    if id is not None and not isinstance(id, str):
        raise TypeError(f"id must be a str, got {type(id).__name__}")
    if tools is not None and isinstance(tools, (int, float, bool, bytes)):
        raise TypeError(f"tools must be a ToolSet, a list or a dict of tools, got {type(tools).__name__}")


def initial_tools(tools: Any) -> ToolSet:
    if tools is None:
        return ToolSet()
    if isinstance(tools, ToolSet):
        return tools
    if _has_folder(tools):
        raise AgentError(
            "Agent(tools=) does no I/O: scan folders with agentcore.tools.load(folder) "
            "or pass them to send(tools=)",
            kind="config",
        )
    return load(tools)


def _has_folder(tools: Any) -> bool:
    if isinstance(tools, (str, os.PathLike)):
        return True
    if isinstance(tools, (list, tuple)):
        return any(isinstance(t, (str, os.PathLike)) for t in tools)
    return False


def send_tools(tools: Any) -> ToolSet | None:
    if tools is None:
        return None
    return tools if isinstance(tools, ToolSet) else load(tools)


def check_history(history: Any) -> list[Message] | None:
    if history is not None and not isinstance(history, list):
        raise AgentError(f"history must be a list of messages, got {type(history).__name__}", kind="config")
    return history


def check_callbacks(callbacks: Any, *, config: bool = False) -> dict[str, Callable[..., Any]]:
    if callbacks is None:
        return {}
    if not isinstance(callbacks, Mapping):
        if config:
            raise AgentError(f"callbacks must be a dict, got {type(callbacks).__name__}", kind="config")
        raise TypeError(f"callbacks must be a dict, got {type(callbacks).__name__}")
    checked = {}
    for name, callback in callbacks.items():
        if name not in CALLBACKS:
            raise AgentError(
                f"unknown callback {name!r}; known: {', '.join(sorted(CALLBACKS))}", kind="config"
            )
        if callback is not None and not callable(callback):
            raise AgentError(
                f"callback {name} must be callable, got {type(callback).__name__}", kind="config"
            )
        checked[name] = callback
    return checked


# ---------------------------------------------------------------- what a send writes back


@dataclass(frozen=True)
class Overrides:
    """What a send writes back to the agent once it is sure to run (`Agent._apply`)."""

    config: Mapping[str, Any]
    history: list[Message] | None
    tools: ToolSet | None
    callbacks: dict[str, Callable[..., Any]]
    hooks: Mapping[str, Callable[..., Any] | None]


def write_back(target: dict[str, Any], given: Mapping[str, Any]) -> None:
    """Callbacks or hooks given to a send, into the agent's: `None` removes a name, else it is replaced."""
    for name, value in given.items():
        if value is None:
            target.pop(name, None)
        else:
            target[name] = value


def prepare_send(
    current: Mapping[str, Any],
    input: Any,
    *,
    config: Mapping[str, Any] | None = None,
    history: list[Message] | None = None,
    tools: Any = None,
    callbacks: Mapping[str, Callable[..., Any]] | None = None,
    hooks: Mapping[str, Callable[..., Any]] | None = None,
) -> tuple[Overrides, Message]:
    """Check everything a send was given against the agent's `current` config; raises, writes nothing."""
    merged = _config.merge(current, config)
    _config.check_sendable(merged)
    message = user_message(input, merged)
    overrides = Overrides(
        merged,
        check_history(history),
        send_tools(tools),
        check_callbacks(callbacks, config=True),
        check_hooks(hooks, at_send=True),
    )
    return overrides, message


def prepare_resume(
    current: Mapping[str, Any],
    history: list[Message],
    *,
    config: Mapping[str, Any] | None = None,
    callbacks: Mapping[str, Callable[..., Any]] | None = None,
) -> Overrides:
    """Check a resume: the history must end where the model can go on (a trailing user input too)."""
    merged = _config.merge(current, config)
    _config.check_sendable(merged)
    overrides = Overrides(merged, None, None, check_callbacks(callbacks, config=True), {})
    last = history[-1].get("role") if history else None
    if last not in ("assistant", "tool", "user"):
        raise AgentError(
            "resume() needs a history that ends with an assistant, tool or user message; "
            "use send() for new input",
            kind="request",
        )
    return overrides
