"""Step 6 of the micro-batch protocol: write every target once. The rules are step 6 of
``coordinator/PROTOCOL.md``; this is how the code keeps them.

**The fast path.** A target whose rows the batch does not change the treatment of (no
stash rows to replay, no TRUNCATE or shard rename in the batch; each shard one plain write
plan at the batch's end, so a hold that began and ended within the batch, as a conflict
DDL every shard ran in it, counts for nothing; no row
ahead of a DDL, judged per shard and set of named columns from step 4's aggregate) is
MERGEd straight from the batch's parse: its projection is the MERGE source's input, read
once, by Delta, and what a summary would count (events, values that do not fit) is
observed during that read (``Writer.fast_targets``, ``Writer.merge_fast``). When
every row of the batch is such a target's, no summary runs at all.

**The exact path**, for every other target. Its write rows and the rows its releases
replay from the stash are projected onto its schema as of the end of the batch, each at
its own position (``streaming.batch.rows``), and kept. One summary aggregate over those
projections and the rest of the batch's rows (``streaming.batch.summary``) gives every count
and every row ahead of a DDL that has not arrived (its shard waits from there) before
anything is written. Then, per target in name order: one DELETE for the shards that ran
TRUNCATE in the batch, then one MERGE, straight from the kept projection when nothing in
it is ahead or does not fit. Then, for the whole batch: one stash append (held rows and
rows ahead of a DDL), one dead-letter append, one stash delete (the replayed rows), each
only when there is something to write. Each write takes its slot in a fixed order, used
or not, on either path, so a re-run batch finds the same transaction versions.

The step is a value in, a value out: :class:`Writer` is given what it reads of the batch
(its coordination, executor, sink, stash, write slots, events and dead letters of the
control events) and returns a :class:`WriteOutcome` (counts, rows per target, the shards
that wait for a DDL); each count is computed once, when every write is known.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from coordinator.ids import ShardId, TargetId
from shardmerge.errors import ShardMergeError
from streaming.batch.new_keys import (
    BUCKET,
    KeyMarks,
    Marks,
    how_written,
    key_space,
    spec_names,
)
from streaming.batch.plan import Planner, join_plan, release_frame
from streaming.batch.row_fit import shard_columns
from streaming.batch.rows import merge_source, no_ddl_sql, project_actions
from streaming.batch.summary import Summary, together
from streaming.faults import crash_point, raise_point
from streaming.source.control import OKEY_TYPE, okey_value
from streaming.sql.local_frame import local_frame
from streaming.sql.quoting import ident
from streaming.storage.stash import KEY, STASH_COLUMNS, append

__all__ = ["FATE", "ROW_COLUMNS", "WriteOutcome", "Writer"]

log = logging.getLogger("shardmerge.writer")

# How long the fast path waits for the counts it observed during its MERGE.
OBSERVE_WAIT_S = 60.0

# What a fresh row of the batch does, from its plan (``streaming.batch.plan``).
FATE = (
    "CASE WHEN _act IS NULL OR _act = 'unknown' THEN 'unknown' "
    "WHEN _act = 'drop' THEN 'drop' "
    "WHEN _okey < _drop_before THEN 'gone' "
    "WHEN _act = 'write' OR _okey < _hold_from THEN 'write' "
    "ELSE 'hold' END"
)
# The columns of a projection kept for the summary and the MERGE, besides the values.
PROJECTED_KEPT = [
    "source", "db", "tbl", "topic", "partition", "op", "_target", "_fate", "_okey", "_sub",
    "_action", "_reason", "_unfit",
]  # fmt: skip
# The columns a row carries from the plan into the projection.
ROW_COLUMNS = [
    *STASH_COLUMNS, "_okey", "_target", "_version", "_project", "_renames", "_last_alter",
    "_fate",
]  # fmt: skip


@dataclass(frozen=True)
class Projection:
    """A target's projected rows: ``kept`` (persisted, narrow) and ``full`` (every column
    of the events, computed again when read)."""

    kept: DataFrame
    full: DataFrame


@dataclass
class WriteOutcome:
    """What one write step did: the batch's events it counted and what became of them
    (written, held in the stash, dropped by their plan, replayed from the stash), the
    targets on the fast path, the driver's planning of the MERGE sources, what the sink
    reports per target (``target_rows``) and the shards whose rows were ahead of a DDL not
    received (``waits``: shard, first position, why; each went to the coordination)."""

    events: int = 0
    written: int = 0
    held: int = 0
    dropped: int = 0
    replayed: int = 0
    fast_path: int = 0
    plan_seconds: float = 0.0
    target_rows: dict[str, dict[str, int]] = field(default_factory=dict)
    waits: list[tuple[ShardId, Any, str]] = field(default_factory=list)


@dataclass
class Writer:
    """Step 6 of one batch. It reads the batch's coordination ``co`` (its coordinator, and
    where rows ahead of a DDL are told), executor ``ex`` (the schemas downstream and the
    row work of the decisions), ``sink``, ``stash``, write ``slots``, ``events`` (for the
    dead letters of control events, ``dead``), the caught-up sources (``caught``), step 4's
    per-shard facts (``first``: ``streaming.batch.protocol.FirstRows``) and the stash rows a move
    let wait, read again as the batch's (``reread``)."""

    spark: Any
    co: Any  # streaming.batch.coordination.Coordination
    ex: Any  # streaming.batch.executor.Executor
    sink: Any
    stash: Any
    settings: Any  # streaming.config.Settings
    app_id: str
    slots: Any  # streaming.storage.slots.Slots
    batch: int
    events: DataFrame
    dead: list[tuple[str, int, int, str]]
    caught: list[Any]
    first: Any
    reread: DataFrame | None = None
    # The targets' islands of keys (streaming.batch.new_keys): None, the append path is off
    # (a group, a sink without appends, or ``sink.append_new_keys: false``).
    marks: Marks | None = None
    cached: list[DataFrame] = field(default_factory=list)
    out: WriteOutcome = field(default_factory=WriteOutcome)
    # Appends of provably new keys, written after the batch's other writes (their slots
    # come last: streaming.storage.slots), and the targets whose islands are read then.
    appends: dict[TargetId, tuple[DataFrame, int]] = field(default_factory=dict)
    scans: list[tuple[TargetId, str, tuple[str, ...]]] = field(default_factory=list)
    # Events of the batch per target (step 4's counts), for ``sink.append_min_rows``.
    events_of: dict[TargetId, int] = field(default_factory=dict)
    # The targets of the batch's releases when there is a stash: they may replay rows from
    # it, or did in an earlier run of the batch whose stash delete landed (their islands
    # are then read from the table, not grown: ``append_new_keys``).
    release_targets: set[TargetId] = field(default_factory=set)

    @property
    def c(self) -> Any:  # the coordinator (coordinator.coordinator.Coordinator)
        return self.co.c

    def next_version(self, what: str = "write") -> int:
        return int(self.slots.take(what))

    # --- step 6 -----------------------------------------------------------------------------

    def write(self, rows: DataFrame, planner: Planner) -> WriteOutcome:
        """The batch's rows with their fate from the plan; each target's write and replay
        rows projected once (the one copy kept: the row images are parsed there), then one
        summary aggregate over all of them (counts, rows ahead of a DDL, values that do not
        fit) before anything is written."""
        work = self.ex.work
        routed = {seg.shard: seg.plan.route.target for seg in planner.segments}
        for shard, n in self.first.rows.items():
            to = routed.get(shard)
            if to is not None:
                self.events_of[to] = self.events_of.get(to, 0) + n
        self.forget_moved_keys()
        plan = planner.frame(self.spark, work.truncates)
        fresh = self.follow_renames(
            join_plan(rows, plan, planner.moved).withColumn("_fate", F.expr(FATE))
        )
        self.cached = []
        try:
            released, replaying = None, set[str]()
            if work.releases and self.stash.exists():
                self.release_targets = {d.target for d in work.releases}
                released = self.released(plan, planner.moved)
                replaying = self.replaying(released)
                if not replaying:
                    released = None
            fast = self.fast_targets(planner, plan, replaying)
            projected: dict[TargetId, Projection] = {}
            for target in self.write_order():
                schema = self.ex.schemas.get(target)
                if schema is None:
                    continue
                src = fresh.filter(
                    (F.col("_target") == str(target)) & (F.col("_fate") == "write")
                ).select(*ROW_COLUMNS)
                if target in fast:
                    projected[target] = self.project(target, src, keep=False)
                    continue
                if released is not None and str(target) in replaying:
                    src = src.unionByName(
                        released.filter(
                            (F.col("_target") == str(target)) & (F.col("_fate") == "replay")
                        )
                    )
                projected[target] = self.project(target, src)
            slow = {t: p.kept for t, p in projected.items() if t not in fast}
            if fast:
                names = [str(t) for t in sorted(fast, key=str)]
                rest = fresh.filter(~F.coalesce(F.col("_target").isin(names), F.lit(False)))
            else:
                rest = fresh
            # Nothing to count outside the fast targets: no summary job at all.
            summary = (
                Summary.of(rest, slow) if slow or self.rows_outside(planner, fast) else Summary([])
            )
            self._write_targets(fresh, released, projected, summary, fast)
        finally:
            for frame in self.cached:
                frame.unpersist()
        return self.out

    def follow_renames(self, fresh: DataFrame) -> DataFrame:
        """The batch's rows of a shard renamed within its target (this batch), from before
        the rename, take the shard's name at the end of the batch (renames in a row
        followed): written, held and counted as the renamed shard's, with its extract
        values. They keep the plan of their own position (joined before)."""
        renames = self.ex.work.renames
        if not renames:
            return fresh
        facts = []
        for i, d in enumerate(renames):
            final = d.new
            for later in renames[i + 1 :]:
                if later.target == d.target and later.old == final:
                    final = later.new
            earlier = [r.position for r in renames[:i] if r.old == d.old]
            since = earlier[-1] if earlier else None
            facts.append(
                (d.old.source, d.old.db, d.old.table, okey_value(since), okey_value(d.position),
                 final.source, final.db, final.table, d.keys is not None)
            )  # fmt: skip
        frame = local_frame(
            self.spark,
            facts,
            f"_ms string, _md string, _mt string, _mfrom {OKEY_TYPE}, _mat {OKEY_TYPE}, "
            "_ns string, _nd string, _nt string, _mkeys boolean",
        )
        # A split move's re-home takes only the rows whose key moves (``_moved``).
        on = (
            (F.col("source") == F.col("_ms"))
            & (F.col("db") == F.col("_md"))
            & (F.col("tbl") == F.col("_mt"))
            & (F.col("_mfrom").isNull() | (F.col("_okey") > F.col("_mfrom")))
            & (F.col("_mat").isNull() | (F.col("_okey") < F.col("_mat")))
            & (~F.col("_mkeys") | F.coalesce(F.col("_moved"), F.lit(False)))
        )
        return (
            fresh.join(F.broadcast(frame), on, "left")
            .withColumns(
                {
                    "source": F.coalesce(F.col("_ns"), F.col("source")),
                    "db": F.coalesce(F.col("_nd"), F.col("db")),
                    "tbl": F.coalesce(F.col("_nt"), F.col("tbl")),
                }
            )
            .drop("_ms", "_md", "_mt", "_mfrom", "_mat", "_ns", "_nd", "_nt", "_mkeys")
        )

    def write_order(self) -> list[TargetId]:
        """Every target, in name order (its write slots are taken in this order)."""
        return sorted(set(self.c.target_ids()) | set(self.ex.schemas), key=str)

    def released(self, plan: DataFrame, moved: str) -> DataFrame:
        """The stash rows the batch's releases replay, with their plan (kept: the stash
        delete reads them again). A shard renamed in the batch after its release (a move's
        switch re-homes its ``from`` once the lock released it) kept these rows under its
        old name (``Executor.rename``): they take its new name as the batch's own rows of
        the old name do."""
        held = self.stash.released(release_frame(self.spark, self.ex.work.releases), self.batch)
        joined = join_plan(held.withColumnRenamed("_project", "_rproject"), plan, moved)
        released = (
            self.follow_renames(joined)
            .withColumns(
                {
                    "_target": F.col("target"),
                    "_version": F.col("version"),
                    "_project": F.col("_rproject"),
                    "_fate": F.expr("CASE WHEN _okey < _drop_before THEN 'gone' ELSE 'replay' END"),
                }
            )
            .select(*ROW_COLUMNS)
            .persist()
        )
        self.cached.append(released)
        return released

    def replaying(self, released: DataFrame) -> set[str]:
        """The targets (names) ``released`` (persisted) replays rows of. A release whose shard has
        nothing in the stash (its hold began and ended in this batch: a conflict DDL that
        every shard ran within the batch) replays nothing, and does not keep its target
        off the fast path. One small job over the stash, only in a batch with releases;
        its rows are read once (``released`` is kept for the write and the stash delete)."""
        return {r["_target"] for r in released.select("_target").distinct().collect()}

    def fast_targets(self, planner: Planner, plan: DataFrame, replaying: set[str]) -> set[TargetId]:
        """The targets whose rows this batch can MERGE straight from the decoded batch,
        with no summary before (the fast path). A target is one when nothing in the batch
        changes what its rows do: it has a schema downstream, no stash rows to replay
        (``replaying``: a release of a shard with none changes nothing), no TRUNCATE or
        shard rename in the batch, and each of its shards with rows has one plan, a write,
        with no hold and no cut; and none of its rows is ahead of a DDL. The last is
        judged without the rows' values: per shard and set of columns an after image
        names (``streaming.batch.protocol.KeySet``), the first image of the set is projected at the
        set's first and last position and at every late column rename and last ALTER of
        its shard in between (:func:`_judged_at`; one small Spark job for every target),
        and a reason there means a reason somewhere: such a target takes the exact path.
        Late renames themselves are applied by the projection, on either path. Everything
        else a summary would count, the fast path observes while Delta reads the MERGE
        source (``merge_fast``)."""
        work = self.ex.work
        busy = {t for t in self.write_order() if str(t) in replaying}
        busy |= {d.target for d in work.truncates} | set(work.truncated)
        busy |= {d.target for d in work.renames}
        per_shard: dict[Any, int] = {}
        candidates: dict[TargetId, list[Any]] = {}
        # A segment that ends before its shard's first row of the batch has no rows (the
        # rows before a CREATE TABLE at the start of the batch): its plan does not count.
        segments = [
            seg for seg in planner.segments if _may_have_rows(seg, self.first.shards.get(seg.shard))
        ]
        for seg in segments:
            per_shard[seg.shard] = per_shard.get(seg.shard, 0) + 1
        for seg in segments:
            p, r = seg.plan, seg.plan.route
            if r.target is None:
                continue
            trivial = (
                r.action == "write"
                and not seg.closed
                and p.hold_from is None
                and all(_known(pos) for pos, _ in p.late_renames)
                and per_shard[seg.shard] == 1
                and self.ex.schemas.get(r.target) is not None
            )
            if not trivial or r.target in busy:
                busy.add(r.target)
            else:
                candidates.setdefault(r.target, []).append(seg.shard)
        fast = {t for t in candidates if t not in busy}
        first = self.first
        if not fast:
            return set()
        owner = {s: t for t, shards in candidates.items() if t in fast for s in shards}
        points = {
            seg.shard: [pos for pos, _ in seg.plan.late_renames] + [seg.plan.last_alter]
            for seg in segments
            if seg.shard in owner
        }
        samples = []
        for k in first.keysets:
            if k.shard not in owner:
                continue
            at = _judged_at(k.first, k.last, points[k.shard])
            if at is None:  # a position not fully known: judged by the exact path
                fast.discard(owner[k.shard])
                continue
            samples += [
                (k.shard.source, k.shard.db, k.shard.table, okey_value(pos), k.sample) for pos in at
            ]
        if not samples:
            return fast
        reps = join_plan(
            local_frame(
                self.spark,
                samples,
                f"source string, db string, tbl string, _okey {OKEY_TYPE}, after string",
            )
            .withColumn("op", F.lit("c"))
            .withColumn("before", F.lit(None).cast("string")),
            plan,
        )
        judged = None
        for target in sorted(fast, key=str):
            reasons = project_actions(
                reps.filter(F.col("_target") == str(target)),
                self.ex.schemas[target],
                self.c.extract_of(target),
                shards=shard_columns(self.c.shard_schemas(target)),
            ).select(F.lit(str(target)).alias("t"), "_reason")
            judged = reasons if judged is None else judged.unionByName(reasons)
        assert judged is not None
        judged = together(judged, len(fast))
        ahead = {r["t"] for r in judged.filter("_reason IS NOT NULL").select("t").collect()}
        return {t for t in fast if str(t) not in ahead}

    def rows_outside(self, planner: Planner, fast: set[TargetId]) -> bool:
        """Whether the batch has rows of a shard that is not a fast target's write (held,
        dropped, of an unknown table, of another target): those the summary counts."""
        return any(
            seg.plan.route.target not in fast or seg.plan.route.action != "write"
            for seg in planner.segments
            if seg.shard in self.first.shards
        )

    def project(self, target: TargetId, src: DataFrame, keep: bool = True) -> Projection:
        """``src`` projected onto ``target``'s schema (``streaming.batch.rows``). What the summary
        and the MERGE read is kept until the batch ends: the downstream values and the few
        columns that place and judge a row, not the event's own columns (its row images
        are most of its size). Rows ahead of a DDL and values that do not fit, rare, are
        projected again from ``src`` when they are stashed or become dead letters."""
        full = project_actions(
            src,
            self.ex.schemas[target],
            self.c.extract_of(target),
            shards=shard_columns(self.c.shard_schemas(target)),
            judged=not keep,
            dialect=self.settings.sink.dialect if self.settings.sink.kind == "jdbc" else None,
        ).withColumn("_unfit", F.expr(no_ddl_sql(self.caught)))
        # The fast path (not kept): Delta's MERGE reads the projection once, and its rows
        # were judged not ahead of any DDL (fast_targets), so they are not checked again.
        if not keep:
            return Projection(full, full)
        values = [F.col(ident(c)) for c in full.columns if c.startswith("_c_")]
        kept = full.select(*PROJECTED_KEPT, *values)
        kept = kept.persist()
        self.cached.append(kept)
        return Projection(kept, full)

    def _write_targets(
        self,
        fresh: DataFrame,
        released: DataFrame | None,
        projected: dict[TargetId, Projection],
        summary: Summary,
        fast: set[TargetId],
    ) -> None:
        # Rows ahead of a DDL that has not arrived: their shard waits from the first.
        waits: dict[TargetId, list[tuple[str, str, str, Any]]] = {}
        named = {str(t): t for t in self.write_order()}
        for name, shard, pos, why in summary.ahead():
            # through the coordination: in a group, a record of the log (G2)
            self.co.ahead(shard, pos, f"{why}: waiting for its DDL")
            self.out.waits.append((shard, pos, why))
            waits.setdefault(named[name], []).append((shard.source, shard.db, shard.table, pos))
        # what the fast path observed, and the rows ahead moved from written to held
        fast_events = fast_unfit = 0
        moved: dict[str, int] = {}
        stash_parts = []
        if summary.events("hold"):
            stash_parts.append(
                self.stash.rows(fresh.filter("_fate = 'hold'"), "_target", "_version", self.batch)
            )
        dead_parts = []
        if summary.events("unknown"):
            dead_parts.append(
                _dead(fresh.filter("_fate = 'unknown'"), "the row's table was never registered")
            )
        for target in self.write_order():
            # Two slots per target, used or not: slot numbers never depend on the data.
            delete_slot = self.next_version(f"{target}: TRUNCATE")
            merge_slot = self.next_version(f"{target}: MERGE")
            if self.ex.schemas.get(target) is None:
                if summary.rows(target):
                    raise ShardMergeError(
                        f"batch {self.batch}: target {target} has rows to write but no "
                        "schema downstream (no CREATE TABLE reached it); nothing was skipped: "
                        "the batch fails"
                    )
                continue
            if target in fast:  # no TRUNCATE, nothing ahead: only what is observed
                unfit, counts = self.merge_fast(target, projected[target], merge_slot)
                fast_events += counts["events"]
                fast_unfit += counts["unfit"]
                if unfit is not None:
                    dead_parts.append(unfit)
                crash_point("after_rows")
                continue
            self.truncate(target, delete_slot)
            if not summary.rows(target):
                continue
            ahead, unfit, moved_here = self.merge(
                target, projected[target], merge_slot, waits.get(target, []), summary
            )
            for fate, n in moved_here.items():
                moved[fate] = moved.get(fate, 0) + n
            if ahead is not None:
                stash_parts.append(ahead)
            if unfit is not None:
                dead_parts.append(unfit)
            crash_point("after_rows")
        # The counts, once every write is known.
        self.out.events = summary.fresh_events() + fast_events
        self.out.written = (
            summary.events("write") - summary.unfit("write") - moved.get("write", 0)
            + fast_events - fast_unfit
        )  # fmt: skip
        self.out.held = summary.events("hold") + moved.get("write", 0)
        self.out.dropped = summary.events("drop")
        self.out.replayed = (
            summary.events("replay") - summary.unfit("replay") - moved.get("replay", 0)
        )
        all_waits = [w for target in sorted(waits, key=str) for w in waits[target]]
        stash_version = self.next_version("stash append")
        dead_version = self.next_version("dead letters")
        delete_version = self.next_version("stash delete")
        if stash_parts:
            frame = stash_parts[0]
            for part in stash_parts[1:]:
                frame = frame.unionByName(part)
            append(together(frame, len(stash_parts)), self.stash.path, self.app_id, stash_version)
        if self.dead:
            keys = local_frame(
                self.spark, self.dead, "_dt string, _dp int, _do bigint, _reason string"
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
            frame = together(frame, len(dead_parts))
            append(frame, self.settings.dead_letters(), self.app_id, dead_version)
        crash_point("after_release")
        gone = []  # stash rows whose copies leave the stash
        if released is not None:
            # Replayed rows leave the stash; those ahead of a further DDL stay.
            keep = released
            if all_waits:
                keep = released.join(
                    F.broadcast(self.waits_frame(all_waits)), ["source", "db", "tbl"], "left"
                ).filter("_wait IS NULL OR _okey < _wait")
            gone.append(keep.select(*KEY))
        if self.reread is not None:
            # Rows a move let wait, read again as this batch's: written, dropped or stashed
            # again above (streaming.batch.moves).
            gone.append(self.reread.select(*KEY))
        # The appends come before the stash delete, the batch's last write: a run of the
        # batch that finds the delete landed finds every write landed, and a run that does
        # not finds the stash as the first run read it, so it splits the rows as that run
        # did (the replayed rows an append carries are read from the stash).
        if self.marks is not None:
            replayed = self.release_targets
            self.append_new_keys(set(self.ex.schemas) if self.reread is not None else replayed)
        if gone:
            crash_point("before_stash_delete")
            keys = gone[0] if len(gone) == 1 else gone[0].unionByName(gone[1])
            self.stash.delete(keys, self.batch, delete_version)
            raise_point("after_stash_delete")

    def append_new_keys(self, from_stash: set[TargetId]) -> None:
        """The appends of provably new keys, each target's under a slot of its own taken
        after the batch's other writes (whether or not it appends: slot numbers never
        depend on the rows), then the islands of the targets that had none, read from
        their tables now that the batch's writes are in (used from the next batch on, so
        a batch run again splits as it did).

        ``from_stash``: the targets written rows from the stash (replayed, or read again for
        a move). Their islands are read from the table too, not grown: a run of the batch
        after one whose stash delete landed does not see those rows, and would grow the
        islands without their keys (an append of one of them later would then add the key
        a second time)."""
        assert self.marks is not None
        scanned = {target for target, _, _ in self.scans}
        for target in sorted(from_stash - scanned, key=str):
            if self.marks.get(str(target)) is None:
                continue
            space = key_space(self.ex.schemas[target], self.c.extract_of(target))
            self.marks.drop(str(target))
            if space is not None:
                self.scans.append((target, *space))
        for target in self.write_order():
            slot = self.next_version(f"{target}: APPEND")
            if target in self.appends:  # one write per target: one split per target
                rows, n = self.appends[target]
                schema = self.ex.schemas[target]
                self.sink.append(target, rows, list(schema.column_names()), slot)
                self.count_target_rows(target, {"appended": n})
                crash_point("after_append")
        for target, key, prefix in self.scans:
            marks = KeyMarks(key, prefix)
            for p, lo, hi in self.sink.key_ranges(target, key, list(prefix), BUCKET):
                marks.add(p, [(lo, hi)])
            self.marks.put(str(target), marks)
            log.info(
                "target %s: islands of keys read from the table (%d prefixes): new keys are "
                "appended from the next batch on", target, len(marks.islands),
            )  # fmt: skip

    def truncate(self, target: TargetId, version: int) -> None:
        """One DELETE of the downstream rows of every shard of ``target`` that ran
        TRUNCATE in this batch (their earlier rows of the batch are dropped by the plan)."""
        work = self.ex.work
        early = work.truncated.get(target, 0)  # TRUNCATEs run before a rename (executor)
        matches = [
            d.match for d in work.truncates if d.target == target and d not in work.ran_early
        ]
        deleted = self.sink.truncate(target, matches, version) if matches else 0
        if matches or early:
            self.count_target_rows(target, {"truncated": early + deleted})

    def count_target_rows(self, target: TargetId, done: dict[str, int]) -> None:
        counts = self.out.target_rows.setdefault(str(target), {})
        for action, n in done.items():
            counts[action] = counts.get(action, 0) + n

    def merge(
        self,
        target: TargetId,
        projected: Projection,
        version: int,
        waits: list[tuple[str, str, str, Any]],
        summary: Summary,
    ) -> tuple[DataFrame | None, DataFrame | None, dict[str, int]]:
        """MERGE one target's projected rows. Rows ahead of a DDL that has not arrived
        (``waits``: their shards wait from there) are not written: fresh ones go to the
        stash, replayed ones stay in it. Values that do not fit their column are dead
        letters. The fast path, nothing ahead and nothing unfit, MERGEs the projection as
        it is. Returns the fresh rows to stash, the dead letters, and the events ahead per
        fate (``write``: fresh rows held instead; ``replay``: replayed rows kept)."""
        schema = self.ex.schemas[target]
        unfit_rows = summary.unfit(target=target)
        ahead_sql = "coalesce(_okey >= _wait, false) AND _unfit IS NULL"
        wait = F.broadcast(self.waits_frame(waits)) if waits else None
        good = projected.kept
        if unfit_rows:
            good = good.filter("_unfit IS NULL")
        if wait is not None:
            good = good.join(wait, ["source", "db", "tbl"], "left").filter(f"NOT ({ahead_sql})")
        # Split (the append path) with the winners pinned: they may hold stash rows, and
        # the appends run after the stash delete (merge_into).
        self.merge_into(target, merge_source(good, schema), version, pin=True)
        ahead = None
        moved: dict[str, int] = {}
        if wait is not None:
            # Rows ahead of a DDL go to (or stay in) the stash: held, not written. Rare (a
            # row topic ahead of the schema topic), so its own small count job, on the kept
            # projection; only the rows stashed are projected again, with their images.
            on = ["source", "db", "tbl"]
            counted = projected.kept.join(wait, on, "left").filter(ahead_sql)
            moved = {
                r["_fate"]: r["count"]
                for r in counted.filter("_sub = 1 OR op = 'd'").groupBy("_fate").count().collect()
            }
            flagged = projected.full.join(wait, on, "left").filter(ahead_sql)
            ahead = self.stash.rows(
                flagged.filter("_fate = 'write'").dropDuplicates(KEY),
                "_target",
                "_version",
                self.batch,
            )
        unfit = None
        if unfit_rows:
            unfit = _dead(
                projected.full.filter("_unfit IS NOT NULL").withColumn("_reason", F.col("_unfit"))
                .dropDuplicates(KEY),
                None,
            )  # fmt: skip
        return ahead, unfit, moved

    def merge_into(
        self,
        target: TargetId,
        src: DataFrame,
        version: int,
        pin: bool = False,
    ) -> bool:
        """One MERGE of ``src`` (``streaming.batch.rows.merge_source``) into ``target``, its
        driver planning timed (``Stats.plan_seconds``) and what Delta did counted; whether
        ``src`` was read (not when the sink found the write done by an earlier run of the
        batch and skipped it).

        With the append path, the rows are split (:func:`new_keys.how_written`): new keys
        alone are appended, at the end of the batch; a batch that also writes keys the
        table may hold is MERGEd whole unless ``sink.append_mixed`` splits it. ``pin``:
        ``src`` may read a Delta table the batch writes before then (the
        replayed rows come from the stash, and the batch appends its held rows there
        first): a cached DataFrame does not survive such a write, since Delta drops every
        cached plan that reads the table it changed and Spark computes it again from the
        table as it is now (delta-io/delta#3954), which lost a replayed row's append when
        the stash delete came before the appends. Pinned rows are a
        local checkpoint: computed once, read back whatever the tables do."""
        schema = self.ex.schemas[target]
        planning = time.monotonic()
        src._jdf.queryExecution().executedPlan()  # analysis, optimization, planning
        self.out.plan_seconds += round(time.monotonic() - planning, 3)
        keys = list(schema.primary_key) or list(schema.column_names())
        marks = self.key_marks(target)
        if marks is None:
            done = self.sink.merge(target, src, keys, list(schema.column_names()), version)
            skipped = done.pop("skipped", 0)
            self.count_target_rows(target, done)
            return not skipped
        # The batch's winners split (streaming.batch.new_keys): a key outside every island
        # of its prefix is not in the table; its upsert is appended, its delete is nothing.
        if pin:
            parted = self.split(src, marks).localCheckpoint(eager=True)
        else:
            parted = self.split(src, marks).persist()
            self.cached.append(parted)
        sides, ranges = self.measure(parted, marks)
        for p, found in ranges.items():
            marks.add(p, found)
        how = how_written(sides["merge"], sides["append"], self.settings.sink.append_mixed)
        whole = how == "merge" and sides["append"] > 0  # one MERGE of every winner
        if sides["merge"]:
            rows = parted if whole else parted.filter("NOT _free")
            done = self.sink.merge(
                target, rows.drop("_free"), keys, list(schema.column_names()), version
            )
            done.pop("skipped", 0)  # the split was read (measured) already
            self.count_target_rows(target, done)
        if whole:
            return True
        if sides["append"]:
            rows = parted.filter("_free AND _action <> 'd'").drop("_free")
            self.appends[target] = (rows, sides["append"])
        if sides["absent"]:
            # deletes of keys never written: the MERGE would have matched nothing
            self.count_target_rows(target, {"absent_deletes": sides["absent"]})
        return True  # the split was read to measure it

    def key_marks(self, target: TargetId) -> KeyMarks | None:
        """The target's islands when this write splits its rows (the append path is on,
        they are kept and still fit the key); else None, and the islands are dropped (a
        write that does not grow them leaves them wrong), or, for a batch of at least
        ``sink.append_min_rows`` events, read from the table once its writes are done."""
        if self.marks is None:
            return None
        name = str(target)
        marks = self.marks.get(name)
        if marks is not None:
            return marks  # still fit: forget_moved_keys dropped the others
        space = key_space(self.ex.schemas[target], self.c.extract_of(target))
        enough = self.events_of.get(target, 0) >= self.settings.sink.append_min_rows
        if space is not None and enough:
            self.scans.append((target, *space))
        return None

    def forget_moved_keys(self) -> None:
        """Before anything is written: the islands of every target whose key changed or
        whose keys moved between prefixes in this batch are dropped, whether or not the
        batch has rows of it (read again after a later batch's writes)."""
        if self.marks is None:
            return
        for name, marks in list(self.marks.targets.items()):
            target = TargetId.parse(name)
            schema = self.ex.schemas.get(target)
            if (
                schema is None
                or not marks.fits(schema, self.c.extract_of(target))
                or self.moved_keys(target, marks)
            ):
                log.info("target %s: its islands of keys are dropped (its key or rows moved)", name)
                self.marks.drop(name)

    def moved_keys(self, target: TargetId, marks: KeyMarks) -> bool:
        """Whether the batch moved keys between prefixes or changed the key's columns: a
        shard re-homed (its rows' extract values changed) while the key has a prefix, or
        a downstream change that names a key column (dropped and added again, its values
        are not the islands')."""
        work = self.ex.work
        if marks.prefix and any(d.target == target for d in work.renames):
            return True
        named = {marks.key.lower(), *(p.lower() for p in marks.prefix)}
        altered = [spec for d in work.altered.get(target, []) for spec in d.specs]
        return any(named & spec_names(spec) for spec in altered)

    def split(self, src: DataFrame, marks: KeyMarks) -> DataFrame:
        """``src`` (the winners) with ``_free``: the key is outside its prefix's islands."""
        if not marks.prefix:
            return src.withColumn("_free", F.expr(marks.free_sql(ident(marks.key))))
        key = F.col(ident(marks.key)).cast("decimal(20,0)")
        names = [f"_np{i}" for i in range(len(marks.prefix))]
        columns = [*(f"{n} string" for n in names), "_nlo decimal(20,0)", "_nhi decimal(20,0)"]
        bounds = local_frame(self.spark, marks.bounds_rows(), ", ".join(columns))
        on = None
        for n, p in zip(names, marks.prefix, strict=True):
            same = F.col(ident(p)).cast("string").eqNullSafe(F.col(n))
            on = same if on is None else on & same
        free = key.isNotNull() & (
            F.col("_nlo").isNull() | (key < F.col("_nlo")) | (key > F.col("_nhi"))
        )
        return (
            src.join(F.broadcast(bounds), on, "left")
            .withColumn("_free", free)
            .drop(*names, "_nlo", "_nhi")
        )

    def measure(
        self, split: DataFrame, marks: KeyMarks
    ) -> tuple[dict[str, int], dict[tuple[str, ...], list[tuple[int, int]]]]:
        """One small aggregate over the split winners: how many go to the MERGE, how many
        are appended, how many are deletes of absent keys, and the ranges of the keys the
        batch upserts, per prefix and bucket of :data:`BUCKET` keys (the islands grow by
        them before anything is written)."""
        key = f"CAST({ident(marks.key)} AS DECIMAL(20,0))"
        prefix = [
            F.col(ident(p)).cast("string").alias(f"_np{i}") for i, p in enumerate(marks.prefix)
        ]
        rows = (
            split.groupBy(
                *prefix,
                F.col("_free"),
                F.expr(f"CASE WHEN _action <> 'd' THEN {key} DIV {BUCKET} END").alias("_b"),
            )
            .agg(
                F.count(F.lit(1)).alias("n"),
                F.expr(f"min({key})").alias("lo"),
                F.expr(f"max({key})").alias("hi"),
            )
            .collect()
        )
        sides = {"merge": 0, "append": 0, "absent": 0}
        ranges: dict[tuple[str, ...], list[tuple[int, int]]] = {}
        for r in rows:
            upsert = r["_b"] is not None
            if not r["_free"]:
                sides["merge"] += r["n"]
            elif upsert:
                sides["append"] += r["n"]
            else:
                sides["absent"] += r["n"]
            if upsert and r["lo"] is not None:
                p = tuple(r[f"_np{i}"] for i in range(len(marks.prefix)))
                ranges.setdefault(p, []).append((int(r["lo"]), int(r["hi"])))
        return sides, ranges

    def merge_fast(
        self, target: TargetId, projected: Projection, version: int
    ) -> tuple[DataFrame | None, dict[str, int]]:
        """The fast path's MERGE (see :meth:`fast_targets`): the projection of the
        target's rows is the MERGE source's input, read once, by Delta; what a summary
        would have counted (its events, its actions, the values that do not fit) is
        observed on the way. Values that do not fit are dead letters, projected again
        only when there are some. Returns those dead letters and the counts observed."""
        schema = self.ex.schemas[target]
        # a name of its own (Spark keeps observations by name); a fast target has rows
        seen = Observation(f"shardmerge_fast_{uuid.uuid4().hex}")
        observed = projected.full.observe(seen, *_fast_counts())
        read = self.merge_into(
            target, merge_source(observed.filter("_unfit IS NULL"), schema), version
        )
        counts = _observed(seen, projected.full, read)
        self.out.fast_path += 1
        if not counts["unfit"]:
            return None, counts
        return _dead(
            projected.full.filter("_unfit IS NOT NULL").withColumn("_reason", F.col("_unfit"))
            .dropDuplicates(KEY),
            None,
        ), counts  # fmt: skip

    def waits_frame(self, waits: list[tuple[str, str, str, Any]]) -> DataFrame:
        return local_frame(
            self.spark,
            [(s, d, t, okey_value(p)) for s, d, t, p in waits],
            f"source string, db string, tbl string, _wait {OKEY_TYPE}",
        )


def _fast_counts() -> list[Any]:
    """What the fast path counts of a target's projected key actions: its events (one per
    event: an update that changes its key is two actions of one event), its actions, and
    those whose values cannot be written."""
    return [
        F.count(F.when(F.expr("_sub = 1 OR op = 'd'"), True)).alias("events"),
        F.count(F.lit(1)).alias("actions"),
        F.count("_unfit").alias("unfit"),
    ]


def _known(position: Any) -> bool:
    """Whether ``position`` is there with every part (file, offset, row, time, record)."""
    return position is not None and None not in position


def _may_have_rows(seg: Any, first: Any) -> bool:
    """Whether rows of the batch may fall in ``seg`` (positions after ``seg.after``, up to
    ``seg.upto``), its shard's first row of the batch at ``first``: not when the segment
    ends before that row. Unknown parts of a position count as rows possibly there."""
    if not (_known(seg.upto) and _known(first)):
        return True
    return bool(list(first) <= list(seg.upto))


def _judged_at(first: Any, last: Any, points: list[Any]) -> list[Any] | None:
    """The positions at which a set of named columns, its rows from ``first`` to ``last``,
    is judged: ``first``, every point of its shard's plan inside the range (``points``:
    the late column renames, which rename the rows before them, and the last ALTER, before
    which rows are projected) and ``last``. Between two of these a row's renamed columns
    and projection do not change, so neither does its reason to wait: judging each stretch
    at its start covers every row, and a position without a row only makes the judgement
    stricter. None when a position is not fully known (the target takes the exact path)."""
    points = [p for p in points if p is not None]  # None: no such point (no ALTER)
    if not all(_known(p) for p in (first, last, *points)):
        return None
    lo, hi = list(first), list(last)
    inside = sorted({tuple(p) for p in points if lo < list(p) <= hi})
    tail = [] if hi == lo or tuple(hi) in inside else [hi]
    return [lo, *[list(p) for p in inside], *tail]


def _observed(seen: Observation, projected: DataFrame, read: bool = True) -> dict[str, int]:
    """What ``seen`` observed while Delta read the MERGE source. Spark hands the metrics
    over when that read ends; should they not come (a MERGE that never read its source),
    the same counts are computed over ``projected`` instead, and the fallback logged.
    ``read`` False: the sink skipped the write without reading its source (a batch run
    again whose earlier run wrote it): counted over ``projected`` at once."""
    if not read:
        log.info("the fast path's MERGE was written by an earlier run of the batch: counted again")
        return _counted(projected)
    got: dict[str, Any] = {}

    def wait() -> None:
        got.update(seen.get)

    waiter = threading.Thread(target=wait, name="shardmerge-observe", daemon=True)
    waiter.start()
    waiter.join(OBSERVE_WAIT_S)
    if got:
        return {k: int(v or 0) for k, v in got.items()}
    log.warning(
        "the fast path's MERGE gave no observed counts within %s s: counting them again",
        OBSERVE_WAIT_S,
    )
    return _counted(projected)


def _counted(projected: DataFrame) -> dict[str, int]:
    row = projected.agg(*_fast_counts()).first()
    assert row is not None
    return {k: int(row[k]) for k in ("events", "actions", "unfit")}


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
