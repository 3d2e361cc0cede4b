"""End-to-end throughput of the streaming job, against two baselines measured in the same
run, plus the DDL barrier latency and the driver's memory while 1M events are held.

    .venv/bin/python benchmarks/pipeline_throughput.py [--events 1000000] [--shards 16]

1. Produce N Debezium events (16 shards; an ADD COLUMN and a column rename roll out
   shard by shard, or with ``--steady`` no DDL at all) to a local broker.
2. (b) raw: Spark batch read of every topic + JVM decode + count.
3. (a) plain: the same events decoded, projected onto the final schema, last action per
   key, one MERGE into a fresh Delta table: what a job without coordination does.
4. (c) plain streaming: the same streaming query as the job (same Kafka sources, trigger
   and ``maxOffsetsPerTrigger``), whose foreachBatch only decodes, keeps the last action
   per key and MERGEs: the baseline that is fair to a stream. (d) the same plus one
   persist of the decoded batch and one per-shard aggregate: the floor of a coordinated
   batch (it must see per-shard facts before it writes).
5. shardmerge: the streaming job (AvailableNow, maxOffsetsPerTrigger) on the same topics.
6. Barrier: a pessimistic target where the last shard's DDL arrives in a later batch: the
   downstream DDL and the held rows must be written in the batch that reads it.
7. Held: a pessimistic target where one shard never runs the DDL, so ~1M events go to the
   stash; the driver's RSS (Python + JVM) before and after.
Prints a Markdown table; docs/benchmarks.md keeps the latest run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from streaming.config import (
    KafkaSettings,
    RouteSettings,
    Settings,
    SinkSettings,
    SourceSettings,
    TargetSettings,
)
from streaming.job import kafka_source_options

# The workload's table after the rollout: what the baselines write.
FINAL = (
    "CREATE TABLE orders (id BIGINT PRIMARY KEY, user_id INT NOT NULL, status VARCHAR(16) "
    "NOT NULL DEFAULT 'NEW', amount DECIMAL(10,2) NOT NULL, created DATETIME(3) NOT NULL, "
    "memo VARCHAR(64))"
)
ROLLOUT = {
    0.3: "ALTER TABLE {table} ADD COLUMN note VARCHAR(64)",
    0.6: "ALTER TABLE {table} CHANGE note memo VARCHAR(64)",
}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def driver_rss() -> float:
    """Python driver + its JVM (the py4j gateway child)."""
    me = os.getpid()
    total = rss_mb(me)
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if Path(f"/proc/{pid}/stat").read_text().split()[3] == str(me):
                    total += rss_mb(int(pid))
            except (OSError, IndexError):
                pass
    return total


def produce(
    bootstrap: str,
    source: str,
    shards: int,
    rows: int,
    ddl: dict[float, str],
    inserts_only: bool = False,
) -> tuple[int, float]:
    """The workload to Kafka; ``inserts_only``: its inserts alone (``rows`` of them per
    shard), as an append-only table's change stream."""
    from devkit.producer import DebeziumProducer, send_workload
    from devkit.workload import sharded_workload

    producer = DebeziumProducer(bootstrap, source)
    started = time.time()
    events = sharded_workload(shards, rows * 2 if inserts_only else rows, ddl_at=ddl)
    if inserts_only:
        kept = {"n": 0}

        def insert(ev: Any) -> bool:
            if ev.kind != "row":
                return True
            kept["n"] += ev.op == "c"
            return ev.op == "c" and kept["n"] <= rows * shards

        events = (ev for ev in events if insert(ev))
    send_workload(producer, events)
    producer.flush()
    return producer.sent, time.time() - started


