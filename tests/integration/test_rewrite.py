"""A type change Delta cannot make in place never stops the job: it is refused (SinkError,
which the batch turns into stage conflict), or, with rewrite_incompatible, made by one
idempotent overwrite commit that casts every row. Real Delta tables."""

from __future__ import annotations

import itertools
from decimal import Decimal
from pathlib import Path

import pytest
from delta.tables import DeltaTable

from coordinator.decisions import ApplyDDL
from coordinator.ids import TargetId
from schemas import parse_create_table
from schemas.changes import AlterTable
from schemas.ddl import parse_ddl
from streaming.sql.quoting import table_at
from streaming.storage.delta_sink import DeltaSink, SinkError

pytestmark = pytest.mark.spark

T = TargetId("shop", "t")


def modify(sql: str, after: str) -> ApplyDDL:
    (change,) = parse_ddl(sql)
    assert isinstance(change, AlterTable)
    return ApplyDDL(T, change.specs, parse_create_table(after), sql, "test")


def commits(spark, path: str) -> int:
    return DeltaTable.forPath(spark, path).history().count()


def table(spark, path: str, rows: list[tuple[int, str]], *, widening: bool = True) -> DeltaSink:
    sink = DeltaSink(spark, "test-rewrite", lambda target: path)
    if widening:
        sink.create_at(
            path, parse_create_table("CREATE TABLE t (id INT PRIMARY KEY, p DECIMAL(5,2))")
        )
    else:  # a table made by hand, without type widening
        spark.sql(f"CREATE TABLE {table_at(path)} (id INT, p INT) USING DELTA")
    values = ", ".join(f"({i}, {p})" for i, p in rows)
    spark.sql(f"INSERT INTO {table_at(path)} VALUES {values}")
    return sink


MODIFY = "ALTER TABLE t MODIFY p DECIMAL(5,3)"
AFTER = "CREATE TABLE t (id INT PRIMARY KEY, p DECIMAL(5,3))"


def test_not_a_widening_is_refused_with_advice(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    sink = table(spark, path, [(1, "1.25"), (2, "12.50")])
    before = commits(spark, path)
    with pytest.raises(SinkError, match="rewrite_incompatible") as e:
        sink.alter(modify(MODIFY, AFTER), itertools.count(1).__next__)
    assert "from DECIMAL(5,2) to DECIMAL(5,3)" in str(e.value)
    assert sink.columns(T)["p"] == "DECIMAL(5,2)"
    assert commits(spark, path) == before


def test_rewrite_casts_every_row_in_one_commit_once(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    sink = table(spark, path, [(1, "1.25"), (2, "12.50"), (3, "NULL")])
    before = commits(spark, path)
    decision = modify(MODIFY, AFTER)
    sink.alter(decision, itertools.count(7_000_001).__next__, rewrite=True)
    assert commits(spark, path) == before + 1
    assert sink.columns(T)["p"] == "DECIMAL(5,3)"
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
    assert rows == [(1, Decimal("1.250")), (2, Decimal("12.500")), (3, None)]
    # The same decision again (a re-run batch): nothing more is written.
    sink.alter(decision, itertools.count(7_000_001).__next__, rewrite=True)
    assert commits(spark, path) == before + 1
    # The table keeps column mapping: a later rename still runs in place.
    spark.sql(f"ALTER TABLE {table_at(path)} RENAME COLUMN p TO q")
    assert sorted(sink.columns(T)) == ["id", "q"]


def test_rewrite_is_refused_naming_values_that_do_not_fit(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    sink = table(spark, path, [(1, "1.25"), (2, "100.00"), (3, "-100.00")])
    before = commits(spark, path)
    with pytest.raises(SinkError) as e:
        sink.alter(modify(MODIFY, AFTER), itertools.count(1).__next__, rewrite=True)
    message = str(e.value)
    assert "column 'p'" in message and "2 value(s) do not fit" in message
    assert "id=2: 100.00" in message and "id=3: -100.00" in message
    assert commits(spark, path) == before
    assert spark.read.format("delta").load(path).where("id = 2").first()["p"] == Decimal("100.00")


def test_delta_refusing_a_widening_is_a_refusal(spark, tmp_path: Path) -> None:
    """INT -> BIGINT is a widening, but a table without type widening refuses it."""
    path = str(tmp_path / "t")
    sink = table(spark, path, [(1, "5")], widening=False)
    decision = modify(
        "ALTER TABLE t MODIFY p BIGINT", "CREATE TABLE t (id INT PRIMARY KEY, p BIGINT)"
    )
    with pytest.raises(SinkError, match="in place"):
        sink.alter(decision, itertools.count(1).__next__)
    assert sink.columns(T)["p"] == "INT"
    sink.alter(decision, itertools.count(1).__next__, rewrite=True)
    assert sink.columns(T)["p"] == "BIGINT"
    assert spark.sql(f"SELECT p FROM {table_at(path)} WHERE id = 1").first()[0] == 5
