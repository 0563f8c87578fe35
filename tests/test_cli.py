"""The command line, driven as a person drives it: a real `python -m agentcore` in a pseudo-terminal.

The model is a ModelServer in this test process; the CLI talks to it over 127.0.0.1. Nothing
waits on time: every step waits for text the CLI prints (generous timeouts, for a busy machine),
and the replies that must be interrupted stall on the server until the client goes away.
"""

from __future__ import annotations

import configparser
import importlib
import io
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from agentcore.store import SQLiteStore
from agentcore.testing import ModelServer

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 60
PROMPT = "> "
# A reply that streams a few pieces and then goes quiet until the client hangs up: only Ctrl-C
# ends it, so the test never races the end of the stream.
STALLED = {"text": "The quick brown fox jumps over the lazy dog", "chunk_size": 4, "stall_after": 4}

TOOLS = {
    "shout.py": '''
        from agentcore import tool

        @tool
        def shout(text: str) -> str:
            """Shout a text."""
            print("shouting now", flush=True)
            return text.upper()
    ''',
    "wait_forever.py": '''
        import time
        from agentcore import tool

        @tool
        def wait_forever() -> str:
            """Never return on its own."""
            print("waiting started", flush=True)
            time.sleep(600)
            return "late"
    ''',
}


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTCORE_", "OPENAI_", "ANTHROPIC_"))}
    env.update(PYTHONPATH=str(ROOT), TERM="dumb", PYTHONUNBUFFERED="1", **extra)
    return env


def endpoint(server: ModelServer) -> list[str]:
    return ["--base-url", server.base_url, "--model", "m"]


@pytest.fixture
def tools_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "tools"
    folder.mkdir()
    for name, source in TOOLS.items():
        (folder / name).write_text(textwrap.dedent(source))
    return folder


