"""ENUM and SET members as Debezium names them, and back (schemas.debezium_enum).

The real messages in ``tests/fixtures/debezium-real/enum-set-members.json`` (Debezium
3.5.0's MariaDB connector on MariaDB 10.11) are the evidence: a snapshot row holds the
member, a binlog row the member as Debezium's DDL parser kept it (``c\\d`` arrives as
``c\\\\d``). The job maps the latter back by the members it parsed itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from devkit.debezium_build import DebeziumBuilder
from schemas import parse_create_table
from schemas.connect import ConnectField, connect_field
from schemas.ddl import apply, parse_ddl
from schemas.debezium_enum import (
    debezium_forms,
    debezium_member,
    from_allowed,
    to_allowed,
    value_map,
)
from schemas.model import ColumnType, TableSchema
from streaming.sql.spark_types import debezium_member_expr

REAL = json.loads(
    (
        Path(__file__).resolve().parents[1] / "fixtures" / "debezium-real" / "enum-set-members.json"
    ).read_text()
)
MEMBERS = st.lists(
    st.text(
        alphabet=["\\", "'", '"', ",", "a", "é", "\n", "\r", "\0", "\x1a", "\t", " "], max_size=6
    ),
    min_size=1,
    max_size=6,
    unique=True,
)


def _data() -> list[dict[str, Any]]:
    """The data messages' payloads, in order (tombstones left out)."""
    out = []
    for rec in REAL["records"]:
        if rec["value"] is None or rec["topic"].count(".") < 3:
            continue
        out.append(json.loads(rec["value"]))
    return out


def _schemas() -> tuple[TableSchema, TableSchema]:
    """The table as the job parses it from the snapshot's CREATE TABLE, and after the
    binlog's ALTER (the statements Debezium parsed too)."""
    before = parse_create_table(REAL["show_create"])
    [alter] = parse_ddl(REAL["alter_sql"])
    return before, apply(alter, before)


def _schema_of(payload: dict[str, Any], schemas: tuple[TableSchema, TableSchema]) -> TableSchema:
    """The table as Debezium had parsed it for this row: inserts 10 to 20 came before the
    ALTER, the rest after it."""
    row = payload["after"]
    return schemas[0] if payload["op"] in ("r", "c") and row["id"] < 30 else schemas[1]


def test_a_snapshot_row_holds_the_member_a_binlog_row_debeziums_name_for_it() -> None:
    """What the real messages show, byte for byte: the rule gives Debezium's names."""
    schemas = _schemas()
    kinds = []
    for msg in _data():
        payload = msg["payload"]
        row = payload["after"]
        if payload["op"] == "r":  # read over JDBC: the member itself
            assert (row["e"], row["s"]) == ("c\\d", "b\\s,o'k")
            kinds.append("snapshot")
            continue
        member = REAL["inserted"][str(row["id"])]
        if _schema_of(payload, schemas) is schemas[0]:  # SHOW CREATE TABLE's spelling
            assert row["e"] == debezium_member(member), row
        else:  # the ALTER as a client library escapes it: \' and \"
            assert row["e"] in debezium_forms(member), row
        kinds.append("binlog")
    assert kinds == ["snapshot"] + ["binlog"] * 23
    by_id = {m["payload"]["after"]["id"]: m["payload"] for m in _data()}
    assert by_id[11]["after"]["e"] == "c\\\\d"  # the member c\d, as issue 40 saw it
    assert by_id[37]["after"]["e"] == 'say \\"hi\\"'  # after the ALTER's \"
    assert by_id[1]["before"]["e"] == "c\\\\d"  # a before image too


def _type(schema: TableSchema, name: str) -> ColumnType:
    col = schema.column(name)
    assert col is not None
    return col.type


def _mapped(value: str | None, ctype: ColumnType) -> str | None:
    """What the job writes for a binlog row's value (the rule of debezium_member_expr)."""
    mapping = value_map(ctype.members)
    if not value:
        return value
    if ctype.base == "ENUM":
        return mapping.get(value, value)
    return ",".join(mapping.get(m, m) for m in value.split(","))


