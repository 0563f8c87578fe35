"""`import agentcore` is cheap and self-contained: no requests/jsonschema at import, works vendored."""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(
    code: str, *, cwd: Path | None = None, path: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    prelude = "import sys\n"
    flags = []
    if path is not None:
        # No site processing (an editable install's import hook lives there): the vendored copy's
        # folder, the stdlib and site-packages' plain directories only.
        flags = ["-S", "-I"]
        site_dirs = [*site.getsitepackages(), site.getusersitepackages()]
        prelude += f"sys.path[:] = {path!r} + [p for p in sys.path if p] + {site_dirs!r}\n"
    return subprocess.run(
        [sys.executable, *flags, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def test_import_loads_neither_requests_nor_jsonschema() -> None:
    done = run("""
        import agentcore
        from agentcore import Agent, tool, ToolContext, AgentError, SendResult, Usage
        import agentcore.tools, agentcore.history, agentcore.context, agentcore.compact, agentcore.llm
        import agentcore.output, agentcore.text_tools
        print(sorted(m for m in ("requests", "jsonschema", "urllib3") if m in sys.modules))
        print(agentcore.__version__)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "[]"


def test_public_names() -> None:
    import agentcore

    for name in (
        "Agent",
        "tool",
        "ToolContext",
        "AgentError",
        "SendResult",
        "Usage",
        "tools",
        "history",
        "context",
        "compact",
        "llm",
        "text_tools",
        "output",
        "__version__",
    ):
        assert hasattr(agentcore, name), name


def test_a_vendored_copy_runs_an_agent_without_agentcore_importable(tmp_path: Path) -> None:
    vendor = tmp_path / "myapp" / "_vendor"
    vendor.mkdir(parents=True)
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (vendor / "__init__.py").write_text("")
    shutil.copytree(ROOT / "agentcore", vendor / "agentcore", ignore=shutil.ignore_patterns("__pycache__"))
    done = run(
        """
        try:
            import agentcore
            raise SystemExit("agentcore should not be importable here: " + agentcore.__file__)
        except ImportError:
            pass
        from myapp._vendor.agentcore import Agent, tool
        from myapp._vendor.agentcore.testing import ModelServer

        @tool
        def add(a: int, b: int) -> int:
            \"\"\"Add.\"\"\"
            return a + b

        with ModelServer([{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}, "5"]) as server:
            config = {"base_url": server.base_url, "model": "m", "no_tool_rounds": 1}
            agent = Agent(config=config, tools=[add])
            result = agent.send("2+3?")
        print(result.text, agent.history[2]["content"][0]["output"])
        """,
        cwd=tmp_path,
        path=[str(tmp_path)],
    )
    assert done.returncode == 0, done.stderr
    assert "5 {'type': 'json', 'value': 5}" in done.stdout


def test_every_namespace_of_the_contract_is_an_attribute_and_loads_on_first_use() -> None:
    """API.md §Package lists them; `agentcore.aio` once failed as an attribute (only `import` worked)."""
    code = (
        "import sys, agentcore\n"
        "names = ['tools', 'history', 'context', 'compact', 'llm', 'text_tools', 'output', 'usage',\n"
        "         'store', 'skills', 'aio', 'mcp', 'telemetry']\n"
        "assert 'asyncio' not in sys.modules\n"
        "for name in names:\n"
        "    assert getattr(agentcore, name).__name__ == 'agentcore.' + name, name\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
