"""The streaming job: Kafka (Spark's own source) -> decode -> coordinate -> Delta.

Run it with ``shardmerge run --config FILE [--available-now]`` or, on a cluster,
``spark-submit ... -m streaming.job --config FILE`` (see README).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from streaming.batch import BatchProcessor
from streaming.config import Settings, load_settings

__all__ = ["anchored", "build_query", "main", "read_kafka"]

log = logging.getLogger("shardmerge.job")


def read_kafka(spark: SparkSession, settings: Settings) -> DataFrame:
    """One stream over every configured source; ``__fmt`` tells each record's format."""
    frames = []
    for source in settings.sources:
        reader = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", settings.kafka.bootstrap)
            .option("startingOffsets", settings.kafka.starting_offsets)
            # CDC must never skip data silently: a gap is an error.
            .option("failOnDataLoss", "true")
            .option("includeHeaders", "true")
            # New shard tables bring new topics: notice them within seconds, not minutes.
            .option("kafka.metadata.max.age.ms", "5000")
        )
        if source.pattern:
            reader = reader.option("subscribePattern", anchored(source.pattern))
        else:
            reader = reader.option("subscribe", ",".join(source.topics))
        if settings.kafka.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", settings.kafka.max_offsets_per_trigger)
        for key, secret in settings.kafka.options.items():
            reader = reader.option(f"kafka.{key}", secret.get_secret_value())
        frames.append(reader.load().withColumn("__fmt", F.lit(source.format)))
    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other)
    return df


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
    query, _ = build_query(spark, settings, available_now=available_now)
    query.awaitTermination()


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
