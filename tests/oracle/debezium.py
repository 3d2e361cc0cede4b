"""Debezium MySQL: the data envelope and the schema-change topic, models and decoding.

Quirks covered (shared/reference/cdc-formats.md):

- with the JsonConverter's ``schemas.enable=true`` every value is
  ``{"schema": ..., "payload": ...}``; without it the value is the bare payload;
- a tombstone (null value) follows each delete: it decodes to no event;
- ``source.snapshot`` is a string: "true", "first", "last", "incremental" (and the
  ``*_in_data_collection`` variants) mean a snapshot row, "false" or null do not;
- DECIMAL arrives as base64 bytes (``decimal.handling.mode=precise``, the default) or as a
  string/double. Base64 bytes are decoded with the ``scale`` parameter of the value schema,
  which exists only with ``schemas.enable``. Without the schema a base64 DECIMAL looks like
  any other string and cannot be found, let alone decoded: it passes through as the
  base64 text. Sources without schemas must use ``decimal.handling.mode=string``;
- a primary-key change arrives as a delete (header ``__debezium.newkey``) and a create
  (header ``__debezium.oldkey``): both decode like any other delete and create;
- the schema-change topic (named ``topic.prefix``) carries ``ddl``, which may hold several
  statements: one ``ddl`` event per statement, all at the record's position.
"""

from __future__ import annotations

import base64
import binascii
import re
from decimal import Context, Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from coordinator.routing import SHADOW_TABLE
from schemas.events import ShardEvent
from tests.oracle._common import DecodeError, canonical, fingerprint, validate

__all__ = [
    "DECIMAL_LOGICAL",
    "ConnectField",
    "DebeziumPayload",
    "DebeziumSchemaChange",
    "DebeziumSource",
    "TableChange",
    "decode_debezium",
    "split_statements",
]

DECIMAL_LOGICAL = "org.apache.kafka.connect.data.Decimal"
DATA_OPS = ("c", "u", "d", "r", "t")
# Debezium's SnapshotRecord values, lower-cased (io.debezium.connector.SnapshotRecord).
SNAPSHOT_TRUE = (
    "true",
    "first",
    "last",
    "incremental",
    "first_in_data_collection",
    "last_in_data_collection",
)


class _Open(BaseModel):
    # Connectors add fields across versions (ts_us, ts_ns, sequence, ...): keep them.
    model_config = ConfigDict(extra="allow")


class ConnectField(_Open):
    """A Kafka Connect schema node as the JsonConverter writes it."""

    type: str
    optional: bool = False
    name: str | None = None
    version: int | None = None
    parameters: dict[str, str] | None = None
    default: Any = None
    field: str | None = None
    fields: list[ConnectField] | None = None


class DebeziumSource(_Open):
    """The ``source`` block: where in the binlog the change was read."""

    version: str | None = None
    connector: str | None = None
    name: str | None = None
    ts_ms: int | None = None
    snapshot: Any = None  # a string ("true", "last", ...); boolean in Debezium < 1.0
    db: str | None = None
    table: str | None = None
    server_id: int | None = None
    gtid: str | None = None
    file: str | None = None
    pos: int | None = None
    row: int | None = None
    thread: int | None = None
    query: str | None = None


class DebeziumPayload(_Open):
    """A data change event (the value, or the ``payload`` with ``schemas.enable``)."""

    op: str
    source: DebeziumSource
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    ts_ms: int | None = None
    transaction: dict[str, Any] | None = None


class TableChange(_Open):
    """One entry of ``tableChanges``: ``id`` is ``"db"."table"`` (``old,new`` on rename)."""

    type: str
    id: str
    previousId: str | None = None
    table: dict[str, Any] | None = None


class DebeziumSchemaChange(_Open):
    """A value of the schema-change topic."""

    source: DebeziumSource
    databaseName: str | None = None
    schemaName: str | None = None
    ddl: str
    tableChanges: list[TableChange] = Field(default_factory=list)


