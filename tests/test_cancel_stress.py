"""The randomized-cancellation invariant test (API.md "The loop", invariants).

Many runs of an Agent against a ModelServer whose replies are drawn at random: streamed text
with chunk delays, several parallel tool calls (slow cooperative memory tools, a generator, a
failing tool, a timed-out tool, unknown tools, unparsable and schema-invalid arguments, a
stopping tool), mid-stream failures that are retried (drop, truncation, in-stream error,
stall past `request_timeout`, 429/500), and a permission callback that sometimes waits or
refuses. Each run is cancelled at a random instant — after a random delay, or on reaching
streaming, complete streamed tool calls, tool execution or a permission wait — by
`agent.stop()` from another thread, a `cancel=` event, or a new `send`; some runs are not
cancelled at all. Every other run goes through `agent.stream` instead of `send`: its events must
follow the order of API.md §Run events (tests/event_checks.py) and end with `agent_end`, also
when the run was cut. The figures printed at the end (runs, histories checked, violations) go in
the issue note.

After every send the whole history is validated:
- append-only: every entry seen before is unchanged and in place (also checked mid-run in on_step);
- every tool-call part has exactly one tool-result with its id, in the tool message right after it;
- no text of an attempt that was retried ever reaches history; a reply's text is either the whole
  reply or (only for a cancelled send) a prefix of it;
- every entry carries `id` and `created_at`;
and the server checks that every request it received pairs each call with its result.
After each `agent.close()`, no agentcore thread is left (the memory tools honour `ctx.cancel`).
"""

from __future__ import annotations

import copy
import itertools
import json
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from event_checks import check_order

from agentcore import Agent, AgentError, ToolContext
from agentcore.testing import ModelServer, Recorded

# ---------------------------------------------------------------- constants

RUNS = 300  # sends driven (each one possibly cancelled)
MOST_RUNS = 3 * RUNS  # on past RUNS until every cancel phase was hit (a busy machine hits fewer)
RUNS_PER_AGENT = 6  # sends on one agent (its history grows) before close() and the thread check
SEED = 20240611

P_CANCEL = 0.85  # share of runs that are cancelled
CANCEL_MODES = ("stop", "event", "new-send")
CANCEL_PHASES = ("time", "time", "stream", "calls", "tool", "permission")
MAX_RANDOM_DELAY_S = 0.12  # "time" phase: cancel after uniform(0, this)
MAX_SETTLE_S = 0.004  # after a phase trigger: wait uniform(0, this) before cancelling

P_FAILURE = 0.12  # a reply that fails (and is retried)
P_STALL = 0.03  # of which: a stall past request_timeout (slow: costs the timeout)
P_TOOLS = 0.55  # a reply with tool calls
P_STREAM = 0.85  # agents with stream=True
REQUEST_TIMEOUT_S = 2.0  # far above any chunk gap (MAX_CHUNK_DELAY_S) a busy machine stretches
MAX_CHUNK_DELAY_S = 0.003
# Cooperative tools end within ms of ctx.cancel; the wait returns as soon as they have, and the
# limit only has to outlast a busy machine's scheduling (2 cores beside a CPU hog).
THREAD_GRACE_S = 30.0

WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda")
TOKEN = re.compile(r"\[r\d+\]")


# ---------------------------------------------------------------- memory tools (cooperative)


def _slow(input: dict[str, Any], ctx: ToolContext) -> str:
    if ctx.cancel.wait(input["ms"] / 1000):
        return "cancelled"
    return f"waited {input['ms']} ms"


def _ticks(input: dict[str, Any], ctx: ToolContext) -> Iterator[str]:
    for i in range(input["n"]):
        if ctx.cancel.wait(0.002):
            return
        yield f"tick {i}\n"


def _boom(input: dict[str, Any]) -> str:
    raise ValueError("the tool failed on purpose")


def _sleepy(input: dict[str, Any], ctx: ToolContext) -> str:
    ctx.cancel.wait(60)  # its 0.01 s timeout sets ctx.cancel; else its thread outlives the grace
    return "too late"