class Terminal:
    """`agentcore chat ...` running in a pseudo-terminal."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "agentcore", "chat", *args],
            env=env or cli_env(),
            encoding="utf-8",
            timeout=TIMEOUT_S,
            cwd=str(ROOT),
        )

    def expect(self, pattern: str) -> str:
        """Wait for `pattern` (literal text); return everything printed before it."""
        self.child.expect_exact(pattern)
        return str(self.child.before)

    def prompt(self) -> str:
        return self.expect(PROMPT)

    def say(self, line: str) -> None:
        """Type a line at the prompt; consume its echo, so later expectations see only output."""
        self.child.sendline(line)
        self.expect(line + "\r\n")

    def exit_status(self) -> int:
        self.child.expect(pexpect.EOF)
        self.child.close()
        return int(self.child.exitstatus)

    def kill(self) -> None:
        if self.child.isalive():
            self.child.kill(9)
            self.child.close(force=True)


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    started: list[Terminal] = []
    yield started
    for terminal in started:
        terminal.kill()


@pytest.fixture
def chat(terminals: list[Terminal]) -> Any:
    def start(*args: str, env: dict[str, str] | None = None) -> Terminal:
        terminal = Terminal(*args, env=env)
        terminals.append(terminal)
        return terminal

    return start


def run_cli(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentcore", *args],
        capture_output=True,
        text=True,
        env=env or cli_env(),
        input=stdin if stdin is not None else "",
        timeout=TIMEOUT_S,
        cwd=str(ROOT),
    )


# ------------------------------------------------------------ chat in a terminal


def test_the_reply_streams_in_pieces_and_ctrl_c_stops_it_keeping_history_valid(
    server: ModelServer, chat: Any
) -> None:
    """Was: no CLI. The partial reply is on screen while the server still holds the rest; Ctrl-C
    stops it, the prompt comes back, and the interrupted reply is in a history the next send uses."""
    server.add(STALLED, "Second answer.")
    term = chat(*endpoint(server))
    term.prompt()
    term.say("hello")
    term.expect("The quick")  # a piece of the reply, while the server has not sent the rest
    term.child.sendintr()
    shown = term.expect("[interrupted]")
    assert "lazy dog" not in shown
    term.prompt()
    term.say("/history")
    history = term.prompt()
    assert history.startswith("user: hello\r\nassistant: The quick")
    assert "lazy" not in history

    term.say("go on")
    assert "Second answer." in term.prompt()
    sent = server.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"].startswith("The quick")
    term.child.sendeof()
    assert term.exit_status() == 0


def test_ctrl_c_during_a_tool_call_gives_it_an_interrupted_result(
    server: ModelServer, chat: Any, tools_dir: Path
) -> None:
    server.add({"tool_calls": [{"name": "wait_forever", "arguments": {}}]})
    term = chat(*endpoint(server), "--tools", str(tools_dir))
    term.prompt()
    term.say("start the tool")
    term.expect("[tool] wait_forever {}")
    term.expect("[wait_forever stdout] waiting started")
    term.child.sendintr()
    term.expect("[tool] wait_forever failed")
    term.expect("[interrupted]")
    term.prompt()
    term.say("/history")
    history = term.prompt().splitlines()
    assert history[1].startswith("assistant: [call wait_forever {}]")
    assert history[2].startswith("tool: [wait_forever failed]") and "interrupted" in history[2]
    term.child.sendeof()
    assert term.exit_status() == 0


def test_tool_calls_their_output_and_results_are_shown(
    server: ModelServer, chat: Any, tools_dir: Path
) -> None:
    server.add({"tool_calls": [{"name": "shout", "arguments": {"text": "hi"}}]}, "All done.")
    term = chat(*endpoint(server), "--tools", str(tools_dir))
    term.prompt()
    term.say("shout hi")
    term.expect('[tool] shout {"text": "hi"}')
    term.expect("[shout stdout] shouting now")
    term.expect("[tool] shout returned HI")
    term.expect("All done.")
    term.prompt()
    term.child.sendeof()
    assert term.exit_status() == 0


def test_ctrl_c_twice_in_a_row_at_the_prompt_exits_0(server: ModelServer, chat: Any) -> None:
    term = chat(*endpoint(server))
    term.prompt()
    term.child.sendintr()
    term.expect("press Ctrl-C again or Ctrl-D to exit")
    # A line in between starts the count again: this Ctrl-C is the first of a new pair.
    term.say("/help")
    term.expect("/history")
    term.prompt()
    term.child.sendintr()
    term.expect("press Ctrl-C again or Ctrl-D to exit")
    term.child.sendintr()
    assert term.exit_status() == 0


def test_usage_reset_compact_and_unknown_commands(server: ModelServer, chat: Any) -> None:
    server.add({"text": "First answer.", "usage": {"input_tokens": 11, "output_tokens": 7}})
    term = chat(*endpoint(server))
    term.prompt()
    term.say("/compact")
    term.expect("(nothing to compact yet)")
    term.prompt()
    term.say("first question")
    term.expect("First answer.")
    term.prompt()
    term.say("/usage")
    assert term.prompt().startswith("1 reply: 11 input, 7 output, 18 total tokens")

    server.add("The summary of it all.")
    term.say("/compact")
    term.expect("[compacted into a summary of 22 characters]")
    term.prompt()
    term.say("/history")
    assert term.prompt().splitlines()[-1] == "compact: The summary of it all."

    term.say("/nope")
    term.expect("unknown command /nope")
    term.prompt()
    term.say("/reset")
    term.expect("[history cleared]")
    term.prompt()
    term.say("/history")
    assert term.prompt().strip() == "(empty history)"
    server.add("Fresh answer.")
    term.say("fresh start")
    term.expect("Fresh answer.")
    term.prompt()
    assert [m["role"] for m in server.requests[-1]["messages"]] == ["user"]
    term.say("/exit")
    assert term.exit_status() == 0


def test_demo_shows_a_tool_call_and_streamed_text_without_any_endpoint(chat: Any) -> None:
    term = chat("--demo")
    term.expect("agentcore demo")
    term.prompt()
    term.say("count these four words")
    term.expect('[tool] word_count {"text": "count these four words"}')
    term.expect("[tool] word_count returned 4")
    term.expect("word_count returned 4.")
    term.prompt()
    term.say("tell me a story")
    term.expect("Once upon a time")
    term.child.sendintr()
    # Stopped mid-story, or (on a very slow machine) just after it ended: either way the REPL
    # stays, and the story is in the history.
    term.prompt()
    term.say("/history")
    assert "assistant: Once upon a time" in term.prompt()
    term.child.sendeof()
    assert term.exit_status() == 0


# ------------------------------------------------------------ sessions across invocations


def test_session_resumes_a_conversation_across_two_invocations(
    server: ModelServer, chat: Any, tmp_path: Path
) -> None:
    session = f"{tmp_path / 'chats.db'}:me"
    server.add("Noted: banana.", STALLED, "It was banana.")
    first = run_cli("run", *endpoint(server), "--session", session, "remember the word banana")
    assert first.returncode == 0, first.stderr

    term = chat(*endpoint(server), "--session", session)
    term.expect("messages; /history shows them]")
    term.prompt()
    term.say("and now?")
    term.expect("The quick")
    term.child.sendintr()
    term.expect("[interrupted]")
    term.prompt()
    term.child.sendeof()
    assert term.exit_status() == 0

    again = chat(*endpoint(server), "--session", session)
    again.prompt()
    again.say("/history")
    lines = again.prompt().splitlines()
    assert lines == [
        "user: remember the word banana",
        "assistant: Noted: banana.",
        "user: and now?",
        lines[3],
    ]
    assert lines[3].startswith("assistant: The quick")
    again.say("which word?")
    again.expect("It was banana.")
    again.prompt()
    assert server.requests[-1]["messages"][0]["content"] == "remember the word banana"
    again.child.sendeof()
    assert again.exit_status() == 0


def test_a_message_typed_after_another_process_wrote_goes_on_from_the_store(
    server: ModelServer, chat: Any, tmp_path: Path
) -> None:
    """API.md §Command line: with --session, a REPL opened before another process wrote to the
    session takes that writer's entries first at its next message — never a conflict."""
    session = f"{tmp_path / 'chats.db'}:me"
    server.add("Noted: apple.", "Noted: banana.", "It was banana.")
    first = run_cli("run", *endpoint(server), "--session", session, "remember apple")
    assert first.returncode == 0, first.stderr
    term = chat(*endpoint(server), "--session", session)
    term.expect("messages; /history shows them]")
    term.prompt()
    other = run_cli("run", *endpoint(server), "--session", session, "no, remember banana")
    assert other.returncode == 0, other.stderr
    term.say("which word?")
    term.expect("It was banana.")
    term.prompt()
    sent = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
    assert sent == ["remember apple", "no, remember banana", "which word?"]
    term.child.sendeof()
    assert term.exit_status() == 0