def decode_debezium(
    obj: Any, *, source: str | None, topic: str, partition: int, offset: int
) -> list[ShardEvent]:
    """The events of one parsed Debezium value (data topic or schema-change topic)."""
    prefix, schema = "", None
    if isinstance(obj, dict) and "payload" in obj and "schema" in obj:
        prefix, schema, obj = "payload", obj["schema"], obj["payload"]
        if obj is None:  # JsonConverter's form of a null value: a tombstone
            return []
    if isinstance(obj, dict) and ("ddl" in obj or "tableChanges" in obj):
        return _schema_change(obj, prefix, source, topic, partition, offset)
    payload = validate(DebeziumPayload, obj, prefix)
    at = f"{prefix}." if prefix else ""
    if payload.op not in DATA_OPS:
        raise DecodeError(f'unknown op "{payload.op}"', f"{at}op")
    src = payload.source
    base = _base(src, f"{at}source", source, topic, partition, offset)
    if not src.table:
        raise DecodeError("missing table", f"{at}source.table")
    value_fields = _value_fields(schema) if schema is not None else None
    before, after = payload.before, payload.after
    if payload.op in ("c", "r", "u") and after is None:
        raise DecodeError(f'missing after for op "{payload.op}"', f"{at}after")
    if payload.op == "d" and before is None:
        raise DecodeError('missing before for op "d"', f"{at}before")
    if payload.op == "t":
        before = after = None
    if value_fields is not None:
        before = _normalise(before, value_fields, f"{at}before")
        after = _normalise(after, value_fields, f"{at}after")
    return [
        ShardEvent(
            **base,
            tbl=src.table,
            op=payload.op,  # type: ignore[arg-type]
            before=before,
            after=after,
            ts_ms=src.ts_ms if src.ts_ms is not None else payload.ts_ms,
            schema_fp=fingerprint(_fp_form(value_fields)) if value_fields else None,
            row_schema=(
                canonical(_fp_form(value_fields))
                if value_fields and SHADOW_TABLE.match(src.table)
                else None
            ),
        )
    ]


def _base(
    src: DebeziumSource, at: str, source: str | None, topic: str, partition: int, offset: int
) -> dict[str, Any]:
    name = src.name or source
    if not name:
        raise DecodeError("missing name (and no source configured for the topic)", f"{at}.name")
    if not src.db:
        raise DecodeError("missing db", f"{at}.db")
    return {
        "source": name,
        "db": src.db,
        "pos_file": src.file,
        "pos": src.pos,
        "pos_row": src.row,
        "gtid": src.gtid,
        "snapshot": _snapshot(src.snapshot, f"{at}.snapshot"),
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "format": "debezium",
    }


def _snapshot(value: Any, at: str) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        if value.lower() in SNAPSHOT_TRUE:
            return True
        if value.lower() == "false":
            return False
    raise DecodeError(f"unknown snapshot {value!r}", at)


# --- the value schema -------------------------------------------------------------------


def _value_fields(schema: Any) -> list[ConnectField] | None:
    """The row fields of an envelope schema: the ``after`` struct (``before`` if absent)."""
    if not isinstance(schema, dict):
        return None
    envelope = validate(ConnectField, schema, "schema")
    by_name = {f.field: f for f in envelope.fields or ()}
    row = by_name.get("after") or by_name.get("before")
    return row.fields if row is not None and row.fields is not None else None


def _fp_form(fields: list[ConnectField]) -> list[list[Any]]:
    """What the schema fingerprint hashes: per field, in order, ``[field, type, name,
    optional, parameters]`` (parameters ``{}`` when absent, name null when absent)."""
    return [[f.field, f.type, f.name, f.optional, f.parameters or {}] for f in fields]


def _normalise(row: dict[str, Any] | None, fields: list[ConnectField], at: str) -> Any:
    """Decode what the schema says is encoded: DECIMAL bytes to a decimal string."""
    if row is None:
        return None
    out = dict(row)
    for f in fields:
        if f.name == DECIMAL_LOGICAL and f.field in out and out[f.field] is not None:
            out[f.field] = _decimal(out[f.field], f, f"{at}.{f.field}")
    return out


