"""Cross-topic order: Debezium writes DDL to the schema-change topic and rows to per-table
topics with nothing ordering one against the other. Records are built in binlog order and
then delivered in adversarial orders; the job must still apply each shard's events in
source order (docs/ordering.md)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from coordinator.ids import TargetId
from devkit.debezium_build import DebeziumBuilder, Record
from schemas import parse_create_table
from streaming.config import (
    KafkaSettings,
    RouteSettings,
    Settings,
    SinkSettings,
    SourceSettings,
    TargetSettings,
)
from streaming.job import build_query
from streaming.storage.state_store import StateStore

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

BASE = "CREATE TABLE {t} (id INT PRIMARY KEY, a INT)"
ADDED = "CREATE TABLE {t} (id INT PRIMARY KEY, a INT, note VARCHAR(20))"
RENAMED = "CREATE TABLE {t} (id INT PRIMARY KEY, b INT)"


class Pipeline:
    def __init__(self, kafka: Any, spark: Any, tmp: Path, mode: str) -> None:
        self.source = "o" + uuid.uuid4().hex[:8]
        self.spark = spark
        self.builder = DebeziumBuilder(self.source)
        self.producer = Producer({"bootstrap.servers": kafka.bootstrap, "enable.idempotence": True})
        self.settings = Settings(
            kafka=KafkaSettings(bootstrap=kafka.bootstrap),
            sources=[SourceSettings(pattern=self.source + r"(\..*)?")],
            routes=[RouteSettings(target="shop.t")],
            targets={"shop.t": TargetSettings(mode=mode)},
            sink=SinkSettings(path=str(tmp / "lake")),
            checkpoint=str(tmp / "ck"),
            # These tests deliver a DDL after the rows that follow it, as if it were still in
            # flight: within the grace, a batch never counts its schema topic as complete.
            ddl_grace_ms=86_400_000,
        )
        self.totals: dict[str, int] = {}  # the batches' counts (metrics), over every run

    def send(self, records: list[Record]) -> None:
        for r in records:
            self.producer.produce(r.topic, r.value, r.key, headers=r.headers or None)
        self.producer.flush(30)

    def run(self) -> None:
        query, processor = build_query(self.spark, self.settings, available_now=True)
        query.awaitTermination()
        assert query.exception() is None
        for key, n in processor.observer.totals.items():
            self.totals[key] = self.totals.get(key, 0) + n

    def rows(self) -> list[dict[str, Any]]:
        df = self.spark.read.format("delta").load(self.settings.table_path(TargetId("shop", "t")))
        return sorted((r.asDict() for r in df.collect()), key=lambda r: r["id"])

    def lock(self) -> dict[str, Any]:
        latest = StateStore(self.spark, self.settings.checkpoint).latest()
        assert latest is not None
        return latest[1]["locks"][0]


def ddl(p: Pipeline, table: str, sql: str, after: str) -> Record:
    return p.builder.ddl("db", table, sql, parse_create_table(after.format(t=table)))


def row(p: Pipeline, table: str, values: dict[str, Any], shape: str) -> list[Record]:
    schema = parse_create_table(shape.format(t=table))
    return list(p.builder.row("db", table, "c", None, values, schema))


def test_rows_ahead_of_their_ddl_wait_for_it_instead_of_failing(kafka, spark, tmp_path):
    p = Pipeline(kafka, spark, tmp_path, "optimistic")
    creates = [ddl(p, t, BASE.format(t=t), BASE) for t in ("t1", "t2")]
    before = row(p, "t1", {"id": 1, "a": 1}, BASE)
    add = ddl(p, "t1", "ALTER TABLE t1 ADD COLUMN note VARCHAR(20)", ADDED)
    after = row(p, "t1", {"id": 2, "a": 2, "note": "x"}, ADDED) + row(
        p, "t1", {"id": 3, "a": 3, "note": "y"}, ADDED
    )
    other = row(p, "t2", {"id": 10, "a": 10}, BASE)
    # The data topic is ahead: t1's rows after its ADD COLUMN arrive, the DDL does not yet.
    p.send(creates + before + after + other)
    p.run()
    assert [r["id"] for r in p.rows()] == [1, 10]  # nothing lost, nothing failed
    lock = p.lock()
    assert lock["stage"] == "waiting" and lock["blocked"] == [f"{p.source}.db.t1"]
    p.send([add])
    p.run()
    assert p.rows() == [
        {"id": 1, "a": 1, "note": None},
        {"id": 2, "a": 2, "note": "x"},
        {"id": 3, "a": 3, "note": "y"},
        {"id": 10, "a": 10, "note": None},
    ]
    assert p.lock()["stage"] == "none"


def test_rows_ahead_of_their_ddl_in_a_batch_without_control_events_wait(kafka, spark, tmp_path):
    """The batch holds rows only, and no schema fingerprints: nothing but the columns the
    rows name tells that t1's are ahead of a DDL. The fast path (streaming.batch.writer) must see
    it before it writes: t1 waits from its first such row, t2's rows are written."""
    p = Pipeline(kafka, spark, tmp_path, "optimistic")
    creates = [ddl(p, t, BASE.format(t=t), BASE) for t in ("t1", "t2")]
    p.send(
        creates + row(p, "t1", {"id": 1, "a": 1}, BASE) + row(p, "t2", {"id": 10, "a": 10}, BASE)
    )
    p.run()
    add = ddl(p, "t1", "ALTER TABLE t1 ADD COLUMN note VARCHAR(20)", ADDED)
    ahead = row(p, "t1", {"id": 2, "a": 2, "note": "x"}, ADDED)
    behind_it = row(p, "t1", {"id": 3, "a": 3, "note": None}, ADDED)
    p.send(ahead + behind_it + row(p, "t2", {"id": 11, "a": 11}, BASE))
    p.run()
    assert [r["id"] for r in p.rows()] == [1, 10, 11]
    lock = p.lock()
    assert lock["stage"] == "waiting" and lock["blocked"] == [f"{p.source}.db.t1"]
    p.send([add])
    p.run()
    assert [(r["id"], r.get("note")) for r in p.rows()] == [
        (1, None), (2, "x"), (3, None), (10, None), (11, None)
    ]  # fmt: skip
    assert p.lock()["stage"] == "none"


