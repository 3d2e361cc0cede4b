"""What a downstream column can store (schemas/storage.py), without a JVM: each MySQL type's
domain is the one of the Delta type the job stores it as, and a value outside it is a dead
letter in the job's words. tests/integration/test_value_fit.py checks the same cases
against Spark's own casts (``streaming.sql.spark_types.value_expr``)."""

from __future__ import annotations

import base64
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.ids import ShardId, TargetId
from coordinator.scenario.downstream import MemoryTable
from coordinator.scenario.values import fill_value
from schemas.ddl import parse_create_table, parse_type
from schemas.model import Column
from schemas.storage import (
    Limit,
    floating,
    json_valid,
    limit,
    literal_bytes,
    pg_numeric_fits,
    storage,
    unfit,
    value_text,
)
from streaming.sql.spark_types import delta_type

TYPES = [
    "TINYINT", "TINYINT UNSIGNED", "SMALLINT", "SMALLINT UNSIGNED", "MEDIUMINT",
    "MEDIUMINT UNSIGNED", "INT", "INT UNSIGNED", "BIGINT", "BIGINT UNSIGNED", "INT(11)",
    "DECIMAL", "DECIMAL(5,2)", "DECIMAL(38,10)", "DECIMAL(39,2)", "DECIMAL(65,30)",
    "DECIMAL(10,2) UNSIGNED", "NUMERIC(7)", "FLOAT", "DOUBLE", "REAL", "BIT", "BIT(12)",
    "BOOL", "YEAR", "DATE", "DATETIME", "DATETIME(6)", "TIMESTAMP", "TIMESTAMP(3)", "TIME",
    "CHAR(3)", "VARCHAR(3)", "BINARY(4)", "VARBINARY(9)", "TINYTEXT", "TEXT", "MEDIUMTEXT",
    "LONGTEXT", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB", "JSON", "ENUM('a','b')",
    "SET('x','y')", "GEOMETRY", "POINT", "POLYGON", "MULTIPOLYGON", "GEOMETRYCOLLECTION",
]  # fmt: skip

