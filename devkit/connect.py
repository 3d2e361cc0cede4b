"""A table schema as Debezium MySQL writes it: row values and ``tableChanges`` columns
(the field schemas are :mod:`schemas.connect`'s). Used by the producer to build realistic envelopes.

Types follow Debezium's MySQL defaults (``time.precision.mode=adaptive_time_microseconds``,
``bigint.unsigned.handling.mode=long``, ``binary.handling.mode=bytes``): see the connector
docs' "Data type mappings". DECIMAL follows ``decimal.handling.mode``: ``string`` (a decimal
string) or ``base64`` (``precise``: the unscaled value's big-endian two's-complement bytes,
base64, logical type ``org.apache.kafka.connect.data.Decimal`` with a ``scale`` parameter).
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from schemas.connect import DECIMAL_LOGICAL, DecimalMode, connect_field, value_fields
from schemas.debezium_enum import debezium_member, value_map
from schemas.model import ColumnType, TableSchema

__all__ = [
    "DECIMAL_LOGICAL",
    "DecimalMode",
    "binlog_converters",
    "connect_field",
    "connect_value",
    "row_converters",
    "table_change_columns",
    "value_fields",
]

Converter = Callable[[Any], Any]

EPOCH = dt.datetime(1970, 1, 1)
EPOCH_DATE = dt.date(1970, 1, 1)
_JDBC = {
    "TINYINT": -6,
    "SMALLINT": 5,
    "MEDIUMINT": 4,
    "INT": 4,
    "BIGINT": -5,
    "FLOAT": 7,
    "DOUBLE": 8,
    "DECIMAL": 3,
    "CHAR": 1,
    "VARCHAR": 12,
    "BINARY": -2,
    "VARBINARY": -3,
    "DATE": 91,
    "TIME": 92,
    "DATETIME": 93,
    "TIMESTAMP": 2014,
    "YEAR": 4,
    "BIT": -7,
    "JSON": 1111,
    "ENUM": 1,
    "SET": 1,
}


def connect_value(ctype: ColumnType, value: Any, decimal_mode: DecimalMode = "string") -> Any:
    """A Python value of a column as Debezium writes it (None stays None)."""
    conv = _converter(ctype, decimal_mode)
    return value if value is None or conv is None else conv(value)


def row_converters(
    schema: TableSchema, decimal_mode: DecimalMode = "string"
) -> list[tuple[str, Converter]]:
    """``(column, converter)`` for the columns whose Python values need converting; the
    others (ints, strings, floats) go to JSON as they are."""
    out = []
    for col in schema.columns:
        conv = _converter(col.type, decimal_mode)
        if conv is not None:
            out.append((col.name, conv))
    return out


def binlog_converters(schema: TableSchema) -> list[tuple[str, Converter]]:
    """``(column, converter)`` for the ENUM and SET columns whose values a binlog row
    carries otherwise than the member: Debezium names the binlog's index by the member as
    its DDL parser kept it (``schemas.debezium_enum``; a snapshot row, read over JDBC,
    holds the member itself). Empty for a table without such members."""
    out: list[tuple[str, Converter]] = []
    for col in schema.columns:
        if col.type.base == "ENUM" and value_map(col.type.members):
            out.append((col.name, debezium_member))
        elif col.type.base == "SET" and value_map(col.type.members):
            out.append((col.name, _set_members))
    return out


def _set_members(value: str) -> str:
    return ",".join(debezium_member(m) for m in value.split(",")) if value else value


def _converter(ctype: ColumnType, decimal_mode: DecimalMode) -> Converter | None:
    t = ctype.base
    if t == "DECIMAL":
        quantum = Decimal(1).scaleb(-(ctype.scale or 0))
        if decimal_mode == "string":
            return lambda v: format(Decimal(v).quantize(quantum), "f")
        return lambda v: _decimal_bytes(Decimal(v).quantize(quantum), ctype.scale or 0)
    if t == "DATETIME":
        unit = dt.timedelta(microseconds=1 if (ctype.length or 0) > 3 else 1000)
        return lambda v: v if isinstance(v, int) else (_datetime(v) - EPOCH) // unit
    if t == "TIMESTAMP":
        return _zoned
    if t == "DATE":
        return lambda v: v if isinstance(v, int) else (_date(v) - EPOCH_DATE).days
    if t == "TIME":
        return _micro_time
    if t == "BIT" and (ctype.length or 1) == 1:
        return bool
    if t == "BIT":
        size = ((ctype.length or 1) + 7) // 8
        return lambda v: _b64(v.to_bytes(size, "little") if isinstance(v, int) else v)
    if t in ("BINARY", "VARBINARY") or t.endswith("BLOB"):
        return _b64
    return None


def _decimal_bytes(value: Decimal, scale: int) -> str:
    unscaled = int(value.scaleb(scale))
    size = max(1, (unscaled.bit_length() + 8) // 8)  # room for the sign bit
    return base64.b64encode(unscaled.to_bytes(size, "big", signed=True)).decode("ascii")


def _datetime(v: Any) -> dt.datetime:
    if isinstance(v, str):
        v = dt.datetime.fromisoformat(v)
    if v.tzinfo is not None:  # DATETIME has no zone: Debezium writes the wall clock as UTC
        v = v.astimezone(dt.UTC).replace(tzinfo=None)
    return v  # type: ignore[no-any-return]


def _date(v: Any) -> dt.date:
    if isinstance(v, str):
        return dt.date.fromisoformat(v)
    return v.date() if isinstance(v, dt.datetime) else v


def _zoned(v: Any) -> str:
    if isinstance(v, str):
        v = dt.datetime.fromisoformat(v)
    v = v.replace(tzinfo=dt.UTC) if v.tzinfo is None else v.astimezone(dt.UTC)
    return v.replace(tzinfo=None).isoformat() + "Z"  # type: ignore[no-any-return]


def _micro_time(v: Any) -> int:
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        v = dt.time.fromisoformat(v)
    if isinstance(v, dt.time):
        v = dt.timedelta(
            hours=v.hour, minutes=v.minute, seconds=v.second, microseconds=v.microsecond
        )
    return v // dt.timedelta(microseconds=1)  # type: ignore[no-any-return]


def _b64(v: Any) -> str:
    if isinstance(v, str):
        v = v.encode("utf-8")
    return base64.b64encode(v).decode("ascii")


def table_change_columns(schema: TableSchema) -> list[dict[str, Any]]:
    """The ``tableChanges[].table.columns`` of the schema-change topic."""
    out = []
    for i, col in enumerate(schema.columns, 1):
        t = col.type
        out.append(
            {
                "name": col.name,
                "jdbcType": _JDBC.get(t.base, -1 if t.base.endswith("TEXT") else -4),
                "nativeType": None,
                "typeName": t.base + (" UNSIGNED" if t.unsigned else ""),
                "typeExpression": t.base + (" UNSIGNED" if t.unsigned else ""),
                "charsetName": t.charset,
                "length": t.length,
                "scale": t.scale,
                "position": i,
                "optional": col.nullable,
                "autoIncremented": col.auto_increment,
                "generated": col.auto_increment or col.generated is not None,
                "comment": None,
                "hasDefaultValue": col.default is not None,
                "enumValues": list(t.members) if t.base in ("ENUM", "SET") else None,
            }
        )
    return out
