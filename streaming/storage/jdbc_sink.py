"""The database sink (``streaming.storage.sink.Sink``): one table per target in a MariaDB,
MySQL or PostgreSQL database, reached over JDBC from the driver (schema work, the write's
transaction) and from the executors (the batch's rows, staged in parallel by Spark's own
JDBC writer).

Exactly once, without the database's help beyond a transaction:

1. The batch's rows (per-key winners, ``_action`` ``u`` or ``d``) go to a staging table
   of the target (``<meta>.<stage name>``), emptied first: Spark's JDBC writer, one
   connection per partition. A crash here leaves only the staging table half full; the
   batch run again empties it and stages again.
2. One transaction on the driver's connection: the slot table row of (app, target) is
   locked and read; a slot already recorded is skipped (the batch ran before); else the
   staged deletes, then the staged upserts (``INSERT ... ON DUPLICATE KEY UPDATE`` /
   ``INSERT ... ON CONFLICT DO UPDATE``), then the slot, commit together.

The staging table's columns are positional (``c0``, ``c1``, ...): Spark's JDBC writer
quotes a column name without escaping it, and upstream names are anything.

Schema work is rendered by ``schemas.dialects`` (sqlglot); every change and its cause is
a row of ``<meta>._history`` with the schema it made, which is also where the shards'
own types of the table's columns are read back from (a PostgreSQL type does not say
which MySQL type made it). MySQL and MariaDB commit each DDL on its own: a crash between
a change and its history row leaves the change made and unrecorded until the batch runs
again, which makes nothing twice (the table's columns are read first) and records the
change it finds made (its table there, or no statement left to run, while the history's
last schema is not the decision's). PostgreSQL runs both in one transaction.

Values reach SQL only as bound parameters; identifiers only through sqlglot's quoting.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlglot
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampNTZType

from coordinator.decisions import ApplyDDL, CreateTarget
from coordinator.ids import TargetId
from schemas.codec import schema_from_json, schema_to_json
from schemas.ddl import parse_create_table
from schemas.dialects import (
    Dialect,
    DialectConflict,
    alter_statements,
    create_schema,
    create_table,
    sqlglot_dialect,
    widens,
)
from schemas.model import ColumnType, TableSchema
from schemas.storage import TIME_COUNT_DIGITS
from streaming.faults import crash_point
from streaming.sql.quoting import ident
from streaming.storage.sink import Match, SinkError

__all__ = ["JdbcSink", "forget_made"]

DRIVERS = {
    "mariadb": "org.mariadb.jdbc.Driver",
    "mysql": "org.mariadb.jdbc.Driver",
    "postgresql": "org.postgresql.Driver",
}
# The sink's own tables, in the meta schema, as MySQL text rendered per dialect.
_SLOTS = parse_create_table(
    "CREATE TABLE _slots (app_id VARCHAR(191) NOT NULL, target VARCHAR(500) NOT NULL, "
    "slot BIGINT NOT NULL, PRIMARY KEY (app_id, target))"
)
_HISTORY = parse_create_table(
    "CREATE TABLE _history (target VARCHAR(500) NOT NULL, version BIGINT NOT NULL, "
    "ts TIMESTAMP(3) NOT NULL, operation VARCHAR(32) NOT NULL, cause LONGTEXT, "
    "schema_json LONGTEXT, PRIMARY KEY (target, version))"
)


_STRICT = "SET SESSION sql_mode = CONCAT_WS(',', @@SESSION.sql_mode, 'STRICT_ALL_TABLES')"
_UTC = ("SET SESSION time_zone = '+00:00'", "SET TIME ZONE 'UTC'")
# Temporal values are staged as text (``_staged_value``), which the database reads:
# Spark's JDBC writer hands them over as java.sql dates and timestamps, whose hybrid
# Julian calendar moved a DATETIME before 1582-10-15 by days (0001-01-01 was stored as
# 0001-01-03) and a DATE in the calendars' gap to another day.
# A TIME is kept as the text the CDC tool sent: Canal's and Maxwell's ``10:00:00``, or
# Debezium's MicroTime, a count of microseconds (``36000000000``), which no database reads
# as a time: the count is staged as ``[-]h:mm:ss.ffffff``.
_TEMPORAL = {
    "DATE": "DATE",
    "DATETIME": "TIMESTAMP",
    "TIMESTAMP": "TIMESTAMPTZ",
    "TIME": "INTERVAL",
}
_TEMPORAL_TEXT = 32  # 0000-01-01 00:00:00.000000 and a sign
# A count a BIGINT holds (a longer one is no TIME any column holds: a dead letter,
# schemas.storage.limit).
_TIME_COUNT = f"^-?[0-9]{{1,{TIME_COUNT_DIGITS}}}$"
_HOUR_US, _MINUTE_US, _SECOND_US = 3_600_000_000, 60_000_000, 1_000_000


def _time_text(col: Any) -> Any:
    """A TIME's value with a count of microseconds as ``[-]h:mm:ss.ffffff``; text as it is."""
    n = col.try_cast("bigint")
    a = F.abs(n)

    def part(rest: Any, unit: int) -> Any:  # exact: the numerator is a multiple of unit
        return ((rest - rest % unit) / unit).cast("bigint").cast("string")

    text = F.concat(
        F.when(n < 0, F.lit("-")).otherwise(F.lit("")),
        part(a, _HOUR_US),
        F.lit(":"),
        F.lpad(part(a % _HOUR_US, _MINUTE_US), 2, "0"),
        F.lit(":"),
        F.lpad(part(a % _MINUTE_US, _SECOND_US), 2, "0"),
        F.lit("."),
        F.lpad((a % _SECOND_US).cast("string"), 6, "0"),
    )
    return F.when(col.rlike(_TIME_COUNT), text).otherwise(col)