def produce_workload(bootstrap: str, shards: int, events: int, steady: bool) -> None:
    """The benchmarks' workload (source ``bench``): ``events`` row changes over ``shards``,
    with the DDL rollout unless ``steady``; prints how long producing took."""
    sent, secs = produce(bootstrap, "bench", shards, events // shards, {} if steady else ROLLOUT)
    print(f"produced {sent:,} records in {secs:.1f} s")


def settings(
    bootstrap: str,
    source: str,
    work: Path,
    mode: str,
    max_offsets: int,
    sink: dict[str, Any] | None = None,
    target: str = "shop.orders",
) -> Settings:
    """The job's settings for a benchmark run; ``sink``: settings of the sink beyond its
    path (``append_new_keys``, ``append_min_rows``); ``target``: the table written."""
    return Settings(
        kafka=KafkaSettings(bootstrap=bootstrap, max_offsets_per_trigger=max_offsets),
        sources=[
            SourceSettings(format="debezium", pattern=source + r"(\..*)?", schema_pattern=source)
        ],
        routes=[RouteSettings(target=target, table="orders_*")],
        targets={target: TargetSettings(mode=mode)},
        sink=SinkSettings(path=str(work / "lake"), **(sink or {})),
        checkpoint=str(work / "checkpoint"),
    )


def appended_shares(spark: Any, checkpoint: str, target: str = "shop.orders") -> list[str]:
    """Per batch of a finished run: the share of the target's written rows that were
    appended (``streaming.batch.new_keys``) rather than MERGEd, from the saved states."""
    from streaming.storage.state_store import StateStore

    store = StateStore(spark, checkpoint)
    latest = store.latest()
    shares = []
    for batch in range(latest[0] + 1 if latest else 0):
        state = store.load_before(batch + 1)
        if state is None or state["batch"] != batch:
            continue
        rows = state["stats"].get("target_rows", {}).get(target, {})
        merged = sum(rows.get(k, 0) for k in ("inserted", "updated", "deleted"))
        appended = rows.get("appended", 0)
        total = merged + appended
        shares.append(f"{appended / total:.0%}" if total else "-")
    return shares


def read_all(spark: Any, bootstrap: str, source: str) -> Any:
    """Every record of the source's topics, as one Spark batch read."""
    return (
        spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
        .option("subscribePattern", source + r"(\..*)?").option("startingOffsets", "earliest")
        .options(**kafka_source_options()).load()
    )  # fmt: skip


def raw_rate(spark: Any, bootstrap: str, source: str) -> tuple[int, float]:
    from streaming.source.decode import decode

    started = time.time()
    df = read_all(spark, bootstrap, source)
    events, _ = decode(df, "debezium")
    n = events.count()
    return n, time.time() - started


def plain_merge(
    spark: Any, bootstrap: str, source: str, work: Path, final_sql: str
) -> tuple[int, float]:
    """Decode, project onto the final schema, keep the last action per key, one MERGE."""
    from pyspark.sql import functions as F

    from coordinator.routing import Extract
    from schemas import parse_create_table
    from streaming.batch.rows import merge_source, project_actions
    from streaming.source.decode import decode
    from streaming.storage.delta_sink import DeltaSink

    schema = parse_create_table(final_sql)
    path = str(work / "plain")
    sink = DeltaSink(spark, "shardmerge-bench-plain", lambda target: path)
    sink.create_at(path, schema)
    started = time.time()
    df = read_all(spark, bootstrap, source)
    events, _ = decode(df, "debezium")
    rows = events.filter("op NOT IN ('ddl', 't')").withColumn(
        "_okey",
        F.expr("named_struct('f', pos_file, 'p', pos, 'r', pos_row, 't', ts_ms, 'o', offset)"),
    )
    projected = project_actions(rows, schema, Extract(), project_all=True)
    sink.merge_at(path, merge_source(projected, schema), ["id"], list(schema.column_names()), 1)
    n = rows.count()
    return n, time.time() - started


def row_events(df: Any) -> Any:
    """A batch of Kafka records as the baselines read it: decoded, row events only, each
    with its order key."""
    from pyspark.sql import functions as F

    from streaming.source.control import ORDER_KEY
    from streaming.source.decode import decode

    events, _ = decode(df, "debezium")
    return events.filter("op NOT IN ('ddl', 't')").withColumn("_okey", F.expr(ORDER_KEY))


def plain_merge_batch(rows: Any, schema: Any, path: str, version: int) -> None:
    """Baseline (c)'s batch: ``rows`` (:func:`row_events`) projected onto ``schema``, the
    last action per key MERGEd into the Delta table at ``path`` under ``version``."""
    from coordinator.routing import Extract
    from streaming.batch.rows import merge_source, project_actions
    from streaming.storage.delta_sink import DeltaSink

    projected = project_actions(rows, schema, Extract(), project_all=True)
    # the batch's own session: merge_at names its source in that session's views
    DeltaSink(rows.sparkSession, "shardmerge-bench-plain-stream", lambda t: path).merge_at(
        path, merge_source(projected, schema), ["id"], list(schema.column_names()), version
    )


def plain_stream(
    spark: Any, s: Settings, final_sql: str, summary: bool = False, label: str | None = None
) -> tuple[int, float, int]:
    """The job's own streaming query, but foreachBatch only decodes, keeps the last action
    per key (projected onto the final schema) and MERGEs. With ``summary`` (baseline d) it
    also persists the decoded batch once and runs one per-shard aggregate on it before the
    MERGE: the floor a coordinated batch can reach. ``label`` tags its Spark jobs
    (``baseline c``/``baseline d`` by default). Returns (rows, seconds, batches)."""
    from pyspark.sql import functions as F

    from schemas import parse_create_table
    from streaming.job import read_kafka
    from streaming.storage.delta_sink import DeltaSink

    schema = parse_create_table(final_sql)
    path = s.sink.path + ("/plain_summary" if summary else "/plain_stream")
    DeltaSink(spark, "shardmerge-bench-plain-stream", lambda target: path).create_at(path, schema)
    seen = {"rows": 0, "batches": 0}

    def batch(df: Any, batch_id: int) -> None:
        # tagged as the job's batches are, for batch_profile's timelines
        tag = label or ("baseline d" if summary else "baseline c")
        df.sparkSession.sparkContext.setJobDescription(f"{tag} batch {batch_id}")
        rows = row_events(df)
        if summary:
            rows = rows.persist()
            rows.groupBy("source", "db", "tbl", "schema_fp").agg(
                F.min("_okey"), F.count(F.lit(1))
            ).collect()
        plain_merge_batch(rows, schema, path, batch_id + 1)
        if summary:
            rows.unpersist()
        df.sparkSession.sparkContext.setJobDescription(None)
        seen["batches"] += 1

    started = time.time()
    query = (
        read_kafka(spark, s).writeStream.foreachBatch(batch)
        .option("checkpointLocation", s.checkpoint + ("/plain_summary" if summary else "/plain_stream"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()
    secs = time.time() - started
    seen["rows"] = spark.read.format("delta").load(path).count()
    return seen["rows"], secs, seen["batches"]


def run_job(spark: Any, s: Settings) -> tuple[float, Any]:
    from streaming.job import build_query

    started = time.time()
    query, processor = build_query(spark, s, available_now=True)
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return time.time() - started, processor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--max-offsets", type=int, default=250_000)
    parser.add_argument(
        "--steady",
        action="store_true",
        help="no DDL rollout: every batch is rows only (the fast path's case)",
    )
    parser.add_argument("--skip-held", action="store_true")
    parser.add_argument("--skip-barrier", action="store_true")
    parser.add_argument(
        "--inserts-only",
        action="store_true",
        help="only the workload's inserts (an append-only table's stream): every batch after "
        "the first is new keys alone",
    )
    parser.add_argument(
        "--no-append",
        action="store_true",
        help="the job MERGEs every row (sink.append_new_keys: false): its speed before the "
        "append path; without it the job also runs a second time with the path off, for "
        "the ratio in the same run",
    )
    parser.add_argument(
        "--append-mixed",
        action="store_true",
        help="with the append path, split a batch that also updates (sink.append_mixed): "
        "its new keys appended, the rest MERGEd; without it such a batch is MERGEd whole",
    )
    parser.add_argument(
        "--deletion-vectors",
        action="store_true",
        help="create every Delta table (targets, stash, baselines) with deletion vectors",
    )
    args = parser.parse_args()
    from devkit import kafka_local
    from streaming.runtime.spark_session import build_spark
    from streaming.storage.state_store import StateStore

    work = Path(tempfile.mkdtemp(prefix="shardmerge-bench-"))
    rows = args.events // args.shards
    out: list[tuple[str, str]] = []
    try:
        with kafka_local.running("bench", work / "kafka") as broker:
            rollout = {} if args.steady else ROLLOUT
            sent, secs = produce(
                broker.bootstrap, "bench", args.shards, rows, rollout, args.inserts_only
            )
            out.append(
                (
                    "producer (confluent-kafka, lz4)",
                    f"{sent:,} records in {secs:.1f}s = {sent / secs:,.0f}/s",
                )
            )
            spark = build_spark("shardmerge-bench")
            if args.deletion_vectors:
                spark.conf.set(
                    "spark.databricks.delta.properties.defaults.enableDeletionVectors", "true"
                )
            n, secs = raw_rate(spark, broker.bootstrap, "bench")
            out.append(
                (
                    "(b) raw: Kafka -> Spark -> decode -> count",
                    f"{n:,} events in {secs:.1f}s = {n / secs:,.0f}/s",
                )
            )
            final = FINAL
            n, secs = plain_merge(spark, broker.bootstrap, "bench", work, final)
            plain = n / secs
            out.append(
                (
                    "(a) plain: decode + project + one MERGE, no coordination",
                    f"{n:,} rows in {secs:.1f}s = {plain:,.0f}/s",
                )
            )
            # the append path on from the job's second batch (sink.append_min_rows: 0)
            s = settings(broker.bootstrap, "bench", work / "job", "optimistic", args.max_offsets,
                         {"append_new_keys": not args.no_append, "append_min_rows": 0,
                          "append_mixed": args.append_mixed})  # fmt: skip
            ps = settings(broker.bootstrap, "bench", work / "ps", "optimistic", args.max_offsets)
            kept, secs, batches = plain_stream(spark, ps, final)
            stream = sent / secs
            out.append(
                (
                    "(c) plain streaming: same query and trigger; decode + last per key + MERGE",
                    f"{sent:,} records in {secs:.1f}s = {stream:,.0f}/s ({batches} batches, "
                    f"{kept:,} rows kept)",
                )
            )
            ds = settings(broker.bootstrap, "bench", work / "ds", "optimistic", args.max_offsets)
            _, secs_d, batches_d = plain_stream(spark, ds, final, summary=True)
            floor = sent / secs_d
            out.append(
                (
                    "(d) plain streaming + one persist + one per-shard aggregate",
                    f"{sent:,} records in {secs_d:.1f}s = {floor:,.0f}/s ({batches_d} batches)",
                )
            )
            rss0 = driver_rss()
            secs, processor = run_job(spark, s)
            ours = sent / secs
            latest = StateStore(spark, s.checkpoint).latest()
            assert latest is not None
            out.append(
                (
                    "shardmerge job (optimistic, AvailableNow)",
                    f"{sent:,} records in {secs:.1f}s = {ours:,.0f}/s "
                    f"(**{ours / stream:.2f}x plain streaming (c)**, {ours / floor:.2f}x (d), "
                    f"{ours / plain:.2f}x plain batch; "
                    f"{latest[0] + 1} batches, "
                    f"{processor.observer.totals['fast_path']} of them on the fast path)",
                )
            )
            if not args.no_append:
                out.append(
                    (
                        "rows appended, not MERGEd, per batch (streaming.batch.new_keys)",
                        ", ".join(appended_shares(spark, s.checkpoint)),
                    )
                )
            steps: dict[str, float] = {}
            for record in processor.observer.snapshot()["history"]:
                for step, took in record.steps.items():
                    steps[step] = steps.get(step, 0.0) + took
            out.append(
                (
                    "shardmerge time by protocol step (sum over batches)",
                    ", ".join(f"{k} {v:.1f}s" for k, v in steps.items())
                    + f"; outside foreachBatch {secs - sum(steps.values()):.1f}s",
                )
            )

            if not args.no_append:
                off = settings(broker.bootstrap, "bench", work / "job-merge", "optimistic",
                               args.max_offsets, {"append_new_keys": False})  # fmt: skip
                secs_off, _ = run_job(spark, off)
                merged = sent / secs_off
                out.append(
                    (
                        "shardmerge job, every row MERGEd (sink.append_new_keys: false)",
                        f"{sent:,} records in {secs_off:.1f}s = {merged:,.0f}/s "
                        f"({merged / stream:.2f}x (c); the append path: {ours / merged:.2f}x)",
                    )
                )

            if not args.skip_barrier:
                # barrier latency: pessimistic, the last shard's DDL in a batch of its own
                from devkit.producer import DebeziumProducer, send_workload
                from devkit.workload import sharded_workload

                p = DebeziumProducer(broker.bootstrap, "barrier")
                events = list(
                    sharded_workload(
                        4, 2000, ddl_at={0.5: "ALTER TABLE {table} ADD COLUMN note VARCHAR(64)"}
                    )
                )
                ddls = [
                    i
                    for i, e in enumerate(events)
                    if e.kind == "ddl" and "ADD COLUMN" in (e.statement or "")
                ]
                last = ddls[-1]
                send_workload(p, events[:last])
                p.flush()
                sb = settings(
                    broker.bootstrap, "barrier", work / "barrier", "pessimistic", 1_000_000
                )
                run_job(spark, sb)
                send_workload(p, events[last:])
                p.flush()
                t0 = time.time()
                run_job(spark, sb)
                latest = StateStore(spark, sb.checkpoint).latest()
                assert latest is not None
                stats = latest[1]["stats"]
                same = bool(stats["downstream_ddl"]) and stats["replayed"] > 0
                out.append(("DDL barrier: last shard's DDL -> DDL applied + held rows written",
                            f"{'in the same micro-batch' if same else 'NOT in the same batch'} "
                            f"(batch {stats['batch']}, {stats['replayed']:,} held rows replayed, {time.time() - t0:.1f}s incl. query start)"))  # fmt: skip

            if not args.skip_held:
                from devkit.producer import DebeziumProducer, send_workload
                from devkit.workload import sharded_workload

                ph = DebeziumProducer(broker.bootstrap, "held")
                held_events = sharded_workload(
                    args.shards,
                    rows,
                    ddl_at={0.0: "ALTER TABLE {table} ADD COLUMN note VARCHAR(64)"},
                )
                # one shard never runs the DDL: every other shard is held from its DDL on
                skip = ("db_7", "orders_1")
                filtered = (
                    e
                    for e in held_events
                    if not (
                        e.kind == "ddl"
                        and "ADD COLUMN" in (e.statement or "")
                        and (e.db, e.table) == skip
                    )
                )
                send_workload(ph, filtered)
                ph.flush()
                sh = settings(
                    broker.bootstrap, "held", work / "held", "pessimistic", args.max_offsets
                )
                before = driver_rss()
                secs, _ = run_job(spark, sh)
                after = driver_rss()
                latest = StateStore(spark, sh.checkpoint).latest()
                held = (
                    spark.read.format("delta")
                    .load(str(Path(sh.checkpoint) / "shardmerge" / "stash"))
                    .count()
                )
                out.append(("held events (pessimistic, one shard never runs the DDL)",
                            f"{held:,} in the stash after {secs:.1f}s; driver RSS {before:,.0f} -> {after:,.0f} MB (+{after - before:,.0f} MB)"))  # fmt: skip
            out.append(("driver RSS at start of job run", f"{rss0:,.0f} MB"))
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| measurement | result |")
    print("|---|---|")
    for k, v in out:
        print(f"| {k} | {v} |")


if __name__ == "__main__":
    main()
