"""JSON as a model meant it: one value or several in a row, fences, trailing commas, Python literals.

    parse_lenient('{"a": 1,}')                # [{"a": 1}]
    decode_json_run(text, pos, loose=True)   # ([values], end) of the JSON starting at pos

Never NaN, Infinity or 1e999 (arguments must stay plain JSON); None when the text is hopeless.
"""

from __future__ import annotations

import ast
import json
import math
import re
import warnings
from functools import lru_cache
from typing import Any

_FENCE_OPEN = re.compile(r"\s*```[\w+.-]*[ \t]*\n?")


def decode_json_run(text: str, pos: int, loose: bool) -> tuple[list[Any], int] | None:
    """Decode the JSON value(s) starting at `pos` (after spaces and, loose, a fence).

    Decoding knows JSON strings, so a `</tool_call>` inside an argument does not end the block.
    Loose mode reads several values in a row (separated by spaces or commas).
    """
    fence = _FENCE_OPEN.match(text, pos) if loose else None
    pos = fence.end() if fence is not None else pos
    while pos < len(text) and text[pos].isspace():
        pos += 1
    if pos >= len(text) or text[pos] not in "{[":
        return None
    decoder = json_decoder(strict=not loose)
    values: list[Any] = []
    end = pos
    while True:
        try:
            value, end = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            break
        values.append(value)
        if not loose:
            break
        pos = end
        while pos < len(text) and (text[pos].isspace() or text[pos] == ","):
            pos += 1
        if pos >= len(text) or text[pos] != "{":
            break
    return (values, end) if values else None


def parse_lenient(raw: str) -> list[Any] | None:
    """Parse what a model meant as JSON: one value, or several in a row. None if hopeless."""
    text = _strip_fences(raw).strip()
    if not text:
        return None
    for candidate in (text, _drop_trailing_commas(text)):
        try:
            return [json_decoder(strict=False).decode(candidate)]
        except (ValueError, RecursionError):
            pass
    run = decode_json_run(text, 0, loose=True)
    if run is not None and not text[run[1] :].strip(" \t\r\n,"):
        return run[0]
    python = _python_literal(text)
    if python is not None:
        return [python]
    closed = _close_brackets(_drop_trailing_commas(text))
    if closed is not None:
        try:
            return [json_decoder(strict=False).decode(closed)]
        except (ValueError, RecursionError):
            python = _python_literal(closed)
            if python is not None:
                return [python]
    return None


@lru_cache(maxsize=2)
def json_decoder(strict: bool) -> json.JSONDecoder:
    """A decoder that refuses NaN, Infinity and 1e999: arguments must stay plain JSON."""
    return json.JSONDecoder(strict=strict, parse_constant=_no_constant, parse_float=_finite_float)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is out of range")
    return number


def _strip_fences(text: str) -> str:
    text = text.strip()
    if text.startswith("```"):
        newline = text.find("\n")
        text = text[newline + 1 :] if newline >= 0 else text[3:]
    if text.rstrip().endswith("```"):
        text = text.rstrip()[:-3]
    return text


def _drop_trailing_commas(text: str) -> str:
    """Remove commas that directly precede `}` or `]`, outside strings."""
    out: list[str] = []
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            escaped = char == "\\" and not escaped
            if char == '"' and not escaped:
                in_string = False
        elif char == '"':
            in_string = True
        elif char == ",":
            after = index + 1
            while after < len(text) and text[after].isspace():
                after += 1
            if after < len(text) and text[after] in "}]":
                continue
        out.append(char)
    return "".join(out)


def _close_brackets(text: str) -> str | None:
    """Close an unterminated string and the brackets left open (a reply cut off mid-call)."""
    stack: list[str] = []
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]" and (not stack or stack.pop() != char):
            return None
    if not stack and not in_string:
        return None
    tail = '"' if in_string else ""
    return text + tail + "".join(reversed(stack))


_LITERAL_NAMES: dict[str, Any] = {
    "true": True,
    "false": False,
    "null": None,
    "True": True,
    "False": False,
    "None": None,
}


def _python_literal(text: str) -> Any:
    """A Python-literal reading (single quotes, True/None, trailing commas); None if it is not one."""
    if len(text) > 1_000_000:
        return None
    try:
        # Model text like '\\<' would make the compiler warn on the user's stderr.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text, mode="eval")
        return _literal(tree.body)
    except Exception:  # untrusted model text: any failure means "not a literal"
        return None


def _literal(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool, type(None))):
        if isinstance(node.value, float) and not math.isfinite(node.value):
            raise ValueError("not a finite number")
        return node.value
    if isinstance(node, ast.Name) and node.id in _LITERAL_NAMES:
        return _LITERAL_NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _literal(node.operand)
        if isinstance(operand, (int, float)) and not isinstance(operand, bool):
            return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.Dict):
        result: dict[str, Any] = {}
        for key, item in zip(node.keys, node.values, strict=True):
            if key is None:
                raise ValueError("** in a literal")
            key_value = _literal(key)
            if not isinstance(key_value, str):
                raise ValueError("non-string key")
            result[key_value] = _literal(item)
        return result
    raise ValueError("not a literal")
