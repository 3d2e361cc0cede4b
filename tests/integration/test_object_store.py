"""The job's storage on a real S3 API (moto's server on loopback, through Hadoop's S3A):
the state store's checks on an object store, and the stash's compaction there. The whole
job with checkpoint and lake in a bucket runs in tests/integration/test_cluster.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from delta.tables import DeltaTable

from streaming.job import maintain_stash
from streaming.state_store import StateStore
from tests.integration.test_state_store import CHECKS

pytestmark = [pytest.mark.spark]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_state_store_on_s3(spark, bucket: str, check: Callable[[StateStore], None]) -> None:
    check(StateStore(spark, f"{bucket}/checkpoints/job"))


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
