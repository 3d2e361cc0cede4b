"""The stash: one Delta table of held row events, for every target of the job.

A row event is stashed with its target, its shard's table version and the batch that
stashed it. A batch appends once (every row it holds) and deletes once (every row its
releases replayed), each with its own transaction version, so a re-run batch does
neither twice. Rows of the running batch are never read back by it: a re-run finds the
rows its first attempt appended and must not replay them.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from coordinator.ids import Position, ShardId
from streaming.faults import raise_point
from streaming.source.contract import EVENT_SCHEMA
from streaming.source.control import ORDER_KEY, okey_sql
from streaming.sql.quoting import ident, table_at
from streaming.storage.delta_sink import delete_where, delta_table_at, equal_to, txn, update

__all__ = ["STASH_COLUMNS", "Stash", "append"]

# A stashed row is a shard table's, never an online-DDL shadow's: no row_schema (a stash
# created before that column existed keeps its columns).
STASH_COLUMNS = [f.name for f in EVENT_SCHEMA.fields if f.name != "row_schema"]
KEY = ["topic", "partition", "offset"]


def append(df: DataFrame, path: str, app_id: str, version: int) -> None:
    """Append ``df`` to the Delta table at ``path`` with transaction ``(app_id, version)``
    (Delta skips the write if the checkpoint ``app_id`` recorded that version)."""
    (
        df.write.format("delta")
        .mode("append")
        .option("txnAppId", app_id)
        .option("txnVersion", version)
        .option("mergeSchema", "true")
        .save(path)
    )


class Stash:
    def __init__(self, spark: SparkSession, path: str, app_id: str) -> None:
        self.spark = spark
        self.path = path
        self.app_id = app_id  # the checkpoint's (see streaming.storage.state_store)

    def exists(self) -> bool:
        """Whether the stash table was created. Only a free path is "no stash"; a stash
        that is there but cannot be read raises (``delta_sink.delta_table_at``)."""
        raise_point("stash_read")
        return delta_table_at(self.spark, self.path)

    def rows(self, df: DataFrame, target: str, version: str, batch: int) -> DataFrame:
        """``df``'s events as stash rows (``target``, ``version``: column expressions)."""
        return df.select(
            *STASH_COLUMNS,
            F.expr(target).alias("target"),
            F.expr(version).cast("int").alias("version"),
            F.lit(batch).alias("batch"),
        )

    def released(self, releases: DataFrame, batch: int) -> DataFrame:
        """The stash rows of earlier batches that ``releases`` (see
        ``streaming.batch.plan.release_frame``) replay, with ``_okey`` and ``_project``."""
        held = (
            self.spark.read.format("delta")
            .load(self.path)
            .filter(F.col("batch") < batch)
            .withColumn("_okey", F.expr(ORDER_KEY))
        )
        on = (
            (F.col("target") == F.col("_rtarget"))
            & (F.col("source") == F.col("_rs"))
            & (F.col("db") == F.col("_rd"))
            & (F.col("tbl") == F.col("_rt"))
            & (F.col("version") == F.col("_rversion"))
            & (F.col("_until").isNull() | (F.col("_okey") < F.col("_until")))
        )
        return (
            held.join(F.broadcast(releases), on)
            .withColumn("_project", F.col("_rproject"))
            .drop("_rtarget", "_rs", "_rd", "_rt", "_rversion", "_until", "_rproject")
        )

    def waiting(self, version: int, batch: int) -> DataFrame:
        """The rows earlier batches held under table version ``version`` (rows a move
        could not classify yet), as the batch's events (``_okey`` included): the batch
        classifies them again with its own rows, and deletes these copies."""
        return (
            self.spark.read.format("delta")
            .load(self.path)
            .filter((F.col("version") == int(version)) & (F.col("batch") < int(batch)))
            .select(
                *[
                    F.col(f.name)
                    if f.name in STASH_COLUMNS
                    else F.lit(None).cast(f.dataType).alias(f.name)
                    for f in EVENT_SCHEMA.fields
                ]
            )
            .withColumn("_okey", F.expr(ORDER_KEY))
        )

    def rename(
        self,
        target: str,
        old: ShardId,
        new: ShardId,
        version: int,
        keep: list[tuple[int, Position]] | None = None,
    ) -> None:
        """The held rows of ``old`` (for ``target``) are ``new``'s from now on: a release of
        the renamed shard replays them. One UPDATE with transaction ``(app_id, version)``.
        ``keep``: (table version, until) of releases of ``old`` the running batch replays
        (rows of that version before ``until``, all when None): they keep ``old``'s name,
        the batch reads them under it."""
        condition = None
        if keep:
            released = " OR ".join(_held_under(v, until) for v, until in keep)
            condition = f"NOT ({released})"
        update(
            self.spark,
            self.app_id,
            self.path,
            (("target", target), ("source", old.source), ("db", old.db), ("tbl", old.table)),
            (("source", new.source), ("db", new.db), ("tbl", new.table)),
            version,
            condition,
        )

    def discard(self, target: str, shard: ShardId, kept: int, batch: int, version: int) -> int:
        """Delete the rows earlier batches held for ``target`` of ``shard`` under table
        version ``kept`` (rows a move kept that are never to be applied: docs/moves.md),
        in one commit with transaction ``(app_id, version)``; how many went."""
        match = (("target", target), ("source", shard.source), ("db", shard.db),
                 ("tbl", shard.table))  # fmt: skip
        where = f"{equal_to(match)} AND version = {int(kept)} AND batch < {int(batch)}"
        return delete_where(self.spark, self.app_id, self.path, where, version)

    def delete(self, keys: DataFrame, batch: int, version: int) -> None:
        """Delete the stash rows of earlier batches whose (topic, partition, offset) is in
        ``keys``: one commit, whatever the number of shards released."""
        keys.select(*KEY).dropDuplicates().createOrReplaceTempView("shardmerge_released")
        on = " AND ".join(f"s.{ident(k)} = k.{ident(k)}" for k in KEY)
        with txn(self.spark, self.app_id, version):
            self.spark.sql(
                f"MERGE INTO {table_at(self.path)} s "
                f"USING shardmerge_released k ON {on} AND s.batch < {int(batch)} "
                "WHEN MATCHED THEN DELETE"
            )
        self.spark.catalog.dropTempView("shardmerge_released")


def _held_under(version: int, until: Position) -> str:
    """A condition true for stash rows of table ``version`` before ``until`` (every row of
    the version when None): what a release replays (``Stash.released``)."""
    if until is None:
        return f"(version = {int(version)})"
    return f"(version = {int(version)} AND {ORDER_KEY} < {okey_sql(until)})"