def test_the_job_maps_every_binlog_value_back_to_the_shards_member() -> None:
    """Without the mapping: c\\\\d, end\\\\, x\\,y, nl\\nz, say \\"hi\\" and the
    SET's b\\\\s reach the target."""
    schemas = _schemas()
    final = {r[0]: (r[1], r[2]) for r in REAL["shard_rows"]}
    written: dict[int, tuple[str | None, str | None]] = {}
    for msg in _data():
        payload = msg["payload"]
        row = payload["after"]
        if payload["op"] == "r":
            written[row["id"]] = (row["e"], row["s"])
            continue
        schema = _schema_of(payload, schemas)
        written[row["id"]] = (
            _mapped(row["e"], _type(schema, "e")),
            _mapped(row["s"], _type(schema, "s")),
        )
        if payload["before"] is not None:  # the UPDATE's old row, as the job deletes it
            assert _mapped(payload["before"]["e"], _type(schema, "e")) == "c\\d"
    assert written == final
    raw = {m["payload"]["after"]["id"]: m["payload"]["after"]["e"] for m in _data()}
    assert sum(raw[i] != final[i][0] for i in final) == 14  # what reached Delta before


def test_allowed_reads_back_as_the_members_and_is_written_as_debezium_writes_it() -> None:
    """The Connect schema's ``allowed`` (schemas.enable) lists Debezium's names, a comma
    inside one escaped: read back, they are the members; written, the same text."""
    before, _ = _schemas()
    snapshot = next(m for m in _data() if m["payload"]["op"] == "r")
    fields = next(f for f in snapshot["schema"]["fields"] if f["field"] == "after")["fields"]
    for name in ("e", "s"):
        real = next(f for f in fields if f["field"] == name)
        col = before.column(name)
        assert col is not None
        assert ConnectField.of(real).column().type.members == col.type.members
        assert connect_field(col)["parameters"]["allowed"] == real["parameters"]["allowed"]
        assert ConnectField.of(real).same_as(col)


@given(MEMBERS)
def test_every_name_debezium_gives_a_member_maps_back_to_it(members: list[str]) -> None:
    mapping = value_map(members)
    for m in members:
        for commas in (True, False):  # Debezium before and from 3.7
            name = debezium_member(m, commas)
            assert mapping.get(name, name) == m
    assert all(v in members and k != v for k, v in mapping.items())


@given(MEMBERS)
def test_allowed_round_trips(members: list[str]) -> None:
    if members != [""]:  # ENUM('') writes an empty allowed, read back as no member
        assert from_allowed(to_allowed(members)) == tuple(members)


def test_members_without_escapes_cost_nothing() -> None:
    """No member with a backslash, a quote, a double quote, a comma or a control character
    MySQL escapes (a tab is not one): no mapping, and the value expression is the value
    itself."""
    plain = ColumnType("ENUM", members=("a", "b c", "ü", "tab\there", "semi;colon"))
    assert value_map(plain.members) == {}
    assert debezium_member_expr(plain, "v", "binlog") == "v"
    assert debezium_member_expr(ColumnType("VARCHAR", 10), "v", "binlog") == "v"
    mapped = debezium_member_expr(ColumnType("SET", members=("p", "b\\s")), "v", "binlog")
    assert mapped.startswith("CASE WHEN binlog THEN array_join(transform(split(v, ','), ")


def test_the_producer_names_binlog_members_as_debezium_does() -> None:
    """The spark engine's records: a binlog row's ENUM/SET value is Debezium's name, a
    snapshot row's the member."""
    schema = parse_create_table(
        "CREATE TABLE t (id INT PRIMARY KEY, e ENUM('c\\\\d','x,y'), s SET('p','b\\\\s'))"
    )
    b = DebeziumBuilder("s1")
    row = {"id": 1, "e": "c\\d", "s": "p,b\\s"}
    [binlog, _tomb] = b.row("db", "t", "d", row, None, schema)
    [snap] = b.row("db", "t", "r", None, row, schema)
    assert json.loads(binlog.value or b"")["before"] == {"id": 1, "e": "c\\\\d", "s": "p,b\\\\s"}
    assert json.loads(snap.value or b"")["after"] == row
