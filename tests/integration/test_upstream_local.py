"""The real upstream: MariaDB's binlog through Debezium on Kafka Connect into the broker.

One test (starting the upstream costs ~12 s): a row before the connector starts comes as a
snapshot read, then insert/update/ALTER/TRUNCATE come as c/u, a schema-change event and t;
DECIMAL is bytes with its scale in the schema; stopping leaves no process behind.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer

from devkit.kafka_local import KafkaBroker
from devkit.upstream_local import running, status

pytestmark = pytest.mark.timeout(180)


def consume(bootstrap: str, topics: list[str], done: Any, timeout: float = 40.0) -> list[Any]:
    """(topic, key, value) of every message until ``done(messages)`` or the timeout."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"it-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    consumer.subscribe(topics)
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while not done(got) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:  # a topic not created yet
                continue
            value = msg.value()
            key = msg.key()
            got.append((msg.topic(), key and json.loads(key), value and json.loads(value)))
    finally:
        consumer.close()
    return got


def unscaled(field_schema: dict[str, Any], b64: str) -> Decimal:
    scale = int(field_schema["parameters"]["scale"])
    return Decimal(int.from_bytes(base64.b64decode(b64), "big", signed=True)).scaleb(-scale)


@pytest.mark.kafka
def test_binlog_to_kafka_snapshot_dml_ddl_truncate(kafka: KafkaBroker, tmp_path: Path) -> None:
    run = f"it{uuid.uuid4().hex[:8]}."
    with running(kafka.bootstrap, sources=("s1", "s2"), name="it", base_dir=tmp_path) as up:
        pids = up.pids()
        assert set(up.servers) == {"s1", "s2"}
        assert status("it", tmp_path) is not None
        s1 = up.servers["s1"]
        s1.execute("CREATE DATABASE db1")
        s1.execute(
            "CREATE TABLE db1.tb1 (id INT PRIMARY KEY, amount DECIMAL(10,2), at DATETIME(3))"
        )
        s1.execute("INSERT INTO db1.tb1 VALUES (1, 12.34, '2024-01-02 03:04:05.678')")
        up.add_connector("s1", run_prefix=run, bootstrap=kafka.bootstrap)
        s1.execute("INSERT INTO db1.tb1 VALUES (2, -99.99, '2024-02-03 04:05:06.007')")
        s1.execute("UPDATE db1.tb1 SET amount = 1.50 WHERE id = 1")
        s1.execute("ALTER TABLE db1.tb1 ADD COLUMN note VARCHAR(20)")
        s1.execute("INSERT INTO db1.tb1 VALUES (3, 0.01, NULL, 'x')")
        s1.execute("TRUNCATE TABLE db1.tb1")

        data_topic, ddl_topic = f"{run}s1.db1.tb1", f"{run}s1"
        got = consume(
            kafka.bootstrap,
            [data_topic, ddl_topic],
            lambda got: (
                any(v and v["payload"].get("op") == "t" for _, _, v in got)
                and any("ALTER TABLE" in (v["payload"].get("ddl") or "") for _, _, v in got)
            ),
        )

    data = [v for t, _, v in got if t == data_topic]
    ops = [v["payload"]["op"] for v in data]
    assert ops == ["r", "c", "u", "c", "t"], ops
    snap, ins = data[0], data[1]
    assert snap["payload"]["source"]["name"] == "s1"
    after_schema = next(f for f in ins["schema"]["fields"] if f["field"] == "after")
    amount_schema = next(f for f in after_schema["fields"] if f["field"] == "amount")
    assert amount_schema["type"] == "bytes"
    assert amount_schema["name"] == "org.apache.kafka.connect.data.Decimal"
    assert amount_schema["parameters"]["scale"] == "2"
    assert unscaled(amount_schema, snap["payload"]["after"]["amount"]) == Decimal("12.34")
    assert unscaled(amount_schema, ins["payload"]["after"]["amount"]) == Decimal("-99.99")
    # DATETIME(3) in adaptive_time_microseconds mode: epoch millis, no time zone.
    assert ins["payload"]["after"]["at"] == 1706933106007
    assert data[2]["payload"]["before"]["id"] == 1
    assert "note" in data[3]["payload"]["after"]

    ddls = [v["payload"]["ddl"] for t, _, v in got if t == ddl_topic]
    assert any(d.startswith("CREATE TABLE `tb1`") for d in ddls), ddls
    assert "ALTER TABLE db1.tb1 ADD COLUMN note VARCHAR(20)" in ddls

    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid), f"pid {pid} survived stop"
    assert status("it", tmp_path) is None


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True
