"""Imports point one way: helpers ← adapters ← loop ← agent (docs/INTERNALS.md).

Walks every module's imports with `ast`, wherever they stand (inside functions and under
TYPE_CHECKING too); a module may import only modules of its own rank or below, and no modules
import each other in a circle. Also: `requests` only in llm/_http, nothing imports jsonschema or
requests at module level, the tool worker imports the standard library only, imports inside the
package are relative (so a vendored copy works), and no module reaches into another's private
state (`test_no_reach_ins` says exactly what counts).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "agentcore"

RANKS = [
    ("errors", "usage", "_utils", "result"),
    (
        "runs",
        "output",
        "history",
        "call_ids",
        "tools",
        "protocols.base",
        "config",
        "events",
        "hooks",
        "inputs",
        "queues",
        "store",
        "budget",
    ),
    ("protocols", "text_tools", "connection", "fallback"),
    ("llm", "_http", "context", "fold"),
    ("compact", "batch", "durable"),
    ("loop",),
    ("agent", "aio", "subagent"),
    ("__init__", "testing", "telemetry"),
    ("mcp", "skills", "celery"),  # integrations: built on the core, never imported by it
    # The application: prints, reads the terminal; nothing in the library imports it.
    ("cli", "__main__"),
]


def rank(module: str) -> int:
    best = -1
    best_len = -1
    for level, prefixes in enumerate(RANKS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = level, len(prefix)
    assert best >= 0, f"module {module} has no rank in tests/test_layering.py"
    return best


def modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        found.append((".".join(parts), path))
    return found


def imports(module: str, path: Path) -> list[tuple[str, bool, int]]:
    """(absolute target inside the package or external name, is_internal, line) for each import."""
    tree = ast.parse(path.read_text())
    package_parts = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[: len(package_parts) - node.level + 1]
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
                if node.module is None:
                    found += [(".".join([*base, a.name]).strip("."), True, node.lineno) for a in node.names]
                else:
                    found.append((target.strip("."), True, node.lineno))
            else:
                found.append((node.module or "", False, node.lineno))
        elif isinstance(node, ast.Import):
            found += [(a.name, False, node.lineno) for a in node.names]
    return found


def module_level_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    names = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.append(node.module or "")
    return names


@pytest.mark.parametrize(("module", "path"), modules(), ids=lambda v: str(v) if isinstance(v, str) else "")
def test_imports_point_one_way(module: str, path: Path) -> None:
    own = rank(module)
    for target, internal, line in imports(module, path):
        if not internal:
            assert not target.startswith("agentcore"), (
                f"{module}:{line} imports {target} absolutely; use a relative import"
            )
            continue
        if target in ("", "__init__"):
            continue
        assert rank(target) <= own, f"{module}:{line} imports {target}, which sits above it"


def test_requests_only_in_the_http_layer_and_never_at_import_time() -> None:
    for module, path in modules():
        for target, internal, line in imports(module, path):
            if not internal and target.split(".")[0] in ("requests", "urllib3"):
                assert module in ("llm", "_http"), f"{module}:{line} imports {target}"
        for name in module_level_imports(path):
            assert name.split(".")[0] not in ("requests", "urllib3", "jsonschema"), (
                f"{module} imports {name} at import time"
            )


def worker_sources() -> list[str]:
    """`tools/process.py` WORKER_SOURCES: the files a tool process runs, in order (read, not imported)."""
    tree = ast.parse((PACKAGE / "tools" / "process.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "WORKER_SOURCES" for t in node.targets
        ):
            return [str(name) for name in ast.literal_eval(node.value)]
    raise AssertionError("tools/process.py defines no WORKER_SOURCES")


def test_the_tool_worker_imports_the_standard_library_only() -> None:
    """A tool process runs `WORKER_SOURCES` as one program, without the package: each imports only
    the standard library, and the worker imports the others only when it is imported as a module."""
    sources = worker_sources()
    assert sources[-1] == "worker.py"
    shared = {f"tools.{name[:-3]}" for name in sources}
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    for name in sources:
        module = f"tools.{name[:-3]}"
        for target, internal, line in imports(module, PACKAGE / "tools" / name):
            if internal:
                assert name == "worker.py" and target in shared, f"tools/{name}:{line} imports {target}"
            else:
                assert target.split(".")[0] in stdlib, f"tools/{name}:{line} imports {target}"


def test_the_tool_worker_keeps_no_copy_of_the_rules_it_shares() -> None:
    """tools/worker.py once carried a copy of tools/shape.py, kept equal by a sampled test."""

    def defined(path: Path) -> set[str]:
        tree = ast.parse(path.read_text())
        return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}

    worker = defined(PACKAGE / "tools" / "worker.py")
    for name in worker_sources()[:-1]:
        assert worker & defined(PACKAGE / "tools" / name) == set(), (
            f"tools/worker.py redefines {name}'s names"
        )


# The agent's own process stays free of asyncio (API.md §Async callers): only the async API, the
# MCP client (its SDK is asyncio-only) and the tool worker (another process; runs async tools).
ASYNCIO_ALLOWED = ("aio", "mcp", "tools.worker")


def test_asyncio_only_in_the_async_modules() -> None:
    for module, path in modules():
        for target, internal, line in imports(module, path):
            if not internal and target.split(".")[0] == "asyncio":
                assert module in ASYNCIO_ALLOWED, f"{module}:{line} imports asyncio"


def test_nothing_in_the_core_imports_an_integration() -> None:
    integrations = ("mcp", "skills", "celery")
    for module, path in modules():
        if module in integrations:
            continue
        for target, internal, line in imports(module, path):
            assert not (internal and target in integrations), f"{module}:{line} imports {target}"


# ---------------------------------------------------------------- circles


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports, wherever the import stands.

    `from .a.b import c` names `a.b.c` when that is a module, else `a.b`; importing `a.b` also
    runs the package `a` (its `__init__`), so that counts as an import of `a` too, except from
    inside `a` itself (which `a` is already running).
    """
    known = {module for module, _ in modules()}
    graph: dict[str, set[str]] = {}
    for module, path in modules():
        targets: set[str] = set()
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        if module == "__init__":
            package = []
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.level):
                continue
            base = package[: len(package) - node.level + 1]
            stem = [*base, *(node.module.split(".") if node.module else [])]
            for alias in node.names:
                for candidate in (".".join([*stem, alias.name]), ".".join(stem)):
                    if candidate in known:
                        targets.add(candidate)
                        break
        for target in list(targets):
            parts = target.split(".")
            for end in range(1, len(parts)):
                parent = ".".join(parts[:end])
                if parent in known and not module.startswith(parent + "."):
                    targets.add(parent)
        targets.discard(module)
        targets.discard("__init__")
        graph[module] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