def test_reset_empties_a_stored_session(server: ModelServer, tmp_path: Path) -> None:
    session = f"{tmp_path / 'chats.db'}:me"
    server.add("Stored.")
    assert run_cli("run", *endpoint(server), "--session", session, "keep this").returncode == 0
    done = run_cli("chat", *endpoint(server), "--session", session, stdin="/reset\n")
    assert done.returncode == 0 and "[history cleared]" in done.stderr
    done = run_cli("chat", *endpoint(server), "--session", session, stdin="/history\n")
    assert "(empty history)" in done.stdout


# ------------------------------------------------------------ chat with pipes


def test_piped_chat_keeps_the_reply_on_stdout_and_tool_activity_on_stderr(
    server: ModelServer, tools_dir: Path
) -> None:
    server.add({"tool_calls": [{"name": "shout", "arguments": {"text": "hi"}}]}, "All done.")
    done = run_cli("chat", *endpoint(server), "--tools", str(tools_dir), stdin="shout hi\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "All done.\n"  # no prompt, no echo: stdin is not a terminal
    assert '[tool] shout {"text": "hi"}' in done.stderr and "[tool] shout returned HI" in done.stderr
    assert "All done." not in done.stderr


# ------------------------------------------------------------ agentcore run


def test_run_prints_the_final_text_and_exits_0(server: ModelServer) -> None:
    server.add("The answer is 42.")
    done = run_cli("run", *endpoint(server), "--system", "Be brief.", "what is the answer?")
    assert (done.returncode, done.stdout) == (0, "The answer is 42.\n"), done.stderr
    assert server.requests[0]["messages"][0] == {"role": "system", "content": "Be brief."}


def test_run_exits_0_for_no_tool(server: ModelServer, tools_dir: Path) -> None:
    """Each reply streams to stdout on its own line: the two the no-tool reminder asked for too."""
    server.add("one", "two", "three")
    done = run_cli("run", *endpoint(server), "--tools", str(tools_dir), "talk")
    assert (done.returncode, done.stdout) == (0, "one\ntwo\nthree\n"), done.stderr
    assert len(server.requests) == 3


def test_run_exits_3_at_the_step_limit(server: ModelServer, tools_dir: Path) -> None:
    server.add({"text": "Shouting.", "tool_calls": [{"name": "shout", "arguments": {"text": "a"}}]})
    done = run_cli("run", *endpoint(server), "--tools", str(tools_dir), "--max-steps", "1", "shout")
    assert (done.returncode, done.stdout) == (3, "Shouting.\n"), done.stderr
    assert "[tool] shout returned A" in done.stderr
    # Why it stopped, on stderr (before: a silent exit 3).
    assert done.stderr.splitlines()[-1] == (
        "[stopped at the step limit: 1 model reply (--max-steps); the task may be unfinished]"
    )


def test_run_exits_1_with_the_error_kind_and_message_on_stderr(server: ModelServer) -> None:
    server.add({"status": 401, "error": "Incorrect API key provided"})
    done = run_cli("run", *endpoint(server), "hello")
    assert done.returncode == 1
    assert done.stdout == ""
    assert "error (auth):" in done.stderr and "Incorrect API key provided" in done.stderr
    assert len(server.requests) == 1  # a wrong key fails at once at a terminal, never retried


def test_run_stopped_by_ctrl_c_exits_130_and_leaves_a_valid_stored_history(
    server: ModelServer, tmp_path: Path, tools_dir: Path
) -> None:
    """Ctrl-C while the second reply streams: the first round is stored whole, and whatever part
    of the second reply had arrived by then is stored as an assistant entry of its own. `run`
    streams: the text that arrived before Ctrl-C stays on stdout (before: nothing was printed)."""
    arrived = threading.Event()

    def stall(_request: Any) -> dict[str, Any]:
        arrived.set()
        return STALLED

    server.add({"tool_calls": [{"name": "shout", "arguments": {"text": "a"}}]}, stall)
    session = f"{tmp_path / 'chats.db'}:me"
    command = [sys.executable, "-m", "agentcore", "run", *endpoint(server), "--tools", str(tools_dir)]
    child = subprocess.Popen(
        [*command, "--session", session, "hi"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
    )
    try:
        assert arrived.wait(TIMEOUT_S)
        assert child.stdout is not None
        first = child.stdout.read(4)  # the reply streams: its first piece is on stdout already
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=TIMEOUT_S)
    finally:
        child.kill()
    out = first + out
    assert child.returncode == 130, err
    kept = out.rstrip("\n")
    assert len(kept) >= 4 and STALLED["text"].startswith(kept), out  # what arrived is kept
    assert err.splitlines()[-1] == "[interrupted]"
    stored = SQLiteStore(tmp_path / "chats.db").load("me")
    assert [m["role"] for m in stored[:3]] == ["user", "assistant", "tool"]
    assert stored[2]["content"][0]["output"] == {"type": "text", "value": "A"}
    assert [m["role"] for m in stored[3:]] == ["assistant"]
    assert stored[3]["content"][0]["text"].startswith(kept)


def test_retries_and_library_warnings_are_shown_on_stderr(server: ModelServer, tools_dir: Path) -> None:
    """The library only logs; the command line is the application that shows what it logs."""
    server.add({"status": 503, "error": "overloaded, try again", "headers": {"Retry-After": "0"}}, "Made it.")
    done = run_cli("run", *endpoint(server), "hello")
    assert (done.returncode, done.stdout) == (0, "Made it.\n"), done.stderr
    assert done.stderr.count("overloaded, try again") == 1, done.stderr
    assert "[retry 1 in 0.0 s (server): HTTP 503: overloaded, try again]" in done.stderr

    # The same tool name in two folders of one scan: the library warns (on logger "agentcore").
    twin = tools_dir / "twin"
    twin.mkdir()
    (twin / "shout_again.py").write_text((tools_dir / "shout.py").read_text())
    server.add("Fine.", "Fine.", "Fine.")
    done = run_cli("run", *endpoint(server), "--tools", str(tools_dir), "hi")
    assert done.returncode == 0, done.stderr
    assert "agentcore: tool 'shout' is defined in both" in done.stderr


def test_run_demo_needs_no_endpoint() -> None:
    done = run_cli("run", "--demo", "count the words of this sentence")
    assert (done.returncode, done.stdout) == (0, "Let me use word_count.\nword_count returned 6.\n"), (
        done.stderr
    )
    assert "[tool] word_count returned 6" in done.stderr


@pytest.mark.parametrize(
    ("args", "needs"),
    [
        (["--model", "m"], "AGENTCORE_BASE_URL"),
        (["--base-url", "http://127.0.0.1:9/v1"], "AGENTCORE_MODEL"),
        (
            ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--api-key-env", "NOT_SET_HERE"],
            "NOT_SET_HERE",
        ),
        (["--demo", "--session", "no-colon.db"], "FILE.db:ID"),
    ],
)
def test_missing_or_malformed_flags_are_usage_errors(args: list[str], needs: str) -> None:
    for command in (["run", *args, "task"], ["chat", *args]):
        done = run_cli(*command)
        assert done.returncode == 2 and needs in done.stderr, done.stderr


def test_environment_gives_the_endpoint_and_the_key(server: ModelServer) -> None:
    server.add("From the environment.", "Anthropic.")
    env = cli_env(AGENTCORE_BASE_URL=server.base_url, AGENTCORE_MODEL="env-model", OPENAI_API_KEY="sk-env")
    done = run_cli("run", "hi", env=env)
    assert (done.returncode, done.stdout) == (0, "From the environment.\n"), done.stderr
    assert server.requests[0]["model"] == "env-model"
    assert server.log[0].headers["authorization"] == "Bearer sk-env"

    env = cli_env(AGENTCORE_BASE_URL=server.base_url, AGENTCORE_MODEL="claude", MY_KEY="ak-mine")
    done = run_cli("run", "--protocol", "anthropic", "--api-key-env", "MY_KEY", "hi", env=env)
    assert done.returncode == 0, done.stderr
    assert server.log[1].path.endswith("/messages")
    assert server.log[1].headers["x-api-key"] == "ak-mine"


# ------------------------------------------------------------ when things go wrong


def _closed_port() -> int:
    """A port of 127.0.0.1 where nothing listens (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_nothing_listening_fails_with_one_line_naming_the_address() -> None:
    """Before: retried at 5, 10, 20, 40 s… for ever, each time with three lines naming
    TrackedHTTPPool and urllib3's connection classes."""
    port = _closed_port()
    for command in (["run", "hi"], ["chat"]):
        done = run_cli(
            *command,
            "--base-url",
            f"http://127.0.0.1:{port}/v1",
            "--model",
            "m",
            "--retry-for",
            "0",
            stdin="hi\n",
        )
        line = f"error (network): cannot connect to 127.0.0.1:{port}: connection refused"
        if command[0] == "run":
            assert (done.returncode, done.stdout, done.stderr) == (1, "", line + "\n")
        else:
            assert done.returncode == 0 and done.stderr == line + "\n"  # the REPL goes on to EOF


def test_retries_are_bounded_by_retry_for() -> None:
    """A server that keeps failing: retried while --retry-for lasts, then one error line, status 1."""
    failing = {"status": 503, "error": "still down", "headers": {"retry-after-ms": "100"}}
    with ModelServer(default=failing) as down:
        done = run_cli("run", *endpoint(down), "--retry-for", "1", "hi")
        assert done.returncode == 1, done.stderr
        assert done.stderr.splitlines()[-1] == "error (server): HTTP 503: still down"
        assert len(down.requests) >= 2  # retried, with the waits the server asked for
        before = len(down.requests)
        once = run_cli("run", *endpoint(down), "--retry-for", "0", "hi")
        assert (once.returncode, once.stderr) == (1, "error (server): HTTP 503: still down\n")
        assert len(down.requests) == before + 1


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--base-url", "127.0.0.1:8080", "expected the API root as an http(s) URL"),
        (
            "--base-url",
            "http://127.0.0.1:8080/v1/chat/completions",
            "use the API root 'http://127.0.0.1:8080/v1'",
        ),
        ("--base-url", "http://127.0.0.1:port/v1", "the port is not a number"),
        ("--base-url", "http://a..b/v1", "host name that is not valid"),
        ("--retry-for", "-1", "must be a number of seconds, 0 or more"),
        ("--retry-for", "soon", "is not a number of seconds"),
        ("--tools", "/nonexistent/tools", "not a folder"),
    ],
)
def test_a_malformed_flag_value_is_a_usage_error(flag: str, value: str, says: str) -> None:
    base = [] if flag == "--base-url" else ["--base-url", "http://127.0.0.1:9/v1"]
    for command in (
        ["run", *base, "--model", "m", flag, value, "task"],
        ["chat", *base, "--model", "m", flag, value],
    ):
        done = run_cli(*command)
        assert done.returncode == 2 and says in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_version_prints_the_version() -> None:
    import agentcore

    done = run_cli("--version")
    assert (done.returncode, done.stdout) == (0, f"agentcore {agentcore.__version__}\n")


