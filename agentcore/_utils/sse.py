"""An incremental server-sent-events parser (WHATWG rules).

    parser = SSEParser()
    for chunk in chunks:
        for event in parser.feed(chunk):
            event.event, event.data

Lines end in CRLF, LF or CR (a CR at the end of one chunk may pair with an LF at the start
of the next). Lines starting with ':' are comments; several `data:` lines join with '\\n';
one space after the colon is stripped; a blank line dispatches the event.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SSEEvent:
    data: str
    event: str = "message"
    id: str | None = None


_UTF8 = codecs.getincrementaldecoder("utf-8")  # looked up once, not per stream


class SSEParser:
    def __init__(self) -> None:
        self._decoder = _UTF8(errors="replace")
        self._buffer = ""
        self._skip_lf = False
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._has_data = False

    def feed(self, chunk: bytes | str) -> list[SSEEvent]:
        text = self._decoder.decode(chunk) if isinstance(chunk, bytes) else chunk
        if not text:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if text.startswith("\n"):
                text = text[1:]
        buffer = self._buffer + text
        events: list[SSEEvent] = []
        start = 0
        length = len(buffer)
        while start < length:
            cr = buffer.find("\r", start)
            lf = buffer.find("\n", start)
            if cr == -1 and lf == -1:
                break
            if cr == -1 or (lf != -1 and lf < cr):
                end, next_start = lf, lf + 1
            else:
                end = cr
                if cr + 1 < length:
                    next_start = cr + 2 if buffer[cr + 1] == "\n" else cr + 1
                else:
                    next_start = cr + 1
                    self._skip_lf = True
            self._line(buffer[start:end], events)
            start = next_start
        self._buffer = buffer[start:]
        return events

    def flush(self) -> list[SSEEvent]:
        """End of stream: a final event without its blank line is dispatched (lenient)."""
        events: list[SSEEvent] = []
        tail = self._decoder.decode(b"", final=True)
        if tail or self._buffer:
            self._line(self._buffer + tail, events)
            self._buffer = ""
        self._line("", events)
        return events

    def _line(self, line: str, events: list[SSEEvent]) -> None:
        if not line:
            if self._has_data:
                events.append(SSEEvent("\n".join(self._data), self._event or "message", self._id))
            self._data = []
            self._event = ""
            self._has_data = False
            return
        if line.startswith(":"):
            return
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
