"""The command line: `agentcore chat` (a REPL) and `agentcore run "task"` (one send).

    agentcore chat --base-url http://127.0.0.1:8080/v1 --model small --tools ./tools
    agentcore run --demo "Count the words of this sentence"
    python -m agentcore chat --session chats.db:me

This is the application, so it prints (the library only logs, on logger "agentcore").
Nothing imports this package but `__main__` and the console script: `import agentcore`
stays as cheap as it was.

Exit status: 0 done (and leaving the REPL), 3 `run` hit --max-steps, 1 an AgentError
(kind and message on stderr), 2 a usage error, 130 `run` stopped by Ctrl-C.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from ..agent import Agent
from ..config import PROTOCOLS
from ..errors import AgentError
from ..tools import load
from . import demo
from .display import Display
from .repl import Repl

__all__ = ["main"]

KEY_ENV = {
    "chat": "OPENAI_API_KEY",
    "responses": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
}
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_STEP_LIMIT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
# A wrong key or a malformed request will not get better by waiting: at a terminal, fail at
# once rather than retrying forever (the library's default, right for unattended services).
CLI_RETRY = {"skip_kinds": ["auth", "request"]}


class UsageError(Exception):
    """A flag is missing or malformed: reported like argparse's own errors (status 2)."""


@dataclass(frozen=True)
class _App:
    """What a command works with: the agent, its printer, and how /reset empties the conversation."""

    agent: Agent
    display: Display
    reset: Callable[[], None]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        with ExitStack() as cleanup:
            app = _build_app(args, cleanup)
            command: Callable[[Any, _App], int] = args.command
            return command(args, app)
    except UsageError as problem:
        parser.error(str(problem))
    except AgentError as error:
        print(f"error ({error.kind}): {error.message}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("[interrupted]", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK


# ------------------------------------------------------------ commands


def _chat(args: Any, app: _App) -> int:
    if args.demo:
        app.display.notice(demo.WELCOME)
    if app.agent.history:
        app.display.notice(
            f"[resumed {args.session}: {len(app.agent.history)} messages; /history shows them]"
        )
    return Repl(app.agent, app.display, reset=app.reset, read=_reader()).loop()


def _run(args: Any, app: _App) -> int:
    result = app.agent.send(args.task)
    app.display.end_reply()
    print(result.text)
    return EXIT_STEP_LIMIT if result.reason == "step-limit" else EXIT_OK


def _reader() -> Callable[[str], str]:
    if sys.stdin.isatty():
        try:
            import readline  # noqa: F401  (imported for its effect: line editing in input())
        except ImportError:
            pass
    return input


# ------------------------------------------------------------ building the agent


def _build_app(args: Any, cleanup: ExitStack) -> _App:
    """The agent the flags describe, printing through one Display."""
    display = Display(sys.stdout, sys.stderr, stream_text=args.command is _chat)
    _show_library_warnings(display)
    config = _connection(args, cleanup)
    config["retry"] = CLI_RETRY
    if args.system:
        config["system"] = args.system
    if args.command is _chat:
        # In a conversation the user is there to say "go on": a reply without tool calls ends
        # the turn instead of being pushed with the no-tool reminder.
        config["no_tool_rounds"] = 1
    elif args.max_steps is not None:
        config["max_steps"] = args.max_steps
    tools = load(demo.TOOLS if args.demo else [], *args.tools)
    if not args.session:
        agent = cleanup.enter_context(Agent(config, tools=tools, callbacks=display.callbacks()))
        return _App(agent, display, agent.history.clear)
    store, session_id = _open_store(args.session, cleanup)
    agent = Agent(config, tools=tools, callbacks=display.callbacks(), session=store.session(session_id))
    cleanup.enter_context(agent)

    def reset() -> None:
        store.delete(session_id)
        agent.reload()

    return _App(agent, display, reset)


def _connection(args: Any, cleanup: ExitStack) -> dict[str, Any]:
    if args.demo:
        server = demo.start()
        cleanup.callback(server.close)
        return {"base_url": server.base_url, "model": demo.MODEL, "protocol": "chat"}
    base_url = args.base_url or os.environ.get("AGENTCORE_BASE_URL", "")
    model = args.model or os.environ.get("AGENTCORE_MODEL", "")
    if not base_url:
        raise UsageError("no endpoint: pass --base-url URL or set AGENTCORE_BASE_URL (or try --demo)")
    if not model:
        raise UsageError("no model: pass --model NAME or set AGENTCORE_MODEL (or try --demo)")
    key_env = args.api_key_env or KEY_ENV[args.protocol]
    if args.api_key_env and args.api_key_env not in os.environ:
        raise UsageError(f"--api-key-env {args.api_key_env}: that environment variable is not set")
    # No key is fine: local servers (llama.cpp, vLLM, Ollama) take none.
    api_key = os.environ.get(key_env, "")
    return {"base_url": base_url, "model": model, "protocol": args.protocol, "api_key": api_key}


def _open_store(spec: str, cleanup: ExitStack) -> tuple[Any, str]:
    path, colon, session_id = spec.rpartition(":")
    if not colon or not path or not session_id:
        raise UsageError(f"--session {spec!r}: expected FILE.db:ID, e.g. chats.db:me")
    from ..store import SQLiteStore

    store = SQLiteStore(path)
    cleanup.callback(store.close)
    return store, session_id


# ------------------------------------------------------------ flags


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--base-url", help="the API root, e.g. http://127.0.0.1:8080/v1 (env AGENTCORE_BASE_URL)"
    )
    common.add_argument("--model", help="the model name (env AGENTCORE_MODEL)")
    common.add_argument("--protocol", choices=PROTOCOLS, default="chat", help="wire protocol (default chat)")
    common.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="environment variable holding the API key (default OPENAI_API_KEY, "
        "ANTHROPIC_API_KEY or GEMINI_API_KEY by protocol)",
    )
    common.add_argument("--system", default="", help="the system prompt")
    common.add_argument(
        "--tools", metavar="DIR", action="append", default=[], help="a folder of tool files (repeatable)"
    )
    common.add_argument("--session", metavar="FILE.db:ID", help="keep the conversation in a SQLite file")
    common.add_argument(
        "--demo", action="store_true", help="talk to a built-in scripted model: no key, no network"
    )

    parser = argparse.ArgumentParser(prog="agentcore", description="Talk to a model, with tools.")
    commands = parser.add_subparsers(metavar="COMMAND", required=True)
    chat = commands.add_parser("chat", parents=[common], help="an interactive conversation")
    chat.set_defaults(command=_chat, max_steps=None)
    run = commands.add_parser("run", parents=[common], help="do one task and print the answer")
    run.add_argument("task", help="the task, as one argument")
    run.add_argument("--max-steps", type=_positive_int, metavar="N", help="stop after N model replies")
    run.set_defaults(command=_run)
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return value


def _show_library_warnings(display: Display) -> None:
    # The library logs retries and swallowed callback errors at WARNING and never prints; the
    # application decides where that goes, and at a terminal it is a notice on stderr.
    logger = logging.getLogger("agentcore")
    for handler in [h for h in logger.handlers if isinstance(h, _NoticeHandler)]:
        logger.removeHandler(handler)  # main() called again in one process
    logger.addHandler(_NoticeHandler(display))
    logger.setLevel(logging.WARNING)


class _NoticeHandler(logging.Handler):
    def __init__(self, display: Display) -> None:
        super().__init__(logging.WARNING)
        self.display = display

    def emit(self, record: logging.LogRecord) -> None:
        if record.module == "retry":
            return  # retries are shown by the on_retry callback, with the attempt and the wait
        self.display.notice(f"agentcore: {record.getMessage()}")
