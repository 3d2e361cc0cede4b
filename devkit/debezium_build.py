"""Builds the Kafka records a Debezium MySQL connector would write; pure, no Kafka.

One :class:`DebeziumBuilder` is one connector (``source`` = its ``topic.prefix``) on one
MySQL server: it keeps the binlog position (``mysql-bin.000001``, growing by a realistic
transaction size, rotating at ``max_binlog_size``) and a GTID ``<server uuid>:<n>`` per
transaction. Data records go to ``{source}.{db}.{table}`` keyed by the primary key; DDL to
the schema-change topic ``{source}`` keyed by ``{"databaseName": db}``. With
``schemas_enable`` keys and values are ``{"schema": ..., "payload": ...}``.
:mod:`devkit.producer` sends what it builds.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Literal, NamedTuple

from devkit.connect import (
    DecimalMode,
    binlog_converters,
    row_converters,
    table_change_columns,
    value_fields,
)
from schemas.model import TableSchema

__all__ = ["DebeziumBuilder", "Record"]

BINLOG_MAX = 1 << 30  # MySQL's max_binlog_size default: the file rotates past it
FIRST_POS = 157  # after the magic bytes and the format description event
VERSION = "3.1.0.Final"
_SOURCE_TEMPLATE = (
    '{"version":"' + VERSION + '","connector":"mysql","name":%s,"ts_ms":%d,"snapshot":"%s",'
    '"db":%s,"sequence":null,"table":%s,"server_id":223344,"gtid":%s,"file":"%s","pos":%d,'
    '"row":0,"thread":7,"query":null}'
)
_SOURCE_SCHEMA = {
    "type": "struct",
    "optional": False,
    "name": "io.debezium.connector.mysql.Source",
    "field": "source",
    "fields": [
        {"type": t, "optional": o, "field": f}
        for f, t, o in (
            ("version", "string", False),
            ("connector", "string", False),
            ("name", "string", False),
            ("ts_ms", "int64", False),
            ("snapshot", "string", True),
            ("db", "string", False),
            ("sequence", "string", True),
            ("table", "string", True),
            ("server_id", "int64", False),
            ("gtid", "string", True),
            ("file", "string", False),
            ("pos", "int64", False),
            ("row", "int32", False),
            ("thread", "int64", True),
            ("query", "string", True),
        )
    ],
}
_CHANGE_VALUE_SCHEMA = (
    '{"type":"struct","optional":false,"name":"io.debezium.connector.mysql.SchemaChangeValue"}'
)
_CHANGE_KEY_SCHEMA = (
    '{"type":"struct","optional":false,"name":"io.debezium.connector.mysql.SchemaChangeKey",'
    '"fields":[{"type":"string","optional":false,"field":"databaseName"}]}'
)
Headers = list[tuple[str, bytes | None]]
# One encoder, made once: json.dumps with arguments builds a new one per call.
_compact = json.JSONEncoder(separators=(",", ":")).encode
# The key field Debezium's ByLogicalTableRouter adds (key.enforce.uniqueness)
ROUTER_KEY_FIELD = "__dbz__physicalTableIdentifier"


class Record(NamedTuple):
    """One Kafka record to send."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: Headers | None = None


class _Table:
    """What one (db, table, schema) needs per row, computed once."""

    def __init__(self, b: DebeziumBuilder, db: str, table: str, schema: TableSchema | None):
        self.topic = f"{b.source}.{db}.{table}"
        self.db_json, self.table_json = json.dumps(db), json.dumps(table)
        self.pk = schema.primary_key if schema is not None else ()
        self.converters = row_converters(schema, b.decimal_mode) if schema is not None else []
        # ENUM/SET members as Debezium names a binlog row's index (not a snapshot row's)
        self.binlog = binlog_converters(schema) if schema is not None else []
        self.value_prefix = self.key_prefix = ""
        # ByLogicalTableRouter's key field (the table's own topic), in every key's payload
        self.key_suffix = f',"{ROUTER_KEY_FIELD}":{json.dumps(self.topic)}' if b.routed else ""
        if b.schemas_enable:
            name = f"{b.source}.{db}.{table}"
            fields: list[dict[str, Any]] = [
                _SOURCE_SCHEMA,
                {"type": "string", "optional": False, "field": "op"},
                {"type": "int64", "optional": True, "field": "ts_ms"},
            ]
            if schema is not None:
                row = value_fields(schema, b.decimal_mode)
                fields[:0] = [
                    {
                        "type": "struct",
                        "fields": row,
                        "optional": True,
                        "name": f"{name}.Value",
                        "field": side,
                    }
                    for side in ("before", "after")
                ]
                key = [f for f in row if f["field"] in self.pk]
                if b.routed:
                    key.append({"type": "string", "optional": False, "field": ROUTER_KEY_FIELD})
                key_schema = {
                    "type": "struct",
                    "fields": key,
                    "optional": False,
                    "name": f"{name}.Key",
                }
                self.key_prefix = '{"schema":' + json.dumps(key_schema) + ',"payload":'
            envelope = {
                "type": "struct",
                "fields": fields,
                "optional": False,
                "name": f"{name}.Envelope",
                "version": 1,
            }
            self.value_prefix = '{"schema":' + json.dumps(envelope) + ',"payload":'

    def value(self, payload: str) -> bytes:
        return (self.value_prefix + payload + "}" if self.value_prefix else payload).encode()


