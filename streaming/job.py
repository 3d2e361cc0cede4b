"""The streaming job: Kafka (Spark's own source) -> decode -> coordinate -> Delta.

Run it with ``shardmerge run --config FILE [--available-now]`` or, on a cluster,
``spark-submit ... -m streaming.job --config FILE`` (see README).
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from streaming.batch import BatchProcessor
from streaming.config import Settings, SourceSettings, load_settings

__all__ = ["anchored", "build_query", "main", "read_kafka"]

log = logging.getLogger("shardmerge.job")


def read_kafka(spark: SparkSession, settings: Settings) -> DataFrame:
    """One stream over every configured source; ``__fmt`` tells each record's format.

    A source with ``schema_pattern`` is read by two Kafka sources: its data topics with
    ``maxOffsetsPerTrigger``, its schema-change topics without (they hold a handful of
    records, and a rate limit shared with millions of rows would deliver most DDL after
    the rows that follow it, which then take the stash round trip)."""
    frames = []
    for source in settings.sources:
        limited = settings.kafka.max_offsets_per_trigger
        if source.schema_pattern is None:
            frames.append(_kafka(spark, settings, source, _subscription(source), limited))
            continue
        schema = anchored(source.schema_pattern)
        if source.pattern:
            data = ("subscribePattern", f"^(?!{schema})(?:{source.pattern})$")
            ddl = ("subscribePattern", schema)
        else:
            regex = re.compile(schema)
            names = [t for t in source.topics if not regex.match(t)]
            ddl_names = [t for t in source.topics if regex.match(t)]
            if not names or not ddl_names:
                raise ValueError(
                    f"source topics {source.topics}: schema_pattern {source.schema_pattern!r} "
                    "must match some of them (the schema-change topics) and not all"
                )
            data = ("subscribe", ",".join(names))
            ddl = ("subscribe", ",".join(ddl_names))
        frames.append(_kafka(spark, settings, source, data, limited))
        frames.append(_kafka(spark, settings, source, ddl, None))
    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other)
    return df


def _subscription(source: SourceSettings) -> tuple[str, str]:
    if source.pattern:
        return "subscribePattern", anchored(source.pattern)
    return "subscribe", ",".join(source.topics)


def _kafka(
    spark: SparkSession,
    settings: Settings,
    source: SourceSettings,
    subscription: tuple[str, str],
    max_offsets: int | None,
) -> DataFrame:
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka.bootstrap)
        .option("startingOffsets", settings.kafka.starting_offsets)
        # CDC must never skip data silently: a gap is an error.
        .option("failOnDataLoss", "true")
        .option("includeHeaders", "true")
        # New shard tables bring new topics: notice them within seconds, not minutes.
        .option("kafka.metadata.max.age.ms", "5000")
        .option(*subscription)
    )
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", max_offsets)
    for key, secret in settings.kafka.options.items():
        reader = reader.option(f"kafka.{key}", secret.get_secret_value())
    return reader.load().withColumn("__fmt", F.lit(source.format))


def anchored(pattern: str) -> str:
    """``pattern`` matching whole topic names only.

    Spark's Kafka source keeps a topic when the pattern is *found* in its name (Scala
    ``findFirstIn``), unlike Kafka's consumer, which matches the whole name: ``s1`` would
    also read ``s1-schemahistory``, Debezium's internal schema history, and ``orders``
    every topic containing it. The settings promise whole-name matching, as Kafka does.
    """
    return f"^(?:{pattern})$"


def build_query(
    spark: SparkSession, settings: Settings, *, available_now: bool = False
) -> tuple[StreamingQuery, BatchProcessor]:
    from streaming.decode import decode

    processor = BatchProcessor(spark, settings, decode)
    writer = (
        read_kafka(spark, settings)
        .writeStream.foreachBatch(processor)
        .option("checkpointLocation", str(Path(settings.checkpoint) / "spark"))
        .queryName("shardmerge")
    )
    writer = (
        writer.trigger(availableNow=True)
        if available_now
        else writer.trigger(processingTime=settings.trigger_interval)
    )
    return writer.start(), processor


def run(
    settings: Settings, *, available_now: bool = False, spark: SparkSession | None = None
) -> None:
    if spark is None:
        from streaming.spark_session import build_spark

        spark = build_spark("shardmerge")
    query, processor = build_query(spark, settings, available_now=available_now)
    ops = None
    if settings.ops.enabled:
        from streaming.ops.running import start_ops

        ops = start_ops(spark, processor, query)
        log.info("dashboard: %s  metrics: %smetrics", ops.url, ops.url)
    try:
        query.awaitTermination()
    finally:
        if ops is not None:
            ops.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="streaming.job", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--available-now", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    settings = load_settings(args.config)
    spark = SparkSession.getActiveSession()
    run(settings, available_now=args.available_now, spark=spark)
    return 0


if __name__ == "__main__":
    sys.exit(main())
