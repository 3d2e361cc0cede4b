"""Three coordination rules of the semantics, each checked where it is decided.

- an AUTO_INCREMENT column is NOT NULL without default: adding it on some shards is a
  conflict DDL in optimistic mode;
- pessimistic locks compare the schema change a DDL makes, not its words;
- DDLs queued behind a pending conflict DDL count for nothing until it resolves: the
  stage stays ``waiting`` while the other shards can still catch up.
"""

from __future__ import annotations

import pytest

from coordinator import Coordinator, Route, Router, ShardId, TargetConfig, TargetId
from schemas import parse_create_table
from schemas.changes import AlterTable
from schemas.ddl import parse_ddl

T = TargetId("shardddl", "tb")
S1, S2 = ShardId.parse("s1.db1.tb1"), ShardId.parse("s2.db1.tb1")
BASE = "CREATE TABLE tb1 (id INT PRIMARY KEY, a INT, b INT, g VARCHAR(10))"


def coord(mode: str) -> Coordinator:
    c = Coordinator(Router((Route(T),)), {T: TargetConfig(mode, False)})
    for s in (S1, S2):
        c.register(s, parse_create_table(BASE))
    return c


class Feed:
    def __init__(self, c: Coordinator) -> None:
        self.c, self.pos = c, 0

    def ddl(self, shard: ShardId, sql: str) -> str:
        self.pos += 1
        self.c.on_ddl(shard, sql, ("binlog.000001", self.pos))
        return self.c.locks()[0].stage


# --- AUTO_INCREMENT ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        "seq INT AUTO_INCREMENT UNIQUE",
        "seq INT NULL AUTO_INCREMENT UNIQUE",
        "seq BIGINT UNSIGNED AUTO_INCREMENT, ADD UNIQUE KEY (seq)",
    ],
)
def test_auto_increment_column_is_not_null_without_default(spec: str) -> None:
    (change,) = parse_ddl(f"ALTER TABLE tb1 ADD COLUMN {spec}")
    assert isinstance(change, AlterTable)
    column = change.specs[0].column  # type: ignore[union-attr]
    assert column.auto_increment and not column.nullable and column.default is None
    assert not column.has_default


def test_auto_increment_with_a_default_is_refused_as_mysql_does() -> None:
    from schemas.ddl import InvalidDDLError

    with pytest.raises(InvalidDDLError, match="AUTO_INCREMENT"):
        parse_ddl("ALTER TABLE tb1 ADD COLUMN seq INT AUTO_INCREMENT DEFAULT 1 UNIQUE")


def test_adding_auto_increment_on_one_shard_is_a_held_conflict_ddl() -> None:
    f = Feed(coord("optimistic"))
    assert f.ddl(S1, "ALTER TABLE tb1 ADD COLUMN seq INT NULL AUTO_INCREMENT UNIQUE") == "waiting"
    assert f.c.locks()[0].blocked == (S1,)
    assert f.c.locks()[0].schema is not None
    assert not f.c.locks()[0].schema.has_column("seq")  # not run downstream as a plain ADD
    assert f.ddl(S2, "ALTER TABLE tb1 ADD COLUMN seq INT AUTO_INCREMENT UNIQUE") == "none"
    assert f.c.locks()[0].schema.has_column("seq")  # type: ignore[union-attr]


# --- pessimistic: the resulting schema change --------------------------------------------


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("RENAME COLUMN a TO c", "CHANGE a c INT"),
        ("CHANGE COLUMN `A` `C` int(11)", "RENAME COLUMN a TO c"),
        ("MODIFY a BIGINT", "CHANGE a a BIGINT"),
        ("ALTER COLUMN b SET DEFAULT 5", "MODIFY b INT DEFAULT 5"),
        ("ALTER COLUMN b SET DEFAULT '5'", "CHANGE b b INT NULL DEFAULT 5"),
        ("ADD INDEX (a)", "ADD KEY a (a)"),
    ],
)
def test_pessimistic_same_change_in_other_words_is_the_same_ddl(first: str, second: str) -> None:
    f = Feed(coord("pessimistic"))
    assert f.ddl(S1, f"ALTER TABLE tb1 {first}") == "waiting"
    assert f.ddl(S2, f"ALTER TABLE tb1 {second}") == "none"
    assert f.c.locks()[0].blocked == ()


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("RENAME COLUMN a TO c", "DROP COLUMN a, ADD COLUMN c INT AFTER id"),
        ("RENAME COLUMN a TO c", "CHANGE a c BIGINT"),
        ("ADD COLUMN c INT", "ADD COLUMN c INT FIRST"),
        ("ALTER COLUMN b SET DEFAULT 5", "MODIFY b INT DEFAULT 6"),
        ("MODIFY a INT NOT NULL", "MODIFY a INT"),
    ],
)
def test_pessimistic_different_changes_conflict(first: str, second: str) -> None:
    f = Feed(coord("pessimistic"))
    f.ddl(S1, f"ALTER TABLE tb1 {first}")
    assert f.ddl(S2, f"ALTER TABLE tb1 {second}") == "conflict"


def test_effect_tells_a_rename_from_a_drop_and_an_add() -> None:
    from schemas.ddl import effect

    schema = parse_create_table(BASE)
    (rename,) = parse_ddl("ALTER TABLE tb1 RENAME COLUMN a TO c")
    (change,) = parse_ddl("ALTER TABLE tb1 CHANGE a c INT")
    (dropadd,) = parse_ddl("ALTER TABLE tb1 DROP COLUMN a, ADD COLUMN c INT AFTER id")
    assert isinstance(rename, AlterTable) and isinstance(change, AlterTable)
    assert isinstance(dropadd, AlterTable)
    assert effect(rename, schema) == effect(change, schema)
    assert effect(rename, schema)[0] == effect(dropadd, schema)[0]
    assert dict(effect(rename, schema)[1])["c"] == "a"
    assert dict(effect(dropadd, schema)[1])["c"] is None


# --- stage: queued DDLs behind a pending conflict DDL ------------------------------------

SEQUENCE = [
    "ALTER TABLE tb1 RENAME COLUMN a TO c",
    "ALTER TABLE tb1 ADD COLUMN d INT",
    "ALTER TABLE tb1 RENAME COLUMN b TO e",
    "ALTER TABLE tb1 ADD COLUMN f INT NOT NULL",
]


@pytest.mark.parametrize("mode", ["optimistic", "pessimistic"])
def test_queued_ddls_keep_the_lock_waiting_throughout(mode: str) -> None:
    f = Feed(coord(mode))
    for sql in SEQUENCE:
        assert f.ddl(S1, sql) == "waiting", sql
    for sql in SEQUENCE[:-1]:
        assert f.ddl(S2, sql) == "waiting", sql
        assert f.c.locks()[0].conflict is None
    assert f.ddl(S2, SEQUENCE[-1]) == "none"
    schema = f.c.locks()[0].schema
    assert schema is not None
    assert set(schema.column_names()) == {"id", "c", "e", "g", "d", "f"}


def test_a_real_contradiction_behind_a_queue_is_still_a_conflict() -> None:
    f = Feed(coord("optimistic"))
    assert f.ddl(S1, "ALTER TABLE tb1 RENAME COLUMN a TO c") == "waiting"
    assert f.ddl(S1, "ALTER TABLE tb1 ADD COLUMN d INT") == "waiting"
    assert f.ddl(S2, "ALTER TABLE tb1 RENAME COLUMN a TO x") == "conflict"
