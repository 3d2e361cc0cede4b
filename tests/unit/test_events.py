"""The CDC formats: every fixture decodes as cases.yaml says, the wire models accept the
fixtures, and what the Debezium builder writes decodes back to the row. Pure Python."""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from devkit.debezium_build import DebeziumBuilder
from devkit.workload import WorkloadEvent, sharded_workload
from schemas import parse_create_table
from schemas.events import DeadLetter, ShardEvent
from tests.oracle.canal import CanalMessage, canal_value
from tests.oracle.debezium import DebeziumPayload, DebeziumSchemaChange, split_statements
from tests.oracle.decode_py import decode_record
from tests.oracle.maxwell import MaxwellMessage

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cdc"
CASES = yaml.safe_load((FIXTURES / "cases.yaml").read_text())


def _value(case: dict[str, Any]) -> bytes | None:
    return None if case["file"] is None else (FIXTURES / case["file"]).read_bytes()


def _decode(case: dict[str, Any]) -> list[ShardEvent] | DeadLetter:
    key = case["key"].encode() if case["key"] is not None else None
    return decode_record(
        case["format"], case["topic"], case["partition"], case["offset"], key, _value(case),
        source=case.get("source"),
    )  # fmt: skip


# --- the table of cases ------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case_decodes_as_listed(case: dict[str, Any]) -> None:
    got = _decode(case)
    where = {k: case[k] for k in ("topic", "partition", "offset", "format")}
    if "dead_letter" in case:
        assert isinstance(got, DeadLetter), got
        assert case["dead_letter"] in got.reason
        assert (got.topic, got.partition, got.offset, got.format) == tuple(where.values())
        assert got.value == _value(case)
    else:
        assert not isinstance(got, DeadLetter), got.reason
        assert got == [ShardEvent(**e, **where) for e in case["events"]]


def test_every_fixture_is_a_case() -> None:
    files = {c["file"] for c in CASES}
    on_disk = {p.name for p in FIXTURES.iterdir() if p.name != "cases.yaml"}
    assert on_disk == files - {None}
    assert len({c["name"] for c in CASES}) == len(CASES)


def test_the_table_covers_every_quirk() -> None:
    events = [e for c in CASES for e in c.get("events", ())]
    for fmt in ("debezium", "canal", "maxwell"):
        ops = {e["op"] for c in CASES if c["format"] == fmt for e in c.get("events", ())}
        assert ops >= {"c", "u", "d", "ddl"}, fmt
    assert {"r", "t"} <= {e["op"] for e in events}
    assert any(c["file"] is None and c["events"] == [] for c in CASES)  # tombstone
    assert any("dead_letter" in c for c in CASES if c["format"] == "canal")
    assert any(e["tbl"] == "" for e in events)  # a statement without a table


_MODELS = {"canal": [CanalMessage], "maxwell": [MaxwellMessage],
           "debezium": [DebeziumPayload, DebeziumSchemaChange]}  # fmt: skip


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c["file"] and "dead_letter" not in c],
    ids=lambda c: c["name"],
)
def test_wire_models_accept_the_fixtures(case: dict[str, Any]) -> None:
    obj = json.loads(_value(case) or b"null")
    if case["format"] == "debezium" and "payload" in obj:
        obj = obj["payload"]
    model = _MODELS[case["format"]][1 if "ddl" in obj else 0]
    model.model_validate(obj)


# --- single rules ------------------------------------------------------------------------


def test_debezium_schema_fp_ignores_table_names_and_follows_columns() -> None:
    b = DebeziumBuilder("s", schemas_enable=True)
    one = parse_create_table("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(8))")
    two = parse_create_table("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(8), b INT)")

    def fp(db: str, table: str, schema: Any) -> str | None:
        (rec,) = b.row(db, table, "c", None, {"id": 1, "a": "x"}, schema)
        (event,) = decode_record("debezium", rec.topic, 0, 0, rec.key, rec.value)  # type: ignore[misc]
        return event.schema_fp

    assert fp("db_0", "t_0", one) == fp("db_1", "t_5", one) is not None
    assert fp("db_0", "t_0", one) != fp("db_0", "t_0", two)


@pytest.mark.parametrize(
    ("sql", "statements"),
    [
        ("ALTER TABLE a ADD c INT", ["ALTER TABLE a ADD c INT"]),
        ("ALTER TABLE a ADD c INT; ALTER TABLE b ADD c INT;", ["ALTER TABLE a ADD c INT",
                                                               "ALTER TABLE b ADD c INT"]),
        ("ALTER TABLE a COMMENT 'x;y'", ["ALTER TABLE a COMMENT 'x;y'"]),
        ("ALTER TABLE `a;b` ADD c INT; DROP TABLE x", ["ALTER TABLE `a;b` ADD c INT",
                                                       "DROP TABLE x"]),
        ("CREATE TABLE t (a INT) COMMENT 'it''s; \\';' ; ", ["CREATE TABLE t (a INT) COMMENT "
                                                           "'it''s; \\';'"]),
        (" ; ;", []),
    ],
)  # fmt: skip
def test_split_statements(sql: str, statements: list[str]) -> None:
    assert split_statements(sql) == statements


