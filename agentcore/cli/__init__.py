"""The command line: `agentcore chat` (a REPL) and `agentcore run "task"` (one send).

    agentcore chat --base-url http://127.0.0.1:8080/v1 --model small --tools ./tools
    agentcore run --demo "Count the words of this sentence"
    python -m agentcore chat --session chats.db:me

This is the application, so it prints (the library only logs, on logger "agentcore").
Nothing imports this package but `__main__` and the console script: `import agentcore`
stays as cheap as it was.

Exit status: 0 done (and leaving the REPL), 3 `run` hit --max-steps or a --budget-* limit, 1 an
AgentError (kind and message on stderr, one line), 2 a usage error, 130 `run` stopped by Ctrl-C.
Model requests are retried for at most --retry-for seconds (default 30), so a wrong address
fails in seconds instead of retrying for ever as an unattended service would.
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
from urllib.parse import urlsplit

from ..agent import Agent
from ..config import PROTOCOLS, endpoint_root, host_problem
from ..errors import AgentError
from ..tools import load
from . import demo
from .display import Display
from .repl import Repl
from .sync import send

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
RETRY_FOR_S = 30.0


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
        count = len(app.agent.history)
        app.display.notice(
            f"[resumed {args.session}: {count} message{'' if count == 1 else 's'}; /history shows them]"
        )
    interactive = sys.stdin.isatty()
    repl = Repl(app.agent, app.display, reset=app.reset, read=_reader(interactive), interactive=interactive)
    return repl.loop()


def _run(args: Any, app: _App) -> int:
    try:
        result = send(app.agent, args.task, app.display)
    finally:
        app.display.end_reply()  # what arrived stays on stdout, also after Ctrl-C
    if result is None:
        return EXIT_ERROR
    if result.reason == "step-limit":
        steps = f"{result.steps} model repl{'y' if result.steps == 1 else 'ies'}"
        app.display.notice(f"[stopped at the step limit: {steps} (--max-steps); the task may be unfinished]")
        return EXIT_STEP_LIMIT
    if result.reason == "budget":
        return EXIT_STEP_LIMIT  # the budget_reached event has said which limit
    return EXIT_OK


def _reader(interactive: bool) -> Callable[[str], str]:
    if not interactive:
        return _read_piped
    try:
        import readline  # noqa: F401  (imported for its effect: line editing in input())
    except ImportError:
        pass
    return input


def _read_piped(_prompt: str) -> str:
    """A line of piped input: no prompt is printed (stdout carries only the replies)."""
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")


def _task(args: Any) -> str:
    """`run`'s task: the argument, or stdin for `-` (or no argument with stdin not a terminal)."""
    task = args.task
    if task is None and sys.stdin.isatty():
        raise UsageError("run needs a task: pass it as an argument, or '-' to read it from stdin")
    if task is None or task == "-":
        task = sys.stdin.read().rstrip("\n")
        if not task.strip():
            raise UsageError("the task read from stdin is empty")
    return str(task)


# ------------------------------------------------------------ building the agent


def _build_app(args: Any, cleanup: ExitStack) -> _App:
    """The agent the flags describe, printing through one Display."""
    if args.command is _run:
        args.task = _task(args)
    display = Display(sys.stdout, sys.stderr, stream_text=True)
    _show_library_warnings(display)
    config = _connection(args, cleanup)
    config.update(_fallback_and_budget(args, config))
    display.chain = bool(config.get("fallback"))
    config["retry"] = CLI_RETRY
    config["retry_max_elapsed"] = args.retry_for
    if args.system:
        config["system"] = args.system
    if args.command is _chat or args.demo:
        # In a conversation the user is there to say "go on": a reply without tool calls ends
        # the turn instead of being pushed with the no-tool reminder. (The demo model has
        # nothing to add when reminded: it would say its answer again.)
        config["no_tool_rounds"] = 1
    if args.command is _run and args.max_steps is not None:
        config["max_steps"] = args.max_steps
    for folder in args.tools:
        if not os.path.isdir(folder):
            raise UsageError(f"--tools {folder}: not a folder")
    tools = load(demo.TOOLS if args.demo else [], *args.tools)
    if not args.session:
        agent = cleanup.enter_context(Agent(config, tools=tools, callbacks=display.callbacks()))
        agent.subscribe(display.event)
        return _App(agent, display, agent.history.clear)
    store, session_id = _open_store(args.session, cleanup)
    agent = Agent(config, tools=tools, callbacks=display.callbacks(), session=store.session(session_id))
    cleanup.enter_context(agent)
    agent.subscribe(display.event)

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
    _check_base_url(base_url)
    if not model:
        raise UsageError("no model: pass --model NAME or set AGENTCORE_MODEL (or try --demo)")
    key_env = args.api_key_env or KEY_ENV[args.protocol]
    if args.api_key_env and args.api_key_env not in os.environ:
        raise UsageError(f"--api-key-env {args.api_key_env}: that environment variable is not set")
    # No key is fine: local servers (llama.cpp, vLLM, Ollama) take none.
    api_key = os.environ.get(key_env, "")
    return {"base_url": base_url, "model": model, "protocol": args.protocol, "api_key": api_key}


