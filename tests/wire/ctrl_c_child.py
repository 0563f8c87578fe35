"""Child process of test_ctrl_c_ends_the_request_in_every_phase: for each scenario, the main
thread sends; a helper thread waits for the phase and delivers SIGINT to this process.

Prints one JSON line: {"ran": n, "failures": [...]}.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading

from phases import cases, history_problems, scenario

from agentcore import Agent

BOUND_S = 20.0


def one(phase: str, behaviour: str, cert: tuple[str, str]) -> str | None:
    with scenario(phase, behaviour, cert) as s:
        agent = Agent(config=s.config, callbacks=s.callbacks)
        ended = threading.Event()
        seen: list[bool] = []

        def interrupt() -> None:
            # Interrupt even when the phase was not seen: the send would otherwise never end.
            seen.append(s.reached(BOUND_S))
            if not ended.is_set():
                os.kill(os.getpid(), signal.SIGINT)

        helper = threading.Thread(target=interrupt)
        helper.start()
        outcome = "returned"
        try:
            agent.send(s.input)
        except KeyboardInterrupt:
            outcome = "interrupted"
        except Exception as exc:
            outcome = f"raised {exc!r}"
        finally:
            ended.set()
            helper.join()
            agent.close()
        if seen != [True]:
            return f"{phase}/{behaviour}: the phase was never reached ({outcome})"
        if outcome != "interrupted":
            return f"{phase}/{behaviour}: {outcome}"
        problems = history_problems(agent.history, s.input)
        return f"{phase}/{behaviour}: {problems}" if problems else None


def main() -> None:
    cert = tuple(json.loads(sys.argv[1]))
    failures = []
    for phase, behaviour in cases():
        failure = one(phase, behaviour, cert)  # type: ignore[arg-type]
        if failure:
            failures.append(failure)
    print(json.dumps({"ran": len(cases()), "failures": failures}))


if __name__ == "__main__":
    main()
