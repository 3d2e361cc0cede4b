"""One micro-batch: the foreachBatch protocol.

The protocol's one text is ``coordinator/PROTOCOL.md``, "The streaming job's
micro-batch": its seven numbered steps, and what a re-run of the batch does when the
driver dies after each (Spark runs the same batch id again over the same offsets, because
its checkpoint commit comes after us). This module runs them, in ``_Batch._run``:

1. restore: ``BatchProcessor.restore``; the epoch check (``streaming.storage.epochs``) and the
   topic ids (``streaming.source.topic_ids``);
2. operator commands: ``StateStore.intent``, ``Coordinator.command``;
3. decode: ``_Batch.decode_all`` (the parse itself is in the query's plan,
   ``streaming.job.read_parsed``);
4. control events and per-shard facts: ``streaming.source.control.in_global_order``,
   :func:`first_rows`, the caught-up check (``streaming.source.caught_up``);
5. decide: ``_Batch.control``, ``_Batch.decided``; the row plan (``streaming.batch.plan``);
6. write: ``streaming.batch.writer.Writer``;
7. persist: ``StateStore.save``.

The write slots of every Delta write are taken from one ledger, ``streaming.storage.slots``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from coordinator.coordinator import Coordinator, WaitView
from coordinator.decisions import Release
from coordinator.ids import ShardId, TargetId
from coordinator.moves import MoveCommand
from coordinator.state import restore, snapshot
from coordinator.target import ConflictError
from shardmerge.errors import ShardMergeError
from streaming.batch.coordination import Coordination, Solo, Statement
from streaming.batch.executor import Executor
from streaming.batch.moves import MOVE_WAIT, MoveKeeper
from streaming.batch.new_keys import Marks
from streaming.batch.plan import Planner
from streaming.batch.rows import read_ahead_sql
from streaming.batch.writer import Writer
from streaming.config import Settings, SourceSettings
from streaming.faults import crash_point
from streaming.fs.hadoop import join
from streaming.ops.observer import BatchObserver
from streaming.source.caught_up import CaughtUp, offsets_log
from streaming.source.control import (
    OKEY_TYPE,
    ORDER_KEY,
    as_dict,
    commit_seconds,
    commit_time,
    control_sql,
    in_global_order,
    join_split_renames,
    okey_position,
    okey_value,
    position_of,
    table_level,
    touched,
    upstream_origin,
)
from streaming.source.decode import split
from streaming.source.topic_ids import TopicIds
from streaming.sql.local_frame import local_frame
from streaming.sql.quoting import check_session, string
from streaming.storage.epochs import Epochs
from streaming.storage.sinks import sink_of
from streaming.storage.slots import Slots
from streaming.storage.stash import Stash, append
from streaming.storage.state_store import StateStore, command_of

__all__ = ["BatchProcessor", "Stats"]

log = logging.getLogger("shardmerge.batch")

CONTROL = "op IN ('ddl', 't')"


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
    # DDL events taken already, sent again by an at-least-once upstream: not run twice.
    resent_ddl: int = 0
    # Shards that stopped waiting for a DDL their schema-change topics do not hold.
    ddl_never_came: int = 0
    # Wall time of the batch; of steps 1-4 (restore, commands, the Kafka read and decode,
    # the control events and per-shard facts collected); of step 5 (the driver decides,
    # DDL runs); and of the driver's analysis and planning of the MERGE sources (it must
    # not grow with shards or control events: the row plan is data, not expressions).
    seconds: float = 0.0
    decode_seconds: float = 0.0
    decide_seconds: float = 0.0
    plan_seconds: float = 0.0
    # Targets written by the fast path (streaming.batch.writer.Writer.fast_targets).
    fast_path: int = 0
    # What Delta reports the batch did to each target table: rows inserted, updated and
    # deleted by the MERGE, and deleted by a TRUNCATE's DELETE ("truncated").
    target_rows: dict[str, dict[str, int]] = field(default_factory=dict)
    downstream_ddl: list[str] = field(default_factory=list)
    refused_ddl: list[str] = field(default_factory=list)
    command_errors: list[str] = field(default_factory=list)
    # In a group (docs/groups.md): records this batch appended to the group log, and the
    # seconds its write step waited for the owner to bring its targets to their versions.
    group_records: int = 0
    gate_seconds: float = 0.0


class BatchProcessor:
    """The ``foreachBatch`` function of the job (its steps: coordinator/PROTOCOL.md)."""

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        coordination: Callable[[BatchProcessor], Coordination] | None = None,
    ) -> None:
        """``coordination``: the job's coordination, made for this processor
        (``streaming.job`` picks a group member's; :class:`Solo` when none is given)."""
        check_session(spark.conf.get)
        self.spark = spark
        self.settings = settings
        self.router = settings.router()
        self.store = StateStore(spark, settings.checkpoint)
        self.app_id = self.store.app_id()  # carried by every write (see delta_sink.txn)
        self.stash_path = self.store.uri("stash")
        self.last_stats: Stats | None = None
        self.observer = BatchObserver()  # step timings and counts for metrics/dashboard
        # Which sources a batch read to the end of their schema-change topics.
        self.caught_up = CaughtUp(spark, settings)
        self.topic_ids = TopicIds(spark, settings)
        # One run writes per checkpoint: a newer run's epoch stops this one (step 1).
        self.epochs = (
            Epochs.claim(settings.checkpoint, spark, app_id=self.app_id)
            if settings.one_driver_check
            else Epochs(None, None, settings.checkpoint)
        )
        if not settings.one_driver_check:
            log.warning(
                "one_driver_check is off: a second run of this job on checkpoint %s would "
                "not be noticed", settings.checkpoint,
            )  # fmt: skip
        # Alone, or one of several jobs writing the same targets (streaming.batch.coordination).
        self.saved: dict[str, Any] | None = None  # the state the batch restored
        if coordination is None:
            if settings.coordination is not None:
                raise ShardMergeError(
                    "the settings name a group (coordination), but no group coordination "
                    "was given to the batch processor (streaming.job picks it)"
                )
            self.co: Coordination = Solo(self.coordinator_from)
        else:
            self.co = coordination(self)
        # The group member, for the ops views and the job's stop (None alone).
        self.group: Any = self.co.member

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        _Batch(self, df, batch_id).run()

    def restore(self, batch: int) -> tuple[Coordinator, set[str], dict[str, str], MoveKeeper]:
        """The coordinator, the operator commands applied, the Kafka topic ids
        (streaming.source.topic_ids) and the moves saved by the batch before ``batch``."""
        data = self.saved = self.store.load_before(batch)
        configs, default = self.settings.target_configs(), self.settings.default_config()
        moves = [m.move() for m in self.settings.moves]
        if data is None:
            c = Coordinator(self.router, configs, default)
            return c, set(), {}, MoveKeeper(moves, self.router, None)
        c = self.coordinator_from(data["coordinator"])
        keeper = MoveKeeper(moves, self.router, data.get("moves"))
        return c, set(data.get("applied_commands", [])), dict(data.get("topic_ids", {})), keeper

    def coordinator_from(self, saved: dict[str, Any]) -> Coordinator:
        """The coordinator of a saved state (``coordinator.state.snapshot``)."""
        configs, default = self.settings.target_configs(), self.settings.default_config()
        return restore(saved, self.router, configs, default)


class _Batch:
    def __init__(self, p: BatchProcessor, df: DataFrame, batch_id: int) -> None:
        self.p = p
        # foreachBatch hands a DataFrame of a cloned session: temp views, SQL and the
        # transaction confs must all use that session.
        self.spark = df.sparkSession
        self.co = p.co
        self.sink = sink_of(self.spark, p.settings, p.app_id, shared=self.co.shared)
        self.stash = Stash(self.spark, p.stash_path, p.app_id)
        self.df = df
        self.parsed: list[DataFrame] = []  # persisted parses of the batch (step 3)
        self.batch = batch_id
        self.slots = Slots(batch_id)  # the batch's Delta write versions
        self.stats = Stats(batch=batch_id)
        self.dead: list[tuple[str, int, int, str]] = []  # control events: (key, reason)
        self.reread: DataFrame | None = None  # stash rows read again (streaming.batch.moves)
        self.caught: list[SourceSettings] = []  # sources caught up: streaming.source.caught_up
        # upstream source ids (Debezium's server name) whose rows came from caught sources
        self.caught_sources: set[str] = set()
        self.marks: Marks | None = None  # islands of keys (streaming.batch.new_keys)

    @property
    def c(self) -> Coordinator:
        """The coordinator the batch plans with (its coordination's)."""
        c: Coordinator = self.co.c
        return c

    def run(self) -> None:
        started = time.monotonic()
        self.co.begin()
        done = False
        try:
            self._run(started)
            done = True
        except ConflictError as e:
            self.p.store.save_failure(self.state_json({"error": str(e)}))
            raise
        finally:
            self.spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]  # clears it
            self.co.end(self.batch, done)

    def state_json(self, extra: dict[str, Any]) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "coordinator": snapshot(self.c),
            "stats": self.stats.__dict__,
            "locks": self.moves.locks([_lock_json(v) for v in self.c.locks()]),
            "waiting": [_wait_json(w) for w in self.c.waiting()],
            **({"moves": self.moves.to_json()} if self.moves else {}),
            **self.co.saved(),
            **extra,
        }

    def new_keys(self, saved: dict[str, Any] | None) -> Marks | None:
        """The targets' islands of keys as the batch before saved them, when this job
        appends provably new keys (``streaming.batch.new_keys``): a Delta sink, no group
        (other jobs write the same tables), ``sink.append_new_keys`` on."""
        appends = callable(getattr(self.sink, "append", None))
        if not (self.p.settings.sink.append_new_keys and appends) or self.co.shared:
            return None
        return Marks(saved)

    def step(self, name: str) -> None:
        """Tag the Spark jobs that follow with the batch and protocol step, so that Spark's
        UI and event log attribute every job of a batch to the step that ran it."""
        self.spark.sparkContext.setJobDescription(f"shardmerge batch {self.batch}: {name}")

    def write(self, rows: DataFrame, planner: Planner) -> None:
        """Step 6 (``streaming.batch.writer``): its outcome's counts are the batch's."""
        out = Writer(
            self.spark, self.co, self.ex, self.sink, self.stash, self.p.settings, self.p.app_id,
            self.slots, self.batch, self.events, self.dead, self.caught, self.first, self.reread,
            self.marks,
        ).write(rows, planner)  # fmt: skip
        # one write step per batch: its counts are the batch's as they are
        for name in ("events", "written", "held", "dropped", "replayed", "fast_path"):
            setattr(self.stats, name, getattr(out, name))
        self.stats.plan_seconds = round(out.plan_seconds, 3)
        self.stats.target_rows = out.target_rows

    def next_version(self, what: str = "write") -> int:
        return self.slots.take(what)

    # --- what a move does in the batch (streaming.batch.moves.Host) -------------------------------

    def run_decisions(self, decisions: list[Any]) -> None:
        self.ex.run(decisions)

    def release(self, d: Release) -> None:
        self.ex.run([d])

    def replay_control(self, r: dict[str, Any], planner: Planner) -> None:
        self.control(r, planner, taken=True)

    def dead_control(self, r: dict[str, Any], why: str) -> None:
        self.dead.append((r["topic"], r["partition"], r["offset"], why))

    def discard_stashed(self, target: TargetId, shard: ShardId, version: int) -> None:
        slot = self.slots.take(f"stash: {shard}'s rows a move kept")
        if self.stash.exists():
            gone = self.stash.discard(str(target), shard, version, self.batch, slot)
            log.info("batch %s: %d stashed rows of %s discarded (move)", self.batch, gone, shard)

    def _run(self, started: float) -> None:
        obs = self.p.observer
        obs.begin(self.batch)
        # A row image naming a column twice must not fail every run of the batch: Spark
        # builds its map keeping the last value (an after image's is then a dead letter,
        # step 4; a before image's keeps its last value: docs/status.md).
        self.spark.conf.set("spark.sql.mapKeyDedupPolicy", "LAST_WIN")
        self.step("restore")
        # 1. restore (a newer run of the job on this checkpoint stops this one first)
        self.p.epochs.check()
        c, applied, saved_ids, self.moves = self.p.restore(self.batch)
        self.marks = self.new_keys((self.p.saved or {}).get("marks"))
        # The batch's offsets as Spark logged them (read once: the topic ids and the
        # caught-up check both use them).
        self.logged = offsets_log(self.spark, join(self.p.settings.checkpoint, "spark"), self.batch)
        # A topic deleted and recreated since it was read stops the batch before any write.
        self.topic_ids = self.p.topic_ids.check(self.batch, saved_ids, self.logged)
        obs.lap("restore")
        schemas = c.downstream_schemas()
        self.ex = Executor(c, self.sink, self.p.settings, self.slots, schemas, stash=self.stash)
        self.co.start(c, self.ex, self.p.saved)
        commands = self.p.store.intent(self.batch, applied)
        # 2. operator commands
        for cmd in commands:
            # A command the coordinator cannot take (a mistyped shard, a replacement that
            # does not parse, a strict target's conflict, words that do not split) is a
            # recorded command error, and the coordinator is as before it: the batch goes
            # on. Only the sink work of a command it took can fail the batch.
            mark = self.co.mark()
            moves_before = self.moves.to_json()
            try:
                command = command_of(cmd)
                if isinstance(command, MoveCommand):
                    self.moves.command(command, self)
                else:
                    self.co.command(cmd["id"], command)
            except (ShardMergeError, ValueError) as e:
                self.co.rollback(mark)
                self.moves = self.moves.restored(moves_before)
                self.stats.command_errors.append(f"{cmd['words']}: {e}")
                log.error("operator command %r refused: %s", cmd["words"], e)
            applied.add(cmd["id"])
        obs.lap("commands")
        self.step("read and decode")
        # 3. decode: the batch is read from Kafka and parsed once, in the query's plan (the
        # parse is kept until the batch ends). Spark's Kafka source gives one task per
        # topic-partition, and Debezium writes a topic per shard table: every Spark job of
        # the batch would cost a task per shard. The batch is read in as many tasks as the
        # cluster has cores instead (the order of events is their position, not where
        # they sit).
        self.df = self.df.coalesce(max(1, self.spark.sparkContext.defaultParallelism))
        # The one kept copy of the batch is its parse (decode_all); the events are read
        # from it (an inline of each record's parsed events), not kept a second time.
        events = self.events = self.decode_all()
        crash_point("after_decode")
        try:
            # 4. control events, and the rows per shard
            # (with moves, the rows of their marker tables too: control events of a kind)
            control = f"{CONTROL} OR {self.moves.marker_rows()}" if self.moves else CONTROL
            # As dicts: the driver reads each event's fields many times (a Row looks a
            # name up among its fields on every read; 8,192 control events of a rollout
            # spent about a second there).
            collected = [r.asDict() for r in events.filter(control).collect()]
            controls = in_global_order(join_split_renames(collected))
            rows = events.filter(f"NOT ({control})")
            if self.moves.rereads() and self.stash.exists():
                # Rows of moving shards that waited for their source's marker watermark:
                # classified again with this batch's own (streaming.batch.moves, MOVE_WAIT);
                # the copies in the stash go in step 6.
                self.reread = self.stash.waiting(MOVE_WAIT, self.batch)
                rows = rows.unionByName(self.reread)
            # The sources read to the end of their schema-change topics: their rows that
            # need a DDL not read are dead letters (streaming.batch.rows.no_ddl_sql).
            self.caught = self.p.caught_up.sources(self.batch, self.logged)
            first = self.first = first_rows(rows, read_ahead_sql(self.caught))
            if first.twice:
                rows = self.named_twice(rows, first.twice)
            shards, prints, self.caught_sources = first.shards, first.prints, first.caught
            obs.lap("decode")
            self.stats.decode_seconds = round(time.monotonic() - started, 3)
            decide_start = time.monotonic()
            self.step("decide")
            # 5. decide
            # A group member that has not joined its group joins (the tables this batch
            # creates first); alone, nothing.
            self.co.join([_statement(r) for r in controls if r["op"] == "ddl"], self.spark)
            planner = Planner(self.c)
            # The row schemas of online-DDL shadow tables, for a cut-over in this batch or
            # a later one whose shadow's CREATE was never read.
            for shard, seen in sorted(first.shadows.items(), key=lambda kv: str(kv[0])):
                self.co.shadow(shard, seen)
            if self.moves:
                self.moves.settle(self, planner)  # an abort's deferred statements
            for j, r in enumerate(controls):
                try:
                    if r["op"] in ("ddl", "t"):
                        self.control(r, planner)
                    else:
                        self.moves.marker(r, position_of(r), self)
                    if self.moves:
                        self.moves.settle(self, planner)
                except ConflictError:
                    # A strict target stops the job here; the rows before this control
                    # event are written first, as they would be one by one.
                    self.decided(planner, shards, prints)
                    self.write(self.before(rows, controls[j:]), planner)
                    raise
                crash_point("after_ddl")
            self.decided(planner, shards, prints)
            # G4: write only once every target has the version the decisions say.
            self.step("gate")
            self.stats.gate_seconds = round(self.co.gate(self.spark), 3)
            self.stats.ddl = sum(r["op"] in ("ddl", "t") for r in controls)
            self.stats.decide_seconds = round(time.monotonic() - decide_start, 3)
            obs.lap("decide")
            self.step("write")
            # 6. write
            self.write(rows, planner)
            self.stats.events += len(controls)
            self.stats.group_records = self.co.records
        finally:
            self.unpersist_parsed()
        obs.lap("write")
        self.step("persist")
        # 7. persist
        self.stats.seconds = round(time.monotonic() - started, 3)
        crash_point("before_state")
        state = self.state_json({
            "applied_commands": sorted(applied),
            "topic_ids": self.topic_ids,
            **({"marks": self.marks.to_json()} if self.marks is not None else {}),
        })  # fmt: skip
        self.p.store.save(self.batch, state)
        crash_point("after_state")
        self.p.store.forget_commands(applied)
        obs.lap("persist")
        obs.done(dict(self.stats.__dict__), state)
        self.slots.log()
        self.p.last_stats = self.stats
        log.info("batch %d: %s", self.batch, self.stats)

    # --- step 3 -----------------------------------------------------------------------------

    def decode_all(self) -> DataFrame:
        """The batch's events; its dead letters appended. The query hands the records
        parsed (``streaming.job.read_parsed``); the parse is kept until the batch ends
        (every read of the events reads it)."""
        parsed = self.df.persist()
        self.parsed.append(parsed)
        formats = sorted({s.format for s in self.p.settings.sources})
        parts = []
        dead_parts = []
        for fmt in formats:
            mine = parsed.filter(F.col("__fmt") == fmt) if len(formats) > 1 else parsed
            ev, dead = split(mine, fmt)
            parts.append(ev)
            dead_parts.append(dead)
        dead = dead_parts[0]
        for d in dead_parts[1:]:
            dead = dead.unionByName(d)
        version = self.next_version("dead letters of the decode")
        if not dead.isEmpty():
            append(dead, self.p.settings.dead_letters(), self.p.app_id, version)
        events = parts[0]
        for e in parts[1:]:
            events = events.unionByName(e)
        return events.withColumn("_okey", F.expr(ORDER_KEY))

    def unpersist_parsed(self) -> None:
        for parsed in self.parsed:
            parsed.unpersist()
        self.parsed = []

    def named_twice(
        self, rows: DataFrame, twice: list[tuple[ShardId, tuple[str, ...]]]
    ) -> DataFrame:
        """``rows`` without those whose after image names a column twice (``twice``, from
        step 4): each is a dead letter of the batch (written in step 6), with the name.
        Rare (a malformed or hostile record), so found again row by row only then."""
        cond = " OR ".join(
            f"(source = {string(s.source)} AND db = {string(s.db)} AND tbl = {string(s.table)}"
            f" AND json_object_keys(after) = array({', '.join(string(n) for n in names)}))"
            for s, names in twice
        )
        for shard, names in twice:
            log.error(
                "batch %s: rows of %s whose after image names column %r twice: dead letters",
                self.batch, shard, _repeated(names),
            )  # fmt: skip
        bad = rows.filter(cond).selectExpr(
            "topic", "`partition`", "`offset`", "json_object_keys(after) AS names"
        )
        for r in bad.collect():
            why = (
                f"the after image names column {_repeated(tuple(r['names']))!r} twice "
                "(MySQL's column names are case-insensitive): it is no row of its table"
            )
            self.dead.append((r["topic"], r["partition"], r["offset"], why))
        return rows.filter(f"NOT coalesce({cond}, false)")

    # --- step 5 -----------------------------------------------------------------------------

    def control(self, r: Any, planner: Planner, taken: bool = False) -> None:
        """One control event through the coordinator; its decisions to the executor.
        ``taken``: a move kept it and hands it on now (streaming.batch.moves)."""
        s = _statement(r)
        if self.moves and not taken and self.moves.take(as_dict(r), s.position, self):
            return  # a move's: recorded, queued, deferred or waiting (streaming.batch.moves)
        # A statement that creates, renames or drops tables changes which rows are whose:
        # the rows of the tables it names up to it keep the plan from before it.
        cut = table_level(r)
        segs = planner.cut(touched(r, self.c.registered()), s.position) if cut else []
        taken_now = self.co.ddl(s)
        if taken_now.resent:
            # The rows sent again with it are older than its shard's last DDL: they are
            # written under the plan of their own position, like any late row.
            log.warning(
                "batch %s: %s taken already at %s, sent again (%s@%s): not run twice: %s",
                self.batch, s.shard, s.origin, s.channel, r["offset"], s.sql,
            )  # fmt: skip
            self.stats.resent_ddl += 1
        if taken_now.refused is not None:
            self.dead.append((r["topic"], r["partition"], r["offset"], taken_now.refused))
        planner.close(segs, taken_now.decisions)

    def decided(
        self,
        planner: Planner,
        shards: dict[ShardId, Any],
        prints: dict[ShardId, list[tuple[Any, str]]],
    ) -> None:
        # A row whose schema fingerprint differs from what its shard's rows carried since
        # its last DDL is ahead of a DDL not yet received (a type change names no new
        # column): the shard waits from that row on (coordinator.fingerprints).
        for shard, seen in sorted(prints.items(), key=lambda kv: str(kv[0])):
            self.co.prints(shard, seen)
        self.stop_waiting()
        released = {d.shard for d in self.ex.work.releases}
        planner.finish(sorted(set(shards) | released, key=str))
        if self.moves:
            self.moves.plan(planner, self.c, self.ex.work.renames)
        self.await_unregistered(planner, shards)
        self.stats.downstream_ddl = self.ex.downstream_ddl
        self.stats.refused_ddl = self.ex.refused_ddl

    def stop_waiting(self) -> None:
        """A shard waiting for a DDL that its source's schema-change topics, read to their
        end in this batch, do not hold: no DDL explains its rows. It stops waiting and its
        kept rows replay; those that still need a DDL are dead letters with the reason
        (``streaming.batch.rows.no_ddl_sql``), the rest are written."""
        for w in self.c.waiting():
            if w.kind != "ahead_of_ddl" or w.shard.source not in self.caught_sources:
                continue
            log.warning(
                "batch %s: shard %s waited from %s for a DDL that its schema-change topics, "
                "read to their end, do not hold: it goes on; its rows that need a DDL "
                "become dead letters",
                self.batch, w.shard, w.since,
            )  # fmt: skip
            self.stats.ddl_never_came += 1
            self.co.stop(w.shard, w.since)

    def before(self, rows: DataFrame, rest: list[Any]) -> DataFrame:
        """The rows that come before every control event of ``rest``: positioned before
        the first of them that touches their own shard, committed no later than the
        first of them."""
        cut: dict[ShardId, list[Any]] = {}
        for r in rest:
            for s in touched(r, self.c.registered()):
                cut.setdefault(s, position_of(r))
        frame = local_frame(
            self.spark,
            [(s.source, s.db, s.table, okey_value(p)) for s, p in cut.items()],
            f"source string, db string, tbl string, _cut {OKEY_TYPE}",
        )
        latest = min(commit_time(r) for r in rest)
        return (
            rows.join(F.broadcast(frame), ["source", "db", "tbl"], "left")
            .filter(f"NOT coalesce(_okey > _cut, false) AND coalesce(ts_ms, 0) <= {latest}")
            .drop("_cut")
        )

    def await_unregistered(self, planner: Planner, shards: dict[ShardId, Any]) -> None:
        """Rows of a routed table whose CREATE TABLE has not arrived (it is on another
        topic): its first row starts a hold, and the rows wait in the stash."""
        for seg in planner.segments:
            if seg.closed or seg.plan.route.action != "unknown" or seg.shard not in shards:
                continue
            first = seg.after if seg.after is not None else shards[seg.shard]
            self.co.await_ddl(seg.shard, first, "")
            planner.refresh(seg)


