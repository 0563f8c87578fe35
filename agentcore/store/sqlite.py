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
from .base import conflict_error
from .session import Along
from .sql import CLAIM_WITH_APPEND, SQLStore, durable_schema, superseded_error

# How long a writer waits for another process's write lock before giving up with an error.
BUSY_TIMEOUT_S = 30.0
# While runs are held here, the keeper checkpoints the WAL this often, on a connection of its own
# (below SQLite's 1000-page autocheckpoint in practice), so that a run's commit rarely pays for it.
CHECKPOINT_EVERY_S = 1.0

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS agentcore_sessions "
    "(id TEXT PRIMARY KEY, length INTEGER NOT NULL, updated_at REAL NOT NULL)",
    # The (session, idx) key is the backstop of the length check: an entry index is written once.
    "CREATE TABLE IF NOT EXISTS agentcore_entries "
    "(session TEXT NOT NULL, idx INTEGER NOT NULL, entry TEXT NOT NULL, PRIMARY KEY (session, idx))",
    *durable_schema("REAL", "INTEGER", "INTEGER PRIMARY KEY AUTOINCREMENT"),
)


class SQLiteStore(SQLStore):
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
        self._checkpointer: sqlite3.Connection | None = None
        self._checkpointer_pid = 0
        self._checkpointed = 0.0
        self._check_writable()

    # SQLite's own clock (the machine's): every process on one file shares it.
    _NOW = "((julianday('now') - 2440587.5) * 86400.0)"

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    def _db(self, write: bool) -> _Db:
        """The connection under the lock; with `write`, inside one `BEGIN IMMEDIATE` transaction."""
        return _Db(self, write)

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

    def load_texts(self, id: str) -> list[str]:
        with self._guard():
            rows = self._connect().execute(
                "SELECT entry FROM agentcore_entries WHERE session = ? ORDER BY idx", (id,)
            )
            return [row[0] for row in rows]

    def append_texts(
        self, id: str, texts: list[str], expected_length: int, along: Along | None = None
    ) -> int:
        along = along or _NOTHING_ALONG
        with self._db(write=True) as connection:
            stored = self._stored_length(connection, id, along)
            if stored != expected_length:
                raise conflict_error(id, expected_length, stored)
            if not texts:
                return stored
            if len(texts) == 1:  # a run appends one entry at a time: the cheaper call
                connection.execute(_INSERT_ENTRY, (id, stored, texts[0]))
            else:
                connection.executemany(
                    _INSERT_ENTRY, [(id, stored + offset, text) for offset, text in enumerate(texts)]
                )
            length = stored + len(texts)
            connection.execute(
                _SESSION_LENGTH[stored == 0],
                (id, length, time.time()) if stored == 0 else (length, time.time(), id),
            )
            if along.dequeue:
                # Delivered steer / follow-up messages leave their queue with the entries that
                # deliver them: in one transaction, so a crash can neither lose nor repeat one.
                marks = ", ".join("?" * len(along.dequeue))
                connection.execute(
                    f"DELETE FROM agentcore_queue WHERE session = ? AND qid IN ({marks})",
                    (id, *along.dequeue),
                )
            if along.claims:
                connection.executemany(
                    CLAIM_WITH_APPEND.format(now=self._NOW), [(id, *claim) for claim in along.claims]
                )
            return length

    def _stored_length(self, connection: sqlite3.Connection, id: str, along: Along) -> int:
        """The stored length; under a lease, first that the lease is still this run's (one query)."""
        if along.fence is None:
            row = connection.execute("SELECT length FROM agentcore_sessions WHERE id = ?", (id,)).fetchone()
            return int(row[0]) if row else 0
        row = connection.execute(
            "SELECT (SELECT length FROM agentcore_sessions WHERE id = ?), "
            "EXISTS (SELECT 1 FROM agentcore_runs WHERE session = ? AND owner = ? AND generation = ?)",
            (id, id, *along.fence),
        ).fetchone()
        if not row[1]:
            raise superseded_error(id)
        return int(row[0] or 0)

    def sessions(self) -> list[dict[str, Any]]:
        """Every stored session, the most recently updated first."""
        with self._guard():
            rows = self._connect().execute(
                "SELECT id, length, updated_at FROM agentcore_sessions ORDER BY updated_at DESC, id"
            )
            return [{"id": row[0], "length": row[1], "updated_at": row[2]} for row in rows]

    def delete(self, id: str) -> None:
        """Remove session `id` and its entries (nothing happens for an unknown id)."""
        with self._db(write=True) as connection:
            connection.execute("DELETE FROM agentcore_entries WHERE session = ?", (id,))
            connection.execute("DELETE FROM agentcore_sessions WHERE id = ?", (id,))
            self.delete_run_state(connection, id)

    def close(self) -> None:
        self._close_keeper()
        with self._lock:
            if self._connection is not None and self._pid == os.getpid():
                self._connection.close()
            if self._checkpointer is not None and self._checkpointer_pid == os.getpid():
                self._checkpointer.close()
            self._connection = self._checkpointer = None

    def maintain(self) -> None:
        """A PASSIVE checkpoint, from the keeper's thread on its own connection: it waits for no
        reader or writer, and its fsync is not paid by the run that happens to cross SQLite's
        autocheckpoint threshold."""
        now = time.monotonic()
        if now - self._checkpointed < CHECKPOINT_EVERY_S or self._pid != os.getpid():
            return
        self._checkpointed = now
        if self._checkpointer is None:
            self._checkpointer = sqlite3.connect(
                self.path, timeout=0, isolation_level=None, check_same_thread=False
            )
        try:
            self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.OperationalError:
            pass  # busy: another checkpoint runs; the next tick tries again

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """Hold the connection lock; a database failure becomes an AgentError naming the file."""
        with self._lock:
            try:
                yield
            except sqlite3.Error as exc:
                raise self._store_error(exc) from exc

    def _store_error(self, exc: sqlite3.Error) -> AgentError:
        return AgentError(f"session store {self.path!r}: {exc}", kind="unknown", cause=exc)

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


_NOTHING_ALONG = Along()
_INSERT_ENTRY = "INSERT INTO agentcore_entries (session, idx, entry) VALUES (?, ?, ?)"
_SESSION_LENGTH = {
    True: "INSERT INTO agentcore_sessions (id, length, updated_at) VALUES (?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET length = excluded.length, updated_at = excluded.updated_at",
    False: "UPDATE agentcore_sessions SET length = ?, updated_at = ? WHERE id = ?",
}


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class _Db:
    """`store._db(write)`: the lock, the connection and (for a write) one transaction.

    A plain class rather than nested generator context managers: a run enters it once per entry
    it appends, so its own cost counts (bench/journal_cost.py).
    """

    __slots__ = ("connection", "store", "write")

    def __init__(self, store: SQLiteStore, write: bool) -> None:
        self.store, self.write = store, write

    def __enter__(self) -> sqlite3.Connection:
        store = self.store
        store._lock.acquire()
        try:
            connection = self.connection = store._connect()
            if self.write:
                connection.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            store._lock.release()
            if isinstance(exc, sqlite3.Error):
                raise store._store_error(exc) from exc
            raise
        return connection

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, *rest: object) -> None:
        store = self.store
        try:
            if self.write:
                self.connection.execute("COMMIT" if kind is None else "ROLLBACK")
        except sqlite3.Error as failed:
            raise store._store_error(failed) from failed
        finally:
            store._lock.release()
        if isinstance(exc, sqlite3.Error):
            raise store._store_error(exc) from exc