# (type, the value's text as the job reads it, whether it fits). Shared with the
# integration test, which asks Spark the same questions.
CASES = [
    ("INT", "2147483647", True),
    ("INT", "-2147483648", True),
    ("INT", "2147483648", False),  # an ignored MODIFY INT -> BIGINT, then a big value
    ("INT", "3000000000", False),
    ("INT", "2.0", True),  # a DOUBLE shard column writes 2.0
    ("INT", "2.000", True),
    ("INT", "2.5", False),
    ("INT", "1e3", False),
    ("INT", "abc", False),
    ("INT", "", False),
    ("INT", "true", False),
    ("INT", "+7", True),
    ("TINYINT", "127", True),
    ("TINYINT", "128", False),
    ("TINYINT", "-129", False),
    ("SMALLINT", "32768", False),
    ("MEDIUMINT", "8388608", True),  # stored as INT: MySQL's range is not Delta's
    ("TINYINT UNSIGNED", "300", True),  # stored as SMALLINT
    ("TINYINT UNSIGNED", "40000", False),
    ("INT UNSIGNED", "4294967295", True),
    ("BIGINT", "9223372036854775807", True),
    ("BIGINT", "9223372036854775808", False),
    ("BIGINT UNSIGNED", "18446744073709551615", True),  # DECIMAL(20,0)
    ("BIGINT UNSIGNED", "123456789012345678901", False),
    ("YEAR", "2024", True),
    ("DECIMAL(5,2)", "999.99", True),
    ("DECIMAL(5,2)", "-999.99", True),
    ("DECIMAL(5,2)", "1.005", True),  # rounded half up to 1.01
    ("DECIMAL(5,2)", "999.994", True),
    ("DECIMAL(5,2)", "999.995", False),  # rounds to 1000.00: six digits
    ("DECIMAL(5,2)", "1000", False),
    ("DECIMAL(5,2)", "12345.67", False),  # an ignored MODIFY DECIMAL(5,2) -> (12,2)
    ("DECIMAL(5,2)", "0.001", True),
    ("DECIMAL(5,2)", "1e2", True),
    ("DECIMAL(5,2)", "1e3", False),
    ("DECIMAL(5,2)", ".5", True),
    ("DECIMAL(5,2)", "abc", False),
    ("DECIMAL(5,2)", "NaN", False),
    ("DECIMAL(10,0)", "9999999999", True),
    ("DECIMAL(10,0)", "10000000000", False),
    ("DECIMAL(38,0)", "1" + "0" * 38, False),
    ("DECIMAL(39,2)", "1" + "0" * 50, True),  # wider than Spark's decimals: kept as text
    ("FLOAT", "1.5", True),
    ("FLOAT", "1e39", True),  # infinity, not NULL
    ("FLOAT", "abc", False),
    ("DOUBLE", "-2.5e-10", True),
    ("DOUBLE", "NaN", True),
    ("DOUBLE", "Infinity", True),
    ("DOUBLE", "inf", True),
    ("DOUBLE", "12abc", False),
    ("VARCHAR(3)", "a string longer than three", True),  # Delta STRING has no length
    ("CHAR(1)", "xyz", True),
    ("ENUM('a','b')", "c", True),  # nor members
    ("SET('x','y')", "z", True),
    ("TEXT", "anything", True),
    # Temporal values: a count since the epoch, or ISO text naming a day and time that
    # exist; anything else does not fit (it was an ANSI cast that failed the batch)
    ("DATE", "19000", True),
    ("DATE", "-719528", True),  # 0000-01-01
    ("DATE", "-719529", False),
    ("DATE", "2932896", True),  # 9999-12-31
    ("DATE", "2932897", False),
    ("DATE", "99999999999", False),  # past INT
    ("DATE", "2024-02-29", True),
    ("DATE", "2023-02-29", False),
    ("DATE", "2000-02-29", True),
    ("DATE", "1900-02-29", False),
    ("DATE", "2024-13-01", False),
    ("DATE", "2024-00-10", False),  # a zero in the date
    ("DATE", "0000-00-00", True),  # the zero date: NULL downstream
    ("DATE", "2024-01-01 10:00:00", True),  # the day is read
    ("DATE", "2024-01-01T10:00:00Z", True),
    ("DATE", "2024-1-1", False),  # not a form CDC tools write
    ("DATE", " 2024-01-01", False),
    ("DATE", "2024-01-01Z", False),
    ("DATE", "1e3", False),
    ("DATE", "garbage", False),
    ("DATE", "", False),
    ("DATETIME", "1700000000000", True),
    ("DATETIME", "-62167219200000", True),
    ("DATETIME", "253402300800000", False),  # year 10000
    ("DATETIME", "99999999999999999", False),  # overflowed Spark's microseconds
    ("DATETIME(6)", "1700000000000000", True),
    ("DATETIME(6)", "-99999999999999999", False),
    ("DATETIME", "2024-01-01 10:00:00", True),
    ("DATETIME", "2024-01-01 10:00:00.123456789", True),  # cut to microseconds
    ("DATETIME", "2024-01-01T23:59:59", True),
    ("DATETIME", "2024-01-01 24:00:00", False),
    ("DATETIME", "2024-01-01 23:60:00", False),
    ("DATETIME", "2024-01-01 23:59:60", False),
    ("DATETIME", "2024-01-01 10:00", False),
    ("DATETIME", "0000-00-00 00:00:00", True),
    ("DATETIME", "2024-02-30 00:00:00", False),
    ("DATETIME", "2024-01-01 10:00:00+02:00", True),  # the zone left out, as Spark does
    ("TIMESTAMP", "2024-01-01T10:00:00Z", True),
    ("TIMESTAMP", "2024-01-01T10:00:00.123456Z", True),
    ("TIMESTAMP", "2024-01-01 10:00:00", True),
    ("TIMESTAMP", "2024-01-01T10:00:00+18:00", True),
    ("TIMESTAMP", "2024-01-01T10:00:00+18:01", False),
    ("TIMESTAMP", "2024-01-01T10:00:00-05:60", False),
    ("TIMESTAMP", "1700000000", False),  # a TIMESTAMP is text
    ("TIMESTAMP", "0000-00-00 00:00:00", True),
    ("TIMESTAMP", "garbage", False),
    # bytes: base64 as CDC tools write it (standard alphabet, padded), nothing else
    ("BLOB", "", True),
    ("BLOB", "YQ==", True),
    ("BLOB", "YWI=", True),
    ("VARBINARY(9)", "YWJj", True),
    ("BINARY(4)", "A", False),  # Java's decoder fails on a short last unit
    ("BLOB", "YQ", False),  # unpadded
    ("BLOB", "ab!c", False),  # Java's decoder would skip the '!'
    ("BLOB", "YQ==YQ==", False),
    ("BLOB", " YWJj", False),
    ("BLOB", "YWJj\n", False),  # Java's $ would match before the line break
    ("BLOB", "YWJj-_==", False),  # URL-safe base64
    ("LONGBLOB", "QUJD" * 50_000, True),  # no recursion per group in Java's regex
    ("BIT(1)", "true", True),
    ("BIT(8)", "AQ==", True),
    ("BIT(8)", "1", False),
    ("BIT(8)", "yes", False),
    ("GEOMETRY", '{"wkb":"AQ==","srid":0}', True),
    ("POINT", "AQ==", True),
    ("GEOMETRY", '{"wkb":"A","srid":0}', False),
    ("GEOMETRY", '{"srid":0}', False),
    ("GEOMETRY", '{"wkb":1234}', True),  # get_json_object gives the number's text
]


