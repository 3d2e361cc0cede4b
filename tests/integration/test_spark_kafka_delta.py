"""Spark with the project's jars: its Kafka source keeps per-partition offset order, and
Delta writes, reads and MERGEs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from devkit.kafka_local import KafkaBroker
from streaming.job import kafka_source_options

pytestmark = pytest.mark.timeout(180)

PARTITIONS, PER_PARTITION = 3, 200


def _produce_numbered(bootstrap: str, topic: str) -> dict[int, list[tuple[int, str]]]:
    """Messages "p:i" to partition p; returns the expected (offset, value) per partition."""
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4"})
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            producer.produce(topic, value=f"{p}:{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    return {p: [(i, f"{p}:{i}") for i in range(PER_PARTITION)] for p in range(PARTITIONS)}


def _by_partition(rows: list[tuple[int, int, str]]) -> dict[int, list[tuple[int, str]]]:
    out: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for partition, offset, value in rows:
        out[partition].append((offset, value))
    return dict(out)


def _kafka_reader(reader, bootstrap: str, topic: str):  # type: ignore[no-untyped-def]
    return (
        reader.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .options(**kafka_source_options())
    )


@pytest.mark.kafka
@pytest.mark.spark
def test_spark_batch_read_keeps_offset_order(
    spark: SparkSession, kafka: KafkaBroker, topic: Callable[..., str]
) -> None:
    name = topic(partitions=PARTITIONS)
    expected = _produce_numbered(kafka.bootstrap, name)
    df = _kafka_reader(spark.read, kafka.bootstrap, name).load()
    rows = df.selectExpr("partition", "offset", "CAST(value AS STRING)").collect()
    assert _by_partition([tuple(r) for r in rows]) == expected


@pytest.mark.kafka
@pytest.mark.spark
def test_spark_stream_available_now_keeps_offset_order(
    spark: SparkSession, kafka: KafkaBroker, topic: Callable[..., str], tmp_path: Path
) -> None:
    name = topic(partitions=PARTITIONS)
    expected = _produce_numbered(kafka.bootstrap, name)
    batches: list[tuple[int, list[tuple[int, int, str]]]] = []

    def sink(batch: DataFrame, batch_id: int) -> None:
        batches.append((batch_id, [tuple(r) for r in batch.collect()]))

    query = (
        _kafka_reader(spark.readStream, kafka.bootstrap, name)
        .option("maxOffsetsPerTrigger", 250)
        .load()
        .selectExpr("partition", "offset", "CAST(value AS STRING)")
        .writeStream.trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .foreachBatch(sink)
        .start()
    )
    assert query.awaitTermination(120), "AvailableNow query did not finish in 120 s"
    assert query.exception() is None
    assert [b for b, _ in batches] == list(range(len(batches)))
    assert len(batches) >= 3  # maxOffsetsPerTrigger split it: order holds across batches
    assert _by_partition([row for _, rows in batches for row in rows]) == expected


@pytest.mark.spark
def test_delta_write_read_merge(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "merged")
    schema = "id INT, name STRING"
    spark.createDataFrame([(1, "a"), (2, "b")], schema).write.format("delta").save(path)
    table = DeltaTable.forPath(spark, path)
    (
        table.alias("t")
        .merge(spark.createDataFrame([(2, "B"), (3, "c")], schema).alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
    rows = spark.read.format("delta").load(path).orderBy("id").collect()
    assert [tuple(r) for r in rows] == [(1, "a"), (2, "B"), (3, "c")]
    operations = [r.operation for r in table.history().orderBy("version").collect()]
    assert operations == ["WRITE", "MERGE"]


@pytest.mark.kafka
@pytest.mark.spark
def test_source_pattern_matches_whole_topic_names(
    spark: SparkSession, kafka: KafkaBroker, tmp_path: Path
) -> None:
    """Spark finds a subscribePattern anywhere in a topic name; the job's settings mean the
    whole name (a connector's ``s1`` must not read Debezium's ``s1-schemahistory``)."""
    from streaming.config import KafkaSettings, Settings
    from streaming.job import read_kafka

    stem = f"pat{abs(hash(tmp_path)) % 10**8}"
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for name in (f"{stem}_s1", f"{stem}_s1-schemahistory", f"x{stem}_s1", f"{stem}_s1.db.t"):
        producer.produce(name, value=name.encode())
    assert producer.flush(30) == 0
    settings = Settings.model_validate(
        {
            "kafka": KafkaSettings(bootstrap=kafka.bootstrap),
            "sources": [{"pattern": rf"{stem}_s1(\..+)?"}],
            "routes": [{"target": "db.t"}],
            "sink": {"path": str(tmp_path / "lake")},
            "checkpoint": str(tmp_path / "checkpoint"),
        }
    )
    seen: list[str] = []
    query = (
        read_kafka(spark, settings)
        .writeStream.trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .foreachBatch(lambda df, _: seen.extend(r.topic for r in df.select("topic").collect()))
        .start()
    )
    query.awaitTermination(120)
    assert sorted(seen) == [f"{stem}_s1", f"{stem}_s1.db.t"]


@pytest.mark.kafka
@pytest.mark.spark
def test_schema_change_topics_are_read_without_the_rate_limit(
    spark: SparkSession, kafka: KafkaBroker, tmp_path: Path
) -> None:
    """With ``schema_pattern``, the first micro-batch holds every DDL record while the data
    topics are read ``maxOffsetsPerTrigger`` at a time; nothing is read twice."""
    from streaming.config import KafkaSettings, Settings
    from streaming.job import read_kafka

    stem = f"lim{abs(hash(tmp_path)) % 10**8}"
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(3):
        producer.produce(f"{stem}_s1", value=f"ddl{i}".encode())
    for i in range(50):
        producer.produce(f"{stem}_s1.db.t", value=f"row{i}".encode())
    assert producer.flush(30) == 0
    settings = Settings.model_validate(
        {
            "kafka": KafkaSettings(bootstrap=kafka.bootstrap, max_offsets_per_trigger=10),
            "sources": [{"pattern": rf"{stem}_s1(\..+)?", "schema_pattern": f"{stem}_s1"}],
            "routes": [{"target": "db.t"}],
            "sink": {"path": str(tmp_path / "lake")},
            "checkpoint": str(tmp_path / "checkpoint"),
        }
    )
    batches: list[list[str]] = []
    query = (
        read_kafka(spark, settings)
        .writeStream.trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .foreachBatch(
            lambda df, _: batches.append([r.value.decode() for r in df.select("value").collect()])
        )
        .start()
    )
    query.awaitTermination(180)
    first = [v for v in batches[0] if v.startswith("ddl")]
    assert sorted(first) == ["ddl0", "ddl1", "ddl2"]
    assert all(len([v for v in b if v.startswith("row")]) <= 10 for b in batches)
    everything = [v for b in batches for v in b]
    assert sorted(everything) == sorted(
        [f"ddl{i}" for i in range(3)] + [f"row{i}" for i in range(50)]
    )
