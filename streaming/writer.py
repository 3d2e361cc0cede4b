"""Step 6 of the micro-batch protocol: write every target once (see ``streaming.batch``).

Per target, in name order: one DELETE for the shards that ran TRUNCATE in the batch, then
one MERGE of the batch's free rows and the rows its releases replay from the stash, each
projected onto the target's schema as of the end of the batch at its own position
(``streaming.rows``). Rows ahead of a DDL that has not arrived make their shard wait from
there. Then, for the whole batch: one stash append (held rows and rows ahead of a DDL),
one dead-letter append, one stash delete (the replayed rows). Each write takes its slot
in a fixed order, used or not, so a re-run batch finds the same transaction versions.
"""

from __future__ import annotations

import time
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from coordinator.ids import ShardId, TargetId
from streaming.control import OKEY_TYPE, okey_position, okey_value
from streaming.faults import crash_point
from streaming.plan import Planner, join_plan, release_frame
from streaming.quoting import ident, string
from streaming.row_fit import shard_columns
from streaming.rows import merge_source, no_ddl_sql, project_actions
from streaming.stash import KEY, STASH_COLUMNS, append

__all__ = ["FATE", "ROW_COLUMNS", "WriteStep"]

# What a fresh row of the batch does, from its plan (``streaming.plan``).
FATE = (
    "CASE WHEN _act IS NULL OR _act = 'unknown' THEN 'unknown' "
    "WHEN _act = 'drop' THEN 'drop' "
    "WHEN _okey < _drop_before THEN 'gone' "
    "WHEN _act = 'write' OR _okey < _hold_from THEN 'write' "
    "ELSE 'hold' END"
)
# The columns a row carries from the plan into the projection.
ROW_COLUMNS = [
    *STASH_COLUMNS, "_okey", "_target", "_version", "_project", "_renames", "_last_alter",
    "_fate",
]  # fmt: skip