@dataclass(frozen=True)
class KeySet:
    """The rows of one shard in the batch whose after images name the same columns:
    the first and last of them, and the after image of the first (``sample``). Whether
    an upsert is ahead of a DDL depends on the columns its image names and on its shard's
    plan, not on its values (``streaming.batch.rows.project_actions``), so the sample, placed at
    the first and at the last position, judges them all where the plan does not change
    between them (``streaming.batch.writer.Writer.fast_targets``)."""

    shard: ShardId
    first: Any
    last: Any
    sample: str


@dataclass
class FirstRows:
    """What the batch's rows tell per shard before anything is decided: ``shards``, each
    shard's first position; ``prints``, the schema fingerprints its rows carry, each with
    the position of its first row; ``shadows``, the same for the row schemas of online-DDL
    shadow tables; ``caught``, the upstream sources all of whose rows in the batch came
    from a caught-up source (see :func:`streaming.batch.rows.read_ahead_sql`); ``keysets``, the
    column sets its after images name (see :class:`KeySet`)."""

    shards: dict[ShardId, Any]
    prints: dict[ShardId, list[tuple[Any, str]]]
    shadows: dict[ShardId, list[tuple[Any, str]]]
    caught: set[str]
    keysets: list[KeySet] = field(default_factory=list)
    # After images that name a column twice (MySQL's names are case-insensitive): per
    # shard, the names as the images list them. Such a row is no row of its table.
    twice: list[tuple[ShardId, tuple[str, ...]]] = field(default_factory=list)
    # The batch's rows per shard (events; an update that changes its key counts once).
    rows: dict[ShardId, int] = field(default_factory=dict)


