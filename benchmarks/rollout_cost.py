"""What a DDL rollout costs a micro-batch: every shard runs an ADD COLUMN and a column
rename inside one batch, against a batch of as many rows without any DDL.

    .venv/bin/python benchmarks/rollout_cost.py [--shards 16 256 1024] [--rows 200000]
        [--deletion-vectors] [--topics per-shard|per-table] [--partitions 16]

For each shard count, a sharded workload (``--rows`` row changes in all) goes to a local
broker in three parts, and the streaming job (optimistic, AvailableNow, one batch per part)
reads each part once it is there:

0. every shard's CREATE TABLE and the first rows (warm-up, not compared);
1. *no DDL*: ``k`` row changes;
2. *rollout*: every shard's ADD COLUMN and CHANGE (``2 x shards`` control events) among
   ``k`` row changes.

Per batch: wall time, the Kafka read and decode (``Stats.decode_seconds``: restore, read,
decode, the control events and per-shard facts), the driver's deciding time (coordinator,
DDL statements) and the driver's analysis/planning time of the MERGE source
(``Stats.plan_seconds``); and the no-DDL batch against the same rows at the smallest shard
count of the run. ``--spark-defaults`` reads Kafka with Spark's and Kafka's defaults (a pool
of 64 consumers, ``fetch.max.wait.ms`` 500), as the job did before it set them: the
baseline of the consumer-pool change. Prints a Markdown table; docs/benchmarks.md keeps
the latest run.

Consumers. Spark's Kafka source pools one consumer per (consumer group, topic-partition),
and every query start takes a new group unless ``kafka.group.id`` is set. A running job is
one query: from its second batch on, it finds a consumer pooled for every topic-partition it
read before. The three runs here are three queries, so by default they share one consumer
group (``kafka.group.id``, one per shard count) and the measured batches see pooled
consumers, as a running job's do. ``--new-consumers`` gives each run a group of its own:
every batch then pays what a job's first batch after a start pays (a consumer made,
connected and seeked per topic-partition).

Plain streaming (``--plain``, on by default): beside the job, the same topics are read by a
plain Structured Streaming query (its own checkpoint and consumer group, the same two
Kafka sources as the job) whose foreachBatch only decodes, keeps the last action per key
on the table's schema and MERGEs (baseline (c) of ``pipeline_throughput.py``). It reads
the warm-up and the no-DDL part as the job does, one batch each, and its no-DDL batch is
the plain side of the job's no-DDL one: what Spark's Kafka reader and a MERGE cost without
any coordination. Both sides time the batch inside foreachBatch (where the Kafka read
happens); the query's whole run (start, offsets, commit) is printed too.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pipeline_throughput import plain_merge_batch, row_events

from streaming.config import (
    KafkaSettings,
    RouteSettings,
    Settings,
    SinkSettings,
    SourceSettings,
    TargetSettings,
)

ADD, CHANGE = 0.70, 0.72
ROLLOUT = {
    ADD: "ALTER TABLE {table} ADD COLUMN note VARCHAR(64)",
    CHANGE: "ALTER TABLE {table} CHANGE note memo VARCHAR(64)",
}


def parts(events: list[Any]) -> tuple[list[Any], list[Any], list[Any]]:
    """(warm-up, no DDL, rollout): the rollout from the first ALTER to the last; the
    no-DDL part the same number of row changes right before it."""
    alters = [i for i, e in enumerate(events) if e.kind == "ddl" and "ALTER" in e.statement]
    first, last = alters[0], alters[-1] + 1
    k = sum(1 for e in events[first:last] if e.kind == "row")
    start = first - k
    assert all(e.kind == "row" for e in events[start:first]), "warm-up too short"
    return events[:start], events[start:first], events[first:last]


def run_once(spark: Any, s: Settings, profile: str | None = None) -> Any:
    from streaming.job import build_query

    with _profiled(profile):
        query, processor = build_query(spark, s, available_now=True)
        query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return processor.last_stats


def settings(bootstrap: str, source: str, options: dict[str, str], home: Path) -> Settings:
    """One optimistic target over the source's shard tables, its lake and checkpoint in
    ``home``."""
    return Settings(
        kafka=KafkaSettings(
            bootstrap=bootstrap, max_offsets_per_trigger=10_000_000, options=options
        ),
        sources=[
            SourceSettings(format="debezium", pattern=source + r"(\..*)?", schema_pattern=source)
        ],
        routes=[RouteSettings(target="shop.orders", table="orders_*")],
        targets={"shop.orders": TargetSettings(mode="optimistic")},
        sink=SinkSettings(path=str(home / "lake")),
        checkpoint=str(home / "checkpoint"),
    )


@contextlib.contextmanager
def _profiled(out: str | None) -> Iterator[None]:
    """Profile the job's batches while inside (cProfile, on the thread Spark calls
    foreachBatch on) into ``out``, sorted by cumulative time; nothing when ``out`` is None."""
    if out is None:
        yield
        return
    import cProfile
    import pstats

    from streaming.batch.protocol import BatchProcessor

    call = BatchProcessor.__call__

    def profiled(self: Any, df: Any, batch_id: int) -> None:
        prof = cProfile.Profile()
        prof.enable()
        try:
            call(self, df, batch_id)
        finally:
            prof.disable()
            with open(out, "w") as f:
                pstats.Stats(prof, stream=f).sort_stats("cumulative").print_stats(80)

    BatchProcessor.__call__ = profiled  # type: ignore[method-assign]
    try:
        yield
    finally:
        BatchProcessor.__call__ = call  # type: ignore[method-assign]


class PlainStream:
    """Baseline (c) as a query run once per part: decode, last action per key on the
    table's schema, one MERGE; batch seconds timed inside foreachBatch."""

    def __init__(self, spark: Any, s: Settings, table_sql: str) -> None:
        from schemas import parse_create_table
        from streaming.storage.delta_sink import DeltaSink

        self.spark, self.s = spark, s
        self.schema = parse_create_table(table_sql)
        self.path = s.sink.path + "/plain_stream"
        DeltaSink(spark, "shardmerge-bench-plain-stream", lambda t: self.path).create_at(
            self.path, self.schema
        )
        self.batch_seconds: list[float] = []

    def _batch(self, df: Any, batch_id: int) -> None:
        started = time.monotonic()
        plain_merge_batch(row_events(df), self.schema, self.path, batch_id + 1)
        self.batch_seconds.append(time.monotonic() - started)

    def run_once(self) -> tuple[float, float]:
        """(seconds of the run's batches, seconds of the whole query run)."""
        from streaming.job import read_kafka

        before = len(self.batch_seconds)
        started = time.monotonic()
        query = (
            read_kafka(self.spark, self.s).writeStream.foreachBatch(self._batch)
            .option("checkpointLocation", self.s.checkpoint)
            .trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        return sum(self.batch_seconds[before:]), time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, nargs="+", default=[16, 256, 1024])
    parser.add_argument("--rows", type=int, default=200_000, help="row changes in all")
    parser.add_argument("--deletion-vectors", action="store_true")
    parser.add_argument(
        "--spark-defaults",
        action="store_true",
        help="Spark's consumer pool (64) and Kafka's fetch.max.wait.ms (500): the old job",
    )
    parser.add_argument(
        "--topics",
        choices=("per-shard", "per-table"),
        default="per-shard",
        help="per-shard: a topic per shard table (Debezium's default); per-table: one topic "
        "for all shards, --partitions partitions, a shard's rows in one, as Debezium's "
        "ByLogicalTableRouter and PartitionRouting write them (docs/cluster.md)",
    )
    parser.add_argument(
        "--partitions", type=int, default=16, help="partitions of the per-table topic"
    )
    parser.add_argument(
        "--new-consumers",
        action="store_true",
        help="each run its own consumer group: every batch a job's first (see above)",
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="profile the rollout batch in the driver (cProfile) and write the top 80 "
        "functions by cumulative time to FILE (per shard count: FILE.N)",
    )
    parser.add_argument(
        "--no-plain",
        dest="plain",
        action="store_false",
        help="skip the plain streaming query (baseline (c)) beside the no-DDL batch",
    )
    args = parser.parse_args()
    from devkit import kafka_local
    from devkit.producer import DebeziumProducer, send_workload
    from devkit.workload import BASE_TABLE_SQL, sharded_workload
    from streaming.runtime.spark_session import build_spark

    work = Path(tempfile.mkdtemp(prefix="shardmerge-rollout-"))
    lines: list[str] = []
    compare: list[str] = []
    try:
        with kafka_local.running("rollout", work / "kafka") as broker:
            old = {"spark.kafka.consumer.cache.capacity": "64"} if args.spark_defaults else {}
            options = (
                {"fetch.max.wait.ms": "500", "max.poll.records": "500"}
                if args.spark_defaults
                else {}
            )
            spark = build_spark("shardmerge-rollout", extra_conf=old)
            smallest: float | None = None
            if args.deletion_vectors:
                spark.conf.set(
                    "spark.databricks.delta.properties.defaults.enableDeletionVectors", "true"
                )
            for n in args.shards:
                source = f"roll{n}"
                events = list(sharded_workload(n, args.rows // n, ddl_at=ROLLOUT))
                warm, plain, rollout = parts(events)
                group = {} if args.new_consumers else {"group.id": f"shardmerge-{source}"}
                s = settings(broker.bootstrap, source, {**options, **group}, work / source / "job")
                routed = ("orders", args.partitions) if args.topics == "per-table" else None
                producer = DebeziumProducer(broker.bootstrap, source, routed=routed)
                baseline = None
                if args.plain:
                    plain_group = {"group.id": f"shardmerge-{source}-plain"}
                    ps = settings(
                        broker.bootstrap,
                        source,
                        {**options, **plain_group},
                        work / source / "plain",
                    )
                    baseline = PlainStream(spark, ps, BASE_TABLE_SQL.format(table="orders"))
                stats, walls, plains = [], [], []
                for part in (warm, plain, rollout):
                    send_workload(producer, part)
                    producer.flush()
                    started = time.monotonic()
                    profile = f"{args.profile}.{n}" if args.profile and part is rollout else None
                    stats.append(run_once(spark, s, profile))
                    walls.append(time.monotonic() - started)
                    if baseline is not None and part is not rollout:
                        plains.append(baseline.run_once())
                _, none, roll = stats
                rows = sum(1 for e in plain if e.kind == "row")
                if baseline is not None:
                    batch_s, wall_s = plains[1]
                    compare.append(
                        f"| {n:,} | {rows:,} | {none.seconds:.1f} / {walls[1]:.1f} | "
                        f"{batch_s:.1f} / {wall_s:.1f} | **{none.seconds / batch_s:.2f}x** | "
                        f"{walls[1] / wall_s:.2f}x |"
                    )
                    print(compare[-1], flush=True)
                smallest = smallest or none.seconds
                lines.append(
                    f"| {n:,} | {rows:,} | {none.seconds:.1f} | "
                    f"**{none.seconds / smallest:.2f}x** | {roll.ddl:,} | "
                    f"{roll.seconds:.1f} | **{roll.seconds / none.seconds:.2f}x** | "
                    f"{none.decode_seconds:.2f} / {roll.decode_seconds:.2f} | "
                    f"{none.decide_seconds:.2f} / {roll.decide_seconds:.2f} | "
                    f"{none.plan_seconds:.2f} / {roll.plan_seconds:.2f} | "
                    f"{len(roll.downstream_ddl)} |"
                )
                print(lines[-1], flush=True)
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        "| shards | rows per batch | no DDL: s | no DDL / smallest shard count | control "
        "events | rollout: s | rollout / no DDL | read+decode s (no DDL / rollout) | driver "
        "decide s (no DDL / rollout) | MERGE source plan s (no DDL / rollout) | downstream "
        "DDL |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for line in lines:
        print(line)
    if compare:
        print()
        print(
            "| shards | rows per batch | job no-DDL batch s / query run s | plain streaming "
            "batch s / query run s | job / plain (batch) | job / plain (query run) |"
        )
        print("|---:|---:|---:|---:|---:|---:|")
        for line in compare:
            print(line)


if __name__ == "__main__":
    main()
