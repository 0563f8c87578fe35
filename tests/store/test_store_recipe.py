"""The README's "web app with several workers" recipe, run as written, on both stores."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from agentcore.testing import ModelServer, Recorded

README = Path(__file__).resolve().parents[2] / "README.md"


def recipe(store: Any, server: ModelServer) -> Any:
    """`handle_message` from the README, bound to this test's store and model server."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    [source] = [b for b in blocks if "def handle_message" in b]
    namespace: dict[str, Any] = {}
    exec(compile(source, str(README), "exec"), namespace)
    namespace.update(store=store, CONFIG={"base_url": server.base_url, "model": "m"}, TOOLS=None)
    return namespace["handle_message"]


def test_requests_answer_in_turn_and_a_newer_message_takes_over_a_running_one(store: Any) -> None:
    with ModelServer() as server:
        handle_message = recipe(store, server)
        server.add("Hello, Ada.")
        assert handle_message("ada", "Hi, I am Ada.") == "Hello, Ada."

        answers: dict[str, str] = {}
        second_done = threading.Event()

        def meanwhile_another_worker_answers(_recorded: Recorded) -> str:
            # While this request waits for the model, a second request of the same user arrives
            # on "another worker": it stops the first run and answers from the store.
            answers["second"] = handle_message("ada", "Are you there?")
            second_done.set()
            return "You asked about the weather."

        server.add(meanwhile_another_worker_answers, "Yes, I am here.")
        answers["first"] = handle_message("ada", "What about the weather?")
        assert second_done.wait(60), "the second request did not finish"

    assert answers["second"] == "Yes, I am here."
    assert answers["first"].startswith("Another reply to this conversation is on its way")
    contents = [m["content"] if m["role"] == "user" else m["content"][0]["text"] for m in store.load("ada")]
    assert contents == [
        "Hi, I am Ada.",
        "Hello, Ada.",
        "What about the weather?",
        "Are you there?",
        "Yes, I am here.",
    ]
