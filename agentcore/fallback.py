"""The models a run may ask, in order: the primary, then each of `config["fallback"]`.

    chain = members(config)      # [Member(name="gpt-4o", primary=True, ...), Member(name="claude-…"), ...]
    chain[1].config              # the primary's config with that fallback's connection overrides

A fallback entry overrides connection keys of the primary (`base_url`, `api_key`, `model`,
`protocol`, `provider`, `capabilities`, `tool_mode`); the keys it leaves out are the primary's,
with two exceptions that keep one vendor's settings away from another: `api_key` is inherited only
by an entry on the primary's `base_url` (a key is never sent to a host it was not given for), and
`capabilities` merge key by key like a send override. Which errors move a run along the chain,
and when, is the retry policy's (`_utils/retry.over_chain`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .budget import model_name
from .config import Config
from .connection import Connection


@dataclass(frozen=True)
class Member:
    """One model of the chain: the config a request to it is built from, and its recorded name.

    `connection` is `Connection.of(config)`, what its requests are built by; `tool_mode` its own.
    """

    config: Config
    name: str
    primary: bool
    connection: Connection
    tool_mode: str


def members(config: Mapping[str, Any]) -> list[Member]:
    """The primary, then the fallbacks, each as a whole config (validated already, as `config` is)."""
    chain = [_member(Config(config), True)]
    for entry in config.get("fallback") or []:
        merged = Config(config)
        for key, value in entry.items():
            if key == "capabilities":
                merged[key] = {**config["capabilities"], **value}
            else:
                merged[key] = value
        if "api_key" not in entry and merged["base_url"] != config["base_url"]:
            merged["api_key"] = ""
        chain.append(_member(merged, False))
    return chain


def _member(config: Config, primary: bool) -> Member:
    return Member(config, model_name(config["model"]), primary, Connection.of(config), config["tool_mode"])
