"""examples/app over plain HTTP (urllib / http.client): the API contract of the page."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import app_helpers as app_sse
from app_helpers import AppProcess

from agentcore.history import open_calls
from agentcore.store import SQLiteStore
from agentcore.testing import ModelServer

App = Callable[..., AppProcess]
ONE_MB = 1024 * 1024


def run_to_end(server: AppProcess, session: str, text: str) -> app_sse.Stream:
    """Post `text` and read the session's events from the start until the run's agent_end."""
    status, body = server.call("POST", f"/api/sessions/{session}/messages", {"text": text})
    assert status == 202, body
    return app_sse.read(server.url, session, until=app_sse.ended, token=server.token)


def test_sessions_are_unguessable_listed_and_unknown_ones_are_404(app: App) -> None:
    server = app()
    first, second = server.new_session(), server.new_session()
    assert first != second and len(first) >= 22 and len(second) >= 22  # >= 128 bits in base64url
    status, body = server.call("GET", "/api/sessions")
    assert status == 200
    assert {first, second} <= {s["id"] for s in body["sessions"]}
    assert all({"id", "length", "updated_at"} <= s.keys() for s in body["sessions"])
    assert server.call("GET", f"/api/sessions/{first}")[1]["history"] == []
    server.stop()
    again = app(db=server.db)  # a new, still empty session survives a restart too
    assert {first, second} <= {s["id"] for s in again.call("GET", "/api/sessions")[1]["sessions"]}
    assert again.call("GET", f"/api/sessions/{first}")[0] == 200
    server = again
    assert server.call("GET", "/api/sessions/" + "x" * 32)[0] == 404
    assert server.call("POST", "/api/sessions/" + "x" * 32 + "/messages", {"text": "hi"})[0] == 404


def test_a_message_over_1_mb_is_413_and_nothing_is_written(app: App, tmp_path: Path) -> None:
    server = app()
    session = server.new_session()
    status, _ = server.call("POST", f"/api/sessions/{session}/messages", {"text": "a" * (ONE_MB + 1)})
    assert status == 413
    # A body far over the limit is refused from its Content-Length, never parsed or kept.
    status, _ = server.call("POST", f"/api/sessions/{session}/messages", raw=b"x" * (2 * ONE_MB))
    assert status == 413
    assert server.history(session) == []
    store = SQLiteStore(tmp_path / "chats.db")
    assert store.load(session) == []
    store.close()
    # Just under the limit is accepted and written (the model may then refuse a context that big).
    text = "b" * (ONE_MB - 16)
    run_to_end(server, session, text)
    assert server.history(session)[0]["content"] == text


def test_a_message_with_a_lone_surrogate_is_a_json_400_and_nothing_is_written(
    app: App, tmp_path: Path
) -> None:
    """JSON's "\\ud83d" (half of an emoji) cannot be sent to a model (API.md §Details "Text that
    cannot be encoded"). Before: the handler crashed encoding it and the client got no answer."""
    server = app()
    session = server.new_session()
    raw = b'{"text": "caf\\ud83d"}'
    status, body = server.call("POST", f"/api/sessions/{session}/messages", raw=raw)
    assert status == 400 and "lone surrogate" in body["error"]
    assert server.history(session) == []
    run_to_end(server, session, "caf\u00e9 works")  # the session is fine
    assert server.history(session)[0]["content"] == "caf\u00e9 works"


def test_without_the_token_every_api_call_is_401_also_the_event_stream(app: App) -> None:
    server = app(token="s3cret-token")
    for method, path in (("GET", "/api/sessions"), ("POST", "/api/sessions")):
        assert server.call(method, path, token="")[0] == 401
        assert server.call(method, path, token="wrong")[0] == 401
    session = server.new_session()  # with the token
    for method, path, body in (
        ("GET", f"/api/sessions/{session}", None),
        ("GET", f"/api/sessions/{session}/events", None),
        ("POST", f"/api/sessions/{session}/messages", {"text": "hi"}),
        ("POST", f"/api/sessions/{session}/stop", {}),
        ("POST", f"/api/sessions/{session}/approvals/call_1", {"allow": True}),
    ):
        assert server.call(method, path, body, token="")[0] == 401, path
    assert server.history(session) == []  # the refused message was not written
    # The page itself holds no data and loads without the token (it reads it from the fragment).
    with urllib.request.urlopen(server.url + "/", timeout=30) as response:
        assert response.status == 200 and b'id="new-session"' in response.read()
    stream = run_to_end(server, session, "hello")
    assert stream.events[-1][1]["reason"] == "no-tool"


