"""examples/app read as files: the page never turns text into HTML; the production knobs are set."""

from __future__ import annotations

import importlib.util
import re
import sys
from types import ModuleType

from app_helpers import ROOT, SERVER

PAGE = ROOT / "examples" / "app" / "index.html"
PRODUCTION_KNOBS = {
    "max_tool_output",
    "max_tool_concurrency",
    "request_timeout",
    "stream_idle_timeout",
    "retry_max_elapsed",
}


def load_server() -> ModuleType:
    spec = importlib.util.spec_from_file_location("app_server_under_test", SERVER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_page_has_no_html_sinks_and_no_external_resources() -> None:
    page = PAGE.read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in page, sink
    assert not re.search(r"""(src|href)=["']?https?:""", page)  # one file, works offline


def test_the_page_carries_every_dom_hook_of_the_contract() -> None:
    page = PAGE.read_text()
    for hook in (
        'id="new-session"',
        'id="sessions"',
        'id="messages"',
        'id="input"',
        'id="send"',
        'id="stop"',
    ):
        assert hook in page, hook
    for attribute in (
        "data-session-id",
        "data-role",
        "data-streaming",
        "data-tool-call-id",
        "data-state",
        "data-approval",
        "data-approve",
        "data-deny",
        "data-turn-stats",
    ):
        assert f'"{attribute}"' in page, attribute


def test_every_production_knob_is_set_with_a_reason() -> None:
    server = load_server()
    assert set(server.PRODUCTION_CONFIG) >= PRODUCTION_KNOBS
    source = SERVER.read_text().splitlines()
    for knob in PRODUCTION_KNOBS:
        line = next(i for i, text in enumerate(source) if text.strip().startswith(f'"{knob}":'))
        assert source[line - 1].strip().startswith("#"), f"{knob} has no one-line reason above it"
    from agentcore import Agent

    with Agent(config=server.PRODUCTION_CONFIG) as agent:  # every knob is a valid config key
        assert agent.config["stream_idle_timeout"] == server.PRODUCTION_CONFIG["stream_idle_timeout"]
