"""The lag view's pure parts: the offsets log read from a checkpoint, the Kafka options
kafka-python takes, a topic's shard. The brokers' side: tests/integration/test_lag.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming.config import Settings
from streaming.ops.lag import LagError, classify, client_options, committed_offsets, lag_report


def settings(tmp: Path, **kafka: object) -> Settings:
    return Settings.model_validate(
        {
            "kafka": {"bootstrap": "127.0.0.1:9", **kafka},
            "sources": [
                {"format": "debezium", "pattern": "src[12](\\..*)?"},
                {"format": "canal", "topics": ["binlog_all"], "source": "c1"},
            ],
            "routes": [{"target": "shop.orders", "db": "db_*", "table": "orders_*"}],
            "sink": {"path": str(tmp / "lake")},
            "checkpoint": str(tmp / "cp"),
        }
    )


def write_batch(root: Path, batch: int, lines: list[str], commit: bool = True) -> None:
    for d in ("offsets", "commits"):
        (root / "spark" / d).mkdir(parents=True, exist_ok=True)
    meta = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 1000 + batch})
    (root / "spark" / "offsets" / str(batch)).write_text("\n".join(["v1", meta, *lines]))
    if commit:
        (root / "spark" / "commits" / str(batch)).write_text("v1\n{}")


def test_the_latest_committed_batch_s_offsets_not_a_planned_one(tmp_path: Path) -> None:
    root = tmp_path / "cp"
    assert committed_offsets(str(root)) is None
    write_batch(root, 0, ['{"src1.db_0.orders_0":{"0":5,"1":2}}', "-"])
    write_batch(root, 1, ['{"src1.db_0.orders_0":{"0":9,"1":2}}', '{"src1":{"0":4}}'])
    write_batch(root, 2, ['{"src1.db_0.orders_0":{"0":12,"1":3}}'], commit=False)
    batch, planned, offsets = committed_offsets(str(root)) or (None, None, {})
    assert (batch, planned) == (1, 1001)
    assert offsets == {("src1.db_0.orders_0", 0): 9, ("src1.db_0.orders_0", 1): 2, ("src1", 0): 4}


def test_a_log_that_is_not_spark_s_is_refused_with_its_path(tmp_path: Path) -> None:
    root = tmp_path / "cp"
    write_batch(root, 0, ["[1, 2]"])
    with pytest.raises(LagError, match=r"offsets/0: not the offsets of a Kafka source"):
        committed_offsets(str(root))
    (root / "spark" / "commits" / "1").write_text("v1\n{}")
    with pytest.raises(LagError, match="batch 1 is committed but its offsets are not there"):
        committed_offsets(str(root))


def test_topics_are_a_shard_s_a_schema_change_or_shared(tmp_path: Path) -> None:
    s = settings(tmp_path)
    router = s.router()
    assert classify("src1.db_3.orders_7", s.sources, router) == (
        "shard", "src1.db_3.orders_7", "shop.orders"
    )  # fmt: skip
    assert classify("src2.db_3.audit", s.sources, router) == ("shard", "src2.db_3.audit", None)
    assert classify("src1", s.sources, router) == ("schema", None, None)
    assert classify("src1.orders", s.sources, router) == ("shared", None, None)  # routed
    assert classify("binlog_all", s.sources, router) == ("shared", None, None)  # canal


def test_kafka_options_kafka_python_takes_and_those_it_does_not(tmp_path: Path) -> None:
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="al\\"ice" password="p;w=\\\\x";'
    )
    s = settings(
        tmp_path,
        options={
            "security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": jaas,
            "ssl.keystore.location": "/k.jks",
        },
    )
    options, foreign = client_options(s)
    assert options == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": 'al"ice',
        "sasl_plain_password": "p;w=\\x",
    }
    assert foreign == ["ssl.keystore.location"]


def test_lag_counts_a_partition_the_job_never_read_from_its_beginning(tmp_path: Path) -> None:
    s = settings(tmp_path)
    write_batch(tmp_path / "cp", 4, ['{"src1.db_0.orders_0":{"0":9}}'])
    ends = {("src1.db_0.orders_0", 0): 10, ("src1.db_1.orders_0", 0): 30, ("src1.orders", 0): 8}
    starts = {("src1.db_1.orders_0", 0): 25, ("src1.orders", 0): 0}

    def offsets(known: set[tuple[str, int]]) -> tuple[dict, dict]:
        assert known == {("src1.db_0.orders_0", 0)}
        return ends, {k: v for k, v in starts.items() if k not in known}

    out = lag_report(s, offsets).as_json(now_ms=2004)
    assert out["batch"] == 4 and out["age_seconds"] == 1.0
    assert out["targets"]["shop.orders"]["behind"] == 1 + 5
    assert out["shared_topics"] == {"src1.orders": {"behind": 8, "partitions": 1}}


def test_read_cost_advises_past_the_open_files_the_pool_and_topics_per_shard() -> None:
    from streaming.ops.lag import read_cost

    few = read_cost({"src1.orders": 16, "src1": 1}, 20_000, 16_384)
    assert (few.partitions, few.descriptors, few.advice) == (17, 17 * 12, ())
    many = {f"src1.db_{i // 16}.orders_{i % 16}": 1 for i in range(4096)}
    cost = read_cost(many, 20_000, 64)
    assert cost.partitions == 4096 and cost.descriptors == 4096 * 12
    files, pool, routing = cost.advice
    assert "more than half its limit of 20,000" in files and "98,304 or more" in files
    assert "pools 64 Kafka consumers" in pool and "set it to 4,096" in pool
    assert "4,096 topics" in routing and "one topic per logical table" in routing
    # one routed topic of 4,096 partitions: the pool and files, never routing
    routed = read_cost({"src1.orders": 4096}, None, None)
    assert routed.advice == ()
