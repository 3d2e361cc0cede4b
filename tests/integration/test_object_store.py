"""The job on a real S3 API (moto's server on loopback, through Hadoop's S3A): the state
store's checks on an object store, and a pipeline whose checkpoint, state, stash and lake
all live in a bucket, with the stash compacted and vacuumed on its schedule."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from delta.tables import DeltaTable

from coordinator.ids import TargetId
from streaming.job import maintain_stash
from streaming.state_store import StateStore
from tests.integration.test_ordering import ADDED, BASE, Pipeline, ddl, row
from tests.integration.test_state_store import CHECKS

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_state_store_on_s3(spark, bucket: str, check: Callable[[StateStore], None]) -> None:
    check(StateStore(spark, f"{bucket}/checkpoints/job"))


def test_a_pipeline_with_checkpoint_and_lake_on_s3(kafka, spark, bucket: str, tmp_path: Path):
    p = Pipeline(kafka, spark, tmp_path, "optimistic")
    p.settings = p.settings.model_copy(
        update={
            "checkpoint": f"{bucket}/checkpoints/shop",
            "sink": p.settings.sink.model_copy(update={"path": f"{bucket}/lake"}),
            "stash_maintenance_every": 1,
        }
    )
    creates = [ddl(p, t, BASE.format(t=t), BASE) for t in ("t1", "t2")]
    add = ddl(p, "t1", "ALTER TABLE t1 ADD COLUMN note VARCHAR(20)", ADDED)
    ahead = row(p, "t1", {"id": 2, "a": 2, "note": "x"}, ADDED)
    # t1's row after its ADD COLUMN arrives before the DDL: it waits in the stash (on S3).
    p.send(creates + row(p, "t1", {"id": 1, "a": 1}, BASE) + ahead)
    p.run()
    assert [r["id"] for r in p.rows()] == [1]
    p.send([add, *row(p, "t2", {"id": 3, "a": 3}, BASE)])
    p.run()
    assert p.rows() == [
        {"id": 1, "a": 1, "note": None},
        {"id": 2, "a": 2, "note": "x"},
        {"id": 3, "a": 3, "note": None},
    ]
    assert p.settings.table_path(TargetId("shop", "t")).startswith("s3a://")
    store = StateStore(spark, p.settings.checkpoint)
    assert store.latest() is not None and store.latest()[1]["locks"][0]["stage"] == "none"
    stash = store.uri("stash")
    # the schedule ran on the job's stash (every batch here): its retention is set
    properties = _detail(spark, stash)["properties"]
    assert properties.get("delta.deletedFileRetentionDuration") == "interval 1 days"
    assert spark.read.format("delta").load(stash).count() == 0  # released, none left


def test_the_stash_is_compacted_and_vacuumed(spark, bucket: str):
    path = f"{bucket}/checkpoint/shardmerge/stash"
    maintain_stash(spark, path)  # no stash yet: nothing to do, no table made
    assert not DeltaTable.isDeltaTable(spark, path)
    for first in (0, 10, 20):
        spark.range(first, first + 10).coalesce(1).write.format("delta").mode("append").save(path)
    assert _detail(spark, path)["numFiles"] == 3
    maintain_stash(spark, path)
    detail = _detail(spark, path)
    assert detail["numFiles"] == 1 and detail["properties"]["delta.logRetentionDuration"]
    assert sorted(r.id for r in spark.read.format("delta").load(path).collect()) == list(range(30))
    operations = [h["operation"] for h in DeltaTable.forPath(spark, path).history().collect()]
    assert "OPTIMIZE" in operations, operations


def _detail(spark, path: str):
    return DeltaTable.forPath(spark, path).detail().collect()[0]