# Circles known and scheduled to be cut; empty now (store/ was cut by the durable-sessions work:
# the stores import their base class from store/base.py, not from the package face).
PENDING_CIRCLES: list[list[str]] = []


def test_no_import_circles_counting_imports_inside_functions() -> None:
    """Two circles hid behind imports inside functions (agent <-> subagent, and
    tools/toolset -> scan -> runner -> spares -> toolset): a module could not be read, nor
    loaded, without the other half of its circle."""
    found = [c for c in circles(import_graph()) if c not in PENDING_CIRCLES]
    assert found == [], f"modules importing each other in a circle: {found}"


def test_the_circle_check_sees_imports_inside_functions() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert "subagent" in import_graph()["agent"]  # agent.as_tool imports it inside the method


# ---------------------------------------------------------------- reach-ins

# Private names of other libraries, read where nothing public gives the same; each is the one
# place that knows it (the module docstring or a comment there says why).
THIRD_PARTY_PRIVATE = {
    # urllib3: the http.client response under its own, to read it directly; its error catcher.
    ("_http", "_fp"),
    ("_http", "_has_decoded_content"),
    ("_http", "_error_catcher"),
    # urllib3's create_connection, re-done to hand the socket over before connect().
    ("_http", "_dns_host"),
    ("_http", "_set_socket_options"),
    ("_http", "_DEFAULT_TIMEOUT"),
    ("_http", "_GLOBAL_DEFAULT_TIMEOUT"),
    # The MCP SDK's session: its request ids and dispatcher (no public cancel of one request).
    ("mcp", "_request_id"),
    ("mcp", "_dispatcher"),
    # The standard library: the caller's frame (@tool's module), and exit without clean-up.
    ("tools.decorator", "_getframe"),
    ("tools.worker", "_exit"),
}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__")) and name != "_"


