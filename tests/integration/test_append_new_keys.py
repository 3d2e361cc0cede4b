"""The append path (streaming.batch.new_keys) on the streaming job: rows whose keys are
provably new are appended in their own Delta commit, the others MERGEd, and the table
holds exactly the workload's rows; a batch Spark runs again writes nothing twice."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from coordinator.ids import TargetId
from devkit.kafka_local import KafkaBroker
from streaming.config import (
    KafkaSettings,
    RouteSettings,
    Settings,
    SinkSettings,
    SourceSettings,
    TargetSettings,
)

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.timeout(900)]

SHARDS, ROWS = 4, 250
TARGET = TargetId.parse("shop.orders")


def _commits(path: str) -> list[tuple[str, Any]]:
    out = []
    for f in sorted(Path(path, "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
        out.append((info["operation"], next((a["txn"] for a in actions if "txn" in a), None)))
    return out


def _rows(spark: SparkSession, path: str) -> dict[int, dict[str, Any]]:
    return {r["id"]: r.asDict() for r in spark.read.format("delta").load(path).collect()}


def test_new_keys_are_appended_and_the_table_is_exact(
    spark: SparkSession, kafka: KafkaBroker, tmp_path: Path
) -> None:
    from devkit.producer import DebeziumProducer, send_workload
    from devkit.workload import Oracle, sharded_workload
    from streaming.job import build_query

    source = "append" + uuid.uuid4().hex[:8]
    producer = DebeziumProducer(kafka.bootstrap, source)
    events = list(
        sharded_workload(
            SHARDS, ROWS, ddl_at={0.5: "ALTER TABLE {table} ADD COLUMN note VARCHAR(64)"}
        )
    )
    oracle = Oracle()
    for ev in events:
        oracle.take(ev)
    send_workload(producer, events)
    producer.flush()
    expected = oracle.rows

    settings = Settings(
        kafka=KafkaSettings(bootstrap=kafka.bootstrap, max_offsets_per_trigger=450),
        sources=[
            SourceSettings(format="debezium", pattern=source + r"(\..*)?", schema_pattern=source)
        ],
        routes=[RouteSettings(target=str(TARGET), table="orders_*")],
        targets={str(TARGET): TargetSettings(mode="optimistic")},
        # every batch big enough: the islands are read after the first, appends follow
        sink=SinkSettings(path=str(tmp_path / "lake"), append_new_keys=True, append_min_rows=0),
        checkpoint=str(tmp_path / "checkpoint"),
    )
    query, processor = build_query(spark, settings, available_now=True)
    query.awaitTermination()
    assert query.exception() is None
    last = processor.last_stats
    assert last is not None and last.batch >= 2

    path = settings.table_path(TARGET)
    commits = _commits(path)
    appends = [txn for op, txn in commits if op == "WRITE"]
    assert appends, f"no append among the target's commits: {commits}"
    assert all(txn is not None for txn in appends)  # each under its write slot
    assert processor.observer.target_rows[(str(TARGET), "appended")] > 0

    def as_written(row: dict[str, Any]) -> dict[str, Any]:
        return {k: row.get(k) for k in ("id", "user_id", "status", "note")}

    got = _rows(spark, path)
    want = {i: as_written(r) for i, r in expected.items()}
    assert {i: as_written(r) for i, r in got.items()} == want

    # The last batch run again (Spark's commit of it gone, as after a crash right after
    # the state was saved): its MERGE and its append are skipped, nothing is written twice.
    commits_dir = Path(settings.checkpoint, "spark", "commits")
    assert (commits_dir / str(last.batch)).exists()
    (commits_dir / str(last.batch)).unlink()
    (commits_dir / f".{last.batch}.crc").unlink(missing_ok=True)  # Hadoop's checksum of it
    before = len(commits)
    query, processor = build_query(spark, settings, available_now=True)
    query.awaitTermination()
    assert query.exception() is None
    assert processor.last_stats is not None and processor.last_stats.batch == last.batch
    assert len(_commits(path)) == before
    assert {i: as_written(r) for i, r in _rows(spark, path).items()} == want
