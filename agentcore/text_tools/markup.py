"""Where a reply holds call markup: the blocks in reading order, and the text left around them.

    blocks, cut = scan(text, spec, loose=True)     # cut: where an invented <tool_result> begins
    remaining_text(text, blocks, cut)              # the reply without the blocks

Strict mode knows only `<tool_call>...</tool_call>`; loose mode also `<tool-call>`, `<tool_calls>`,
unclosed blocks and Roo-style `<read_file>...</read_file>` for tools of the spec. A scan stays
linear in the reply's length, however many openers are left unclosed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .lenient import decode_json_run

if TYPE_CHECKING:
    from .manual import TextToolSpec


# Markup recognised around calls. Loose mode also takes `<tool-call>` / `<tool_calls>`.
_STRICT_OPEN = r"<tool_call>"


_LOOSE_OPEN = r"<tool[_-]?calls?(?=[\s>/])[^<>]*>"


_STRICT_CLOSE = re.compile(r"</tool_call>")


_LOOSE_CLOSE = re.compile(r"</tool[_-]?calls?\s*>", re.IGNORECASE)


# A model that writes its own result is inventing it; everything from there on is dropped.
_CUT = r"<tool[_-]?(?:results?|responses?|outputs?)(?![\w-])"


_FENCE_TAIL = re.compile(r"```[\w+.-]*[ \t]*\n?\s*$")


_FENCE_HEAD = re.compile(r"^\s*```[ \t]*(?=\n|$)")


_NAME_ATTR = re.compile(r"""\bname\s*=\s*["']([^"']+)["']""")


@lru_cache(maxsize=64)
def _scanner(names: tuple[str, ...], loose: bool) -> re.Pattern[str]:
    """One pattern finding the next call opener, invented result, or (loose) XML-style call."""
    branches = [f"(?P<call>{_LOOSE_OPEN if loose else _STRICT_OPEN})", f"(?P<cut>{_CUT})"]
    if loose and names:
        alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
        branches.append(f"(?P<xml><(?P<tag>{alternatives})(?=[\\s>])[^<>]*>)")
    return re.compile("|".join(branches), 0 if not loose else re.IGNORECASE)


@dataclass
class Block:
    """One piece of call markup found in the reply."""

    start: int
    end: int
    raw: str
    values: list[Any] | None = None
    name_hint: str = ""
    xml_tool: str = ""
    closed: bool = True


class _Finder:
    """Pattern searches over one reply, memoised per pattern.

    Many unclosed openers would otherwise each search to the end of the text for a closing
    tag (quadratic); reusing the last answer keeps a scan linear.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._last: dict[re.Pattern[str], tuple[int, re.Match[str] | None]] = {}

    def search(self, pattern: re.Pattern[str], pos: int) -> re.Match[str] | None:
        last = self._last.get(pattern)
        if last is not None:
            searched_from, found = last
            if searched_from <= pos and (found is None or found.start() >= pos):
                return found
        found = pattern.search(self.text, pos)
        self._last[pattern] = (pos, found)
        return found


def scan(text: str, spec: TextToolSpec, loose: bool) -> tuple[list[Block], int]:
    """Find the call blocks in reading order, and where the text is cut (len(text) if not)."""
    scanner = _scanner(tuple(spec.tools), loose)
    finder = _Finder(text)
    blocks: list[Block] = []
    pos = 0
    while True:
        match = finder.search(scanner, pos)
        if match is None:
            return blocks, len(text)
        if match.group("cut") is not None:
            return blocks, match.start()
        block: Block | None
        if match.group("call") is not None:
            block = _call_block(finder, match, loose)
        else:
            block = _xml_block(finder, match, scanner, spec)
        if block is None:
            pos = match.end()
            continue
        blocks.append(block)
        pos = max(block.end, match.end())


