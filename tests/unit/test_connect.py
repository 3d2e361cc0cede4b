"""Connect field schemas both ways (schemas.connect) and the cut-over of a shadow table
known only from the schema its rows carry (Coordinator.shadow_rows)."""

from __future__ import annotations

import json

import pytest

from coordinator import Coordinator, Extract, Route, Router, ShardId, TargetConfig, TargetId
from coordinator.state import restore, snapshot
from schemas import parse_create_table
from schemas.connect import (
    ConnectField,
    carried_schema,
    connect_field,
    parse_fields,
    row_schema_text,
    value_fields,
)
from schemas.errors import SchemaError

TYPES = (
    "TINYINT", "SMALLINT UNSIGNED", "MEDIUMINT", "INT", "INT UNSIGNED", "BIGINT", "FLOAT",
    "DOUBLE", "DECIMAL(12,3)", "CHAR(3)", "VARCHAR(40)", "TEXT", "LONGTEXT", "BINARY(4)",
    "VARBINARY(9)", "BLOB", "DATE", "TIME(6)", "DATETIME", "DATETIME(6)", "TIMESTAMP(3)",
    "YEAR", "BIT(1)", "BIT(12)", "ENUM('a','b c')", "SET('x','y')", "JSON",
)  # fmt: skip
WIDE = (
    "CREATE TABLE t (id INT PRIMARY KEY, "
    + ", ".join(f"c{i} {t}" for i, t in enumerate(TYPES))
    + ")"
)


@pytest.mark.parametrize("mode", ["string", "base64"])
def test_a_field_read_back_gives_the_same_field(mode: str) -> None:
    for col in parse_create_table(WIDE).columns:
        field = connect_field(col, mode)  # type: ignore[arg-type]
        back = ConnectField.of(field)
        assert back.same_as(col), col
        again = connect_field(back.column(), mode)  # type: ignore[arg-type]
        assert (again["type"], again.get("name"), again.get("parameters")) == (
            field["type"],
            field.get("name"),
            field.get("parameters"),
        ), col


def test_ambiguous_fields_read_back_as_the_widest_type_of_the_commonest_kind() -> None:
    def read(sql_type: str) -> str:
        col = parse_create_table(f"CREATE TABLE t (c {sql_type})").columns[0]
        return ConnectField.of(connect_field(col)).column().type.type_sql()

    assert read("VARCHAR(3)") == read("TEXT") == "VARCHAR(16383)"
    assert read("TINYINT") == "SMALLINT" and read("INT UNSIGNED") == "BIGINT"
    assert read("BLOB") == "VARBINARY(65535)"
    assert read("DECIMAL(5,2)") == "VARCHAR(16383)"  # decimal.handling.mode=string


def test_source_type_parameters_give_the_exact_type() -> None:
    field = {
        "field": "c",
        "type": "string",
        "optional": True,
        "parameters": {
            "__debezium.source.column.type": "VARCHAR",
            "__debezium.source.column.length": "40",
        },
    }
    assert ConnectField.of(field).column().type.type_sql() == "VARCHAR(40)"
    real = parse_create_table("CREATE TABLE t (c VARCHAR(20))").columns[0]
    assert not ConnectField.of(field).same_as(real)  # a widening the plain field hides
    dec = {**field, "parameters": {
        "__debezium.source.column.type": "DECIMAL UNSIGNED",
        "__debezium.source.column.length": "10",
        "__debezium.source.column.scale": "2",
    }}  # fmt: skip
    assert ConnectField.of(dec).column().type.type_sql() == "DECIMAL(10,2) UNSIGNED"


REAL = parse_create_table(
    "CREATE TABLE tb1 (id INT PRIMARY KEY, a INT, b VARCHAR(10) DEFAULT 'x', KEY ia (a))"
)


def fields(sql: str) -> tuple[ConnectField, ...]:
    return parse_fields(row_schema_text(value_fields(parse_create_table(sql))))


def test_the_carried_schema_keeps_what_the_rows_cannot_tell_and_changes_what_they_can() -> None:
    shadow = "CREATE TABLE s (id INT PRIMARY KEY, a BIGINT NOT NULL, b VARCHAR(99), c TEXT)"
    got = carried_schema(REAL, fields(shadow))
    assert [c.to_sql() for c in got.columns] == [
        "`id` INT NOT NULL",
        "`a` BIGINT NOT NULL",  # int32 -> int64, nullability from the field
        "`b` VARCHAR(10) NULL DEFAULT 'x'",  # a string is a string: the real definition
        "`c` VARCHAR(16383) NULL",
    ]
    assert got.primary_key == ("id",) and [i.name for i in got.indexes] == ["ia"]
    known = parse_create_table("CREATE TABLE o (id INT PRIMARY KEY, c TINYTEXT)")
    got = carried_schema(REAL, fields(shadow), (known,))
    assert got.column("c").type.type_sql() == "TINYTEXT"  # another shard's column


def test_a_carried_schema_that_cannot_be_read_is_an_error_naming_why() -> None:
    with pytest.raises(SchemaError, match="primary key column 'id'"):
        carried_schema(REAL, fields("CREATE TABLE s (a INT, b VARCHAR(10))"))
    geo = ConnectField.of(
        {"field": "g", "type": "struct", "name": "io.debezium.data.geometry.Point"}
    )
    with pytest.raises(SchemaError, match="no MySQL type reads back from Connect struct"):
        carried_schema(REAL, (*fields("CREATE TABLE s (id INT)"), geo))
    for text, why in [
        ("{", "not JSON"),
        ('{"a": 1}', "not a list"),
        ('[["a","int32",null,true,{}],["A","int32",null,true,{}]]', "names a column twice"),
        ('[[null,"int32",null,true,{}]]', "needs a name and a type"),
    ]:
        with pytest.raises(SchemaError, match=why):
            parse_fields(text)


