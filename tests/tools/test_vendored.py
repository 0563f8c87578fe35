"""A copy of the package under another name works where `agentcore` itself cannot be imported.

The copy (`myapp/_vendor/agentcore`, and a top-level `acc_vendored_core`) runs in a fresh
interpreter started with `-I -S`: no site-packages, no PYTHONPATH, no user site, no current folder.
Its `sys.path` holds the standard library, a folder with only `requests`, `jsonschema` and the
distributions they depend on (copied from this venv), and the folder holding the copies — so
`agentcore` is provably not importable, and neither is anything else of the test environment.
A send with a file tool and a memory tool against the copy's own `testing.ModelServer` then
proves the relative imports and the tool worker (found without the package's name).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PACKAGE = Path(__file__).resolve().parents[2] / "agentcore"
RUNTIME = ("requests", "jsonschema")
COPIES = ("myapp._vendor.agentcore", "acc_vendored_core")

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

# Shared head of both scripts: the interpreter's path is exactly stdlib + SITE + ROOT.
HEAD = """
import importlib, importlib.util, json, os, sys
stdlib = list(sys.path)
sys.path[:0] = [{site!r}, {root!r}]
report = {{"stdlib": stdlib, "flags": [sys.flags.isolated, sys.flags.no_site]}}
report["importable"] = {{name: importlib.util.find_spec(name) is not None
                        for name in ("agentcore", "pytest", "packaging", "requests", "jsonschema")}}
"""

EXECUTE = """
for package in {copies!r}:
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
report["agentcore_loaded"] = sorted(n for n in sys.modules if n.split(".")[0] == "agentcore")
print(json.dumps(report))
"""

SEND = """
from myapp._vendor.agentcore import Agent, tool
from myapp._vendor.agentcore import tools as toolsets
from myapp._vendor.agentcore.testing import ModelServer


@tool
def shout(text: str) -> str:
    \"""Say it louder.\"""
    return text.upper() + f" (pid {{os.getpid()}})"


calls = [{{"name": "double", "arguments": {{"x": 21}}}}, {{"name": "shout", "arguments": {{"text": "hi"}}}}]
with ModelServer([{{"tool_calls": calls}}, "Both done."]) as server:
    config = {{"base_url": server.base_url, "model": "vendored", "no_tool_rounds": 1}}
    with Agent(config=config, tools=toolsets.load({folder!r}, [shout])) as agent:
        result = agent.send("double 21 and shout hi")
        report["sources"] = {{name: agent.tools.schema[name]["source"] for name in agent.tools}}
    report["sent_tools"] = sorted(t["function"]["name"] for t in server.requests[0]["tools"])
report.update(reason=result.reason, text=result.text, pid=os.getpid(), history=result.messages)
report["agentcore_loaded"] = sorted(n for n in sys.modules if n.split(".")[0] == "agentcore")
report["distributions"] = sorted(d.metadata["Name"].lower() for d in importlib.metadata.distributions())
print(json.dumps(report))
"""


def _runtime_distributions() -> dict[str, metadata.Distribution]:
    """`requests`, `jsonschema` and everything they need (no extras), as installed here."""
    found: dict[str, metadata.Distribution] = {}
    todo = list(RUNTIME)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        found[name] = dist = metadata.distribution(name)
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return found


def _copy_distribution(dist: metadata.Distribution, site: Path) -> None:
    for file in dist.files or []:
        if file.parts[0] == ".." or "__pycache__" in file.parts:
            continue  # console scripts live outside site-packages; bytecode is rebuilt
        target = site / file
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(str(dist.locate_file(file))), target)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """site/ (runtime deps only), root/ (the two copies) and tools/ (a file-tool folder)."""
    base = tmp_path_factory.mktemp("vendored")
    site, root, folder = base / "site", base / "root", base / "tools"
    for dist in _runtime_distributions().values():
        _copy_distribution(dist, site)
    ignore = shutil.ignore_patterns("__pycache__")
    (root / "myapp" / "_vendor").mkdir(parents=True)
    (root / "myapp" / "__init__.py").write_text("")
    (root / "myapp" / "_vendor" / "__init__.py").write_text("")
    shutil.copytree(PACKAGE, root / "myapp" / "_vendor" / "agentcore", ignore=ignore)
    shutil.copytree(PACKAGE, root / "acc_vendored_core", ignore=ignore)
    folder.mkdir()
    (folder / "vend.py").write_text(TOOL_FILE)
    return {"site": site, "root": root, "tools": folder}


def _run_isolated(tree: dict[str, Path], body: str) -> dict[str, Any]:
    values = {"site": str(tree["site"]), "root": str(tree["root"]), "folder": str(tree["tools"])}
    script = textwrap.dedent(HEAD.format(**values)) + textwrap.dedent(body.format(copies=COPIES, **values))
    # -I: no PYTHONPATH, no current folder, no user site; -S: no site-packages at all. Run from
    # the tool folder, which holds no package.
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script],
        cwd=tree["tools"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["flags"] == [1, 1]
    assert not any("site-packages" in entry for entry in report["stdlib"]), report["stdlib"]
    assert report["importable"] == {
        "agentcore": False,
        "pytest": False,
        "packaging": False,
        "requests": True,
        "jsonschema": True,
    }
    assert report["agentcore_loaded"] == []
    return report


def test_only_the_runtime_dependencies_are_copied() -> None:
    names = set(_runtime_distributions())
    assert {"requests", "jsonschema", "urllib3", "referencing"} <= names
    assert not names & {"agentcore", "pytest", "packaging", "mcp", "psycopg"}


def test_a_vendored_copy_runs_file_tools(tree: dict[str, Path]) -> None:
    report = _run_isolated(tree, EXECUTE)
    for package in COPIES:
        run = report[package]
        assert run["names"] == ["double", "greet"]
        value = run["double"]["output"]["value"]
        # Nothing in the tool process (worker or tool) imported the package by its own name.
        assert value["doubled"] == 42 and value["agentcore_loaded"] == []
        assert value["pid"] != run["parent_pid"]
        assert run["greet"] == {"output": {"type": "text", "value": "hello Ann from greet"}}
        assert run["streams"] == [["stdout", "greeting Ann\n"]]


def test_a_vendored_copy_runs_a_send_with_a_file_tool_and_a_memory_tool(tree: dict[str, Path]) -> None:
    report = _run_isolated(tree, SEND)
    assert report["reason"] == "no-tool"
    assert report["text"] == "Both done."
    assert report["sources"] == {"double": "file", "greet": "file", "shout": "memory"}
    assert report["sent_tools"] == ["double", "greet", "shout"]
    assert {canonicalize_name(name) for name in report["distributions"]} == set(_runtime_distributions())
    user, assistant, results, reply = report["history"]
    assert user["content"] == "double 21 and shout hi"
    assert [c["tool_name"] for c in assistant["content"] if c["type"] == "tool-call"] == ["double", "shout"]
    double, shout = (r["output"] for r in results["content"])
    # The file tool ran in its own process, which never imported `agentcore` by name.
    assert double["type"] == "json" and double["value"]["doubled"] == 42
    assert double["value"]["agentcore_loaded"] == [] and double["value"]["pid"] != report["pid"]
    # The memory tool ran in the agent's process.
    assert shout == {"type": "text", "value": f"HI (pid {report['pid']})"}
    assert reply["role"] == "assistant"