@pytest.mark.parametrize("sql", TYPES)
def test_each_type_is_stored_as_the_job_stores_it(sql: str) -> None:
    t = parse_type(sql)
    assert storage(t).sql == delta_type(t), sql


@pytest.mark.parametrize(("sql", "text", "fits"), CASES, ids=[f"{c[0]}:{c[1][:12]}" for c in CASES])
def test_a_value_fits_the_domain_of_its_columns_delta_type(sql: str, text: str, fits: bool) -> None:
    assert storage(parse_type(sql)).admits(text) is fits


def test_values_are_read_as_the_job_reads_the_row_image() -> None:
    assert value_text(None) is None
    assert value_text(3000000000) == "3000000000"
    assert value_text(2.0) == "2.0"
    assert value_text(True) == "true"
    assert value_text("12.50") == "12.50"
    assert value_text({"k": [1]}) == '{"k":[1]}'


def test_the_reason_is_the_jobs() -> None:
    a = Column("a", parse_type("INT"))
    assert unfit(a, 3000000000) == "value 3000000000 of column a does not fit the target type INT"
    assert unfit(a, 2.0) is None and unfit(a, None) is None
    d = Column("price", parse_type("DECIMAL(5,2)"))
    assert unfit(d, "12345.67") == (
        "value 12345.67 of column price does not fit the target type DECIMAL(5,2)"
    )


# --- a database's columns ---------------------------------------------------------------


def B64(data: bytes) -> str:
    """A byte value's text as the job reads it (Debezium's base64)."""
    return base64.b64encode(data).decode()


