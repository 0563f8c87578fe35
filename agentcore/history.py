"""History entries: every constructor (yours and the library's), turns and a readable rendering.

    history = [user("hi"), assistant("Let me look", tool_calls=[{"id": "c1", "name": "read",
               "arguments": {"path": "a.json"}}]), tool("c1", "read", {"port": 8080})]
    turns(history)   # [[user], [assistant, tool]]
    print(render(history))
    open_calls(history)              # calls still waiting for a result (call_ids.py pairs them)

    append_to(history, entry)        # the library's: stamps `id` and `created_at`, then appends
    tool_message(calls, results)     # one tool message with every result in call order
    write_input(history, entries, session, journal)   # a run's first entries: all committed, or none

History is plain JSON and append-only: the library adds entries, never edits or removes one.
Every entry, whoever makes it, is built here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ._utils.ids import random_hex
from .call_ids import Message, open_calls, paired, tool_calls_of, tool_results_of
from .errors import AgentError

if TYPE_CHECKING:
    from .protocols.base import LLMResult, ToolCall
    from .usage import Usage

# The public names. The library's own entries (the last section) are for agentcore's modules.
__all__ = [
    "Message",
    "assistant",
    "compact",
    "open_calls",
    "paired",
    "render",
    "tool",
    "tool_calls_of",
    "tool_result_part",
    "tool_results_of",
    "turns",
    "user",
]


def user(content: str | list[dict[str, Any]]) -> Message:
    """A user message; `content` is text or a list of content parts."""
    return {"role": "user", "content": content}


def assistant(content: str | list[dict[str, Any]] = "", tool_calls: Iterable[Any] = ()) -> Message:
    """An assistant message with text (or ready parts) and tool calls.

    A tool call is `{"id", "name", "arguments"}` with arguments as a dict or JSON string,
    or a ready `{"type": "tool-call", ...}` part.
    """
    parts: list[dict[str, Any]] = []
    if isinstance(content, str):
        if content:
            parts.append({"type": "text", "text": content})
    else:
        parts.extend(content)
    parts.extend(_tool_call_part(call) for call in tool_calls)
    return {"role": "assistant", "content": parts}


def tool(tool_call_id: str, tool_name: str, content: Any) -> Message:
    """A tool message with one result; `content` is shaped like a tool's return value."""
    from .tools.shape import shape

    result = shape(content)
    return {"role": "tool", "content": [tool_result_part(tool_call_id, tool_name, result["output"])]}


def compact(content: str) -> Message:
    """A compaction summary entry."""
    return {"role": "compact", "content": content}


def tool_result_part(tool_call_id: str, tool_name: str, output: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "tool-result",
        "tool_call_id": tool_call_id,
        "tool_name": tool_name,
        "output": dict(output),
    }


def _tool_call_part(call: Any) -> dict[str, Any]:
    if isinstance(call, Mapping) and call.get("type") == "tool-call":
        return dict(call)
    try:
        call_id, name, arguments = call["id"], call["name"], call.get("arguments", {})
    except (KeyError, TypeError, AttributeError):
        raise AgentError(
            f"a tool call needs 'id', 'name' and 'arguments': {call!r}", kind="request"
        ) from None
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            raise AgentError(f"tool call {call_id} has arguments that are not JSON", kind="request") from None
    if not isinstance(arguments, dict):
        raise AgentError(f"tool call {call_id} arguments must be an object", kind="request")
    return {"type": "tool-call", "tool_call_id": str(call_id), "tool_name": str(name), "input": arguments}


# ---------------------------------------------------------------- reading


def turns(history: Sequence[Message]) -> list[list[Message]]:
    """Fold messages into turns: a user message, or a model response with its tool results.

    A tool result joins the turn of the call with the same `tool_call_id`, wherever it sits
    in the list (a store may give results before their call); the call comes first in the
    turn. Results with no matching call are dropped. Adjacent assistant messages form one turn.
    """
    folded: list[list[Message]] = []
    call_turn: dict[str, int] = {}
    tool_messages: list[Message] = []
    previous_was_assistant = False
    for message in history:
        role = message.get("role")
        if role == "tool":
            tool_messages.append(message)
            previous_was_assistant = False
            continue
        if role == "assistant" and previous_was_assistant:
            folded[-1].append(message)
        else:
            folded.append([message])
        for part in tool_calls_of(message):
            call_turn[str(part.get("tool_call_id"))] = len(folded) - 1
        previous_was_assistant = role == "assistant"
    for message in tool_messages:
        _attach_results(message, call_turn, folded)
    return folded