def test_run_reads_the_task_from_stdin(server: ModelServer) -> None:
    server.add("From a dash.", "From a pipe.")
    done = run_cli("run", *endpoint(server), "-", stdin="summarise this\nplease\n")
    assert (done.returncode, done.stdout) == (0, "From a dash.\n"), done.stderr
    assert server.requests[0]["messages"][-1]["content"] == "summarise this\nplease"
    done = run_cli("run", *endpoint(server), stdin="piped task\n")
    assert (done.returncode, done.stdout) == (0, "From a pipe.\n"), done.stderr
    assert server.requests[1]["messages"][-1]["content"] == "piped task"
    empty = run_cli("run", *endpoint(server), "-", stdin="")
    assert empty.returncode == 2 and "the task read from stdin is empty" in empty.stderr


def test_run_without_a_task_at_a_terminal_is_a_usage_error(server: ModelServer) -> None:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "agentcore", "run", *endpoint(server)],
        env=cli_env(),
        encoding="utf-8",
        timeout=TIMEOUT_S,
        cwd=str(ROOT),
    )
    child.expect_exact("run needs a task")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2 and server.requests == []


def test_run_streams_the_reply_as_it_arrives(server: ModelServer) -> None:
    """Before: nothing until the end. The first pieces are on stdout while the server holds the rest."""
    server.add({"text": "Pieces arrive one by one.", "chunk_size": 6, "stall_after": 3})  # role + 2 pieces
    child = subprocess.Popen(
        [sys.executable, "-m", "agentcore", "run", *endpoint(server), "go"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
    )
    try:
        assert child.stdout is not None
        assert child.stdout.read(12) == "Pieces arriv"  # two chunks, and the reply is not over
        assert child.poll() is None
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=TIMEOUT_S)
    finally:
        child.kill()
    assert child.returncode == 130 and out == "\n" and err.endswith("[interrupted]\n"), (out, err)


