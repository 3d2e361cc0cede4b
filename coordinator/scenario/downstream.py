"""An in-memory downstream table that executes coordinator decisions exactly.

It is the reference sink: the memory engine writes to it, and the streaming job's Delta
sink must end in the same state for the same events. A row it cannot take is a
:class:`DeadLetter`, for the same reasons and in the same words as the job's
(``streaming/batch/rows.py``: ``_unfit`` and ``no_ddl_sql``; ``streaming/batch/writer.py``): a key
column missing or null, a column no DDL explains, a value outside its column's domain
(:func:`schemas.storage.unfit`), a row of a table never registered that nothing holds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from coordinator.decisions import ApplyDDL, CreateTarget, Truncate
from coordinator.ids import ShardId, TargetId
from coordinator.scenario.values import downstream_value, fill_value
from schemas.changes import AddColumn, ChangeColumn, DropColumn, RenameColumn
from schemas.model import TableSchema
from schemas.storage import unfit
from shardmerge.errors import ShardMergeError

__all__ = ["NEVER_REGISTERED", "DeadLetter", "MemoryTable", "RowError"]

# The job's reason for a row of a routed table whose CREATE TABLE it never read
# (streaming/batch/writer.py, the rows of fate ``unknown``).
NEVER_REGISTERED = "the row's table was never registered"
# What the job adds to the reason of a row ahead of a DDL once it read its source's
# schema-change topics to the end (streaming.batch.rows.no_ddl_sql): the memory engine reads
# every event in order, so no DDL is ever still to come.
NO_DDL = "; no DDL of its shard explains it (its schema-change topics were read to the end)"


class RowError(ShardMergeError):
    """A row cannot be written downstream (a re-homed key that is taken)."""


@dataclass(frozen=True)
class DeadLetter:
    """A row event the downstream did not take, and why: a row of the job's dead-letter
    table. ``image`` is the row the event carries (its after image; a delete's before)."""

    shard: ShardId
    op: Literal["insert", "update", "delete"]
    image: dict[str, Any]
    reason: str

    @classmethod
    def of(
        cls,
        shard: ShardId,
        op: Literal["insert", "update", "delete"],
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        reason: str,
    ) -> DeadLetter:
        return cls(shard, op, dict(after if after is not None else before or {}), reason)


@dataclass
class MemoryTable:
    target: TargetId
    schema: TableSchema
    rows: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)
    # A database's table (``mariadb``, ``mysql``, ``postgresql``): its columns refuse more
    # values than Delta's (``schemas.storage.limit``); None: a Delta table.
    dialect: str | None = None

    @classmethod
    def create(cls, decision: CreateTarget, dialect: str | None = None) -> MemoryTable:
        return cls(decision.target, decision.schema, dialect=dialect)

    def key(self, row: dict[str, Any]) -> tuple[Any, ...]:
        names = self.schema.primary_key or self.schema.column_names()
        return tuple(row.get(n) for n in names)

    def project(self, values: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        """The shard's row in the downstream shape: missing columns get their fill value,
        columns the target lacks are left out."""
        lowered = {k.lower(): v for k, v in {**values, **extra}.items()}
        return {
            c.name: downstream_value(c, lowered[c.key]) if c.key in lowered else fill_value(c)
            for c in self.schema.columns
        }

    def write(
        self,
        shard: ShardId,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        extra: dict[str, Any],
        lenient: bool,
    ) -> str | None:
        """Apply one row event of ``shard``: None, or why it was not written (a dead
        letter; the downstream is left as the job leaves it). ``lenient``: the shard's rows
        are projected (an operator skipped a DDL, a policy ignored one), so a column the
        target lacks is dropped instead of being a row no DDL explains."""
        if after is None:
            if before is None:
                return None
            why = self.keyless(shard, before, extra, "before")
            if why is None:
                self.rows.pop(self.key(self.project(before, extra)), None)
            return why
        why = self.rejects(shard, after, extra, lenient)
        if why is not None:
            # Only the upsert is lost: an update that moved its key still deletes the old
            # one (the job's delete action of the event is written), one that kept it
            # leaves the row as it was.
            if before is not None and self.moved(before, after, extra):
                self.rows.pop(self.key(self.project(before, extra)), None)
            return why
        if before is not None:
            self.rows.pop(self.key(self.project(before, extra)), None)
        row = self.project(after, extra)
        self.rows[self.key(row)] = row
        return None

    def _upstream_key(self, extra: dict[str, Any]) -> list[str]:
        """The downstream key's columns the shard's rows carry (not the extract columns)."""
        lowered = {k.lower() for k in extra}
        return [k.lower() for k in self.schema.primary_key if k.lower() not in lowered]

    def moved(self, before: dict[str, Any], after: dict[str, Any], extra: dict[str, Any]) -> bool:
        old = {k.lower(): v for k, v in before.items()}
        new = {k.lower(): v for k, v in after.items()}
        return any(old.get(k) != new.get(k) for k in self._upstream_key(extra))

    def keyless(
        self, shard: ShardId, image: dict[str, Any], extra: dict[str, Any], which: str
    ) -> str | None:
        """Why ``image`` has no usable key (``streaming.batch.row_fit.keyless_sql``), or None."""
        lowered = {k.lower(): v for k, v in image.items()}
        for k in self._upstream_key(extra):
            if k not in lowered:
                return f"key column {k} is missing from {which} of shard {shard}"
            if lowered[k] is None:
                return f"key column {k} is null in {which} of shard {shard}"
        return None

    def rejects(
        self, shard: ShardId, after: dict[str, Any], extra: dict[str, Any], lenient: bool
    ) -> str | None:
        """Why the upsert of ``after`` is a dead letter, or None; in the job's order
        (``streaming.batch.rows``): no key, then a column no DDL explains, then the first value
        outside its column's domain."""
        why = self.keyless(shard, after, extra, "after")
        if why is not None:
            return why
        unknown = [k.lower() for k in after if not self.schema.has_column(k)]
        if unknown and not lenient:
            lacks = ", ".join(unknown)
            return f"row of shard {shard} has column(s) {lacks} that the target lacks{NO_DDL}"
        lowered = {k.lower(): v for k, v in after.items()}
        taken = {k.lower() for k in extra}
        for c in self.schema.columns:
            if c.key in lowered and c.key not in taken:
                why = unfit(c, lowered[c.key], self.dialect, self.schema.charset)
                if why is not None:
                    return why
        return None

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
