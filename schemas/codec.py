"""Schemas to and from JSON-able dicts (for the coordinator's persisted state)."""

from __future__ import annotations

import dataclasses
from typing import Any

from schemas.model import Column, ColumnType, Index, TableSchema

__all__ = ["schema_from_json", "schema_to_json"]


def schema_to_json(schema: TableSchema) -> dict[str, Any]:
    return {
        "name": schema.name,
        "columns": [
            {**dataclasses.asdict(c), "type": _type_to_json(c.type)} for c in schema.columns
        ],
        "primary_key": list(schema.primary_key),
        "indexes": [
            {"name": i.name, "columns": list(i.columns), "kind": i.kind} for i in schema.indexes
        ],
        "charset": schema.charset,
        "collation": schema.collation,
    }


def _type_to_json(t: ColumnType) -> dict[str, Any]:
    out = dataclasses.asdict(t)
    out["members"] = list(t.members)
    return out


def schema_from_json(data: dict[str, Any]) -> TableSchema:
    columns = []
    for c in data["columns"]:
        t = dict(c["type"])
        t["members"] = tuple(t.get("members", ()))
        columns.append(Column(**{**c, "type": ColumnType(**t)}))
    return TableSchema(
        columns=tuple(columns),
        primary_key=tuple(data["primary_key"]),
        indexes=tuple(Index(i["name"], tuple(i["columns"]), i["kind"]) for i in data["indexes"]),
        charset=data["charset"],
        collation=data["collation"],
        name=data["name"],
    )