def test_a_session_resumed_with_one_message_says_1_message(
    tmp_path: Path, chat: Any, server: ModelServer
) -> None:
    store = SQLiteStore(tmp_path / "chats.db")
    store.append("me", [{"role": "user", "content": "hello"}], expected_length=0)
    store.close()
    done = run_cli("chat", *endpoint(server), "--session", f"{tmp_path / 'chats.db'}:me", stdin="")
    assert done.returncode == 0
    assert f"[resumed {tmp_path / 'chats.db'}:me: 1 message; /history shows them]" in done.stderr


def test_two_terminals_on_one_session_take_turns_without_a_conflict(
    server: ModelServer, chat: Any, tmp_path: Path
) -> None:
    """Before: the second terminal's next message failed with `conflict` ("agent.reload()
    fetches its entries"), again at every message. Now each message goes on from the store."""
    session = f"{tmp_path / 'chats.db'}:shared"
    server.add("First answer.", "Second answer.", "Third answer.")
    first = chat(*endpoint(server), "--session", session)
    second = chat(*endpoint(server), "--session", session)
    first.prompt()
    second.prompt()
    first.say("one")
    first.expect("First answer.")
    first.prompt()
    second.say("two")
    assert "conflict" not in second.expect("Second answer.")
    second.prompt()
    first.say("three")
    assert "conflict" not in first.expect("Third answer.")
    first.prompt()
    sent = [m["content"] for m in server.requests[-1]["messages"]]
    assert sent == ["one", "First answer.", "two", "Second answer.", "three"]
    second.say("/history")
    lines = second.prompt().splitlines()
    assert lines == [
        "user: one",
        "assistant: First answer.",
        "user: two",
        "assistant: Second answer.",
        "user: three",
        "assistant: Third answer.",
    ]
    for term in (first, second):
        term.child.sendeof()
        assert term.exit_status() == 0