def _attach_results(message: Message, call_turn: Mapping[str, int], folded: list[list[Message]]) -> None:
    by_turn: dict[int, list[dict[str, Any]]] = {}
    results = tool_results_of(message)
    for part in results:
        index = call_turn.get(str(part.get("tool_call_id")))
        if index is not None:
            by_turn.setdefault(index, []).append(part)
    for index, parts in by_turn.items():
        if len(by_turn) == 1 and len(parts) == len(message.get("content") or []):
            folded[index].append(message)
        else:
            folded[index].append({**message, "content": parts})


def render(history: Sequence[Mapping[str, Any]]) -> str:
    """Readable text, one line per message: `user: …`, `assistant: [reasoning] … [call …]`, `tool: […]`."""
    return "\n".join(
        f"{message.get('role')}: {_one_line(_render_content(message.get('content')))}" for message in history
    )


def _one_line(text: str) -> str:
    # One line per message, always: line breaks inside a message are shown as "\n".
    return text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n")


def _render_content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else json.dumps(content, ensure_ascii=False)
    return " ".join(piece for piece in (_render_part(p) for p in content) if piece)


def _render_part(part: Any) -> str:
    if not isinstance(part, dict):
        return str(part)
    kind = part.get("type")
    if kind == "text":
        return str(part.get("text", ""))
    if kind == "reasoning":
        return f"[reasoning] {part.get('text', '')}".rstrip()
    if kind == "image":
        return "[image]"
    if kind == "file":
        return "[file]"
    if kind == "tool-call":
        return f"[call {part.get('tool_name')} {json.dumps(part.get('input', {}), ensure_ascii=False)}]"
    if kind == "tool-result":
        return _render_result(part)
    return f"[{kind}]"


def _render_result(part: Mapping[str, Any]) -> str:
    output = part.get("output") or {}
    kind = output.get("type")
    value = output.get("value")
    verb = {"error-text": "failed", "error-json": "failed", "execution-denied": "denied"}.get(
        str(kind), "returned"
    )
    if kind == "content" and isinstance(value, list):
        body = _render_content(value)
    elif isinstance(value, str):
        body = value
    elif value is None:
        body = ""
    else:
        body = json.dumps(value, ensure_ascii=False)
    return f"[{part.get('tool_name')} {verb}] {body}".rstrip()


# ---------------------------------------------------------------- the entries the library writes


class Closer(Protocol):
    """What `close_open_calls` asks of a call journal (store/journal.py)."""

    def close(self, call_ids: Sequence[str]) -> list[dict[str, Any]]: ...


def close_open_calls(
    history: list[Message], journal: Closer | None = None, known: Any = None
) -> list[Message]:
    """Answer calls a loaded history left without a result (a process died mid-tool) as interrupted.

    A call without its result makes the vendors reject the conversation on every later request;
    appending the missing results keeps history append-only and valid. With a `journal`, the
    journal closes them first and says each result (a call that waited for a decision is denied:
    "no decision was made before the conversation moved on"), so a later decision finds nothing
    to decide. Returns what was appended. `known` (a `fold.Reuse`) tells the open calls from the
    entries its fold has not seen, when it can.
    """
    from .tools.shape import interrupted_result

    pending = known.open_calls(history) if known is not None else None
    if pending is None:
        pending = open_calls(history)
    if not pending:
        return []
    if journal is None:
        results = [interrupted_result() for _ in pending]
    else:
        results = journal.close([str(call["tool_call_id"]) for call in pending])
    message = tool_message(pending, results)
    append_to(history, message)
    return [message]


