"""A simulated upstream: each source's tables with their schemas and rows.

It plays the MySQL shards of a scenario: it checks that steps make sense (an insert names
only columns the shard has) and gives every row event its full before/after image, as
the binlog would. Engines turn its :class:`RowEvent` values into their own events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from coordinator.ids import ShardId
from coordinator.scenario.values import fill_value
from schemas.changes import (
    AlterTable,
    CreateTable,
    CreateTableLike,
    DropDatabase,
    DropTable,
    RenameTable,
    TruncateTable,
)
from schemas.ddl import apply, parse_ddl
from schemas.errors import DDLError
from schemas.model import TableSchema
from shardmerge.errors import ShardMergeError

__all__ = ["RowEvent", "Upstream", "UpstreamError"]


class UpstreamError(ShardMergeError):
    """A step cannot happen on the upstream (unknown table or column, duplicate key)."""


@dataclass(frozen=True)
class RowEvent:
    shard: ShardId
    op: Literal["insert", "update", "delete"]
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    schema: TableSchema


@dataclass
class UpTable:
    schema: TableSchema
    rows: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)

    def key_of(self, row: dict[str, Any]) -> tuple[Any, ...]:
        pk = self.schema.primary_key or self.schema.column_names()
        lowered = {k.lower(): v for k, v in row.items()}
        return tuple(lowered.get(c.lower()) for c in pk)


class Upstream:
    def __init__(self) -> None:
        self.tables: dict[ShardId, UpTable] = {}

    def table(self, shard: ShardId) -> UpTable:
        t = self.tables.get(shard)
        if t is None:
            raise UpstreamError(f"table {shard} does not exist upstream")
        return t

    def create(self, shard: ShardId, schema: TableSchema) -> None:
        self.tables[shard] = UpTable(schema.renamed(shard.table))

    def ddl(self, shard: ShardId, sql: str) -> None:
        """Run a DDL statement on the shard's source and database.

        A statement shardmerge cannot parse is one MySQL may still have run; the
        simulation cannot follow it and leaves the tables as they are.
        """
        try:
            changes = parse_ddl(sql)
        except DDLError:
            return
        for change in changes:

            def at(name: Any) -> ShardId:
                return ShardId(shard.source, name.db or shard.db, name.table)

            match change:
                case CreateTable(table, schema, _):
                    self.create(at(table), schema)
                case CreateTableLike(table, like, _):
                    self.create(at(table), self.table(at(like)).schema)
                case AlterTable(table, _):
                    t = self.table(at(table))
                    old = t.schema
                    t.schema = apply(change, old)
                    t.rows = {
                        t.key_of(r): r
                        for r in (self._reshape(r, old, t.schema, change) for r in t.rows.values())
                    }
                case RenameTable(old, new):
                    self.tables[at(new)] = self.tables.pop(at(old))
                case DropTable(table, _):
                    self.tables.pop(at(table), None)
                case TruncateTable(table):
                    self.table(at(table)).rows.clear()
                case DropDatabase(name, _):
                    for s in [s for s in self.tables if s.source == shard.source and s.db == name]:
                        del self.tables[s]
                case _:
                    pass

    @staticmethod
    def _reshape(
        row: dict[str, Any], old: TableSchema, new: TableSchema, change: AlterTable
    ) -> dict[str, Any]:
        from schemas.changes import ChangeColumn, RenameColumn

        renames = {}
        for spec in change.specs:
            if isinstance(spec, ChangeColumn):
                renames[spec.old_name.lower()] = spec.column.name
            elif isinstance(spec, RenameColumn):
                renames[spec.old_name.lower()] = spec.new_name
        moved = {renames.get(k.lower(), k).lower(): v for k, v in row.items()}
        return {
            c.name: moved[c.name.lower()] if c.name.lower() in moved else fill_value(c)
            for c in new.columns
        }

    def _full(self, t: UpTable, shard: ShardId, values: dict[str, Any]) -> dict[str, Any]:
        for name in values:
            if not t.schema.has_column(name):
                columns = ", ".join(t.schema.column_names())
                raise UpstreamError(f"table {shard} has no column {name!r} (columns: {columns})")
        lowered = {k.lower(): v for k, v in values.items()}
        return {
            c.name: lowered[c.key] if c.key in lowered else fill_value(c) for c in t.schema.columns
        }

    def insert(self, shard: ShardId, values: dict[str, Any]) -> RowEvent:
        t = self.table(shard)
        row = self._full(t, shard, values)
        key = t.key_of(row)
        if key in t.rows:
            raise UpstreamError(f"table {shard} already has a row with key {key}")
        t.rows[key] = row
        return RowEvent(shard, "insert", None, dict(row), t.schema)

    def update(self, shard: ShardId, key: dict[str, Any], values: dict[str, Any]) -> RowEvent:
        t = self.table(shard)
        before = self._find(t, shard, key)
        after = self._full(t, shard, {**before, **values})
        del t.rows[t.key_of(before)]
        t.rows[t.key_of(after)] = after
        return RowEvent(shard, "update", dict(before), dict(after), t.schema)

    def delete(self, shard: ShardId, key: dict[str, Any]) -> RowEvent:
        t = self.table(shard)
        before = self._find(t, shard, key)
        del t.rows[t.key_of(before)]
        return RowEvent(shard, "delete", dict(before), None, t.schema)

    def dml(self, shard: ShardId, sql: str) -> list[RowEvent] | None:
        """The row events of a scenario's INSERT/UPDATE/DELETE statement, run here (names
        relative to ``shard``'s source and database); None for any other statement."""
        head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if head not in ("INSERT", "UPDATE", "DELETE"):
            return None
        from schemas.dml import parse_dml

        dml = parse_dml(sql)
        target = ShardId(shard.source, dml.table.db or shard.db, dml.table.table)
        if dml.op == "insert":
            return [self.insert(target, row) for row in dml.rows]
        if dml.op == "update":
            return [self.update(target, dml.key, dml.set)]
        return [self.delete(target, dml.key)]

    def step(self, shard: ShardId, step: Any) -> RowEvent:
        """The row event of a scenario's ``insert``/``update``/``delete`` step."""
        if step.insert is not None:
            return self.insert(shard, step.insert)
        if step.update is not None:
            return self.update(shard, step.update.key, step.update.set)
        return self.delete(shard, step.delete)

    def _find(self, t: UpTable, shard: ShardId, key: dict[str, Any]) -> dict[str, Any]:
        lowered = {k.lower(): v for k, v in key.items()}
        for row in t.rows.values():
            if all(
                row.get(c.name) == lowered.get(c.key) for c in t.schema.columns if c.key in lowered
            ):
                return row
        raise UpstreamError(f"table {shard} has no row with {key}")
