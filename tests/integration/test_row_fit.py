"""A row is checked against its own shard's schema, through real Kafka, Spark and Delta.

- A row naming a column its shard does not have yet (a JSON ``null`` included) waits for
  that shard's DDL, even when the target already has the column from another shard; its
  NULL is never replaced by the other shard's default.
- A row without its key (missing or null) is a dead letter naming the column: never a row
  with an invented key.
- A row lacking a NOT NULL column its shard has waits for the shard's DDL (a DROP COLUMN
  not seen yet) instead of being written with an invented value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from schemas import parse_create_table
from tests.integration.test_ordering import BASE, Pipeline, ddl, row

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

NOT_NULL = "CREATE TABLE {t} (id INT PRIMARY KEY, a INT, c INT NOT NULL DEFAULT 5)"
NULLABLE = "CREATE TABLE {t} (id INT PRIMARY KEY, a INT, c INT DEFAULT 5)"


def _dead(p: Pipeline) -> list[str]:
    path = p.settings.dead_letters()
    if not Path(path).exists():
        return []
    return sorted(r["reason"] for r in p.spark.read.format("delta").load(path).collect())


def _start(p: Pipeline) -> tuple[list[Any], list[Any]]:
    """t1 and t2 created; t1 adds ``c INT NOT NULL DEFAULT 5`` and writes a row with it."""
    creates = [ddl(p, t, BASE.format(t=t), BASE) for t in ("t1", "t2")]
    add1 = ddl(p, "t1", "ALTER TABLE t1 ADD COLUMN c INT NOT NULL DEFAULT 5", NOT_NULL)
    return creates + [add1], row(p, "t1", {"id": 1, "a": 1, "c": 7}, NOT_NULL)


def test_a_null_in_a_column_its_shard_lacks_waits_for_the_shard_ddl(kafka, spark, tmp_path):
    """Later batch: t2's row with c = NULL arrives, t2's ADD COLUMN does not yet; the
    target has c (NOT NULL DEFAULT 5, from t1). The row waits, then keeps its NULL."""
    p = Pipeline(kafka, spark, tmp_path, "optimistic")
    controls, t1_row = _start(p)
    add2 = ddl(p, "t2", "ALTER TABLE t2 ADD COLUMN c INT DEFAULT 5", NULLABLE)
    early = row(p, "t2", {"id": 2, "a": 2, "c": None}, NULLABLE)
    p.send(controls + t1_row + early)
    p.run()
    assert p.rows() == [{"id": 1, "a": 1, "c": 7}]
    lock = p.lock()
    assert lock["stage"] == "waiting" and lock["blocked"] == [f"{p.source}.db.t2"]
    p.send([add2])
    p.run()
    assert p.rows() == [{"id": 1, "a": 1, "c": 7}, {"id": 2, "a": 2, "c": None}]
    assert p.lock()["stage"] == "none" and p.lock()["blocked"] == []
    assert _dead(p) == []
    # the early row was held, not written, then replayed: each row counted once
    assert (p.totals["written"], p.totals["held"], p.totals["replayed"]) == (1, 1, 1)


def test_a_null_before_its_shard_ddl_in_one_batch_stays_null(kafka, spark, tmp_path):
    """Same batch, the row delivered before its shard's DDL: it follows the DDL."""
    p = Pipeline(kafka, spark, tmp_path, "optimistic")
    controls, t1_row = _start(p)
    before = row(p, "t2", {"id": 3, "a": 3}, BASE)  # before t2's ADD COLUMN: lacks c
    add2 = ddl(p, "t2", "ALTER TABLE t2 ADD COLUMN c INT DEFAULT 5", NULLABLE)
    early = row(p, "t2", {"id": 2, "a": 2, "c": None}, NULLABLE)
    p.send(controls + t1_row + early + [add2] + before)
    p.run()
    assert p.rows() == [
        {"id": 1, "a": 1, "c": 7},
        {"id": 2, "a": 2, "c": None},
        {"id": 3, "a": 3, "c": 5},  # its shard had no c: the column's default
    ]
    assert p.lock()["stage"] == "none" and p.lock()["blocked"] == []


def test_a_row_without_its_key_is_a_dead_letter(kafka, spark, tmp_path):
    p = Pipeline(kafka, spark, tmp_path, "optimistic")
    create = ddl(p, "t1", BASE.format(t="t1"), BASE)
    good = row(p, "t1", {"id": 1, "a": 1}, BASE)
    keyless = row(p, "t1", {"a": 2}, BASE)
    null_key = row(p, "t1", {"id": None, "a": 3}, BASE)
    schema = parse_create_table(BASE.format(t="t1"))
    delete = list(p.builder.row("db", "t1", "d", {"a": 1}, None, schema))
    p.send([create] + good + keyless + null_key + delete + row(p, "t1", {"id": 4, "a": 4}, BASE))
    p.run()
    assert p.rows() == [{"id": 1, "a": 1}, {"id": 4, "a": 4}]
    shard = f"{p.source}.db.t1"
    assert _dead(p) == [
        f"key column id is missing from after of shard {shard}",
        f"key column id is missing from before of shard {shard}",
        f"key column id is null in after of shard {shard}",
    ]
    assert p.lock()["stage"] == "none" and p.lock()["blocked"] == []


def test_a_row_lacking_a_not_null_column_of_its_shard_is_not_invented(kafka, spark, tmp_path):
    """t1 has c NOT NULL: a row after that without c is ahead of a DDL (a DROP COLUMN),
    and waits for it; when it comes, the row is written as it is."""
    p = Pipeline(kafka, spark, tmp_path, "optimistic")
    create = ddl(p, "t1", NOT_NULL.format(t="t1"), NOT_NULL)
    full = row(p, "t1", {"id": 2, "a": 2, "c": 2}, NOT_NULL)
    drop = ddl(p, "t1", "ALTER TABLE t1 DROP COLUMN c", BASE)
    lacking = row(p, "t1", {"id": 1, "a": 1}, BASE)
    p.send([create] + full + lacking)
    p.run()
    assert p.rows() == [{"id": 2, "a": 2, "c": 2}]
    lock = p.lock()
    assert lock["stage"] == "waiting" and lock["blocked"] == [f"{p.source}.db.t1"]
    p.send([drop])
    p.run()
    assert p.rows() == [{"id": 1, "a": 1}, {"id": 2, "a": 2}]
    assert p.lock()["stage"] == "none"


def test_rows_that_cannot_be_written_in_a_batch_of_rows_only_are_dead_letters(
    kafka, spark, tmp_path
):
    """A batch of rows only takes the fast path (streaming.batch.writer): a row with a null key
    and a value that does not fit its column are still dead letters, counted, and the
    other rows are written."""
    p = Pipeline(kafka, spark, tmp_path, "optimistic")
    p.send([ddl(p, "t1", BASE.format(t="t1"), BASE)] + row(p, "t1", {"id": 1, "a": 1}, BASE))
    p.run()
    keyless = row(p, "t1", {"id": None, "a": 2}, BASE)
    unfit = row(p, "t1", {"id": 3, "a": "three"}, BASE)
    p.send(keyless + unfit + row(p, "t1", {"id": 4, "a": 4}, BASE))
    p.run()
    assert p.rows() == [{"id": 1, "a": 1}, {"id": 4, "a": 4}]
    assert _dead(p) == [
        f"key column id is null in after of shard {p.source}.db.t1",
        "value three of column a does not fit the target type INT",
    ]
    assert p.totals["written"] == 2