@pytest.mark.parametrize(
    ("text", "mysql_type", "value"),
    [("12", "int(11)", 12), ("18446744073709551615", "bigint(20) unsigned", 2**64 - 1),
     ("1", "tinyint(1)", 1), ("12.50", "decimal(10,2)", "12.50"), ("0.5", "double", 0.5),
     ("1.5", "float(7,2)", 1.5), ("2020-05-13 12:39:20", "datetime", "2020-05-13 12:39:20"),
     ("a", "enum('a','b')", "a"), ("2024", "year(4)", "2024"), (None, "int(11)", None),
     ("x", None, "x")],
)  # fmt: skip
def test_canal_values_follow_mysql_type(
    text: str | None, mysql_type: str | None, value: Any
) -> None:
    assert canal_value(text, mysql_type) == value


def test_decode_record_refuses_bad_configuration() -> None:
    with pytest.raises(ValueError, match="unknown CDC format"):
        decode_record("avro", "t", 0, 0, None, b"{}")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no source id"):
        decode_record("canal", "t", 0, 0, None, b"{}")


def test_dead_letter_keeps_the_record() -> None:
    got = decode_record("maxwell", "mx", 3, 42, b"k", b"\xff\xfe", source="m")
    assert isinstance(got, DeadLetter)
    assert (got.topic, got.partition, got.offset, got.key, got.value) == ("mx", 3, 42, b"k",
                                                                         b"\xff\xfe")  # fmt: skip
    assert "not UTF-8" in got.reason


# --- the builder round trip ----------------------------------------------------------------

# (column type, the Python value given, the value Debezium writes and the decoder returns)
ROUND_TRIP = [
    ("TINYINT", -5, -5),
    ("SMALLINT UNSIGNED", 65535, 65535),
    ("INT", -2147483648, -2147483648),
    ("BIGINT UNSIGNED", 2**63 + 1, 2**63 + 1),
    ("FLOAT", 1.5, 1.5),
    ("DOUBLE", -2.25e-10, -2.25e-10),
    ("VARCHAR(16)", "héllo; 'x'", "héllo; 'x'"),
    ("TEXT", "line\nbreak", "line\nbreak"),
    ("CHAR(2)", "ab", "ab"),
    ("DATE", "2024-02-29", 19782),
    ("DATETIME", "2024-01-02 03:04:05", 1704164645000),
    ("DATETIME(3)", "2024-01-02 03:04:05.678", 1704164645678),
    ("DATETIME(6)", "2024-01-02 03:04:05.678901", 1704164645678901),
    ("TIMESTAMP", "2024-01-02 03:04:05", "2024-01-02T03:04:05Z"),
    ("TIME", "12:00:01.5", 43201500000),
    ("YEAR", 2024, 2024),
    ("BIT(1)", 1, True),
    ("BIT(16)", 258, base64.b64encode(b"\x02\x01").decode()),
    ("VARBINARY(4)", b"\x00\xff", "AP8="),
    ("BLOB", b"blob", "YmxvYg=="),
    ("ENUM('a','b')", "b", "b"),
    ("SET('a','b')", "a,b", "a,b"),
    ("JSON", '{"k": [1]}', '{"k": [1]}'),
]
# DECIMAL columns: (type, the Python value, the decimal string, the base64 unscaled bytes).
DECIMALS = {
    "amount": ("DECIMAL(10,2)", Decimal("1234.5"), "1234.50", "AeI6"),
    "neg": ("DECIMAL(10,3)", "-0.001", "-0.001", "/w=="),
    "whole": ("DECIMAL(5,0)", -99999, "-99999", "/nlh"),
}
MODES = [(True, "string"), (True, "base64"), (False, "string"), (False, "base64")]


@pytest.mark.parametrize(("schemas_enable", "decimal_mode"), MODES)
def test_builder_round_trip_every_type(schemas_enable: bool, decimal_mode: Any) -> None:
    cols = ", ".join(f"c{i} {t}" for i, (t, _, _) in enumerate(ROUND_TRIP))
    decimals = ", ".join(f"{name} {t}" for name, (t, _, _, _) in DECIMALS.items())
    schema = parse_create_table(f"CREATE TABLE t (id BIGINT PRIMARY KEY, {decimals}, {cols})")
    row: dict[str, Any] = {"id": 7} | {name: v for name, (_, v, _, _) in DECIMALS.items()}
    row |= {f"c{i}": given for i, (_, given, _) in enumerate(ROUND_TRIP)}
    # Without the schema, base64 bytes cannot be recognised: they pass through (documented).
    raw = not schemas_enable and decimal_mode == "base64"
    want: dict[str, Any] = {"id": 7}
    want |= {name: b64 if raw else text for name, (_, _, text, b64) in DECIMALS.items()}
    want |= {f"c{i}": out for i, (_, _, out) in enumerate(ROUND_TRIP)}
    nulls = {k: None for k in row if k != "id"} | {"id": 8}

    b = DebeziumBuilder("src", schemas_enable=schemas_enable, decimal_mode=decimal_mode)
    records = b.row("db_1", "t", "c", None, row, schema) + b.row("db_1", "t", "c", None, nulls,
                                                                 schema)  # fmt: skip
    decoded = [decode_record("debezium", r.topic, 0, 0, r.key, r.value) for r in records]
    assert not any(isinstance(d, DeadLetter) for d in decoded), decoded
    (full,), (empty,) = decoded  # type: ignore[misc]
    assert full.after == want
    assert empty.after == {k: None for k in want} | {"id": 8}
    assert (full.source, full.db, full.tbl, full.op) == ("src", "db_1", "t", "c")
    assert records[0].topic == "src.db_1.t"
    key = json.loads(records[0].key or b"")
    assert (key["payload"] if schemas_enable else key) == {"id": 7}


