"""maxwell-json: model and decoding.

Quirks covered (shared/reference/cdc-formats.md):

- ``ts`` is in seconds for DML and in milliseconds in DDL examples: a ``ts`` below 10^11 is
  read as seconds (10^11 s is the year 5138, 10^11 ms is 1973), so both come out as ms;
- ``position`` is ``"file:offset"`` (only with ``output_binlog_position``); ``gtid`` only
  with ``output_gtid_position``; ``xoffset`` (the row's index in its transaction, with
  ``output_xoffset``) becomes ``pos_row``;
- ``old`` holds only the changed columns: the before image is ``data`` with ``old`` laid
  over it; for ``delete``, ``data`` is the last image;
- ``bootstrap-insert`` is a snapshot row (op ``r``); ``bootstrap-start`` and
  ``bootstrap-complete`` are markers without a row and decode to no event;
- DDL (``database-*``, ``table-*``, only with ``output_ddl``) becomes op ``ddl`` with ``sql``;
  ``table-alter`` also carries the schemas before and after (``old``/``def``), ignored here;
- TRUNCATE is never emitted by maxwell.

DML carries no column types, so JSON numbers are read as written: integers as int, and a
number with a fraction or exponent keeps its literal text (``12.50`` -> ``"12.50"``), so a
DECIMAL keeps its exact digits (a DOUBLE column's value is then a string too).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from schemas.events import Op, ShardEvent
from tests.oracle._common import DecodeError, validate

__all__ = ["MaxwellMessage", "decode_maxwell"]

DML_OPS: dict[str, Op] = {"insert": "c", "update": "u", "delete": "d", "bootstrap-insert": "r"}
MARKERS = ("bootstrap-start", "bootstrap-complete")
DDL_TYPES = tuple(f"{k}-{a}" for k in ("database", "table") for a in ("create", "alter", "drop"))
SECONDS_BELOW = 10**11


class MaxwellMessage(BaseModel):
    """A maxwell-json message (DML or DDL)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    database: str | None = None
    table: str | None = None
    type: str
    ts: int | None = None
    xid: int | None = None
    xoffset: int | None = None
    commit: bool | None = None
    position: str | None = None
    gtid: str | None = None
    server_id: int | None = None
    thread_id: int | None = None
    data: dict[str, Any] | None = None
    old: dict[str, Any] | None = None  # changed columns (DML) or the old schema (table-alter)
    def_: dict[str, Any] | None = Field(default=None, alias="def")
    sql: str | None = None


def decode_maxwell(
    obj: Any, *, source: str, topic: str, partition: int, offset: int
) -> list[ShardEvent]:
    """The events of one parsed maxwell-json message (parsed with ``parse_float=str``)."""
    msg = validate(MaxwellMessage, obj, "")
    if msg.type in MARKERS:
        return []
    if not msg.database:
        raise DecodeError("missing database", "database")
    pos_file, pos = _position(msg.position)
    ts_ms = None if msg.ts is None else msg.ts if msg.ts >= SECONDS_BELOW else msg.ts * 1000
    base: dict[str, Any] = {
        "source": source,
        "db": msg.database,
        "pos_file": pos_file,
        "pos": pos,
        "pos_row": msg.xoffset,
        "gtid": msg.gtid or None,
        "ts_ms": ts_ms,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "format": "maxwell",
    }
    if msg.type in DDL_TYPES:
        if not msg.sql:
            raise DecodeError(f'missing sql for "{msg.type}"', "sql")
        return [ShardEvent(**base, tbl=msg.table or "", op="ddl", ddl=msg.sql)]
    op = DML_OPS.get(msg.type)
    if op is None:
        raise DecodeError(f'unknown type "{msg.type}"', "type")
    if not msg.table:
        raise DecodeError("missing table", "table")
    if msg.data is None:
        raise DecodeError(f'missing data for "{msg.type}"', "data")
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = msg.data
    if op == "u":
        before = {**msg.data, **(msg.old or {})}
    elif op == "d":
        before, after = msg.data, None
    return [
        ShardEvent(
            **base,
            tbl=msg.table,
            op=op,
            before=before,
            after=after,
            snapshot=op == "r",
        )
    ]


def _position(text: str | None) -> tuple[str | None, int | None]:
    if text is None:
        return None, None
    file, sep, pos = text.rpartition(":")
    if not sep or not file or not pos.isdigit():
        raise DecodeError(f'position "{text}" is not "file:offset"', "position")
    return file, int(pos)