# The columns an after image names, as it names them (NULL without an image). Images that
# name the same columns in another order or case make two groups, each judged on its own
# sample, as exactly: sorting and lower-casing every row's names cost more than the rare
# extra group.
_IMAGE_KEYS = "json_object_keys(after)"


def first_rows(rows: DataFrame, caught: str = "false") -> FirstRows:
    """One small aggregate of the batch's rows (see :class:`FirstRows`)."""
    shards: dict[ShardId, Any] = {}
    prints: dict[ShardId, list[tuple[Any, str]]] = {}
    shadows: dict[ShardId, list[tuple[Any, str]]] = {}
    keysets: list[KeySet] = []
    twice: list[tuple[ShardId, tuple[str, ...]]] = []
    sources: dict[str, bool] = {}
    counts: dict[ShardId, int] = {}
    fps: dict[tuple[ShardId, str | None], Any] = {}
    texts: dict[tuple[ShardId, str | None], str] = {}
    for r in (
        rows.groupBy("source", "db", "tbl", "schema_fp", F.expr(_IMAGE_KEYS).alias("_keys"))
        .agg(
            F.min("_okey").alias("first"),
            F.max("_okey").alias("last"),
            F.min(F.expr(f"CASE WHEN {caught} THEN 1 ELSE 0 END")).alias("caught"),
            # one text per fingerprint: the fingerprint is its hash
            F.max("row_schema").alias("row_schema"),
            F.expr("min_by(after, _okey)").alias("sample"),
            F.count(F.lit(1)).alias("n"),
        )
        .collect()
    ):
        shard = ShardId(r["source"], r["db"], r["tbl"])
        counts[shard] = counts.get(shard, 0) + int(r["n"])
        sources[shard.source] = sources.get(shard.source, True) and r["caught"] == 1
        position = okey_position(r["first"])
        if shard not in shards or position < shards[shard]:
            shards[shard] = position
        # Per fingerprint (or none) its first row and one row schema: a fingerprint may
        # come with several key sets.
        fp = (shard, r["schema_fp"])
        fps[fp] = min(position, fps.get(fp, position))
        if r["row_schema"] is not None:
            texts[fp] = max(r["row_schema"], texts.get(fp, r["row_schema"]))
        names = r["_keys"]
        if names is not None and len({n.lower() for n in names}) < len(names):
            twice.append((shard, tuple(names)))
        elif names is not None:
            keysets.append(KeySet(shard, position, okey_position(r["last"]), r["sample"]))
    for (shard, fp_text), position in fps.items():
        if fp_text is not None:
            prints.setdefault(shard, []).append((position, fp_text))
        if (shard, fp_text) in texts:
            shadows.setdefault(shard, []).append((position, texts[(shard, fp_text)]))
    caught_sources = {s for s, all_caught in sources.items() if all_caught}
    return FirstRows(shards, prints, shadows, caught_sources, keysets, twice, counts)


def _statement(r: Any) -> Statement:
    """A control event as its coordination reads it."""
    return Statement(
        ShardId(r["source"], r["db"], r["tbl"]),
        control_sql(r),
        position_of(r),
        upstream_origin(r),
        f"{r['topic']}[{r['partition']}]",
    )


def _repeated(names: tuple[str, ...]) -> str:
    """The first of ``names`` that an earlier one names again (case-insensitively)."""
    seen: set[str] = set()
    for n in names:
        if n.lower() in seen:
            return n
        seen.add(n.lower())
    raise ValueError(f"no name is repeated in {names}")


def _wait_json(w: WaitView) -> dict[str, Any]:
    """A shard waiting without a DDL lock, as the state file, the CLI and the API show it
    (``since``: the upstream commit time, unix seconds, of the first row that waits)."""
    return {
        "target": str(w.target),
        "shard": str(w.shard),
        "kind": w.kind,
        "since": commit_seconds(w.since),
        "reason": w.reason,
    }


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