# (type, the value's text, whether it fits on mariadb/mysql, whether it fits on postgresql),
# each inside the type's Delta domain. Shared with the integration tests, which ask Spark
# (streaming.sql.spark_types.limit_sql) and the real databases the same questions.
LIMIT_CASES = [
    ("VARCHAR(3)", "abc", True, True),
    ("VARCHAR(3)", "abcd", False, False),
    ("VARCHAR(3)", "åß€", True, True),  # three characters, seven bytes
    ("VARCHAR(3)", "ab  ", False, False),  # stored cut to "ab " by either: not the value
    ("VARCHAR(3)", "", True, True),
    ("CHAR(2)", "xyz", False, False),
    ("TINYINT UNSIGNED", "255", True, True),
    ("TINYINT UNSIGNED", "256", False, True),  # PostgreSQL: SMALLINT
    ("TINYINT UNSIGNED", "-1", False, True),
    ("SMALLINT UNSIGNED", "65536", False, True),
    ("MEDIUMINT", "8388608", False, True),
    ("MEDIUMINT", "-8388608", True, True),
    ("MEDIUMINT UNSIGNED", "16777215", True, True),
    ("INT UNSIGNED", "4294967296", False, True),
    ("INT UNSIGNED", "4294967295.0", True, True),
    ("BIGINT UNSIGNED", "18446744073709551615", True, True),
    ("BIGINT UNSIGNED", "18446744073709551616", False, True),  # DECIMAL(20,0) holds it
    ("INT", "2147483647", True, True),
    ("TEXT", "abcd", True, True),
    # byte limits: UTF-8 bytes under the table's utf8mb4, the bytes of a base64 value
    ("TINYTEXT", "x" * 255, True, True),
    ("TINYTEXT", "x" * 256, False, True),
    ("TINYTEXT", "é" * 128, False, True),  # 128 characters, 256 bytes
    ("TINYBLOB", B64(bytes(255)), True, True),
    ("TINYBLOB", B64(b"\x01" * 256), False, True),
    ("VARBINARY(3)", B64(b"abc"), True, True),
    ("VARBINARY(3)", B64(b"abcd"), False, True),
    ("BINARY(2)", B64(b"\x00\xff"), True, True),
    ("BINARY(2)", B64(b"abc"), False, True),
    # three bytes a character at most: nothing past U+FFFF
    ("VARCHAR(3) CHARACTER SET utf8mb3", "aé€", True, True),
    ("VARCHAR(3) CHARACTER SET utf8mb3", "a\U0001f600", False, True),
    # YEAR: 1901 .. 2155 and 0; a two-digit year is read as 20xx (stored changed)
    ("YEAR", "2155", True, True),
    ("YEAR", "0", True, True),
    ("YEAR", "2156", False, True),
    ("YEAR", "1900", False, True),
    ("YEAR", "5", False, True),
    ("YEAR", "40000", False, False),  # PostgreSQL: SMALLINT
    # ENUM: a member as written; SET: members only (as a set)
    ("ENUM('a','b')", "a", True, True),
    ("ENUM('a','b')", "c", False, True),
    ("ENUM('a','b')", "A", False, True),  # stored as 'a'
    ("ENUM('a','b')", "", False, True),
    ("SET('a','b','c')", "a,c", True, True),
    ("SET('a','b','c')", "", True, True),
    ("SET('a','b','c')", "c,a", True, True),  # stored as 'a,c': the same set
    ("SET('a','b','c')", "A", False, True),  # stored as 'a'
    ("SET('a','b','c')", "a,d", False, True),
    # temporal: MariaDB and MySQL keep years 0 .. 9999 of a DATE or DATETIME, PostgreSQL
    # has no year 0; MySQL's TIMESTAMP holds 1970-01-01 00:00:01 .. 2038-01-19 03:14:07 UTC
    ("DATE", "0000-01-01", True, False),
    ("DATE", "0001-01-01", True, True),
    ("DATETIME", "0000-06-15 10:00:00", True, False),
    ("DATETIME", "1582-10-10 12:00:00", True, True),
    ("TIMESTAMP", "1970-01-01 00:00:00", False, True),
    ("TIMESTAMP", "1970-01-01 00:00:01", True, True),
    ("TIMESTAMP", "1969-12-31 23:59:59", False, True),
    ("TIMESTAMP", "2038-01-19 03:14:07", True, True),
    ("TIMESTAMP", "2038-01-19 03:14:08", False, True),
    # TIME, a count of microseconds (Debezium) or [-]h:mm:ss[.ffffff] (Canal, Maxwell):
    # MySQL's -838:59:59.999999 .. 838:59:59.999999; PostgreSQL's INTERVAL any count a
    # BIGINT holds; both minutes (and seconds) below 60
    ("TIME(6)", "36000500000", True, True),
    ("TIME(6)", "3020399999999", True, True),
    ("TIME(6)", "3020400000000", False, True),
    ("TIME(6)", "-3020399999999", True, True),
    ("TIME(6)", "-3020400000000", False, True),
    ("TIME(6)", "-1", True, True),
    ("TIME(6)", "999999999999999999", False, True),
    ("TIME(6)", "1000000000000000000", False, False),  # 19 digits: no TIME of any column
    ("TIME", "838:59:59", True, True),
    ("TIME", "-838:59:59", True, True),
    ("TIME", "839:00:00", False, True),
    ("TIME", "10:60:00", False, False),
    ("TIME(3)", "-0:00:01.5", True, True),
    ("TIME", "1234567890123:00:00", False, False),  # hours past any column's
    # NUL: MySQL's strings hold it, PostgreSQL's text types do not (nor its jsonb the
    # escape \u0000, unless its backslash is itself escaped)
    ("VARCHAR(5)", "a\x00b", True, False),
    ("CHAR(3)", "\x00", True, False),
    ("TEXT", "a\x00", True, False),
    ("JSON", '{"a": "\\u0000"}', True, False),
    ("JSON", '["\\\\\\u0000", 1]', True, False),  # \\ then \u0000
    ("JSON", '{"\\\\u0000": "\\u0001"}', True, True),  # \\ then u0000; \u0001
    ("JSON", '{"a": "b"}', True, True),
    # not JSON (RFC 8259): each database refuses it (MariaDB's JSON check, PostgreSQL's jsonb)
    ("JSON", '{"a": 1} x', False, False),
    ("JSON", "[1, ]", False, False),
    ("JSON", "01", False, False),
    ("JSON", '"\\x41"', True, False),  # no such escape: MariaDB's check takes it
    ("JSON", '"\\ud800"', False, False),  # half a surrogate pair
    ("JSON", '["\\udc00", 1]', False, False),
    ("JSON", '"\\u12"', False, False),
    ("JSON", '"a\x01b"', False, False),  # a control character not escaped
    ("JSON", "NaN", False, False),
    ("JSON", "{'a': 1}", False, False),
    ("JSON", '[1, {"b": null}, "\\"", -1.5]', True, True),
    # PostgreSQL's JSONB keeps a number as its NUMERIC: 10^131072 and 16,384 fraction
    # digits are past it, an exponent of 2^30 - 1 even for zero (the cases it holds with
    # an exponent are stored changed, printed in full: tests/integration/test_value_fit)
    ("JSON", '{"n": 1e131072}', True, False),
    ("JSON", "[0.00001e131077]", True, False),
    ("JSON", "1.0e-16383", True, False),  # a trailing zero is a fraction digit
    ("JSON", "0e-16384", True, False),
    ("JSON", "[0e1073741823]", True, False),
    ("JSON", '["1e131072", {"1e999999": "\\"1e999999"}]', True, True),  # in strings
    ("JSON", "[0." + "0" * 16383 + "1]", True, False),
    ("JSON", "[0." + "0" * 16382 + "1]", True, True),  # as PostgreSQL prints it
    # MariaDB's JSON check refuses a document nested 32 deep (MySQL's JSON takes 100,
    # MYSQL_ONLY); brackets in strings, escaped quotes among them, do not nest
    ("JSON", "[" * 31 + "]" * 31, True, True),
    ("JSON", "[" * 32 + "]" * 32, False, True),
    ("JSON", '[{"a": ' * 16 + "1" + "}]" * 16, False, True),
    ("JSON", "[" * 30 + '"[{[{\\"[[", ["\\"", "{{{{"]' + "]" * 30, True, True),
    # a character the column's character set cannot encode (MySQL's latin1 is
    # Windows-1252, its five unassigned bytes the C1 controls of the same number)
    ("VARCHAR(3) CHARACTER SET latin1", "é€Ÿ", True, True),
    ("VARCHAR(3) CHARACTER SET latin1", "\x81\x9d\xa0", True, True),
    ("VARCHAR(3) CHARACTER SET latin1", "\x80", False, True),
    ("VARCHAR(3) CHARACTER SET latin1", "a中", False, True),
    ("TEXT CHARACTER SET latin1", "ok\U0001f600", False, True),
    ("CHAR(2) CHARACTER SET ascii", "a\x7f", True, True),
    ("CHAR(2) CHARACTER SET ascii", "éa", False, True),
    ("VARCHAR(3) CHARACTER SET cp1250", "łś€", True, True),
    ("VARCHAR(3) CHARACTER SET cp1250", "ñ", False, True),  # not in Windows-1250
    ("TEXT CHARACTER SET cp1250", "Ő", True, True),
    ("VARCHAR(3) CHARACTER SET gbk", "中文ア", True, True),
    ("VARCHAR(3) CHARACTER SET gbk", "한", False, True),  # Hangul: not in GBK
    ("VARCHAR(3) CHARACTER SET gbk", "\U0001f600", False, True),
    ("TEXT CHARACTER SET gbk", "文ā", True, True),
    ("TEXT CHARACTER SET gbk", "\u20ac", False, True),  # MariaDB's gbk has no euro sign
    ("MEDIUMTEXT CHARACTER SET gbk", "\u0e01", False, True),  # Thai
    ("VARCHAR(2) CHARACTER SET greek", "ʼΩ", True, True),  # MariaDB's own table
    ("VARCHAR(2) CHARACTER SET greek", "€", False, True),
    ("VARCHAR(3) CHARACTER SET ucs2", "aé€", True, True),
    ("VARCHAR(3) CHARACTER SET ucs2", "a\U0001f600", False, True),
    ("TEXT CHARACTER SET ucs2", "a\U0001f600", False, True),
    # a TEXT type's bytes in a multi-byte character set (TINYTEXT: 255 bytes)
    ("TINYTEXT CHARACTER SET gbk", "中" * 127 + "a", True, True),
    ("TINYTEXT CHARACTER SET gbk", "中" * 128, False, True),
    ("TINYTEXT CHARACTER SET big5", "中" * 127 + "ab", False, True),
    ("VARCHAR(2) CHARACTER SET big5", "\u2574", False, True),  # not in MariaDB's big5
    ("VARCHAR(2) CHARACTER SET gb2312", "中\uac00", False, True),  # no Hangul in GB 2312
    ("VARCHAR(2) CHARACTER SET euckr", "한\u3164", True, True),  # MariaDB's euckr: cp949's
    ("TINYTEXT CHARACTER SET sjis", "ｱ" * 255, True, True),  # half-width katakana: a byte
    ("TINYTEXT CHARACTER SET sjis", "\\" * 128, False, True),  # MariaDB's sjis: 0x815F
    ("VARCHAR(2) CHARACTER SET cp932", "\u2170\uff5e", True, True),
    ("TINYTEXT CHARACTER SET ujis", "\u00a1" * 85, True, True),  # JIS X 0212: three bytes
    ("TINYTEXT CHARACTER SET ujis", "\u00a1" * 85 + "a", False, True),
    ("TINYTEXT CHARACTER SET eucjpms", "\u2170" * 86, False, True),  # IBM's: three bytes
    ("TINYTEXT CHARACTER SET eucjpms", "ｱ" * 127 + "a", True, True),  # ｱ: 0x8E 0xB1
    ("TINYTEXT CHARACTER SET ucs2", "é" * 127, True, True),
    ("TINYTEXT CHARACTER SET ucs2", "a" * 128, False, True),
    ("TINYTEXT CHARACTER SET utf16", "\U0001f600" * 63 + "a", True, True),
    ("TINYTEXT CHARACTER SET utf16", "\U0001f600" * 63 + "ab", False, True),
    ("TINYTEXT CHARACTER SET utf32", "a" * 63, True, True),
    ("TINYTEXT CHARACTER SET utf32", "a" * 64, False, True),
    # MySQL's FLOAT and DOUBLE hold no NaN and no infinity (PostgreSQL's do)
    ("DOUBLE", "NaN", False, True),
    ("DOUBLE", "-Infinity", False, True),
    ("FLOAT", "Infinity", False, True),
    ("DOUBLE", "1.5e+300", True, True),
    # a DECIMAL wider than Spark's is text on Delta: the database column takes a plain
    # decimal number of at most p - s integer digits (rounded half up to s places)
    ("DECIMAL(40,2)", "-" + "9" * 38 + ".99", True, True),
    ("DECIMAL(40,2)", "1" * 38 + ".50", True, True),
    ("DECIMAL(40,2)", "1" * 39, False, False),
    ("DECIMAL(40,2)", "abc", False, False),
    ("DECIMAL(40,2)", "", False, False),
    ("DECIMAL(40,2)", ".", False, False),
    ("DECIMAL(40,0)", "1e5", False, False),
    # BIT: Debezium's boolean for BIT(1), else base64 of the bytes, least significant
    # first; MariaDB/MySQL refuse more bits than n, PostgreSQL's BOOLEAN (a BIT(1)) would
    # store any other number as true; its BYTEA (a BIT(n > 1)) takes any bytes
    ("BIT(1)", "true", True, True),
    ("BIT(1)", "false", True, True),
    ("BIT(1)", B64(b"\x02"), False, False),
    ("BIT(16)", B64((258).to_bytes(2, "little")), True, True),
    ("BIT(12)", B64((4095).to_bytes(2, "little")), True, True),
    ("BIT(12)", B64((4096).to_bytes(2, "little")), False, True),
    ("BIT(8)", B64(b"\x01\x00"), True, True),  # a longer value of few bits
    ("BIT(64)", B64(b"\xff" * 8), True, True),
    ("BIT(64)", B64(b"\xff" * 8 + b"\x01"), False, True),
]
# Rounded by the database (stored changed, not a case of LIMIT_CASES): (text, fits)
WIDE_DECIMAL_ROUNDED = [
    ("9" * 38 + ".994", True),
    ("9" * 38 + ".995", False),  # 10^38 after rounding: 39 integer digits
    ("-0.005", True),
    ("0" * 5 + "9" * 38, True),  # leading zeros are no digits
    ("+.5", True),
]
# Where MySQL's own limit is not MariaDB's (not checked here: no MySQL server).
MYSQL_ONLY = {
    ("JSON", "[" * 32 + "]" * 32): True,
    ("JSON", '[{"a": ' * 16 + "1" + "}]" * 16): True,
    ("JSON", '"\\x41"'): False,  # MySQL's JSON takes RFC 8259's escapes only
}


