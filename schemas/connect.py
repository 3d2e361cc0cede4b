"""Column types as Debezium's MySQL connector writes them into Kafka Connect schemas, both
ways.

Forward (:func:`connect_field`): the Connect field schema of a column, as the
JsonConverter writes it with ``schemas.enable`` (the dev producer builds its envelopes with
it). Types follow Debezium's MySQL defaults (``time.precision.mode=adaptive_time_microseconds``,
``bigint.unsigned.handling.mode=long``, ``binary.handling.mode=bytes``; see the connector
docs' "Data type mappings"); DECIMAL follows ``decimal.handling.mode``: ``string`` or
``base64`` (``precise``: logical type ``org.apache.kafka.connect.data.Decimal`` with a
``scale`` parameter).

Back (:func:`carried_schema`): the schema an online-DDL shadow table's rows carry (canal-json's
``mysqlType`` gives exact MySQL types; Debezium's Connect schema is read as below), when the
job never read the shadow's CREATE or ALTER (a gh-ost run that began before the job's first
offset). A Connect schema says less than MySQL's: ``string`` is any of CHAR, VARCHAR, the
TEXTs (and DECIMAL in ``string`` mode), ``int16`` TINYINT or SMALLINT, no defaults. So a
column the real table has keeps the real table's definition when the Connect field is what
that definition would give; only a column that is new or whose field differs takes the
type read back from the field: a column of the same name that the target or another of its
shards has, when its definition gives that field, else the widest MySQL type of the
commonest kind that gives it (``string`` is VARCHAR(16383), the longest utf8mb4 VARCHAR,
which joins with any VARCHAR a later ALTER names but not with a TEXT; ``bytes``
VARBINARY(65535); ``int16`` SMALLINT). Where the connector propagates source types
(``column.propagate.source.type`` / ``datatype.propagate.source.type``), the field's
``__debezium.source.column.type`` parameters give the exact type instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from schemas.ddl import parse_type
from schemas.debezium_enum import from_allowed, to_allowed
from schemas.errors import DDLError, SchemaError
from schemas.model import Column, ColumnType, TableSchema, sql_string

__all__ = [
    "DECIMAL_LOGICAL",
    "ConnectField",
    "DecimalMode",
    "carried_schema",
    "connect_field",
    "parse_fields",
    "row_schema_text",
    "value_fields",
]

DecimalMode = Literal["string", "base64"]

# Kafka Connect's logical type name for DECIMAL (bytes holding the unscaled value).
DECIMAL_LOGICAL = "org.apache.kafka.connect.data.Decimal"
_SOURCE_TYPE = "__debezium.source.column.type"
_SOURCE_LENGTH = "__debezium.source.column.length"
_SOURCE_SCALE = "__debezium.source.column.scale"

_INT = {
    "TINYINT": ("int16", "int16"),
    "SMALLINT": ("int16", "int32"),
    "MEDIUMINT": ("int32", "int32"),
    "INT": ("int32", "int64"),
    "BIGINT": ("int64", "int64"),
}
_TEMPORAL = {
    "DATE": ("int32", "io.debezium.time.Date"),
    "TIME": ("int64", "io.debezium.time.MicroTime"),
    "TIMESTAMP": ("string", "io.debezium.time.ZonedTimestamp"),
    "YEAR": ("int32", "io.debezium.time.Year"),
}


def connect_field(col: Column, decimal_mode: DecimalMode = "string") -> dict[str, Any]:
    """The Connect schema of one column, as the JsonConverter writes it."""
    ctype, params = col.type, None
    t = ctype.base
    if t in _INT:
        kind, name = _INT[t][1 if ctype.unsigned else 0], None
    elif t in ("FLOAT", "DOUBLE"):
        kind, name = ("float" if t == "FLOAT" else "double"), None
    elif t == "DECIMAL":
        if decimal_mode == "string":
            kind, name = "string", None
        else:
            kind, name = "bytes", DECIMAL_LOGICAL
            params = {
                "scale": str(ctype.scale or 0),
                "connect.decimal.precision": str(ctype.length or 10),
            }
    elif t == "DATETIME":
        micro = (ctype.length or 0) > 3
        kind = "int64"
        name = "io.debezium.time.MicroTimestamp" if micro else "io.debezium.time.Timestamp"
    elif t in _TEMPORAL:
        kind, name = _TEMPORAL[t]
    elif t == "BIT":
        if (ctype.length or 1) == 1:
            kind, name = "boolean", None
        else:
            kind, name, params = "bytes", "io.debezium.data.Bits", {"length": str(ctype.length)}
    elif t in ("BINARY", "VARBINARY") or t.endswith("BLOB"):
        kind, name = "bytes", None
    elif t in ("ENUM", "SET"):
        kind = "string"
        name = "io.debezium.data.Enum" if t == "ENUM" else "io.debezium.data.EnumSet"
        # Debezium's members, as its DDL parser keeps them (schemas.debezium_enum)
        params = {"allowed": to_allowed(ctype.members)}
    elif t == "JSON":
        kind, name = "string", "io.debezium.data.Json"
    else:  # CHAR, VARCHAR, TEXT, and types Debezium also writes as strings
        kind, name = "string", None
    out: dict[str, Any] = {"type": kind, "optional": col.nullable}
    if name:
        out["name"], out["version"] = name, 1
    if params:
        out["parameters"] = params
    out["field"] = col.name
    return out


def value_fields(schema: TableSchema, decimal_mode: DecimalMode = "string") -> list[dict[str, Any]]:
    """The fields of the row struct (``before``/``after``) of a table."""
    return [connect_field(c, decimal_mode) for c in schema.columns]


@dataclass(frozen=True)
class ConnectField:
    """One field of a row struct's Connect schema: what a column's type is read back from."""

    field: str
    type: str
    name: str | None = None
    optional: bool = True
    parameters: tuple[tuple[str, str], ...] = ()
    # The column's MySQL type itself, as canal-json's ``mysqlType`` gives it: exact.
    mysql: str | None = None

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> ConnectField:
        field, kind = data.get("field"), data.get("type")
        if not isinstance(field, str) or not field or not isinstance(kind, str):
            raise SchemaError(f"a Connect field needs a name and a type, got {dict(data)!r}")
        params = data.get("parameters") or {}
        if not isinstance(params, Mapping):
            raise SchemaError(f"field {field!r}: parameters are not an object: {params!r}")
        optional = data.get("optional", True)
        return cls(
            field,
            kind,
            data.get("name") or None,
            optional is True or str(optional).lower() == "true",
            tuple(sorted((str(k), str(v)) for k, v in params.items())),
        )

    def param(self, key: str) -> str | None:
        return dict(self.parameters).get(key)

    def same_as(self, col: Column) -> bool:
        """The field is what ``col`` gives (in either DECIMAL mode; ``optional`` aside)."""
        if self.mysql is not None:
            return self._mysql_type().type_sql() == col.type.type_sql()
        source = self._source_type()
        if source is not None:
            return source == col.type.type_sql()
        modes: tuple[DecimalMode, ...] = ("string", "base64")
        for mode in modes:
            f = connect_field(col, mode)
            params = tuple(sorted((f.get("parameters") or {}).items()))
            if (f["type"], f.get("name"), params) == (self.type, self.name, self._plain_params()):
                return True
        return False

    def column(self) -> Column:
        """The column this field reads back as (see the module's docstring)."""
        if self.mysql is not None:
            return Column(self.field, self._mysql_type(), self.optional)
        source = self._source_type()
        if source is not None:
            try:
                return Column(self.field, parse_type(source), self.optional)
            except DDLError as e:
                raise SchemaError(f"column {self.field!r}: source type {source!r}: {e}") from e
        return Column(self.field, self._type(), self.optional)

    def _mysql_type(self) -> ColumnType:
        try:
            return parse_type(self.mysql or "")
        except DDLError as e:
            raise SchemaError(f"column {self.field!r}: MySQL type {self.mysql!r}: {e}") from e

    def _plain_params(self) -> tuple[tuple[str, str], ...]:
        return tuple((k, v) for k, v in self.parameters if not k.startswith("__debezium."))

    def _source_type(self) -> str | None:
        base = self.param(_SOURCE_TYPE)
        if not base:
            return None
        length, scale = self.param(_SOURCE_LENGTH), self.param(_SOURCE_SCALE)
        base = base.upper()
        unsigned = base.endswith(" UNSIGNED")
        base = base.removesuffix(" UNSIGNED")
        if base in ("ENUM", "SET"):
            members = from_allowed(self.param("allowed") or "") or ("",)
            return f"{base}({','.join(sql_string(m) for m in members)})"
        if base in _INT or base in ("TEXT", "TINYTEXT", "MEDIUMTEXT", "LONGTEXT", "JSON"):
            length = None  # display widths and TEXT lengths say nothing downstream
        if length and scale and base in ("DECIMAL", "NUMERIC", "FLOAT", "DOUBLE"):
            text = f"{base}({length},{scale})"
        elif length:
            text = f"{base}({length})"
        else:
            text = base
        return text + (" UNSIGNED" if unsigned else "")

    def _type(self) -> ColumnType:
        name, kind = self.name, self.type
        if name == DECIMAL_LOGICAL:
            scale = int(self.param("scale") or 0)
            precision = int(self.param("connect.decimal.precision") or 65)
            return ColumnType("DECIMAL", precision, scale)
        logical = {
            "io.debezium.time.Date": ColumnType("DATE"),
            "org.apache.kafka.connect.data.Date": ColumnType("DATE"),
            "io.debezium.time.Year": ColumnType("YEAR"),
            "io.debezium.time.Timestamp": ColumnType("DATETIME", 3),
            "org.apache.kafka.connect.data.Timestamp": ColumnType("DATETIME", 3),
            "io.debezium.time.MicroTimestamp": ColumnType("DATETIME", 6),
            "io.debezium.time.NanoTimestamp": ColumnType("DATETIME", 6),
            "io.debezium.time.Time": ColumnType("TIME", 3),
            "org.apache.kafka.connect.data.Time": ColumnType("TIME", 3),
            "io.debezium.time.MicroTime": ColumnType("TIME", 6),
            "io.debezium.time.NanoTime": ColumnType("TIME", 6),
            "io.debezium.time.ZonedTimestamp": ColumnType("TIMESTAMP", 6),
            "io.debezium.data.Json": ColumnType("JSON"),
        }
        if name in logical:
            return logical[name]
        if name in ("io.debezium.data.Enum", "io.debezium.data.EnumSet"):
            members = from_allowed(self.param("allowed") or "")
            return ColumnType("ENUM" if name.endswith("Enum") else "SET", members=members)
        if name == "io.debezium.data.Bits":
            return ColumnType("BIT", int(self.param("length") or 64))
        plain = {
            "int8": ColumnType("TINYINT"),
            "int16": ColumnType("SMALLINT"),
            "int32": ColumnType("INT"),
            "int64": ColumnType("BIGINT"),
            "float": ColumnType("FLOAT"),
            "float32": ColumnType("FLOAT"),
            "double": ColumnType("DOUBLE"),
            "float64": ColumnType("DOUBLE"),
            "boolean": ColumnType("BIT", 1),
            "string": ColumnType("VARCHAR", 16383),
            "bytes": ColumnType("VARBINARY", 65535),
        }
        if name is None and kind in plain:
            return plain[kind]
        what = f"{kind} ({name})" if name else kind
        raise SchemaError(f"column {self.field!r}: no MySQL type reads back from Connect {what}")


def row_schema_text(fields: list[dict[str, Any]]) -> str:
    """The row schema as events carry it (``row_schema``, see ``streaming.source.contract``): per
    field ``[field, type, name, optional, parameters]`` (name null and parameters ``{}``
    when absent), as canonical JSON (sorted keys, no spaces, non-ASCII kept). The schema
    fingerprint is a hash of the same text."""
    form = [
        [
            f.get("field"),
            f.get("type"),
            f.get("name"),
            f.get("optional", True) is True or str(f.get("optional")).lower() == "true",
            f.get("parameters") or {},
        ]
        for f in fields
    ]
    return json.dumps(form, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def parse_fields(text: str) -> tuple[ConnectField, ...]:
    """The row's fields from a row schema's text: Debezium's (:func:`row_schema_text`), or
    canal-json's ``mysqlType`` in column order, ``[[column, mysql type], ...]``."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise SchemaError(f"the row schema is not JSON: {e}") from e
    if not isinstance(data, list) or not data:
        raise SchemaError("the row schema is not a list of fields")
    pairs = all(
        isinstance(f, list) and len(f) == 2 and all(isinstance(x, str) for x in f) for f in data
    )
    if pairs:
        fields = tuple(ConnectField(f or "?", "mysql", mysql=t) for f, t in data)
    elif all(isinstance(f, list) and len(f) == 5 for f in data):
        fields = tuple(
            ConnectField.of({"field": f, "type": t, "name": n, "optional": o, "parameters": p})
            for f, t, n, o, p in data
        )
    else:
        raise SchemaError(
            "the row schema is not a list of [field, type, name, optional, parameters] "
            "(Debezium) or of [column, MySQL type] (canal-json)"
        )
    names = [f.field.lower() for f in fields]
    if len(set(names)) != len(names):
        raise SchemaError(f"the row schema names a column twice: {[f.field for f in fields]}")
    return fields


def carried_schema(
    real: TableSchema, fields: tuple[ConnectField, ...], known: tuple[TableSchema, ...] = ()
) -> TableSchema:
    """The schema a shadow table's rows carry, read against the real table it replaces.

    Columns are in the fields' order; a column the real table has and whose field is what
    its definition gives keeps that definition (default and comment included), taking
    the field's nullability; so does a column of one of the ``known`` schemas (the
    target's, its other shards'), the first whose definition gives the field; any other
    column is read back from its field. The real
    table's keys stay (a row's schema carries none); the primary key columns must remain.
    Raises :class:`SchemaError` when a field has no MySQL type to read back, or when the
    primary key loses a column."""
    columns: list[Column] = []
    for f in fields:
        candidates = (s.column(f.field) for s in (real, *known))
        col = next((c for c in candidates if c is not None and f.same_as(c)), None)
        if col is not None:
            col = col.renamed(f.field)
            # canal's mysqlType says nothing of NULL: the definition's nullability stays
            keep = col.nullable == f.optional or f.mysql is not None
            columns.append(col if keep else replace(col, nullable=f.optional))
        else:
            columns.append(f.column())
    names = {c.key for c in columns}
    missing = [k for k in real.primary_key if k.lower() not in names]
    if missing:
        raise SchemaError(f"the rows carry no primary key column {missing[0]!r}")
    kept = tuple(i for i in real.indexes if all(c.lower() in names for c in i.columns))
    return real.replace(columns=tuple(columns), indexes=kept)
