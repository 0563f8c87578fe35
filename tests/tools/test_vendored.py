"""A copy of the package under another name runs file tools, never importing `agentcore` itself.

The parent process cannot import `agentcore` at all; a tool process proves it never did.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "agentcore"

TOOL_FILE = '''
import os, sys
from myapp._vendor.agentcore.tools import ToolContext, tool


def _double(input):
    return {"doubled": input["x"] * 2,
            "agentcore_loaded": sorted(name for name in sys.modules if name.split(".")[0] == "agentcore"),
            "pid": os.getpid()}


double = {"name": "double", "execute": _double,
          "input_schema": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}


@tool
def greet(name: str, ctx: ToolContext) -> str:
    """Greet someone."""
    print("greeting", name)
    return f"hello {name} from {ctx.tool_name}"
'''

SCRIPT = """
import importlib, json, os, sys

sys.modules["agentcore"] = None  # any import of the package by its own name fails
sys.path.insert(0, {root!r})
report = {{}}
for package in ("myapp._vendor.agentcore", "acc_vendored_core"):
    tools = importlib.import_module(package + ".tools")
    found = tools.scan({folder!r})
    output = []
    report[package] = {{
        "names": sorted(found),
        "double": tools.execute("double", {{"x": 21}}, found),
        "greet": tools.execute("greet", {{"name": "Ann"}}, found, on_output=output.append),
        "streams": [(p["stream"], p["data"]) for p in output],
        "parent_pid": os.getpid(),
    }}
print(json.dumps(report))
"""


def test_a_vendored_copy_runs_file_tools(tmp_path: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__")
    (tmp_path / "myapp" / "_vendor").mkdir(parents=True)
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "_vendor" / "__init__.py").write_text("")
    shutil.copytree(PACKAGE, tmp_path / "myapp" / "_vendor" / "agentcore", ignore=ignore)
    shutil.copytree(PACKAGE, tmp_path / "acc_vendored_core", ignore=ignore)
    folder = tmp_path / "tools"
    folder.mkdir()
    (folder / "vend.py").write_text(TOOL_FILE)
    script = textwrap.dedent(SCRIPT.format(root=str(tmp_path), folder=str(folder)))

    # -I: no PYTHONPATH, no current folder, no user site; run from a folder without the package.
    done = subprocess.run(
        [sys.executable, "-I", "-c", script], cwd=folder, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    for package in ("myapp._vendor.agentcore", "acc_vendored_core"):
        run = report[package]
        assert run["names"] == ["double", "greet"]
        value = run["double"]["output"]["value"]
        # Nothing in the tool process (worker or tool) imported the package by its own name.
        assert value["doubled"] == 42 and value["agentcore_loaded"] == []
        assert value["pid"] != run["parent_pid"]
        assert run["greet"] == {"output": {"type": "text", "value": "hello Ann from greet"}}
        assert run["streams"] == [["stdout", "greeting Ann\n"]]
