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