def _finish(input: dict[str, Any]) -> dict[str, Any]:
    return {"stop": True, "output": "all done"}


def _schema(**properties: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in properties.items()},
        "required": list(properties),
    }


TOOLS: list[dict[str, Any]] = [
    {"name": "slow", "description": "Wait.", "input_schema": _schema(ms="integer"), "execute": _slow},
    {
        "name": "ticks",
        "description": "Stream ticks.",
        "input_schema": _schema(n="integer"),
        "execute": _ticks,
    },
    {"name": "boom", "description": "Fail.", "input_schema": _schema(), "execute": _boom},
    {
        "name": "sleepy",
        "description": "Time out.",
        "input_schema": _schema(),
        "execute": _sleepy,
        "timeout": 0.01,
    },
    {"name": "finish", "description": "Stop.", "input_schema": _schema(), "execute": _finish},
]


# ---------------------------------------------------------------- the scripted model


class Model:
    """Random replies (thread-safe), each text tagged with a unique `[rN]` token."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.numbers = itertools.count(1)
        self.texts: dict[str, str] = {}
        self.wire_violations: list[str] = []
        self.kinds: Counter[str] = Counter()

    def __call__(self, recorded: Recorded) -> dict[str, Any]:
        self._check_wire(recorded.body)
        with self.lock:
            return self._item(self.rng)

    def _text(self, rng: random.Random) -> str:
        token = f"[r{next(self.numbers)}]"
        text = token + " " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 8)))
        self.texts[token] = text
        return text

    def _item(self, rng: random.Random) -> dict[str, Any]:
        stream = {"chunk_size": rng.randint(3, 12), "chunk_delay": rng.uniform(0, MAX_CHUNK_DELAY_S)}
        roll = rng.random()
        if roll < P_FAILURE:
            return self._failure(rng, stream)
        if roll < P_FAILURE + P_TOOLS:
            self.kinds["tools"] += 1
            item: dict[str, Any] = {
                "tool_calls": [self._call(rng) for _ in range(rng.randint(1, 4))],
                **stream,
            }
            if rng.random() < 0.5:
                item["text"] = self._text(rng)
            return item
        self.kinds["text"] += 1
        return {"text": self._text(rng), **stream}

    def _failure(self, rng: random.Random, stream: dict[str, Any]) -> dict[str, Any]:
        if rng.random() < P_STALL / P_FAILURE:
            item = {
                "text": self._text(rng),
                "tool_calls": [self._call(rng) for _ in range(rng.randint(1, 3))],
                **stream,
            }
            if rng.random() < 0.5:
                # Stall right after the finish chunk: the calls are complete, [DONE] never comes.
                self.kinds["fail:stall-after-calls"] += 1
                return {**item, "stall_after": chunks_through_finish(item)}
            self.kinds["fail:stall"] += 1
            return {**item, "stall_after": rng.randint(1, 4)}
        kind = rng.choice(["500", "429", "drop", "truncate", "stream_error"])
        self.kinds[f"fail:{kind}"] += 1
        if kind == "500":
            return {"status": 500, "error": "overloaded"}
        if kind == "429":
            return {"status": 429, "error": "slow down", "headers": {"retry-after-ms": "1"}}
        item = {"text": self._text(rng), **stream}
        if rng.random() < 0.5:
            item["tool_calls"] = [self._call(rng)]
        if kind == "drop":
            item["drop_after"] = rng.randint(1, 5)
        elif kind == "truncate":
            item["truncate"] = True
        else:
            item["stream_error"] = "upstream failure"
        return item

    def _call(self, rng: random.Random) -> dict[str, Any]:
        choice = rng.choices(
            ["slow", "ticks", "boom", "sleepy", "finish", "ghost", "unparsable", "schema-invalid"],
            weights=[40, 12, 8, 6, 2, 4, 4, 4],
        )[0]
        if choice == "slow":
            return {"name": "slow", "arguments": {"ms": rng.randint(0, 30)}}
        if choice == "ticks":
            return {"name": "ticks", "arguments": {"n": rng.randint(1, 6)}}
        if choice == "ghost":
            return {"name": "ghost", "arguments": {}}
        if choice == "unparsable":
            return {"name": "slow", "arguments": '{"ms": 5'}
        if choice == "schema-invalid":
            return {"name": "slow", "arguments": {"ms": "five"}}
        return {"name": choice, "arguments": {}}

    def _check_wire(self, body: Any) -> None:
        """Every call the client sends back must be answered, by tool messages right after it."""
        messages = body.get("messages", []) if isinstance(body, dict) else []
        for index, message in enumerate(messages):
            calls = [c["id"] for c in message.get("tool_calls") or []]
            following = itertools.takewhile(lambda m: m.get("role") == "tool", messages[index + 1 :])
            answered = [m.get("tool_call_id") for m in following]
            if calls and answered[: len(calls)] != calls:
                with self.lock:
                    self.wire_violations.append(f"request: calls {calls} answered by {answered}")


def chunks_through_finish(item: dict[str, Any]) -> int:
    """How many stream chunks the chat encoder sends up to and including the finish chunk.

    Layout (agentcore/testing/encoders/chat.py): role chunk, text pieces, per call a start
    chunk and its argument pieces, the finish chunk; then usage and [DONE].
    """
    size: int = item["chunk_size"]

    def pieces(text: str) -> int:
        return -(-len(text) // size)

    calls = sum(
        1 + pieces(c["arguments"] if isinstance(c["arguments"], str) else json.dumps(c["arguments"]))
        for c in item["tool_calls"]
    )
    return 1 + pieces(item["text"]) + calls + 1


# ---------------------------------------------------------------- one run's bookkeeping


@dataclass
class Attempt:
    text: list[str] = field(default_factory=list)
    retried: bool = False


@dataclass
class RunState:
    """What callbacks of the current run report; read by the canceller and the validator."""

    phase: str = "none"
    stream_target: int = 1
    trigger: threading.Event = field(default_factory=threading.Event)
    attempts: list[Attempt] = field(default_factory=list)
    text_deltas: int = 0
    snapshot: list[dict[str, Any]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)


class Harness:
    """Callbacks shared by every agent; `state` is swapped for each run."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.rng_lock = threading.Lock()
        self.state = RunState()
        self.stats: Counter[str] = Counter()

    def uniform(self, a: float, b: float) -> float:
        with self.rng_lock:
            return self.rng.uniform(a, b)

    def callbacks(self, agent_box: list[Agent]) -> dict[str, Any]:
        def on_llm_start(payload: dict[str, Any]) -> None:
            self.state.attempts.append(Attempt())

        def on_llm_event(event: dict[str, Any]) -> None:
            state = self.state
            if event["type"] == "tool-call" and state.phase == "calls":
                state.trigger.set()
            if event["type"] == "text-delta":
                if state.attempts:
                    state.attempts[-1].text.append(event["text"])
                state.text_deltas += 1
                if state.phase == "stream" and state.text_deltas >= state.stream_target:
                    state.trigger.set()

        def on_retry(payload: dict[str, Any]) -> None:
            self.stats["retries"] += 1
            if self.state.attempts:
                self.state.attempts[-1].retried = True

        def on_tool_call(payload: dict[str, Any]) -> None:
            if self.state.phase == "tool":
                self.state.trigger.set()

        def on_permission(payload: dict[str, Any]) -> bool | str:
            with self.rng_lock:
                roll, wait_s = self.rng.random(), self.rng.uniform(0, 0.03)
            if roll < 0.45:
                return True
            if self.state.phase == "permission":
                self.state.trigger.set()
            payload["cancel"].wait(wait_s)
            if roll < 0.85:
                return True
            return False if roll < 0.93 else "yes"

        def on_step(payload: dict[str, Any]) -> None:
            # On the run's own thread, between rounds: the history must only have grown.
            state = self.state
            check_prefix(agent_box[0].history, state.snapshot, state.violations, "mid-run")
            state.snapshot = copy.deepcopy(agent_box[0].history)

        return {
            "on_llm_start": on_llm_start,
            "on_llm_event": on_llm_event,
            "on_retry": on_retry,
            "on_tool_call": on_tool_call,
            "on_permission": on_permission,
            "on_step": on_step,
        }


