"""Budgets: what a run (or a whole session) has spent, and the limits it stops at.

    budget = Budget.of(config, history, upstream=None)   # config["limits"], ["limits_scope"], ["prices"]
    budget.admit(model)              # before each HTTP attempt: raises Reached at a limit, then counts it
    budget.used_tokens(model, usage); budget.used_calls(3)
    budget.run_cost()                # this run's cost from config["prices"] (None without prices)

A limit is checked before each request, never in the middle of a round, so a run that reaches one
ends cleanly: the round in progress has completed and its results are written, and no request is
made past the limit. A session's counts come from what its entries store (`spent(history)`: each
reply's `usage`, `retried_usage` and `attempts`, compact entries, the tool messages'
`sub_agent_spend`), so a budget survives restarts by construction. A sub-agent's run charges its
caller's budget as it goes (`upstream`), so a delegated run stops at the caller's limit too.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import AgentError
from .usage import Usage, by_model, of_dict, priced

LIMITS = ("requests", "input_tokens", "output_tokens", "total_tokens", "tool_calls", "cost")
SCOPES = ("run", "session")
PRICE_KEYS = frozenset({"input", "output", "cache_read", "cache_write"})


@dataclass
class Spend:
    """Requests made, tool calls asked for, and tokens used per model (None: model not recorded)."""

    requests: int = 0
    tool_calls: int = 0
    models: dict[str | None, Usage] = field(default_factory=dict)

    def add_usage(self, model: str | None, usage: Usage) -> None:
        self.models.setdefault(model, Usage()).add(usage)

    def add(self, other: Spend) -> None:
        self.requests += other.requests
        self.tool_calls += other.tool_calls
        for model, usage in other.models.items():
            self.add_usage(model, usage)

    def usage(self) -> Usage:
        return sum(self.models.values(), Usage())

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON, as a tool message's `sub_agent_spend` stores it (unrecorded model: "")."""
        models = {model or "": usage.to_dict() for model, usage in self.models.items()}
        return {"requests": self.requests, "tool_calls": self.tool_calls, "models": models}

    @classmethod
    def of_dict(cls, value: Mapping[str, Any]) -> Spend:
        spend = cls(_count(value.get("requests")), _count(value.get("tool_calls")))
        models = value.get("models")
        if isinstance(models, Mapping):
            for model, usage in models.items():
                if isinstance(usage, Mapping):
                    spend.add_usage(str(model) or None, of_dict(usage))
        return spend


def spent(history: Iterable[Mapping[str, Any]]) -> Spend:
    """What the entries of a history say was spent: the counts of `limits_scope: "session"`.

    An entry the library wrote for a model request (an assistant reply, a compact message: it
    carries `usage`) counts its `attempts` (1 unless it says more); a tool message counts its
    sub-agents' `sub_agent_spend`. Tool calls are those of the replies the library wrote.
    """
    entries = [e for e in history if isinstance(e, Mapping)]
    spend = Spend(models=by_model(entries))
    for entry in entries:
        if isinstance(entry.get("usage"), Mapping) and entry.get("role") in ("assistant", "compact"):
            spend.requests += max(1, _count(entry.get("attempts", 1)))
            spend.tool_calls += _calls_in(entry)
        delegated = entry.get("sub_agent_spend")
        if isinstance(delegated, Mapping):
            spend.requests += _count(delegated.get("requests"))
            spend.tool_calls += _count(delegated.get("tool_calls"))
    return spend


class Reached(Exception):
    """A limit was reached before a request: the run ends with reason "budget".

    Not an AgentError: no retry policy or error path may catch it on its way to the loop.
    """

    def __init__(self, name: str, limit: float, used: float) -> None:
        super().__init__(f"the {name} limit of {limit} was reached ({used} used)")
        self.limit = {"name": name, "limit": limit, "used": used}


class Budget:
    """The counters of one run, checked against `config["limits"]` before each request.

    Thread-safe: a run's sub-agents charge it from their own threads.
    """

    def __init__(
        self,
        limits: Mapping[str, float] | None,
        prices: Mapping[str, Mapping[str, float]] | None,
        *,
        base: Spend | None = None,
        upstream: Budget | None = None,
    ) -> None:
        self.limits = dict(limits or {})
        self.prices = prices
        self.base = base or Spend()
        self.run = Spend()
        self.upstream = upstream
        self._lock = threading.Lock()

    @classmethod
    def of(
        cls, config: Mapping[str, Any], history: Iterable[Mapping[str, Any]], upstream: Budget | None = None
    ) -> Budget:
        """The budget of a run starting now on `history` (its counts, with limits_scope "session")."""
        base = None
        if config.get("limits") and config.get("limits_scope") == "session":
            base = spent(history)
            # Usage stored before entries named their model was the primary's.
            unnamed = base.models.pop(None, None)
            if unnamed is not None:
                base.add_usage(model_name(config.get("model")), unnamed)
        return cls(config.get("limits"), config.get("prices"), base=base, upstream=upstream)

    # ------------------------------------------------------------ counting

    def admit(self, model: str) -> None:
        """Before an HTTP attempt to `model`: raise `Reached` at a limit, else count the request."""
        self.check()
        self._charge(lambda spend: setattr(spend, "requests", spend.requests + 1))

    def used_tokens(self, model: str, usage: Usage) -> None:
        self._charge(lambda spend: spend.add_usage(model, usage))

    def used_calls(self, count: int) -> None:
        if count:
            self._charge(lambda spend: setattr(spend, "tool_calls", spend.tool_calls + count))

    def _charge(self, change: Any) -> None:
        with self._lock:
            change(self.run)
        if self.upstream is not None:
            self.upstream._charge(change)

    # ------------------------------------------------------------ reading

    def check(self) -> None:
        """Raise `Reached` when a limit of this budget (or of the caller's, for a sub-agent) is reached."""
        for name in LIMITS:
            limit = self.limits.get(name)
            if limit is None:
                continue
            used = self.used(name)
            if used >= limit:
                raise Reached(name, limit, used)
        if self.upstream is not None:
            self.upstream.check()

    def used(self, name: str) -> float:
        """The count `name` (one of LIMITS) stands at: the base (a session's) plus this run's."""
        with self._lock:
            total = Spend()
            total.add(self.base)
            total.add(self.run)
        if name == "requests":
            return total.requests
        if name == "tool_calls":
            return total.tool_calls
        if name == "cost":
            cost = priced(total.models, self.prices or {})
            if cost is None:
                unpriced = sorted(str(m) for m in total.models if m not in (self.prices or {}))
                raise AgentError(
                    f"config limits['cost'] needs a price for every model that spent tokens; "
                    f"config prices has none for {', '.join(unpriced)}",
                    kind="config",
                )
            return cost
        return int(getattr(total.usage(), name))

    def run_cost(self) -> float | None:
        """This run's cost at `prices`; None without prices, or when a model has no price."""
        if self.prices is None:
            return None
        with self._lock:
            models = dict(self.run.models)
        return priced(models, self.prices)


def model_name(model: Any) -> str:
    """The name an entry records for `model`: the name itself, or a custom adapter object's
    `name` attribute (else its class name), so that prices and entries can name it."""
    if isinstance(model, str):
        return model
    name = getattr(model, "name", None)
    return name if isinstance(name, str) and name else type(model).__name__


def _calls_in(entry: Mapping[str, Any]) -> int:
    content = entry.get("content")
    if not isinstance(content, list):
        return 0
    return sum(1 for part in content if isinstance(part, Mapping) and part.get("type") == "tool-call")


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
