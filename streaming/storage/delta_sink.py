"""The Delta sink (``streaming.storage.sink.Sink``): one Delta table per target, changed only
through idempotent steps.

- Tables are created with column mapping (``delta.columnMapping.mode=name``), so RENAME and
  DROP COLUMN work, and with type widening, so INT -> BIGINT and similar MODIFYs work.
- A type change Delta cannot make in place (by its own widening rules, or because it says
  so) is refused with :class:`SinkError`, or, when the target allows it
  (``rewrite_incompatible``), made by rewriting the table: one overwrite commit that casts
  every row, refused if a value does not fit, as MySQL's copying ALTER TABLE would.
- Row writes are MERGEs carrying ``txnAppId``/``txnVersion`` (Delta skips a version it has
  already recorded for the app id): a re-run batch writes nothing twice. The app id is the
  checkpoint's (streaming/storage/state_store.py), so a new checkpoint never has a write skipped.
- DDL is applied by comparing the wanted change with the table's current schema (ADD only
  a missing column, RENAME only while the old name exists, ...), so running it again is a
  no-op. Delta keeps no MySQL defaults or NOT NULL: shardmerge fills values itself.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from delta.tables import DeltaTable
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from coordinator.decisions import ApplyDDL, CreateTarget
from coordinator.ids import TargetId
from schemas.changes import (
    AddColumn,
    ChangeColumn,
    DropColumn,
    ModifyColumn,
    RenameColumn,
)
from schemas.model import Column, ColumnType, TableSchema
from shardmerge.errors import ShardMergeError
from streaming.fs.hadoop import HadoopFs, join
from streaming.sql.quoting import ident, string, table_at
from streaming.sql.spark_types import delta_type, literal_expr, schema_ddl, widens_in_place
from streaming.storage.sink import Match, SinkError

__all__ = [
    "COMMIT_INFO_KEY",
    "DeltaSink",
    "SinkError",
    "StorageUnreadable",
    "commit_info",
    "delete_where",
    "delta_table_at",
    "txn",
    "update",
]

# The commits made while this session conf is set carry its value as their commit info's
# userMetadata (DESCRIBE HISTORY's column of that name).
COMMIT_INFO_KEY = "spark.databricks.delta.commitInfo.userMetadata"

# Offending values named in a refused rewrite.
_SAMPLES = 5


class StorageUnreadable(ShardMergeError):
    """Something is where a Delta table should be, but it cannot be read as one. The batch
    fails (the restart policy retries it); it is never read as "no table"."""


def delta_table_at(spark: SparkSession, path: str) -> bool:
    """Whether a Delta table is at ``path`` (a URI). Delta's own check answers no for
    anything it cannot read as a table: a file in its place, a table whose log is out of
    reach for a moment. Read as "no table", that would let a batch treat held rows as
    absent and release shards without them. So "no table" is only a path without a Delta
    log (nothing there, or files of a first write that never committed, which Delta
    ignores); a file in its place, or a log Delta cannot read, raises
    :class:`StorageUnreadable`, and other failures propagate."""
    if DeltaTable.isDeltaTable(spark, path):
        return True
    fs = HadoopFs(spark, path)
    if fs.is_file(path) or fs.names(join(path, "_delta_log")):
        # Delta caches a table's log per path: once it found no table there (while the
        # storage was away), it keeps saying so after the table is back. Forget that copy
        # and look again.
        jvm: Any = spark._jvm
        jpath = jvm.org.apache.hadoop.fs.Path(path)
        jvm.org.apache.spark.sql.delta.DeltaLog.invalidateCache(spark._jsparkSession, jpath)
        if DeltaTable.isDeltaTable(spark, path):
            return True
        raise StorageUnreadable(
            f"{path} holds a Delta log or a file but cannot be read as a Delta table "
            "(storage unavailable, or something else in its place); the batch fails and "
            "runs again"
        )
    return False


@contextmanager
def commit_info(spark: SparkSession, cause: dict[str, Any]) -> Iterator[None]:
    """The Delta commits made inside record ``cause`` (JSON under ``"shardmerge"``) as their
    userMetadata: why the table changed, for ``shardmerge history`` and DESCRIBE HISTORY."""
    spark.conf.set(COMMIT_INFO_KEY, json.dumps({"shardmerge": cause}, sort_keys=True))
    try:
        yield
    finally:
        spark.conf.unset(COMMIT_INFO_KEY)


@contextmanager
def txn(spark: SparkSession, app_id: str, version: int) -> Iterator[None]:
    """MERGE/DELETE/UPDATE inside carry (app_id, version): Delta skips them if done."""
    spark.conf.set("spark.databricks.delta.write.txnAppId", app_id)
    spark.conf.set("spark.databricks.delta.write.txnVersion", str(version))
    try:
        yield
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion")


log = logging.getLogger("shardmerge.sink")

# Delta's commit conflicts between writers of data only: the write read files another
# commit changed, or another commit added files its condition may match. Run again, the
# write reads the newer table. (A schema or protocol change is not among them.)
# (Python raises them as delta.exceptions.captured.*, the JVM names its error class.)
DATA_CONFLICTS = (
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "DELTA_CONCURRENT_APPEND",
    "DELTA_CONCURRENT_DELETE_READ",
    "DELTA_CONCURRENT_DELETE_DELETE",
)
CONFLICT_ATTEMPTS = 30
CONFLICTS = [0]  # writes run again after a data conflict, in this process (metrics)


class DeltaSink:
    """The Sink port on Delta tables (``streaming.storage.sink``). ``locate``: where a target's
    table is (``Settings.table_path``); ``app_id``: the job's, carried by every write as
    Delta's transaction app id (its write slots are the transaction versions)."""

    def __init__(
        self,
        spark: SparkSession,
        app_id: str,
        locate: Callable[[TargetId], str],
        *,
        shared: bool = False,
    ) -> None:
        self.spark = spark
        self.app_id = app_id  # the checkpoint's: every idempotent write carries it
        self.locate = locate
        # Several jobs write the table (a group): a write that lost Delta's commit race to
        # another job's, on data only, is run again (its transaction version makes that
        # safe); a change of the table's schema or protocol still fails the batch.
        self.shared = shared

    def table(self, path: str) -> str:
        return table_at(path)

    # --- the port ---------------------------------------------------------------------------

    def create(self, decision: CreateTarget) -> None:
        """Create the table if it does not exist; its commit records the decision's
        statement and cause (:func:`commit_info`), as an ALTER's does."""
        self.create_at(self.locate(decision.target), decision.schema, decision)

    def in_place(self, current: ColumnType, wanted: ColumnType) -> bool:
        """Delta's type widening (``spark_types.widens_in_place``), or no change at all."""
        have, want = delta_type(current), delta_type(wanted)
        return _same_type(have, want) or widens_in_place(have, want)

    def last_slot(self, target: TargetId) -> int | None:
        """The transaction version the table recorded for this job's app id (Delta's
        ``SetTransaction``), read from the table's latest snapshot."""
        path = self.locate(target)
        if not delta_table_at(self.spark, path):
            return None
        jvm: Any = self.spark._jvm
        log_ = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
            self.spark._jsparkSession, jvm.org.apache.hadoop.fs.Path(path)
        )
        got = log_.unsafeVolatileSnapshot().transactions().get(self.app_id)
        return int(got.get()) if got.isDefined() else None

    def history(self, target: TargetId, limit: int) -> list[dict[str, Any]]:
        """The table's commits, newest first; a downstream change the job made carries its
        cause (its userMetadata, :func:`commit_info`); other commits' userMetadata, if
        any, is kept as ``user_metadata``."""
        path = self.locate(target)
        if not delta_table_at(self.spark, path):
            return []
        rows = DeltaTable.forPath(self.spark, path).history(limit)
        out = []
        for r in rows.select("version", "timestamp", "operation", "userMetadata").collect():
            cause = _cause_of(r["userMetadata"])
            out.append(
                {
                    "version": r["version"],
                    "timestamp": r["timestamp"].isoformat(),
                    "operation": r["operation"],
                    "cause": cause,
                    "user_metadata": None if cause is not None else r["userMetadata"],
                }
            )
        return out

    # --- Delta tables by path -------------------------------------------------------------

    def create_at(
        self, path: str, schema: TableSchema, decision: CreateTarget | None = None
    ) -> None:
        """:meth:`create` of the table at ``path`` (a benchmark's baseline table, too)."""
        recorded = commit_info(self.spark, self._cause(decision)) if decision else nullcontext()
        with recorded:
            self.spark.sql(
                f"CREATE TABLE IF NOT EXISTS {self.table(path)} ({schema_ddl(schema)}) "
                "USING DELTA TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
                "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5', "
                "'delta.enableTypeWidening' = 'true')"
            )

    def columns(self, target: TargetId) -> dict[str, str]:
        return self.columns_at(self.locate(target))

    def columns_at(self, path: str) -> dict[str, str]:
        fields = self.spark.read.format("delta").load(path).schema.fields
        return {f.name.lower(): f.dataType.simpleString().upper() for f in fields}

    def alter(
        self,
        decision: ApplyDDL,
        version: Callable[[], int],
        *,
        rewrite: bool = False,
    ) -> None:
        """Apply the decision's specs, each only if the table still needs it.

        An added column whose MySQL fill value is not NULL (a default, or the implicit 0 of
        a NOT NULL column) is filled in the existing rows, as MySQL does upstream; that
        UPDATE takes a write slot from ``version`` whether or not it runs. So does every
        type change (MODIFY, CHANGE): its slot guards the rewrite of the table, when the
        change needs one and ``rewrite`` allows it. Raises :class:`SinkError` for a change
        Delta cannot make. Every commit it makes records the statement and its cause
        (:func:`commit_info`)."""
        with commit_info(self.spark, self._cause(decision)):
            self._alter(self.locate(decision.target), decision, version, rewrite)

    def _cause(self, decision: ApplyDDL | CreateTarget) -> dict[str, Any]:
        """What a downstream DDL's commit records (``shardmerge history`` shows it)."""
        return {
            "statement": decision.statement,
            "reason": decision.reason,
            "target": str(decision.target),
            "app_id": self.app_id,
        }

    def _alter(
        self, path: str, decision: ApplyDDL, version: Callable[[], int], rewrite: bool
    ) -> None:
        table = self.table(path)
        for spec in decision.specs:
            have = self.columns_at(path)
            match spec:
                case AddColumn(column, position):
                    fill = column.fill_sql()
                    slot = version() if fill.upper() != "NULL" else None
                    if column.key not in have:
                        self._enable_types(table, have, delta_type(column.type))
                        where = ""
                        if position is not None:
                            where = (
                                " FIRST"
                                if position.after is None
                                else f" AFTER {ident(position.after)}"
                            )
                        self.spark.sql(
                            f"ALTER TABLE {table} ADD COLUMNS ({ident(column.name)} "
                            f"{delta_type(column.type)}{where})"
                        )
                    if slot is not None:
                        value = literal_expr(column.type, fill)
                        with txn(self.spark, self.app_id, slot):
                            self.spark.sql(
                                f"UPDATE {table} SET {ident(column.name)} = {value} "
                                f"WHERE {ident(column.name)} IS NULL"
                            )
                case DropColumn(name):
                    if name.lower() in have:
                        self.spark.sql(f"ALTER TABLE {table} DROP COLUMN {ident(name)}")
                case RenameColumn(old, new):
                    self._rename(table, have, old, new)
                case ChangeColumn(old, column, _):
                    slot = version()
                    self._rename(table, have, old, column.name)
                    self._retype(path, decision, column, slot, rewrite)
                case ModifyColumn(column, _):
                    self._retype(path, decision, column, version(), rewrite)
                case _:
                    pass  # indexes, keys, charsets, defaults: nothing to do on Delta

    def _enable_types(self, table: str, have: dict[str, str], wanted: str) -> None:
        """Delta needs its ``timestampNtz`` table feature before a column of that type
        joins a table that has none (DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT): a CREATE
        TABLE with a DATETIME column enables it, an ADD COLUMN or a type change to one
        does not. Enabling it twice changes nothing."""
        if wanted.upper() == "TIMESTAMP_NTZ" and "TIMESTAMP_NTZ" not in have.values():
            self.spark.sql(
                f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.feature.timestampNtz' = "
                "'supported')"
            )

    def _rename(self, table: str, have: dict[str, str], old: str, new: str) -> None:
        if old.lower() != new.lower() and old.lower() in have and new.lower() not in have:
            self.spark.sql(f"ALTER TABLE {table} RENAME COLUMN {ident(old)} TO {ident(new)}")

    def _retype(self, path: str, d: ApplyDDL, column: Column, slot: int, rewrite: bool) -> None:
        name, wanted = column.name, delta_type(column.type)
        have = self.columns_at(path)
        current = have.get(name.lower())
        if current is None or _same_type(current, wanted):
            return  # nothing to do, or done by an earlier run of this batch
        self._enable_types(self.table(path), have, wanted)
        if widens_in_place(current, wanted):
            try:
                self.spark.sql(
                    f"ALTER TABLE {self.table(path)} ALTER COLUMN {ident(name)} TYPE {wanted}"
                )
                return
            except AnalysisException as e:
                # SQLSTATE class 0A is "feature not supported": Delta refuses the change
                # (NOT_SUPPORTED_CHANGE_COLUMN, ...). Any other failure fails the batch.
                if not (e.getSqlState() or "").startswith("0A"):
                    raise
                if not rewrite:
                    raise SinkError(_cannot(path, d, name, current, wanted, str(e))) from e
        elif not rewrite:
            raise SinkError(_cannot(path, d, name, current, wanted, "not a type widening"))
        self._rewrite(path, d, name, wanted, slot)

    def _rewrite(self, path: str, d: ApplyDDL, name: str, wanted: str, slot: int) -> None:
        """Cast column ``name`` of every row to ``wanted`` in one overwrite commit that
        carries (the app id, ``slot``); refuse, naming rows, if a value does not fit."""
        rows = self.spark.read.format("delta").load(path)
        cast = F.expr(f"try_cast({ident(name)} AS {wanted})")
        unfit = rows.filter(F.col(ident(name)).isNotNull() & cast.isNull())
        key = [k for k in d.schema.primary_key if k.lower() in self.columns_at(path)] or [name]
        samples = (
            unfit.select(*[F.col(ident(k)) for k in key], F.col(ident(name)))
            .limit(_SAMPLES)
            .collect()
        )
        if samples:
            shown = "; ".join(
                ", ".join(f"{k}={r[i]}" for i, k in enumerate(key)) + f": {r[len(key)]}"
                for r in samples
            )
            raise SinkError(
                f"Delta table {path}: rewriting column {name!r} as {wanted} for "
                f"{d.statement!r}: {unfit.count()} value(s) do not fit (MySQL's ALTER "
                f"would refuse them too), e.g. {shown}. Fix those rows upstream, or widen "
                "the type further"
            )
        out = rows.select(
            *[cast.alias(f.name) if f.name.lower() == name.lower() else F.col(ident(f.name))
              for f in rows.schema.fields]
        )  # fmt: skip
        with txn(self.spark, self.app_id, slot):
            out.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)

    def merge(
        self, target: TargetId, src: DataFrame, key: list[str], columns: list[str], version: int
    ) -> dict[str, int]:
        return self.merge_at(self.locate(target), src, key, columns, version)

    def merge_at(
        self, path: str, src: DataFrame, key: list[str], columns: list[str], version: int
    ) -> dict[str, int]:
        """Upsert/delete the latest action per key (``_action`` 'u' or 'd'). Returns what
        Delta reports it did: ``{"inserted": n, "updated": n, "deleted": n}`` (all 0 when
        the transaction version was done already and Delta skipped the write)."""
        view = f"shardmerge_src_{abs(hash((path, version)))}"
        src.createOrReplaceTempView(view)
        on = " AND ".join(f"t.{ident(k)} <=> s.{ident(k)}" for k in key)
        sets = ", ".join(f"t.{ident(c)} = s.{ident(c)}" for c in columns)
        cols = ", ".join(ident(c) for c in columns)
        vals = ", ".join(f"s.{ident(c)}" for c in columns)
        sql = (
            f"MERGE INTO {self.table(path)} t USING {view} s ON {on} "
            "WHEN MATCHED AND s._action = 'd' THEN DELETE "
            f"WHEN MATCHED THEN UPDATE SET {sets} "
            f"WHEN NOT MATCHED AND s._action <> 'd' THEN INSERT ({cols}) VALUES ({vals})"
        )
        with txn(self.spark, self.app_id, version):
            result = self.retrying(path, lambda: self.spark.sql(sql))
        self.spark.catalog.dropTempView(view)
        done = _counts(result)
        counts = {k: done.get(f"num_{k}_rows", 0) for k in ("inserted", "updated", "deleted")}
        # Delta returns no row for a MERGE whose transaction version was done already: it
        # skipped the write without reading the source
        return counts if done else {**counts, "skipped": 1}

    def append(self, target: TargetId, rows: DataFrame, columns: list[str], version: int) -> None:
        """Append ``rows`` (``columns`` of the target's schema, and ``_action``), rows whose
        keys are not in the table (``streaming.batch.new_keys``), with transaction
        ``(app_id, version)``: each value cast to its column's type in the table, as the
        MERGE's INSERT would; a column of the table the rows do not name is NULL."""
        path = self.locate(target)
        have = {f.name.lower(): f for f in self.spark.read.format("delta").load(path).schema.fields}
        out = [
            F.col(ident(c)).cast(have[c.lower()].dataType).alias(have[c.lower()].name)
            for c in columns
            if c.lower() in have
        ]
        self.retrying(path, lambda: _append(rows.select(*out), path, self.app_id, version))

    def key_ranges(
        self, target: TargetId, key: str, prefix: list[str], bucket: int, limit: int = 100_000
    ) -> list[tuple[tuple[str | None, ...], int, int]]:
        """The keys the table holds, as ranges of column ``key`` per value of the
        ``prefix`` columns (as text) and bucket of ``bucket`` keys: one aggregate over the
        table. More than ``limit`` ranges: one range per prefix instead (coarser, never
        narrower)."""
        path = self.locate(target)
        k = f"CAST({ident(key)} AS DECIMAL(20,0))"
        cols = [f"CAST({ident(p)} AS STRING) AS _np{i}" for i, p in enumerate(prefix)]
        group = [f"_np{i}" for i in range(len(prefix))]

        def ranges(by_bucket: bool) -> list[Any]:
            keys = [*group, "_b"] if by_bucket else group
            select = ", ".join([*cols, f"{k} DIV {int(bucket)} AS _b" if by_bucket else "0 AS _b",
                                f"min({k}) AS lo", f"max({k}) AS hi"])  # fmt: skip
            sql = f"SELECT {select} FROM {self.table(path)} WHERE {k} IS NOT NULL"
            if keys:
                sql += " GROUP BY " + ", ".join(keys)
            return self.spark.sql(sql + f" LIMIT {int(limit) + 1}").collect()

        rows = ranges(True)
        if len(rows) > limit:
            rows = ranges(False)
        return [
            (tuple(r[g] for g in group), int(r["lo"]), int(r["hi"]))
            for r in rows
            if r["lo"] is not None
        ]

    def truncate(self, target: TargetId, matches: list[Match], version: int) -> int:
        """One DELETE of the rows whose columns equal one of ``matches`` (a TRUNCATE's
        shard by its extract values; an empty match, every row); the rows deleted."""
        if any(not m for m in matches):
            where = "true"  # an operator executed a TRUNCATE as written: every row goes
        else:
            columns = [k for k, _ in matches[0]]
            values = ", ".join(
                "(" + ", ".join(string(v) for _, v in m) + ")" for m in dict.fromkeys(matches)
            )
            where = f"({', '.join(ident(k) for k in columns)}) IN ({values})"
        path = self.locate(target)
        return delete_where(self.spark, self.app_id, path, where, version, self.retrying)

    def retrying(self, path: str, write: Callable[[], DataFrame]) -> DataFrame:
        """``write``, run again while it loses Delta's commit race to another writer of a
        shared table on data alone (:data:`DATA_CONFLICTS`), at most
        :data:`CONFLICT_ATTEMPTS` times."""
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            try:
                return write()
            except Exception as e:
                text = str(e)
                if (
                    not self.shared
                    or attempt == CONFLICT_ATTEMPTS
                    or not any(c in text for c in DATA_CONFLICTS)
                ):
                    raise
                CONFLICTS[0] += 1
                kind = next(c for c in DATA_CONFLICTS if c in text)
                log.warning("%s: %s (another job's commit); writing again (attempt %d)",
                            path, kind, attempt + 1)  # fmt: skip
                time.sleep(random.uniform(0.05, 0.25 * attempt))
        raise AssertionError("unreachable")

    def rehome(
        self,
        target: TargetId,
        match: Match,
        values: Match,
        version: int,
        where: str | None = None,
    ) -> int:
        """Rows whose columns equal ``match`` (and, with ``where``, for which that Spark SQL
        condition holds: a split move's keys) take ``values`` (a renamed or moved shard's
        extract values): one UPDATE; the rows changed, as Delta reports them (0 when the
        version was done already)."""
        return update(self.spark, self.app_id, self.locate(target), match, values, version, where)


