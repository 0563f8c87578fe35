"""The command line's fallback and budget flags (API.md §Command line, §Fallback models and
budgets): `--fallback-model` (with `--fallback-base-url` / `--fallback-protocol` /
`--fallback-api-key-env`), `--budget-tokens`, `--budget-requests`; a reply written by a fallback
says so on stderr, and a run a budget ended exits 3 saying why. A real `python -m agentcore run`
against ModelServers in this process.
"""

from __future__ import annotations

from test_cli import cli_env, endpoint, run_cli, tools_dir

from agentcore.testing import ModelServer

__all__ = ["tools_dir"]  # the fixture, shared with test_cli.py


def test_a_fallback_on_another_protocol_answers_and_is_named(server: ModelServer) -> None:
    with ModelServer() as anthropic:
        server.add({"status": 503, "error": "overloaded"})
        anthropic.add("From the fallback.")
        done = run_cli(
            "run",
            *endpoint(server),
            "--fallback-model",
            "claude-small",
            "--fallback-base-url",
            anthropic.base_url,
            "--fallback-protocol",
            "anthropic",
            "--fallback-api-key-env",
            "FALLBACK_KEY",
            "hello",
            env=cli_env(FALLBACK_KEY="sk-ant-test", OPENAI_API_KEY="sk-openai-test"),
        )
    assert (done.returncode, done.stdout) == (0, "From the fallback.\n"), done.stderr
    assert "[retry 1 on claude-small in 0.0 s (server): HTTP 503: overloaded]" in done.stderr
    assert "[answered by claude-small (fallback)]" in done.stderr
    assert anthropic.requests[0]["model"] == "claude-small"
    assert anthropic.log[0].headers["x-api-key"] == "sk-ant-test"
    assert server.log[0].headers["authorization"] == "Bearer sk-openai-test"


def test_a_fallback_model_on_the_same_endpoint(server: ModelServer) -> None:
    server.add({"status": 429, "error": "rate limited"}, "From the second model.")
    done = run_cli("run", *endpoint(server), "--fallback-model", "m-mini", "hello")
    assert (done.returncode, done.stdout) == (0, "From the second model.\n"), done.stderr
    assert [body["model"] for body in server.requests] == ["m", "m-mini"]
    assert "[answered by m-mini (fallback)]" in done.stderr


def test_the_answer_of_the_primary_is_not_announced(server: ModelServer) -> None:
    server.add("Fine.")
    done = run_cli("run", *endpoint(server), "--fallback-model", "m-mini", "hello")
    assert (done.returncode, done.stdout) == (0, "Fine.\n")
    assert "answered by" not in done.stderr


def test_budget_tokens_ends_the_run_with_status_3(server: ModelServer, tools_dir: object) -> None:
    call = {
        "tool_calls": [{"name": "shout", "arguments": {"text": "a"}}],
        "usage": {"input_tokens": 60, "output_tokens": 5},
    }
    server.add(call, call, call)
    done = run_cli("run", *endpoint(server), "--tools", str(tools_dir), "--budget-tokens", "100", "shout")
    assert done.returncode == 3, done.stderr
    assert len(server.requests) == 2
    assert "[budget: the total_tokens limit of 100 is reached (130 used)]" in done.stderr


def test_budget_requests_counts_retries(server: ModelServer) -> None:
    down = {"status": 503, "error": "down", "headers": {"Retry-After": "0"}}
    server.add(down, down, "never asked")
    done = run_cli("run", *endpoint(server), "--budget-requests", "2", "hello")
    assert done.returncode == 3, done.stderr
    assert len(server.requests) == 2
    assert "[budget: the requests limit of 2 is reached (2 used)]" in done.stderr


def test_fallback_flags_need_a_fallback_model(server: ModelServer) -> None:
    done = run_cli("run", *endpoint(server), "--fallback-protocol", "anthropic", "hello")
    assert done.returncode == 2
    assert "--fallback-model" in done.stderr
    done = run_cli("run", *endpoint(server), "--fallback-model", "x", "--fallback-base-url", "nope", "hi")
    assert done.returncode == 2 and "--fallback-base-url 'nope': expected the API root" in done.stderr
    assert server.requests == []
