"""Real Debezium messages with ENUM and SET members holding backslashes, quotes, a comma
and a newline, replayed through Kafka, Spark and Delta: the Delta table holds what the
shard held (``tests/fixtures/debezium-real/enum-set-members.json``; docs/upstream.md).

A snapshot row carries the member itself; a binlog row the member as Debezium's DDL
parser kept it (``c\\d`` as ``c\\\\d``), which the job maps back (schemas.debezium_enum)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devkit.debezium_build import Record
from tests.integration.test_ordering import Pipeline

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

REAL = json.loads(
    (
        Path(__file__).resolve().parents[1] / "fixtures" / "debezium-real" / "enum-set-members.json"
    ).read_text()
)


def test_real_enum_and_set_values_reach_delta_as_the_shard_holds_them(kafka, spark, tmp_path):
    p = Pipeline(kafka, spark, tmp_path, "optimistic")
    prefix = REAL["run_prefix"]
    records = [
        Record(
            p.source + r["topic"][len(prefix) + len("s1") :],
            r["key"].encode() if r["key"] is not None else None,
            r["value"].encode() if r["value"] is not None else None,
        )
        for r in REAL["records"]
    ]
    p.send(records)
    p.run()
    want = [{"id": i, "e": e, "s": s} for i, e, s in REAL["shard_rows"]]
    assert p.rows() == want
