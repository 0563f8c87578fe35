"""docs/INTERNALS.md's layout names every module of the package, and nothing that is gone.

The module map once lagged the code (`FileTool` "filled in by the file-tools issue", `run_call`
"used by the loop" long after neither was true); a map that must list each file is read each
time a file is added.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "agentcore"
_ENTRY = re.compile(r"^  (?P<path>[\w/.]+\.py)(?P<rest>(?: / [\w.]+\.py)*)(?:\s|$)")


def listed_modules(text: str) -> set[str]:
    """Package-relative paths named by the layout block: `  dir/name.py  what it is`.

    `  a/x.py / y.py / z.py` names siblings; comment lines (`  # ...`) and continuation lines
    (deeper indentation) name nothing.
    """
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    found: set[str] = set()
    for line in block.splitlines():
        match = _ENTRY.match(line)
        if match is None:
            continue
        path = match.group("path")
        found.add(path)
        folder = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
        found.update(folder + sibling for sibling in match.group("rest").split(" / ") if sibling)
    return found


def package_modules() -> set[str]:
    return {
        str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts
    }


def test_the_layout_names_every_module_and_only_modules_that_exist() -> None:
    listed = listed_modules((ROOT / "docs" / "INTERNALS.md").read_text(encoding="utf-8"))
    modules = package_modules()
    assert sorted(modules - listed) == [], "modules docs/INTERNALS.md does not list"
    assert sorted(listed - modules) == [], "paths docs/INTERNALS.md lists that do not exist"


def test_the_layout_reader_understands_siblings_and_skips_prose() -> None:
    text = (
        "## Layout\n\n```\nagentcore/\n  # a comment naming x.py\n  a.py               what\n"
        "                         continued, see b.py\n  p/c.py / d.py      two\n```\n"
    )
    assert listed_modules(text) == {"a.py", "p/c.py", "p/d.py"}