def _fallback_and_budget(args: Any, primary: dict[str, Any]) -> dict[str, Any]:
    """config `fallback` from --fallback-model (and the --fallback-* endpoint flags), `limits`
    from --budget-tokens / --budget-requests."""
    extra: dict[str, Any] = {}
    endpoint = args.fallback_base_url or args.fallback_protocol or args.fallback_api_key_env
    if endpoint and not args.fallback_model:
        raise UsageError(
            "--fallback-base-url, --fallback-protocol and --fallback-api-key-env need --fallback-model"
        )
    if args.fallback_model:
        overrides: dict[str, Any] = {}
        if args.fallback_base_url:
            _check_base_url(args.fallback_base_url, "--fallback-base-url")
            overrides["base_url"] = args.fallback_base_url
        protocol = args.fallback_protocol or primary.get("protocol", "chat")
        if args.fallback_protocol:
            overrides["protocol"] = args.fallback_protocol
        if args.fallback_base_url or args.fallback_api_key_env:
            key_env = args.fallback_api_key_env or KEY_ENV[protocol]
            if args.fallback_api_key_env and key_env not in os.environ:
                raise UsageError(f"--fallback-api-key-env {key_env}: that environment variable is not set")
            overrides["api_key"] = os.environ.get(key_env, "")
        extra["fallback"] = [{**overrides, "model": model} for model in args.fallback_model]
    limits = {}
    if args.budget_tokens is not None:
        limits["total_tokens"] = args.budget_tokens
    if args.budget_requests is not None:
        limits["requests"] = args.budget_requests
    if limits:
        extra["limits"] = limits
    return extra


def _check_base_url(base_url: str, flag: str = "--base-url") -> None:
    """A --base-url (or AGENTCORE_BASE_URL, or --fallback-base-url) that is not an API root is a
    usage error."""
    parts = urlsplit(base_url)
    try:
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:
        raise UsageError(f"{flag} {base_url!r}: the port is not a number") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"{flag} {base_url!r}: expected the API root as an http(s) URL, e.g. http://127.0.0.1:8080/v1"
        )
    problem = host_problem(base_url)
    if problem is not None:
        raise UsageError(f"{flag} {base_url!r} {problem}")
    root = endpoint_root(base_url)
    if root is not None:
        raise UsageError(f"{flag} {base_url!r} ends with an endpoint path: use the API root {root!r}")


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
    _add_model_flags(common)
    _add_fallback_and_budget_flags(common)

    parser = argparse.ArgumentParser(prog="agentcore", description="Talk to a model, with tools.")
    parser.add_argument("--version", action="version", version=f"agentcore {_version()}")
    commands = parser.add_subparsers(metavar="COMMAND", required=True)
    chat = commands.add_parser("chat", parents=[common], help="an interactive conversation")
    chat.set_defaults(command=_chat, max_steps=None)
    run = commands.add_parser("run", parents=[common], help="do one task and print the answer")
    run.add_argument(
        "task",
        nargs="?",
        help="the task, as one argument; '-' (or none, with stdin not a terminal) reads stdin",
    )
    run.add_argument("--max-steps", type=_positive_int, metavar="N", help="stop after N model replies")
    run.set_defaults(command=_run)
    return parser


def _add_model_flags(common: argparse.ArgumentParser) -> None:
    """Where the model is, how to reach it, and what the agent brings (tools, session)."""
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
    common.add_argument(
        "--retry-for",
        type=_seconds,
        default=RETRY_FOR_S,
        metavar="SECONDS",
        help=f"retry failed model requests for at most this long (default {RETRY_FOR_S:g}; 0: never)",
    )


def _add_fallback_and_budget_flags(common: argparse.ArgumentParser) -> None:
    """The models asked when the primary fails, and the limits a run stops at."""
    common.add_argument(
        "--fallback-model",
        metavar="NAME",
        action="append",
        default=[],
        help="a model asked at once when the primary fails (repeatable, tried in order)",
    )
    common.add_argument(
        "--fallback-base-url",
        metavar="URL",
        help="the fallback models' API root (default: --base-url)",
    )
    common.add_argument("--fallback-protocol", choices=PROTOCOLS, help="the fallback models' wire protocol")
    common.add_argument(
        "--fallback-api-key-env", metavar="NAME", help="environment variable holding the fallback's API key"
    )
    common.add_argument(
        "--budget-tokens",
        type=_positive_int,
        metavar="N",
        help="stop before a request once N tokens are used",
    )
    common.add_argument(
        "--budget-requests", type=_positive_int, metavar="N", help="stop before request N + 1 (retries count)"
    )


def _version() -> str:
    # The package this CLI belongs to (agentcore, or a vendored copy under another name).
    package = sys.modules[__name__.rpartition(".")[0]]
    return str(getattr(package, "__version__", "unknown"))


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a number of seconds, 0 or more")
    return value


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
            return  # retries are shown from the retry event, with the attempt, the model and the wait
        self.display.notice(f"agentcore: {record.getMessage()}")
