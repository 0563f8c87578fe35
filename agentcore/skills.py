"""Skills: folders of know-how in the agentskills.io `SKILL.md` convention.

    from agentcore import Agent, skills

    found = skills.load("./skills")                     # ./skills/<name>/SKILL.md ...
    agent = Agent(config={..., "system": "You are helpful.\\n\\n" + found.system()}, tools=[found.tool()])

The system prompt lists each skill's name and description; the model reads a skill's body (and
the other files of its folder) with the `skill` tool when a task needs it, so the prompt stays
small however many skills there are. Front matter is read by a small parser of the subset the
convention uses (`key: value`, quoted strings, `>`/`|` blocks, a `metadata` mapping): no YAML
dependency.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import AgentError

__all__ = ["Skill", "Skills", "load"]

SKILL_FILE = "SKILL.md"
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_KEY = re.compile(r"([A-Za-z0-9_-]+):(?:\s+(.*))?$")


@dataclass(frozen=True)
class Skill:
    """One skill.

    Attributes:
        name: the skill's name (= its folder's name).
        description: what it does and when to use it (what the system prompt lists).
        path: the skill's folder (absolute).
        body: the Markdown after the front matter.
        metadata: the `metadata` mapping of the front matter (str → str).
        fields: every front-matter field as read (`license`, `compatibility`, `allowed-tools`, ...).
    """

    name: str
    description: str
    path: Path
    body: str
    metadata: Mapping[str, str] = field(default_factory=dict)
    fields: Mapping[str, Any] = field(default_factory=dict)

    def read(self, file: str) -> str:
        """The text of `file`, a path relative to the skill's folder that stays inside it.

        Raises:
            AgentError: kind "tool" for absolute paths, `..`, symlinks out of the folder, missing
                or non-text files.
        """
        return _read_inside(self.path, file, self.name)


class Skills:
    """The skills found by `load()`, by name; iterating gives the Skill objects in name order."""

    def __init__(self, skills: Mapping[str, Skill]) -> None:
        self._skills = dict(sorted(skills.items()))

    def __getitem__(self, name: str) -> Skill:
        return self._skills[name]

    def __contains__(self, name: object) -> bool:
        return name in self._skills

    def __iter__(self) -> Iterator[Skill]:
        return iter(self._skills.values())

    def __len__(self) -> int:
        return len(self._skills)

    def __repr__(self) -> str:
        return f"Skills({list(self._skills)!r})"

    @property
    def names(self) -> list[str]:
        return list(self._skills)

    def system(self) -> str:
        """The listing to put in the system prompt ("" when there are no skills)."""
        if not self._skills:
            return ""
        entries = "\n".join(
            f"<skill>\n<name>{s.name}</name>\n<description>{s.description}</description>\n</skill>"
            for s in self
        )
        return (
            "You have skills: instructions for particular tasks. When a task matches a skill's "
            'description, first read it with the `skill` tool (skill(name="...")), then follow it; '
            'a skill may point to other files in its folder: read them with skill(name="...", file="...").\n'
            f"<available_skills>\n{entries}\n</available_skills>"
        )

    def tool(self) -> dict[str, Any]:
        """A memory tool `skill(name, file=None)`: a skill's body, or one of the files of its folder."""
        return {
            "name": "skill",
            "description": (
                "Read a skill: its instructions (name only), or a file of its folder "
                "(file = a path relative to the skill's folder)."
            ),
            "input_schema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "the skill's name", **self._enum()},
                    "file": {"type": ["string", "null"], "description": "a file of the skill's folder"},
                },
                "required": ["name"],
                "additionalProperties": False,
            },
            "execute": self._run_tool,
        }

    def _enum(self) -> dict[str, Any]:
        return {"enum": self.names} if self._skills else {}  # an empty enum would be an invalid schema

    def _run_tool(self, input: dict[str, Any]) -> str:
        name = input.get("name")
        skill = self._skills.get(name) if isinstance(name, str) else None
        if skill is None:
            known = ", ".join(self.names) or "(none)"
            raise AgentError(f"no skill named {name!r}; the skills are: {known}", kind="tool")
        file = input.get("file")
        return skill.body if file in (None, "") else skill.read(str(file))