def _staged_value(col: Any, base: str | None) -> Any:
    """A column's value as staged: as it is, or a temporal value (``base``) as its ISO
    text, a TIMESTAMP's in UTC whatever the session's time zone, a TIME's count of
    microseconds as ``[-]h:mm:ss.ffffff``."""
    if base is None:
        return col
    if base == "TIME":
        return _time_text(col.cast("string"))
    if base == "TIMESTAMP":
        col = F.to_utc_timestamp(col, F.current_timezone())
    return col.cast("string")


def _staged_bit(col: Any, mysql: bool, length: int) -> Any:
    """A BIT value as staged. The job keeps it as MySQL's bytes of it (most significant
    first, ``streaming.sql.spark_types.value_expr``); Spark's JDBC writer would hand those
    bytes to MariaDB/MySQL as a string, which a BIT column reads as the characters' codes:
    staged as its number (a ``DECIMAL(20,0)``: 64 bits), which a BIT column takes as the
    value. PostgreSQL keeps BIT(1) as a BOOLEAN (staged as one) and BIT(n) as the bytes."""
    number = F.conv(F.hex(col), 16, 10)
    if mysql:
        return number.cast("decimal(20,0)")
    return number != F.lit("0") if length == 1 else col


def _bit_bytes(number: Any, length: int) -> Any:
    """A BIT(length) value read as its number, as MySQL's bytes of it (``_staged_bit``)."""
    digits = (length + 7) // 8 * 2
    return F.unhex(F.lpad(F.conv(number.cast("string"), 10, 16), digits, "0"))


# SQLSTATE class 22: data exceptions (a value the new type cannot hold), MySQL and PostgreSQL
_DATA_EXCEPTION = "22"


@dataclass(frozen=True)
class _Statement:
    sql: str
    params: tuple[Any, ...] = ()


def _data_exception(jvm: Any, e: Exception) -> str | None:
    """The SQLSTATE of a JDBC error raised through py4j when it says a value does not
    fit (class 22, or a ``java.sql.DataTruncation``, which MariaDB's driver raises with
    a state of its own); None for any other error."""
    sql_exception = jvm.java.lang.Class.forName("java.sql.SQLException")
    truncation = jvm.java.lang.Class.forName("java.sql.DataTruncation")
    java = getattr(e, "java_exception", None)
    while java is not None:
        if sql_exception.isInstance(java):
            state = str(java.getSQLState() or "")
            if truncation.isInstance(java) or state.startswith(_DATA_EXCEPTION):
                return state or "22001"
        java = java.getCause()
    return None


# (url, meta) of the databases whose sink tables this process made: a sink is made per
# micro-batch, its bookkeeping tables once.
_MADE: set[tuple[str, str]] = set()


def forget_made(url: str) -> None:
    """The bookkeeping tables on the server at ``url`` are made again by the next sink
    (the server was emptied: the scenario tooling does it between runs)."""
    _MADE.difference_update([m for m in _MADE if m[0] == url])


