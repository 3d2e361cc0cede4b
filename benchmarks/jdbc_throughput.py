"""Throughput of the streaming job writing into a database (the JDBC sink), against a
plain streaming JDBC upsert of the same events measured in the same run.

    .venv/bin/python benchmarks/jdbc_throughput.py --sink mariadb [--events 200000] [--shards 16]

1. Produce N Debezium events (the DDL rollout of pipeline_throughput.py, or ``--steady``)
   to a local broker; start a local MariaDB or PostgreSQL (devkit.downstream_local).
2. baseline: the same streaming query (same Kafka sources, trigger and
   ``maxOffsetsPerTrigger``) whose foreachBatch only decodes, keeps the last action per key
   (projected onto the final schema) and writes it with the same statements the sink
   uses (``JdbcSink.merge``: staged by the executors, one upsert transaction with its
   slot): what a plain Spark job upserting into the database does, exactly once too.
3. shardmerge: the streaming job (AvailableNow) with ``sink: {kind: jdbc}``.
4. baseline again (a second table and checkpoint): the first run paid the JVM's warm-up.
5. shardmerge again (a second table and checkpoint), as warm as the baseline's second run
   (since 2026-12-01; before, the job ran once, after the baseline's cold run only).
Prints the rates, the faster job's ratio to the faster baseline (target >= 0.9x) and DM's published 29.1k events/s per
DM-worker (DM 5.3, insert-only sysbench on 48-core servers) for scale. Each run's CPU
seconds are printed beside its time (since 2026-12-03): the JVM's (Spark, both sides'
work), the whole machine's (the database and the broker too) and the seconds the cores
waited on the disk, since a database's fsyncs make wall times on a small machine vary
run to run where the CPU the work takes does not.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import pipeline_throughput
from decode_throughput import jvm_cpu_s
from pipeline_throughput import FINAL, ROLLOUT, produce, row_events, settings

from streaming.config import Settings, SinkSettings

DM_EVENTS_PER_S = 29_100


_TICK = os.sysconf("SC_CLK_TCK")


def cpu(spark: Any) -> tuple[float, float, float]:
    """CPU seconds so far: Spark's JVM (driver and local executors; not the broker's, also
    a child of this process), the machine (user, nice, system, irq, softirq, steal of
    every core) and its cores' disk waits."""
    ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + ticks[7]
    return jvm_cpu_s(spark), busy / _TICK, ticks[4] / _TICK


@contextlib.contextmanager
def counted(spark: Any, what: str, spent: dict[str, tuple[float, float, float]]) -> Any:
    """Records the CPU seconds of the run in ``spent[what]`` and prints them."""
    before = cpu(spark)
    yield
    after = cpu(spark)
    spent[what] = (after[0] - before[0], after[1] - before[1], after[2] - before[2])
    jvm, machine, wait = spent[what]
    print(f"  {what}: cpu {jvm:.1f} s JVM, {machine:.1f} s machine, {wait:.1f} s waiting "
          "on the disk", flush=True)  # fmt: skip


def jdbc_settings(base: Settings, sink: dict[str, Any]) -> Settings:
    return base.model_copy(update={"sink": SinkSettings(path=base.sink.path, **sink)})


