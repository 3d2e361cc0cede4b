"""One micro-batch: the foreachBatch protocol.

Numbered steps, and what happens if the driver dies after each (Spark then runs the same
batch id again over the same offsets, because its checkpoint commit comes after us):

1. **Restore** the coordinator from the newest state of an *earlier* batch, and fix the
   operator commands this batch applies (``intent``). Dies here: nothing was written.
2. **Apply operator commands** (their decisions are executed like any, step 6).
3. **Decode** the Kafka records in the JVM (``streaming.decode``); undecodable records go
   to the dead-letter table. Dies after: the re-run appends the same dead letters with
   the same transaction version, which Delta skips.
4. **Collect control events only** (DDL, TRUNCATE: a handful) to the driver and put them in
   one order: source commit time, then source and binlog position.
5. **Cut each shard's rows at its DDL positions**: a row gets epoch *j* when the next DDL
   of its own shard is control event *j* (rows after the shard's last DDL, and rows of
   shards without DDL, get their epoch from the same rule: the last one / the first one).
6. **For each epoch**: write its rows (free shards: MERGE per target; held shards: append
   to the stash; shadow/trash tables: dropped by design; unknown tables: dead letters),
   then hand control event *j* to the coordinator and execute its decisions in order:
   create the target, ALTER it, DELETE a shard's rows (TRUNCATE), replay a shard's stash
   (read, MERGE, delete from the stash). Every write carries a transaction version derived
   from (batch id, write slot); slots are numbered in decision order, which is the same on
   a re-run, so a re-run skips every write that happened. DDL is applied only where the
   table still lacks it. Dies here: the re-run redoes the batch from step 1, skipping what
   was done.
7. **Persist** the coordinator state for this batch id (atomic file), then forget applied
   commands. Dies after: Spark re-runs the batch; step 1 restores the state *before* it, the
   writes are skipped, and the same state is written again.

Held events therefore never live in driver memory; retention of the Kafka topics does not
matter once a batch is done; nothing is written twice and nothing is lost.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from coordinator.commands import CommandError, parse_command
from coordinator.coordinator import Coordinator, RowRoute, UnknownShardError
from coordinator.decisions import ApplyDDL, CreateTarget, Decision, Hold, Release, Truncate
from coordinator.ids import ShardId, TargetId
from coordinator.locks import OperatorError
from coordinator.state import restore, snapshot
from coordinator.target import ConflictError
from schemas.changes import (
    AlterTable,
    CreateTable,
    DropDatabase,
    DropTable,
    RenameTable,
    TruncateTable,
)
from schemas.ddl import parse_ddl
from schemas.errors import DDLError
from schemas.model import quote
from shardmerge.errors import ShardMergeError
from streaming.config import Settings
from streaming.contract import EVENT_SCHEMA
from streaming.delta_sink import DeltaSink, SinkError
from streaming.faults import crash_point
from streaming.ops.observer import BatchObserver
from streaming.quoting import check_session, ident, string
from streaming.rows import Renamed, merge_source, project_actions
from streaming.state_store import StateStore

__all__ = ["BatchProcessor", "Stats"]

log = logging.getLogger("shardmerge.batch")

SLOTS_PER_BATCH = 1_000_000
ORDER_KEY = (
    "named_struct('f', coalesce(pos_file, ''), 'p', coalesce(pos, -1L), "
    "'r', coalesce(pos_row, -1), 't', coalesce(ts_ms, 0L), 'o', offset)"
)
STASH_COLUMNS = [f.name for f in EVENT_SCHEMA.fields]


def position_of(row: Any) -> list[Any]:
    """A JSON-able position that orders like ORDER_KEY."""
    return [
        row["pos_file"] or "",
        row["pos"] if row["pos"] is not None else -1,
        row["pos_row"] if row["pos_row"] is not None else -1,
        row["ts_ms"] or 0,
        row["offset"],
    ]


def okey_position(okey: Any) -> list[Any]:
    """The position of an ``_okey`` struct read back on the driver."""
    return [okey["f"], okey["p"], okey["r"], okey["t"], okey["o"]]


def position_sql(position: list[Any]) -> str:
    f, p, r, t, o = position
    return (
        f"named_struct('f', {string(str(f))}, 'p', {int(p)}L, 'r', {int(r)}, "
        f"'t', {int(t)}L, 'o', {int(o)}L)"
    )


_RENAME = re.compile(r"^\s*RENAME\s+TABLES?\s+(.+?)\s*$", re.IGNORECASE | re.DOTALL)


def join_split_renames(controls: list[Any]) -> list[Any]:
    """Put back together a ``RENAME TABLE a TO b, c TO d`` that the CDC tool split.

    Debezium writes one schema-change event per pair of a multi-table RENAME, all with the
    statement's binlog position. The pairs are one atomic statement (gh-ost's cut-over
    swaps the shadow table in with it), and coordination must see them as one: apart, the
    first pair renames the shard away and the second brings in a table it does not know.
    Two statements never share a binlog position, so the events of one position make one
    statement again, in their (Kafka offset) order."""
    out: list[Any] = []
    for r in sorted(controls, key=lambda r: (r["source"], *position_of(r)[:3], r["offset"])):
        prev = out[-1] if out else None
        pairs = _RENAME.match(r["ddl"] or "") if r["op"] == "ddl" else None
        if (
            pairs is not None
            and prev is not None
            and prev["op"] == "ddl"
            and _RENAME.match(prev["ddl"] or "")
            and prev["source"] == r["source"]
            and r["pos"] is not None
            and r["pos"] >= 0
            and (prev["pos_file"], prev["pos"]) == (r["pos_file"], r["pos"])
        ):
            out[-1] = {**_as_dict(prev), "ddl": f"{prev['ddl'].rstrip()}, {pairs.group(1)}"}
            continue
        out.append(r)
    return out


def refusal(d: ApplyDDL, e: SinkError) -> str:
    return (
        f"the downstream cannot run {d.statement!r} ({d.reason}): {e}. Every row of "
        f"{d.target} waits in the stash meanwhile; once the table is fixed, run "
        f"`shardmerge unlock {d.target} --retry`"
    )


def _as_dict(r: Any) -> dict[str, Any]:
    return r if isinstance(r, dict) else r.asDict()


def commit_time(r: Any) -> int:
    """When a control event happened, for ordering across sources.

    A snapshot's DDL (Debezium's CREATE TABLE of a table that existed when capture began)
    describes a state older than any binlog event after it, yet carries the time the
    snapshot *read* it, to the millisecond, while binlog events carry their commit time in
    whole seconds (MySQL and MariaDB binlogs): a DDL committed right after another source's
    snapshot could sort before it, and find that source's tables not yet registered. A
    snapshot's DDL counts as time 0: it comes first, before the binlog events of every
    source (within its own source, positions keep the order anyway)."""
    return 0 if r["snapshot"] else r["ts_ms"] or 0


def in_global_order(controls: list[Any]) -> list[Any]:
    """Control events by commit time across sources, and by binlog position within one
    source (a commit time may repeat or step back; the position never does)."""
    slots = sorted(
        controls, key=lambda r: (commit_time(r), r["source"], *position_of(r)[:3], r["offset"])
    )
    by_source: dict[str, list[Any]] = {}
    for r in sorted(controls, key=lambda r: (*position_of(r)[:3], r["offset"])):
        by_source.setdefault(r["source"], []).append(r)
    return [by_source[r["source"]].pop(0) for r in slots]


def _table_level(r: Any) -> bool:
    if r["op"] != "ddl" or not r["ddl"]:
        return False
    try:
        changes = parse_ddl(r["ddl"])
    except DDLError:
        return True
    return any(not isinstance(c, AlterTable | TruncateTable) for c in changes)


def waiting_sql(waits: list[tuple[ShardId, list[Any]]], key: str) -> str:
    """Rows of the given shards from the given positions on (``key``: the order key)."""
    return (
        " OR ".join(
            f"(source = {string(s.source)} AND db = {string(s.db)} AND "
            f"tbl = {string(s.table)} AND {key} >= {position_sql(pos)})"
            for s, pos in waits
        )
        or "false"
    )


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
        self.app_id = self.store.app_id()  # carried by every write (see delta_sink)
        self.sink = DeltaSink(spark, self.app_id)
        self.stash_path = self.store.uri("stash")
        self.last_stats: Stats | None = None
        self.observer = BatchObserver()  # step timings and counts for metrics/dashboard

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        _Batch(self, df, batch_id).run()

    # --- helpers used by _Batch ----------------------------------------------------------

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
        self.df = df
        self.batch = batch_id
        self.slot = 0
        self.stats = Stats(batch=batch_id)

    # --- the protocol ---------------------------------------------------------------------

    def run(self) -> None:
        try:
            self._run()
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

    def _run(self) -> None:
        obs = self.p.observer
        obs.begin(self.batch)
        # 1. restore
        self.c, applied = self.p.restore(self.batch)
        obs.lap("restore")
        # The downstream schemas as the executed decisions left them (a decision list can
        # run ahead: a replay before an ALTER must use the schema before it).
        self.schemas = {tid: t.downstream() for tid, t in self.c.targets.items()}
        commands = self.p.store.intent(self.batch, applied)
        # 2. operator commands
        for cmd in commands:
            try:
                self.execute(self.c.command(parse_command(cmd["words"])))
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
            # 4. control events
            controls = in_global_order(
                join_split_renames(events.filter("op IN ('ddl', 't')").collect())
            )
            self.stats.ddl = len(controls)
            obs.lap("decode")
            # 5. epochs: cut only at control events that decide something
            effectful = self.probe(controls)
            cuts = [r for r, e in zip(controls, effectful, strict=True) if e]
            rows = events.filter("op NOT IN ('ddl', 't')").withColumn(
                "_epoch", F.expr(self.epoch_sql(cuts))
            )
            per_epoch = rows.groupBy("_epoch", "source", "db", "tbl").count().collect()
            self.stats.events = sum(r["count"] for r in per_epoch) + len(controls)
            obs.lap("epochs")
            # 6. epochs: the rows of epoch e follow the e-th deciding control event
            epoch = 0
            for j in range(len(controls) + 1):
                if j > 0:
                    self.control(controls[j - 1])
                    crash_point("after_ddl")
                    if not effectful[j - 1]:
                        continue
                    epoch += 1
                shards = [r for r in per_epoch if r["_epoch"] == epoch]
                if shards:
                    self.write_rows(rows.filter(F.col("_epoch") == epoch), shards)
                    crash_point("after_rows")
        finally:
            events.unpersist()
            self.df.unpersist()
        obs.lap("write")
        # 7. persist
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
        self.append(dead, self.p.settings.dead_letters())
        events = parts[0]
        for e in parts[1:]:
            events = events.unionByName(e)
        return events.withColumn("_okey", F.expr(ORDER_KEY))

    # --- step 5 -----------------------------------------------------------------------------

    def epoch_sql(self, controls: list[Any]) -> str:
        """A row's epoch: written after every control event that precedes it, that is one
        past the later of (a) the last control event touching its own shard positioned
        before it and (b) the last control event committed before it (``ts_ms``). (a) is
        the shard's own order and is exact; (b) keeps the global order the memory engine
        has, which matters when a strict conflict stops the batch part way. A row never
        passes its own shard's next DDL: one source's commit times do not go backwards."""
        if not controls:
            return "0"
        own = []
        for j in reversed(range(len(controls))):  # the first true case is the latest
            r = controls[j]
            for shard in self.touched(r):
                own.append(
                    f"WHEN source = {string(shard.source)} AND db = {string(shard.db)} "
                    f"AND tbl = {string(shard.table)} "
                    f"AND _okey > {position_sql(position_of(r))} THEN {j + 1}"
                )
        by_time = [
            f"WHEN coalesce(ts_ms, 0) > {commit_time(controls[j])} THEN {j + 1}"
            for j in reversed(range(len(controls)))
        ]
        return f"greatest(CASE {' '.join(own)} ELSE 0 END, CASE {' '.join(by_time)} ELSE 0 END)"

    def probe(self, controls: list[Any]) -> list[bool]:
        """Which control events decide something (hold, release, run DDL, ...), found on a
        copy of the coordinator. Only those cut the rows into epochs: a DDL that decides
        nothing (the third shard adding a column the target has) changes no write."""
        probe = restore(
            snapshot(self.c), self.p.router, self.p.settings.target_configs(),
            self.p.settings.default_config(),
        )  # fmt: skip
        out = []
        for r in controls:
            shard = ShardId(r["source"], r["db"], r["tbl"])
            sql = r["ddl"] if r["op"] == "ddl" else f"TRUNCATE TABLE {quote(r['tbl'])}"
            try:
                decides = bool(probe.on_ddl(shard, sql, position_of(r)))
            except ShardMergeError:
                decides = True
            # A statement that creates, renames or drops tables changes which rows are
            # whose: rows under the new names must come after it.
            out.append(decides or len(self.touched(r)) > 1 or _table_level(r))
        return out

    def touched(self, r: Any) -> list[ShardId]:
        """Every table a control event changes: its own, and each table a multi-table
        statement names (both names of each RENAME pair, every table of a DROP)."""
        own = ShardId(r["source"], r["db"], r["tbl"])
        if r["op"] != "ddl" or not r["ddl"]:
            return [own]
        try:
            changes = parse_ddl(r["ddl"])
        except DDLError:
            return [own]
        out = [own]
        for change in changes:
            names = []
            if isinstance(change, RenameTable):
                names = [change.old, change.new]
            elif isinstance(change, DropTable | AlterTable | TruncateTable | CreateTable):
                names = [change.table]
            elif isinstance(change, DropDatabase):
                out += [s for s in self.c.where if s.source == own.source and s.db == change.name]
            out += [ShardId(own.source, n.db or own.db, n.table) for n in names]
        return list(dict.fromkeys(out))

    # --- step 6: rows -------------------------------------------------------------------------

    def write_rows(self, rows: DataFrame, shards: list[Any]) -> None:
        routes: dict[ShardId, RowRoute] = {}
        since: dict[ShardId, list[Any] | None] = {}
        for r in shards:
            shard = ShardId(r["source"], r["db"], r["tbl"])
            route = self.c.route_row(shard)
            routes[shard] = route
            st = self.c.shard_state(shard)
            since[shard] = None
            if st is not None and st.held:
                since[shard] = st.pending[0].position
            elif st is not None and st.awaiting is not None:
                since[shard] = st.awaiting
        table = [
            (
                s.source,
                s.db,
                s.table,
                r.action,
                str(r.target) if r.target else None,
                r.version,
                r.project,
                json.dumps(since[s]) if since[s] else None,
                r.reason,
            )
            for s, r in routes.items()
        ]
        rdf = self.spark.createDataFrame(
            table,
            "source string, db string, tbl string, _action_route string, _target string, "
            "_version int, _project boolean, _since string, _reason string",
        )
        joined = rows.join(F.broadcast(rdf), ["source", "db", "tbl"])
        held_cases = [
            f"(source = {string(s.source)} AND db = {string(s.db)} AND tbl = {string(s.table)} "
            f"AND _okey < {position_sql(pos)})"
            for s, pos in since.items()
            if pos is not None
        ]
        late = " OR ".join(held_cases) if held_cases else "false"
        # Rows of a held shard from before its hold position arrived late: they are free.
        free = joined.filter(f"_action_route = 'write' OR (_action_route = 'hold' AND ({late}))")
        stash = joined.filter(f"_action_route = 'hold' AND NOT ({late})")
        for target in sorted({r.target for r in routes.values() if r.target is not None}):
            if any(r.target == target and r.action in ("write", "hold") for r in routes.values()):
                self.write_target(target, free.filter(F.col("_target") == str(target)))
        if any(r.action == "hold" for r in routes.values()):
            self.append(
                stash.select(
                    *STASH_COLUMNS,
                    F.col("_target").alias("target"),
                    F.col("_version").alias("version"),
                    F.lit(self.batch).alias("batch"),
                ),
                self.p.stash_path,
            )
        counts = {(r["source"], r["db"], r["tbl"]): r["count"] for r in shards}
        for action, name in (("drop", "dropped"), ("write", "written"), ("hold", "held")):
            n = sum(
                counts[(s.source, s.db, s.table)] for s, r in routes.items() if r.action == action
            )
            setattr(self.stats, name, getattr(self.stats, name) + n)
        if any(r.action == "unknown" for r in routes.values()):
            # Rows of a routed table whose CREATE TABLE has not arrived (it is on another
            # topic): its first row starts a hold; this epoch's rows go to the stash now.
            unknown = joined.filter("_action_route = 'unknown'")
            firsts = unknown.groupBy("source", "db", "tbl").agg(F.min("_okey").alias("first"))
            for r in firsts.collect():
                f = r["first"]
                shard = ShardId(r["source"], r["db"], r["tbl"])
                self.execute(self.c.await_ddl(shard, okey_position(f), ""))
            versions = {
                s: self.c.route_row(s).version for s, r in routes.items() if r.action == "unknown"
            }
            version = (
                "CASE "
                + " ".join(
                    f"WHEN source = {string(s.source)} AND db = {string(s.db)} AND "
                    f"tbl = {string(s.table)} THEN {v}"
                    for s, v in versions.items()
                )
                + " END"
            )
            self.append(
                unknown.select(
                    *STASH_COLUMNS,
                    F.expr(version).alias("version"),
                    F.lit(self.batch).alias("batch"),
                ).join(F.broadcast(self.targets_of(versions)), ["source", "db", "tbl"]),
                self.p.stash_path,
            )

    def write_target(
        self, target: TargetId, rows: DataFrame, *, project_all: bool = False, replay: bool = False
    ) -> list[tuple[ShardId, list[Any]]]:
        """MERGE rows into a target. A row naming a column the target lacks is ahead of a
        DDL that has not arrived: its shard waits for it from that row on. Fresh rows from
        there go to the stash; replayed ones stay in it. Returns where shards wait."""
        t = self.c.targets[target]
        schema = self.schemas.get(target)
        assert schema is not None
        behind = [
            (st.shard.source, st.shard.db, st.shard.table, position_sql(st.last_alter))
            for st in t.shards.values()
            if st.last_alter is not None
        ]
        cached = project_actions(
            rows, schema, t.extract, project_all, self.late_renames(target), behind
        ).persist()
        try:
            waits, unfit = self.await_ddls(cached)
            if unfit:
                self.dead_letter_events(
                    cached.filter("_unfit IS NOT NULL")
                    .withColumn("_reason", F.col("_unfit"))
                    .dropDuplicates(["topic", "partition", "offset"]),
                    None,
                )
            projected = cached.filter("_unfit IS NULL")
            ahead = waiting_sql(waits, "_okey")
            good = projected.filter(f"NOT ({ahead})") if waits else projected
            if not replay:
                self.append(
                    projected.filter(ahead if waits else "false")
                    .dropDuplicates(["topic", "partition", "offset"])
                    .select(
                        *STASH_COLUMNS,
                        F.lit(str(target)).alias("target"),
                        F.col("_version").alias("version"),
                        F.lit(self.batch).alias("batch"),
                    ),
                    self.p.stash_path,
                )
            self.sink.merge(
                self.p.settings.table_path(target),
                merge_source(good, schema),
                list(schema.primary_key) or list(schema.column_names()),
                list(schema.column_names()),
                self.next_version(),
            )
        finally:
            cached.unpersist()
        return waits

    def late_renames(self, target: TargetId) -> list[Renamed]:
        """The column renames a late row of each shard must go through: those whose old
        name the target no longer has (the rename ran downstream)."""
        schema = self.schemas.get(target)
        if schema is None:
            return []
        out: list[Renamed] = []
        for st in self.c.targets[target].shards.values():
            for position, pairs in st.renamed:
                if any(not schema.has_column(old) for old, _ in pairs):
                    s = st.shard
                    out.append((s.source, s.db, s.table, position_sql(position), pairs))
        return out

    def targets_of(self, shards: dict[ShardId, int]) -> DataFrame:
        rows = [(s.source, s.db, s.table, str(self.p.router.target(s))) for s in shards]
        return self.spark.createDataFrame(
            rows, "source string, db string, tbl string, target string"
        )

    def await_ddls(self, projected: DataFrame) -> tuple[list[tuple[ShardId, list[Any]]], bool]:
        """Each shard with rows ahead of a DDL (``_reason``) waits from its first such row.
        One pass also tells whether any value does not fit its column (``_unfit``)."""
        ahead = F.col("_reason").isNotNull() & F.col("_unfit").isNull()
        firsts = (
            projected.filter("_reason IS NOT NULL OR _unfit IS NOT NULL")
            .groupBy("source", "db", "tbl")
            .agg(
                F.min(F.when(ahead, F.col("_okey"))).alias("first"),
                F.first(F.when(ahead, F.col("_reason")), ignorenulls=True).alias("why"),
                F.count("_unfit").alias("unfit"),
            )
            .collect()
        )
        waits = []
        for r in firsts:
            if r["first"] is None:
                continue
            shard = ShardId(r["source"], r["db"], r["tbl"])
            f = r["first"]
            pos = okey_position(f)
            self.execute(self.c.await_ddl(shard, pos, f"{r['why']}: waiting for its DDL"))
            waits.append((shard, pos))
        return waits, any(r["unfit"] for r in firsts)

    # --- step 6: control events and decisions -------------------------------------------------

    def control(self, r: Any) -> None:
        shard = ShardId(r["source"], r["db"], r["tbl"])
        sql = r["ddl"] if r["op"] == "ddl" else f"TRUNCATE TABLE {quote(r['tbl'])}"
        try:
            decisions = self.c.on_ddl(shard, sql, position_of(r))
        except UnknownShardError as e:
            same = (
                (F.col("topic") == r["topic"])
                & (F.col("partition") == r["partition"])
                & (F.col("offset") == r["offset"])
            )
            self.dead_letter_events(self.events.filter(same), str(e))
            return
        self.execute(decisions)

    def execute(self, decisions: list[Decision]) -> None:
        i = 0
        while i < len(decisions):
            d = decisions[i]
            if isinstance(d, Release):
                # Consecutive replays of different shards of one target: one read, one MERGE.
                group = [d]
                while (
                    i + 1 < len(decisions)
                    and isinstance(decisions[i + 1], Release)
                    and decisions[i + 1].target == d.target
                    and decisions[i + 1].shard not in {g.shard for g in group}
                ):
                    i += 1
                    group.append(decisions[i])  # type: ignore[arg-type]
                self.release(group)
                i += 1
                continue
            i += 1
            match d:
                case CreateTarget():
                    self.sink.create(self.p.settings.table_path(d.target), d.schema)
                    self.schemas[d.target] = d.schema
                case ApplyDDL():
                    try:
                        self.sink.alter(self.p.settings.table_path(d.target), d, self.next_version)
                    except SinkError as e:
                        # The change waits, with what follows it for this target; the job
                        # goes on and the target's rows wait in the stash (stage conflict).
                        waiting = [x for x in decisions[i - 1 :] if x.target == d.target]
                        decisions = decisions[:i] + [
                            x for x in decisions[i:] if x.target != d.target
                        ]
                        self.c.refuse(d.target, waiting, refusal(d, e))
                        self.stats.refused_ddl.append(d.statement)
                        log.error("target %s: %s", d.target, refusal(d, e))
                        continue
                    self.schemas[d.target] = d.schema
                    self.stats.downstream_ddl.append(d.statement)
                case Truncate():
                    where = " AND ".join(f"{ident(k)} = {string(v)}" for k, v in d.match) or "true"
                    self.sink.delete(
                        self.p.settings.table_path(d.target), where, self.next_version()
                    )
                case Hold():
                    pass  # rows from its position on are stashed by write_rows

    def release(self, group: list[Release]) -> None:
        """Replay held rows of one target's shards (before ``until`` each), then remove
        them from the stash, except rows that turn out to wait for a further DDL."""
        target = group[0].target
        preds, projects = [], []
        for d in group:
            shard = (
                f"source = {string(d.shard.source)} AND db = {string(d.shard.db)} "
                f"AND tbl = {string(d.shard.table)} AND version = {d.version}"
            )
            until = "" if d.until is None else f" AND {ORDER_KEY} < {position_sql(d.until)}"
            preds.append(f"({shard}{until})")
            projects.append(f"WHEN {shard} THEN {str(d.project).lower()}")
        pred = f"target = {string(str(target))} AND ({' OR '.join(preds)})"
        if not self.sink.exists(self.p.stash_path):
            self.next_version()
            self.next_version()
            return
        held = self.spark.read.format("delta").load(self.p.stash_path).filter(pred)
        held = held.withColumn("_okey", F.expr(ORDER_KEY)).withColumn(
            "_project", F.expr(f"CASE {' '.join(projects)} ELSE false END")
        )
        held = held.persist()
        try:
            self.stats.replayed += held.count()
            waits = self.write_target(target, held, replay=True)
            crash_point("after_release")
            # Rows that turned out to be ahead of a further DDL stay in the stash.
            keep = waiting_sql(waits, ORDER_KEY)
            self.sink.delete(self.p.stash_path, f"({pred}) AND NOT ({keep})", self.next_version())
        finally:
            held.unpersist()

    # --- writes --------------------------------------------------------------------------------

    def next_version(self) -> int:
        self.slot += 1
        return self.batch * SLOTS_PER_BATCH + self.slot

    def append(self, df: DataFrame, path: str) -> None:
        """Append with this write slot's transaction version; an empty frame writes nothing
        (the slot is used all the same, so slot numbers do not depend on data)."""
        version = self.next_version()
        if df.isEmpty():
            return
        (
            df.write.format("delta")
            .mode("append")
            .option("txnAppId", self.p.app_id)
            .option("txnVersion", version)
            .option("mergeSchema", "true")
            .save(path)
        )

    def dead_letter_events(self, bad: DataFrame, reason: str | None) -> None:
        """Rows that cannot be written go to the dead-letter table with the reason."""
        reason_col = F.lit(reason) if reason is not None else F.col("_reason")
        out = bad.select(
            F.col("topic"),
            F.col("partition"),
            F.col("offset"),
            F.lit(None).cast("binary").alias("key"),
            F.to_json(F.struct(*[F.col(c) for c in STASH_COLUMNS])).cast("binary").alias("value"),
            F.col("format"),
            reason_col.alias("reason"),
            F.current_timestamp().alias("seen_at"),
        )
        self.append(out, self.p.settings.dead_letters())


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