def load(*dirs: str | os.PathLike[str]) -> Skills:
    """The skills in `dirs`: each is a skill folder (holding SKILL.md) or a folder of skill folders.

    A later folder's skill replaces an earlier one of the same name.

    Raises:
        AgentError: kind "config" naming the folder or SKILL.md file and what is wrong with it.
    """
    found: dict[str, Skill] = {}
    for folder in dirs:
        root = Path(folder).resolve()
        if not root.is_dir():
            raise AgentError(f"skills folder {str(folder)!r} does not exist", kind="config")
        candidates = (
            [root] if (root / SKILL_FILE).is_file() else sorted(p for p in root.iterdir() if p.is_dir())
        )
        for candidate in candidates:
            if (candidate / SKILL_FILE).is_file():
                skill = _load_skill(candidate)
                found[skill.name] = skill
    return Skills(found)


# ---------------------------------------------------------------- one SKILL.md


def _load_skill(folder: Path) -> Skill:
    path = folder / SKILL_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AgentError(f"{path}: cannot be read ({exc})", kind="config") from exc
    front, body = _split_front_matter(text, path)
    fields = _parse_front_matter(front, path)
    name = _check_name(fields.get("name"), folder.name, path)
    description = _check_description(fields.get("description"), path)
    compatibility = fields.get("compatibility")
    if compatibility is not None and (
        not isinstance(compatibility, str) or len(compatibility) > MAX_COMPATIBILITY
    ):
        raise AgentError(
            f"{path}: compatibility must be a string of at most {MAX_COMPATIBILITY} characters", kind="config"
        )
    metadata = fields.get("metadata", {})
    if not isinstance(metadata, dict):
        raise AgentError(f"{path}: metadata must be a mapping of indented 'key: value' lines", kind="config")
    return Skill(name, description, folder, body, metadata, fields)


def _split_front_matter(text: str, path: Path) -> tuple[list[str], str]:
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise AgentError(
            f"{path}: missing front matter (the file must start with a '---' line)", kind="config"
        )
    for index, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return lines[1:index], "\n".join(lines[index + 1 :]).strip("\n") + "\n"
    raise AgentError(f"{path}: the front matter has no closing '---' line", kind="config")


def _parse_front_matter(lines: list[str], path: Path) -> dict[str, Any]:
    """The YAML subset of the convention: `key: value`, quotes, `>`/`|` blocks, one level of mapping."""
    fields: dict[str, Any] = {}
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{path}, front matter line {index}"
        if line[0] in " \t":
            raise AgentError(f"{where}: unexpected indentation: {line.strip()!r}", kind="config")
        match = _KEY.match(line.rstrip())
        if match is None:
            raise AgentError(f"{where}: expected 'key: value', got {line.strip()!r}", kind="config")
        key, raw = match.group(1), (match.group(2) or "").strip()
        if key in fields:
            raise AgentError(f"{where}: {key!r} is given twice", kind="config")
        block, index = _indented_block(lines, index)
        if raw in (">", "|", ">-", "|-", ">+", "|+"):
            fields[key] = _block_scalar(block, folded=raw.startswith(">"))
        elif raw == "" and block:
            fields[key] = _mapping(block, f"{path}, {key!r}")
        elif block:
            raise AgentError(f"{where}: {key!r} has a value and indented lines after it", kind="config")
        else:
            fields[key] = _scalar(raw, where)
    return fields


def _indented_block(lines: list[str], index: int) -> tuple[list[str], int]:
    block: list[str] = []
    while index < len(lines) and (not lines[index].strip() or lines[index][0] in " \t"):
        block.append(lines[index])
        index += 1
    while block and not block[-1].strip():
        block.pop()
    return block, index