def plain_jdbc_stream(
    spark: Any, s: Settings, sink_conf: dict[str, Any], name: str = "orders"
) -> tuple[float, int]:
    """The baseline (module text). Returns (seconds, batches)."""

    from coordinator.decisions import CreateTarget
    from coordinator.ids import TargetId
    from coordinator.routing import Extract
    from schemas import parse_create_table
    from streaming.batch.rows import merge_source, project_actions
    from streaming.job import read_kafka
    from streaming.storage.jdbc_sink import JdbcSink

    schema = parse_create_table(FINAL)
    target = TargetId("plain", name)

    def sink_of(session: Any) -> JdbcSink:
        return JdbcSink(session, "bench-plain", sink_conf["url"], sink_conf["dialect"],
                        sink_conf.get("user"), sink_conf.get("password"), "bench_plain")  # fmt: skip

    sink_of(spark).create(CreateTarget(target, schema, FINAL, "the baseline's table"))
    seen = {"batches": 0}
    columns = list(schema.column_names())

    def batch(df: Any, batch_id: int) -> None:
        began = time.time()
        projected = project_actions(row_events(df), schema, Extract(), project_all=True)
        sink_of(df.sparkSession).merge(
            target, merge_source(projected, schema), ["id"], columns, batch_id + 1
        )
        seen["batches"] += 1
        print(f"  baseline batch {batch_id}: {time.time() - began:.2f}s", flush=True)

    started = time.time()
    query = (
        read_kafka(spark, s).writeStream.foreachBatch(batch)
        .option("checkpointLocation", s.checkpoint + "/plain_jdbc_" + name)
        .trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()
    return time.time() - started, seen["batches"]


def run_job(
    spark: Any, bootstrap: str, work: Path, args: Any, sink: dict[str, Any], target: str
) -> tuple[float, Settings]:
    """The job over every record into ``target`` (a checkpoint of its own): (seconds,
    its settings)."""
    home = work / ("job-" + target.replace(".", "-"))
    job = jdbc_settings(
        settings(bootstrap, "bench", home, "optimistic", args.max_offsets, target=target), sink
    )
    secs, processor = pipeline_throughput.run_job(spark, job)
    for record in processor.observer.snapshot()["history"]:
        print(
            f"  batch {record.batch}: "
            + ", ".join(f"{k} {v:.2f}s" for k, v in record.steps.items()),
            flush=True,
        )
    return secs, job


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sink", choices=["mariadb", "postgresql"], default="mariadb")
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--max-offsets", type=int, default=100_000)
    parser.add_argument("--steady", action="store_true", help="no DDL rollout")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="Spark's event log on: every Spark job of the job's second run, batch by batch",
    )
    args = parser.parse_args()
    from devkit import downstream_local, kafka_local
    from streaming.runtime.spark_session import build_spark

    work = Path(tempfile.mkdtemp(prefix="shardmerge-jdbc-bench-"))
    logs = work / "events"
    if args.profile:
        logs.mkdir()
        os.environ["SHARDMERGE_SPARK_CONF"] = (
            os.environ.get("SHARDMERGE_SPARK_CONF", "") + " spark.eventLog.enabled=true"
            f" spark.eventLog.compress=false spark.eventLog.dir=file://{logs}"
        )
    with contextlib.ExitStack() as stack:
        broker = stack.enter_context(kafka_local.running("bench", work / "kafka"))
        sink = stack.enter_context(downstream_local.sink_settings(args.sink, work / "db"))
        rollout = {} if args.steady else ROLLOUT
        sent, secs = produce(broker.bootstrap, "bench", args.shards, args.events // args.shards,
                             rollout)  # fmt: skip
        print(f"produced {sent:,} records in {secs:.1f} s", flush=True)
        spark = build_spark("shardmerge-jdbc-bench")
        base = settings(broker.bootstrap, "bench", work / "plain", "optimistic", args.max_offsets)
        spent: dict[str, tuple[float, float, float]] = {}
        with counted(spark, "baseline", spent):
            secs_plain, batches_plain = plain_jdbc_stream(spark, base, sink)
        plain = sent / secs_plain
        print(f"baseline: {sent:,} records in {secs_plain:.1f} s = {plain:,.0f}/s "
              f"({batches_plain} batches)", flush=True)  # fmt: skip
        with counted(spark, "shardmerge", spent):
            secs_job, job = run_job(spark, broker.bootstrap, work, args, sink, "shop.orders")
        rate = sent / secs_job
        print(f"shardmerge: {sent:,} records in {secs_job:.1f} s = {rate:,.0f}/s", flush=True)
        with counted(spark, "baseline again", spent):
            secs_again, _ = plain_jdbc_stream(spark, base, sink, "orders_again")
        again = sent / secs_again
        print(f"baseline again: {sent:,} records in {secs_again:.1f} s = {again:,.0f}/s",
              flush=True)  # fmt: skip
        # the job again, warm as the baseline's second run is (a table of its own)
        with counted(spark, "shardmerge again", spent):
            secs_job2, job2 = run_job(
                spark, broker.bootstrap, work, args, sink, "shop.orders_again"
            )
        rate2 = sent / secs_job2
        print(f"shardmerge again: {sent:,} records in {secs_job2:.1f} s = {rate2:,.0f}/s",
              flush=True)  # fmt: skip
        best = max(plain, again)
        ours = max(rate, rate2)
        from coordinator.ids import TargetId
        from streaming.storage.sinks import sink_of

        for s_, name in ((job, "orders"), (job2, "orders_again")):
            written: Any = sink_of(spark, s_, "bench-reader")
            rows = written.read(TargetId("shop", name)).count()
            print(f"rows in shop.{name}: {rows:,}", flush=True)
        print()
        print(f"| {args.sink}, {args.events:,} events, {args.shards} shards"
              f"{', steady' if args.steady else ', DDL rollout'} | events/s |")  # fmt: skip
        print("|---|---|")
        print(f"| plain streaming JDBC upsert (baseline), first / again | {plain:,.0f} / "
              f"{again:,.0f} |")  # fmt: skip
        print(f"| shardmerge, JDBC sink, first / again | {rate:,.0f} / {rate2:,.0f} "
              f"(the faster: {ours / best:.2f}x the faster baseline) |")  # fmt: skip
        print(f"| DM 5.3, one DM-worker (published, 48 cores) | {DM_EVENTS_PER_S:,} |")
        print()
        print("| CPU seconds | JVM | machine | waiting on the disk |")
        print("|---|---:|---:|---:|")
        for what, (jvm, machine, wait) in spent.items():
            print(f"| {what} | {jvm:.1f} | {machine:.1f} | {wait:.1f} |")
        warm = spent["shardmerge again"][0] / max(spent["baseline again"][0], 1e-9)
        print(f"the job's second run took {warm:.2f}x the JVM CPU seconds of the baseline's")
        if args.profile:
            spark.stop()
            time.sleep(1)
            print_profile(logs)


def print_profile(logs: Path) -> None:
    """Every Spark job of the job's last run, per batch, in order (start offset, seconds)."""
    from batch_profile import jobs

    runs: list[list[dict[str, Any]]] = []
    last = None
    for j in jobs(logs):
        m = re.match(r"shardmerge batch (\d+)", j["description"])
        if not m:
            continue
        if last is None or int(m.group(1)) < last:
            runs.append([])
        last = int(m.group(1))
        runs[-1].append(j)
    line = runs[-1] if runs else []
    for j in line:
        at = (j["start"] - line[0]["start"]) / 1000
        print(f"  +{at:6.2f} s {j['seconds']:6.2f} s  {j['description']}  {j['site']}")


if __name__ == "__main__":
    main()
