"""Python values for SQL literals (defaults, implicit values) and value comparison."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from schemas.model import Column, string_value
from schemas.storage import literal_bytes, value_text

__all__ = ["bit_number", "canonical", "downstream_value", "fill_value", "literal_value"]


def literal_value(sql: str) -> Any:
    """The Python value of a normalised SQL literal: NULL, a number or a quoted string."""
    text = sql.strip()
    if text.upper() == "NULL":
        return None
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return string_value(text)
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text  # CURRENT_TIMESTAMP and other expressions: kept as written


def fill_value(column: Column) -> Any:
    """The value a row lacking ``column`` gets (its default, NULL or MySQL's implicit).
    MySQL's zero date has no value downstream: NULL, as the streaming sink writes it
    (``streaming.sql.spark_types.literal_expr``)."""
    sql = column.fill_sql()
    raw = literal_bytes(column.type, sql)  # BIT, BINARY, BLOB: their bytes
    return downstream_value(column, raw if raw is not None else literal_value(sql))


def downstream_value(column: Column, value: Any) -> Any:
    """``value`` of ``column`` as the downstream holds it: MySQL's zero date (which a
    server stores and returns as ``0000-00-00...``) is NULL there; a TIME is the text the
    CDC tool sent (Debezium's count of microseconds as its digits), as the job keeps it;
    a BIT value (the bytes a server returns, most significant first) its number; other
    values as they are."""
    if column.type.base == "TIME":
        return value_text(value)
    if column.type.base == "BIT":
        return bit_number(value)
    zero = isinstance(value, str) and value.startswith("0000-00-00")
    return None if zero and column.type.base in ("DATE", "DATETIME", "TIMESTAMP") else value


def bit_number(value: Any) -> Any:
    """A BIT value as the files write it, its number: the bytes downstream keeps (MySQL's,
    most significant first) read as one; another value as it is."""
    return int.from_bytes(value, "big") if isinstance(value, bytes | bytearray) else value


_DATETIME = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?$")


def canonical_datetime(text: str) -> str:
    """``2026-11-26 03:04:05.120`` -> ``2026-11-26 03:04:05.12``: no trailing fraction zeros."""
    text = text.replace("T", " ", 1)
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def canonical(value: Any) -> Any:
    """A value in the form expectations compare: integral numbers as int, decimals as str,
    datetimes as ``YYYY-MM-DD hh:mm:ss[.fraction]`` without trailing zeros, dates ISO."""
    if isinstance(value, dt.datetime):
        return canonical_datetime(value.replace(tzinfo=None).isoformat(sep=" "))
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Decimal):
        if value == value.to_integral_value():
            return int(value)
        return str(value.normalize())
    if isinstance(value, str):
        if _DATETIME.match(value):
            return canonical_datetime(value)
        try:
            d = Decimal(value)
        except InvalidOperation:
            return value
        return value if not value.strip() or value != value.strip() else canonical_decimal(d, value)
    return value


def canonical_decimal(d: Decimal, text: str) -> Any:
    # Only decimal-looking strings ("12.50") compare as numbers; "007" stays a string.
    if "." in text and d.is_finite():
        return str(d.normalize()) if d != d.to_integral_value() else int(d)
    return text
