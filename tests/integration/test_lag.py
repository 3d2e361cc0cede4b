"""``shardmerge lag`` against a real broker (no Spark): a checkpoint's offsets log, as
Spark writes it, against the brokers' end offsets, per target, shard and topic."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from devkit.kafka_local import KafkaBroker
from streaming.config import Settings
from streaming.ops.lag import LagError, lag_report

pytestmark = [pytest.mark.kafka]


def _settings(bootstrap: str, prefix: str, checkpoint: Path) -> Settings:
    return Settings.model_validate(
        {
            "kafka": {"bootstrap": bootstrap},
            "sources": [{"format": "debezium", "pattern": f"{prefix}(\\..*)?"}],
            "routes": [{"target": "shop.orders", "db": "db_*", "table": "orders_*"}],
            "sink": {"path": str(checkpoint.parent / "lake")},
            "checkpoint": str(checkpoint),
        }
    )


def _produce(bootstrap: str, counts: dict[tuple[str, int], int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    sizes: dict[str, int] = {}
    for topic, part in counts:
        sizes[topic] = max(sizes.get(topic, 0), part + 1)
    for future in admin.create_topics([NewTopic(t, n, 1) for t, n in sizes.items()]).values():
        future.result(timeout=30)
    p = Producer({"bootstrap.servers": bootstrap})
    for (topic, part), n in counts.items():
        for i in range(n):
            p.produce(topic, b"{}", f"k{i}".encode(), partition=part)
    assert p.flush(30) == 0


def _checkpoint(root: Path, batch: int, planned_ms: int, lines: list[dict], commit: bool) -> None:
    spark = root / "spark"
    (spark / "offsets").mkdir(parents=True, exist_ok=True)
    (spark / "commits").mkdir(parents=True, exist_ok=True)
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": planned_ms, "conf": {}}
    text = "\n".join(["v1", json.dumps(meta), *[json.dumps(x) for x in lines]])
    (spark / "offsets" / str(batch)).write_text(text)
    if commit:
        (spark / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_lag_per_target_shard_and_shared_topic(kafka: KafkaBroker, tmp_path: Path) -> None:
    prefix = "lg" + uuid.uuid4().hex[:6]
    a, b, other = f"{prefix}.db_0.orders_0", f"{prefix}.db_1.orders_3", f"{prefix}.db_0.audit"
    routed, schema = f"{prefix}.orders", prefix
    _produce(
        kafka.bootstrap,
        {(a, 0): 10, (b, 0): 7, (other, 0): 2, (routed, 0): 5, (routed, 1): 4, (schema, 0): 3},
    )
    checkpoint = tmp_path / "cp"
    settings = _settings(kafka.bootstrap, prefix, checkpoint)
    # before any commit: everything is behind
    report = lag_report(settings).as_json(int(time.time() * 1000))
    assert report["batch"] is None and report["behind"] == 10 + 7 + 2 + 5 + 4
    # batch 3 committed (a read to 6, b to the end, routed p0 to 2), batch 4 planned only
    now = int(time.time() * 1000)
    _checkpoint(checkpoint, 3, now - 5000, [{a: {"0": 6}, b: {"0": 7}, routed: {"0": 2}}, {schema: {"0": 3}}], True)  # fmt: skip
    _checkpoint(checkpoint, 4, now, [{a: {"0": 10}}], False)
    out = lag_report(settings).as_json(now)
    assert out["batch"] == 3 and 4.0 <= out["age_seconds"] <= 6.0
    target = out["targets"]["shop.orders"]
    assert target["behind"] == 4 and target["shards"] == 2 and target["shards_behind"] == 1
    assert target["worst"] == [{"shard": f"{prefix}.db_0.orders_0", "behind": 4}]
    # a table no route takes is a shard without a target; a routed topic is shared: per
    # topic (its partition 1 never read: behind from the beginning)
    assert out["shards"][f"{prefix}.db_0.audit"] == 2
    assert out["shared_topics"] == {routed: {"behind": 3 + 4, "partitions": 2}}
    assert out["schema_topics"] == {schema: {"behind": 0, "partitions": 1}}
    assert out["behind"] == 4 + 0 + 2 + 7
    # the CLI prints the same, and the JSON form is that report
    config = tmp_path / "job.yaml"
    config.write_text(json.dumps(settings.model_dump(mode="json", exclude_none=True)))
    done = subprocess.run(
        [sys.executable, "-m", "shardmerge.cli", "lag", "--config", str(config), "--partitions"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert "after batch 3" in done.stdout and "13 records behind" in done.stdout, done.stdout
    assert f"{prefix}.db_0.orders_0 4" in done.stdout and routed in done.stdout, done.stdout


def test_lag_names_the_broker_it_cannot_reach(tmp_path: Path) -> None:
    settings = _settings("127.0.0.1:9", "x", tmp_path / "cp")
    with pytest.raises(LagError, match=r"127\.0\.0\.1:9"):
        lag_report(settings, timeout_ms=2000)
