"""``shardmerge demo``: the embedded default, end to end on this machine.

Starts a local Kafka broker, writes a sharded Debezium workload (8 shards of
``shop.orders`` by default) during which two DDLs roll out shard by shard (an ADD COLUMN,
then a RENAME COLUMN), runs the streaming job on it, prints progress and every change of
lock stage, and ends with a summary and the path of the Delta table to inspect.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import threading
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

__all__ = ["cli_main"]

ROOT = Path(__file__).resolve().parents[1]
DDL_ROLLOUT = {
    0.3: "ALTER TABLE {table} ADD COLUMN note VARCHAR(64)",
    0.6: "ALTER TABLE {table} CHANGE note memo VARCHAR(64)",
}


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def cli_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="shardmerge demo", description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--rows", type=int, default=25_000, help="row changes per shard")
    parser.add_argument("--workdir", default=str(ROOT / ".state" / "demo"))
    parser.add_argument("--mode", choices=["optimistic", "pessimistic"], default="optimistic")
    parser.add_argument("--trigger", default="2 seconds", help="micro-batch interval")
    parser.add_argument("--max-offsets", type=int, default=25_000, help="records per batch")
    args = parser.parse_args(argv)

    from devkit import kafka_local
    from devkit.producer import DebeziumProducer, send_workload
    from devkit.workload import sharded_workload
    from streaming.job import build_query
    from streaming.spark_session import build_spark
    from streaming.state_store import StateStore

    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    say(f"demo: working in {work}")
    started = time.time()
    with kafka_local.running("demo", work / "kafka") as broker:
        say(f"demo: Kafka broker on {broker.bootstrap} (log {broker.log_path})")
        settings = Settings(
            kafka=KafkaSettings(
                bootstrap=broker.bootstrap, max_offsets_per_trigger=args.max_offsets
            ),
            # The schema-change topic shares the rate limit here (no schema_pattern), so the
            # rollout spreads over micro-batches and the lock's stages show as they change;
            # read rate-free (as examples/job.yaml does), all DDL lands in the first batch.
            sources=[SourceSettings(format="debezium", pattern=r"shop(\..*)?")],
            routes=[RouteSettings(target="shop.orders", table="orders_*")],
            targets={"shop.orders": TargetSettings(mode=args.mode)},
            sink=SinkSettings(path=str(work / "lake")),
            checkpoint=str(work / "checkpoint"),
            trigger_interval=args.trigger,
        )
        producer = DebeziumProducer(broker.bootstrap, "shop")
        events = sharded_workload(args.shards, args.rows, ddl_at=DDL_ROLLOUT)
        total = {"n": 0, "done": False, "error": None}

        def produce() -> None:
            try:
                total["n"] = send_workload(producer, events)
                producer.flush()
            except Exception as e:
                total["error"] = e
            total["done"] = True

        # The first events create the topics; start the job once they exist.
        thread = threading.Thread(target=produce, name="demo-producer", daemon=True)
        thread.start()
        say(f"demo: producing {args.shards} shards x {args.rows:,} row changes, "
            f"DDL rollout: {', '.join(DDL_ROLLOUT.values())}")  # fmt: skip
        time.sleep(3)
        spark = build_spark("shardmerge-demo")
        query, _ = build_query(spark, settings)
        say("demo: streaming job started (Spark Structured Streaming, foreachBatch)")
        store = StateStore(spark, settings.checkpoint)
        last_batch, last_stage, idle = -1, None, 0
        try:
            while True:
                time.sleep(1)
                if query.exception() is not None:
                    raise RuntimeError(str(query.exception()))
                latest = store.latest()
                if latest is not None and latest[0] != last_batch:
                    last_batch, data = latest
                    last_stage = _report(data, last_stage, producer.sent)
                status = query.status
                caught_up = not status["isDataAvailable"] and not status["isTriggerActive"]
                idle = idle + 1 if total["done"] and caught_up else 0
                if idle >= 3:
                    break
        finally:
            query.stop()
        if total["error"] is not None:
            raise RuntimeError(f"the producer failed: {total['error']}")
        elapsed = time.time() - started
        _summary(spark, settings, store, total["n"], elapsed)
        spark.stop()
    return 0


def _report(data: dict[str, Any], last_stage: str | None, sent: int) -> str:
    stats = data["stats"]
    lock = (
        data["locks"][0] if data["locks"] else {"stage": "none", "blocked": [], "pending_ddl": []}
    )
    say(
        f"batch {stats['batch']:>4}: {stats['events']:>7,} events, {stats['written']:>7,} "
        f"written, {stats['held']:>6,} held, {stats['replayed']:>6,} replayed | lock "
        f"{lock['stage']}, {len(lock['blocked'])} shard(s) held | produced {sent:,}"
    )
    for ddl in stats["downstream_ddl"]:
        say(f"           downstream DDL: {ddl}")
    if lock["stage"] != last_stage:
        held = ", ".join(lock["blocked"][:4]) + (" ..." if len(lock["blocked"]) > 4 else "")
        say(f"           lock stage is now {lock['stage']}" + (f" (held: {held})" if held else ""))
    stage: str = lock["stage"]
    return stage


def _summary(spark: Any, settings: Settings, store: Any, produced: int, elapsed: float) -> None:
    from coordinator.ids import TargetId

    path = settings.table_path(TargetId("shop", "orders"))
    df = spark.read.format("delta").load(path)
    rows = df.count()
    dead = 0
    if Path(settings.dead_letters()).exists():
        dead = spark.read.format("delta").load(settings.dead_letters()).count()
    latest = store.latest()
    lock = latest[1]["locks"][0] if latest and latest[1]["locks"] else {}
    say("")
    say("demo: done")
    say(f"  produced        {produced:,} events in {elapsed:.0f} s (end to end)")
    say(f"  Delta table     {path}")
    say(f"  rows            {rows:,}")
    columns = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in df.schema.fields)
    say(f"  columns         {columns}")
    say(f"  lock            {lock.get('stage', 'none')}, held: {lock.get('blocked') or 'none'}")
    say(f"  dead letters    {dead}")
    say(f"  inspect         pyspark: spark.read.format('delta').load('{path}')")
