"""Scanning tool folders: what is registered, from where, and how edits and errors show up."""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentcore.errors import AgentError
from agentcore.tools.handlers import FileTool
from agentcore.tools.runner import ToolPool
from agentcore.tools.scan import scan
from agentcore.tools.toolset import ToolSet


def file_tool(tools: ToolSet, name: str) -> FileTool:
    handler = tools.handlers[name]
    assert isinstance(handler, FileTool)
    return handler


@pytest.fixture(scope="module")
def pool() -> Iterator[ToolPool]:
    pool = ToolPool()
    yield pool
    pool.close()


def write(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path


def call(pool: ToolPool, tools: Any, name: str, input: dict[str, Any] | None = None) -> Any:
    result = pool.run(file_tool(tools, name), input or {}, tool_call_id="call_1")
    return result["output"]["value"]


def test_public_tools_of_every_file_are_registered_by_name(tmp_path: Path, pool: ToolPool) -> None:
    write(
        tmp_path,
        "math_tools.py",
        """
        def _add(input):
            return input["a"] + input["b"]

        add = {"name": "add", "description": "Add two numbers",
               "input_schema": {"type": "object", "properties": {"a": {"type": "number"}}},
               "execute": _add, "timeout": 5, "category": "math"}
        calc = [{"name": "mul", "execute": lambda input: input["a"] * input["b"]},
                {"name": "neg", "execute": lambda input: -input["a"]}]
        pair = ({"name": "one", "execute": lambda input: 1},)
        _hidden = {"name": "hidden", "execute": lambda input: 0}
        not_tools = [1, 2]
        """,
    )
    write(
        tmp_path,
        "decorated.py",
        '''
        from agentcore.tools import tool

        @tool(timeout=2)
        def shout(text: str) -> str:
            """Say it loudly.

            Args:
                text: what to say.
            """
            return text.upper()
        ''',
    )
    write(tmp_path, "helpers.py", "def helper():\n    return 1\n")
    write(tmp_path, "test_math_tools.py", "def test_add():\n    assert True\n")
    tools = scan(str(tmp_path), pool=pool)

    assert sorted(tools) == ["add", "mul", "neg", "one", "shout"]
    assert tools.schema["add"] == {
        "name": "add",
        "description": "Add two numbers",
        "input_schema": {"type": "object", "properties": {"a": {"type": "number"}}},
        "category": "math",
        "source": "file",
    }
    assert tools.schema["shout"]["description"] == "Say it loudly."
    assert tools.schema["shout"]["input_schema"]["properties"]["text"] == {
        "type": "string",
        "description": "what to say.",
    }
    assert tools.schema["one"]["input_schema"] == {"type": "object", "properties": {}}
    handler = file_tool(tools, "add")
    assert isinstance(handler, FileTool)
    assert (handler.path, handler.folder, handler.timeout) == (
        os.path.realpath(tmp_path / "math_tools.py"),
        os.path.realpath(tmp_path),
        5.0,
    )
    assert file_tool(tools, "shout").timeout == 2.0
    assert call(pool, tools, "add", {"a": 2, "b": 3}) == 5
    assert call(pool, tools, "mul", {"a": 2, "b": 3}) == 6
    assert call(pool, tools, "shout", {"text": "hi"}) == "HI"


def test_dunder_all_limits_what_a_file_exports(tmp_path: Path, pool: ToolPool) -> None:
    write(
        tmp_path,
        "tools.py",
        """
        __all__ = ["shown"]
        shown = {"name": "shown", "execute": lambda input: 1}
        unlisted = {"name": "unlisted", "execute": lambda input: 2}
        """,
    )
    assert list(scan(tmp_path, pool=pool)) == ["shown"]


def test_a_tool_imported_from_a_sibling_is_registered_once_from_its_own_file(
    tmp_path: Path, pool: ToolPool
) -> None:
    # a_uses.py is imported first and pulls z_defines in by a plain sibling import.
    write(
        tmp_path,
        "a_uses.py",
        """
        from z_defines import shared, decorated
        again = [shared]
        """,
    )
    write(
        tmp_path,
        "z_defines.py",
        '''
        from agentcore.tools import tool

        shared = {"name": "shared", "execute": lambda input: "from z"}

        @tool
        def decorated() -> str:
            """Defined here."""
            return "decorated"
        ''',
    )
    tools = scan(tmp_path, pool=pool)
    assert sorted(tools) == ["decorated", "shared"]
    assert file_tool(tools, "shared").path.endswith("z_defines.py")
    assert file_tool(tools, "decorated").path.endswith("z_defines.py")
    assert call(pool, tools, "shared") == "from z"


@pytest.mark.parametrize(
    ("source", "cause"),
    [
        ("def broken(:\n", "SyntaxError"),
        ("import surely_not_installed_package_xyz\n", "No module named 'surely_not_installed_package_xyz'"),
        ("raise RuntimeError('refusing to load')\n", "RuntimeError: refusing to load"),
    ],
)
def test_a_file_that_fails_to_import_fails_the_scan_naming_it(
    tmp_path: Path, pool: ToolPool, source: str, cause: str
) -> None:
    write(tmp_path, "good.py", "ok = {'name': 'ok', 'execute': lambda input: 1}\n")
    bad = write(tmp_path, "sub/bad.py", source)
    with pytest.raises(AgentError) as caught:
        scan(tmp_path, pool=pool)
    assert caught.value.kind == "tool"
    assert os.path.realpath(bad) in caught.value.message and cause in caught.value.message


def test_a_malformed_tool_fails_the_scan(tmp_path: Path, pool: ToolPool) -> None:
    write(tmp_path, "odd.py", "odd = {'name': 'odd', 'execute': lambda input: 1, 'timeout': -1}\n")
    with pytest.raises(AgentError, match=r"odd\.py.*timeout") as caught:
        scan(tmp_path, pool=pool)
    assert caught.value.kind == "tool"


def test_a_missing_folder_fails_the_scan(tmp_path: Path) -> None:
    with pytest.raises(AgentError, match="not found") as caught:
        scan(tmp_path / "nope")
    assert caught.value.kind == "tool"


def test_an_empty_folder_gives_an_empty_set(tmp_path: Path) -> None:
    write(tmp_path, "notes.txt", "not python")
    assert len(scan(tmp_path)) == 0


def test_later_folders_override_earlier_ones(tmp_path: Path, pool: ToolPool) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write(
        first,
        "t.py",
        "same = {'name': 'same', 'execute': lambda input: 'first'}\n"
        "only = {'name': 'only', 'execute': lambda input: 'only'}\n",
    )
    write(second, "t.py", "same = {'name': 'same', 'execute': lambda input: 'second'}\n")
    tools = scan(first, second, pool=pool)
    assert sorted(tools) == ["only", "same"]
    assert call(pool, tools, "same") == "second"
    assert call(pool, scan(second, first, pool=pool), "same") == "first"


def test_sibling_modules_of_the_same_name_in_two_folders_stay_apart(tmp_path: Path) -> None:
    own = ToolPool()
    for name in ("A", "B"):
        write(tmp_path / name, "utils.py", f"VALUE = {name!r}\n")
        write(
            tmp_path / name,
            f"tool_{name}.py",
            f"""
            import utils

            def _value(input):
                import utils as again
                return [utils.VALUE, again.VALUE]

            tool_{name} = {{"name": "tool_{name}", "execute": _value}}
            """,
        )
    try:
        tools = scan(tmp_path / "A", tmp_path / "B", pool=own)
        assert call(own, tools, "tool_A") == ["A", "A"]
        assert call(own, tools, "tool_B") == ["B", "B"]
        assert call(own, tools, "tool_A") == ["A", "A"]
    finally:
        own.close()


def test_a_tool_in_a_subfolder_can_import_its_siblings(tmp_path: Path, pool: ToolPool) -> None:
    write(tmp_path, "deep/er/helper_mod.py", "def greet():\n    return 'hello'\n")
    write(
        tmp_path,
        "deep/er/greeter.py",
        """
        from helper_mod import greet
        greeter = {"name": "greeter", "execute": lambda input: greet()}
        """,
    )
    assert call(pool, scan(tmp_path, pool=pool), "greeter") == "hello"


def test_scanning_imports_in_a_tool_process_not_here(tmp_path: Path, pool: ToolPool) -> None:
    marker = tmp_path / "imported_by.txt"
    write(
        tmp_path / "tools",
        "where.py",
        f"""
        import os
        with open({str(marker)!r}, "a") as f:
            f.write(str(os.getpid()) + "\\n")
        where = {{"name": "where", "execute": lambda input: os.getpid()}}
        """,
    )
    tools = scan(tmp_path / "tools", pool=pool)
    pids = {int(line) for line in marker.read_text().split()}
    assert os.getpid() not in pids and len(pids) == 1
    assert not any(
        getattr(m, "__file__", None) == file_tool(tools, "where").path for m in list(sys.modules.values())
    )
    # The scanning process ended with the scan (API.md §Details "File tools"); calls get their own.
    (scan_pid,) = pids
    assert not os.path.exists(f"/proc/{scan_pid}") and call(pool, tools, "where") != scan_pid


def test_rescanning_after_an_edit_picks_it_up_in_warm_processes(tmp_path: Path, pool: ToolPool) -> None:
    helper = write(tmp_path, "version_helper.py", "VERSION = 'v1'\n")
    tool_file = write(
        tmp_path,
        "versioned.py",
        """
        import os
        from version_helper import VERSION
        versioned = {"name": "versioned", "description": "one",
                     "execute": lambda input: [VERSION, os.getpid()]}
        """,
    )
    before = scan(tmp_path, pool=pool)
    version, pid = call(pool, before, "versioned")
    assert version == "v1"

    # Same sizes, and an mtime only nanoseconds later: the stamp must still see the edits.
    stat = helper.stat()
    helper.write_text("VERSION = 'v2'\n")
    os.utime(helper, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    tool_stat = tool_file.stat()
    tool_file.write_text(tool_file.read_text().replace('"one"', '"two"'))
    os.utime(tool_file, ns=(tool_stat.st_atime_ns, tool_stat.st_mtime_ns + 1))

    after = scan(tmp_path, pool=pool)
    assert after.schema["versioned"]["description"] == "two"
    assert call(pool, after, "versioned") == ["v2", pid]
    assert file_tool(after, "versioned").version != file_tool(before, "versioned").version