class DebeziumBuilder:
    """The records of one Debezium MySQL connector; see the module docstring.

    ``decimal_mode`` is Debezium's ``decimal.handling.mode`` (``string``, or ``base64`` for
    ``precise``); ``tombstones`` follows ``tombstones.on.delete``.
    """

    def __init__(
        self,
        source: str,
        *,
        schemas_enable: bool = False,
        decimal_mode: DecimalMode = "string",
        tombstones: bool = True,
        routed: bool = False,
    ) -> None:
        self.source, self.schemas_enable = source, schemas_enable
        self.routed = routed  # keys as Debezium's ByLogicalTableRouter rewrites them
        self.decimal_mode, self.tombstones = decimal_mode, tombstones
        self._tables: dict[tuple[str, str, TableSchema | None], _Table] = {}
        self._last_schema: dict[tuple[str, str], TableSchema] = {}
        self._source_json = json.dumps(source)
        self.server_uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"mysql://{source}")).upper()
        self._file_no, self._pos, self._txn, self._ts = 1, FIRST_POS, 0, 0

    def _transaction(self, size: int) -> tuple[str, int, str]:
        """Start a transaction of ``size`` binlog bytes: its (file, position, GTID)."""
        if self._pos + size > BINLOG_MAX:
            self._file_no, self._pos = self._file_no + 1, FIRST_POS
        file, pos = f"mysql-bin.{self._file_no:06d}", self._pos
        self._pos += size
        self._txn += 1
        return file, pos, f"{self.server_uuid}:{self._txn}"

    def _now(self) -> int:
        self._ts = max(self._ts, int(time.time() * 1000))
        return self._ts

    def row(
        self,
        db: str,
        table: str,
        op: Literal["c", "u", "d", "r"],
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        schema: TableSchema,
        *,
        snapshot: bool = False,
    ) -> list[Record]:
        """One row change, its own transaction. A ``u`` that changes the primary key is
        written as Debezium does: a delete (header ``__debezium.newkey``), its tombstone,
        then a create (header ``__debezium.oldkey``). A ``d`` is followed by a tombstone.
        Snapshot rows (``op="r"`` or ``snapshot``) sit at the current position, no GTID."""
        t = self._table(db, table, schema)
        snapshot = snapshot or op == "r"
        before_json = self._row_json(t, before, not snapshot)
        after_json = self._row_json(t, after, not snapshot)
        ts = self._now()
        if snapshot:
            file, pos, gtid_json = f"mysql-bin.{self._file_no:06d}", self._pos, "null"
        else:
            size = 260 + len(db) + len(table) + len(before_json) + len(after_json)
            file, pos, gtid = self._transaction(size)
            gtid_json = '"' + gtid + '"'
        src = _SOURCE_TEMPLATE % (
            self._source_json,
            ts,
            "true" if snapshot else "false",
            t.db_json,
            t.table_json,
            gtid_json,
            file,
            pos,
        )
        key = self._key(t, before if op == "d" else after)
        if op == "u" and before is not None and after is not None:
            old_key = self._key(t, before)
            if old_key != key:
                out = [
                    self._data(
                        t, old_key, "d", before_json, "null", src, ts, [("__debezium.newkey", key)]
                    )
                ]
                if self.tombstones:
                    out.append(Record(t.topic, old_key, None))
                out.append(
                    self._data(
                        t, key, "c", "null", after_json, src, ts, [("__debezium.oldkey", old_key)]
                    )
                )
                return out
        out = [self._data(t, key, op, before_json, after_json, src, ts)]
        if op == "d" and self.tombstones:
            out.append(Record(t.topic, key, None))
        return out

    def ddl(self, db: str, table: str, statement: str, schema_after: TableSchema | None) -> Record:
        """One DDL statement on the schema-change topic (``table`` "" for database DDL)."""
        file, pos, gtid = self._transaction(120 + len(db) + len(statement.encode()))
        word = statement.split(None, 1)[0].upper() if statement.strip() else ""
        changes = []
        if table:
            kind = word if word in ("CREATE", "DROP") else "ALTER"
            tbl = None
            if schema_after is not None and kind != "DROP":
                tbl = {
                    "defaultCharsetName": schema_after.charset or "utf8mb4",
                    "primaryKeyColumnNames": list(schema_after.primary_key),
                    "columns": table_change_columns(schema_after),
                    "attributes": [],
                }
                self._last_schema[(db, table)] = schema_after
            changes.append(
                {"type": kind, "id": f'"{db}"."{table}"', "previousId": None, "table": tbl}
            )
        ts = self._now()
        value = json.dumps(
            {
                "source": {
                    "version": VERSION,
                    "connector": "mysql",
                    "name": self.source,
                    "ts_ms": ts,
                    "snapshot": "false",
                    "db": db,
                    "sequence": None,
                    "table": table or None,
                    "server_id": 223344,
                    "gtid": gtid,
                    "file": file,
                    "pos": pos,
                    "row": 0,
                    "thread": 7,
                    "query": None,
                },
                "ts_ms": ts,
                "databaseName": db,
                "schemaName": None,
                "ddl": statement,
                "tableChanges": changes,
            }
        )
        key = json.dumps({"databaseName": db})
        if self.schemas_enable:
            value = '{"schema":' + _CHANGE_VALUE_SCHEMA + ',"payload":' + value + "}"
            key = '{"schema":' + _CHANGE_KEY_SCHEMA + ',"payload":' + key + "}"
        return Record(self.source, key.encode(), value.encode())

    def truncate(self, db: str, table: str) -> Record:
        """``TRUNCATE TABLE``, as Debezium writes it when ``skipped.operations`` lets ``t``
        through: no key, no row images."""
        t = self._table(db, table, self._last_schema.get((db, table)))
        file, pos, gtid = self._transaction(100 + len(db) + len(table))
        ts = self._now()
        src = _SOURCE_TEMPLATE % (
            self._source_json,
            ts,
            "false",
            t.db_json,
            t.table_json,
            '"' + gtid + '"',
            file,
            pos,
        )
        return Record(
            t.topic,
            None,
            t.value('{"source":' + src + ',"op":"t","ts_ms":' + str(ts) + ',"transaction":null}'),
        )

    def _table(self, db: str, table: str, schema: TableSchema | None) -> _Table:
        t = self._tables.get((db, table, schema))
        if t is None:
            t = self._tables[(db, table, schema)] = _Table(self, db, table, schema)
            if schema is not None:
                self._last_schema[(db, table)] = schema
        return t

    def _row_json(self, t: _Table, row: dict[str, Any] | None, binlog: bool = False) -> str:
        if row is None:
            return "null"
        converters = t.converters + t.binlog if binlog else t.converters
        if converters:
            row = dict(row)
            for name, conv in converters:
                v = row.get(name)
                if v is not None:
                    row[name] = conv(v)
        return _compact(row)

    def _key(self, t: _Table, row: dict[str, Any] | None) -> bytes | None:
        if not t.pk or row is None:
            return None
        text = _compact({c: row.get(c) for c in t.pk})
        if t.key_suffix:
            text = text[:-1] + t.key_suffix + "}"
        return (t.key_prefix + text + "}" if t.key_prefix else text).encode()

    def _data(
        self,
        t: _Table,
        key: bytes | None,
        op: str,
        before: str,
        after: str,
        src: str,
        ts: int,
        headers: Headers | None = None,
    ) -> Record:
        return Record(
            t.topic,
            key,
            t.value(
                f'{{"before":{before},"after":{after},"source":{src},"op":"{op}",'
                f'"ts_ms":{ts},"transaction":null}}'
            ),
            headers,
        )
