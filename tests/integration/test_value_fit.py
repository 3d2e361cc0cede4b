"""The domains of schemas/storage.py are Spark's: for each case of tests/unit/test_storage.py,
the job's own conversion of the value's text to its column's Delta type
(``streaming.sql.spark_types.value_expr``, as ``streaming.batch.rows.project_actions`` runs it) gives
NULL exactly when the memory engine calls the value unfit, and a database column's limit
(``limit_sql`` on the converted value) refuses exactly what ``Limit.admits`` refuses. One
query for every case."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from schemas.ddl import parse_type
from schemas.storage import limit, storage
from streaming.sql.quoting import string
from streaming.sql.spark_types import limit_sql, value_expr, zero_date_sql
from tests.unit.test_storage import CASES, LIMIT_CASES

pytestmark = [pytest.mark.spark]


def test_spark_converts_a_value_exactly_when_it_is_in_the_domain(spark: SparkSession) -> None:
    def converted(sql: str, text: str) -> str:  # as streaming.batch.rows judges it
        t, value = parse_type(sql), string(text)
        zero = t.base in ("DATE", "DATETIME", "TIMESTAMP")  # the zero date is NULL, and fits
        return f"({value_expr(t, value)}) IS NOT NULL" + (
            f" OR {zero_date_sql(value)}" if zero else ""
        )

    exprs = [f"({converted(sql, text)}) AS c{i}" for i, (sql, text, _) in enumerate(CASES)]
    row = spark.sql("SELECT " + ", ".join(exprs)).collect()[0]
    spark_says = {(sql, text): row[f"c{i}"] for i, (sql, text, _) in enumerate(CASES)}
    ours = {(sql, text): storage(parse_type(sql)).admits(text) for sql, text, _ in CASES}
    assert ours == spark_says
    assert ours == {(sql, text): fits for sql, text, fits in CASES}


def test_spark_judges_a_database_columns_limit_as_the_memory_engine(spark: SparkSession) -> None:
    cases = [
        (sql, text, dialect, fits)
        for sql, text, mysql, pg in LIMIT_CASES
        for dialect, fits in (("mariadb", mysql), ("postgresql", pg))
    ]
    exprs = []
    for i, (sql, text, dialect, _) in enumerate(cases):
        t = parse_type(sql)
        bound = limit(t, dialect)
        value = value_expr(t, string(text))
        past = limit_sql(bound, f"({value})") if bound is not None else "false"
        exprs.append(f"NOT ({past}) AS c{i}")
    row = spark.sql("SELECT " + ", ".join(exprs)).collect()[0]
    assert [row[f"c{i}"] for i in range(len(cases))] == [fits for *_, fits in cases]


def test_spark_judges_json_numbers_for_postgresql_as_the_memory_engine(
    spark: SparkSession,
) -> None:
    """Numbers at the edges of PostgreSQL's NUMERIC (schemas.storage.pg_numeric_fits),
    alone and inside documents: Spark's judgement is Python's."""
    numbers = [
        f"{lead}e{sign}{n + d}"
        for lead in ("1", "9", "12345", "0.00001", "1.0", "0", "-0.0")
        for sign, n in (("", 131_071), ("-", 16_383), ("+", 131_067), ("", 1_073_741_822))
        for d in (-1, 0, 1)
    ]
    numbers += ["0e99999999999", "1e-00000000000000016383", "1E+0000131071"]
    texts = [*numbers, *(f'{{"a": [{n}], "b": "{n}"}}' for n in numbers)]
    texts += ['["1e999999", 1]', '["\\"", 1e999999]', '{"1e999999": 2}']
    bound = limit(parse_type("JSON"), "postgresql")
    assert bound is not None and bound.pg_numbers
    exprs = [f"NOT ({limit_sql(bound, string(t))}) AS c{i}" for i, t in enumerate(texts)]
    row = spark.sql("SELECT " + ", ".join(exprs)).collect()[0]
    ours = [bound.admits(t) for t in texts]
    assert [row[f"c{i}"] for i in range(len(texts))] == ours
    assert 0 < sum(ours) < len(texts)


# (type, format, the value's text as the job reads it from that tool's record, the bytes
# it stands for as hex, None: unfit). Canal sends bytes a character per byte (ISO-8859-1)
# and BIT as a number's text; Maxwell bytes as base64, BIT as a JSON number, and spatial
# values as WKT (not read); Debezium base64, BIT(1) as a boolean.
TOOL_CASES = [
    ("BLOB", "canal", "\x00\xffa", "00FF61"),
    ("BLOB", "canal", "", ""),
    ("VARBINARY(9)", "canal", "\u0100", None),  # not one byte in ISO-8859-1
    ("BLOB", "maxwell", "AP9h", "00FF61"),
    ("BLOB", "maxwell", "A", None),
    ("BLOB", "debezium", "AP9h", "00FF61"),
    ("BIT(16)", "canal", "258", "0102"),
    ("BIT(16)", "maxwell", "1", "0001"),
    ("BIT(1)", "canal", "1", "01"),
    ("BIT(1)", "canal", "0", "00"),
    ("BIT(1)", "maxwell", "2", None),  # more bits than the column holds
    ("BIT(12)", "canal", "4095", "0FFF"),
    ("BIT(12)", "canal", "4096", None),
    ("BIT(64)", "canal", "18446744073709551615", "FFFFFFFFFFFFFFFF"),
    ("BIT(64)", "canal", "18446744073709551616", None),
    ("BIT(64)", "maxwell", "-2147483648", None),  # Maxwell's rendering of 2^31
    ("BIT(8)", "maxwell", "1e2", None),
    ("BIT(16)", "debezium", "AgE=", "0102"),  # 258, least significant byte first
    ("BIT(1)", "debezium", "true", "01"),
    ("POINT", "canal", "\x00\x00\x00\x00\x01\x01\x00", "010100"),  # SRID 0, then the WKB
    ("POINT", "canal", "\x00\x00\x00\x00", None),
    ("POINT", "maxwell", "POINT (1 2)", None),
    ("GEOMETRY", "debezium", '{"wkb":"AQEA","srid":0}', "010100"),
]


def test_each_tools_bytes_bit_and_spatial_values_convert_to_the_same_bytes(
    spark: SparkSession,
) -> None:
    exprs = [
        f"hex({value_expr(parse_type(sql), string(text), string(fmt))}) AS c{i}"
        for i, (sql, fmt, text, _) in enumerate(TOOL_CASES)
    ]
    row = spark.sql("SELECT " + ", ".join(exprs)).collect()[0]
    got = [(sql, fmt, text, row[f"c{i}"]) for i, (sql, fmt, text, _) in enumerate(TOOL_CASES)]
    assert got == TOOL_CASES


def test_a_bytes_columns_fill_is_the_literals_bytes(spark: SparkSession) -> None:
    """A row lacking a BIT, BINARY or BLOB column gets its default's bytes (a bit or hex
    literal was read as base64 before: NULL or other bytes)."""
    from schemas.ddl import parse_create_table
    from streaming.sql.spark_types import literal_expr
    from tests.unit.test_storage import LITERAL_BYTES

    cases = [(column, hexed) for column, hexed in LITERAL_BYTES if hexed is not None]
    exprs = []
    for i, (column, _) in enumerate(cases):
        (c,) = parse_create_table(f"CREATE TABLE t ({column})").columns
        exprs.append(f"lower(hex({literal_expr(c.type, c.fill_sql())})) AS c{i}")
    row = spark.sql("SELECT " + ", ".join(exprs)).collect()[0]
    assert [(column, row[f"c{i}"]) for i, (column, _) in enumerate(cases)] == cases