def test_builder_positions_and_pk_change() -> None:
    schema = parse_create_table("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
    b = DebeziumBuilder("s")
    records = [b.ddl("db", "t", "CREATE TABLE t (id INT PRIMARY KEY, a INT)", schema)]
    records += b.row("db", "t", "c", None, {"id": 1, "a": 1}, schema)
    records += b.row("db", "t", "u", {"id": 1, "a": 1}, {"id": 2, "a": 1}, schema)
    records += b.row("db", "t", "d", {"id": 2, "a": 1}, None, schema)
    records.append(b.truncate("db", "t"))
    assert [r.topic for r in records] == ["s"] + ["s.db.t"] * 7
    assert [r.value is None for r in records] == [False, False, False, True, False, False, True,
                                                  False]  # fmt: skip
    assert records[2].headers == [("__debezium.newkey", b'{"id":2}')]
    assert records[4].headers == [("__debezium.oldkey", b'{"id":1}')]
    events = [e for r in records for e in decode_record("debezium", r.topic, 0, 0, r.key, r.value)]  # type: ignore[union-attr]
    assert [e.op for e in events] == ["ddl", "c", "d", "c", "d", "t"]
    assert events[0].ddl == "CREATE TABLE t (id INT PRIMARY KEY, a INT)"
    positions = [(e.pos_file, e.pos) for e in events]
    assert positions[2] == positions[3]  # one UPDATE row event, two records
    assert positions == sorted(positions) and len(set(positions)) == 5
    gtids = [int((e.gtid or "x:0").rsplit(":", 1)[1]) for e in events]
    assert gtids == [1, 2, 3, 3, 4, 5]


# --- the workload --------------------------------------------------------------------------


def test_workload_rolls_ddl_out_shard_by_shard() -> None:
    ddl = {0.3: "ALTER TABLE {table} ADD COLUMN note VARCHAR(64)",
           0.6: "ALTER TABLE {table} CHANGE note memo VARCHAR(64)"}  # fmt: skip
    events = list(sharded_workload(10, 200, ddl_at=ddl))
    rows = [e for e in events if e.kind == "row"]
    assert len(rows) == 10 * 200
    statements = [e for e in events if e.kind == "ddl"]
    assert len(statements) == 10 * 3  # CREATE, then the two ALTERs, per shard
    assert statements[0].statement and statements[0].statement.startswith("CREATE TABLE `orders_0`")
    shards = {(e.db, e.table) for e in events}
    assert len(shards) == 10 and ("db_1", "orders_1") in shards  # shard 9
    for shard in shards:
        mine = [e for e in events if (e.db, e.table) == shard]
        kinds = [_stage(e) for e in mine]
        assert kinds == sorted(kinds), shard  # create < rows without note < note < memo
        assert set(kinds) == {0, 1, 2, 3, 4, 5}
        assert sum(e.op == "c" for e in mine) > sum(e.op == "d" for e in mine) > 0
    # The rollout is staggered: the first shard's ALTER comes before the last shard's.
    first_alters = [
        i for i, e in enumerate(events) if e.kind == "ddl" and "ADD" in str(e.statement)
    ]
    assert first_alters != list(range(first_alters[0], first_alters[0] + 10))


def _stage(e: WorkloadEvent) -> int:
    """CREATE 0, rows 1, ADD note 2, rows with note 3, CHANGE note memo 4, rows with memo 5."""
    if e.kind == "ddl":
        text = str(e.statement)
        return 0 if text.startswith("CREATE") else 2 if " ADD " in text else 4
    image = e.after or e.before or {}
    return 5 if "memo" in image else 3 if "note" in image else 1


def test_workload_is_deterministic_and_keeps_rows_consistent() -> None:
    one = list(sharded_workload(3, 300, seed=5))
    assert one == list(sharded_workload(3, 300, seed=5))
    live: dict[int, dict[str, Any]] = {}
    for e in one:
        if e.op == "c":
            assert e.after and e.after["id"] not in live
            live[e.after["id"]] = e.after
        elif e.op in ("u", "d"):
            assert e.before is not None and live.pop(e.before["id"]) == e.before
            if e.op == "u" and e.after:
                live[e.after["id"]] = e.after
