"""streaming.sql.quoting against a real SparkSession and a real Delta table: hostile names
and values written by the module read back unchanged through spark.sql."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from schemas.model import Column, ColumnType, TableSchema, sql_string
from streaming.sql.quoting import ident, literal, map_get, path, string, table_at
from streaming.sql.spark_types import literal_expr
from streaming.storage.delta_sink import DeltaSink
from tests.unit.test_quoting import HOSTILE

pytestmark = pytest.mark.spark

NAMES = [n for n in HOSTILE if n] + ["select", "${spark.app.name}x"]


def test_hostile_strings_read_back(spark: SparkSession) -> None:
    sql = "SELECT " + ", ".join(f"{string(v)} AS c{i}" for i, v in enumerate(HOSTILE))
    assert list(spark.sql(sql).first()) == HOSTILE


def test_hostile_strings_read_back_with_escaped_literals(spark: SparkSession) -> None:
    spark.conf.set("spark.sql.parser.escapedStringLiterals", "true")
    try:
        sql = "SELECT " + ", ".join(f"{string(v)} AS c{i}" for i, v in enumerate(HOSTILE))
        assert list(spark.sql(sql).first()) == HOSTILE
    finally:
        spark.conf.unset("spark.sql.parser.escapedStringLiterals")


def test_hostile_identifiers_as_columns_and_paths(spark: SparkSession) -> None:
    cols = ", ".join(f"{i} AS {ident(n)}" for i, n in enumerate(NAMES))
    df = spark.sql(f"SELECT {cols}, named_struct({string('in`ner')}, 7) AS {ident('s.t')}")
    assert df.columns == [*NAMES, "s.t"]
    picked = df.select(*[F.col(ident(n)) for n in NAMES], F.col(path("s.t", "in`ner")))
    assert list(picked.first()) == [*range(len(NAMES)), 7]
    view = "quoting_view"
    df.createOrReplaceTempView(view)
    sums = " + ".join(ident(n) for n in NAMES)
    assert spark.sql(f"SELECT {sums} FROM {view}").first()[0] == sum(range(len(NAMES)))


def test_typed_literals_read_back(spark: SparkSession) -> None:
    values = [
        (True, None),
        (2**40, None),
        (-(2**31), None),
        (1.5, None),
        (1e300, None),
        (Decimal("-12.30"), "DECIMAL(5,2)"),
        (b"\x00'`\\", None),
        (dt.date(2024, 2, 29), None),
        (dt.datetime(2024, 1, 2, 3, 4, 5, 6), None),
        (dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC), None),
        ("O'Brien \\ 😀", None),
    ]
    sql = "SELECT " + ", ".join(f"{literal(v, t)} AS c{i}" for i, (v, t) in enumerate(values))
    row = list(spark.sql(sql).first())
    expected = [v for v, _ in values]
    expected[9] = dt.datetime(2024, 1, 2, 3, 4, 5)  # TIMESTAMP reads back in the session zone
    # (UTC here) as a naive datetime
    row[9] = row[9].replace(tzinfo=None) if row[9].tzinfo else row[9]
    assert row == expected
    nan, inf, null = spark.sql(
        f"SELECT {literal(math.nan)}, {literal(-math.inf)}, {literal(None, 'DECIMAL(5,2)')}"
    ).first()
    assert math.isnan(nan) and inf == -math.inf and null is None


def test_delta_table_with_hostile_names_and_defaults(spark: SparkSession, tmp_path: Path) -> None:
    """A Delta table at a path with a backtick, hostile column names, a string default
    with quotes and backslashes filled by UPDATE, a MERGE keyed on a hostile name."""
    location = str(tmp_path / "we`ird ${x} 'lake'")
    key, other = "a`b'c;--", ";DROP TABLE t;--"
    schema = TableSchema(
        columns=(
            Column(key, ColumnType("VARCHAR", 20), nullable=False),
            Column(other, ColumnType("TEXT")),
        ),
        primary_key=(key,),
    )
    sink = DeltaSink(spark, "test-" + tmp_path.name, lambda target: location)
    sink.create_at(location, schema)
    hostile_value = "it's \\ \\' 😀"
    spark.sql(f"INSERT INTO {table_at(location)} VALUES ({string(hostile_value)}, {string('x')})")
    default = "d'ef\\ault"
    added = Column("sp ace", ColumnType("VARCHAR", 20), default=sql_string(default))
    fill = literal_expr(added.type, added.fill_sql())
    spark.sql(f"ALTER TABLE {table_at(location)} ADD COLUMNS ({ident(added.name)} STRING)")
    spark.sql(f"UPDATE {table_at(location)} SET {ident(added.name)} = {fill}")
    src = spark.sql(
        f"SELECT {string(hostile_value)} AS {ident(key)}, {string('y')} AS {ident(other)}, "
        f"{string(default)} AS {ident('sp ace')}, 'u' AS _action"
    )
    sink.merge_at(location, src, [key], [key, other, "sp ace"], 1)
    rows = spark.read.format("delta").load(location).collect()
    assert [tuple(r) for r in rows] == [(hostile_value, "y", default)]
    image = spark.sql(f"SELECT map({string(key)}, 1) AS m").select(F.expr(map_get("m", key)))
    assert image.first()[0] == 1


def test_hostile_values_through_a_local_frame(spark: SparkSession) -> None:
    """streaming.sql.local_frame: driver values reach the executors as data, nested types
    included, and come back unchanged; nothing in them is read as SQL."""
    from streaming.sql.local_frame import local_frame

    schema = (
        "s string, n bigint, k struct<f:string,p:bigint>, a array<struct<pos:bigint,"
        "pairs:map<string,string>>>, l array<string>"
    )
    rows = [(v, i, (v, -i), [(i, {v: v, "x": v})], [v, v]) for i, v in enumerate(HOSTILE) if v] + [
        (None, None, None, None, None)
    ]
    got = [
        (
            r["s"],
            r["n"],
            tuple(r["k"]) if r["k"] else None,
            [(x["pos"], dict(x["pairs"])) for x in r["a"]] if r["a"] is not None else None,
            list(r["l"]) if r["l"] is not None else None,
        )
        for r in local_frame(spark, rows, schema).collect()
    ]
    assert got == [tuple(r) for r in rows]
    # decimals exact, whatever their size (the append path's key bounds: BIGINT UNSIGNED)
    big = [(Decimal("18446744073709551615"), Decimal("-0.000000000000000001")), (None, None)]
    back = local_frame(spark, big, "u decimal(20,0), f decimal(38,18)").collect()
    assert [(r["u"], r["f"]) for r in back] == big
    assert local_frame(spark, [], schema).count() == 0
    with pytest.raises(ValueError, match="fields"):
        local_frame(spark, [("only one",)], schema)
