"""canal-json (canal's FlatMessage): model and decoding.

Quirks covered (shared/reference/cdc-formats.md):

- every value is a string (or null); ``mysqlType`` gives each column's MySQL type, and
  values are converted by it: integer types to int, float/double/real to float, decimal
  stays a decimal string, everything else stays a string;
- ``data`` and ``old`` are arrays: a message carries several rows, which become several
  events with ``pos_row`` 0..n-1 (the row's index in the message);
- ``old`` holds only the columns an UPDATE changed, so the before image is the ``data`` row
  with the ``old`` values laid over it; for DELETE, ``data`` is the before image;
- ``isDdl`` is true for every non-DML type: TRUNCATE becomes op ``t``, every other one
  (CREATE, ALTER, ERASE, QUERY, RENAME, CINDEX, DINDEX, ...) op ``ddl`` with ``sql``.

FlatMessage has no binlog file or offset: ``pos_file``/``pos`` are None and the Kafka
offset orders a shard's events. ``ts_ms`` is ``es`` (binlog time), not ``ts``
(canal's processing time).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from pydantic import BaseModel, ConfigDict

from coordinator.routing import SHADOW_TABLE
from schemas.events import Op, ShardEvent
from tests.oracle._common import DecodeError, fingerprint, validate

__all__ = ["CanalMessage", "canal_value", "decode_canal"]

DML_OPS: dict[str, Op] = {"INSERT": "c", "UPDATE": "u", "DELETE": "d"}
INT_TYPES = ("tinyint", "smallint", "mediumint", "int", "integer", "bigint")
FLOAT_TYPES = ("float", "double", "real", "double precision")
DECIMAL_TYPES = ("decimal", "numeric", "dec", "fixed")
_BASE = re.compile(r"^\s*([a-z ]+?)\s*(\(|$|\s)", re.IGNORECASE)


class CanalMessage(BaseModel):
    """A canal FlatMessage as the Kafka output writes it."""

    # Forks and newer versions add fields; numbers where strings belong are read as text.
    model_config = ConfigDict(extra="allow", coerce_numbers_to_str=True)

    id: int | None = None
    database: str
    table: str | None = None
    pkNames: list[str] | None = None
    isDdl: bool
    type: str
    es: int | None = None
    ts: int | None = None
    sql: str | None = None
    sqlType: dict[str, int] | None = None
    mysqlType: dict[str, str] | None = None
    data: list[dict[str, str | None]] | None = None
    old: list[dict[str, str | None]] | None = None
    gtid: str | None = None


def decode_canal(
    obj: Any, *, source: str, topic: str, partition: int, offset: int
) -> list[ShardEvent]:
    """The events of one parsed canal-json message."""
    msg = validate(CanalMessage, obj, "")
    if not msg.database:
        raise DecodeError("missing database", "database")
    base: dict[str, Any] = {
        "source": source,
        "db": msg.database,
        "gtid": msg.gtid or None,
        "ts_ms": msg.es,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "format": "canal",
    }
    kind = msg.type.upper()
    if kind not in DML_OPS:
        if not msg.isDdl:
            raise DecodeError(f'unknown type "{msg.type}" (isDdl is false)', "type")
        if kind == "TRUNCATE":
            return [ShardEvent(**base, tbl=_need_table(msg), op="t")]
        if not msg.sql:
            raise DecodeError(f'missing sql for DDL type "{msg.type}"', "sql")
        return [ShardEvent(**base, tbl=msg.table or "", op="ddl", ddl=msg.sql)]
    tbl = _need_table(msg)
    if not msg.data:
        raise DecodeError(f"missing data for {kind}", "data")
    types = msg.mysqlType or {}
    fp = fingerprint(msg.mysqlType) if msg.mysqlType else None
    shadow = (
        json.dumps([[k, v] for k, v in types.items()], separators=(",", ":"), ensure_ascii=False)
        if types and SHADOW_TABLE.match(tbl)
        else None
    )
    old = msg.old or []
    if kind == "UPDATE" and len(old) != len(msg.data):
        raise DecodeError(f"old has {len(old)} row(s), data has {len(msg.data)}", "old")
    events = []
    for i, raw in enumerate(msg.data):
        row = _convert(raw, types, f"data[{i}]")
        before: dict[str, Any] | None = None
        after: dict[str, Any] | None = row
        if kind == "UPDATE":
            before = {**row, **_convert(old[i], types, f"old[{i}]")}
        elif kind == "DELETE":
            before, after = row, None
        events.append(
            ShardEvent(
                **base,
                tbl=tbl,
                op=DML_OPS[kind],
                before=before,
                after=after,
                pos_row=i,
                schema_fp=fp,
                row_schema=shadow,
            )
        )
    return events


def _need_table(msg: CanalMessage) -> str:
    if not msg.table:
        raise DecodeError("missing table", "table")
    return msg.table


def _convert(raw: dict[str, str | None], types: dict[str, str], at: str) -> dict[str, Any]:
    return {col: canal_value(v, types.get(col), f"{at}.{col}") for col, v in raw.items()}


def canal_value(text: str | None, mysql_type: str | None, at: str = "") -> Any:
    """One canal string as its value: ``("12", "int(11)") -> 12``. A column without a
    ``mysqlType`` entry keeps its string."""
    if text is None or mysql_type is None:
        return text
    m = _BASE.match(mysql_type)
    base = m.group(1).lower() if m else mysql_type.lower()
    try:
        if base in INT_TYPES:
            return int(text)
        if base in FLOAT_TYPES:
            return float(text)
        if base in DECIMAL_TYPES:
            Decimal(text)  # validate: canal writes BigDecimal.toPlainString()
            return text
    except (ValueError, InvalidOperation):
        raise DecodeError(f"cannot read {text!r} as {mysql_type}", at) from None
    return text
