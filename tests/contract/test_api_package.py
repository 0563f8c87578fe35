"""API.md §Package (top-level names, cheap import, a vendored copy) and the public signatures.

Fixtures and the contract's conventions: tests/contract/conftest.py.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import agentcore
from agentcore import Agent, SendResult


def test_top_level_names() -> None:
    for name in ("Agent", "tool", "ToolContext", "AgentError", "SendResult", "Usage", "__version__"):
        assert hasattr(agentcore, name), name
    for namespace in ("tools", "history", "context", "compact", "llm", "text_tools", "output"):
        assert getattr(agentcore, namespace).__name__ == f"agentcore.{namespace}"
    assert isinstance(agentcore.__version__, str)


def test_import_is_cheap_and_lazy() -> None:
    code = (
        "import sys, agentcore; from agentcore import Agent, tool, AgentError; "
        "print(any(m in sys.modules for m in ('requests', 'jsonschema')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_vendored_copy_works_without_agentcore_importable(tmp_path: Path) -> None:
    import shutil

    root = Path(agentcore.__file__).parent
    shutil.copytree(root, tmp_path / "acc_vendored_core", ignore=shutil.ignore_patterns("__pycache__"))
    code = textwrap.dedent(
        """
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "agentcore" or name.startswith("agentcore."):
                    raise ImportError("agentcore must not be imported")
        sys.meta_path.insert(0, Block())
        import acc_vendored_core as ac
        @ac.tool
        def double(x: int) -> int:
            return 2 * x
        print(ac.tools.execute("double", {"x": 21}, [double])["output"]["value"])
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "42"


def _params(fn: Any) -> dict[str, tuple[Any, Any]]:
    import inspect

    return {name: (p.kind, p.default) for name, p in inspect.signature(fn).parameters.items()}


def test_public_signatures() -> None:
    import inspect

    empty = inspect.Parameter.empty
    kw = inspect.Parameter.KEYWORD_ONLY
    init = _params(Agent.__init__)
    names = [n for n in init if n != "self"]
    assert names == ["config", "tools", "callbacks", "history", "id", "hooks", "session"]
    assert all(default is None for n, (_, default) in init.items() if n != "self")
    send = _params(Agent.send)
    assert list(send)[1] == "input"
    for name in ("config", "history", "tools", "callbacks", "cancel"):
        assert send[name] == (kw, None), name
    resume = _params(Agent.resume)
    assert {n for n in resume if n != "self"} == {"config", "callbacks", "cancel"}
    assert all(kind == kw for n, (kind, _) in resume.items() if n != "self")
    compact = _params(Agent.compact)
    assert {n for n in compact if n != "self"} == {"on_compact", "on_retry"}
    chat = _params(agentcore.llm.chat)
    expected_chat = {
        "system": "",
        "tools": None,
        "protocol": "chat",
        "provider": None,
        "stream": True,
        "cache": True,
        "capabilities": None,
        "media_fallback": "error",
        "output": None,
        "max_tokens": None,
        "on_llm_event": None,
        "cancel": None,
        "request_timeout": None,
    }
    for name, default in expected_chat.items():
        assert chat[name] == (kw, default), name
    for name in ("base_url", "api_key", "model", "messages"):
        assert chat[name][0] == kw, name
    assert chat["messages"][1] is empty and chat["model"][1] is empty
    build = _params(agentcore.context.build)
    assert list(build)[:5] == ["history", "system", "tools", "max_context_tokens", "ratio"]
    assert [build[n][1] for n in ("system", "tools", "max_context_tokens", "ratio")] == [
        "",
        None,
        128000,
        None,
    ]
    run = _params(agentcore.compact.run)
    for name in ("history", "system", "tools", "connection"):
        assert run[name][0] == kw, name
    assert (run["previous"], run["on_compact"], run["cancel"]) == ((kw, None), (kw, None), (kw, None))
    execute = _params(agentcore.tools.execute)
    assert list(execute)[:3] == ["name", "input", "tools"]
    for name in ("cancel", "on_output", "limit", "concurrency"):
        assert execute[name] == (kw, None), name
    read = _params(agentcore.text_tools.read)
    assert list(read)[:3] == ["text", "spec", "loose"] and read["loose"][1] is True
    assert list(_params(agentcore.text_tools.prepare)) == ["schema"]
    assert list(_params(agentcore.text_tools.wrap))[:2] == ["messages", "spec"]
    assert list(_params(agentcore.history.assistant))[:2] == ["content", "tool_calls"]
    assert _params(agentcore.history.assistant)["content"][1] == ""
    assert list(_params(agentcore.history.tool)) == ["tool_call_id", "tool_name", "content"]
    for fn in (agentcore.tools.scan, agentcore.tools.load, agentcore.tools.merge):
        assert next(iter(_params(fn).values()))[0] == inspect.Parameter.VAR_POSITIONAL
    assert list(_params(agentcore.tools.pick))[:2] == list(_params(agentcore.tools.omit))[:2]
    for name in ("object", "array", "json"):
        assert callable(getattr(agentcore.output, name))
    result_fields = [f.name for f in dataclasses.fields(SendResult)]
    assert set(result_fields) == {"text", "steps", "usage", "reason", "output", "messages", "pending"}
    llm_fields = {f.name for f in dataclasses.fields(agentcore.llm.LLMResult)}
    assert {"text", "reasoning", "tool_calls", "usage", "finish_reason", "message", "raw"} <= llm_fields
    read_fields = {f.name for f in dataclasses.fields(agentcore.text_tools.TextToolRead)}
    assert {"text", "tool_calls", "invalid"} <= read_fields
    assert {f.name for f in dataclasses.fields(agentcore.tools.ToolSet)} == {"schema", "handlers"}
    context_fields = {f.name for f in dataclasses.fields(agentcore.context.Context)}
    assert {"messages", "system", "tokens"} <= context_fields