@pytest.mark.parametrize(("sql", "text", "mysql", "pg"), LIMIT_CASES)
def test_a_database_column_refuses_more_than_its_delta_type(
    sql: str, text: str, mysql: bool, pg: bool
) -> None:
    t = parse_type(sql)
    assert storage(t).admits(text)  # each case is inside the Delta domain
    assert limit(t, None) is None  # Delta: the domain is all
    mysql8 = MYSQL_ONLY.get((sql, text), mysql)
    for dialect, fits in (("mariadb", mysql), ("mysql", mysql8), ("postgresql", pg)):
        bound = limit(t, dialect)
        assert (bound is None or bound.admits(text)) is fits, (sql, text, dialect)


def test_a_float_past_its_range_is_an_infinity_mysql_refuses() -> None:
    """Spark reads a FLOAT past its range as an infinity (and the sink would stage it so):
    MariaDB and MySQL refuse it, PostgreSQL keeps it (its Delta value, unchanged)."""
    f, d = parse_type("FLOAT"), parse_type("DOUBLE")
    for text in ("1e39", "-3.5e38", "inf", "1e39f"):
        assert floating(text, "FLOAT") in (math.inf, -math.inf), text
        bound = limit(f, "mariadb")
        assert bound is not None and not bound.admits(text)
        assert limit(f, "postgresql") is None
    assert floating("3.4028234e38", "FLOAT") == 3.4028234663852886e38  # the largest float
    assert floating("1e39", "DOUBLE") == 1e39 and (bound := limit(d, "mysql")) is not None
    assert bound.admits("1e39") and bound.admits("-0.0") and not bound.admits("+NaN")
    assert floating("12abc", "DOUBLE") is None


