"""An in-memory downstream table that executes coordinator decisions exactly.

It is the reference sink: the memory engine writes to it, and the streaming job's Delta
sink must end in the same state for the same events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from coordinator.decisions import ApplyDDL, CreateTarget, Truncate
from coordinator.ids import TargetId
from coordinator.scenario.values import fill_value
from schemas.changes import AddColumn, ChangeColumn, DropColumn, RenameColumn
from schemas.model import TableSchema
from shardmerge.errors import ShardMergeError

__all__ = ["MemoryTable", "RowError"]


class RowError(ShardMergeError):
    """A row cannot be written downstream (it names a column the target lacks)."""


@dataclass
class MemoryTable:
    target: TargetId
    schema: TableSchema
    rows: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def create(cls, decision: CreateTarget) -> MemoryTable:
        return cls(decision.target, decision.schema)

    def key(self, row: dict[str, Any]) -> tuple[Any, ...]:
        names = self.schema.primary_key or self.schema.column_names()
        return tuple(row.get(n) for n in names)

    def project(
        self, values: dict[str, Any], extra: dict[str, Any], lenient: bool
    ) -> dict[str, Any]:
        """The shard's row in the downstream shape: missing columns get their fill value."""
        lowered = {k.lower(): v for k, v in {**values, **extra}.items()}
        unknown = [k for k in values if not self.schema.has_column(k)]
        if unknown and not lenient:
            raise RowError(
                f"row has column(s) {', '.join(unknown)} that target {self.target} lacks"
            )
        return {
            c.name: lowered[c.key] if c.key in lowered else fill_value(c)
            for c in self.schema.columns
        }

    def write(
        self,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        extra: dict[str, Any],
        lenient: bool,
    ) -> None:
        if before is not None:
            self.rows.pop(self.key(self.project(before, extra, lenient=True)), None)
        if after is not None:
            row = self.project(after, extra, lenient)
            self.rows[self.key(row)] = row

    def apply(self, decision: ApplyDDL) -> None:
        for spec in decision.specs:
            match spec:
                case ChangeColumn(old, column, _):
                    self._rename(old, column.name)
                case RenameColumn(old, new):
                    self._rename(old, new)
                case DropColumn(name):
                    for row in self.rows.values():
                        for k in [k for k in row if k.lower() == name.lower()]:
                            del row[k]
                case AddColumn():
                    pass
        old_rows = list(self.rows.values())
        self.schema = decision.schema
        self.rows = {}
        for row in old_rows:
            lowered = {k.lower(): v for k, v in row.items()}
            projected = {
                c.name: lowered[c.key] if c.key in lowered else fill_value(c)
                for c in self.schema.columns
            }
            self.rows[self.key(projected)] = projected

    def _rename(self, old: str, new: str) -> None:
        for row in self.rows.values():
            for k in [k for k in row if k.lower() == old.lower()]:
                row[new] = row.pop(k)

    def rehome(
        self,
        old: Mapping[str, str],
        new: Mapping[str, str],
        moves: Callable[[dict[str, Any]], bool],
    ) -> None:
        """A move's switch: rows homed at ``old`` (their extract values) whose key
        ``moves`` take ``new``'s extract values; nothing to do without extract columns."""
        if not old:
            return
        old_l = {k.lower(): v for k, v in old.items()}
        new_l = {k.lower(): v for k, v in new.items()}
        rows: dict[tuple[Any, ...], dict[str, Any]] = {}
        rehomed = []
        for key, row in self.rows.items():
            lowered = {k.lower(): v for k, v in row.items()}
            if all(lowered.get(k) == v for k, v in old_l.items()) and moves(row):
                rehomed.append({k: new_l.get(k.lower(), v) for k, v in row.items()})
            else:
                rows[key] = row
        for row in rehomed:
            key = self.key(row)
            if key in rows:
                raise RowError(
                    f"re-homing to {dict(new)}: key {key} is already a row of target {self.target}"
                )
            rows[key] = row
        self.rows = rows

    def truncate(self, decision: Truncate) -> None:
        if not decision.match:
            self.rows = {}
            return
        match = {k.lower(): v for k, v in decision.match}
        self.rows = {
            key: row
            for key, row in self.rows.items()
            if not all(
                row.get(c.name) == match[c.key] for c in self.schema.columns if c.key in match
            )
        }