def _append(rows: DataFrame, path: str, app_id: str, version: int) -> DataFrame:
    """Delta's append of ``rows`` with transaction ``(app_id, version)`` (skipped if done)."""
    rows.write.format("delta").mode("append").option("txnAppId", app_id).option(
        "txnVersion", version
    ).save(path)
    return rows


def delete_where(
    spark: SparkSession,
    app_id: str,
    path: str,
    where: str,
    version: int,
    retrying: Callable[[str, Callable[[], DataFrame]], DataFrame] | None = None,
) -> int:
    """``DELETE`` from the Delta table at ``path`` where the Spark SQL condition holds, with
    transaction ``(app_id, version)``; the rows deleted, as Delta reports them (0 when the
    version was done already). ``retrying``: a shared table's commit races run again."""
    sql = f"DELETE FROM {table_at(path)} WHERE {where}"
    with txn(spark, app_id, version):
        result = retrying(path, lambda: spark.sql(sql)) if retrying else spark.sql(sql)
    return _counts(result).get("num_affected_rows", 0)


def update(
    spark: SparkSession,
    app_id: str,
    path: str,
    match: tuple[tuple[str, str], ...],
    values: tuple[tuple[str, str], ...],
    version: int,
    condition: str | None = None,
) -> int:
    """``UPDATE`` the Delta table at ``path``: rows whose string columns equal ``match``
    (and for which ``condition`` holds, when given) take ``values``, with transaction
    ``(app_id, version)``; the rows changed, as Delta reports them (0 when the version was
    done already)."""
    where = " AND ".join([equal_to(match)] + ([condition] if condition else []))
    assignments = ", ".join(f"{ident(k)} = {string(v)}" for k, v in values)
    with txn(spark, app_id, version):
        result = spark.sql(f"UPDATE {table_at(path)} SET {assignments} WHERE {where}")
    return _counts(result).get("num_affected_rows", 0)


