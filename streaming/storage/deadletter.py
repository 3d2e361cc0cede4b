"""The dead-letter table: Kafka records that could not be decoded, kept with the reason.

A Delta table (no partitioning) with the columns of
:data:`~streaming.source.contract.DEAD_LETTER_SCHEMA`: the record's topic, partition,
offset, raw key and value, the format it was read as, the reason (``"<what> at <field>"``)
and when it was seen. The stream keeps going past a bad record; this table is where an
operator finds it (``count`` shows how many there are), fixes the producer or the
configuration, and replays the raw value if needed.
"""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streaming.source.contract import DEAD_LETTER_SCHEMA

__all__ = ["count", "write_dead_letters"]


def write_dead_letters(
    df: DataFrame,
    path: str,
    *,
    txn_app_id: str | None = None,
    txn_version: int | None = None,
) -> None:
    """Append ``df`` (dead letters, as :func:`streaming.source.decode.decode` returns them) to the
    Delta table at ``path``, creating it on first use.

    Inside ``foreachBatch`` pass ``txn_app_id`` (the query's id) and ``txn_version`` (the
    batch id): a re-run of the same batch is then skipped by Delta instead of appending
    the same dead letters twice. Both or neither.
    """
    if (txn_app_id is None) != (txn_version is None):
        raise ValueError("pass txn_app_id and txn_version together, or neither")
    _create_if_missing(df.sparkSession, path)
    rows = df.select(*[F.col(f.name).cast(f.dataType) for f in DEAD_LETTER_SCHEMA.fields])
    writer = rows.write.format("delta").mode("append")
    if txn_app_id is not None:
        writer = writer.option("txnAppId", txn_app_id).option("txnVersion", txn_version)
    writer.save(path)


def _create_if_missing(spark: SparkSession, path: str) -> None:
    """Create the table with the contract's schema, so that Delta keeps its NOT NULL
    columns (a plain first append would make every column nullable)."""
    if not DeltaTable.isDeltaTable(spark, path):
        DeltaTable.createIfNotExists(spark).location(path).addColumns(DEAD_LETTER_SCHEMA).execute()


def count(spark: SparkSession, path: str, *, topic: str | None = None) -> int:
    """How many dead letters the table at ``path`` holds (of ``topic``, if given); 0 while
    no dead letter was ever written (the table does not exist yet)."""
    if not DeltaTable.isDeltaTable(spark, path):
        return 0
    table = spark.read.format("delta").load(path)
    if topic is not None:
        table = table.where(F.col("topic") == topic)
    return table.count()
