"""Schemas and ALTER specifications to and from JSON-able values (for the coordinator's
persisted state).

Every field is written out by name: a value of a type this module does not know is an
error (:class:`CodecError`), never a string that would read back as something else.
"""

from __future__ import annotations

from typing import Any

from schemas._types import literal_for
from schemas.changes import (
    AddColumn,
    AddIndex,
    AddPrimaryKey,
    AlterSpec,
    ChangeColumn,
    DropColumn,
    DropConstraint,
    DropIndex,
    DropPrimaryKey,
    ForeignKeyIndex,
    ModifyColumn,
    Position,
    RenameColumn,
    RenameIndex,
    SetDefault,
    TableOptions,
)
from schemas.errors import SchemaError
from schemas.model import Column, ColumnType, Index, TableSchema

__all__ = ["CodecError", "schema_from_json", "schema_to_json", "specs_from_json", "specs_to_json"]


class CodecError(SchemaError):
    """A schema or ALTER specification cannot be written to or read from JSON."""


def schema_to_json(schema: TableSchema, *, name: bool = True) -> dict[str, Any]:
    """``name=False`` leaves the table's name out (it takes no part in equality)."""
    out: dict[str, Any] = {"name": schema.name} if name else {}
    out["columns"] = [_column_to_json(c) for c in schema.columns]
    out["primary_key"] = list(schema.primary_key)
    out["indexes"] = [_index_to_json(i) for i in schema.indexes]
    out["charset"] = schema.charset
    out["collation"] = schema.collation
    return out


def schema_from_json(data: dict[str, Any]) -> TableSchema:
    return TableSchema(
        columns=tuple(_column_from_json(c) for c in data["columns"]),
        primary_key=tuple(data["primary_key"]),
        indexes=tuple(_index_from_json(i) for i in data["indexes"]),
        charset=data["charset"],
        collation=data["collation"],
        name=data.get("name", ""),
    )


def _column_to_json(c: Column) -> dict[str, Any]:
    t = c.type
    return {
        "name": c.name,
        "type": {
            "base": t.base,
            "length": t.length,
            "scale": t.scale,
            "unsigned": t.unsigned,
            "zerofill": t.zerofill,
            "charset": t.charset,
            "collation": t.collation,
            "members": list(t.members),
        },
        "nullable": c.nullable,
        "default": c.default,
        "generated": c.generated,
        "stored": c.stored,
        "auto_increment": c.auto_increment,
    }


def _column_from_json(c: dict[str, Any]) -> Column:
    t = c["type"]
    ctype = ColumnType(
        base=t["base"],
        length=t["length"],
        scale=t["scale"],
        unsigned=t["unsigned"],
        zerofill=t["zerofill"],
        charset=t["charset"],
        collation=t["collation"],
        members=tuple(t.get("members", ())),
    )
    default = c["default"]
    if default is not None and ctype.base in ("DATE", "DATETIME", "TIMESTAMP"):
        # A state saved before temporal defaults were read as the server stores them
        # (``'0'`` for ``DEFAULT 0``) reads as one saved after (the zero date).
        default = literal_for(default, ctype)
    return Column(
        name=c["name"],
        type=ctype,
        nullable=c["nullable"],
        default=default,
        generated=c["generated"],
        stored=c["stored"],
        auto_increment=c["auto_increment"],
    )


def _index_to_json(i: Index) -> dict[str, Any]:
    return {"name": i.name, "columns": list(i.columns), "kind": i.kind}


def _index_from_json(i: dict[str, Any]) -> Index:
    return Index(i["name"], tuple(i["columns"]), i["kind"])


# --- ALTER specifications -----------------------------------------------------------------
#
# A specification is ``{"kind": <class name>, <field>: <value>, ...}`` with every field of
# the dataclass. Fields are decoded by name: ``column`` is a Column, ``index`` an Index,
# ``position`` a Position (``{"after": name or null}``; FIRST is ``{"after": null}``, no
# position at all is null) and ``columns`` a tuple of names; the rest are str/bool/None.

_SPECS: dict[str, type[AlterSpec]] = {
    cls.__name__: cls
    for cls in (
        AddColumn,
        DropColumn,
        ModifyColumn,
        ChangeColumn,
        RenameColumn,
        SetDefault,
        AddIndex,
        DropIndex,
        DropConstraint,
        ForeignKeyIndex,
        AddPrimaryKey,
        DropPrimaryKey,
        RenameIndex,
        TableOptions,
    )
}


def specs_to_json(specs: tuple[AlterSpec, ...]) -> list[dict[str, Any]]:
    return [_spec_to_json(s) for s in specs]


def specs_from_json(data: list[dict[str, Any]]) -> tuple[AlterSpec, ...]:
    return tuple(_spec_from_json(s) for s in data)


def _spec_to_json(spec: AlterSpec) -> dict[str, Any]:
    kind = type(spec).__name__
    if _SPECS.get(kind) is not type(spec):
        raise CodecError(f"ALTER specification {spec!r} has no JSON form")
    out: dict[str, Any] = {"kind": kind}
    for name, value in vars(spec).items():
        out[name] = _field_to_json(kind, name, value)
    return out


def _field_to_json(kind: str, name: str, value: Any) -> Any:
    if value is None or type(value) in (str, bool):
        return value
    if type(value) is Column:
        return _column_to_json(value)
    if type(value) is Index:
        return _index_to_json(value)
    if type(value) is Position:
        return {"after": value.after}
    if type(value) is tuple and all(type(v) is str for v in value):
        return list(value)
    raise CodecError(f"{kind}.{name} = {value!r}: a value of type {type(value).__name__} has "
                     "no JSON form")  # fmt: skip


def _spec_from_json(data: dict[str, Any]) -> AlterSpec:
    cls = _SPECS.get(data.get("kind", ""))
    if cls is None:
        raise CodecError(f"unknown ALTER specification kind {data.get('kind')!r}")
    fields: dict[str, Any] = {}
    for name, value in data.items():
        if name == "kind":
            continue
        if value is None:
            fields[name] = None
        elif name == "column":
            fields[name] = _column_from_json(value)
        elif name == "index":
            fields[name] = _index_from_json(value)
        elif name == "position":
            fields[name] = Position(value["after"])
        elif name == "columns":
            fields[name] = tuple(value)
        else:
            fields[name] = value
    return cls(**fields)