def equal_to(match: tuple[tuple[str, str], ...]) -> str:
    """A condition true where each named string column equals its value."""
    return " AND ".join(f"{ident(k)} = {string(v)}" for k, v in match)


def _counts(result: DataFrame) -> dict[str, int]:
    """The one-row result of a Delta DML command (a local relation: collecting it runs no
    Spark job). Delta returns no row, or -1, where it kept no count."""
    rows = result.collect()
    if not rows:
        return {}
    return {k: int(v) for k, v in rows[0].asDict().items() if v is not None and int(v) >= 0}


def _cannot(path: str, d: ApplyDDL, name: str, current: str, wanted: str, why: str) -> str:
    return (
        f"Delta table {path} cannot change column {name!r} from {current} to {wanted} in "
        f"place ({why.splitlines()[0] if why else 'refused'}). Either set "
        f"targets.{d.target}.rewrite_incompatible: true, and shardmerge rewrites the table "
        "with the new type in one commit (refused if a value does not fit), or rebuild it "
        "yourself (copy it with a cast into a table with the same columns and column "
        "mapping, then swap the folders)"
    )


def _same_type(current: str, wanted: str) -> bool:
    aliases = {"INTEGER": "INT", "BYTE": "TINYINT", "SHORT": "SMALLINT", "LONG": "BIGINT"}

    def norm(t: str) -> str:
        return aliases.get(t, t).replace(" ", "")

    return norm(current) == norm(wanted)


def _cause_of(metadata: str | None) -> dict[str, Any] | None:
    """The cause a commit's userMetadata records (:func:`commit_info`), or None."""
    if not metadata:
        return None
    try:
        data = json.loads(metadata)
    except ValueError:
        return None  # another writer's text: shown as it is
    cause = data.get("shardmerge") if isinstance(data, dict) else None
    return cause if isinstance(cause, dict) else None
