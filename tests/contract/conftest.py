"""API.md, statement by statement: one quick probe per sentence of the public contract, a file per section.

Written the way an outside tester reading only API.md would: public imports only
(`agentcore`, its namespaces, `agentcore.testing.ModelServer`), real HTTP on 127.0.0.1.
Breadth over depth: the other test files go deep on each subject. Fixtures here: `srv`, a
scripted model server, and `agents`, the agents a test made (closed after it); the helpers
the files share are in api_helpers.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentcore import Agent
from agentcore.testing import ModelServer


@pytest.fixture
def srv() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


@pytest.fixture
def agents() -> Iterator[list[Agent]]:
    made: list[Agent] = []
    yield made
    for agent in made:
        agent.close()