# ---------------------------------------------------------------- validation


def check_prefix(
    history: list[dict[str, Any]], before: list[dict[str, Any]], out: list[str], where: str
) -> None:
    if len(history) < len(before):
        out.append(f"{where}: history shrank from {len(before)} to {len(history)}")
        return
    for index, (old, new) in enumerate(zip(before, history, strict=False)):
        if old != new:
            out.append(f"{where}: entry {index} changed: {old!r} -> {new!r}")
            return


def check_history(
    history: list[dict[str, Any]], texts: dict[str, str], may_cut: set[int], first_new: int
) -> list[str]:
    """Every invariant that must hold of a whole history."""
    problems: list[str] = []
    ids = [m.get("id") for m in history]
    for index, message in enumerate(history):
        if not isinstance(message.get("id"), str) or not isinstance(message.get("created_at"), float):
            problems.append(f"entry {index} lacks id/created_at: {message!r}")
    if len(set(ids)) != len(ids):
        problems.append("duplicate entry ids")
    problems += check_calls_answered(history)
    problems += check_texts(history, texts, may_cut, first_new)
    return problems


def check_calls_answered(history: list[dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    results: Counter[str] = Counter()
    calls: set[str] = set()
    for index, message in enumerate(history):
        content = message.get("content")
        parts = content if isinstance(content, list) else []
        if message["role"] == "tool":
            for part in parts:
                results[part["tool_call_id"]] += 1
                if part["tool_call_id"] not in calls:
                    problems.append(
                        f"entry {index}: result {part['tool_call_id']} before (or without) its call"
                    )
                if part.get("output", {}).get("type") not in (
                    "text",
                    "json",
                    "error-text",
                    "error-json",
                    "execution-denied",
                    "content",
                ):
                    problems.append(f"entry {index}: bad output block {part.get('output')!r}")
        call_ids = [p["tool_call_id"] for p in parts if p.get("type") == "tool-call"]
        if message["role"] != "assistant" or not call_ids:
            continue
        if calls.intersection(call_ids):
            problems.append(f"entry {index}: a tool-call id appears twice")
        calls.update(call_ids)
        following = history[index + 1] if index + 1 < len(history) else None
        answered = (
            [p["tool_call_id"] for p in following["content"]]
            if following and following["role"] == "tool"
            else []
        )
        if answered != call_ids:
            problems.append(f"entry {index}: calls {call_ids} answered right after by {answered}")
    for call_id in calls:
        if results[call_id] != 1:
            problems.append(f"call {call_id} has {results[call_id]} results")
    return problems


def check_texts(
    history: list[dict[str, Any]], texts: dict[str, str], may_cut: set[int], first_new: int
) -> list[str]:
    """This send's assistant text is a whole reply, or — only where a send was cancelled — its start.

    Entries of earlier sends were checked when they were appended; the prefix check keeps them so.
    """
    problems: list[str] = []
    for index in range(first_new, len(history)):
        if history[index]["role"] != "assistant":
            continue
        for part in history[index]["content"]:
            if part.get("type") != "text" or not part["text"]:
                continue
            text = part["text"]
            token = TOKEN.match(text)
            full = texts.get(token.group()) if token else None
            if full == text:
                continue
            if index in may_cut and (full.startswith(text) if full else not token):
                continue
            problems.append(f"entry {index}: text {text!r} is not a whole reply (full: {full!r})")
    return problems


def cut_positions(history: list[dict[str, Any]], first_new: int, cancelled_inputs: set[str]) -> set[int]:
    """Where a reply cut off by cancellation may sit: the last assistant entry of a cancelled send."""
    positions: set[int] = set()
    cancelled, last = False, None
    for index in range(first_new, len(history) + 1):
        message = history[index] if index < len(history) else {"role": "user", "content": None}
        if message["role"] == "user":
            if cancelled and last is not None:
                positions.add(last)
            cancelled, last = message["content"] in cancelled_inputs, None
        elif message["role"] == "assistant":
            last = index
    return positions


def retried_tokens(attempts: list[Attempt]) -> set[str]:
    return {m.group() for a in attempts if a.retried for m in [TOKEN.match("".join(a.text))] if m}


def result_label(part: dict[str, Any]) -> str:
    output = part["output"]
    if output["type"] == "error-text" and "interrupted" in str(output["value"]).lower():
        return "interrupted"
    return str(output["type"])


def agentcore_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("agentcore") and t.is_alive()]


def wait_for_no_threads(limit_s: float, ignore: list[threading.Thread]) -> list[threading.Thread]:
    """Agentcore threads still alive, waiting up to `limit_s` for them to end.

    Threads in `ignore` (process-wide ones other tests started before this one, like the shared
    tool pool's) are not waited for: they are not this test's, and they do not end.
    """
    deadline = time.monotonic() + limit_s
    while True:
        left = [t for t in agentcore_threads() if t not in ignore]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.005)


