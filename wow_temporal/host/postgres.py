"""The domain host's store on PostgreSQL: the connection URI (its password never shown) and the
`eventsourcing` package's PostgreSQL recorders on a psycopg connection pool.

The URI is handed to libpq whole, so every parameter it takes (`sslmode`, several hosts, ...)
works, and a password it does not carry comes from `PGPASSWORD` or a password file (`PGPASSFILE`,
`?passfile=`, `~/.pgpass`), as for `psql`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from wow_temporal.errors import WowTemporalError

if TYPE_CHECKING:
    from eventsourcing.postgres import PostgresDatastore, PostgresProcessRecorder
    from psycopg import sql

__all__ = ["Dsn", "DsnError", "PostgresLeases", "is_postgres", "open_postgres"]

_SCHEMES = ("postgresql://", "postgres://")
_USERINFO = re.compile(r"^(postgres(?:ql)?://[^/?#@:]*):[^/?#]*@", re.IGNORECASE)
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


_CREATE_TABLES_LOCK = 0x776F775F686F7374
"""The advisory lock a host holds while it makes the store's tables ("wow_host")."""


class DsnError(WowTemporalError, ValueError):
    """A PostgreSQL URI that cannot be used (malformed, or psycopg is not installed)."""


def is_postgres(location: str) -> bool:
    """True for a `postgresql://` (or `postgres://`) URI; anything else is a SQLite path."""
    return location.lower().startswith(_SCHEMES)


def _masked(uri: str) -> str:
    return _QUERY_PASSWORD.sub(r"\1***", _USERINFO.sub(r"\1:***@", uri))


class Dsn:
    """A PostgreSQL connection URI, checked by libpq's rules; `str` and `repr` mask its password."""

    __slots__ = ("_uri", "shown")

    def __init__(self, uri: str) -> None:
        self._uri = uri
        self.shown = _masked(uri)
        """The URI with its password as `***`: what logs and errors say."""
        try:
            import psycopg
            from psycopg.conninfo import conninfo_to_dict
        except ImportError:
            raise DsnError(
                f"{self.shown}: a PostgreSQL store needs psycopg: "
                "pip install 'wow-temporal[postgres]'"
            ) from None
        try:
            conninfo_to_dict(uri)
        except psycopg.Error as error:
            raise DsnError(f"{self.shown}: not a PostgreSQL URI: {self.scrub(error)}") from None

    def scrub(self, error: object) -> str:
        """`error`'s text on one line, with the password, should it quote it, masked."""
        text = " ".join(str(error).split())
        for secret in _secrets(self._uri):
            text = text.replace(secret, "***")
        return text

    def __str__(self) -> str:
        return self.shown

    def __repr__(self) -> str:
        return f"Dsn({self.shown!r})"


def _secrets(uri: str) -> list[str]:
    found = re.findall(r"^postgres(?:ql)?://[^/?#@:]*:([^/?#]*)@", uri, re.IGNORECASE)
    found += re.findall(r"[?&]password=([^&#]*)", uri, re.IGNORECASE)
    return [secret for secret in found if secret]


class PostgresLeases:
    """The followers' leases (`host.lease`): a row per follower, its holder and the deadline,
    by the database's clock."""

    def __init__(self, datastore: PostgresDatastore) -> None:
        from psycopg import sql

        self._datastore = datastore
        table = sql.Identifier(datastore.schema, "wow_follower_leases")
        self.create = sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (name text PRIMARY KEY, holder text NOT NULL, "
            "expires timestamptz NOT NULL)"
        ).format(table)
        self._claim = sql.SQL(
            "INSERT INTO {0} AS lease (name, holder, expires) "
            "SELECT name, %(holder)s, now() + make_interval(secs => %(ttl)s) "
            "FROM unnest(%(names)s::text[]) AS name "
            "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires = excluded.expires "
            "WHERE lease.holder = excluded.holder OR lease.expires < now() "
            "RETURNING name"
        ).format(table)
        self._release = sql.SQL("DELETE FROM {} WHERE holder = %s AND name = ANY(%s)").format(table)
        self._holders = sql.SQL("SELECT name, holder FROM {} WHERE expires >= now()").format(table)

    def _run(
        self, statement: sql.Composed, params: Sequence[object] | Mapping[str, object]
    ) -> list[dict[str, Any]]:
        with self._datastore.transaction(commit=True) as cursor:
            cursor.execute(statement, params)
            return list(cursor.fetchall()) if cursor.description else []

    def claim(self, names: Sequence[str], holder: str, ttl_s: float) -> set[str]:
        rows = self._run(self._claim, {"names": list(names), "holder": holder, "ttl": ttl_s})
        return {row["name"] for row in rows}

    def release(self, names: Sequence[str], holder: str) -> None:
        self._run(self._release, (holder, list(names)))

    def holders(self) -> dict[str, str]:
        return {row["name"]: row["holder"] for row in self._run(self._holders, ())}


def open_postgres(
    dsn: Dsn,
) -> tuple[
    PostgresDatastore, PostgresProcessRecorder, Callable[[int, str], int], PostgresLeases
]:
    """A datastore on `dsn` (checked by one connection first, so a wrong host or password is
    one clear error), its recorder with the tables made, how many rows of a topic follow a
    notification id, and the followers' leases."""
    import psycopg
    from eventsourcing.persistence import OperationalError, PersistenceError
    from eventsourcing.postgres import PostgresDatastore, PostgresProcessRecorder
    from psycopg import sql
    from psycopg.rows import dict_row

    try:  # one connection first: a wrong host or password is one clear error, not the pool's
        conn = psycopg.connect(dsn._uri, connect_timeout=10, autocommit=True)
    except psycopg.Error as error:
        raise OperationalError(dsn.scrub(error)) from None
    # the URI's parts are libpq's to read: the pool connects with it whole (the keyword
    # arguments PostgresDatastore puts there would override it, so only the row factory stays)
    datastore = PostgresDatastore(
        "", "", "", "", "", pool_size=1, max_overflow=4, originator_id_type="text"
    )
    datastore.pool.conninfo = dsn._uri
    datastore.pool.kwargs = {"row_factory": dict_row}
    recorder = PostgresProcessRecorder(datastore)
    leases = PostgresLeases(datastore)
    try:
        with conn:
            # hosts starting at once would race in CREATE TABLE IF NOT EXISTS (a duplicate
            # pg_type row): one makes the tables at a time, under a session advisory lock
            conn.execute("SELECT pg_advisory_lock(%s)", (_CREATE_TABLES_LOCK,))
            recorder.create_table()
            conn.execute(leases.create)
    except (psycopg.Error, PersistenceError) as error:
        datastore.close()
        raise OperationalError(dsn.scrub(error)) from None
    statement = sql.SQL(
        "SELECT COUNT(*) AS n FROM {}.{} WHERE notification_id > %s AND topic = %s"
    ).format(sql.Identifier(datastore.schema), sql.Identifier(recorder.events_table_name))

    def count_after(position: int, topic: str) -> int:
        with datastore.transaction(commit=False) as cursor:
            cursor.execute(statement, (position, topic))
            row = cursor.fetchone()
        assert row is not None
        return int(row["n"])

    return datastore, recorder, count_after, leases
