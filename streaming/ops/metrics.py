"""Prometheus metrics of the running job (the exposition format of ``prometheus_client``).

One collector builds every family at scrape time from the observer, the persisted
coordinator state and Spark's last query progress: a scrape starts no Spark job and
takes no lock a batch waits on for longer than a copy. Names follow Prometheus' rules:
the ``shardmerge_`` prefix, ``_total`` for counters, units in names, and labels that stay
bounded (target, and small fixed sets: stage, step, kind, action, reason class; shard,
topic and partition only with ``ops.shard_metrics``). docs/operations.md lists every
metric.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from streaming.ops.observer import STEP_BUCKETS
from streaming.ops.views import Views, lag_by_partition

__all__ = ["JobCollector", "registry_for"]

STAGES = ("none", "waiting", "conflict")
MOVE_STATES = ("declared", "copying", "frozen", "switching", "switched", "aborted")
ROW_ACTIONS = {"written": "written", "held": "held", "replayed": "replayed", "dropped": "dropped"}


class JobCollector(Collector):
    """Every family at scrape time. Series per shard or per topic-partition (held and
    waiting shards, Kafka lag) only with ``per_shard``; otherwise per target (rows summed,
    the oldest time), so a scrape of 4,096 shards is as large as one of 16."""

    def __init__(self, views: Views, per_shard: bool = False) -> None:
        self.views = views
        self.per_shard = per_shard

    def collect(self) -> Iterator[Metric]:
        snap = self.views.observer.snapshot()
        yield from self._locks()
        yield from self._moves()
        yield from self._group()
        yield from self._counters(snap)
        yield from self._steps(snap)
        yield from self._progress()
        yield from self._tables()
        yield from _restarts()

    # --- locks (from the persisted coordinator state) -------------------------------------

    def _locks(self) -> Iterator[Metric]:
        locks = self.views.locks()
        stage = GaugeMetricFamily(
            "shardmerge_lock_stage",
            "1 for the stage each target's lock is in (none, waiting, conflict), else 0",
            labels=["target", "mode", "stage"],
        )
        shards = GaugeMetricFamily(
            "shardmerge_target_shards", "shards routed to the target", labels=["target"]
        )
        held = GaugeMetricFamily(
            "shardmerge_held_shards", "shards whose rows are held", labels=["target"]
        )
        pending = GaugeMetricFamily(
            "shardmerge_pending_ddls", "DDL statements waiting in the lock", labels=["target"]
        )
        synced = GaugeMetricFamily(
            "shardmerge_rollout_shards",
            "shards that ran the lock's DDL (pessimistic) or have the joined schema",
            labels=["target"],
        )
        shard = ["shard"] if self.per_shard else []
        held_rows = GaugeMetricFamily(
            "shardmerge_held_rows",
            "rows of held shards waiting in the stash (counted after a batch); per target, "
            "per shard with ops.shard_metrics",
            labels=["target", *shard],
        )
        held_since = GaugeMetricFamily(
            "shardmerge_held_since_timestamp_seconds",
            "commit time of the event a held shard waits from; per target the oldest, per "
            "shard with ops.shard_metrics",
            labels=["target", *shard],
        )
        for t in locks["targets"]:
            name = t["target"]
            for s in STAGES:
                stage.add_metric([name, t["mode"], s], 1.0 if t["stage"] == s else 0.0)
            shards.add_metric([name], t["shards"])
            held.add_metric([name], len(t["held"]))
            pending.add_metric([name], sum(len(h["pending_ddl"]) for h in t["held"]))
            synced.add_metric([name], t["rollout"]["done"])
            if self.per_shard:
                for h in t["held"]:
                    held_rows.add_metric([name, h["shard"]], h["held_rows"])
                    if h["since"] is not None:
                        held_since.add_metric([name, h["shard"]], h["since"])
            elif t["held"]:
                held_rows.add_metric([name], sum(h["held_rows"] for h in t["held"]))
                since = [h["since"] for h in t["held"] if h["since"] is not None]
                if since:
                    held_since.add_metric([name], min(since))
        yield from (stage, shards, held, pending, synced, held_rows, held_since)
        waiting_shards = GaugeMetricFamily(
            "shardmerge_waiting_shards",
            "shards whose rows wait without a DDL of theirs pending, by why (before_create: "
            "before the table's CREATE TABLE; ahead_of_ddl: ahead of a DDL not received; "
            "stashed: in the stash, no lock holding them)",
            labels=["target", "kind"],
        )
        waiting_rows = GaugeMetricFamily(
            "shardmerge_waiting_rows",
            "rows of such shards in the stash (counted after a batch); per target and kind, "
            "per shard with ops.shard_metrics",
            labels=["target", *shard, "kind"],
        )
        waiting_since = GaugeMetricFamily(
            "shardmerge_waiting_since_timestamp_seconds",
            "commit time of the first row such a shard waits from; per target and kind the "
            "oldest, per shard with ops.shard_metrics",
            labels=["target", *shard, "kind"],
        )
        per_kind: dict[tuple[str, str], list[Any]] = {}
        for w in locks["waiting"]:
            key = (w["target"], w["kind"])
            per_kind.setdefault(key, []).append(w)
            if self.per_shard:
                waiting_rows.add_metric([w["target"], w["shard"], w["kind"]], w["rows"])
                if w["since"] is not None:
                    waiting_since.add_metric([w["target"], w["shard"], w["kind"]], w["since"])
        for (target, kind), shards_waiting in sorted(per_kind.items()):
            waiting_shards.add_metric([target, kind], len(shards_waiting))
            if not self.per_shard:
                waiting_rows.add_metric([target, kind], sum(w["rows"] for w in shards_waiting))
                since = [w["since"] for w in shards_waiting if w["since"] is not None]
                if since:
                    waiting_since.add_metric([target, kind], min(since))
        yield from (waiting_shards, waiting_rows, waiting_since)
        policy = CounterMetricFamily(
            "shardmerge_ddl_policy",
            "shard DDLs a schema-change policy other than forward decided (ignore, warn, fail, "
            "keep), per target, DDL kind and policy, since the checkpoint began",
            labels=["target", "kind", "policy"],
        )
        for t in locks["targets"]:
            for c in t["policy_counts"]:
                policy.add_metric([t["target"], c["kind"], c["policy"]], c["count"])
        yield policy
        waiting = GaugeMetricFamily(
            "shardmerge_commands_waiting", "operator commands queued for the next micro-batch"
        )
        waiting.add_metric([], len(locks["commands_waiting"]))
        yield waiting
        state = self.views.state()
        last = GaugeMetricFamily("shardmerge_last_batch_id", "id of the last completed batch")
        if state is not None:
            last.add_metric([], state["batch"])
        yield last

    # --- moves (from the persisted state) ------------------------------------------------

    def _moves(self) -> Iterator[Metric]:
        moves = self.views.moves()["moves"]
        state = GaugeMetricFamily(
            "shardmerge_move_state",
            "1 for the state each declared move is in (declared, copying, frozen, switching, "
            "switched, aborted), else 0",
            labels=["move", "state"],
        )
        waits = GaugeMetricFamily(
            "shardmerge_move_switch_waits",
            "unmet preconditions of a move's switch (0 unless it is switching and waits)",
            labels=["move"],
        )
        kept = GaugeMetricFamily(
            "shardmerge_move_statements_kept",
            "statements a move keeps for its switch: to's after its switch marker (queued) "
            "and from's TRUNCATE/DROP/RENAME after its freeze (deferred)",
            labels=["move", "kind"],
        )
        for m in moves:
            for s in MOVE_STATES:
                state.add_metric([m["id"], s], 1.0 if m["state"] == s else 0.0)
            waits.add_metric([m["id"]], len(m["waits"]))
            kept.add_metric([m["id"], "queued"], len(m["queued"]))
            kept.add_metric([m["id"], "deferred"], len(m["deferred"]))
        yield from (state, waits, kept)

    # --- the group (streaming.group.member; empty for a job that writes alone) ------------------

    def _group(self) -> Iterator[Metric]:
        from streaming.storage.delta_sink import CONFLICTS

        g = self.views.group()
        up = GaugeMetricFamily(
            "shardmerge_group_member_up",
            "1 while a member of this job's group heartbeats within its lease (as this job "
            "sees it), else 0",
            labels=["member"],
        )
        owner = GaugeMetricFamily(
            "shardmerge_group_owner",
            "1 for the member holding the owner's term (it runs the downstream DDL)",
            labels=["member"],
        )
        version = GaugeMetricFamily(
            "shardmerge_group_target_version",
            "per target, the version the group decided and the one its table has (applied); "
            "they differ while a downstream change waits for the members' acknowledgements",
            labels=["target", "kind"],
        )
        records = GaugeMetricFamily(
            "shardmerge_group_log_records",
            "the number of the group log's last record (coordinator/group.py)",
        )
        snapshot = GaugeMetricFamily(
            "shardmerge_group_log_snapshot",
            "the group log record the newest snapshot holds the log up to (compaction)",
        )
        gate = CounterMetricFamily(
            "shardmerge_group_gate_wait_seconds",
            "seconds this job's batches waited for their targets to reach the decided version",
        )
        fenced = CounterMetricFamily(
            "shardmerge_group_fenced",
            "batches this job stopped because its own lease had run out (run again after)",
        )
        conflicts = CounterMetricFamily(
            "shardmerge_delta_conflict_retries",
            "writes to a shared target run again after another job's commit touched the "
            "same files (Delta's data conflicts)",
        )
        conflicts.add_metric([], CONFLICTS[0])
        if g.get("group") is not None:
            term = g["owner"] or {}
            for m in g["members"]:
                up.add_metric([m["member"]], 1.0 if m["live"] else 0.0)
                owner.add_metric([m["member"]], 1.0 if term.get("member") == m["member"] else 0.0)
            for t in g["targets"]:
                version.add_metric([t["target"], "decided"], t["decided"])
                version.add_metric([t["target"], "applied"], t["applied"])
            records.add_metric([], g["log"])
            snapshot.add_metric([], g.get("snapshot", 0))
            gate.add_metric([], g["this"]["gate_seconds"])
            fenced.add_metric([], g["this"]["fenced"])
        yield from (up, owner, version, records, snapshot, gate, fenced, conflicts)

    # --- counts of this run (observer) ---------------------------------------------------

    def _counters(self, snap: dict[str, Any]) -> Iterator[Metric]:
        totals = snap["totals"]
        rows = CounterMetricFamily(
            "shardmerge_rows",
            "row events by what happened to them: written (MERGEd: inserts, updates, "
            "deletes), held (stashed), replayed (from the stash), dropped (shadow/trash)",
            labels=["action"],
        )
        for key, action in ROW_ACTIONS.items():
            rows.add_metric([action], totals.get(key, 0))
        yield rows
        target_rows = CounterMetricFamily(
            "shardmerge_target_rows",
            "rows of the target tables as Delta reports them changed: inserted, updated, "
            "deleted (by the MERGE), truncated (by a TRUNCATE's DELETE)",
            labels=["target", "action"],
        )
        for (target, action), n in sorted(snap["target_rows"].items()):
            target_rows.add_metric([target, action], n)
        yield target_rows
        events = CounterMetricFamily("shardmerge_events", "decoded events, rows and DDL")
        events.add_metric([], totals.get("events", 0))
        yield events
        control = CounterMetricFamily(
            "shardmerge_control_events", "DDL and TRUNCATE events read from upstream"
        )
        control.add_metric([], totals.get("ddl", 0))
        yield control
        applied = CounterMetricFamily(
            "shardmerge_ddl_applied", "schema changes run on the target tables", labels=["kind"]
        )
        for kind, n in sorted(snap["ddl_applied"].items()):
            applied.add_metric([kind], n)
        yield applied
        refused = CounterMetricFamily(
            "shardmerge_ddl_refused", "schema changes the target tables could not take"
        )
        refused.add_metric([], totals.get("refused_ddl", 0))
        yield refused
        resent = CounterMetricFamily(
            "shardmerge_ddl_resent",
            "DDL and TRUNCATE events taken already, sent again by the upstream: not run twice",
        )
        resent.add_metric([], totals.get("resent_ddl", 0))
        yield resent
        never = CounterMetricFamily(
            "shardmerge_ddl_never_came",
            "times a shard stopped waiting for a DDL its schema-change topics, read past the "
            "wait plus ddl_grace_ms, do not hold (its rows needing it became dead letters)",
        )
        never.add_metric([], totals.get("ddl_never_came", 0))
        yield never
        fast = CounterMetricFamily(
            "shardmerge_fast_path_writes",
            "target writes that took the fast path: MERGEd straight from the batch's parse, "
            "with no summary before (streaming.batch.writer)",
        )
        fast.add_metric([], totals.get("fast_path", 0))
        yield fast
        conflicts = CounterMetricFamily(
            "shardmerge_conflicts", "times a target's lock entered conflict", labels=["target"]
        )
        for target, n in sorted(snap["conflicts"].items()):
            conflicts.add_metric([target], n)
        yield conflicts
        errors = CounterMetricFamily(
            "shardmerge_command_errors", "operator commands that could not be applied"
        )
        errors.add_metric([], totals.get("command_errors", 0))
        yield errors
        batches = CounterMetricFamily("shardmerge_batches", "micro-batches completed")
        batches.add_metric([], _count(snap))
        yield batches
        when = GaugeMetricFamily(
            "shardmerge_last_batch_timestamp_seconds", "when the last batch completed"
        )
        if snap["history"]:
            when.add_metric([], snap["history"][-1].ended_at)
        yield when

    def _steps(self, snap: dict[str, Any]) -> Iterator[Metric]:
        family = HistogramMetricFamily(
            "shardmerge_batch_step_duration_seconds",
            "time of each protocol step of a micro-batch (restore, commands, decode, decide, "
            "write, persist)",
            labels=["step"],
        )
        for step, h in sorted(snap["steps"].items()):
            cumulative = list(zip([str(b) for b in STEP_BUCKETS], h.buckets, strict=True))
            family.add_metric([step], [*cumulative, ("+Inf", h.count)], h.total)
        yield family

    # --- Spark's query progress ----------------------------------------------------------

    def _progress(self) -> Iterator[Metric]:
        recent = self.views.recent_progress()
        last = recent[-1] if recent else None
        if self.per_shard:
            lag = GaugeMetricFamily(
                "shardmerge_kafka_lag_records",
                "records of a topic-partition behind the latest offset at the last trigger "
                "(ops.shard_metrics)",
                labels=["topic", "partition"],
            )
            for (topic, part), n in sorted(lag_by_partition(last).items()):
                lag.add_metric([topic, str(part)], n)
            yield lag
        per_target = GaugeMetricFamily(
            "shardmerge_target_lag_records",
            "records behind the latest offset at the last trigger, per target (topics that "
            "carry several shards: target '(shared topics)')",
            labels=["target"],
        )
        for target, n in self.views.lag_targets(last).items():
            per_target.add_metric([target], n)
        yield per_target
        rates = (
            ("shardmerge_input_rows_per_second", "inputRowsPerSecond", "Kafka records/s read"),
            (
                "shardmerge_processed_rows_per_second",
                "processedRowsPerSecond",
                "Kafka records/s processed",
            ),
        )
        for name, key, text in rates:
            g = GaugeMetricFamily(name, f"{text}, last trigger (Spark's query progress)")
            if last is not None and last.get(key) is not None:
                g.add_metric([], float(last[key]))
            yield g
        trigger = GaugeMetricFamily(
            "shardmerge_trigger_duration_seconds",
            "Spark's durations of the last trigger by phase (addBatch is the micro-batch)",
            labels=["phase"],
        )
        for phase, ms in sorted(((last or {}).get("durationMs") or {}).items()):
            trigger.add_metric([phase], ms / 1000)
        yield trigger
        reported = GaugeMetricFamily(
            "shardmerge_last_trigger_timestamp_seconds",
            "when Spark last reported a finished trigger of the query (every trigger with "
            "data, and every 10 s when idle): far behind now, the query is stuck",
        )
        if last is not None and last.get("timestamp"):
            reported.add_metric([], progress_time(str(last["timestamp"])))
        yield reported

    # --- tables counted after a batch ----------------------------------------------------

    def _tables(self) -> Iterator[Metric]:
        dead = self.views.dead_letters()
        family = CounterMetricFamily(
            "shardmerge_dead_letters",
            "records in the dead-letter table, by reason class",
            labels=["reason"],
        )
        for reason, n in sorted(dead["by_reason"].items()):
            family.add_metric([reason], n)
        yield family
        errors = CounterMetricFamily(
            "shardmerge_ops_refresh_errors", "failed counts of held rows and dead letters"
        )
        counts = self.views.counts
        errors.add_metric([], 0 if counts is None else counts.errors)
        yield errors


def progress_time(timestamp: str) -> float:
    """Spark's progress timestamp (``2026-11-28T07:51:22.312Z``) as unix seconds."""
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def _restarts() -> Iterator[Metric]:
    """The query's restarts after transient failures (``streaming/runtime/supervise.py``)."""
    from streaming.runtime.supervise import RESTARTS

    snap = RESTARTS.snapshot()
    total = CounterMetricFamily(
        "shardmerge_query_restarts",
        "restarts of the streaming query after a transient failure, by kind (kafka, query)",
        labels=["kind"],
    )
    for kind, n in sorted(snap["by_kind"].items()):
        total.add_metric([kind], n)
    yield total
    row = GaugeMetricFamily(
        "shardmerge_query_failures_in_a_row",
        "failures of the query since it last ran fine; the job stops at restart.attempts",
    )
    row.add_metric([], snap["in_a_row"])
    yield row


def _count(snap: dict[str, Any]) -> int:
    # The history is bounded; the step histograms count every batch of the run.
    h = snap["steps"].get("persist")
    return h.count if h is not None else len(snap["history"])


def registry_for(views: Views, per_shard: bool = False) -> CollectorRegistry:
    """The job's metrics; ``per_shard`` (``ops.shard_metrics``): the per-shard and
    per-topic-partition series too."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobCollector(views, per_shard))
    return registry