def _call_block(finder: _Finder, match: re.Match[str], loose: bool) -> Block:
    text = finder.text
    start, body_start = match.start(), match.end()
    close = _LOOSE_CLOSE if loose else _STRICT_CLOSE
    # Inside a call block, XML-style tool tags are part of the body: only calls and cuts end it.
    following = _scanner((), loose)
    hint = _attr_name(match.group(0)) if loose else ""
    decoded = decode_json_run(text, body_start, loose)
    if decoded is not None:
        values, json_end = decoded
        closing = close.match(text, _skip_fence_and_space(text, json_end))
        if closing is not None:
            raw = text[body_start : closing.start()].strip()
            return Block(start, closing.end(), raw, values, hint)
        if loose:
            _, block_end = _boundary(finder, json_end, close, following)
            if block_end is not None:
                # Junk between the JSON and the closing tag: the JSON is the call.
                return Block(start, block_end, text[body_start:json_end].strip(), values, hint)
            # Unclosed: the call is the JSON; whatever follows stays text.
            end = _skip_fence_and_space(text, json_end)
            return Block(start, end, text[body_start:json_end].strip(), values, hint)
    body_end, block_end = _boundary(finder, body_start, close, following)
    raw = text[body_start:body_end].strip()
    if block_end is None:
        return Block(start, body_end, raw, None, hint, closed=False)
    return Block(start, block_end, raw, None, hint)


def _boundary(
    finder: _Finder, pos: int, close: re.Pattern[str], following: re.Pattern[str]
) -> tuple[int, int | None]:
    """Where a block's body ends: (body end, block end after the closing tag or None if unclosed).

    An unclosed block runs to the next match of `following` (an opener or an invented
    result), or to the end of the text.
    """
    closing = finder.search(close, pos)
    after = finder.search(following, pos)
    if closing is not None and (after is None or closing.start() <= after.start()):
        return closing.start(), closing.end()
    return (after.start() if after is not None else len(finder.text)), None


@lru_cache(maxsize=256)
def _xml_closer(tag: str) -> re.Pattern[str]:
    return re.compile(f"</{re.escape(tag)}\\s*>", re.IGNORECASE)


def _xml_block(
    finder: _Finder, match: re.Match[str], scanner: re.Pattern[str], spec: TextToolSpec
) -> Block | None:
    """A Roo-style `<read_file><path>a</path></read_file>` call of a known tool."""
    tag = match.group("tag")
    name = next((n for n in spec.tools if n.lower() == tag.lower()), tag)
    body_start = match.end()
    body_end, block_end = _boundary(finder, body_start, _xml_closer(tag.lower()), scanner)
    body = finder.text[body_start:body_end]
    if block_end is None and not re.match(r"\s*(?:<[A-Za-z_][\w.-]*\s*>|\{)", body):
        # An unclosed tag followed by prose is a mention of the tool, not a call.
        return None
    end = block_end if block_end is not None else body_end
    return Block(match.start(), end, body.strip(), xml_tool=name)


def _attr_name(opener: str) -> str:
    found = _NAME_ATTR.search(opener)
    return found.group(1) if found else ""


def _skip_fence_and_space(text: str, pos: int) -> int:
    fence = _FENCE_HEAD.match(text, pos)
    if fence is not None:
        pos = fence.end()
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def remaining_text(text: str, blocks: list[Block], cut: int) -> str:
    """The reply without the blocks (and without a fence that only wrapped them)."""
    pieces: list[str] = []
    pos = 0
    for block in blocks:
        between = text[pos : block.start]
        # Only spaces between two blocks: one removed run, not a separate piece.
        if pieces and not between.strip():
            pos = block.end
            continue
        pieces.append(between)
        pos = block.end
    pieces.append(text[pos:cut] if pos <= cut else "")
    if not blocks:
        return text[:cut].rstrip()
    for index in range(len(pieces) - 1):
        # A fence right before the calls opens a block only if the piece has an odd count.
        opens = pieces[index].count("```") % 2 == 1
        if opens and _FENCE_TAIL.search(pieces[index]) and _FENCE_HEAD.match(pieces[index + 1]):
            pieces[index] = _FENCE_TAIL.sub("", pieces[index])
            pieces[index + 1] = _FENCE_HEAD.sub("", pieces[index + 1], count=1)
    cleaned = [_LOOSE_CLOSE.sub("", piece) for piece in pieces]
    kept = [_trim_edges(piece) for piece in cleaned]
    return "\n\n".join(piece for piece in kept if piece.strip())


def _trim_edges(piece: str) -> str:
    """Drop the blank lines and spaces a removed block leaves; keep the next line's indentation."""
    leading_lines = re.match(r"\s*\n", piece)
    piece = piece[leading_lines.end() :] if leading_lines else piece.lstrip(" \t")
    return piece.rstrip()