def _block_scalar(block: list[str], *, folded: bool) -> str:
    texts = [line.strip() for line in block]
    if not folded:
        return "\n".join(texts)
    paragraphs = "\n".join(texts).split("\n\n")  # folded: lines join with spaces, blank lines stay breaks
    return "\n".join(" ".join(p.split("\n")) for p in paragraphs)


def _mapping(block: list[str], where: str) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for line in block:
        if not line.strip() or line.strip().startswith("#"):
            continue
        match = _KEY.match(line.strip())
        if match is None or not match.group(2):
            raise AgentError(
                f"{where}: expected indented 'key: value' lines, got {line.strip()!r}", kind="config"
            )
        mapping[match.group(1)] = str(_scalar(match.group(2).strip(), where))
    return mapping


def _scalar(raw: str, where: str) -> Any:
    if raw[:1] in ('"', "'"):
        quote = raw[0]
        if len(raw) < 2 or not raw.endswith(quote):
            raise AgentError(f"{where}: unterminated quoted string {raw!r}", kind="config")
        inner = raw[1:-1]
        if quote == "'":
            return inner.replace("''", "'")
        return _unescape(inner, where)
    if " #" in raw:  # a trailing comment
        raw = raw.split(" #", 1)[0].rstrip()
    return raw


_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "n": "\n", "t": "\t", "r": "\r", "0": "\0"}


def _unescape(text: str, where: str) -> str:
    out: list[str] = []
    chars = iter(text)
    for char in chars:
        if char != "\\":
            out.append(char)
            continue
        code = next(chars, "")
        if code not in _ESCAPES:
            raise AgentError(f"{where}: unknown escape '\\{code}' in a quoted string", kind="config")
        out.append(_ESCAPES[code])
    return "".join(out)


def _check_name(name: Any, folder: str, path: Path) -> str:
    if not isinstance(name, str) or not name:
        raise AgentError(f"{path}: 'name' is required", kind="config")
    if len(name) > MAX_NAME:
        raise AgentError(f"{path}: name {name!r} is longer than {MAX_NAME} characters", kind="config")
    if not _NAME.fullmatch(name):
        raise AgentError(
            f"{path}: name {name!r} must be lowercase letters, digits and single hyphens "
            "(no leading, trailing or double hyphen)",
            kind="config",
        )
    if name != folder:
        raise AgentError(f"{path}: name {name!r} must equal its folder's name {folder!r}", kind="config")
    return name


def _check_description(description: Any, path: Path) -> str:
    if not isinstance(description, str) or not description.strip():
        raise AgentError(f"{path}: 'description' is required", kind="config")
    if len(description) > MAX_DESCRIPTION:
        raise AgentError(
            f"{path}: description has {len(description)} characters; at most {MAX_DESCRIPTION} are allowed",
            kind="config",
        )
    return description.strip()


# ---------------------------------------------------------------- confined reads


def _read_inside(folder: Path, file: str, skill: str) -> str:
    relative = Path(file)
    if relative.is_absolute() or file.startswith(("/", "\\")):
        raise AgentError(
            f"skill {skill!r}: {file!r} is an absolute path; give a path inside its folder", kind="tool"
        )
    if ".." in relative.parts:
        raise AgentError(
            f"skill {skill!r}: {file!r} leaves the skill's folder ('..' is not allowed)", kind="tool"
        )
    root = os.path.realpath(folder)
    target = os.path.realpath(root / relative)
    if os.path.commonpath([root, target]) != root:
        raise AgentError(f"skill {skill!r}: {file!r} points outside the skill's folder", kind="tool")
    if not os.path.isfile(target):
        raise AgentError(
            f"skill {skill!r} has no file {file!r}; its files: {_files(Path(root))}", kind="tool"
        )
    try:
        return Path(target).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise AgentError(f"skill {skill!r}: {file!r} is not a UTF-8 text file", kind="tool") from exc


def _files(root: Path) -> str:
    names = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    return ", ".join(names[:50]) or "(none)"