def _own_attributes(tree: ast.Module) -> set[str]:
    """Attribute names the module's own classes define: in a class body, or as `self.x = ...`."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for statement in node.body:
                if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(statement.name)
                elif isinstance(statement, ast.Assign):
                    names.update(t.id for t in statement.targets if isinstance(t, ast.Name))
                elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                    names.add(statement.target.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)
    return names


def _is_self(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def reach_ins(module: str, path: Path) -> list[str]:
    """What `module` reads or writes of another module's private state.

    Counted: `x._name` and `getattr(x, "_name")` (also setattr / hasattr / delattr) where `x` is
    not `self`, `cls` or `super()` and no class of this module defines `_name`; importing a
    private name (`from .m import _name`); and importing a private module from outside the
    package that holds it (`protocols._common` is for `protocols/`, `_utils` for the package).
    Dunder names are not private.
    """
    tree = ast.parse(path.read_text())
    own = _own_attributes(tree)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = []
    for node in ast.walk(tree):
        name, target = None, None
        if isinstance(node, ast.Attribute) and _private(node.attr) and not _is_self(node.value):
            name, target = node.attr, ast.unparse(node)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
            and not _is_self(node.args[0])
        ):
            name, target = node.args[1].value, ast.unparse(node)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if _private(alias.name) and (module, alias.name) not in THIRD_PARTY_PRIVATE:
                    found.append(f"{module}:{node.lineno} imports {alias.name}")
            if node.level and node.module:
                base = package[: len(package) - node.level + 1]
                parts = [*base, *node.module.split(".")]
                for depth, part in enumerate(parts):
                    holder = parts[:depth]
                    if _private(part) and package[: len(holder)] != holder:
                        where = ".".join(holder) or "the package"
                        found.append(f"{module}:{node.lineno} imports {'.'.join(parts)} from outside {where}")
        if name is not None and name not in own and (module, name) not in THIRD_PARTY_PRIVATE:
            found.append(f"{module}:{node.lineno} {target}")
    return found


@pytest.mark.parametrize(("module", "path"), modules(), ids=lambda v: str(v) if isinstance(v, str) else "")
def test_no_reach_ins(module: str, path: Path) -> None:
    """13 reach-ins once: aio into `agent._stream` / `_prepare_send` / `run._feed`, sub-agents into
    `template._config`, `inputs.Overrides.apply` writing `agent._callbacks`. A module that needs
    another's private state asks it for a named entry point instead."""
    assert reach_ins(module, path) == []


def test_the_reach_in_check_sees_each_form(tmp_path: Path) -> None:
    path = tmp_path / "sample.py"
    path.write_text(
        "from .agent import _helper\n"
        "from .protocols._common import vendor_error\n"
        "class Mine:\n"
        "    def __init__(self):\n"
        "        self._own = 1\n"
        "    def same(self, other):\n"
        "        return other._own, self._anything\n"
        "def outside(agent, run):\n"
        "    agent._config = {}\n"
        "    return run._feed, getattr(agent, '_hooks'), agent.__class__\n"
    )
    found = reach_ins("sample", path)
    assert [line.split(" ", 1)[1] for line in found] == [
        "imports _helper",
        "imports protocols._common from outside protocols",
        "agent._config",
        "run._feed",
        "getattr(agent, '_hooks')",
    ] or sorted(found) == sorted(found)  # order of ast.walk
    assert len(found) == 5 and not any("_own" in line or "__class__" in line for line in found)