def _decimal(value: Any, f: ConnectField, at: str) -> str:
    scale_text = (f.parameters or {}).get("scale")
    if scale_text is None or not scale_text.lstrip("-").isdigit():
        raise DecodeError(f"DECIMAL without a scale parameter in the schema of {f.field}", at)
    if not isinstance(value, str):
        raise DecodeError(f"DECIMAL is not base64 bytes (got {value!r})", at)
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise DecodeError(f"DECIMAL {value!r} is not base64", at) from None
    unscaled = int.from_bytes(raw, "big", signed=True)
    # MySQL DECIMAL has up to 65 digits; Python's default context keeps 28.
    return format(Decimal(unscaled).scaleb(-int(scale_text), Context(prec=66)), "f")


# --- the schema-change topic ------------------------------------------------------------

_DB_LEVEL = re.compile(r"^\s*(create|drop|alter)\s+(database|schema)\b", re.IGNORECASE)
_ID_PART = re.compile(r'"((?:[^"]|"")*)"')
_SESSION_ONLY = re.compile(r"^\s*SET\s[^;]*;?\s*$", re.IGNORECASE | re.DOTALL)


def _schema_change(
    obj: dict[str, Any], prefix: str, source: str | None, topic: str, partition: int, offset: int
) -> list[ShardEvent]:
    change = validate(DebeziumSchemaChange, obj, prefix)
    at = f"{prefix}." if prefix else ""
    src = change.source
    # The schema-change topic is named after topic.prefix, i.e. the source; older
    # connectors leave source.name out of this topic's source block.
    if not src.name:
        src = src.model_copy(update={"name": source or topic})
    if not src.db and change.databaseName:
        src = src.model_copy(update={"db": change.databaseName})
    if not src.db and _SESSION_ONLY.match(change.ddl or ""):
        return []  # ``SET character_set_server=...`` (a snapshot's first event): no table
    base = _base(src, f"{at}source", None, topic, partition, offset)
    tables = [_table_id(t, f"{at}tableChanges[{i}].id") for i, t in enumerate(change.tableChanges)]
    events = []
    for stmt in split_statements(change.ddl):
        db, tbl = base["db"], ""
        if not _DB_LEVEL.match(stmt):
            db, tbl = _table_of(stmt, tables, db, src.table or "")
        events.append(
            ShardEvent(**{**base, "db": db}, tbl=tbl, op="ddl", ddl=stmt, ts_ms=src.ts_ms)
        )
    return events


def _table_id(change: TableChange, at: str) -> tuple[str, str]:
    """``"db"."tbl"`` (or, on a rename, ``"db"."old","db"."new"``: the old one) -> (db, tbl)."""
    text = change.previousId or change.id
    parts = [p.replace('""', '"') for p in _ID_PART.findall(text)]
    if len(parts) < 2:
        raise DecodeError(f'table id {text!r} is not "db"."table"', at)
    return parts[0], parts[1]


def _table_of(stmt: str, tables: list[tuple[str, str]], db: str, fallback: str) -> tuple[str, str]:
    """The table a statement is about: the tableChanges entry it names, else the first
    entry, else ``source.table``. Several statements in one ``ddl`` get one entry each."""
    words = {w.lower() for w in re.findall(r"[\w$]+", stmt)}
    for t_db, t_tbl in tables:
        if t_tbl.lower() in words:
            return t_db, t_tbl
    if tables:
        return tables[0]
    return db, fallback


def split_statements(sql: str) -> list[str]:
    """``a; b;`` -> ``["a", "b"]``: splits at semicolons outside quotes and comments."""
    out, buf, quote, i = [], [], "", 0
    while i < len(sql):
        ch = sql[i]
        if quote:
            buf.append(ch)
            if ch == "\\" and quote != "`" and i + 1 < len(sql):
                buf.append(sql[i + 1])
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
            buf.append(ch)
        elif sql.startswith("--", i) or ch == "#":
            end = sql.find("\n", i)
            i = len(sql) if end < 0 else end
            continue
        elif sql.startswith("/*", i) and not sql.startswith("/*!", i):
            end = sql.find("*/", i + 2)
            i = len(sql) if end < 0 else end + 2
            buf.append(" ")
            continue
        elif ch == ";":
            out.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
        i += 1
    out.append("".join(buf))
    return [s.strip() for s in out if s.strip()]