def test_event_ids_count_up_and_last_event_id_resumes_without_gaps_or_repeats(app: App) -> None:
    server = app()
    session = server.new_session()
    full = run_to_end(server, session, "hello")
    ids = [number for number, _ in full.events]
    assert ids == list(range(1, len(ids) + 1))
    types = [event["type"] for _, event in full.events]
    assert types[0] == "agent_start" and "turn_stats" in types and types[-1] == "agent_end"
    for cut in (1, len(ids) // 2, len(ids) - 1):
        resumed = app_sse.read(server.url, session, until=app_sse.ended, last_event_id=cut)
        assert resumed.events == full.events[cut:]
    # A second run continues the same counter; resuming from the end of the first sees only it.
    status, _ = server.call("POST", f"/api/sessions/{session}/messages", {"text": "again"})
    assert status == 202
    second = app_sse.read(server.url, session, until=app_sse.ended, last_event_id=ids[-1])
    assert [n for n, _ in second.events] == list(range(ids[-1] + 1, ids[-1] + 1 + len(second.events)))
    assert second.events[0][1]["type"] == "agent_start"


def test_every_data_line_is_one_agent_event_and_idle_streams_get_heartbeat_comments(app: App) -> None:
    server = app(heartbeat=0.2)
    session = server.new_session()
    stream = run_to_end(server, session, "hello")  # app_sse.read checks each block's shape
    data_lines = [line for line in stream.lines if line.startswith("data:")]
    assert len(data_lines) == len(stream.events)
    assert all(line == "" or line.startswith((":", "id: ", "data: ")) for line in stream.lines)
    idle = app_sse.read(
        server.url, session, until=lambda s: len(s.comments) >= 3, last_event_id=stream.events[-1][0]
    )
    assert idle.events == [] and all(c.startswith(":") for c in idle.comments)


def test_snapshot_reflects_an_event_id_so_history_plus_replay_has_no_overlap(app: App) -> None:
    server = app()
    session = server.new_session()
    full = run_to_end(server, session, "hello")
    status, snapshot = server.call("GET", f"/api/sessions/{session}")
    # ("running" may still be true here: the worker clears it just after agent_end is published.)
    assert status == 200 and isinstance(snapshot["running"], bool)
    announced = [event["message"] for _, event in full.events if event["type"] == "message_end"]
    assert snapshot["history"] == announced
    assert snapshot["last_event_id"] == max(n for n, e in full.events if e["type"] == "message_end")


def test_a_message_during_a_run_steers_it(app: App) -> None:
    server = app()
    session = server.new_session()
    assert server.call("POST", f"/api/sessions/{session}/messages", {"text": "slow please"})[0] == 202
    app_sse.read(server.url, session, until=app_sse.has("tool_execution_update"))
    status, body = server.call("POST", f"/api/sessions/{session}/messages", {"text": "and count this"})
    assert (status, body) == (202, {"status": "steered"})
    app_sse.read(server.url, session, until=app_sse.ended)
    history = server.history(session)
    roles = [m["role"] for m in history]
    # input, slow call, its result, the steer, a word_count call, its result, the reply
    assert roles == ["user", "assistant", "tool", "user", "assistant", "tool", "assistant"]
    assert history[3]["content"] == "and count this"
    assert history[2]["content"][0]["output"]["value"].endswith("slow task finished\n")


def test_approvals_allow_deny_and_bad_answers(app: App) -> None:
    server = app()
    session = server.new_session()
    assert server.call("POST", f"/api/sessions/{session}/messages", {"text": "delete it"})[0] == 202
    asked = app_sse.read(server.url, session, until=app_sse.ended)
    request = next(e for _, e in asked.events if e["type"] == "approval_required")
    assert request["tool_name"] == "delete_file" and request["input"] == {"path": "notes.txt"}
    assert asked.events[-1][1]["reason"] == "approval", "the run ends; the call waits in the store"
    call = request["tool_call_id"]
    snapshot = server.call("GET", f"/api/sessions/{session}")[1]
    assert [p["tool_call_id"] for p in snapshot["pending"]] == [call]
    base = f"/api/sessions/{session}/approvals"
    assert server.call("POST", f"{base}/{call}", {"allow": "yes"})[0] == 400
    assert server.call("POST", f"{base}/not-a-call", {"allow": True})[0] == 404
    assert server.call("POST", f"{base}/{call}", {"allow": False}) == (200, {"allow": False})
    assert server.call("POST", f"{base}/{call}", {"allow": True})[0] == 404  # answered already
    done = app_sse.read(server.url, session, until=app_sse.ended, last_event_id=asked.events[-1][0])
    end = next(e for _, e in done.events if e["type"] == "tool_execution_end")
    assert end["tool_call_id"] == call and end["result"]["output"]["type"] == "execution-denied"
    assert server.call("GET", f"/api/sessions/{session}")[1]["pending"] == []


def test_stop_during_the_slow_tool_leaves_a_valid_history(app: App) -> None:
    server = app()
    session = server.new_session()
    assert server.call("POST", f"/api/sessions/{session}/messages", {"text": "slow"})[0] == 202
    app_sse.read(server.url, session, until=app_sse.has("tool_execution_update"))
    assert server.call("POST", f"/api/sessions/{session}/stop", {}) == (200, {"stopped": True})
    stream = app_sse.read(server.url, session, until=app_sse.ended)
    end = next(e for _, e in stream.events if e["type"] == "tool_execution_end")
    assert end["result"].get("interrupted") is True
    history = server.history(session)
    assert [m["role"] for m in history] == ["user", "assistant", "tool"]
    assert open_calls(history) == []
    assert server.call("POST", f"/api/sessions/{session}/stop", {}) == (200, {"stopped": False})


def test_each_turn_is_one_json_line_on_stderr(app: App) -> None:
    server = app()
    session = server.new_session()
    stream = run_to_end(server, session, "hello")
    stats = [e for _, e in stream.events if e["type"] == "turn_stats"]
    assert [s["step"] for s in stats] == [1, 2]
    lines = server.turn_lines()
    assert [line["step"] for line in lines] == [1, 2]
    for line, event in zip(lines, stats, strict=True):
        assert set(line) == {"session", "step", "model_ms", "tool_ms", "input_tokens", "output_tokens"}
        assert line["session"] == session and line["input_tokens"] > 0 and line["output_tokens"] > 0
        assert {k: event[k] for k in line} == line
    assert stats[0]["tools"][0]["tool_name"] == "word_count"


def test_restart_keeps_sessions_and_a_pending_approval_that_is_approved_after_it(
    app: App, tmp_path: Path
) -> None:
    first = app()
    session = first.new_session()
    run_to_end(first, session, "hello")
    assert first.call("POST", f"/api/sessions/{session}/messages", {"text": "delete notes"})[0] == 202
    app_sse.read(first.url, session, until=app_sse.has("approval_required"))
    first.stop(kill=True)  # the process dies with the approval pending
    second = app(db=tmp_path / "chats.db")
    snapshot = second.call("GET", f"/api/sessions/{session}")[1]
    [waiting] = snapshot["pending"]
    assert waiting["tool_name"] == "delete_file" and waiting["input"] == {"path": "notes.txt"}
    assert [m["role"] for m in snapshot["history"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert session in {s["id"] for s in second.call("GET", "/api/sessions")[1]["sessions"]}
    url = f"/api/sessions/{session}/approvals/{waiting['tool_call_id']}"
    assert second.call("POST", url, {"allow": True}) == (200, {"allow": True})
    stream = app_sse.read(second.url, session, until=app_sse.ended)
    end = next(e for _, e in stream.events if e["type"] == "tool_execution_end")
    assert end["result"]["output"]["value"] == "deleted notes.txt (demo: nothing was touched)"
    history = second.history(session)
    assert open_calls(history) == [] and history[-1]["role"] == "assistant"
    # The conversation goes on from there.
    stream = run_to_end(second, session, "hello again")
    assert stream.events[-1][1]["reason"] == "no-tool"


def test_sigterm_closes_a_running_call_as_interrupted_before_exiting(app: App, tmp_path: Path) -> None:
    server = app()
    session = server.new_session()
    assert server.call("POST", f"/api/sessions/{session}/messages", {"text": "slow"})[0] == 202
    app_sse.read(server.url, session, until=app_sse.has("tool_execution_update"))
    server.stop()  # SIGTERM
    assert server.process.returncode == 0
    store = SQLiteStore(tmp_path / "chats.db")
    history = store.load(session)
    store.close()
    assert [m["role"] for m in history] == ["user", "assistant", "tool"] and open_calls(history) == []
    assert "restarted" not in history[-1]["content"][0]["output"]["value"]  # closed by the run itself


def test_a_steer_left_queued_by_stop_is_delivered_with_the_next_message(app: App) -> None:
    server = app()
    session = server.new_session()
    base = f"/api/sessions/{session}"
    assert server.call("POST", f"{base}/messages", {"text": "slow"})[0] == 202
    app_sse.read(server.url, session, until=app_sse.has("tool_execution_update"))
    assert server.call("POST", f"{base}/messages", {"text": "queued while the tool ran"})[1] == {
        "status": "steered"
    }
    assert server.call("POST", f"{base}/stop", {}) == (200, {"stopped": True})
    first = app_sse.read(server.url, session, until=app_sse.ended)
    assert [m["role"] for m in server.history(session)] == ["user", "assistant", "tool"]  # not run after stop
    assert server.call("POST", f"{base}/messages", {"text": "next"})[1] == {"status": "started"}
    app_sse.read(server.url, session, until=app_sse.ended, last_event_id=first.events[-1][0])
    users = [m["content"] for m in server.history(session) if m["role"] == "user"]
    assert users == ["slow", "next", "queued while the tool ran"]


def test_a_sub_agent_call_streams_its_events_as_sub_agent_events(app: App) -> None:
    server = app()
    session = server.new_session()
    stream = run_to_end(server, session, "research this please")
    inner = [e for _, e in stream.events if e["type"] == "sub_agent"]
    assert inner and all(e["tool_name"] == "research" and "type" in e["event"] for e in inner)
    assert {"agent_start", "tool_execution_end", "agent_end"} <= {e["event"]["type"] for e in inner}
    history = server.history(session)
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[2]["content"][0]["tool_name"] == "research" and "sub_agent_usage" in history[2]


def test_with_openai_settings_it_talks_to_that_endpoint(app: App) -> None:
    script = [{"tool_calls": [{"name": "word_count", "arguments": {"text": "a b"}}]}, "the endpoint answered"]
    with ModelServer(script) as endpoint:
        env = {
            "OPENAI_BASE_URL": endpoint.base_url,
            "OPENAI_API_KEY": "key-123",
            "AGENTCORE_MODEL": "real-model",
        }
        server = app(env=env)
        session = server.new_session()
        stream = run_to_end(server, session, "hello")
        assert stream.events[-1][1]["text"] == "the endpoint answered"
        assert [r["model"] for r in endpoint.requests] == ["real-model", "real-model"]
        assert endpoint.log[0].headers["Authorization"] == "Bearer key-123"


def test_methods_a_path_does_not_take_get_a_json_405(app: App) -> None:
    """Before: DELETE / PUT got http.server's 501 HTML page."""
    server = app()
    session = server.new_session()
    for method, path, allowed in (
        ("DELETE", f"/api/sessions/{session}", "GET"),
        ("PUT", f"/api/sessions/{session}/messages", "POST"),
        ("PATCH", "/api/sessions", "GET, POST"),
        ("DELETE", "/", "GET"),
        ("GET", f"/api/sessions/{session}/stop", "POST"),
    ):
        request = urllib.request.Request(server.url + path, method=method)
        request.add_header("Authorization", f"Bearer {server.token}")
        try:
            urllib.request.urlopen(request, timeout=30)
            raise AssertionError(f"{method} {path} was accepted")
        except urllib.error.HTTPError as error:
            assert error.code == 405, (method, path, error.code)
            assert error.headers["Content-Type"] == "application/json"
            assert error.headers["Allow"] == allowed
            assert method in json.loads(error.read())["error"]
    # A method http.server has no handler for at all: JSON too, never its HTML page.
    connection = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]), timeout=30)
    connection.request("BREW", "/api/sessions")
    response = connection.getresponse()
    assert response.status == 405 and "BREW" in json.loads(response.read())["error"]
    connection.close()
    assert server.history(session) == []
