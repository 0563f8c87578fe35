"""Imports point one way: helpers ← adapters ← loop ← agent (docs/INTERNALS.md).

Walks every module's imports with `ast`; a module may import only modules of its own rank or
below. Also: `requests` only in llm/_http, nothing imports jsonschema or requests at module
level, the tool worker imports the standard library only, and imports inside the package are
relative (so a vendored copy works).
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
    ),
    ("protocols", "text_tools"),
    ("llm", "_http", "context", "fold", "tool_mode"),
    ("compact", "batch", "entries"),
    ("loop",),
    ("agent", "aio", "subagent"),
    ("__init__", "testing", "telemetry"),
    ("mcp", "skills"),  # integrations: built on the core, never imported by it
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


def test_the_tool_worker_imports_the_standard_library_only() -> None:
    worker = PACKAGE / "tools" / "worker.py"
    if not worker.exists():
        pytest.skip("no tool worker in this tree")
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    for target, internal, line in imports("tools.worker", worker):
        assert not internal, f"tools/worker.py:{line} imports {target} from the package"
        assert target.split(".")[0] in stdlib, f"tools/worker.py:{line} imports {target}"


# The agent's own process stays free of asyncio (API.md §Async callers): only the async API, the
# MCP client (its SDK is asyncio-only) and the tool worker (another process; runs async tools).
ASYNCIO_ALLOWED = ("aio", "mcp", "tools.worker")


def test_asyncio_only_in_the_async_modules() -> None:
    for module, path in modules():
        for target, internal, line in imports(module, path):
            if not internal and target.split(".")[0] == "asyncio":
                assert module in ASYNCIO_ALLOWED, f"{module}:{line} imports asyncio"


def test_nothing_in_the_core_imports_an_integration() -> None:
    integrations = ("mcp", "skills")
    for module, path in modules():
        if module in integrations:
            continue
        for target, internal, line in imports(module, path):
            assert not (internal and target in integrations), f"{module}:{line} imports {target}"
