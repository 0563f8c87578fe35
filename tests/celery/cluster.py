"""A real Redis server and real Celery worker processes, for the tests and scripts/stress.py --celery.

    redis = RedisServer(tmp_dir)                      # redis-server on a free port, data in tmp_dir
    broker = redis.url(db=3)
    worker = Worker("w1", "prefork", 2, env, logs)    # celery -A celery_tasks worker, ready on return
    worker.pids()                                     # its processes (the pool's children too)
    worker.kill()                                     # SIGKILL to its whole process group
    redis.stop()

Standard library only. Each worker runs in a session of its own, so a kill reaches its pool
children and nothing else; the tool processes an agent starts leave that group, and end when
their parent's pipe closes.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
REDIS_SERVER = "/usr/bin/redis-server"
START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def redis_binary() -> str | None:
    found = shutil.which("redis-server")
    if found:
        return found
    return REDIS_SERVER if os.access(REDIS_SERVER, os.X_OK) else None


class RedisServer:
    """`redis-server` on 127.0.0.1 and a free port, nothing persisted, its files in `folder`."""

    def __init__(self, folder: Path, binary: str | None = None) -> None:
        binary = binary or redis_binary()
        if binary is None:
            raise FileNotFoundError("redis-server is not installed (apt-get install redis-server)")
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(folder)]
        args += ["--save", "", "--appendonly", "no", "--databases", "256", "--protected-mode", "no"]
        args += ["--logfile", str(folder / "redis.log")]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_ready()

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited: {self._log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not answer within {START_TIMEOUT_S} s: {self._log_tail()}")

    def _log_tail(self) -> str:
        log = self.folder / "redis.log"
        return log.read_text()[-2000:] if log.exists() else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


class Worker:
    """`celery -A <app> worker` with `pool` and `concurrency` (consuming `queue`, when given; else
    Celery's default queue); its log in `logs/<name>.log`."""

    def __init__(
        self,
        name: str,
        pool: str,
        concurrency: int,
        env: dict[str, str],
        logs: Path,
        *,
        app: str = "celery_tasks",
        cwd: Path = HERE,
        queue: str | None = None,
    ) -> None:
        self.name, self.pool, self.concurrency = name, pool, concurrency
        self.log = logs / f"{name}.log"
        self.log.write_text("")
        path = os.pathsep.join(p for p in (str(ROOT), str(cwd), env.get("PYTHONPATH", "")) if p)
        args = [sys.executable, "-m", "celery", "-A", app, "worker", "-P", pool, "-c", str(concurrency)]
        args += ["-n", f"{name}@%h", "-l", "INFO", "--logfile", str(self.log)]
        if queue is not None:
            args += ["-Q", queue]
        # No broadcast chatter between workers: each test's workers start and die on their own.
        args += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
        with open(logs / f"{name}.stderr", "wb") as stderr:
            self.process = subprocess.Popen(
                args,
                env={**os.environ, **env, "PYTHONPATH": path},
                cwd=cwd,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"worker {self.name} exited: {self.output()}")
            if " ready." in self.log.read_text():
                return
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"worker {self.name} was not ready within {START_TIMEOUT_S} s: {self.output()}")

    def output(self) -> str:
        stderr = self.log.with_suffix(".stderr")
        text = self.log.read_text() + (stderr.read_text() if stderr.exists() else "")
        return text[-4000:]

    def pids(self) -> set[int]:
        """The worker's processes: the main one and its pool's children."""
        found = {self.process.pid}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if os.getpgid(int(entry)) == self.process.pid:
                        found.add(int(entry))
                except OSError:
                    continue
        return found

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole worker (a lost machine): the main process and its pool at once."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()

    def stop(self) -> None:
        """End the worker at the end of a test (nothing of it is worth waiting for)."""
        if self.alive:
            self.kill()