def test_rows_behind_a_processed_ddl_are_written_not_held(kafka, spark, tmp_path):
    p = Pipeline(kafka, spark, tmp_path, "pessimistic")
    creates = [ddl(p, t, BASE.format(t=t), BASE) for t in ("t1", "t2")]
    late = row(p, "t1", {"id": 1, "a": 1}, BASE)
    rename = ddl(p, "t1", "ALTER TABLE t1 CHANGE a b INT", RENAMED)
    after = row(p, "t1", {"id": 2, "b": 2}, RENAMED)
    # The schema-change topic is ahead: t1's DDL is processed (t1 held) before a row that
    # precedes it in the binlog arrives; that row belongs before the hold.
    p.send(creates + [rename] + after)
    p.run()
    assert p.rows() == []
    p.send(late)
    p.run()
    assert p.rows() == [{"id": 1, "a": 1}]
    assert p.lock()["blocked"] == [f"{p.source}.db.t1"]
    p.send([ddl(p, "t2", "ALTER TABLE t2 CHANGE a b INT", RENAMED)])
    p.run()
    assert p.rows() == [{"id": 1, "b": 1}, {"id": 2, "b": 2}]


def test_ddl_and_rows_of_several_shards_interleaved_in_one_batch(kafka, spark, tmp_path):
    p = Pipeline(kafka, spark, tmp_path, "optimistic")
    creates = [ddl(p, t, BASE.format(t=t), BASE) for t in ("t1", "t2")]
    r1 = row(p, "t1", {"id": 1, "a": 1}, BASE)
    c1 = ddl(p, "t1", "ALTER TABLE t1 CHANGE a b INT", RENAMED)
    r2 = row(p, "t1", {"id": 2, "b": 2}, RENAMED)
    r3 = row(p, "t2", {"id": 3, "a": 3}, BASE)
    c2 = ddl(p, "t2", "ALTER TABLE t2 CHANGE a b INT", RENAMED)
    r4 = row(p, "t2", {"id": 4, "b": 4}, RENAMED)
    # Everything in one batch, delivered newest-first per topic group.
    p.send(creates + [c2, c1] + r4 + r2 + r3 + r1)
    p.run()
    assert p.rows() == [{"id": i, "b": i} for i in (1, 2, 3, 4)]
    assert p.lock()["stage"] == "none"


def test_a_row_behind_a_rename_that_ran_downstream_takes_the_new_name(kafka, spark, tmp_path):
    p = Pipeline(kafka, spark, tmp_path, "optimistic")
    creates = [ddl(p, t, BASE.format(t=t), BASE) for t in ("t1", "t2")]
    late1 = row(p, "t1", {"id": 1, "a": 1}, BASE)
    late2 = row(p, "t2", {"id": 2, "a": 2}, BASE)
    renames = [ddl(p, t, f"ALTER TABLE {t} CHANGE a b INT", RENAMED) for t in ("t1", "t2")]
    after = row(p, "t1", {"id": 3, "b": 3}, RENAMED)
    # Both shards' renames arrive (the rename runs downstream) before the rows that precede
    # them in the binlog: those rows still say "a".
    p.send(creates + renames + after)
    p.run()
    assert p.rows() == [{"id": 3, "b": 3}]
    assert p.lock()["stage"] == "none"
    p.send(late1 + late2)
    p.run()
    assert p.rows() == [{"id": 1, "b": 1}, {"id": 2, "b": 2}, {"id": 3, "b": 3}]
    dead = Path(p.settings.dead_letters())
    assert not dead.exists() or spark.read.format("delta").load(str(dead)).count() == 0


