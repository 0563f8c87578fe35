"""Sessions on PostgreSQL (psycopg 3, extra `agentcore[postgres]`), for workers on many machines.

    store = PostgresStore("postgresql://app@db/chats")
    agent = Agent(config=..., session=store.session(user_id))

An append is one statement (so one transaction) that claims the session's row only while it holds
the expected length, and inserts the entries only when the claim succeeded: two writers of one
session are serialised by the row lock on the server, wherever they run.
psycopg is imported when a store is made, never by `import agentcore`.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

from ..errors import AgentError
from . import TextStore, conflict_error

INSTALL_HINT = "pip install 'agentcore[postgres]'"

# Any constant works: it only keeps two processes from creating the schema at the same moment.
_SCHEMA_LOCK = 0x6167_656E_7463
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS agentcore_sessions "
    "(id TEXT PRIMARY KEY, length INTEGER NOT NULL, updated_at DOUBLE PRECISION NOT NULL)",
    # The (session, idx) key is the backstop of the length check: an entry index is written once.
    "CREATE TABLE IF NOT EXISTS agentcore_entries "
    "(session TEXT NOT NULL, idx INTEGER NOT NULL, entry TEXT NOT NULL, PRIMARY KEY (session, idx))",
)
_NOW = "EXTRACT(EPOCH FROM clock_timestamp())::double precision"

# One statement, so one transaction and one round trip: claim the session row only if it holds
# exactly the expected length (an UPDATE locks the row, and a concurrent writer re-checks the
# WHERE against the committed length), then insert the entries only if the claim succeeded.
_INSERT_ENTRIES = (
    "INSERT INTO agentcore_entries (session, idx, entry) "
    "SELECT claimed.id, %(expected)s + u.o - 1, u.e "
    "FROM claimed, unnest(%(texts)s::text[]) WITH ORDINALITY AS u(e, o)"
)
_CLAIM_AND_INSERT = {
    False: "WITH claimed AS (UPDATE agentcore_sessions "
    f"SET length = %(length)s, updated_at = {_NOW} "
    "WHERE id = %(id)s AND length = %(expected)s RETURNING id) " + _INSERT_ENTRIES,
    # A new session: the row must not exist yet (a second creator waits, then inserts nothing).
    True: "WITH claimed AS (INSERT INTO agentcore_sessions (id, length, updated_at) "
    f"VALUES (%(id)s, %(length)s, {_NOW}) ON CONFLICT (id) DO NOTHING RETURNING id) " + _INSERT_ENTRIES,
}


class PostgresStore(TextStore):
    """Sessions in the PostgreSQL database at `dsn` (tables created on first use).

    One connection per process, shared by its threads under a lock, opened on first use and
    opened again after it breaks.

    Raises:
        AgentError: kind "config" when psycopg is not installed.
    """

    def __init__(self, dsn: str) -> None:
        if not isinstance(dsn, str) or not dsn:
            raise AgentError(f"PostgresStore needs a DSN string, got {dsn!r}", kind="config")
        self._psycopg = _import_psycopg()
        self.dsn = dsn
        self._lock = threading.Lock()
        self._connection: Any = None
        self._pid = 0

    def __repr__(self) -> str:
        return "PostgresStore(...)"

    def _load_texts(self, id: str) -> list[str]:
        with self._guard() as connection:
            rows = connection.execute(
                "SELECT entry FROM agentcore_entries WHERE session = %s ORDER BY idx", (id,)
            ).fetchall()
            return [row[0] for row in rows]

    def _append_texts(self, id: str, texts: list[str], expected_length: int) -> int:
        params = {
            "id": id,
            "expected": expected_length,
            "length": expected_length + len(texts),
            "texts": texts,
        }
        with self._guard() as connection:
            if texts:
                try:
                    written = connection.execute(_CLAIM_AND_INSERT[expected_length == 0], params).rowcount
                except self._psycopg.errors.UniqueViolation:
                    written = 0
                if written == len(texts):
                    return expected_length + len(texts)
            row = connection.execute("SELECT length FROM agentcore_sessions WHERE id = %s", (id,)).fetchone()
            stored = int(row[0]) if row else 0
            if stored != expected_length:
                raise conflict_error(id, expected_length, stored)
            return stored

    def sessions(self) -> list[dict[str, Any]]:
        """Every stored session, the most recently updated first."""
        with self._guard() as connection:
            rows = connection.execute(
                "SELECT id, length, updated_at FROM agentcore_sessions WHERE length > 0 "
                "ORDER BY updated_at DESC, id"
            ).fetchall()
            return [{"id": row[0], "length": row[1], "updated_at": row[2]} for row in rows]

    def delete(self, id: str) -> None:
        """Remove session `id` and its entries (nothing happens for an unknown id)."""
        with self._guard() as connection, connection.transaction():
            connection.execute("DELETE FROM agentcore_entries WHERE session = %s", (id,))
            connection.execute("DELETE FROM agentcore_sessions WHERE id = %s", (id,))

    def close(self) -> None:
        with self._lock:
            self._drop_connection()

    @contextlib.contextmanager
    def _guard(self) -> Iterator[Any]:
        """Hold the connection lock; a database failure becomes an AgentError (and a reconnect)."""
        with self._lock:
            try:
                yield self._connect()
            except self._psycopg.Error as exc:
                # A lost connection is opened again by the next call. This one still fails: an
                # append whose commit may or may not have landed must not be replayed blindly.
                if self._connection is not None and (self._connection.closed or self._connection.broken):
                    self._drop_connection()
                raise AgentError(f"session store (PostgreSQL): {exc}", kind="unknown", cause=exc) from exc

    def _connect(self) -> Any:
        if self._connection is not None and self._pid == os.getpid() and not self._connection.closed:
            return self._connection
        psycopg = self._psycopg
        try:
            connection = psycopg.connect(self.dsn, autocommit=True)
        except psycopg.Error as exc:
            raise AgentError(
                f"cannot connect to the session store (PostgreSQL): {exc}", kind="config"
            ) from exc
        with connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            for statement in _SCHEMA:
                connection.execute(statement)
        self._connection, self._pid = connection, os.getpid()
        return connection

    def _drop_connection(self) -> None:
        # A connection inherited over fork belongs to the parent: forget it without closing it.
        if self._connection is not None and self._pid == os.getpid():
            with contextlib.suppress(Exception):
                self._connection.close()
        self._connection = None


def _import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise AgentError(
            f"PostgresStore needs psycopg 3, which is not installed: {INSTALL_HINT}", kind="config"
        ) from exc
    return psycopg
