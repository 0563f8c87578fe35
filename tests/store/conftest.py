"""Fixtures for the store suite: every test runs against SQLite and a real PostgreSQL.

    def test_x(store_spec):            # ("sqlite", "/tmp/.../s.db") or ("postgres", dsn)
        store = open_store(store_spec)

PostgreSQL is a throwaway cluster made for this test session (initdb + pg_ctl in a temp dir, on a
free port, as an unprivileged user since the server refuses to run as root), unless
AGENTCORE_TEST_POSTGRES_DSN names an existing server. Each test gets a schema of its own. Under
CI=true a missing server or psycopg fails the tests; elsewhere they are skipped.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from store_workers import Spec, open_store

DSN_ENV = "AGENTCORE_TEST_POSTGRES_DSN"
_UNPRIVILEGED_USER = "nobody"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"PostgreSQL tests cannot run under CI=true: {reason}")
    pytest.skip(reason)


def _pg_binaries() -> tuple[str, str] | None:
    """initdb and pg_ctl from PATH, else from the newest /usr/lib/postgresql/*/bin."""
    found = shutil.which("initdb"), shutil.which("pg_ctl")
    if found[0] and found[1]:
        return found[0], found[1]
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name.split(".")[0])
    )
    for bin_dir in reversed(versions):
        initdb, pg_ctl = Path(bin_dir, "initdb"), Path(bin_dir, "pg_ctl")
        if initdb.exists() and pg_ctl.exists():
            return str(initdb), str(pg_ctl)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Cluster:
    """A PostgreSQL cluster in a temp dir, run as an unprivileged user when we are root."""

    def __init__(self, initdb: str, pg_ctl: str) -> None:
        self.initdb, self.pg_ctl = initdb, pg_ctl
        self.root = Path(tempfile.mkdtemp(prefix="agentcore-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.user = pwd.getpwuid(os.geteuid())
        if os.geteuid() == 0:
            self.user = pwd.getpwnam(_UNPRIVILEGED_USER)
            os.chown(self.root, self.user.pw_uid, self.user.pw_gid)

    @property
    def dsn(self) -> str:
        # The unix socket in the temp dir: the same server as 127.0.0.1:port, with less per-query cost.
        return f"host={self.root} port={self.port} user=postgres dbname=postgres"

    def _run(self, *args: str) -> None:
        uid, gid = self.user.pw_uid, self.user.pw_gid

        def drop_privileges() -> None:
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(gid)
                os.setuid(uid)

        env = {**os.environ, "LC_ALL": "C", "LANG": "C", "HOME": str(self.root)}
        done = subprocess.run(
            args, preexec_fn=drop_privileges, env=env, cwd=self.root, capture_output=True, text=True
        )
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{args[0]} failed ({done.returncode}): {done.stderr}{done.stdout}\n{tail}")

    def start(self) -> None:
        self._run(
            self.initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"
        )
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            self.pg_ctl,
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.root / "server.log"),
            "-w",
            "start",
        )

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run(self.pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The DSN of a PostgreSQL server for this test session."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg is not installed: pip install 'agentcore[postgres]'")
    existing = os.environ.get(DSN_ENV)
    if existing:
        yield existing
        return
    binaries = _pg_binaries()
    if binaries is None:
        _unavailable("no initdb/pg_ctl found (apt-get install postgresql, or set " + DSN_ENV + ")")
        return
    cluster = _Cluster(*binaries)
    try:
        cluster.start()
        yield cluster.dsn
    finally:
        cluster.stop()


@pytest.fixture
def postgres_dsn(postgres_server: str) -> Iterator[str]:
    """A DSN whose search_path is a schema of this test's own, dropped afterwards."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    schema = f"agentcore_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
    yield make_conninfo(postgres_server, options=f"-c search_path={schema}")
    with psycopg.connect(postgres_server, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(params=["sqlite", "postgres"])
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> Spec:
    """How to open this test's store, as plain data a child process can be given too."""
    if request.param == "sqlite":
        return ("sqlite", str(tmp_path / "sessions.db"))
    return ("postgres", request.getfixturevalue("postgres_dsn"))


@pytest.fixture
def make_store(store_spec: Spec) -> Iterator[Callable[[], Any]]:
    """`make_store()`: a new store object (its own connection) on this test's database."""
    stores: list[Any] = []

    def make() -> Any:
        store = open_store(store_spec)
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()


@pytest.fixture
def store(make_store: Callable[[], Any]) -> Any:
    return make_store()
