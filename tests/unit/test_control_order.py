"""The global order of control events (DDL, TRUNCATE) within one micro-batch."""

from __future__ import annotations

from typing import Any

from streaming.source.control import in_global_order, join_split_renames


def control(source: str, ddl: str, ts_ms: int, pos: int, offset: int, snapshot: bool = False):
    return {"source": source, "db": "db1", "tbl": "tb1", "op": "ddl", "ddl": ddl,
            "ts_ms": ts_ms, "pos_file": "binlog.000001", "pos": pos, "pos_row": 0,
            "offset": offset, "snapshot": snapshot}  # fmt: skip


def order(controls: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(r["source"], r["ddl"]) for r in in_global_order(controls)]


def test_a_snapshot_ddl_comes_before_a_later_binlog_ddl_of_the_same_second() -> None:
    # Seen with Debezium on MariaDB: s2's snapshot read its CREATE TABLE at 12.964 s; s1's
    # ALTER committed at 12.990 s, but the binlog stamps it 12.000. s2's table existed
    # before the ALTER, so it must be registered first.
    controls = [
        control("s1", "CREATE TABLE tb1 (id INT PRIMARY KEY, a INT)", 12_412, 1931, 6, True),
        control("s1", "ALTER TABLE tb1 CHANGE a c INT", 12_000, 1973, 11),
        control("s2", "CREATE TABLE tb1 (id INT PRIMARY KEY, a INT)", 12_964, 2107, 7, True),
    ]
    assert order(controls) == [
        ("s1", "CREATE TABLE tb1 (id INT PRIMARY KEY, a INT)"),
        ("s2", "CREATE TABLE tb1 (id INT PRIMARY KEY, a INT)"),
        ("s1", "ALTER TABLE tb1 CHANGE a c INT"),
    ]


def test_binlog_ddls_of_different_sources_go_by_commit_time() -> None:
    controls = [
        control("s1", "ALTER TABLE tb1 ADD COLUMN b INT", 14_000, 3000, 12),
        control("s2", "ALTER TABLE tb1 ADD COLUMN c INT", 13_000, 2500, 9),
    ]
    assert [s for s, _ in order(controls)] == ["s2", "s1"]


def test_one_source_keeps_binlog_order_when_its_commit_times_step_back() -> None:
    controls = [
        control("s1", "ALTER TABLE tb1 ADD COLUMN b INT", 15_000, 3000, 12),
        control("s1", "ALTER TABLE tb1 ADD COLUMN c INT", 14_000, 3100, 13),
        control("s2", "ALTER TABLE tb1 ADD COLUMN d INT", 14_500, 900, 4),
    ]
    assert order(controls) == [
        ("s1", "ALTER TABLE tb1 ADD COLUMN b INT"),
        ("s2", "ALTER TABLE tb1 ADD COLUMN d INT"),
        ("s1", "ALTER TABLE tb1 ADD COLUMN c INT"),
    ]


def test_a_rename_split_by_the_cdc_tool_is_one_statement_again() -> None:
    # Debezium on MariaDB, gh-ost's cut-over: one binlog event, two schema-change events.
    controls = [
        control("s1", "ALTER TABLE _tb1_gho ADD COLUMN c INT", 13_000, 2332, 12),
        control("s1", "RENAME TABLE tb1 TO _tb1_del", 13_000, 3189, 13),
        control("s1", "RENAME TABLE _tb1_gho TO tb1", 13_000, 3189, 14),
        control("s2", "RENAME TABLE tb9 TO tb8", 13_000, 3189, 3),  # another source
        control("s1", "RENAME TABLE tb7 TO tb6", 13_000, 3400, 15),  # a later statement
    ]
    joined = in_global_order(join_split_renames(controls))
    assert [(r["source"], r["ddl"], r["offset"]) for r in joined] == [
        ("s1", "ALTER TABLE _tb1_gho ADD COLUMN c INT", 12),
        ("s1", "RENAME TABLE tb1 TO _tb1_del, _tb1_gho TO tb1", 13),
        ("s1", "RENAME TABLE tb7 TO tb6", 15),
        ("s2", "RENAME TABLE tb9 TO tb8", 3),
    ]