T = TargetId("shardddl", "tb")
S1, S2 = ShardId.parse("s1.db1.tb1"), ShardId.parse("s2.db1.tb1")
GHO = ShardId.parse("s1.db1._tb1_gho")
CUT_OVER = "RENAME TABLE tb1 TO _tb1_del, _tb1_gho TO tb1"
BASE = "CREATE TABLE {t} (id INT PRIMARY KEY, a INT, b VARCHAR(10))"
SHADOW = "CREATE TABLE _tb1_gho (id INT PRIMARY KEY, a BIGINT, b VARCHAR(10), c INT)"


def coord(mode: str = "optimistic") -> tuple[Coordinator, Router, dict[TargetId, TargetConfig]]:
    router = Router((Route(T, extract=Extract()),))
    configs = {T: TargetConfig(mode, False)}
    c = Coordinator(router, configs)
    for s in (S1, S2):
        c.register(s, parse_create_table(BASE.format(t=s.table)))
    return c, router, configs


def carried(sql: str) -> str:
    return row_schema_text(value_fields(parse_create_table(sql)))


def test_a_cut_over_of_a_shadow_never_read_takes_the_schema_its_rows_carried() -> None:
    c, router, configs = coord()
    c.shadow_rows(S1, [(1, carried(SHADOW))])  # not a shadow: nothing kept
    c.shadow_rows(GHO, [(2, carried(SHADOW))])
    assert list(c.carried) == [GHO]
    c = restore(json.loads(json.dumps(snapshot(c))), router, configs)  # kept across restarts
    d = c.on_ddl(S1, CUT_OVER, 3)
    assert [type(x).__name__ for x in d] == ["ApplyDDL"]
    assert d[0].schema.column("a").type.type_sql() == "BIGINT" and d[0].schema.has_column("c")
    assert c.carried == {} and c.locks()[0].stage == "none"


def test_only_rows_before_the_cut_over_count_and_a_read_create_wins() -> None:
    c, _, _ = coord()
    later = "CREATE TABLE _tb1_gho (id INT PRIMARY KEY, a INT, b VARCHAR(10), z INT)"
    c.shadow_rows(GHO, [(9, carried(later)), (2, carried(SHADOW)), (4, carried(SHADOW))])
    assert [p for p, _ in c.carried[GHO]] == [2, 9]  # a schema from its first row on
    d = c.on_ddl(S1, CUT_OVER, 5)
    assert not d[0].schema.has_column("z")
    assert [p for p, _ in c.carried[GHO]] == [9]  # the next migration's shadow, seen ahead
    # a shadow whose CREATE was read: its rows' schemas are not needed
    c2, _, _ = coord()
    c2.register(GHO, parse_create_table(SHADOW))
    c2.shadow_rows(GHO, [(2, carried(later))])
    assert c2.carried == {}


def test_a_cut_over_whose_rows_schema_cannot_be_read_waits_and_says_why() -> None:
    c, _, _ = coord()
    c.shadow_rows(GHO, [(2, carried("CREATE TABLE _tb1_gho (a INT, b VARCHAR(10))"))])
    c.on_ddl(S1, CUT_OVER, 3)
    lock = c.locks()[0]
    assert lock.stage == "conflict" and list(lock.blocked) == [S1]
    assert "the schema its rows carry cannot be read back" in (lock.conflict or "")
    assert "primary key column 'id'" in (lock.conflict or "")


def test_a_dropped_shadow_or_database_forgets_its_rows_schemas() -> None:
    c, _, _ = coord()
    c.shadow_rows(GHO, [(2, carried(SHADOW))])
    c.on_ddl(GHO, "DROP TABLE _tb1_gho", 3)
    assert c.carried == {}
    c.shadow_rows(GHO, [(4, carried(SHADOW))])
    c.on_ddl(S1, "DROP DATABASE db1", 5)
    assert c.carried == {}


def test_canal_mysql_types_read_back_exactly() -> None:
    text = json.dumps([["id", "int(11)"], ["b", "varchar(64)"], ["c", "enum('x','y')"]])
    got = carried_schema(REAL, parse_fields(text))
    assert [c.to_sql() for c in got.columns] == [
        "`id` INT NOT NULL",  # mysqlType says nothing of NULL: the definition's stays
        "`b` VARCHAR(64) NULL",  # a widening Debezium's plain `string` would hide
        "`c` ENUM('x','y') NULL",
    ]
    with pytest.raises(SchemaError, match="MySQL type 'nonsense"):
        carried_schema(REAL, parse_fields(json.dumps([["id", "int"], ["z", "nonsense("]])))


def test_hostile_names_read_back_and_render_as_themselves() -> None:
    from schemas.ddl import apply, parse_ddl
    from schemas.lattice import diff
    from schemas.render import alter_sql

    real = parse_create_table("CREATE TABLE t (id INT PRIMARY KEY, b INT)")
    hostile = "a`b'c;--"
    text = row_schema_text(
        [
            {"field": "id", "type": "int32", "optional": False},
            {"field": "b", "type": "int32", "optional": True},
            {"field": hostile, "type": "string", "optional": True},
            {"field": "x y", "type": "int64", "optional": True},
        ]
    )
    got = carried_schema(real, parse_fields(text))
    sql = alter_sql("t", diff(real, got))
    # the second column goes AFTER the hostile one: that name is quoted there too
    assert sql.endswith("AFTER `a``b'c;--`")
    assert apply(parse_ddl(sql)[0], real) == got
