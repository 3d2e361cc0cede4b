"""The Delta sink: one Delta table per target, changed only through idempotent steps.

- Tables are created with column mapping (``delta.columnMapping.mode=name``), so RENAME and
  DROP COLUMN work, and with type widening, so INT -> BIGINT and similar MODIFYs work.
- Row writes are MERGEs carrying ``txnAppId``/``txnVersion`` (Delta skips a version it has
  already recorded for the app id): a re-run batch writes nothing twice. The app id is the
  checkpoint's (streaming/state_store.py), so a new checkpoint never has a write skipped.
- DDL is applied by comparing the wanted change with the table's current schema (ADD only
  a missing column, RENAME only while the old name exists, ...), so running it again is a
  no-op. Delta keeps no MySQL defaults or NOT NULL: shardmerge fills values itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession

from coordinator.decisions import ApplyDDL
from schemas.changes import (
    AddColumn,
    ChangeColumn,
    DropColumn,
    ModifyColumn,
    RenameColumn,
)
from schemas.model import TableSchema
from shardmerge.errors import ShardMergeError
from streaming.quoting import ident, table_at
from streaming.spark_types import delta_type, literal_expr, schema_ddl

__all__ = ["DeltaSink", "SinkError", "txn"]

# Type changes Delta's type widening accepts (Delta 4.x docs, "Type widening").
_WIDENING = {
    ("TINYINT", "SMALLINT"),
    ("TINYINT", "INT"),
    ("TINYINT", "BIGINT"),
    ("SMALLINT", "INT"),
    ("SMALLINT", "BIGINT"),
    ("INT", "BIGINT"),
    ("FLOAT", "DOUBLE"),
    ("TINYINT", "DOUBLE"),
    ("SMALLINT", "DOUBLE"),
    ("INT", "DOUBLE"),
    ("DATE", "TIMESTAMP_NTZ"),
}


class SinkError(ShardMergeError):
    """Delta cannot express a change; the message says what the operator can do."""


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


class DeltaSink:
    def __init__(self, spark: SparkSession, app_id: str) -> None:
        self.spark = spark
        self.app_id = app_id  # the checkpoint's: every idempotent write carries it

    def table(self, path: str) -> str:
        return table_at(path)

    def exists(self, path: str) -> bool:
        try:
            self.spark.sql(f"DESCRIBE DETAIL {self.table(path)}").collect()
            return True
        except Exception:
            return False

    def create(self, path: str, schema: TableSchema) -> None:
        self.spark.sql(
            f"CREATE TABLE IF NOT EXISTS {self.table(path)} ({schema_ddl(schema)}) USING DELTA "
            "TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
            "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5', "
            "'delta.enableTypeWidening' = 'true')"
        )

    def columns(self, path: str) -> dict[str, str]:
        fields = self.spark.read.format("delta").load(path).schema.fields
        return {f.name.lower(): f.dataType.simpleString().upper() for f in fields}

    def alter(self, path: str, decision: ApplyDDL, version: Callable[[], int]) -> None:
        """Apply the decision's specs, each only if the table still needs it.

        An added column whose MySQL fill value is not NULL (a default, or the implicit 0 of
        a NOT NULL column) is filled in the existing rows, as MySQL does upstream; that
        UPDATE takes a write slot from ``version`` whether or not it runs."""
        table = self.table(path)
        for spec in decision.specs:
            have = self.columns(path)
            match spec:
                case AddColumn(column, position):
                    fill = column.fill_sql()
                    slot = version() if fill.upper() != "NULL" else None
                    if column.key not in have:
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
                    self._rename(table, have, old, column.name)
                    self._retype(path, table, column.name, delta_type(column.type))
                case ModifyColumn(column, _):
                    self._retype(path, table, column.name, delta_type(column.type))
                case _:
                    pass  # indexes, keys, charsets, defaults: nothing to do on Delta

    def _rename(self, table: str, have: dict[str, str], old: str, new: str) -> None:
        if old.lower() != new.lower() and old.lower() in have and new.lower() not in have:
            self.spark.sql(f"ALTER TABLE {table} RENAME COLUMN {ident(old)} TO {ident(new)}")

    def _retype(self, path: str, table: str, name: str, wanted: str) -> None:
        current = self.columns(path).get(name.lower())
        if current is None or _same_type(current, wanted):
            return
        if (current, wanted) in _WIDENING or (
            current.startswith("DECIMAL") and wanted.startswith("DECIMAL")
        ):
            self.spark.sql(f"ALTER TABLE {table} ALTER COLUMN {ident(name)} TYPE {wanted}")
            return
        if wanted == "STRING" and current == "STRING":
            return
        raise SinkError(
            f"Delta table {path} cannot change column {name!r} from {current} to {wanted} "
            "(not a type widening Delta supports); rebuild the table with the new type "
            "(e.g. copy it with a cast into a new table with the same columns and column "
            "mapping, then swap the folders)"
        )

    def merge(
        self, path: str, src: DataFrame, key: list[str], columns: list[str], version: int
    ) -> None:
        """Upsert/delete the latest action per key (``_action`` 'u' or 'd')."""
        view = f"shardmerge_src_{abs(hash((path, version)))}"
        src.createOrReplaceTempView(view)
        on = " AND ".join(f"t.{ident(k)} <=> s.{ident(k)}" for k in key)
        sets = ", ".join(f"t.{ident(c)} = s.{ident(c)}" for c in columns)
        cols = ", ".join(ident(c) for c in columns)
        vals = ", ".join(f"s.{ident(c)}" for c in columns)
        with txn(self.spark, self.app_id, version):
            self.spark.sql(
                f"MERGE INTO {self.table(path)} t USING {view} s ON {on} "
                "WHEN MATCHED AND s._action = 'd' THEN DELETE "
                f"WHEN MATCHED THEN UPDATE SET {sets} "
                f"WHEN NOT MATCHED AND s._action <> 'd' THEN INSERT ({cols}) VALUES ({vals})"
            )
        self.spark.catalog.dropTempView(view)

    def delete(self, path: str, where: str, version: int) -> None:
        with txn(self.spark, self.app_id, version):
            self.spark.sql(f"DELETE FROM {self.table(path)} WHERE {where}")


def _same_type(current: str, wanted: str) -> bool:
    aliases = {"INTEGER": "INT", "BYTE": "TINYINT", "SHORT": "SMALLINT", "LONG": "BIGINT"}
    norm = lambda t: aliases.get(t, t).replace(" ", "")  # noqa: E731
    return norm(current) == norm(wanted)