class Committer(Protocol):
    """What `write_input` needs of a store session (`store.Session`)."""

    def commit(self, history: list[Message]) -> None: ...


def write_input(
    history: list[Message],
    entries: list[Message],
    session: Committer | None,
    journal: Closer | None = None,
    *,
    resume: bool = False,
    known: Any = None,
) -> list[Message]:
    """Close open calls, append `entries`; with a session, commit all of it or write nothing.

    A resume continues the open calls instead (loop.py). The caller has brought `history` up to
    date with the session first (`Session.sync`, which also checks it). Returns what was
    appended (the closing results first, when calls were left open). `known`: see
    `close_open_calls`.
    """
    start = len(history)
    appended = [] if resume else close_open_calls(history, journal, known)
    for entry in entries:
        append_to(history, entry)
        appended.append(entry)
    if session is not None:
        try:
            session.commit(history)
        except BaseException:
            del history[start:]
            raise
    return appended


def call_part(call: ToolCall) -> dict[str, Any]:
    """The tool-call part of a call, as its assistant entry holds it."""
    from .protocols.base import tool_call_part

    return tool_call_part(call.id, call.name, call.arguments)


def tool_message(calls: list[dict[str, Any]], results: list[dict[str, Any]]) -> Message:
    message: Message = {
        "role": "tool",
        "content": [_result_part(c, r) for c, r in zip(calls, results, strict=True)],
    }
    from .usage import Usage

    delegated = [Usage.of(**r["sub_agent_usage"]) for r in results if r.get("sub_agent_usage")]
    if delegated:
        message["sub_agent_usage"] = sum(delegated, Usage()).to_dict()
    spends = [r["sub_agent_spend"] for r in results if r.get("sub_agent_spend")]
    if spends:
        from .budget import Spend

        summed = Spend()
        for spend in spends:
            summed.add(Spend.of_dict(spend))
        message["sub_agent_spend"] = summed.to_dict()
    return message


def _result_part(call: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    part = tool_result_part(str(call["tool_call_id"]), str(call["tool_name"]), result["output"])
    if result.get("interrupted"):
        # Stored results say what happened: a UI can show an interrupted call after a reload.
        part["interrupted"] = True
    return part


def append_to(history: list[Message], message: Message) -> None:
    """Append an entry the library created, stamped with `id` and `created_at`."""
    message.setdefault("id", random_hex())
    message.setdefault("created_at", time.time())
    history.append(message)


@dataclass(frozen=True)
class Spent:
    """Who answered a request, and what it took: the keys an entry of a model request carries.

    `model` is the name of the model that wrote the entry; `fallback` is True when that is not
    the primary; `attempts` counts the HTTP attempts it took (retries included; written when
    more than one); `retried` is the usage that failed attempts reported (written when any did).
    """

    model: str
    fallback: bool = False
    attempts: int = 1
    retried: Usage | None = None

    def stamp(self, message: Message) -> Message:
        message["model"] = self.model
        if self.fallback:
            message["fallback"] = True
        if self.attempts > 1:
            message["attempts"] = self.attempts
        if self.retried is not None and any(self.retried.to_dict().values()):
            message["retried_usage"] = self.retried.to_dict()
        return message


def assistant_message(result: LLMResult, spent: Spent | None = None) -> Message:
    message = dict(result.message)
    message["usage"] = result.usage.to_dict()
    return spent.stamp(message) if spent is not None else message


def compact_entry(content: str, usage: Usage, spent: Spent | None = None) -> Message:
    """The compact message a compaction appends: the summary and what writing it used."""
    message = {**compact(content), "usage": usage.to_dict()}
    return spent.stamp(message) if spent is not None else message


def cut_reply(text: str, calls: list[dict[str, Any]], spent: Spent | None = None) -> Message:
    """The assistant entry of a reply a cancel cut short: its text and complete calls.

    A cut stream reports no usage; the entry still carries the key every assistant entry has.
    """
    from .usage import Usage

    message: Message = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}, *calls],
        "usage": Usage().to_dict(),
    }
    return spent.stamp(message) if spent is not None else message