class WriteStep:
    """Step 6, as part of the batch (``streaming.batch._Batch``): it reads the batch's
    coordinator ``c``, executor ``ex``, ``stash``, ``sink``, ``stats``, ``events``,
    control-event dead letters ``dead`` and write slots ``next_version``."""

    c: Any
    ex: Any
    p: Any
    spark: Any
    sink: Any
    stash: Any
    stats: Any
    events: DataFrame
    batch: int
    dead: list[tuple[str, int, int, str]]
    cached: list[DataFrame]
    caught: list[Any]

    def next_version(self) -> int:
        raise NotImplementedError

    # --- step 6 -----------------------------------------------------------------------------

    def write(self, rows: DataFrame, planner: Planner) -> None:
        work = self.ex.work
        plan = planner.frame(self.spark, work.truncates)
        fresh = join_plan(rows, plan).withColumn("_fate", F.expr(FATE)).persist()
        self.cached = [fresh]
        try:
            self._write(fresh, plan)
        finally:
            for frame in self.cached:
                frame.unpersist()

    def _write(self, fresh: DataFrame, plan: DataFrame) -> None:
        work = self.ex.work
        counts: dict[tuple[str | None, str], int] = {
            (r["_target"], r["_fate"]): r["count"]
            for r in fresh.groupBy("_target", "_fate").count().collect()
        }
        for fate, name in (("write", "written"), ("hold", "held"), ("drop", "dropped")):
            setattr(self.stats, name, sum(n for (_, f), n in counts.items() if f == fate))
        self.stats.events = sum(counts.values())
        released = None
        if work.releases and self.stash.exists():
            held = self.stash.released(release_frame(self.spark, work.releases), self.batch)
            released = (
                join_plan(held.withColumnRenamed("_project", "_rproject"), plan)
                .withColumn("_target", F.col("target"))
                .withColumn("_version", F.col("version"))
                .withColumn("_project", F.col("_rproject"))
                .withColumn(
                    "_fate", F.expr("CASE WHEN _okey < _drop_before THEN 'gone' ELSE 'replay' END")
                )
                .select(*ROW_COLUMNS)
                .persist()
            )
            self.cached.append(released)
        self._write_targets(fresh, released, counts)

    def _write_targets(
        self, fresh: DataFrame, released: DataFrame | None, counts: dict[Any, int]
    ) -> None:
        work = self.ex.work
        stash_parts = []
        if any(f == "hold" for _, f in counts):
            stash_parts.append(
                self.stash.rows(fresh.filter("_fate = 'hold'"), "_target", "_version", self.batch)
            )
        dead_parts = []
        if any(f == "unknown" for _, f in counts):
            dead_parts.append(
                _dead(fresh.filter("_fate = 'unknown'"), "the row's table was never registered")
            )
        waits: list[tuple[str, str, str, Any]] = []
        for target in sorted(set(self.c.targets) | set(self.ex.schemas), key=str):
            # Two slots per target, used or not: slot numbers never depend on the data.
            delete_slot, merge_slot = self.next_version(), self.next_version()
            schema = self.ex.schemas.get(target)
            if schema is None:
                continue
            path = self.p.settings.table_path(target)
            self.truncate(target, path, delete_slot)
            sources = []
            if counts.get((str(target), "write")):
                sources.append(
                    fresh.filter(
                        (F.col("_target") == str(target)) & (F.col("_fate") == "write")
                    ).select(*ROW_COLUMNS)
                )
            if released is not None and any(d.target == target for d in work.releases):
                sources.append(
                    released.filter(
                        (F.col("_target") == str(target)) & (F.col("_fate") == "replay")
                    )
                )
            if not sources:
                continue
            src = sources[0] if len(sources) == 1 else sources[0].unionByName(sources[1])
            ahead, unfit = self.merge(target, path, src, merge_slot, waits)
            if ahead is not None:
                stash_parts.append(ahead)
            if unfit is not None:
                dead_parts.append(unfit)
            crash_point("after_rows")
        waits_df = self.waits_frame(waits)
        stash_version, dead_version, delete_version = (self.next_version() for _ in range(3))
        if stash_parts:
            frame = stash_parts[0]
            for part in stash_parts[1:]:
                frame = frame.unionByName(part)
            append(frame, self.stash.path, self.p.app_id, stash_version)
        if self.dead:
            keys = self.spark.createDataFrame(
                self.dead, "_dt string, _dp int, _do long, _reason string"
            )
            on = (
                (F.col("topic") == F.col("_dt"))
                & (F.col("partition") == F.col("_dp"))
                & (F.col("offset") == F.col("_do"))
            )
            dead_parts.append(_dead(self.events.join(F.broadcast(keys), on), None))
        if dead_parts:
            frame = dead_parts[0]
            for part in dead_parts[1:]:
                frame = frame.unionByName(part)
            append(frame, self.p.settings.dead_letters(), self.p.app_id, dead_version)
        crash_point("after_release")
        if released is not None:
            crash_point("before_stash_delete")
            # Replayed rows leave the stash; those ahead of a further DDL stay.
            keep = released.join(F.broadcast(waits_df), ["source", "db", "tbl"], "left")
            self.stash.delete(
                keep.filter("_wait IS NULL OR _okey < _wait"), self.batch, delete_version
            )

    def truncate(self, target: TargetId, path: str, version: int) -> None:
        """One DELETE of the downstream rows of every shard of ``target`` that ran
        TRUNCATE in this batch (their earlier rows of the batch are dropped by the plan)."""
        matches = [d.match for d in self.ex.work.truncates if d.target == target]
        if not matches:
            return
        if any(not m for m in matches):
            where = "true"  # an operator executed a TRUNCATE as written: every row goes
        else:
            columns = [k for k, _ in matches[0]]
            values = ", ".join(
                "(" + ", ".join(string(v) for _, v in m) + ")" for m in dict.fromkeys(matches)
            )
            where = f"({', '.join(ident(k) for k in columns)}) IN ({values})"
        deleted = self.sink.delete(path, where, version)
        self.count_target_rows(target, {"truncated": deleted})

    def count_target_rows(self, target: TargetId, done: dict[str, int]) -> None:
        counts = self.stats.target_rows.setdefault(str(target), {})
        for action, n in done.items():
            counts[action] = counts.get(action, 0) + n

    def merge(
        self,
        target: TargetId,
        path: str,
        src: DataFrame,
        version: int,
        waits: list[tuple[str, str, str, Any]],
    ) -> tuple[DataFrame | None, DataFrame | None]:
        """MERGE one target's rows. A row naming a column the target or its own shard
        lacks (``streaming.row_fit``) is ahead of a DDL that has not arrived: its shard
        waits from that row on (such fresh rows go to
        the stash, replayed ones stay in it). Returns the fresh rows to stash and the dead
        letters of values that do not fit their column."""
        schema = self.ex.schemas[target]
        t = self.c.targets[target]
        projected = project_actions(src, schema, t.extract, shards=shard_columns(t))
        projected = projected.withColumn("_unfit", F.expr(no_ddl_sql(self.caught))).persist()
        self.cached.append(projected)
        firsts = (
            projected.groupBy("source", "db", "tbl")
            .agg(
                F.min(F.when(_ahead_now(), F.col("_okey"))).alias("first"),
                F.first(F.when(_ahead_now(), F.col("_reason")), ignorenulls=True).alias("why"),
                F.count("_unfit").alias("unfit"),
                F.count(
                    F.when((F.col("_fate") == "write") & F.col("_unfit").isNotNull(), True)
                ).alias("unfit_fresh"),
                F.count(
                    F.when((F.col("_fate") == "replay") & F.col("_unfit").isNull(), True)
                ).alias("replayed"),
            )
            .collect()
        )
        mine = []
        for r in firsts:
            # A value that does not fit is a dead letter (counted there), not a row written.
            self.stats.written -= r["unfit_fresh"]
            self.stats.replayed += r["replayed"]
            if r["first"] is None:
                continue
            shard = ShardId(r["source"], r["db"], r["tbl"])
            pos = okey_position(r["first"])
            self.ex.run(self.c.await_ddl(shard, pos, f"{r['why']}: waiting for its DDL"))
            mine.append((shard.source, shard.db, shard.table, pos))
        waits += mine
        flagged = projected.join(
            F.broadcast(self.waits_frame(mine)), ["source", "db", "tbl"], "left"
        ).withColumn("_ahead", F.expr("coalesce(_okey >= _wait, false)"))
        good = merge_source(flagged.filter("_unfit IS NULL AND NOT _ahead"), schema)
        planning = time.monotonic()
        good._jdf.queryExecution().executedPlan()  # analysis, optimization, planning
        self.stats.plan_seconds += round(time.monotonic() - planning, 3)
        done = self.sink.merge(
            path,
            good,
            list(schema.primary_key) or list(schema.column_names()),
            list(schema.column_names()),
            version,
        )
        self.count_target_rows(target, done)
        ahead = None
        if mine:
            # Rows ahead of a DDL go to (or stay in) the stash: held, not written. Rare (a
            # row topic ahead of the schema topic), so its own small count job.
            moved = {
                r["_fate"]: r["count"]
                for r in flagged.filter("_ahead AND _unfit IS NULL").groupBy("_fate").count()
                .collect()
            }  # fmt: skip
            self.stats.written -= moved.get("write", 0)
            self.stats.held += moved.get("write", 0)
            self.stats.replayed -= moved.get("replay", 0)
            ahead = self.stash.rows(
                flagged.filter("_ahead AND _unfit IS NULL AND _fate = 'write'").dropDuplicates(KEY),
                "_target",
                "_version",
                self.batch,
            )
        unfit = None
        if any(r["unfit"] for r in firsts):
            unfit = _dead(
                flagged.filter("_unfit IS NOT NULL").withColumn("_reason", F.col("_unfit"))
                .dropDuplicates(KEY),
                None,
            )  # fmt: skip
        return ahead, unfit

    def waits_frame(self, waits: list[tuple[str, str, str, Any]]) -> DataFrame:
        return self.spark.createDataFrame(
            [(s, d, t, okey_value(p)) for s, d, t, p in waits],
            f"source string, db string, tbl string, _wait {OKEY_TYPE}",
        )


def _ahead_now() -> Any:
    """A key action ahead of a DDL (its value fits: unfit values are dead letters)."""
    return F.col("_reason").isNotNull() & F.col("_unfit").isNull()


def _dead(bad: DataFrame, reason: str | None) -> DataFrame:
    """Rows that cannot be written, as dead letters with the reason."""
    return bad.select(
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        F.lit(None).cast("binary").alias("key"),
        F.to_json(F.struct(*[F.col(c) for c in STASH_COLUMNS])).cast("binary").alias("value"),
        F.col("format"),
        (F.lit(reason) if reason is not None else F.col("_reason")).alias("reason"),
        F.current_timestamp().alias("seen_at"),
    )
