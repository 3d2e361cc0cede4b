"""Delta's idempotent writes are keyed by the checkpoint's own id: a new checkpoint on an
existing lake has none of its writes skipped, and a batch Spark runs again (its commit
lost) is skipped whole: no row, no dead letter, no Delta commit twice."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from coordinator.ids import TargetId
from streaming.fs.hadoop import join
from streaming.storage.state_store import StateStore
from tests.integration.test_ordering import BASE, Pipeline, ddl, row

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def rows_of(p: Pipeline, ids: range) -> list:
    return [r for i in ids for r in row(p, "t1", {"id": i, "a": i}, BASE)]


def test_a_new_checkpoint_on_an_existing_lake_writes_every_row(kafka, spark, tmp_path: Path):
    p = Pipeline(kafka, spark, tmp_path, "optimistic")
    p.send([ddl(p, "t1", BASE.format(t="t1"), BASE)] + rows_of(p, range(0, 5)))
    p.run()
    for first in (5, 10):  # a few batches, so the old checkpoint's batch ids run ahead
        p.send(rows_of(p, range(first, first + 5)))
        p.run()
    old_id = StateStore(spark, p.settings.checkpoint).app_id()
    # The operator starts again with a new checkpoint on the same lake, more data arrives.
    p.settings = p.settings.model_copy(update={"checkpoint": str(tmp_path / "ck-new")})
    p.send(rows_of(p, range(15, 20)))
    p.run()
    assert StateStore(spark, p.settings.checkpoint).app_id() != old_id
    assert [r["id"] for r in p.rows()] == list(range(20))


def test_a_batch_run_again_after_its_commit_was_lost_writes_nothing_twice(
    kafka, spark, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    p = Pipeline(kafka, spark, tmp_path, "optimistic")
    p.send([ddl(p, "t1", BASE.format(t="t1"), BASE)] + rows_of(p, range(0, 5)))
    p.run()
    p.send(rows_of(p, range(5, 10)) + row(p, "t1", {"id": 0, "a": 100}, BASE))
    # an undecodable record: the batch appends a dead letter for it
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    producer.produce(f"{p.source}.db.t1", b"not json", b"k")
    producer.flush(30)
    p.run()
    table = p.settings.table_path(TargetId("shop", "t"))
    before = (p.rows(), _versions(spark, table), _dead_letters(spark, p))
    assert before[2] == 1 and len(before[0]) == 10
    commits = Path(tmp_path / "ck" / "spark" / "commits")
    last = max(int(f.name) for f in commits.iterdir() if f.name.isdigit())
    (commits / str(last)).unlink()  # Spark runs batch `last` again on restart
    (commits / f".{last}.crc").unlink(missing_ok=True)
    with caplog.at_level("INFO", logger="shardmerge.writer"):
        p.run()
    assert (p.rows(), _versions(spark, table), _dead_letters(spark, p)) == before
    # the fast path's MERGE, skipped by Delta unread, is counted at once: it never waits
    # for what reading its source would have reported (it waited 60 s)
    said = [r.getMessage() for r in caplog.records if r.name == "shardmerge.writer"]
    assert any("written by an earlier run of the batch" in m for m in said), said
    assert not any("gave no observed counts" in m for m in said), said
    # it did run again: the state of batch `last` has a second attempt
    names = StateStore(spark, p.settings.checkpoint).fs.names(
        join(p.settings.checkpoint, "shardmerge", "state")
    )
    assert f"{last:012d}-000002.ok" in names


def _versions(spark, path: str) -> int:
    return spark.sql(f"DESCRIBE HISTORY delta.`{path}`").count()


def _dead_letters(spark, p: Pipeline) -> int:
    return spark.read.format("delta").load(p.settings.dead_letters()).count()