@pytest.mark.parametrize(("text", "fits"), WIDE_DECIMAL_ROUNDED)
def test_a_wide_decimal_counts_the_digit_its_rounding_carries(text: str, fits: bool) -> None:
    t = parse_type("DECIMAL(40,2)")
    for dialect in ("mariadb", "postgresql"):
        bound = limit(t, dialect)
        assert bound is not None and bound.admits(text) is fits


def test_a_temporal_limit_reads_counts_zones_and_the_zero_date() -> None:
    pg_date, pg_datetime6 = (
        limit(parse_type("DATE"), "postgresql"),
        limit(parse_type("DATETIME(6)"), "postgresql"),
    )
    ts = limit(parse_type("TIMESTAMP(3)"), "mariadb")
    assert pg_date is not None and pg_datetime6 is not None and ts is not None
    assert not pg_date.admits("-719528") and pg_date.admits("-719162")  # 0000-, 0001-01-01
    assert not pg_datetime6.admits("-62135596800000001") and pg_datetime6.admits("0")
    assert pg_date.admits("0000-00-00") and ts.admits("0000-00-00 00:00:00")  # NULL
    # an instant: its offset counts
    assert ts.admits("2038-01-19T04:14:07+01:00") and not ts.admits("2038-01-19T03:14:07-00:01")
    assert ts.admits("1970-01-01T00:00:00.001Z") and not ts.admits("1970-01-01T01:00:00+01:00")
    assert limit(parse_type("DATETIME"), "mariadb") is None  # years 0 .. 9999 as they are


