"""One model connection: where a request goes and how it is asked (the connection keys of a config).

    connection = Connection.of(config)                     # the agent's model
    request = connection.request(system=..., messages=..., tools=...)
    result = llm.complete(connection, request, cancel=cancel, on_event=on_event)
    connection.model_key                                   # (protocol, base_url, model): learned ratio

A frozen value. The loop, compaction, text-tool mode ("auto" remembers refusals per
connection) and telemetry (each attempt's span names its connection) all build and read
requests through it, so a request's connection is never assembled from config keys anywhere
else — and a chain of models to fall back on is a sequence of these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from ._utils.capabilities import DEFAULT_CAPABILITIES
from .protocols.base import Request


@dataclass(frozen=True, slots=True)
class Connection:
    """A model endpoint and the settings of every request to it.

    `model` is a model name, or a custom adapter object (API.md §Lower layers); `api_key` a key,
    or a function returning one (called before every HTTP attempt). `capabilities` may be partial:
    requests fill in the defaults.
    """

    base_url: str = ""
    api_key: str | Callable[[], str] = field(default="", repr=False)
    model: Any = ""
    protocol: str = "chat"
    provider: Mapping[str, Any] = field(default_factory=dict)
    stream: bool = True
    cache: bool | Mapping[str, Any] = True
    capabilities: Mapping[str, bool] = field(default_factory=dict)
    media_fallback: str = "error"
    max_tokens: int | None = None
    request_timeout: float | None = None
    stream_idle_timeout: float | None = None

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> Connection:
        """The connection keys of `config` (a whole config, or any part of one: the rest are defaults)."""
        return cls(**{name: config[name] for name in KEYS if config.get(name) is not None})

    @property
    def adapter(self) -> Any:
        """The custom adapter object, or None for a built-in protocol."""
        return None if isinstance(self.model, str) else self.model

    @property
    def model_name(self) -> str:
        """The model name a request carries ("" with a custom adapter)."""
        return self.model if isinstance(self.model, str) else ""

    @property
    def model_id(self) -> str:
        """The model name, or `adapter:<id>` for an adapter object: what per-model memory is keyed by."""
        return self.model if isinstance(self.model, str) else f"adapter:{id(self.model)}"

    @property
    def model_key(self) -> tuple[str, str, str]:
        """(protocol, base_url, model): the key of what is learned per model (the token ratio)."""
        return (self.protocol, self.base_url, self.model_id)

    def request(
        self,
        *,
        system: str,
        messages: list[dict[str, Any]],
        tools: Sequence[dict[str, Any]] = (),
        output: Any = None,
    ) -> Request:
        """A protocol-neutral request to this connection (history-format `messages`, no system message)."""
        return Request(
            model=self.model_name,
            messages=messages,
            system=system,
            tools=list(tools),
            base_url=self.base_url,
            api_key=self.api_key,  # type: ignore[arg-type]  # a key function is called by llm.complete
            provider=dict(self.provider),
            stream=self.stream,
            cache=dict(self.cache) if isinstance(self.cache, Mapping) else self.cache,
            capabilities={**DEFAULT_CAPABILITIES, **self.capabilities},
            media_fallback=self.media_fallback,
            output=output,
            max_tokens=self.max_tokens,
        )


KEYS = tuple(f.name for f in fields(Connection))
