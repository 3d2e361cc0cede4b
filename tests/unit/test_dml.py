"""Scenario DML, one statement a line."""

from __future__ import annotations

import pytest

from schemas.dml import DMLError, DmlStatement, parse_dml
from schemas.model import TableName
from shardmerge.errors import ShardMergeError

T = TableName("tb1")


def dml(sql: str, expected: DmlStatement) -> None:
    assert parse_dml(sql) == expected, sql


def rejected(sql: str, reason: str) -> None:
    with pytest.raises(DMLError) as info:
        parse_dml(sql)
    assert info.value.statement == sql and sql in str(info.value)
    assert reason in info.value.reason, info.value.reason


def test_insert() -> None:
    dml(
        "INSERT INTO tb1 (id, a) VALUES (1, 'x')", DmlStatement("insert", T, ({"id": 1, "a": "x"},))
    )
    dml(
        "insert into `db`.`tb1` (`id`, b) values (1, NULL), (2, -3);",
        DmlStatement("insert", TableName("tb1", "db"), ({"id": 1, "b": None}, {"id": 2, "b": -3})),
    )
    dml(
        "INSERT INTO tb1 (a, b, c, d) VALUES (1.50, -2.5, 1e3, TRUE)",
        DmlStatement("insert", T, ({"a": "1.50", "b": "-2.5", "c": 1000.0, "d": 1},)),
    )
    dml("INSERT INTO tb1 (s) VALUES ('it''s')", DmlStatement("insert", T, ({"s": "it's"},)))


def test_update() -> None:
    dml(
        "UPDATE tb1 SET a = 1, b = 'y' WHERE id = 5",
        DmlStatement("update", T, key={"id": 5}, set={"a": 1, "b": "y"}),
    )
    dml(
        "update tb1 set a = null where id = 5 and k = 2",
        DmlStatement("update", T, key={"id": 5, "k": 2}, set={"a": None}),
    )


def test_delete() -> None:
    dml("DELETE FROM tb1 WHERE id = 5", DmlStatement("delete", T, key={"id": 5}))
    dml(
        "DELETE FROM tb1 WHERE id = 5 AND k = 'x' AND j = 1",
        DmlStatement("delete", T, key={"id": 5, "k": "x", "j": 1}),
    )


def test_rejected() -> None:
    rejected("DELETE FROM tb1", "WHERE")
    rejected("UPDATE tb1 SET a = 1", "WHERE")
    rejected("INSERT INTO tb1 VALUES (1)", "column list")
    rejected("INSERT INTO tb1 (a, b) VALUES (1)", "1 values for 2 columns")
    rejected("INSERT INTO tb1 (a) SELECT 1", "VALUES")
    rejected("INSERT IGNORE INTO tb1 (a) VALUES (1)", "plain INSERT")
    rejected("UPDATE tb1 SET a = NOW() WHERE id = 1", "NOW()")
    rejected("DELETE FROM tb1 WHERE id > 1", "column = value")
    rejected("DELETE FROM tb1 WHERE id = 1 OR id = 2", "column = value")
    rejected("DELETE FROM tb1 WHERE id = 1 LIMIT 1", "LIMIT")
    rejected("SELECT 1", "SELECT")
    rejected("ALTER TABLE tb1 ADD a INT", "ALTER")
    rejected("INSERT INTO tb1 (a) VALUES (1); DELETE FROM tb1 WHERE a = 1", "one statement")
    rejected("garbage (", "cannot parse")


def test_dml_error_is_a_shardmerge_error() -> None:
    assert issubclass(DMLError, ShardMergeError)