# ---------------------------------------------------------------- driving one run


@dataclass
class Outcome:
    result: Any = None
    error: BaseException | None = None
    events: list[dict[str, Any]] | None = None


def send_into(agent: Agent, text: str, outcome: Outcome, cancel: threading.Event | None = None) -> None:
    try:
        outcome.result = agent.send(text, cancel=cancel)
    except BaseException as exc:  # recorded and judged by the validator
        outcome.error = exc


def stream_into(agent: Agent, text: str, outcome: Outcome, cancel: threading.Event | None = None) -> None:
    """`send_into` through `agent.stream`: the same run, with its events kept for checking."""
    outcome.events = []
    try:
        run = agent.stream(text, cancel=cancel)
        for event in run:
            outcome.events.append(event)
        outcome.result = run.result
    except BaseException as exc:
        outcome.error = exc


def check_stream(outcome: Outcome, number: int) -> list[str]:
    events = outcome.events
    if events is None:
        return []
    problems = [f"run {number} (stream): {p}" for p in check_order(events)]
    if events and events[-1]["type"] == "agent_end":
        failed = "error" in events[-1]
        if failed != (outcome.error is not None):
            problems.append(
                f"run {number} (stream): agent_end error={failed} but the run raised {outcome.error!r}"
            )
    return problems