def test_a_value_past_a_database_column_is_unfit_in_the_jobs_words() -> None:
    note = Column("note", parse_type("VARCHAR(3)"))
    assert unfit(note, "longer") is None  # Delta's STRING takes it
    assert unfit(note, "longer", "postgresql") == (
        "value longer of column note does not fit the target type VARCHAR(3)"
    )
    u = Column("u", parse_type("TINYINT UNSIGNED"))
    assert unfit(u, 300, "mariadb") == (
        "value 300 of column u does not fit the target type TINYINT UNSIGNED"
    )
    assert unfit(u, 300, "postgresql") is None and unfit(u, None, "mariadb") is None
    assert limit(parse_type("VARCHAR(3)"), "mariadb") == Limit(chars=3)


# --- the memory engine's sink ----------------------------------------------------------

S1 = ShardId("s1", "db1", "tb1")


def _table() -> MemoryTable:
    schema = parse_create_table("CREATE TABLE tb (id INT PRIMARY KEY, a INT, d DECIMAL(5,2))")
    return MemoryTable(TargetId("shard", "tb"), schema)


def test_a_row_with_an_unfit_value_is_not_written() -> None:
    t = _table()
    assert t.write(S1, None, {"id": 1, "a": 1, "d": "1.50"}, {}, lenient=True) is None
    why = t.write(S1, None, {"id": 2, "a": 3000000000, "d": "1"}, {}, lenient=True)
    assert why == "value 3000000000 of column a does not fit the target type INT"
    assert list(t.rows) == [(1,)]


def test_an_unfit_update_keeps_the_row_or_deletes_the_key_it_left() -> None:
    t = _table()
    t.write(S1, None, {"id": 1, "a": 1, "d": "1"}, {}, lenient=True)
    t.write(S1, None, {"id": 2, "a": 2, "d": "2"}, {}, lenient=True)
    # same key: the row stays as it was (the job writes no action for it)
    assert t.write(S1, {"id": 1, "a": 1, "d": "1"}, {"id": 1, "a": 1, "d": "1234"}, {}, True)
    assert t.rows[(1,)]["d"] == "1"
    # a new key: the old one is deleted (the event's delete action is written)
    assert t.write(S1, {"id": 2, "a": 2, "d": "2"}, {"id": 3, "a": 2, "d": "1234"}, {}, True)
    assert list(t.rows) == [(1,)]


def test_a_row_without_its_key_or_with_a_column_no_ddl_explains_is_a_dead_letter() -> None:
    t = _table()
    assert t.write(S1, None, {"id": None, "a": 1}, {}, True) == (
        "key column id is null in after of shard s1.db1.tb1"
    )
    assert t.write(S1, {"a": 1}, None, {}, True) == (
        "key column id is missing from before of shard s1.db1.tb1"
    )
    why = t.write(S1, None, {"id": 1, "B": 1}, {}, lenient=False)
    assert why is not None
    assert why.startswith("row of shard s1.db1.tb1 has column(s) b that the target lacks; ")
    assert t.write(S1, None, {"id": 1, "B": 1}, {}, lenient=True) is None  # projected
    assert t.rows == {(1,): {"id": 1, "a": None, "d": None}}


# (the column, the literal it gets filled with: its default or implicit value, the bytes
# downstream keeps, as hex; None: not a bytes value). Shared with the integration test,
# which asks Spark for the literal's value (streaming.sql.spark_types.literal_expr).
LITERAL_BYTES = [
    ("a BIT(8) DEFAULT 0b101", "05"),
    ("a BIT(16) DEFAULT b'101'", "0005"),  # n / 8 bytes rounded up, as CAST(a AS BINARY)
    ("a BIT(4) DEFAULT 5", "05"),
    ("a BIT(1) DEFAULT TRUE", "01"),
    ("a BIT(16) NOT NULL", "0000"),  # MySQL's implicit value
    ("a BIT(8) DEFAULT x'7F'", "7f"),
    ("a BINARY(2) DEFAULT 0xF", "0f00"),  # padded with zero bytes, as MySQL does
    ("a BINARY(3) NOT NULL", "000000"),
    ("a VARBINARY(3) DEFAULT X'AbC0'", "abc0"),
    ("a VARBINARY(8) DEFAULT 'é''x'", "c3a92778"),  # a string's UTF-8 bytes
    ("a BLOB NOT NULL", ""),
    ("a VARBINARY(3) DEFAULT NULL", None),
    ("a VARCHAR(3) DEFAULT 'x'", None),
]