def test_a_reply_cut_short_by_another_process_reloads_and_says_so(tmp_path: Path) -> None:
    """Two replies on one session at the same moment (until runs hold the session's lease): the
    one whose write comes second is reported, and its conversation reloaded — never `conflict`."""
    from agentcore import Agent
    from agentcore.cli.display import Display
    from agentcore.cli.sync import send

    path = tmp_path / "chats.db"
    other = SQLiteStore(path)

    def another_process_writes(_request: Any) -> str:
        other.append("s", [{"role": "user", "content": "from elsewhere"}], expected_length=1)
        return "This reply loses the race."

    err = io.StringIO()
    with ModelServer([another_process_writes, "Goes on."]) as server, SQLiteStore(path) as store:
        config = {"base_url": server.base_url, "model": "m", "no_tool_rounds": 1}
        with Agent(config, session=store.session("s")) as agent:
            display = Display(io.StringIO(), err, stream_text=False)
            assert send(agent, "first", display) is None
            assert "another process wrote to this session during this reply" in err.getvalue()
            assert [m["content"] for m in agent.history] == ["first", "from elsewhere"]
            assert send(agent, "next", display).text == "Goes on."  # type: ignore[union-attr]
    other.close()


# ------------------------------------------------------------ packaging


def test_the_console_script_points_at_main() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    scripts = config["options.entry_points"]["console_scripts"].strip().splitlines()
    assert scripts == ["agentcore = agentcore.cli:main"]
    module, name = scripts[0].split("=")[1].strip().split(":")
    assert callable(getattr(importlib.import_module(module), name))


def test_import_agentcore_does_not_load_the_cli() -> None:
    code = "import sys, agentcore, agentcore.tools; print([m for m in sys.modules if 'agentcore.cli' in m])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env())
    assert done.stdout.strip() == "[]", done.stderr