def drive_run(agent: Agent, harness: Harness, model: Model, number: int) -> tuple[list[str], bool]:
    """One send, maybe cancelled; returns (violations, whether it was cancelled)."""
    rng = harness.rng
    with harness.rng_lock:
        cancelling = rng.random() < P_CANCEL
        mode = rng.choice(CANCEL_MODES)
        phase = rng.choice(CANCEL_PHASES) if cancelling else "none"
        delay = rng.uniform(0, MAX_RANDOM_DELAY_S)
        settle = rng.uniform(0, MAX_SETTLE_S)
        target = rng.randint(1, 6)
    before = copy.deepcopy(agent.history)
    state = RunState(phase=phase, stream_target=target, snapshot=copy.deepcopy(before))
    harness.state = state
    first, second = Outcome(), Outcome()
    cancel = threading.Event() if mode == "event" else None
    drive = stream_into if number % 2 else send_into
    worker = threading.Thread(target=drive, args=(agent, f"task {number}", first, cancel))
    worker.start()
    acted = False
    if cancelling:
        if phase == "time":
            time.sleep(delay)
            state.trigger.set()
        while not state.trigger.wait(0.002):
            if not worker.is_alive():
                break
        if state.trigger.is_set() and worker.is_alive():
            time.sleep(settle)
            acted = True
            harness.stats[f"phase:{phase}"] += 1
            harness.stats[f"mode:{mode}"] += 1
            if mode == "stop":
                agent.stop()
            elif mode == "event":
                assert cancel is not None
                cancel.set()
            else:
                state.phase = "none"
                send_into(agent, f"interrupting task {number}", second)
    worker.join(30)
    violations = list(state.violations)
    if worker.is_alive():
        return [f"run {number}: the send did not end"], acted
    violations += check_stream(first, number)
    if first.events is not None:
        harness.stats["streams"] += 1
    for label, outcome in (("send", first), ("second send", second)):
        error = outcome.error
        if error is None:
            continue
        if isinstance(error, AgentError) and error.kind == "aborted" and (acted and label == "send"):
            harness.stats["aborted"] += 1
            continue
        violations.append(f"run {number}: {label} raised {error!r}")
    if first.result is not None:
        harness.stats[f"reason:{first.result.reason}"] += 1
        appended = first.result.messages
        if second.result is None and appended != agent.history[len(before) :]:
            violations.append(f"run {number}: SendResult.messages differ from the entries appended")
    check_prefix(agent.history, before, violations, f"run {number}")
    cancelled_inputs = {f"task {number}"} if first.error is not None else set()
    may_cut = cut_positions(agent.history, len(before), cancelled_inputs)
    problems = check_history(agent.history, model.texts, may_cut, len(before))
    violations += [f"run {number} ({mode if acted else 'not cancelled'}): {p}" for p in problems]
    history_text = json.dumps(agent.history)
    discarded = retried_tokens(state.attempts)
    harness.stats["retried-partial-replies"] += len(discarded)
    for token in discarded:
        if token in history_text:
            violations.append(f"run {number}: text {token} of a retried attempt reached history")
    for message in agent.history[len(before) :]:
        for part in message["content"] if message["role"] == "tool" else []:
            harness.stats[f"result:{result_label(part)}"] += 1
    return violations, acted


