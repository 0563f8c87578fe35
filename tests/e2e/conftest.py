"""Fixtures of the end-to-end protocol tests: each test runs per protocol, and per stream mode if asked."""

from __future__ import annotations

import pytest

from agentcore.config import PROTOCOLS


@pytest.fixture(params=PROTOCOLS)
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=[True, False], ids=["stream", "whole"])
def stream(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)
