"""No error is read as "absent": a failure while a release reads the stash fails the batch,
and the batch run again delivers every held row exactly once."""

from __future__ import annotations

import json

import pytest

from streaming.faults import reset_raise_counts
from streaming.job import build_query
from streaming.storage.state_store import StateStore
from tests.integration.test_ordering import ADDED, BASE, Pipeline, ddl, row

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def held_ids(p: Pipeline) -> list[int]:
    stash = StateStore(p.spark, p.settings.checkpoint).uri("stash")
    rows = p.spark.read.format("delta").load(stash).select("after").collect()
    return sorted(json.loads(r["after"])["id"] for r in rows if r["after"])


def test_a_failing_stash_read_fails_the_batch_and_the_rerun_releases_once(
    kafka, spark, tmp_path, monkeypatch
):
    p = Pipeline(kafka, spark, tmp_path, "pessimistic")
    p.send(
        [ddl(p, t, BASE.format(t=t), BASE) for t in ("t1", "t2")]
        + row(p, "t1", {"id": 1, "a": 1}, BASE)
        + row(p, "t2", {"id": 2, "a": 2}, BASE)
        + [ddl(p, "t1", "ALTER TABLE t1 ADD COLUMN note VARCHAR(20)", ADDED)]
        + row(p, "t1", {"id": 3, "a": 3, "note": "x"}, ADDED)
        + row(p, "t1", {"id": 4, "a": 4, "note": "y"}, ADDED)
    )
    p.run()
    assert [r["id"] for r in p.rows()] == [1, 2]
    assert held_ids(p) == [3, 4]

    # t2's DDL syncs the lock: the release reads the stash, and that read fails.
    p.send(
        [ddl(p, "t2", "ALTER TABLE t2 ADD COLUMN note VARCHAR(20)", ADDED)]
        + row(p, "t2", {"id": 5, "a": 5, "note": "z"}, ADDED)
    )
    monkeypatch.setenv("SHARDMERGE_RAISE_AT", "stash_read:1")
    reset_raise_counts()
    query, _ = build_query(spark, p.settings, available_now=True)
    with pytest.raises(Exception, match="injected fault at stash_read"):
        query.awaitTermination()
    assert query.exception() is not None
    # Nothing was taken for "no stash": the held rows are still there, not downstream.
    assert held_ids(p) == [3, 4]
    assert {r["id"] for r in p.rows()} <= {1, 2, 5}
    assert p.lock()["blocked"] == [f"{p.source}.db.t1"]

    monkeypatch.delenv("SHARDMERGE_RAISE_AT")
    p.run()  # Spark runs the failed batch again from the same offsets and state
    assert p.rows() == [
        {"id": 1, "a": 1, "note": None},
        {"id": 2, "a": 2, "note": None},
        {"id": 3, "a": 3, "note": "x"},
        {"id": 4, "a": 4, "note": "y"},
        {"id": 5, "a": 5, "note": "z"},
    ]
    assert held_ids(p) == []
    assert p.lock()["stage"] == "none" and p.lock()["blocked"] == []


def test_only_a_path_without_a_delta_log_is_no_table(spark, tmp_path):
    """A stash or target that is there but unreadable (a file in its place, a log Delta
    cannot read) raises; only a path without a Delta log is "no table"."""
    from streaming.storage.delta_sink import StorageUnreadable, delta_table_at

    table = str(tmp_path / "table")
    assert delta_table_at(spark, str(tmp_path / "nothing")) is False
    spark.range(3).write.format("delta").save(table)
    assert delta_table_at(spark, table) is True

    orphan = tmp_path / "orphan"  # data files of a first write that never committed
    spark.range(3).write.parquet(str(orphan))
    assert delta_table_at(spark, str(orphan)) is False

    away = tmp_path / "away"  # the storage fault of the fault suite: a file in its place
    away.write_text("not a table")
    with pytest.raises(StorageUnreadable, match="cannot be read as a Delta table"):
        delta_table_at(spark, str(away))

    # the table goes away for a while, then comes back: it is a table again (Delta's
    # cached "no table here" from the outage is not believed)
    (tmp_path / "table").rename(tmp_path / "table.away")
    (tmp_path / "table").write_text("storage fault")
    with pytest.raises(StorageUnreadable):
        delta_table_at(spark, table)
    (tmp_path / "table").unlink()
    (tmp_path / "table.away").rename(tmp_path / "table")
    assert delta_table_at(spark, table) is True
    assert spark.read.format("delta").load(table).count() == 3

    broken = tmp_path / "broken"  # a log that is there but cannot be read
    (broken / "_delta_log").mkdir(parents=True)
    (broken / "_delta_log" / "00000000000000000000.json").write_text("{not json")
    with pytest.raises(Exception):  # noqa: B017 Delta's own error, or StorageUnreadable
        delta_table_at(spark, str(broken))
