"""Throughput of the Spark decoder: Kafka -> Spark -> decode, Debezium JSON, 16 shards.

Starts a throw-away broker (``devkit.kafka_local``) in a temp dir; for
``schemas.enable`` off (DECIMAL as string) and on (DECIMAL as base64 bytes, decoded with
the schema's scale), produces ``--events`` row changes over ``--shards`` shards with
:class:`~devkit.producer.DebeziumProducer` (plus their tombstones and each shard's
CREATE TABLE), then times, with Spark's batch Kafka source over every topic:

- *read*: Kafka -> Spark, all values materialised (``noop`` sink), the floor;
- *decode*: Kafka -> Spark -> :func:`streaming.source.decode.decode` -> every event column
  materialised (``noop`` sink; a bare ``count()`` would let Spark prune the row images);
  run twice: the first run includes compiling the generated code.

Rates are records or events per second of wall time on this machine (local[2]); the
Spark JVM's CPU time per event (from /proc) is printed too, since wall time on a shared
2-core machine depends on what else runs.

    .venv/bin/python benchmarks/decode_throughput.py [--events 1000000] [--shards 16]

Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from devkit.kafka_local import running
from devkit.producer import DebeziumProducer, send_workload
from devkit.workload import sharded_workload
from streaming.job import kafka_source_options
from streaming.runtime.spark_session import build_spark
from streaming.source.decode import decode


@dataclass
class Result:
    mode: str
    records: int
    produce_s: float
    read_s: float
    events: int
    dead: int
    decode_first_s: float
    decode_s: float
    decode_cpu_s: float


def _timed(action) -> float:  # type: ignore[no-untyped-def]
    start = time.monotonic()
    action()
    return time.monotonic() - start


def jvm_cpu_s(spark: SparkSession) -> float:
    """User + system CPU seconds of the Spark JVM (driver and local executors)."""
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _noop(df: DataFrame) -> None:
    df.write.format("noop").mode("overwrite").save()


def run_mode(
    spark: SparkSession, bootstrap: str, schemas_enable: bool, shards: int, events: int
) -> Result:
    source = f"bench{uuid.uuid4().hex[:8]}"
    producer = DebeziumProducer(
        bootstrap,
        source,
        schemas_enable=schemas_enable,
        decimal_mode="base64" if schemas_enable else "string",
    )
    rows = events // shards
    start = time.monotonic()
    send_workload(producer, sharded_workload(shards, rows))
    producer.flush()
    produce_s = time.monotonic() - start

    raw = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribePattern", f"{source}(\\..*)?")
        .option("startingOffsets", "earliest")
        .options(**kafka_source_options())
        .load()
    )
    read_s = _timed(lambda: _noop(raw.select("key", "value", "topic", "partition", "offset")))
    ev, dead = decode(raw, "debezium")
    decode_first_s = _timed(lambda: _noop(ev))
    cpu = jvm_cpu_s(spark)
    decode_s = _timed(lambda: _noop(ev))
    decode_cpu_s = jvm_cpu_s(spark) - cpu
    return Result(
        mode=f"schemas.enable={'on' if schemas_enable else 'off'}"
        f" (DECIMAL {'base64' if schemas_enable else 'string'})",
        records=producer.sent,
        produce_s=produce_s,
        read_s=read_s,
        events=ev.count(),
        dead=dead.count(),
        decode_first_s=decode_first_s,
        decode_s=decode_s,
        decode_cpu_s=decode_cpu_s,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=16)
    args = parser.parse_args()

    spark = build_spark("bench-decode")
    spark.sparkContext.setLogLevel("ERROR")
    results = []
    with tempfile.TemporaryDirectory() as tmp, running("bench-decode", tmp) as broker:
        for schemas_enable in (False, True):
            r = run_mode(spark, broker.bootstrap, schemas_enable, args.shards, args.events)
            results.append(r)
            print(f"done: {r}", flush=True)
    spark.stop()

    print()
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"python {platform.python_version()}, Spark local[2]; {args.shards} shards, "
        f"{args.events:,} row changes requested per mode"
    )
    print()
    print(
        "| mode | Kafka records | produce (records/s) | Kafka -> Spark read (records/s) "
        "| events | dead letters | decode, 1st run incl. codegen (events/s) "
        "| decode, warm (events/s) | decode, warm (JVM CPU µs/event) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r.mode} | {r.records:,} | {r.records / r.produce_s:,.0f} "
            f"| {r.records / r.read_s:,.0f} | {r.events:,} | {r.dead:,} "
            f"| {r.events / r.decode_first_s:,.0f} | {r.events / r.decode_s:,.0f} "
            f"| {r.decode_cpu_s / r.events * 1e6:,.1f} |"
        )


if __name__ == "__main__":
    main()
