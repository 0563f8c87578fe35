"""A long conversation costs what each send adds: agentcore against the bare loop, per send.

    python bench/long_history.py [--quick] [--repeats 7]

A chat service sends one message at a time into a long history. Each row is an agent that has
already sent on its history once (the first send folds it whole), then sends one message per
repeat; after each of those sends, the bare loop posts the very body agentcore sent (the
messages agentcore selected): `json.dumps` + POST + read the stream, with `requests`. Then the
"carry" client posts those bytes already encoded: what any client pays to carry that JSON.
The server runs in its own process (bench/servers.py); client time per request = wall time −
the server's busy time. Medians over the repeats, interleaved, with their ranges.

Rows: text turns of ~200 characters (as a chat history holds them),
- 3,000 entries, `max_context_tokens` large enough to send them all;
- 3,000 entries with the default budget (128k tokens): compaction has run (a summary every ~850
  entries), so each request carries the selection, not the whole history;
- 1,000 and 10,000 entries, everything sent: what a send costs beyond carrying its JSON;
- 680 and 3,346 entries (the sizes issue 23 quoted), with each budget (not with `--quick`).

Targets (issue 23): send ≤ 1.2× the bare loop on 3,000 entries, with both budgets; per send, a
10,000-entry history within 1.2× of a 1,000-entry one beyond the JSON the request must carry.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from functools import partial
from typing import Any

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import Server, model_server

from agentcore import Agent

TEXT = "lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor " * 3


def history_of(entries: int, summary_every: int | None = None) -> list[dict[str, Any]]:
    """Alternating user / assistant text turns as the library writes them (id, created_at, usage)."""
    made: list[dict[str, Any]] = []
    for i in range(entries):
        if summary_every and i and i % summary_every == 0:
            made.append(
                {"role": "compact", "content": f"summary {i}: " + TEXT, "id": f"c{i}", "created_at": 1.0}
            )
            continue
        entry: dict[str, Any] = {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}: {TEXT}"}
        entry.update(id=f"e{i:08d}", created_at=1700000000.0 + i)
        if entry["role"] == "assistant":
            entry["usage"] = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
        made.append(entry)
    if made[-1]["role"] == "user":
        made.pop()
    return made


def bare_post(session: requests.Session, url: str, body: Any) -> str:
    return post(session, url, encode(body))


def carry_post(session: requests.Session, url: str, pieces: list[bytes]) -> str:
    return post(session, url, b"".join(pieces))


def post(session: requests.Session, url: str, data: bytes) -> str:
    response = session.post(url, data=data, headers={"Content-Type": "application/json"}, stream=True)
    text = []
    for line in response.iter_lines():
        if line.startswith(b"data: ") and line[6:] != b"[DONE]":
            for choice in json.loads(line[6:]).get("choices") or []:
                text.append((choice.get("delta") or {}).get("content") or "")
    return "".join(text)


def encode(body: Any) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def client(server: Server, work: Any) -> tuple[float, float]:
    """(wall time − the server's busy time, CPU time of this process) of `work()`, in s."""
    cpu, started = time.process_time(), time.perf_counter()
    work()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return wall - server.busy(), cpu


KINDS = ("ours", "bare", "carry")


def measure(entries: int, budget: float, summary_every: int | None, repeats: int) -> dict[str, Any]:
    with model_server("text") as server:
        config = {"base_url": server.base_url, "model": "bench", "max_context_tokens": budget}
        agent = Agent(config=config, history=history_of(entries, summary_every))
        server.busy()
        cold = client(server, lambda: agent.send("the first message of this process"))[0]
        session = requests.Session()
        url = f"{server.base_url}/chat/completions"
        got: dict[str, list[tuple[float, float]]] = {kind: [] for kind in KINDS}
        sizes = []
        for n in range(repeats + 1):
            spent = client(server, lambda n=n: agent.send(f"message {n}: {TEXT[:120]}"))
            body = server.last_body()
            data = encode(body)
            # What a bare client does with those messages: encode them, post them, read the reply.
            posted = client(server, partial(bare_post, session, url, body))
            # What any client pays to carry that JSON: the body joined once from the text it kept
            # of the earlier messages and the new ones, posted, the reply read.
            halves = [data[: len(data) // 2], data[len(data) // 2 :]]
            carried = client(server, partial(carry_post, session, url, halves))
            if n:  # the first of these sends warms the bare clients' connection
                for kind, figure in zip(KINDS, (spent, posted, carried), strict=True):
                    got[kind].append(figure)
                sizes.append(len(data))
        agent.close()
    row: dict[str, Any] = {
        "entries": len(agent.history),
        "sent": len(body["messages"]),  # type: ignore[index]
        "bytes": statistics.median(sizes),
        "cold": cold,
    }
    for kind in KINDS:
        row[kind] = [wall for wall, _ in got[kind]]
        row[f"{kind} cpu"] = [cpu for _, cpu in got[kind]]
    return row


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:6.2f} ({min(values) * 1000:.2f}–{max(values) * 1000:.2f})"


def ratios(row: dict[str, Any], cpu: bool = False) -> list[float]:
    suffix = " cpu" if cpu else ""
    return [a / b for a, b in zip(row["ours" + suffix], row["bare" + suffix], strict=True)]


def beyond(row: dict[str, Any], cpu: bool = False) -> list[float]:
    suffix = " cpu" if cpu else ""
    return [a - c for a, c in zip(row["ours" + suffix], row["carry" + suffix], strict=True)]


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}× ({min(values):.2f}–{max(values):.2f})"


def table(rows: dict[str, dict[str, Any]], cpu: bool) -> None:
    suffix = " cpu" if cpu else ""
    columns = "history | messages sent | body KB | agentcore | bare loop | ratio | carry the JSON"
    print(f"| {columns} | beyond carrying |" + ("" if cpu else " first send |"))
    print("|---|---|---|---|---|---|---|---|" + ("" if cpu else "---|"))
    for name, row in rows.items():
        cells = [
            str(row["sent"]),
            f"{row['bytes'] / 1024:.0f}",
            ms(row["ours" + suffix]),
            ms(row["bare" + suffix]),
        ]
        cells += [spread(ratios(row, cpu)), ms(row["carry" + suffix]), ms(beyond(row, cpu))]
        if not cpu:
            cells.append(f"{row['cold'] * 1000:.1f}")
        print(f"| {name} | {' | '.join(cells)} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    repeats = 3 if args.quick else args.repeats
    print(f"python {sys.version.split()[0]}; load average {os.getloadavg()[0]:.2f}; {repeats} sends per row")
    rows = {
        "3,000 entries, all sent": measure(3000, float("inf"), None, repeats),
        "3,000 entries, default budget": measure(3000, 128000, 850, repeats),
        "1,000 entries, all sent": measure(1000, float("inf"), None, repeats),
        "10,000 entries, all sent": measure(10000, float("inf"), None, repeats),
    }
    if not args.quick:  # the sizes issue 23 quoted: 680 and 3,346 entries
        for entries in (680, 3346):
            rows[f"{entries:,} entries, all sent"] = measure(entries, float("inf"), None, repeats)
            rows[f"{entries:,} entries, default budget"] = measure(entries, 128000, 850, repeats)
    print()
    print("client ms per send (wall time − the server's busy time), median (range); ratio per send")
    print()
    table(rows, cpu=False)
    print()
    print("client CPU ms per send (this process, all threads): the steadier figure on a busy machine")
    print()
    table(rows, cpu=True)
    print()
    checks: list[tuple[str, float]] = []
    for label, cpu in (("", False), (", CPU", True)):
        small = statistics.median(beyond(rows["1,000 entries, all sent"], cpu))
        large = statistics.median(beyond(rows["10,000 entries, all sent"], cpu))
        long_row, default = rows["3,000 entries, all sent"], rows["3,000 entries, default budget"]
        checks.append((f"3,000 entries: send <= 1.2x the bare loop{label}", median_ratio(long_row, cpu)))
        text = f"3,000 entries, default budget: <= 1.2x the bare loop posting the selection{label}"
        checks.append((text, median_ratio(default, cpu)))
        text = f"flat: 10,000 entries within 1.2x of 1,000 per send, beyond the JSON{label}"
        checks.append((text, large / small))
        figures = f"10,000 entries {large * 1000:.2f} ms, 1,000 {small * 1000:.2f}"
        print(f"  beyond carrying the JSON{label}: {figures}")
    for text, value in checks:
        print(f"  {'met    ' if value <= 1.2 else 'NOT met'}  {text} ({value:.2f})")


def median_ratio(row: dict[str, Any], cpu: bool) -> float:
    return statistics.median(ratios(row, cpu))


if __name__ == "__main__":
    main()