@pytest.mark.parametrize(("column", "hexed"), LITERAL_BYTES)
def test_a_bytes_literal_is_the_bytes_mysql_stores(column: str, hexed: str | None) -> None:
    (c,) = parse_create_table(f"CREATE TABLE t ({column})").columns
    raw = literal_bytes(c.type, c.fill_sql())
    assert (None if raw is None else raw.hex()) == hexed
    if c.type.base == "BIT":  # the memory engine's fill: the value's number
        assert fill_value(c) == int(hexed or "0", 16)
    elif hexed is not None:
        assert fill_value(c) == bytes.fromhex(hexed)


def test_a_bytes_value_of_a_file_is_judged_as_debezium_sends_it() -> None:
    b = Column("b", parse_type("VARBINARY(3)"))
    assert unfit(b, "abc") is None and unfit(b, b"\x00\xff") is None  # base64 on the wire
    assert unfit(b, "abcd", "mariadb") == (
        "value YWJjZA== of column b does not fit the target type VARBINARY(3)"
    )


def _json_loads(text: str) -> bool:
    def refuse(constant: str) -> float:
        raise ValueError(constant)  # NaN, Infinity: not JSON

    try:
        value = json.loads(text, parse_constant=refuse)
        json.dumps(value, ensure_ascii=False).encode("utf-8")  # no half surrogate pair
    except (ValueError, UnicodeEncodeError):
        return False
    return True


_JSON_PIECES = [
    *'{}[]:,"\\ -+.eE0123456789aftnrulsbx/',
    *("true", "null", "\\u00e9", "\\ud83d", "\\ude00", "\t", "\x01", "\x02", "_"),
]


@given(
    st.one_of(
        st.lists(st.sampled_from(_JSON_PIECES), max_size=12).map("".join),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=4),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=3), inner, max_size=3)
            ),
        ).map(json.dumps),
    )
)
def test_json_valid_is_pythons_strict_json(text: str) -> None:
    assert json_valid(text) == _json_loads(text)


def _pg_numeric_holds(number: str) -> bool:
    """PostgreSQL's NUMERIC read from Python's Decimal (its digits and exponent as
    written): fraction digits at most 16,383, the leading digit below 10^131072, the
    written exponent below 2^30 - 1 in magnitude (numeric_in)."""
    from decimal import Decimal

    written = number.lower().partition("e")[2] or "0"
    if abs(int(written)) >= 2**30 - 1:
        return False
    value = Decimal(number)
    if max(0, -int(value.as_tuple().exponent)) > 16_383:
        return False
    return value.is_zero() or value.adjusted() < 131_072


_EDGES = st.sampled_from([0, 1, 2, 4, 16_382, 16_383, 16_384, 131_070, 131_071, 131_072])


@given(
    st.text("0123456789", min_size=1, max_size=6).map(lambda w: w.lstrip("0") or "0"),
    st.one_of(st.none(), st.text("0123456789", min_size=1, max_size=6)),
    st.one_of(
        st.none(),
        st.tuples(st.sampled_from(["", "+", "-"]), _EDGES, st.integers(-3, 3)).map(
            lambda t: f"{t[0]}{max(0, t[1] + t[2])}"
        ),
        st.sampled_from(["1073741822", "-1073741823", "00001073741823", "9" * 12]),
    ),
    st.integers(0, 16_385),
)
def test_pg_numeric_fits_as_decimal_reads_the_number(
    whole: str, fraction: str | None, exponent: str | None, zeros: int
) -> None:
    if fraction is not None and zeros > 16_000:  # long fractions of leading zeros
        fraction = "0" * zeros + fraction
    number = whole + (f".{fraction}" if fraction is not None else "")
    number += f"e{exponent}" if exponent is not None else ""
    assert pg_numeric_fits(number) == _pg_numeric_holds(number), number


def test_mariadbs_json_check_takes_any_escape_but_a_short_or_half_unicode_one() -> None:
    # checked against MariaDB 10.11's JSON_VALID
    for text in ('"\\x41"', '"\\a"', '"\\%"', '"\\0"', '"\\U0041"', '"\\ud83d\\ude00"'):
        assert json_valid(text, "mariadb"), text
    for text in ('"\\u12"', '"\\uZZZZ"', '"\\ud800"', '"\\"', '"a\\"', '"\\u"'):
        assert not json_valid(text, "mariadb"), text
    assert not json_valid('"\\x41"') and json_valid('"\\ud83d\\ude00"')