def test_a_row_behind_a_dropped_column_is_written_without_it(kafka, spark, tmp_path):
    p = Pipeline(kafka, spark, tmp_path, "optimistic")
    creates = [ddl(p, t, ADDED.format(t=t), ADDED) for t in ("t1", "t2")]
    late = row(p, "t1", {"id": 1, "a": 1, "note": "old"}, ADDED)
    drops = [ddl(p, t, f"ALTER TABLE {t} DROP COLUMN note", BASE) for t in ("t1", "t2")]
    after = row(p, "t2", {"id": 2, "a": 2}, BASE)
    # Both drops arrive (the column goes downstream) before a row that precedes t1's drop.
    p.send(creates + drops + after)
    p.run()
    assert p.rows() == [{"id": 2, "a": 2}]
    p.send(late)
    p.run()
    assert p.rows() == [{"id": 1, "a": 1}, {"id": 2, "a": 2}]
    assert p.lock()["stage"] == "none" and p.lock()["blocked"] == []


def test_a_value_that_does_not_fit_its_column_is_a_dead_letter(kafka, spark, tmp_path):
    """A malformed value goes to the dead letters with the column named; the job goes on.
    An integral value written as a decimal ("2.0", a DOUBLE shard column) is taken."""
    p = Pipeline(kafka, spark, tmp_path, "optimistic")
    p.send(
        [ddl(p, "t1", BASE.format(t="t1"), BASE)]
        + row(p, "t1", {"id": 1, "a": "abc"}, BASE)
        + row(p, "t1", {"id": 2, "a": 2.0}, BASE)
        + row(p, "t1", {"id": 3, "a": 30}, BASE)
        + row(p, "t1", {"id": 100, "a": -100.00}, BASE)
    )
    p.run()
    assert p.rows() == [{"id": 2, "a": 2}, {"id": 3, "a": 30}, {"id": 100, "a": -100}]
    dead = spark.read.format("delta").load(p.settings.dead_letters()).collect()
    assert [r["reason"] for r in dead] == ["value abc of column a does not fit the target type INT"]
    assert p.lock()["stage"] == "none"


def test_a_snapshot_drop_if_exists_before_create_does_not_hold_the_shard(kafka, spark, tmp_path):
    # Debezium's snapshot carries `DROP TABLE IF EXISTS` before each CREATE TABLE: the
    # shard is cut while still unknown, and registered later in the same batch. Its rows
    # follow the table created; nothing waits for a DDL that already ran.
    p = Pipeline(kafka, spark, tmp_path, "optimistic")
    records = []
    for t in ("t1", "t2"):
        records.append(ddl(p, t, f"DROP TABLE IF EXISTS `db`.`{t}`", BASE))
        records.append(ddl(p, t, BASE.format(t=t), BASE))
    records += row(p, "t1", {"id": 1, "a": 1}, BASE) + row(p, "t2", {"id": 2, "a": 2}, BASE)
    p.send(records)
    p.run()
    assert p.rows() == [{"id": 1, "a": 1}, {"id": 2, "a": 2}]
    lock = p.lock()
    assert lock["stage"] == "none" and lock["blocked"] == []


def test_a_type_change_whose_ddl_has_not_arrived_waits_for_it(kafka, spark, tmp_path):
    # A MODIFY names no new column: only the rows' schema fingerprint shows that t1's
    # table changed before its DDL arrived. Written at once, 2**40 would not fit INT.
    wide = "CREATE TABLE {t} (id INT PRIMARY KEY, a BIGINT)"
    p = Pipeline(kafka, spark, tmp_path, "optimistic")
    p.builder = DebeziumBuilder(p.source, schemas_enable=True)  # the fingerprint's source
    creates = [ddl(p, t, BASE.format(t=t), BASE) for t in ("t1", "t2")]
    before = row(p, "t1", {"id": 1, "a": 1}, BASE)
    modify = ddl(p, "t1", "ALTER TABLE t1 MODIFY a BIGINT", wide)
    after = row(p, "t1", {"id": 2, "a": 2**40}, wide)
    p.send(creates + before + after + row(p, "t2", {"id": 10, "a": 10}, BASE))
    p.run()
    assert [r["id"] for r in p.rows()] == [1, 10]
    lock = p.lock()
    assert lock["stage"] == "waiting" and lock["blocked"] == [f"{p.source}.db.t1"]
    p.send([modify])
    p.run()
    assert p.rows() == [{"id": 1, "a": 1}, {"id": 2, "a": 2**40}, {"id": 10, "a": 10}]
    assert p.lock()["stage"] == "none"