# ---------------------------------------------------------------- the test


def _covered(harness: Harness) -> bool:
    """Enough runs were cut, in every phase: whether a cut lands depends on scheduling."""
    phases_hit = all(harness.stats[f"phase:{phase}"] > 0 for phase in CANCEL_PHASES)
    return phases_hit and harness.stats["aborted"] > RUNS // 3


@pytest.mark.timeout(900)  # 300 runs: minutes on a busy machine; the verdict does not depend on speed
def test_random_cancellation_keeps_every_history_valid() -> None:
    started = time.monotonic()
    model = Model(SEED)
    harness = Harness(SEED + 1)
    violations: list[str] = []
    histories = 0
    runs = 0
    stray_before = agentcore_threads()
    with ModelServer(default=model) as server:
        while runs < RUNS or (runs < MOST_RUNS and not _covered(harness)):
            with harness.rng_lock:
                stream = harness.rng.random() < P_STREAM
            box: list[Agent] = []
            agent = Agent(
                config={
                    "base_url": server.base_url,
                    "model": "stress",
                    "stream": stream,
                    "no_tool_rounds": 1,
                    "max_steps": 6,
                    "retry_base_delay": 0.001,
                    "retry_max_delay": 0.004,
                    "request_timeout": REQUEST_TIMEOUT_S,
                },
                tools=TOOLS,
                callbacks=harness.callbacks(box),
            )
            box.append(agent)
            for _ in range(RUNS_PER_AGENT):
                if runs >= MOST_RUNS or (runs >= RUNS and _covered(harness)):
                    break
                runs += 1
                found, _ = drive_run(agent, harness, model, runs)
                violations += found
                histories += 1
            agent.close()
            left = wait_for_no_threads(THREAD_GRACE_S, ignore=stray_before)
            if left:
                violations.append(f"after close(): threads left: {[t.name for t in left]}")
    violations += model.wire_violations
    took = time.monotonic() - started
    print()
    print(f"randomized cancellation: runs={runs} histories checked={histories} violations={len(violations)}")
    print(f"  took {took:.1f} s; requests={sum(model.kinds.values())} {dict(sorted(model.kinds.items()))}")
    print(f"  {dict(sorted(harness.stats.items()))}")
    for line in violations[:20]:
        print("  VIOLATION", line)
    assert violations == []
    assert harness.stats["aborted"] > RUNS // 3, f"too few runs were actually cut in {runs} runs"
    for phase in CANCEL_PHASES:
        assert harness.stats[f"phase:{phase}"] > 0, f"no cancel happened in phase {phase} in {runs} runs"
    # How long it took is printed above, not asserted: that depends on the machine's load.
