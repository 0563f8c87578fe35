"""`agentcore chat`: read a line, send it, stream the reply; slash commands in between.

    Repl(agent, display, reset=agent.history.clear).loop()     # -> exit status

Ctrl-C during a reply stops it (`send` closes the history with interrupted results before it
re-raises) and returns to the prompt; at the prompt, Ctrl-C twice in a row or Ctrl-D exits 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from typing import Any

from .. import history as _history
from ..agent import Agent
from ..errors import AgentError
from ..usage import Usage
from .display import Display
from .sync import send

PROMPT = "> "
HELP = """\
Type a message and press Enter. Ctrl-C stops a reply; at the prompt Ctrl-C twice or Ctrl-D exits.
  /help      this text
  /history   the conversation, one line per message
  /usage     tokens used by the replies in the history
  /compact   summarise the conversation into one compact message
  /reset     start again with an empty history
  /exit      leave"""


class Repl:
    """The chat loop around one agent.

    Args:
        agent: the agent to talk to (its callbacks already print through `display`).
        display: the agent's printer.
        reset: empties the conversation (clears the list, or the stored session).
        read: reads one line with a prompt (`input`); raises EOFError / KeyboardInterrupt.
        interactive: stdin is a terminal (else no prompt and no closing newline reach stdout).
    """

    def __init__(
        self,
        agent: Agent,
        display: Display,
        *,
        reset: Callable[[], None],
        read: Callable[[str], str] = input,
        interactive: bool = True,
    ) -> None:
        self.agent = agent
        self.display = display
        self._reset = reset
        self._read = read
        self._interactive = interactive
        self._commands: Mapping[str, Callable[[], bool]] = {
            "/help": self._help,
            "/history": self._show_history,
            "/usage": self._usage,
            "/compact": self._compact,
            "/reset": self._reset_history,
            "/exit": lambda: False,
        }

    def loop(self) -> int:
        """Run until /exit, Ctrl-D, or Ctrl-C twice in a row at the prompt. Returns 0."""
        interrupts = 0
        while True:
            try:
                line = self._read(PROMPT if self._interactive else "")
            except EOFError:
                self._leave()
                return 0
            except KeyboardInterrupt:
                interrupts += 1
                if interrupts >= 2:
                    self._leave()
                    return 0
                self.display.notice("\n(press Ctrl-C again or Ctrl-D to exit)")
                continue
            interrupts = 0
            if not self._handle(line.strip()):
                return 0

    def _leave(self) -> None:
        if self._interactive:
            self.display.out.write("\n")  # the shell's prompt starts on a line of its own

    def _handle(self, line: str) -> bool:
        """Act on one line; False means leave."""
        if not line:
            return True
        if line.startswith("/"):
            command = self._commands.get(line.split()[0])
            if command is None:
                self.display.notice(f"unknown command {line.split()[0]}; /help lists the commands")
                return True
            return self._guarded(command)
        return self._guarded(lambda: self._send(line))

    def _guarded(self, action: Callable[[], bool]) -> bool:
        """Run a send or a command: Ctrl-C and AgentError end it, never the REPL."""
        try:
            return action()
        except KeyboardInterrupt:
            self._settle()
            self.display.notice("[interrupted]")
        except AgentError as error:
            self.display.end_reply()
            self.display.notice(f"error ({error.kind}): {error.message}")
        return True

    def _settle(self) -> None:
        # A second Ctrl-C can land while send() is still closing the history: make sure the run
        # has ended before the prompt comes back, however often the user presses it.
        while True:
            try:
                self.agent.stop()
                break
            except KeyboardInterrupt:
                continue
        self.display.end_reply()

    # ------------------------------------------------------------ actions

    def _send(self, line: str) -> bool:
        send(self.agent, line, self.display)
        self.display.end_reply()
        return True

    def _refresh(self) -> None:
        """With a session, show what the store holds now (another terminal may have written)."""
        if self.agent.session is not None:
            self.agent.reload()

    def _help(self) -> bool:
        self._print(HELP)
        return True

    def _show_history(self) -> bool:
        self._refresh()
        self._print(_history.render(self.agent.history) if self.agent.history else "(empty history)")
        return True

    def _usage(self) -> bool:
        self._refresh()
        replies = sum(1 for m in self.agent.history if m.get("role") == "assistant")
        usage = total_usage(self.agent.history)
        self._print(
            f"{replies} {'reply' if replies == 1 else 'replies'}: {usage.input_tokens} input, "
            f"{usage.output_tokens} output, "
            f"{usage.total_tokens} total tokens (cache read {usage.cache_read_tokens}, "
            f"cache write {usage.cache_write_tokens})"
        )
        return True

    def _compact(self) -> bool:
        if not self.agent.history:
            self.display.notice("(nothing to compact yet)")
            return True
        summary = self.agent.compact()
        self.display.notice(f"[compacted into a summary of {len(summary)} characters]")
        return True

    def _reset_history(self) -> bool:
        self._reset()
        self.display.notice("[history cleared]")
        return True

    def _print(self, text: str) -> None:
        self.display.end_reply()
        self.display.out.write(text + "\n")
        self.display.out.flush()


def total_usage(history: Sequence[Mapping[str, Any]]) -> Usage:
    """The summed `usage` of every assistant message (what the conversation has cost so far)."""
    total, names = Usage(), {f.name for f in fields(Usage)}
    for message in history:
        usage = message.get("usage")
        if message.get("role") == "assistant" and isinstance(usage, Mapping):
            total.add(Usage.of(**{k: v for k, v in usage.items() if k in names}))
    return total
