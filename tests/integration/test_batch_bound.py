"""A micro-batch holding hundreds of control events writes each Delta table a bounded
number of times, whatever their number: the Delta log of the target and of the stash
says so, and every row arrives under the target's final schema."""

from __future__ import annotations

import json
import uuid
from collections import Counter
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

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.timeout(1200)]

# 32 shards x (CREATE TABLE + 6 ALTERs): 224 control events in one batch.
SHARDS, ROWS = 32, 40
ROLLOUT = {
    0.15: "ALTER TABLE {table} ADD COLUMN note VARCHAR(64)",
    0.3: "ALTER TABLE {table} CHANGE note memo VARCHAR(64)",
    0.45: "ALTER TABLE {table} ADD COLUMN c1 INT",
    0.6: "ALTER TABLE {table} ADD COLUMN c2 INT",
    0.7: "ALTER TABLE {table} ADD COLUMN c3 INT",
    0.85: "ALTER TABLE {table} DROP COLUMN c2",
}
TARGET = TargetId.parse("shop.orders")


def _operations(path: str) -> list[dict[str, Any]]:
    """Every commit of the Delta table at ``path``: its operation and transaction."""
    commits = []
    for f in sorted(Path(path, "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
        txn = next((a["txn"] for a in actions if "txn" in a), None)
        commits.append({"operation": info["operation"], "txn": txn})
    return commits


@pytest.mark.parametrize("mode", ["optimistic", "pessimistic"])
def test_a_batch_of_hundreds_of_control_events_merges_once(
    spark: SparkSession, kafka: KafkaBroker, tmp_path: Path, mode: str
) -> None:
    from devkit.producer import DebeziumProducer
    from devkit.workload import sharded_workload
    from streaming.job import build_query

    source = "bound" + uuid.uuid4().hex[:8]
    producer = DebeziumProducer(kafka.bootstrap, source)
    expected: dict[int, dict[str, Any]] = {}
    for ev in sharded_workload(SHARDS, ROWS, ddl_at=ROLLOUT):
        if ev.kind == "row":
            producer.row(ev.db, ev.table, ev.op, ev.before, ev.after, ev.schema)  # type: ignore[arg-type]
            if ev.op == "d":
                assert ev.before is not None
                expected.pop(ev.before["id"])
            else:
                assert ev.after is not None
                expected[ev.after["id"]] = ev.after
        else:
            producer.ddl(ev.db, ev.table, ev.statement or "", ev.schema)
    producer.flush()

    settings = Settings(
        kafka=KafkaSettings(bootstrap=kafka.bootstrap, max_offsets_per_trigger=10_000_000),
        sources=[
            SourceSettings(format="debezium", pattern=source + r"(\..*)?", schema_pattern=source)
        ],
        routes=[RouteSettings(target=str(TARGET), table="orders_*")],
        targets={str(TARGET): TargetSettings(mode=mode)},
        sink=SinkSettings(path=str(tmp_path / "lake")),
        checkpoint=str(tmp_path / "checkpoint"),
    )
    query, processor = build_query(spark, settings, available_now=True)
    query.awaitTermination()
    assert query.exception() is None
    stats = processor.last_stats
    # One batch read everything: every control event of the rollout was in it.
    assert stats is not None and stats.batch == 0 and stats.ddl == (1 + len(ROLLOUT)) * SHARDS
    # Every shard's hold (on the rename in optimistic mode, on each DDL in pessimistic mode)
    # began and ended in this batch: nothing was stashed, so the releases replay nothing and
    # the target takes the fast path (no summary aggregate before its MERGE).
    assert (stats.fast_path, stats.replayed, stats.held) == (1, 0, 0), stats

    ops = Counter(c["operation"] for c in _operations(settings.table_path(TARGET)))
    # The downstream ran each change once; every row of the batch, before and after each
    # DDL of every shard, went in one MERGE; nothing was deleted.
    assert ops == {
        "CREATE TABLE": 1, "ADD COLUMNS": 4, "RENAME COLUMN": 1, "DROP COLUMNS": 1, "MERGE": 1
    }  # fmt: skip
    stash = Path(processor.stash_path, "_delta_log")
    if stash.exists():
        stash_ops = Counter(c["operation"] for c in _operations(processor.stash_path))
        assert stash_ops["WRITE"] <= 1 and stash_ops["MERGE"] <= 1

    got = {
        r["id"]: r["memo"]
        for r in spark.read.format("delta").load(settings.table_path(TARGET)).collect()
    }
    # Rows before a shard's rename carry ``note`` and take the new name; rows before its
    # ADD COLUMN have neither (NULL).
    assert got == {i: row.get("memo", row.get("note")) for i, row in expected.items()}
