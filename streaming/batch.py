"""One micro-batch: the foreachBatch protocol.

The protocol's one text is ``coordinator/PROTOCOL.md``, "The streaming job's
micro-batch": its seven numbered steps, and what a re-run of the batch does when the
driver dies after each (Spark runs the same batch id again over the same offsets, because
its checkpoint commit comes after us). This module runs them, in ``_Batch._run``:

1. restore: ``BatchProcessor.restore``; the epoch check (``streaming.epochs``) and the
   topic ids (``streaming.topic_ids``);
2. operator commands: ``StateStore.intent``, ``Coordinator.command``;
3. decode: ``_Batch.decode_all`` (the parse itself is in the query's plan,
   ``streaming.job.read_parsed``);
4. control events and per-shard facts: ``streaming.control.in_global_order``,
   :func:`first_rows`, the caught-up check (``streaming.caught_up``);
5. decide: ``_Batch.control``, ``_Batch.decided``; the row plan (``streaming.plan``);
6. write: ``streaming.writer.WriteStep``;
7. persist: ``StateStore.save``.

The write slots of every Delta write are taken from one ledger, ``streaming.slots``.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from coordinator.coordinator import Coordinator, UnknownShardError, WaitView
from coordinator.decisions import ApplyDDL, CreateTarget, Decision, Release, Rename
from coordinator.fingerprints import fingerprints_change
from coordinator.group import Folded, Record, Replica
from coordinator.ids import ShardId, TargetId
from coordinator.moves import MoveCommand
from coordinator.routing import TableKind
from coordinator.state import restore, snapshot
from coordinator.target import ConflictError
from shardmerge.errors import ShardMergeError
from streaming.caught_up import CaughtUp, offsets_log
from streaming.config import Settings, SourceSettings
from streaming.control import (
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
from streaming.decode import split
from streaming.delta_sink import DeltaSink
from streaming.epochs import Epochs
from streaming.executor import Executor
from streaming.faults import crash_point
from streaming.group import GroupMember
from streaming.hadoop_fs import join
from streaming.local_frame import local_frame
from streaming.moving import MOVE_WAIT, MoveKeeper
from streaming.ops.observer import BatchObserver
from streaming.plan import Planner
from streaming.quoting import check_session, string
from streaming.rows import read_ahead_sql
from streaming.slots import Slots
from streaming.stash import Stash, append
from streaming.state_store import StateStore, command_of
from streaming.topic_ids import TopicIds
from streaming.writer import WriteStep

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
    # Targets written by the fast path (streaming.writer.WriteStep.fast_targets).
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

    def __init__(self, spark: SparkSession, settings: Settings) -> None:
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
        self.epochs = Epochs.claim(settings.checkpoint, spark, app_id=self.app_id)
        # One of several jobs writing the same targets (streaming.group).
        self.group: GroupMember | None = None
        self.saved_group: dict[str, Any] | None = None
        if settings.coordination is not None:
            from streaming.group import Ticker

            self.group = GroupMember(spark, settings, self.app_id)
            self.group.start(Ticker(spark, settings))

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        _Batch(self, df, batch_id).run()

    def restore(self, batch: int) -> tuple[Coordinator, set[str], dict[str, str], MoveKeeper]:
        """The coordinator, the operator commands applied, the Kafka topic ids
        (streaming.topic_ids) and the moves saved by the batch before ``batch``."""
        data = self.store.load_before(batch)
        # a group member's replica, beside the coordinator (Replica.meta)
        self.saved_group = None if data is None else data.get("group")
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


class _Batch(WriteStep):
    def __init__(self, p: BatchProcessor, df: DataFrame, batch_id: int) -> None:
        self.p = p
        # foreachBatch hands a DataFrame of a cloned session: temp views, SQL and the
        # transaction confs must all use that session.
        self.spark = df.sparkSession
        self.sink = DeltaSink(self.spark, p.app_id, shared=p.group is not None)
        self.stash = Stash(self.spark, p.stash_path, p.app_id)
        self.df = df
        self.parsed: list[DataFrame] = []  # persisted parses of the batch (step 3)
        self.batch = batch_id
        self.slots = Slots(batch_id)  # the batch's Delta write versions
        self.stats = Stats(batch=batch_id)
        self.dead: list[tuple[str, int, int, str]] = []  # control events: (key, reason)
        self.reread: DataFrame | None = None  # stash rows read again (streaming.moving)
        self.caught: list[SourceSettings] = []  # sources caught up: streaming.caught_up
        # upstream source ids (Debezium's server name) whose rows came from caught sources
        self.caught_sources: set[str] = set()
        self.group = p.group
        self.replica: Replica | None = None

    def run(self) -> None:
        started = time.monotonic()
        if self.group is not None:
            self.group.begin()  # one batch at a time, and only while this member's lease holds
        done = False
        try:
            self._run(started)
            done = True
        except ConflictError as e:
            self.p.store.save_failure(self.state_json({"error": str(e)}))
            raise
        finally:
            self.spark.sparkContext.setJobDescription(None)
            if self.group is not None:
                if done and self.replica is not None:
                    self.group.finish(self.replica, self.batch)
                else:
                    self.group.abort()

    def state_json(self, extra: dict[str, Any]) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "coordinator": snapshot(self.c),
            "stats": self.stats.__dict__,
            "locks": self.moves.locks([_lock_json(v) for v in self.c.locks()]),
            "waiting": [_wait_json(w) for w in self.c.waiting()],
            **({"moves": self.moves.to_json()} if self.moves else {}),
            **({"group": self.group_json()} if self.replica is not None else {}),
            **extra,
        }

    def group_json(self) -> dict[str, Any]:
        """The replica as saved beside the coordinator (its coordinator is that one)."""
        assert self.replica is not None
        return self.replica.meta()

    # --- a group member's coordinator (streaming.group) --------------------------------------

    def tell(
        self, kind: Any, shard: ShardId | None, key: str, body: dict[str, Any]
    ) -> Folded | None:
        """What this job would tell its coordinator, appended to the group log as a
        record (its id: ``key``, which a re-run batch gives again), then the log folded
        up to it: the others' records before it first, each decision about this job's
        shards executed (G2, G3). The fold of the record itself, if it was folded now."""
        assert self.group is not None and self.replica is not None
        about = {} if shard is None else {"shard": str(shard)}
        record = Record(f"{self.group.member}:{key}", self.group.member, kind,
                        {**about, **body})  # fmt: skip
        seq = self.group.append(record)
        self.stats.group_records += 1
        folded = self.fold(seq)
        return next((f for f in folded if f.seq == seq), None)

    def fold(self, mine_until: int) -> list[Folded]:
        """Fold the group log (up to this job's next record above ``mine_until``) and
        execute the decisions about this job's shards."""
        assert self.group is not None and self.replica is not None
        folded = self.group.fold(self.replica, mine_until)
        self.c = self.ex.c = self.replica.coordinator
        for f in folded:
            if f.refused and f.record.job == self.group.member:
                log.error("batch %s: group log record %s not taken: %s", self.batch,
                          f.record.id, f.refused)  # fmt: skip
            self.ex.run(self.own(f.decisions))
        return folded

    def own(self, decisions: tuple[Decision, ...] | list[Decision]) -> list[Decision]:
        """The decisions this job executes: those about its own shards (the owner runs
        the downstream changes, streaming.group)."""
        if self.replica is None:
            return list(decisions)
        mine = self.group.member if self.group else ""
        owners = self.replica.owners
        out: list[Decision] = []
        for d in decisions:
            if isinstance(d, CreateTarget | ApplyDDL):
                continue
            shard = d.new if isinstance(d, Rename) else d.shard
            if owners.get(shard, mine) == mine:
                out.append(d)
        return out

    def step(self, name: str) -> None:
        """Tag the Spark jobs that follow with the batch and protocol step, so that Spark's
        UI and event log attribute every job of a batch to the step that ran it."""
        self.spark.sparkContext.setJobDescription(f"shardmerge batch {self.batch}: {name}")

    def next_version(self, what: str = "write") -> int:
        return self.slots.take(what)

    # --- what a move does in the batch (streaming.moving.Host) -------------------------------

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
        self.c, applied, saved_ids, self.moves = self.p.restore(self.batch)
        # The batch's offsets as Spark logged them (read once: the topic ids and the
        # caught-up check both use them).
        self.logged = offsets_log(self.spark, join(self.p.settings.checkpoint, "spark"), self.batch)
        # A topic deleted and recreated since it was read stops the batch before any write.
        self.topic_ids = self.p.topic_ids.check(self.batch, saved_ids, self.logged)
        obs.lap("restore")
        schemas = self.c.downstream_schemas()
        self.ex = Executor(
            self.c, self.sink, self.p.settings, self.slots, schemas, stash=self.stash
        )
        if self.group is not None:
            # The group log's records since the saved batch (the others', and this job's
            # own only when this batch appends them again: streaming.group.fold).
            saved = self.p.saved_group
            self.replica = (
                Replica(self.c) if saved is None else Replica.with_coordinator(self.c, saved)
            )
            self.fold(self.replica.seq)
        commands = self.p.store.intent(self.batch, applied)
        # 2. operator commands
        for cmd in commands:
            # A command the coordinator cannot take (a mistyped shard, a replacement that
            # does not parse, a strict target's conflict, words that do not split) is a
            # recorded command error, and the coordinator is as before it: the batch goes
            # on. Only the sink work of a command it took can fail the batch.
            before = snapshot(self.c)
            moves_before = self.moves.to_json()
            try:
                command = command_of(cmd)
                decisions: list[Decision] = []
                if isinstance(command, MoveCommand):
                    self.moves.command(command, self)
                elif self.group is not None:
                    # The whole group takes it, at its place in the log (G2).
                    self.group_command(cmd["id"], command)
                else:
                    decisions = self.c.command(command)
            except (ShardMergeError, ValueError) as e:
                if self.replica is None:  # a group's replica restores itself (its fold)
                    self.c = self.ex.c = self.p.coordinator_from(before)
                self.moves = self.moves.restored(moves_before)
                self.stats.command_errors.append(f"{cmd['words']}: {e}")
                log.error("operator command %r refused: %s", cmd["words"], e)
            else:
                self.ex.run(decisions)
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
            controls = in_global_order(join_split_renames(events.filter(control).collect()))
            rows = events.filter(f"NOT ({control})")
            if self.moves.rereads() and self.stash.exists():
                # Rows of moving shards that waited for their source's marker watermark:
                # classified again with this batch's own (streaming.moving, MOVE_WAIT);
                # the copies in the stash go in step 6.
                self.reread = self.stash.waiting(MOVE_WAIT, self.batch)
                rows = rows.unionByName(self.reread)
            # The sources read to the end of their schema-change topics: their rows that
            # need a DDL not read are dead letters (streaming.rows.no_ddl_sql).
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
            if self.group is not None and self.group.missing():
                self.join_group(controls)
            planner = Planner(self.c)
            # The row schemas of online-DDL shadow tables, for a cut-over in this batch or
            # a later one whose shadow's CREATE was never read.
            for shard, seen in sorted(first.shadows.items(), key=lambda kv: str(kv[0])):
                if self.replica is None:
                    self.c.shadow_rows(shard, seen)
                elif self.p.router.kind(shard) is TableKind.SHADOW:
                    self.tell("shadow", shard, f"shadow:{shard}:{_key(seen)}",
                              {"seen": [list(x) for x in seen]})  # fmt: skip
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
            if self.group is not None and self.replica is not None:
                # G4: write only once every target has the version this fold decided.
                self.step("group gate")
                self.stats.gate_seconds = round(self.group.gate(self.replica, self.spark), 3)
                self.ex.schemas.update(self.c.downstream_schemas())
            self.stats.ddl = sum(r["op"] in ("ddl", "t") for r in controls)
            self.stats.decide_seconds = round(time.monotonic() - decide_start, 3)
            obs.lap("decide")
            self.step("write")
            # 6. write
            self.write(rows, planner)
            self.stats.events += len(controls)
        finally:
            self.unpersist_parsed()
        obs.lap("write")
        self.step("persist")
        # 7. persist
        self.stats.seconds = round(time.monotonic() - started, 3)
        crash_point("before_state")
        state = self.state_json({"applied_commands": sorted(applied), "topic_ids": self.topic_ids})
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
        ``taken``: a move kept it and hands it on now (streaming.moving)."""
        shard = ShardId(r["source"], r["db"], r["tbl"])
        position = position_of(r)
        sql = control_sql(r)
        origin = upstream_origin(r)
        channel = f"{r['topic']}[{r['partition']}]"
        if self.moves and not taken and self.moves.take(as_dict(r), position, self):
            return  # a move's: recorded, queued, deferred or waiting (streaming.moving)
        if self.replica is not None:
            self.group_ddl(r, planner)
            return
        if self.c.resent(shard, sql, origin, channel):
            # The rows sent again with it are older than its shard's last DDL: they are
            # written under the plan of their own position, like any late row.
            log.warning(
                "batch %s: %s taken already at %s, sent again (%s@%s): not run twice: %s",
                self.batch, shard, origin, channel, r["offset"], sql,
            )  # fmt: skip
            self.stats.resent_ddl += 1
            return
        # A statement that creates, renames or drops tables changes which rows are whose:
        # the rows of the tables it names up to it keep the plan from before it.
        cut = table_level(r)
        segs = planner.cut(touched(r, self.c.registered()), position) if cut else []
        try:
            decisions = self.c.on_ddl(shard, sql, position, origin, channel)
        except UnknownShardError as e:
            self.dead.append((r["topic"], r["partition"], r["offset"], str(e)))
            planner.close(segs, [])
            return
        planner.close(segs, decisions)
        self.ex.run(decisions)

    def group_ddl(self, r: Any, planner: Planner) -> None:
        """A control event of a group member: a ``ddl`` record, folded in log order."""
        position = position_of(r)
        cut = table_level(r)
        segs = planner.cut(touched(r, self.c.registered()), position) if cut else []
        mine = self.tell("ddl", *_ddl_record(r))
        if mine is not None and mine.refused:
            self.dead.append((r["topic"], r["partition"], r["offset"], mine.refused))
        planner.close(segs, self.own(mine.decisions) if mine is not None else [])

    def join_group(self, controls: list[Any]) -> None:
        """Before this member's first DDL record: the tables this batch creates (each
        shard's first CREATE TABLE) go to the log, then its ``join`` record, and the
        batch waits until every member joined (streaming.group.GroupMember.join)."""
        assert self.group is not None
        for r in controls:
            if r["op"] != "ddl":
                continue
            shard = ShardId(r["source"], r["db"], r["tbl"])
            sql = control_sql(r)
            if not _CREATE_TABLE.match(sql) or self.c.shard_state(shard) is not None:
                continue
            if self.p.router.route(shard) is None:
                continue
            self.tell("ddl", *_ddl_record(r))
        waited = self.group.join(self.spark)
        log.info("batch %s: every member of the group joined (waited %.1f s)", self.batch, waited)
        # the others' records up to this member's join (its own later ones keep their place)
        self.fold(self.group.ids[f"{self.group.member}:join"])

    def group_command(self, cid: str, command: Any) -> None:
        """An operator command given to this job: the group's, through the log."""
        folded = self.tell("command", None, f"command:{cid}", {"command": command.to_json()})
        if folded is not None and folded.refused:
            raise ValueError(folded.refused)

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
            if self.replica is None:
                self.ex.run(self.c.schema_fingerprints(shard, seen))
            elif fingerprints_change(self.c.shard_state(shard), seen):
                self.tell("prints", shard, f"prints:{shard}:{_key(seen)}",
                          {"seen": [list(x) for x in seen]})  # fmt: skip
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
        (``streaming.rows.no_ddl_sql``), the rest are written."""
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
            if self.replica is None:
                self.ex.run(self.c.stop_waiting(w.shard))
            else:
                self.tell("stop", w.shard, f"stop:{w.shard}:{_key(w.since)}", {})

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
            if self.replica is None:
                self.ex.run(self.c.await_ddl(seg.shard, first, ""))
            else:
                self.tell("await", seg.shard, f"await:{seg.shard}:{_key(first)}",
                          {"position": first, "reason": ""})  # fmt: skip
            planner.refresh(seg)


@dataclass(frozen=True)
class KeySet:
    """The rows of one shard in the batch whose after images name the same columns:
    the first and last of them, and the after image of the first (``sample``). Whether
    an upsert is ahead of a DDL depends on the columns its image names and on its shard's
    plan, not on its values (``streaming.rows.project_actions``), so the sample, placed at
    the first and at the last position, judges them all where the plan does not change
    between them (``streaming.writer.WriteStep.fast_targets``)."""

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
    from a caught-up source (see :func:`streaming.rows.read_ahead_sql`); ``keysets``, the
    column sets its after images name (see :class:`KeySet`)."""

    shards: dict[ShardId, Any]
    prints: dict[ShardId, list[tuple[Any, str]]]
    shadows: dict[ShardId, list[tuple[Any, str]]]
    caught: set[str]
    keysets: list[KeySet] = field(default_factory=list)
    # After images that name a column twice (MySQL's names are case-insensitive): per
    # shard, the names as the images list them. Such a row is no row of its table.
    twice: list[tuple[ShardId, tuple[str, ...]]] = field(default_factory=list)


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
        )
        .collect()
    ):
        shard = ShardId(r["source"], r["db"], r["tbl"])
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
    return FirstRows(shards, prints, shadows, caught_sources, keysets, twice)


_CREATE_TABLE = re.compile(r"^\s*CREATE\s+TABLE\b", re.IGNORECASE)


def _ddl_record(r: Any) -> tuple[ShardId, str, dict[str, Any]]:
    """A control event as a group log ``ddl`` record: its shard, id key and body."""
    position = position_of(r)
    body = {"sql": control_sql(r), "position": position, "origin": upstream_origin(r),
            "channel": f"{r['topic']}[{r['partition']}]"}  # fmt: skip
    return ShardId(r["source"], r["db"], r["tbl"]), f"ddl:{_key(position)}", body


def _key(value: Any) -> str:
    """A position (or positions) as part of a group record's id."""
    return json.dumps(value, separators=(",", ":"), default=str)


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