class JdbcSink:
    """Targets as tables of one database (see the module text). ``url`` is a JDBC URL;
    ``user`` and ``password`` come from the environment or a secret file, never the
    settings' YAML; ``meta`` is the schema (database, on MySQL) of the sink's own tables."""

    shared = False

    def __init__(
        self,
        spark: SparkSession,
        app_id: str,
        url: str,
        dialect: Dialect,
        user: str | None = None,
        password: str | None = None,
        meta: str = "shardmerge",
    ) -> None:
        if dialect not in DRIVERS:
            raise ValueError(f"unknown dialect {dialect!r}: one of {', '.join(DRIVERS)}")
        self.spark, self.app_id, self.url, self.dialect = spark, app_id, url, dialect
        self.user, self.password, self.meta = user, password, meta
        self._sg = sqlglot_dialect(dialect)

    # --- connections -------------------------------------------------------------------

    @property
    def spark_url(self) -> str:
        """The URL Spark's JDBC source and writer get: Spark picks its SQL dialect (how it
        quotes names) by the URL's scheme and knows ``jdbc:mysql:`` only, so a
        ``jdbc:mariadb:`` URL is handed over as ``jdbc:mysql:`` with MariaDB's driver told
        to take it (``permitMysqlScheme``)."""
        if not self.url.startswith("jdbc:mariadb:"):
            return self.url
        url = "jdbc:mysql:" + self.url[len("jdbc:mariadb:") :]
        return url + ("&" if "?" in url else "?") + "permitMysqlScheme"

    @staticmethod
    def _temporal(recorded: TableSchema, columns: list[str]) -> dict[int, str]:
        """The positions of ``columns`` whose shard type is temporal, with the type."""
        out = {}
        for i, c in enumerate(columns):
            col = recorded.column(c)
            if col is not None and col.type.base in _TEMPORAL:
                out[i] = col.type.base
        return out

    @staticmethod
    def _bits(recorded: TableSchema, columns: list[str]) -> dict[int, int]:
        """The positions of ``columns`` whose shard type is BIT, with its length
        (``_staged_bit``)."""
        found = {i: recorded.column(c) for i, c in enumerate(columns)}
        bits = {i: col for i, col in found.items() if col and col.type.base == "BIT"}
        return {i: col.type.length or 1 for i, col in bits.items()}

    def _from_stage(self, value: str, base: str | None) -> str:
        """A staged value (SQL) as the table's column takes it: PostgreSQL casts temporal
        text (its time zone is UTC here); MariaDB and MySQL convert it on their own."""
        if base is None or self.dialect != "postgresql":
            return value
        return f"CAST({value} AS {_TEMPORAL[base]})"

    def _props(self) -> dict[str, str]:
        props = {"user": self.user or "", "password": self.password or ""}
        if self.dialect == "postgresql":
            props["stringtype"] = "unspecified"  # a string parameter takes its column's type
        return {k: v for k, v in props.items() if v}

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        jvm: Any = self.spark._jvm
        props = jvm.java.util.Properties()
        for k, v in self._props().items():
            props.setProperty(k, v)
        driver = getattr(jvm, DRIVERS[self.dialect])()
        conn = driver.connect(self.url, props)
        if conn is None:
            raise SinkError(f"the {self.dialect} driver does not take the URL {self.url!r}")
        try:
            if self.dialect != "postgresql":
                # strict: a value a column cannot hold is an error, never cut or zeroed
                # (schemas.dialects.changes_safely counts on it for a narrowing)
                self._run(conn, _Statement(_STRICT))
            # staged temporal text is UTC (a TIMESTAMP's): read it so
            self._run(conn, _Statement(_UTC[self.dialect == "postgresql"]))
            yield conn
        finally:
            conn.close()

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        with self._connection() as conn:
            conn.setAutoCommit(False)
            try:
                yield conn
                conn.commit()
            except BaseException:
                conn.rollback()
                raise

    @staticmethod
    def _bind(ps: Any, params: tuple[Any, ...]) -> None:
        for i, p in enumerate(params, start=1):
            if p is None:
                ps.setNull(i, 12)  # java.sql.Types.VARCHAR
            elif isinstance(p, int):
                ps.setLong(i, p)
            else:
                ps.setString(i, str(p))

    def _run(self, conn: Any, st: _Statement) -> int:
        ps = conn.prepareStatement(st.sql)
        try:
            self._bind(ps, st.params)
            return int(ps.executeUpdate())
        finally:
            ps.close()

    def _query(self, conn: Any, st: _Statement, max_rows: int = 0) -> list[tuple[Any, ...]]:
        """The rows of a query as strings; ``max_rows`` (0: all) is the most the database
        sends."""
        ps = conn.prepareStatement(st.sql)
        try:
            self._bind(ps, st.params)
            ps.setMaxRows(max_rows)
            rs = ps.executeQuery()
            n = rs.getMetaData().getColumnCount()
            out = []
            while rs.next():
                out.append(tuple(rs.getString(i) for i in range(1, n + 1)))
            return out
        finally:
            ps.close()

    # --- names -------------------------------------------------------------------------

    def _q(self, name: str) -> str:
        return sqlglot.exp.to_identifier(name, quoted=True).sql(self._sg)

    def _table(self, target: TargetId) -> str:
        return f"{self._q(target.db)}.{self._q(target.table)}"

    def _meta(self, table: str) -> str:
        return f"{self._q(self.meta)}.{self._q(table)}"

    def _stage_name(self, target: TargetId) -> str:
        digest = hashlib.sha256(f"{self.app_id}\0{target}".encode()).hexdigest()[:20]
        return f"_stage_{digest}"

    def _ensure_meta(self) -> None:
        if (self.url, self.meta) in _MADE:
            return
        with self._connection() as conn:
            self._run(conn, _Statement(create_schema(self.dialect, self.meta)))
            for name, schema in (("_slots", _SLOTS), ("_history", _HISTORY)):
                sql = create_table(self.dialect, self.meta, name, schema, schema.primary_key)
                self._run(conn, _Statement(sql))
        _MADE.add((self.url, self.meta))

    # --- schema work -------------------------------------------------------------------

    def _exists(self, conn: Any, target: TargetId) -> bool:
        return bool(self._columns(conn, target))

    def _columns(self, conn: Any, target: TargetId) -> dict[str, str]:
        if self.dialect == "postgresql":
            sql = (
                "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
                "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON "
                "n.oid = c.relnamespace WHERE n.nspname = ? AND c.relname = ? AND "
                "a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
            )
        else:
            sql = (
                "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE "
                "TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION"
            )
        rows = self._query(conn, _Statement(sql, (target.db, target.table)))
        return {str(name).lower(): str(t) for name, t in rows}

    def columns(self, target: TargetId) -> dict[str, str]:
        """The table's columns (lower-case names) and their types as the database names them."""
        with self._connection() as conn:
            return self._columns(conn, target)

    def _record(
        self, conn: Any, target: TargetId, operation: str, d: CreateTarget | ApplyDDL
    ) -> None:
        (last,) = self._query(
            conn,
            _Statement(
                f"SELECT COALESCE(MAX(version), -1) FROM {self._meta('_history')} WHERE target = ?",
                (str(target),),
            ),
        )
        cause = json.dumps({"statement": d.statement, "reason": d.reason}, sort_keys=True)
        schema = json.dumps(schema_to_json(d.schema), sort_keys=True)
        self._run(
            conn,
            _Statement(
                f"INSERT INTO {self._meta('_history')} (target, version, ts, operation, cause, "
                "schema_json) VALUES (?, ?, CURRENT_TIMESTAMP, ?, ?, ?)",
                (str(target), int(last[0]) + 1, operation, cause, schema),
            ),
        )

    def _recorded_schema(self, conn: Any, target: TargetId) -> TableSchema | None:
        rows = self._query(
            conn,
            _Statement(
                f"SELECT schema_json FROM {self._meta('_history')} WHERE target = ? "
                "ORDER BY version DESC",
                (str(target),),
            ),
            max_rows=1,
        )
        return schema_from_json(json.loads(rows[0][0])) if rows and rows[0][0] else None

    def create(self, decision: CreateTarget) -> None:
        """The target's table with the decision's schema and key, if it is not there; its
        cause recorded."""
        self._ensure_meta()
        target, schema = decision.target, decision.schema
        with self._transaction() as conn:
            if self._exists(conn, target):
                if self._recorded_schema(conn, target) is None:
                    # made by a run that died before its history row (MySQL commits a
                    # DDL on its own): recorded now
                    self._record(conn, target, "CREATE TABLE", decision)
                return
            self._run(conn, _Statement(create_schema(self.dialect, target.db)))
            sql = create_table(self.dialect, target.db, target.table, schema, schema.primary_key)
            self._run(conn, _Statement(sql))
            self._record(conn, target, "CREATE TABLE", decision)

    def alter(self, decision: ApplyDDL, slots: Callable[[], int], *, rewrite: bool) -> None:
        """Each change the table still needs (its columns are read first); refused with
        advice (:class:`SinkError`) when the database would lose values."""
        self._ensure_meta()
        target = decision.target
        with self._transaction() as conn:
            have = self._columns(conn, target)
            recorded = self._recorded_schema(conn, target)
            existing: dict[str, ColumnType] = {}
            for name in have:
                column = recorded.column(name) if recorded is not None else None
                if column is None:
                    column = decision.schema.column(name)  # made by a change not recorded
                if column is None:
                    continue  # not the job's column (an operator's): left alone
                existing[name] = column.type
            try:
                statements = alter_statements(
                    self.dialect, target.db, target.table, existing, decision.specs,
                    decision.schema,
                )  # fmt: skip
            except DialectConflict as e:
                raise SinkError(str(e)) from e
            if not statements:
                if recorded is not None and recorded != decision.schema:
                    # made by a run that died before its history row (MySQL commits a
                    # DDL on its own), or a change the dialect has nothing to run for
                    self._record(conn, target, "ALTER TABLE", decision)
                return
            for sql in statements:
                try:
                    self._run(conn, _Statement(sql))
                except Exception as e:  # a row the change cannot hold: refused, with advice
                    state = _data_exception(self.spark._jvm, e)
                    if state is None:
                        raise  # anything else fails the batch, which runs again
                    raise SinkError(
                        f"{self.dialect} refused {sql!r} (SQLSTATE {state}): a row does not "
                        "fit the new column; fix the rows or the column by hand"
                    ) from e
            self._record(conn, target, "ALTER TABLE", decision)

    def in_place(self, current: ColumnType, wanted: ColumnType) -> bool:
        """Whether the database holds every value of ``current`` in ``wanted``."""
        return widens(current, wanted, self.dialect)

    # --- rows --------------------------------------------------------------------------

    def _slot_done(self, conn: Any, target: TargetId, slot: int) -> bool:
        rows = self._query(
            conn,
            _Statement(
                f"SELECT slot FROM {self._meta('_slots')} WHERE app_id = ? AND target = ? "
                "FOR UPDATE",
                (self.app_id, str(target)),
            ),
        )
        return bool(rows) and int(rows[0][0]) >= slot

    def _set_slot(self, conn: Any, target: TargetId, slot: int) -> None:
        changed = self._run(
            conn,
            _Statement(
                f"UPDATE {self._meta('_slots')} SET slot = ? WHERE app_id = ? AND target = ?",
                (slot, self.app_id, str(target)),
            ),
        )
        if not changed:
            self._run(
                conn,
                _Statement(
                    f"INSERT INTO {self._meta('_slots')} (app_id, target, slot) VALUES (?, ?, ?)",
                    (self.app_id, str(target), slot),
                ),
            )

    def last_slot(self, target: TargetId) -> int | None:
        """The last write slot recorded for this job's app id and the target."""
        self._ensure_meta()
        with self._connection() as conn:
            rows = self._query(
                conn,
                _Statement(
                    f"SELECT slot FROM {self._meta('_slots')} WHERE app_id = ? AND target = ?",
                    (self.app_id, str(target)),
                ),
            )
        return int(rows[0][0]) if rows else None

    def _stage(
        self, conn: Any, target: TargetId, rows: DataFrame, columns: list[str], key: list[str]
    ) -> tuple[str, dict[int, str]]:
        """Empty the target's staging table (made like the table's columns, positional
        names, and ``_action``; keyed as the table is, one row per key) and fill it with
        ``rows`` from the executors: its name, and the positions of the columns staged as
        temporal text (``_staged_value``) with their shard types."""
        recorded = self._recorded_schema(conn, target)
        if recorded is None:
            raise SinkError(f"target {target} has no recorded schema: it was never created")
        unknown = [c for c in columns if recorded.column(c) is None]
        if unknown:
            raise SinkError(
                f"target {target}: the job writes column(s) {unknown} that the schema "
                f"recorded with the table ({self._meta('_history')}) lacks: the table was "
                "made by another job or changed outside this one; compare the two and "
                "drop or fix the table (docs/database-sink.md)"
            )
        text = parse_create_table(f"CREATE TABLE s (c VARCHAR({_TEMPORAL_TEXT}))").columns[0]
        number = parse_create_table("CREATE TABLE s (c DECIMAL(20,0))").columns[0]
        temporal = self._temporal(recorded, columns)
        mysql = self._sg == "mysql"
        bits = self._bits(recorded, columns)
        staged = TableSchema(
            columns=(
                *(
                    (
                        text
                        if i in temporal
                        else number
                        if i in bits and mysql
                        else recorded.column(c)
                    ).renamed(f"c{i}")  # type: ignore[union-attr]
                    for i, c in enumerate(columns)
                ),
                *parse_create_table("CREATE TABLE s (_action CHAR(1))").columns,
            )
        )
        name = self._stage_name(target)
        self._run(conn, _Statement(f"DROP TABLE IF EXISTS {self._meta(name)}"))
        lowered = [c.lower() for c in columns]
        staged_key = [f"c{lowered.index(k.lower())}" for k in key]
        sql = create_table(self.dialect, self.meta, name, staged, staged_key)
        self._run(conn, _Statement(sql))
        frame = rows.select(
            *(
                (
                    _staged_bit(F.col(ident(c)), mysql, bits[i])
                    if i in bits
                    else _staged_value(F.col(ident(c)), temporal.get(i))
                ).alias(f"c{i}")
                for i, c in enumerate(columns)
            ),
            F.col("_action"),
        )
        writer = (
            frame.write.format("jdbc")
            .option("url", self.spark_url)
            .option("driver", DRIVERS[self.dialect])
            .option("dbtable", self._meta(name))
            .option("isolationLevel", "READ_COMMITTED")
            .mode("append")
        )
        for k, v in self._props().items():
            writer = writer.option(k, v)
        # batched inserts sent as one statement (MariaDB's bulk protocol, pgJDBC's rewrite)
        bulk = "reWriteBatchedInserts" if self.dialect == "postgresql" else "useBulkStmts"
        writer.option(bulk, "true").save()
        return self._meta(name), temporal

    def merge(
        self, target: TargetId, rows: DataFrame, key: list[str], columns: list[str], slot: int
    ) -> dict[str, int]:
        """Upsert or delete each row by ``key`` under ``slot`` (the module text)."""
        self._ensure_meta()
        zero = {"inserted": 0, "updated": 0, "deleted": 0}
        with self._connection() as conn:
            if self._slot_done(conn, target, slot):
                return {**zero, "skipped": 1}  # the rows were not read (the Sink port)
            stage, temporal = self._stage(conn, target, rows, columns, key)
        crash_point("jdbc_staged")
        table = self._table(target)
        staged = [self._from_stage(f"c{i}", temporal.get(i)) for i in range(len(columns))]
        pos = {c.lower(): i for i, c in enumerate(columns)}
        on = " AND ".join(
            f"{self._from_stage(f's.c{pos[k.lower()]}', temporal.get(pos[k.lower()]))} = "
            f"t.{self._q(k)}"
            for k in key
        )
        # driven by the staged rows (few), each finding its row by the table's key
        if self.dialect == "postgresql":
            delete = f"DELETE FROM {table} t USING {stage} s WHERE s._action = 'd' AND {on}"
        else:
            delete = f"DELETE t FROM {table} t JOIN {stage} s ON {on} WHERE s._action = 'd'"
        with self._transaction() as conn:
            if self.dialect != "postgresql":
                # a multi-table DELETE wants a default database, even with every name
                # qualified ("No database selected" otherwise)
                conn.setCatalog(target.db)
            if self._slot_done(conn, target, slot):
                return zero
            (matched,) = self._query(
                conn,
                _Statement(
                    f"SELECT COUNT(*) FROM {stage} s JOIN {table} t ON {on} WHERE s._action <> 'd'"
                ),
            )
            (upserts,) = self._query(
                conn, _Statement(f"SELECT COUNT(*) FROM {stage} WHERE _action <> 'd'")
            )
            deleted = self._run(conn, _Statement(delete))
            names = ", ".join(self._q(c) for c in columns)
            values = ", ".join(staged)
            sets = [c for c in columns if c.lower() not in {k.lower() for k in key}]
            if self.dialect == "postgresql":
                conflict = ", ".join(self._q(k) for k in key)
                update = ", ".join(f"{self._q(c)} = EXCLUDED.{self._q(c)}" for c in sets)
                tail = f" ON CONFLICT ({conflict}) " + (
                    f"DO UPDATE SET {update}" if sets else "DO NOTHING"
                )
            else:
                first = self._q(sets[0] if sets else key[0])
                update = ", ".join(f"{self._q(c)} = VALUES({self._q(c)})" for c in sets)
                tail = f" ON DUPLICATE KEY UPDATE {update or f'{first} = {first}'}"
            self._run(
                conn,
                _Statement(
                    f"INSERT INTO {table} ({names}) SELECT {values} FROM {stage} "
                    f"WHERE _action <> 'd'{tail}"
                ),
            )
            self._set_slot(conn, target, slot)
        updated = int(matched[0])
        return {"inserted": int(upserts[0]) - updated, "updated": updated, "deleted": deleted}

    def _where(self, match: Match) -> tuple[str, tuple[Any, ...]]:
        if not match:
            return "1 = 1", ()
        return (
            " AND ".join(f"{self._q(c)} = ?" for c, _ in match),
            tuple(v for _, v in match),
        )

    def truncate(self, target: TargetId, matches: list[Match], slot: int) -> int:
        """Delete the rows of the shards ``matches`` name (an empty match: every row)."""
        self._ensure_meta()
        parts = [self._where(m) for m in matches]
        where = " OR ".join(f"({sql})" for sql, _ in parts)
        params = tuple(p for _, ps in parts for p in ps)
        with self._transaction() as conn:
            if self._slot_done(conn, target, slot):
                return 0
            n = self._run(
                conn, _Statement(f"DELETE FROM {self._table(target)} WHERE {where}", params)
            )
            self._set_slot(conn, target, slot)
        return n

    def rehome(
        self, target: TargetId, match: Match, values: Match, slot: int, where: str | None = None
    ) -> int:
        """Rows of the shard ``match`` names (and ``where``, Spark SQL, rendered in the
        dialect by sqlglot) take ``values``."""
        self._ensure_meta()
        cond, params = self._where(match)
        if where:
            cond += " AND (" + sqlglot.transpile(where, read="spark", write=self._sg)[0] + ")"
        sets = ", ".join(f"{self._q(c)} = ?" for c, _ in values)
        with self._transaction() as conn:
            if self._slot_done(conn, target, slot):
                return 0
            n = self._run(
                conn,
                _Statement(
                    f"UPDATE {self._table(target)} SET {sets} WHERE {cond}",
                    tuple(v for _, v in values) + params,
                ),
            )
            self._set_slot(conn, target, slot)
        return n

    def read(self, target: TargetId) -> DataFrame:
        """The target's table as Spark reads it over JDBC (for checks and tools; the job
        never reads its targets back)."""

        def reader(**options: str) -> Any:
            r = (
                self.spark.read.format("jdbc")
                .option("url", self.spark_url)
                .option("driver", DRIVERS[self.dialect])
            )
            for k, v in {**self._props(), **options}.items():
                r = r.option(k, v)
            if self._sg == "mysql":  # MariaDB and MySQL
                # A YEAR as the number it is (as on Delta): read as a DATE by default, the
                # drivers cannot make one of year 0 (0000) and the read fails.
                r = r.option("yearIsDateType", "false")
            return r

        frame = self._temporal_as_text(reader, reader(dbtable=self._table(target)).load(), target)
        # Spark reads a CHAR(n) column (MySQL reports ENUM and SET as CHAR too) padded to n;
        # the shards' MySQL gives CHAR values without trailing spaces: so do these.
        padded = {
            f.name
            for f in frame.schema.fields
            if str(f.metadata.get("__CHAR_VARCHAR_TYPE_STRING", "")).lower().startswith("char(")
        }
        if not padded:
            return frame
        return frame.select(
            *(
                F.rtrim(F.col(ident(c))).alias(c) if c in padded else F.col(ident(c))
                for c in frame.columns
            )
        )

    def _temporal_as_text(
        self, reader: Callable[..., Any], frame: DataFrame, target: TargetId
    ) -> DataFrame:
        """``frame`` with its dates and times read as the database's text, made Spark values
        again: the JDBC drivers' java.sql values would move a day before 1582-10-15 (the
        staging's reason, ``_TEMPORAL``), or fail on year 0. A TIMESTAMP's text is UTC. A
        TIME is read as its count of microseconds (Debezium's MicroTime, as the job keeps
        it from Debezium's events; Canal's and Maxwell's ``10:00:00`` reads as that count
        too)."""
        types = self.columns(target)
        kinds: dict[str, tuple[Any, bool, bool]] = {}
        times = set()  # TIME columns: read as the count of microseconds the job keeps
        # BIT columns (PostgreSQL's BOOLEAN is a BIT(1)'s): their length, read as the
        # number, made MySQL's bytes of it as on Delta (_staged_bit)
        bits: dict[str, int] = {}
        for f in frame.schema.fields:
            db = types.get(f.name.lower(), "").lower()
            bit = re.fullmatch(r"bit\((\d+)\)", db)
            if bit is not None and self._sg == "mysql":
                bits[f.name] = int(bit[1])
            elif db == "boolean" and self.dialect == "postgresql":
                bits[f.name] = 1
            elif db.startswith("interval") or (db.startswith("time") and "stamp" not in db):
                times.add(f.name)
            elif f.dataType.typeName() in ("date", "timestamp", "timestamp_ntz"):
                if self._sg == "mysql":  # TIMESTAMP: an instant, shown in the session's zone
                    zoned = db.startswith("timestamp")
                else:
                    zoned = "with time zone" in db and "without" not in db
                day = db.startswith("date") and not db.startswith("datetime")
                # a DATETIME has no zone: TIMESTAMP_NTZ, as on Delta (the driver's
                # TIMESTAMP would be read in the session's zone)
                spark_type = f.dataType if day or zoned else TimestampNTZType()
                kinds[f.name] = (spark_type, day, zoned)
        if not kinds and not times and not bits:
            return frame
        pg = self.dialect == "postgresql"
        select = []
        for c in frame.columns:
            q = self._q(c)
            if c in bits:
                number = (
                    f"CASE WHEN {q} THEN 1 WHEN NOT {q} THEN 0 END"
                    if pg
                    else f"CAST({q} AS UNSIGNED)"
                )
                select.append(f"{number} AS {q}")
                continue
            if c in times:  # exact: both give a TIME's seconds with their microseconds
                seconds = f"EXTRACT(EPOCH FROM {q})" if pg else f"TIME_TO_SEC({q})"
                whole = "BIGINT" if pg else "SIGNED"
                text = "TEXT" if pg else "CHAR"
                select.append(f"CAST(CAST({seconds} * 1000000 AS {whole}) AS {text}) AS {q}")
                continue
            if c not in kinds:
                select.append(q)
                continue
            _, day, zoned = kinds[c]
            if pg:
                v = f"{q} AT TIME ZONE 'UTC'" if zoned else q
                fmt = "YYYY-MM-DD" if day else "YYYY-MM-DD HH24:MI:SS.US"
                select.append(f"to_char({v}, '{fmt}') AS {q}")
            else:
                v = f"CONVERT_TZ({q}, @@session.time_zone, '+00:00')" if zoned else q
                select.append(f"CAST({v} AS CHAR) AS {q}")
        read = reader(query=f"SELECT {', '.join(select)} FROM {self._table(target)}").load()
        out: DataFrame = read.select(
            *(
                _bit_bytes(F.col(ident(c)), bits[c]).alias(c)
                if c in bits
                else (F.concat(F.col(ident(c)), F.lit("Z")) if kinds[c][2] else F.col(ident(c)))
                .cast(kinds[c][0])
                .alias(c)
                if c in kinds
                else F.col(ident(c)).cast("string").alias(c)
                if c in times
                else F.col(ident(c))
                for c in frame.columns
            )
        )
        return out

    def history(self, target: TargetId, limit: int) -> list[dict[str, Any]]:
        """The table's changes the job made, newest first, each with its cause."""
        self._ensure_meta()
        with self._connection() as conn:
            rows = self._query(
                conn,
                _Statement(
                    f"SELECT version, ts, operation, cause FROM {self._meta('_history')} "
                    "WHERE target = ? ORDER BY version DESC",
                    (str(target),),
                ),
                max_rows=max(limit, 1),
            )
        return [
            {
                "version": int(v),
                "timestamp": str(ts),
                "operation": op,
                "cause": json.loads(cause) if cause else None,
            }
            for v, ts, op, cause in rows[:limit]
        ]
