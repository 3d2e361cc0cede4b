"""streaming.sql.quoting without a JVM: what it writes reads back as the name or value given,
by the rules of Spark 4.2's lexer (tests/integration/test_quoting.py checks the same
names and values against a real session)."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.model import ColumnType, sql_string, string_value
from streaming.sql.quoting import (
    QuotingError,
    check_session,
    ident,
    literal,
    map_get,
    path,
    string,
    table_at,
)
from streaming.sql.spark_types import literal_expr

HOSTILE = [
    "a`b'c;--",
    "`",
    "``",
    "'",
    "we`ird",
    "q'uote",
    "sp ace",
    ";DROP TABLE t;--",
    "back\\slash",
    "\\'",
    "'\\",
    "trailing\\",
    "${spark.app.name}",
    "${env:HOME}",
    "emoji 😀 ✓",
    "new\nline\ttab",
    "a.b",
    "",
    '"double"',
    "*/ /*",
]

# Spark's unescape of a '...' literal (ParserUtils.unescapeSQLString, default mode).
_SPARK_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}
_SPARK_ESCAPES |= {"%": "\\%", "_": "\\_"}


def read_string(sql: str, escaped_literals: bool = False) -> str:
    """The value Spark's parser gives the literal ``sql`` (only the forms we write)."""
    hexed = re.fullmatch(r"CAST\(X'([0-9A-F]*)' AS STRING\)", sql)
    if hexed:
        return bytes.fromhex(hexed.group(1)).decode("utf-8")
    assert sql[0] == sql[-1] == "'", sql
    body = sql[1:-1]
    if escaped_literals:
        assert "'" not in body
        return body
    out, i = [], 0
    while i < len(body):
        if body[i] == "\\":
            out.append(_SPARK_ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
        elif body[i] == "'":
            assert body[i + 1] == "'", f"a lone quote ends the literal: {sql}"
            out.append("'")
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


def read_ident(sql: str) -> str:
    assert sql[0] == sql[-1] == "`"
    body = sql[1:-1]
    assert "`" not in body.replace("``", ""), f"a lone backtick ends the name: {sql}"
    return body.replace("``", "`")


@pytest.mark.parametrize("name", HOSTILE)
def test_ident_reads_back(name: str) -> None:
    assert read_ident(ident(name)) == name


@pytest.mark.parametrize("value", HOSTILE)
def test_string_reads_back_in_both_literal_modes(value: str) -> None:
    sql = string(value)
    assert read_string(sql) == value
    assert read_string(sql, escaped_literals=True) == value
    assert "${" not in sql


@given(st.text())
def test_any_text_reads_back(value: str) -> None:
    assert read_string(string(value)) == value
    assert read_string(string(value), escaped_literals=True) == value
    assert read_ident(ident(value)) == value


def test_plain_values_stay_readable() -> None:
    assert string("orders_0") == "'orders_0'"
    assert ident("id") == "`id`"


def test_multi_part_names_and_paths() -> None:
    assert path("db", "we`ird") == "`db`.`we``ird`"
    assert path("_act", "img") == "`_act`.`img`"
    assert table_at("s3a://b/x`y") == "delta.`s3a://b/x``y`"
    assert map_get("m", "a'b") == "m[" + string("a'b") + "]"
    with pytest.raises(QuotingError):
        path()


@pytest.mark.parametrize(
    ("value", "sql_type", "expected"),
    [
        (None, "DECIMAL(5,2)", "CAST(NULL AS DECIMAL(5,2))"),
        (True, None, "true"),
        (False, "BOOLEAN", "CAST(false AS BOOLEAN)"),
        (7, None, "7"),
        (2**40, None, f"{2**40}L"),
        (-(2**31), None, str(-(2**31))),
        (1.5, None, "1.5D"),
        (float("nan"), None, "CAST('NaN' AS DOUBLE)"),
        (float("-inf"), None, "CAST('-Infinity' AS DOUBLE)"),
        (Decimal("-12.30"), "DECIMAL(5,2)", "CAST(-12.30BD AS DECIMAL(5,2))"),
        (Decimal("1E+2"), None, "100BD"),
        (b"\x00'`", None, "X'002760'"),
        (dt.date(2024, 2, 29), None, "DATE'2024-02-29'"),
        (dt.datetime(2024, 1, 2, 3, 4, 5, 6), None, "TIMESTAMP_NTZ'2024-01-02 03:04:05.000006'"),
        (
            dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
            None,
            "TIMESTAMP'2024-01-02 03:04:05+00:00'",
        ),
    ],
)
def test_typed_literals(value: object, sql_type: str | None, expected: str) -> None:
    assert literal(value, sql_type) == expected


@pytest.mark.parametrize("bad", ["INT) --", "STRING'", "a`b", "INT; DROP"])
def test_types_cannot_end_the_expression(bad: str) -> None:
    with pytest.raises(QuotingError):
        literal(1, bad)


def test_null_needs_a_type_and_odd_values_are_refused() -> None:
    with pytest.raises(QuotingError):
        literal(None)
    with pytest.raises(QuotingError):
        literal(object())
    with pytest.raises(QuotingError):
        literal(Decimal("NaN"))


def test_session_with_substitution_is_refused() -> None:
    check_session({"spark.sql.variable.substitute": "false"}.get)
    with pytest.raises(QuotingError, match=r"spark\.sql\.variable\.substitute"):
        check_session({"spark.sql.variable.substitute": "true"}.get)


@given(st.text())
def test_mysql_string_literals_read_back(value: str) -> None:
    assert string_value(sql_string(value)) == value


@pytest.mark.parametrize(
    ("literal_sql", "value"),
    [
        ("'it''s'", "it's"),
        (r"'a\'b'", "a'b"),
        (r"'c\\d'", "c\\d"),
        (r"'\n'", "\n"),
        (r"'\%'", r"\%"),
    ],
)
def test_mysql_escapes(literal_sql: str, value: str) -> None:
    assert string_value(literal_sql) == value


@pytest.mark.parametrize("value", HOSTILE)
def test_string_defaults_reach_spark_as_their_value(value: str) -> None:
    expr = literal_expr(ColumnType("VARCHAR", 64), sql_string(value))
    assert read_string(expr) == value
