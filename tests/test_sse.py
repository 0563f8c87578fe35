"""The server-sent-events parser follows the WHATWG rules, however the bytes are chunked."""

from __future__ import annotations

import pytest

from agentcore._utils.sse import SSEEvent, SSEParser


def feed_all(chunks: list[bytes | str], *, flush: bool = True) -> list[SSEEvent]:
    parser = SSEParser()
    events: list[SSEEvent] = []
    for chunk in chunks:
        events += parser.feed(chunk)
    if flush:
        events += parser.flush()
    return events


def byte_by_byte(text: str) -> list[bytes | str]:
    raw = text.encode("utf-8")
    return [raw[i : i + 1] for i in range(len(raw))]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_every_line_ending_dispatches_events(newline: str) -> None:
    stream = f"data: one{newline}{newline}data: two{newline}{newline}"
    assert [e.data for e in feed_all([stream], flush=False)] == ["one", "two"]


def test_mixed_line_endings_in_one_stream() -> None:
    stream = "data: a\r\n\r\ndata: b\n\ndata: c\r\r"
    assert [e.data for e in feed_all([stream], flush=False)] == ["a", "b", "c"]


def test_cr_at_chunk_end_pairs_with_lf_at_next_chunk_start() -> None:
    """A CRLF split across chunks is one line ending, not a line ending plus a blank line."""
    events = feed_all([b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"], flush=False)
    assert [e.data for e in events] == ["a\nb"]


def test_cr_at_chunk_end_alone_still_ends_the_line() -> None:
    events = feed_all([b"data: a\r", b"\r", b"data: b\r", b"\r"], flush=False)
    assert [e.data for e in events] == ["a", "b"]


def test_comments_are_ignored() -> None:
    stream = ": keep-alive\n\n:another\ndata: x\n: inside\n\n"
    assert feed_all([stream], flush=False) == [SSEEvent("x")]


def test_multi_line_data_joins_with_newline() -> None:
    assert feed_all(["data: first\ndata: second\ndata:third\n\n"])[0].data == "first\nsecond\nthird"


def test_only_one_space_after_the_colon_is_stripped() -> None:
    events = feed_all(["data:  two spaces\n\ndata:none\n\n"], flush=False)
    assert [e.data for e in events] == [" two spaces", "none"]


def test_event_name_and_id_are_read_and_event_name_resets() -> None:
    events = feed_all(["event: ping\nid: 7\ndata: {}\n\ndata: next\n\n"], flush=False)
    assert events == [SSEEvent("{}", "ping", "7"), SSEEvent("next", "message", "7")]


def test_blank_line_without_data_dispatches_nothing() -> None:
    assert feed_all(["event: ping\n\n\n\n"], flush=False) == []


def test_empty_data_field_dispatches_an_empty_event() -> None:
    assert feed_all(["data\n\n"], flush=False) == [SSEEvent("")]


def test_fed_byte_by_byte_gives_the_same_events() -> None:
    stream = 'event: delta\r\ndata: {"text": "héllo 世界"}\r\n\r\n: comment\ndata: [DONE]\n\n'
    whole = feed_all([stream.encode("utf-8")], flush=False)
    assert feed_all(byte_by_byte(stream), flush=False) == whole
    assert [e.data for e in whole] == ['{"text": "héllo 世界"}', "[DONE]"]


def test_utf8_split_across_chunks_is_decoded_whole() -> None:
    raw = "data: 世界\n\n".encode()
    cut = raw.index("世".encode()) + 1
    assert feed_all([raw[:cut], raw[cut:]], flush=False) == [SSEEvent("世界")]


def test_flush_dispatches_a_final_event_without_its_blank_line() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: last") == []
    assert parser.flush() == [SSEEvent("last")]


def test_flush_after_a_complete_stream_adds_nothing() -> None:
    parser = SSEParser()
    assert parser.feed("data: a\n\n") == [SSEEvent("a")]
    assert parser.flush() == []


def test_str_and_bytes_chunks_mix() -> None:
    assert feed_all(["data: a", b"b\n", "\n"], flush=False) == [SSEEvent("ab")]
