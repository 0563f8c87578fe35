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
from .base import conflict_error
from .session import Along
from .sql import CLAIM_WITH_APPEND, SQLStore, durable_schema

INSTALL_HINT = "pip install 'agentcore[postgres]'"

# Any constant works: it only keeps two processes from creating the schema at the same moment.
_SCHEMA_LOCK = 0x6167_656E_7463
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS agentcore_sessions "
    "(id TEXT PRIMARY KEY, length INTEGER NOT NULL, updated_at DOUBLE PRECISION NOT NULL)",
    # The (session, idx) key is the backstop of the length check: an entry index is written once.
    "CREATE TABLE IF NOT EXISTS agentcore_entries "
    "(session TEXT NOT NULL, idx INTEGER NOT NULL, entry TEXT NOT NULL, PRIMARY KEY (session, idx))",
    *durable_schema("DOUBLE PRECISION", "BIGINT", "BIGSERIAL PRIMARY KEY"),
)
_NOW = "EXTRACT(EPOCH FROM clock_timestamp())::double precision"

# One statement, so one transaction and one round trip: claim the session row only if it holds
# exactly the expected length (an UPDATE locks the row, and a concurrent writer re-checks the
# WHERE against the committed length), then insert the entries only if the claim succeeded.
# Under a lease the claim also needs the run's fence, read FOR SHARE: a takeover (which updates
# that row) waits for this append to commit, or this append sees the takeover and writes nothing.
_INSERT_ENTRIES = (
    "INSERT INTO agentcore_entries (session, idx, entry) "
    "SELECT claimed.id, %(expected)s + u.o - 1, u.e "
    "FROM claimed, unnest(%(texts)s::text[]) WITH ORDINALITY AS u(e, o)"
)
_FENCED = (
    "EXISTS (SELECT 1 FROM agentcore_runs WHERE session = %(id)s AND owner = %(owner)s "
    "AND generation = %(generation)s FOR SHARE)"
)


def _claim_and_insert(new_session: bool, fenced: bool) -> str:
    fence = _FENCED if fenced else "TRUE"
    if new_session:
        # A new session: the row must not exist yet (a second creator waits, then inserts nothing).
        claim = (
            "INSERT INTO agentcore_sessions (id, length, updated_at) "
            f"SELECT %(id)s, %(length)s, {_NOW} WHERE {fence} ON CONFLICT (id) DO NOTHING RETURNING id"
        )
    else:
        claim = (
            f"UPDATE agentcore_sessions SET length = %(length)s, updated_at = {_NOW} "
            f"WHERE id = %(id)s AND length = %(expected)s AND {fence} RETURNING id"
        )
    return f"WITH claimed AS ({claim}) " + _INSERT_ENTRIES


_CLAIM_AND_INSERT = {
    (new, fenced): _claim_and_insert(new, fenced) for new in (False, True) for fenced in (False, True)
}


class PostgresStore(SQLStore):
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

    _NOW = _NOW
    _FOR_UPDATE = " FOR UPDATE"
    _FOR_SHARE = " FOR SHARE"

    def __repr__(self) -> str:
        return "PostgresStore(...)"

    @contextlib.contextmanager
    def _db(self, write: bool) -> Iterator[_Connection]:
        """The connection under the lock (`?` placeholders); with `write`, inside one transaction."""
        with self._guard() as connection:
            if not write:
                yield _Connection(connection)
                return
            with connection.transaction():
                yield _Connection(connection)

    def load_texts(self, id: str) -> list[str]:
        with self._guard() as connection:
            rows = connection.execute(
                "SELECT entry FROM agentcore_entries WHERE session = %s ORDER BY idx", (id,)
            ).fetchall()
            return [row[0] for row in rows]

    def append_texts(
        self, id: str, texts: list[str], expected_length: int, along: Along | None = None
    ) -> int:
        along = along or Along()
        fence = along.fence
        owner, generation = fence if fence is not None else (None, None)
        params = {
            "id": id,
            "expected": expected_length,
            "length": expected_length + len(texts),
            "texts": texts,
            "owner": owner,
            "generation": generation,
        }
        statement = _CLAIM_AND_INSERT[expected_length == 0, fence is not None]
        with self._guard() as connection:
            if texts:
                try:
                    written = self._claim_and_insert(connection, statement, params, along)
                except self._psycopg.errors.UniqueViolation:
                    written = 0
                if written == len(texts):
                    return expected_length + len(texts)
            self._check_fence(_Connection(connection), id, fence)
            row = connection.execute("SELECT length FROM agentcore_sessions WHERE id = %s", (id,)).fetchone()
            stored = int(row[0]) if row else 0
            if stored != expected_length:
                raise conflict_error(id, expected_length, stored)
            return stored

    def _claim_and_insert(self, connection: Any, statement: str, params: dict[str, Any], along: Along) -> int:
        """Run the append statement; returns the entries written (0: the claim failed)."""
        if not along.dequeue and not along.claims:
            return int(connection.execute(statement, params).rowcount)
        # Delivered steer / follow-up messages leave their queue, and the calls the entry carries
        # are recorded as started, with the entries: one transaction, so a crash can neither lose
        # nor repeat one.
        with connection.transaction():
            written = int(connection.execute(statement, params).rowcount)
            if written != len(params["texts"]):
                return written
            if along.dequeue:
                connection.execute(
                    "DELETE FROM agentcore_queue WHERE session = %s AND qid = ANY(%s)",
                    (params["id"], list(along.dequeue)),
                )
            if along.claims:
                _Connection(connection).executemany(
                    CLAIM_WITH_APPEND.format(now=_NOW), [(params["id"], *claim) for claim in along.claims]
                )
            return written

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
        with self._db(write=True) as db:
            db.execute("DELETE FROM agentcore_entries WHERE session = ?", (id,))
            db.execute("DELETE FROM agentcore_sessions WHERE id = ?", (id,))
            self.delete_run_state(db, id)

    def close(self) -> None:
        self._close_keeper()
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


class _Connection:
    """A psycopg connection that takes the `?` placeholders of the shared SQL (store/sql.py)."""

    __slots__ = ("connection",)

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    def execute(self, sql: str, params: Any = ()) -> Any:
        return self.connection.execute(_translate(sql), params)

    def executemany(self, sql: str, rows: Any) -> None:
        with self.connection.cursor() as cursor:
            cursor.executemany(_translate(sql), rows)


_translated: dict[str, str] = {}


def _translate(sql: str) -> str:
    translated = _translated.get(sql)
    if translated is None:
        translated = _translated[sql] = sql.replace("%", "%%").replace("?", "%s")
    return translated


def _import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise AgentError(
            f"PostgresStore needs psycopg 3, which is not installed: {INSTALL_HINT}", kind="config"
        ) from exc
    return psycopg
