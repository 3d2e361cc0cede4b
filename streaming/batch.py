"""One micro-batch: the foreachBatch protocol.

Numbered steps, and what happens if the driver dies after each (Spark then runs the same
batch id again over the same offsets, because its checkpoint commit comes after us). Every
Delta write carries a transaction version derived from (batch id, write slot); slots are
handed out in the same order on a re-run, whatever the data, so a re-run skips every
write that happened.

1. **Restore** the coordinator from the newest state of an *earlier* batch, and fix the
   operator commands this batch applies (``intent``). Dies here: nothing was written.
2. **Apply operator commands**: their decisions go to the executor like any (step 5).
3. **Decode** the Kafka records in the JVM (``streaming.decode``); undecodable records go
   to the dead-letter table. Dies after: the re-run's append is skipped.
4. **Collect control events only** (DDL, TRUNCATE: a handful) to the driver and put them in
   one order (``streaming.control``); count the rows per shard.
5. **Decide**: every control event goes through the coordinator, in order, before any
   row is written. Schema work runs at once (CREATE, ALTER, default fills: each applied
   only where the table still lacks it); TRUNCATE and replays are recorded; statements
   that create, rename or drop tables cut their shards' rows into segments. Rows of
   tables never registered start a hold. The result is the row plan (``streaming.plan``):
   a small table of per-shard facts. Dies here: the re-run decides the same from the same
   state; the DDL it finds done is not done again.
6. **Write, per target** (in name order): one DELETE of the rows of the shards that ran
   TRUNCATE, then one MERGE of the batch's free rows and the rows its releases replay
   from the stash, each projected onto the target's schema as of the end of the batch at
   its own position, the last action per key winning (``streaming.rows``). Rows ahead of a
   DDL that has not arrived make their shard wait from there. Then, for the whole batch:
   one stash append (held rows, rows ahead of a DDL), one dead-letter append, one stash
   delete (replayed rows). Dies here: the re-run skips the writes done and does the rest.
7. **Persist** the coordinator state for this batch id (atomic file), then forget applied
   commands. Dies after: Spark re-runs the batch; step 1 restores the state *before* it, the
   writes are skipped, and the same state is written again.

So per target and batch the Delta commits are bounded: DDL statements and default fills,
at most one DELETE, one MERGE; and for the job one stash append, one stash delete and at
most two dead-letter appends. Held events never live in driver memory; nothing is written
twice and nothing is lost.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from coordinator.commands import CommandError, parse_command
from coordinator.coordinator import Coordinator, UnknownShardError
from coordinator.ids import ShardId, TargetId
from coordinator.locks import OperatorError
from coordinator.state import restore, snapshot
from coordinator.target import ConflictError
from streaming.config import Settings
from streaming.control import (
    OKEY_TYPE,
    ORDER_KEY,
    commit_time,
    control_sql,
    in_global_order,
    join_split_renames,
    okey_position,
    okey_value,
    position_of,
    table_level,
    touched,
)
from streaming.delta_sink import DeltaSink
from streaming.executor import Executor
from streaming.faults import crash_point
from streaming.ops.observer import BatchObserver
from streaming.plan import Planner, join_plan, release_frame
from streaming.quoting import check_session, ident, string
from streaming.rows import merge_source, project_actions
from streaming.stash import KEY, STASH_COLUMNS, Stash, append
from streaming.state_store import StateStore

__all__ = ["BatchProcessor", "Stats"]

log = logging.getLogger("shardmerge.batch")

SLOTS_PER_BATCH = 1_000_000
CONTROL = "op IN ('ddl', 't')"
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


@dataclass
class Stats:
    """Counts of one batch, kept in the state file for ``shardmerge locks`` and metrics."""

    batch: int = 0
    events: int = 0
    written: int = 0
    held: int = 0
    replayed: int = 0
    dropped: int = 0
    dead_letters: int = 0
    ddl: int = 0
    # Wall time of the batch; of steps 1-5 (the driver decides, DDL runs); and of the
    # driver's analysis and planning of the MERGE sources (it must not grow with shards or
    # control events: the row plan is data, not expressions).
    seconds: float = 0.0
    decide_seconds: float = 0.0
    plan_seconds: float = 0.0
    downstream_ddl: list[str] = field(default_factory=list)
    refused_ddl: list[str] = field(default_factory=list)
    command_errors: list[str] = field(default_factory=list)


class BatchProcessor:
    """The ``foreachBatch`` function of the job (see the module docstring for the steps)."""

    def __init__(self, spark: SparkSession, settings: Settings, decode: Any) -> None:
        check_session(spark.conf.get)
        self.spark = spark
        self.settings = settings
        self.decode = decode
        self.router = settings.router()
        self.store = StateStore(spark, settings.checkpoint)
        self.app_id = self.store.app_id()  # carried by every write (see delta_sink.txn)
        self.stash_path = self.store.uri("stash")
        self.last_stats: Stats | None = None
        self.observer = BatchObserver()  # step timings and counts for metrics/dashboard

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        _Batch(self, df, batch_id).run()

    def restore(self, batch: int) -> tuple[Coordinator, set[str]]:
        data = self.store.load_before(batch)
        configs, default = self.settings.target_configs(), self.settings.default_config()
        if data is None:
            return Coordinator(self.router, configs, default), set()
        c = restore(data["coordinator"], self.router, configs, default)
        return c, set(data.get("applied_commands", []))


class _Batch:
    def __init__(self, p: BatchProcessor, df: DataFrame, batch_id: int) -> None:
        self.p = p
        # foreachBatch hands a DataFrame of a cloned session: temp views, SQL and the
        # transaction confs must all use that session.
        self.spark = df.sparkSession
        self.sink = DeltaSink(self.spark, p.app_id)
        self.stash = Stash(self.spark, p.stash_path, p.app_id)
        self.df = df
        self.batch = batch_id
        self.slot = 0
        self.stats = Stats(batch=batch_id)
        self.dead: list[tuple[str, int, int, str]] = []  # control events: (key, reason)

    def run(self) -> None:
        started = time.monotonic()
        try:
            self._run(started)
        except ConflictError as e:
            self.p.store.save_failure(self.state_json({"error": str(e)}))
            raise

    def state_json(self, extra: dict[str, Any]) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "coordinator": snapshot(self.c),
            "stats": self.stats.__dict__,
            "locks": [_lock_json(v) for v in self.c.locks()],
            **extra,
        }

    def next_version(self) -> int:
        self.slot += 1
        return self.batch * SLOTS_PER_BATCH + self.slot

    def _run(self, started: float) -> None:
        obs = self.p.observer
        obs.begin(self.batch)
        # 1. restore
        self.c, applied = self.p.restore(self.batch)
        obs.lap("restore")
        schemas = {tid: s for tid, t in self.c.targets.items() if (s := t.downstream())}
        self.ex = Executor(self.c, self.sink, self.p.settings, self.next_version, schemas)
        commands = self.p.store.intent(self.batch, applied)
        # 2. operator commands
        for cmd in commands:
            try:
                self.ex.run(self.c.command(parse_command(cmd["words"])))
            except (CommandError, OperatorError) as e:
                self.stats.command_errors.append(f"{cmd['words']}: {e}")
                log.error("operator command %r failed: %s", cmd["words"], e)
            applied.add(cmd["id"])
        obs.lap("commands")
        # 3. decode (the batch is read from Kafka once)
        self.df = self.df.persist()
        events = self.events = self.decode_all().persist()
        crash_point("after_decode")
        try:
            # 4. control events, and the rows per shard
            controls = in_global_order(join_split_renames(events.filter(CONTROL).collect()))
            rows = events.filter(f"NOT ({CONTROL})")
            shards = {
                ShardId(r["source"], r["db"], r["tbl"]): okey_position(r["first"])
                for r in rows.groupBy("source", "db", "tbl")
                .agg(F.min("_okey").alias("first"))
                .collect()
            }
            obs.lap("decode")
            # 5. decide
            planner = Planner(self.c)
            for j, r in enumerate(controls):
                try:
                    self.control(r, planner)
                except ConflictError:
                    # A strict target stops the job here; the rows before this control
                    # event are written first, as they would be one by one.
                    self.decided(planner, shards)
                    self.write(self.before(rows, controls[j:]), planner)
                    raise
                crash_point("after_ddl")
            self.decided(planner, shards)
            self.stats.ddl = len(controls)
            self.stats.decide_seconds = round(time.monotonic() - started, 3)
            obs.lap("decide")
            # 6. write
            self.write(rows, planner)
            self.stats.events += len(controls)
        finally:
            events.unpersist()
            self.df.unpersist()
        obs.lap("write")
        # 7. persist
        self.stats.seconds = round(time.monotonic() - started, 3)
        crash_point("before_state")
        state = self.state_json({"applied_commands": sorted(applied)})
        self.p.store.save(self.batch, state)
        crash_point("after_state")
        self.p.store.forget_commands(applied)
        obs.lap("persist")
        obs.done(dict(self.stats.__dict__), state)
        self.p.last_stats = self.stats
        log.info("batch %d: %s", self.batch, self.stats)

    # --- step 3 -----------------------------------------------------------------------------

    def decode_all(self) -> DataFrame:
        parts = []
        dead_parts = []
        for fmt in sorted({s.format for s in self.p.settings.sources}):
            raw = self.df.filter(F.col("__fmt") == fmt) if "__fmt" in self.df.columns else self.df
            mapping = {t: s.source for s in self.p.settings.sources if s.source for t in s.topics}
            ev, dead = self.p.decode(raw, fmt, source_for_topic=mapping)
            parts.append(ev)
            dead_parts.append(dead)
        dead = dead_parts[0]
        for d in dead_parts[1:]:
            dead = dead.unionByName(d)
        version = self.next_version()
        if not dead.isEmpty():
            append(dead, self.p.settings.dead_letters(), self.p.app_id, version)
        events = parts[0]
        for e in parts[1:]:
            events = events.unionByName(e)
        return events.withColumn("_okey", F.expr(ORDER_KEY))

    # --- step 5 -----------------------------------------------------------------------------

    def control(self, r: Any, planner: Planner) -> None:
        """One control event through the coordinator; its decisions to the executor."""
        shard = ShardId(r["source"], r["db"], r["tbl"])
        position = position_of(r)
        # A statement that creates, renames or drops tables changes which rows are whose:
        # the rows of the tables it names up to it keep the plan from before it.
        cut = table_level(r)
        segs = planner.cut(touched(r, list(self.c.where)), position) if cut else []
        try:
            decisions = self.c.on_ddl(shard, control_sql(r), position)
        except UnknownShardError as e:
            self.dead.append((r["topic"], r["partition"], r["offset"], str(e)))
            planner.close(segs, [])
            return
        planner.close(segs, decisions)
        self.ex.run(decisions)

    def decided(self, planner: Planner, shards: dict[ShardId, list[Any]]) -> None:
        released = {d.shard for d in self.ex.work.releases}
        planner.finish(sorted(set(shards) | released, key=str))
        self.await_unregistered(planner, shards)
        self.stats.downstream_ddl = self.ex.downstream_ddl
        self.stats.refused_ddl = self.ex.refused_ddl

    def before(self, rows: DataFrame, rest: list[Any]) -> DataFrame:
        """The rows that come before every control event of ``rest``: positioned before
        the first of them that touches their own shard, committed no later than the
        first of them."""
        cut: dict[ShardId, list[Any]] = {}
        for r in rest:
            for s in touched(r, list(self.c.where)):
                cut.setdefault(s, position_of(r))
        frame = self.spark.createDataFrame(
            [(s.source, s.db, s.table, okey_value(p)) for s, p in cut.items()],
            f"source string, db string, tbl string, _cut {OKEY_TYPE}",
        )
        latest = min(commit_time(r) for r in rest)
        return (
            rows.join(F.broadcast(frame), ["source", "db", "tbl"], "left")
            .filter(f"NOT coalesce(_okey > _cut, false) AND coalesce(ts_ms, 0) <= {latest}")
            .drop("_cut")
        )

    def await_unregistered(self, planner: Planner, shards: dict[ShardId, list[Any]]) -> None:
        """Rows of a routed table whose CREATE TABLE has not arrived (it is on another
        topic): its first row starts a hold, and the rows wait in the stash."""
        for seg in planner.segments:
            if seg.closed or seg.plan.route.action != "unknown" or seg.shard not in shards:
                continue
            first = seg.after if seg.after is not None else shards[seg.shard]
            self.ex.run(self.c.await_ddl(seg.shard, first, ""))
            planner.refresh(seg)

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
        self.sink.delete(path, where, version)

    def merge(
        self,
        target: TargetId,
        path: str,
        src: DataFrame,
        version: int,
        waits: list[tuple[str, str, str, Any]],
    ) -> tuple[DataFrame | None, DataFrame | None]:
        """MERGE one target's rows. A row naming a column the target lacks is ahead of a
        DDL that has not arrived: its shard waits from that row on (such fresh rows go to
        the stash, replayed ones stay in it). Returns the fresh rows to stash and the dead
        letters of values that do not fit their column."""
        schema = self.ex.schemas[target]
        t = self.c.targets[target]
        projected = project_actions(src, schema, t.extract).persist()
        self.cached.append(projected)
        firsts = (
            projected.groupBy("source", "db", "tbl")
            .agg(
                F.min(F.when(_ahead_now(), F.col("_okey"))).alias("first"),
                F.first(F.when(_ahead_now(), F.col("_reason")), ignorenulls=True).alias("why"),
                F.count("_unfit").alias("unfit"),
                F.count(F.when(F.col("_fate") == "replay", True)).alias("replayed"),
            )
            .collect()
        )
        mine = []
        for r in firsts:
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
        self.sink.merge(
            path,
            good,
            list(schema.primary_key) or list(schema.column_names()),
            list(schema.column_names()),
            version,
        )
        ahead = None
        if mine:
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


def _lock_json(v: Any) -> dict[str, Any]:
    return {
        "target": str(v.target),
        "mode": v.mode,
        "stage": v.stage,
        "blocked": [str(s) for s in v.blocked],
        "pending_ddl": [{"shard": str(s), "sql": sql} for s, sql, _ in v.pending_ddl],
        "conflict": v.conflict,
        "shards": v.shards,
        "columns": {c.name: c.type.type_sql() for c in v.schema.columns} if v.schema else {},
    }
