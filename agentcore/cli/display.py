"""Show a run as it happens: the reply on stdout, tool activity and notices on stderr.

    display = Display(sys.stdout, sys.stderr, stream_text=True)
    agent = Agent(config, callbacks=display.callbacks())
    agent.send("hi"); display.end_reply()

Callbacks arrive on the run's worker thread and on tool threads at once, so every write
holds one lock, and a stderr line never lands in the middle of a half-printed reply line.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any, TextIO

_PREVIEW_CHARS = 200


class Display:
    """Printing callbacks for one agent.

    Args:
        out: where reply text goes (stdout).
        err: where tool calls, their output and results, retries and notices go (stderr).
        stream_text: print reply text as it streams, each reply ending its line (a reply that
            did not stream is printed whole when it arrives); False leaves it to the caller.
    """

    def __init__(self, out: TextIO, err: TextIO, *, stream_text: bool) -> None:
        self.out = out
        self.err = err
        self.stream_text = stream_text
        self._lock = threading.Lock()
        self._mid_line = False
        self._streamed = False  # the current reply's text has been printed as it arrived

    def callbacks(self) -> dict[str, Callable[[dict[str, Any]], None]]:
        return {
            "on_llm_event": self.llm_event,
            "on_llm_finish": self.llm_finish,
            "on_tool_call": self.tool_call,
            "on_tool_output": self.tool_output,
            "on_tool_result": self.tool_result,
            "on_retry": self.retry,
        }

    # ------------------------------------------------------------ callbacks

    def llm_event(self, event: dict[str, Any]) -> None:
        if event.get("type") == "text-delta" and self.stream_text:
            text = str(event.get("text", ""))
            with self._lock:
                self._write(text)
                self._streamed = self._streamed or bool(text)

    def llm_finish(self, result: Any) -> None:
        """A reply is complete: print it if it did not stream (the server answered with JSON)."""
        if not self.stream_text:
            return
        with self._lock:
            if not self._streamed:
                self._write(str(getattr(result, "text", "") or ""))
            self._streamed = False
            self._end_line()

    def tool_call(self, call: dict[str, Any]) -> None:
        self.notice(f"[tool] {call.get('tool_name')} {_preview(call.get('input', {}))}")

    def tool_output(self, payload: dict[str, Any]) -> None:
        name, stream = payload.get("tool_name"), payload.get("stream")
        for line in str(payload.get("data", "")).splitlines():
            self.notice(f"[{name} {stream}] {line}")

    def tool_result(self, result: dict[str, Any]) -> None:
        output = result.get("output") or {}
        failed = str(output.get("type", "")).startswith("error") or output.get("type") == "execution-denied"
        verb = "failed" if failed else "returned"
        self.notice(f"[tool] {result.get('tool_name')} {verb} {_preview(output.get('value'))}")

    def retry(self, payload: dict[str, Any]) -> None:
        # The attempt starts again from nothing: said on its own line, so the text shown so far
        # is not taken for the beginning of the next attempt.
        self._streamed = False
        error = payload.get("error")
        kind = getattr(error, "kind", "unknown")
        delay_s = float(payload.get("delay", 0))
        self.notice(f"[retry {payload.get('attempt')} in {delay_s:.1f} s ({kind}): {error}]")

    # ------------------------------------------------------------ plain output

    def notice(self, text: str) -> None:
        """One line on stderr, after ending a half-printed reply line."""
        with self._lock:
            self._end_line()
            self.err.write(text + "\n")
            self.err.flush()

    def end_reply(self) -> None:
        """End the reply's last line, if the stream left it open."""
        with self._lock:
            self._end_line()

    def _write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()
            self._mid_line = not text.endswith("\n")

    def _end_line(self) -> None:
        if self._mid_line:
            self.out.write("\n")
            self.out.flush()
            self._mid_line = False


def _preview(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = text.replace("\n", "\\n")
    return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 3] + "..."
