"""What `import agentcore` loads: nothing but itself; the public names load their modules on first use.

Issue 13 (import time ≤ 30 ms): every public name of `agentcore/__init__.py` is lazy, and the
agent and tools avoid standard-library modules that are slow to import and not needed to build an
agent (`uuid` pulls in `platform`; `decimal`, `datetime`, `pathlib` only to recognise values of
their types). Each run is a fresh interpreter without site processing (`-I -S`), so that nothing
the site hooks of this machine load (certifi, an editable-install finder) hides an import.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def loaded_by(statement: str, before: str = "") -> list[str]:
    """Modules that `statement` adds to sys.modules in a fresh interpreter (after `before`)."""
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(ROOT)!r})
        {before}
        already = set(sys.modules)
        {statement}
        print(json.dumps(sorted(set(sys.modules) - already)))
    """)
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT.parent
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout)
    return loaded


def test_import_agentcore_loads_only_the_package_itself() -> None:
    assert loaded_by("import agentcore") == ["agentcore"]


# Needed by nothing until a send (requests, jsonschema, the loop and the adapters) or never needed
# to build an agent (uuid → platform, tempfile, decimal, datetime, pathlib, asyncio).
NOT_FOR_AN_AGENT = [
    "requests",
    "urllib3",
    "jsonschema",
    "uuid",
    "platform",
    "tempfile",
    "decimal",
    "datetime",
    "pathlib",
    "asyncio",
    "agentcore.loop",
    "agentcore.llm",
    "agentcore.protocols",
]


def test_the_public_names_load_what_building_an_agent_needs_and_no_more() -> None:
    loaded = loaded_by("from agentcore import Agent, tool, ToolContext, AgentError, SendResult, Usage")
    assert "agentcore.agent" in loaded and "agentcore.tools.decorator" in loaded
    assert [name for name in NOT_FOR_AN_AGENT if name in loaded] == []


@pytest.mark.parametrize("name", ["Agent", "tool", "ToolContext", "AgentError", "SendResult", "Usage"])
def test_each_public_name_is_the_object_of_its_module(name: str) -> None:
    import agentcore
    from agentcore import agent, errors, result, tools, usage

    home = {"Agent": agent, "tool": tools, "ToolContext": tools, "AgentError": errors}
    home |= {"SendResult": result, "Usage": usage}
    assert getattr(agentcore, name) is getattr(home[name], name)
    assert name in dir(agentcore)


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    import agentcore

    with pytest.raises(AttributeError, match="has no attribute 'Agnet'"):
        agentcore.Agnet  # noqa: B018


def test_tool_values_of_lazily_recognised_types_still_become_json() -> None:
    """`to_json` looks decimal/datetime/pathlib/uuid types up only once loaded; values still convert."""
    code = """
        import json, sys
        from agentcore.tools.shape import to_json
        assert "decimal" not in sys.modules and "uuid" not in sys.modules
        import datetime, decimal, pathlib, uuid
        value = [decimal.Decimal("1.5"), datetime.date(2024, 1, 2), pathlib.PurePosixPath("/a/b"),
                 uuid.UUID(int=1), decimal.Decimal("NaN")]
        print(json.dumps(to_json(value)))
    """
    prelude = f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n"
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT.parent,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        1.5,
        "2024-01-02",
        "/a/b",
        "00000000-0000-0000-0000-000000000001",
        None,
    ]


def test_random_hex_has_the_form_of_a_uuid4_hex() -> None:
    import uuid

    from agentcore._utils.ids import random_hex

    ids = {random_hex() for _ in range(200)}
    assert len(ids) == 200
    for made in ids:
        parsed = uuid.UUID(hex=made)
        assert parsed.hex == made and parsed.version == 4 and parsed.variant == uuid.RFC_4122
