"""Sessions in one SQLite file (stdlib `sqlite3`): the embedded default.

    store = SQLiteStore("chats.db")
    store.append("user-42", [{"role": "user", "content": "hi"}], expected_length=0)  # -> 1

WAL mode lets readers run while one process writes. Each append is one `BEGIN IMMEDIATE`
transaction — it takes the write lock before it reads the length — so the length check and the
insert cannot be split by another writer, in this process or another one.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Any

from ..errors import AgentError
from . import TextStore, conflict_error

# How long a writer waits for another process's write lock before giving up with an error.
BUSY_TIMEOUT_S = 30.0

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS agentcore_sessions "
    "(id TEXT PRIMARY KEY, length INTEGER NOT NULL, updated_at REAL NOT NULL)",
    # The (session, idx) key is the backstop of the length check: an entry index is written once.
    "CREATE TABLE IF NOT EXISTS agentcore_entries "
    "(session TEXT NOT NULL, idx INTEGER NOT NULL, entry TEXT NOT NULL, PRIMARY KEY (session, idx))",
)


class SQLiteStore(TextStore):
    """Sessions in the SQLite file at `path` (created with its schema when the store is made).

    Args:
        path: the database file.
        busy_timeout_s: how long a write waits for another writer's lock.

    Raises:
        AgentError: kind "config" when the file cannot be opened or written (a read-only file, a
            folder that does not exist or cannot be written): now, never at a later send.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = os.fspath(path)
        self.busy_timeout_s = busy_timeout_s
        # One connection per process, shared by its threads under a lock; a forked child opens
        # its own (an SQLite connection must never cross a fork).
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._pid = 0
        self._check_writable()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    def _check_writable(self) -> None:
        """A write rolled back: SQLite opens a file it cannot write read-only and says so only
        at the first write, which would otherwise be a send's first append."""
        read_only = _read_only_by_mode(self.path)
        if read_only is not None:
            raise _unusable(self.path, sqlite3.OperationalError(read_only))
        with self._lock:
            connection = self._connect()
            try:
                connection.execute("BEGIN IMMEDIATE")
                try:
                    connection.execute(
                        "INSERT OR REPLACE INTO agentcore_sessions (id, length, updated_at) VALUES (?, 0, 0)",
                        ("\x00agentcore write check",),
                    )
                finally:
                    connection.execute("ROLLBACK")
            except sqlite3.Error as exc:
                connection.close()
                self._connection = None
                raise _unusable(self.path, exc) from exc

    def _load_texts(self, id: str) -> list[str]:
        with self._guard():
            rows = self._connect().execute(
                "SELECT entry FROM agentcore_entries WHERE session = ? ORDER BY idx", (id,)
            )
            return [row[0] for row in rows]

    def _append_texts(self, id: str, texts: list[str], expected_length: int) -> int:
        with self._guard():
            connection = self._connect()
            with _write_transaction(connection):
                row = connection.execute(
                    "SELECT length FROM agentcore_sessions WHERE id = ?", (id,)
                ).fetchone()
                stored = row[0] if row else 0
                if stored != expected_length:
                    raise conflict_error(id, expected_length, stored)
                if not texts:
                    return stored
                connection.executemany(
                    "INSERT INTO agentcore_entries (session, idx, entry) VALUES (?, ?, ?)",
                    [(id, stored + offset, text) for offset, text in enumerate(texts)],
                )
                length = stored + len(texts)
                connection.execute(
                    "INSERT INTO agentcore_sessions (id, length, updated_at) VALUES (?, ?, ?) "
                    "ON CONFLICT (id) DO UPDATE "
                    "SET length = excluded.length, updated_at = excluded.updated_at",
                    (id, length, time.time()),
                )
                return length

    def sessions(self) -> list[dict[str, Any]]:
        """Every stored session, the most recently updated first."""
        with self._guard():
            rows = self._connect().execute(
                "SELECT id, length, updated_at FROM agentcore_sessions ORDER BY updated_at DESC, id"
            )
            return [{"id": row[0], "length": row[1], "updated_at": row[2]} for row in rows]

    def delete(self, id: str) -> None:
        """Remove session `id` and its entries (nothing happens for an unknown id)."""
        with self._guard():
            connection = self._connect()
            with _write_transaction(connection):
                connection.execute("DELETE FROM agentcore_entries WHERE session = ?", (id,))
                connection.execute("DELETE FROM agentcore_sessions WHERE id = ?", (id,))

    def close(self) -> None:
        with self._lock:
            if self._connection is not None and self._pid == os.getpid():
                self._connection.close()
            self._connection = None

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """Hold the connection lock; a database failure becomes an AgentError naming the file."""
        with self._lock:
            try:
                yield
            except sqlite3.Error as exc:
                raise AgentError(f"session store {self.path!r}: {exc}", kind="unknown", cause=exc) from exc

    def _connect(self) -> sqlite3.Connection:
        if self._connection is not None and self._pid == os.getpid():
            return self._connection
        deadline = time.monotonic() + self.busy_timeout_s
        delay = 0.005
        while True:
            try:
                connection = self._open()
                break
            except sqlite3.OperationalError as exc:
                # Two processes opening a new file at once: switching to WAL and creating the schema
                # can answer "database is locked" at once (SQLite skips the busy handler where
                # waiting could deadlock), so the setup itself waits out the other process.
                if not _is_busy(exc) or time.monotonic() + delay > deadline:
                    raise self._open_error(exc) from exc
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
            except sqlite3.Error as exc:
                raise self._open_error(exc) from exc
        self._connection, self._pid = connection, os.getpid()
        return connection

    def _open(self) -> sqlite3.Connection:
        connection = sqlite3.connect(
            self.path, timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            # In WAL mode NORMAL survives any crash of the process (the WAL is in the OS's hands
            # once written); only a power loss may roll back the last commits.
            connection.execute("PRAGMA synchronous = NORMAL")
            for statement in _SCHEMA:
                connection.execute(statement)
        except BaseException:
            connection.close()
            raise
        return connection

    def _open_error(self, exc: sqlite3.Error) -> AgentError:
        return _unusable(self.path, exc)


def _read_only_by_mode(path: str) -> str | None:
    """Why the file or its folder is read-only by its mode (no write bit for anyone), else None.

    A process running as root writes such a file all the same: the mode says the user meant it
    to stay as it is, and SQLite in WAL mode writes its -wal and -shm files beside it."""
    if path == ":memory:" or path.startswith("file:"):
        return None
    try:
        if os.path.exists(path) and not os.stat(path).st_mode & 0o222:
            return f"attempt to write a read-only file (mode {os.stat(path).st_mode & 0o777:o})"
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(folder) and not os.stat(folder).st_mode & 0o222:
            return f"its folder is read-only (mode {os.stat(folder).st_mode & 0o777:o})"
    except OSError:
        return None  # sqlite3 says what is wrong when it opens the file
    return None


def _unusable(path: str, exc: sqlite3.Error) -> AgentError:
    return AgentError(
        f"the session store {path!r} cannot be opened for writing: {exc} "
        "(check that its folder exists and that the file and the folder can be written)",
        kind="config",
        cause=exc,
    )


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class _write_transaction:
    """`BEGIN IMMEDIATE` … `COMMIT`, rolled back on any exception."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection

    def __enter__(self) -> None:
        self.connection.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        self.connection.execute("COMMIT" if kind is None else "ROLLBACK")
