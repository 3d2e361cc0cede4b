"""Internal: schema changes with identifiers folded, as pessimistic locks compare them.

Exported as :func:`schemas.ddl.normalize` and :func:`schemas.ddl.normalize_schema`.
"""

from __future__ import annotations

import dataclasses

import sqlglot
from sqlglot import exp

from schemas.changes import (
    AddColumn,
    AddIndex,
    AddPrimaryKey,
    AlterSpec,
    AlterTable,
    ChangeColumn,
    CreateDatabase,
    CreateTable,
    CreateTableLike,
    DropColumn,
    DropConstraint,
    DropDatabase,
    DropIndex,
    DropTable,
    ForeignKeyIndex,
    ModifyColumn,
    Position,
    RenameColumn,
    RenameIndex,
    RenameTable,
    SchemaChange,
    SetDefault,
    TruncateTable,
)
from schemas.model import Column, Index, TableName, TableSchema, name_key

__all__ = ["normalize", "normalize_schema"]


def normalize(change: SchemaChange, table: TableName | None = None) -> SchemaChange:
    """``change`` with identifiers lower-cased and, given ``table``, routed to it.

    Two shards running the same statement under their own table names normalise to
    equal values; column position (FIRST/AFTER) stays part of the value.
    """

    def route(name: TableName) -> TableName:
        return table or TableName(name_key(name.table), name.db and name_key(name.db))

    if isinstance(change, CreateTable):
        new = route(change.table)
        return CreateTable(new, _norm_schema(change.schema, new), change.if_not_exists)
    if isinstance(change, CreateTableLike):
        return CreateTableLike(route(change.table), _norm_table(change.like), change.if_not_exists)
    if isinstance(change, AlterTable):
        return AlterTable(route(change.table), tuple(_norm_spec(s) for s in change.specs))
    if isinstance(change, RenameTable):
        return RenameTable(route(change.old), route(change.new))
    if isinstance(change, DropTable):
        return DropTable(route(change.table), change.if_exists)
    if isinstance(change, TruncateTable):
        return TruncateTable(route(change.table))
    if isinstance(change, CreateDatabase):
        return CreateDatabase(name_key(change.name), change.if_not_exists)
    return DropDatabase(name_key(change.name), change.if_exists)


def normalize_schema(schema: TableSchema) -> TableSchema:
    """``schema`` with column and index names lower-cased (MySQL compares them so)."""
    return _norm_schema(schema, TableName(schema.name))


def _norm_table(name: TableName) -> TableName:
    return TableName(name_key(name.table), name.db and name_key(name.db))


def _norm_schema(schema: TableSchema, table: TableName) -> TableSchema:
    return TableSchema(
        columns=tuple(_norm_column(c) for c in schema.columns),
        primary_key=tuple(name_key(c) for c in schema.primary_key),
        indexes=tuple(_norm_index(i) for i in schema.indexes),
        charset=schema.charset,
        collation=schema.collation,
        name=table.table,
    )


def _norm_column(column: Column) -> Column:
    generated = column.generated
    if generated is not None:
        tree = sqlglot.parse_one(generated, read="mysql")
        for ident in tree.find_all(exp.Identifier):
            ident.set("this", name_key(ident.name))
        generated = tree.sql(dialect="mysql")
    return dataclasses.replace(column, name=name_key(column.name), generated=generated)


def _norm_index(index: Index) -> Index:
    return Index(name_key(index.name), tuple(name_key(c) for c in index.columns), index.kind)


def _norm_position(position: Position | None) -> Position | None:
    if position is None or position.after is None:
        return position
    return Position(name_key(position.after))


def _norm_spec(spec: AlterSpec) -> AlterSpec:
    r = dataclasses.replace
    if isinstance(spec, AddColumn | ModifyColumn):
        return r(spec, column=_norm_column(spec.column), position=_norm_position(spec.position))
    if isinstance(spec, ChangeColumn):
        column, position = _norm_column(spec.column), _norm_position(spec.position)
        return r(spec, old_name=name_key(spec.old_name), column=column, position=position)
    if isinstance(spec, DropColumn | DropIndex | DropConstraint | SetDefault):
        return r(spec, name=name_key(spec.name))
    if isinstance(spec, RenameColumn | RenameIndex):
        return r(spec, old_name=name_key(spec.old_name), new_name=name_key(spec.new_name))
    if isinstance(spec, AddIndex):
        return r(spec, index=_norm_index(spec.index))
    if isinstance(spec, AddPrimaryKey):
        return AddPrimaryKey(tuple(name_key(c) for c in spec.columns))
    if isinstance(spec, ForeignKeyIndex):
        return ForeignKeyIndex(name_key(spec.name), tuple(name_key(c) for c in spec.columns))
    return spec  # DropPrimaryKey, TableOptions: no identifiers
