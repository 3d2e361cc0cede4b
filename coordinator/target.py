"""The state of one target (downstream table) and the mechanics both lock modes share.

Internal module. A :class:`Target` holds the shards routed to it, the schema that has been
applied downstream, and the lock: which shards are held, on which pending DDL, and
whether the lock is in conflict. Mode-specific rules live in :mod:`coordinator.optimistic`
and :mod:`coordinator.pessimistic`; both call the helpers here so that holding, releasing
and running DDL downstream happen one way only.
"""

from __future__ import annotations

import dataclasses
import logging
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from coordinator.decisions import ApplyDDL, Decision, Hold, Release, Rename, Truncate
from coordinator.ids import Position, ShardId, TargetId
from coordinator.index import INDEXED_FIELDS, ShardIndex, ShardTable
from coordinator.policy import Policy, PolicyNote
from coordinator.routing import Extract
from schemas.changes import (
    AlterSpec,
    AlterTable,
    CreateTable,
    DropTable,
    RenameTable,
    TruncateTable,
)
from schemas.model import Column, ColumnType, TableSchema, name_key
from schemas.render import alter_sql
from shardmerge.errors import ShardMergeError

__all__ = ["ConflictError", "PendingDDL", "ShardState", "Stage", "Target"]

Stage = Literal["none", "waiting", "conflict"]
Mode = Literal["optimistic", "pessimistic"]


@dataclass(frozen=True)
class TargetConfig:
    """A target's settings: its mode, whether a conflict stops the job, its DDL policy."""

    mode: Mode = "optimistic"
    strict: bool = False
    policy: Policy = field(default_factory=Policy)  # schema-change policy per DDL kind


EXTRACT_TYPE = ColumnType("VARCHAR", length=255)
POLICY_NOTES_KEPT = 16

log = logging.getLogger("shardmerge.policy")


class ConflictError(ShardMergeError):
    """A strict target met a conflict: the run stops.

    The message names the shard and the statement. To go on, fix the upstream DDL or turn
    ``strict`` off for the target and resolve the lock with ``shardmerge unlock``.
    """


@dataclass(frozen=True)
class PendingDDL:
    """A shard DDL waiting in the lock: its text, where it happened, what it does.

    ``change`` is None when the statement could not be parsed (``error`` says why).
    ``carried``: see the field. A DROP or RENAME TABLE is pending only when a ``fail``
    policy holds it (``Coordinator._hold_table``): ``renames`` then holds every pair of
    the statement, which is taken as a whole."""

    sql: str
    position: Position
    change: AlterTable | TruncateTable | CreateTable | DropTable | RenameTable | None
    error: str | None = None
    # Read from the schema an online-DDL shadow's rows carried: its column types are only
    # as exact as a Kafka Connect schema (schemas.connect).
    carried: bool = False
    renames: tuple[tuple[ShardId, ShardId], ...] = ()

    @property
    def table_statement(self) -> bool:
        """A DROP or RENAME TABLE (held by a ``fail`` policy)."""
        return isinstance(self.change, DropTable | RenameTable)


@dataclass
class ShardState:
    """One shard of a target.

    ``schema`` is the shard's schema as coordination counts it (``prev`` in the seed
    proposal). A shard is *held* exactly when ``pending`` is not empty: ``pending[0]`` is
    the DDL it waits on (held from its position); later entries arrived while it was held
    and are processed, in order, when it is released. ``post`` is the schema after an
    optimistic conflict DDL. ``project`` is set once an operator skipped one of its DDLs:
    its rows may carry columns the downstream lacks, whose values are then dropped.

    Once in a target's :class:`~coordinator.index.ShardTable`, an assignment to a field
    the lock's views read updates them (:mod:`coordinator.index`): change ``pending`` by
    assigning a new list, never in place.
    """

    shard: ShardId
    version: int
    schema: TableSchema
    pending: list[PendingDDL] = field(default_factory=list)
    post: TableSchema | None = None
    held_seq: int = 0
    project: bool = False
    conflict: str | None = None  # why this shard's DDL cannot resolve by itself
    awaiting: Position | None = None  # rows ahead of a DDL not yet seen, from here on
    admitted: bool = True  # False while a new table whose schema does not fit is held
    # Column renames this shard ran, with their positions (the latest few): a row positioned
    # before one that arrives late (its topic lags the schema-change topic) still carries
    # the old names, and is written under the names the target has now.
    renamed: list[tuple[Position, tuple[tuple[str, str], ...]]] = field(default_factory=list)
    # The position of the last ALTER TABLE of this shard the coordinator saw: a row before
    # it that names a column the target lacks is behind that DDL (a dropped column), not
    # ahead of one that has not arrived.
    last_alter: Position = None
    # The schema fingerprint this shard's rows carry since its last ALTER (None: not seen
    # yet); a row with another one is ahead of a DDL (coordinator.fingerprints).
    fingerprint: str | None = None
    # Columns this shard has upstream that an `ignore`/`warn` policy left out of its
    # coordination schema (name keys): later statements about them are ignored too
    # (coordinator.policy.alter_verdict).
    ignored: tuple[str, ...] = ()

    @classmethod
    def of(cls, fields: dict[str, Any]) -> ShardState:
        """A shard from every one of its fields (a dict it keeps), as restoring the state
        makes thousands: the dataclass constructor would assign each field through
        ``__setattr__``, a call per field for a shard that is in no index yet."""
        if fields.keys() != _SHARD_FIELDS:
            missing = sorted(_SHARD_FIELDS - fields.keys())
            unknown = sorted(fields.keys() - _SHARD_FIELDS)
            raise TypeError(f"a shard state's fields: missing {missing}, unknown {unknown}")
        st = cls.__new__(cls)
        object.__setattr__(st, "__dict__", fields)
        return st

    def __setattr__(self, name: str, value: Any) -> None:
        fields = self.__dict__
        ref: weakref.ref[ShardIndex] | None = fields.get("_index")
        if ref is None or name not in INDEXED_FIELDS:
            object.__setattr__(self, name, value)
        elif name == "pending" or fields[name] is not value:  # the same value: no change
            object.__setattr__(self, name, value)
            index = ref()
            if index is not None:  # else its table is gone, and the shard with it
                index.update(self)

    def altered_at(self, position: Position) -> None:
        """An ALTER of this shard's table took effect at ``position``: rows before it are of
        the older schema, and rows after it teach the fingerprint anew."""
        self.last_alter = position
        self.fingerprint = None

    @property
    def held(self) -> bool:
        return bool(self.pending)

    @property
    def final(self) -> TableSchema:
        return self.post if self.post is not None else self.schema


_SHARD_FIELDS = frozenset(f.name for f in dataclasses.fields(ShardState))


@dataclass
class Refusal:
    """The downstream refused a change it cannot express (``why``, with what to do).

    Until an operator retries (``unlock TARGET --retry``), nothing of the target is
    written: every shard's rows are held, and the decisions the refused change was part
    of, and any taken since, wait in ``deferred``, in order."""

    why: str
    deferred: list[Decision] = field(default_factory=list)


@dataclass
class Target:
    """A downstream table, its shards and its lock."""

    id: TargetId
    mode: Mode
    strict: bool
    extract: Extract
    shards: ShardTable = field(default_factory=ShardTable)
    applied: TableSchema | None = None  # downstream schema, extract columns left out
    seq: int = 0  # orders holds
    # pessimistic: the DDL every shard must run next, and who ran it
    expected: PendingDDL | None = None
    ready: list[ShardId] = field(default_factory=list)
    owed: dict[ShardId, PendingDDL] = field(default_factory=dict)  # forced by `exec`
    refused: Refusal | None = None  # the downstream refused a change: all rows wait
    # The schema-change policy (from the settings, never saved), the latest decisions a
    # word other than `forward` took, and how many per (kind, word) since the checkpoint
    # began (saved: the metrics' counter).
    policy: Policy = field(default_factory=Policy)
    policy_notes: list[PolicyNote] = field(default_factory=list)
    policy_counts: dict[tuple[str, str], int] = field(default_factory=dict)
    _extract_counts: tuple[tuple[int, Extract], Counter[tuple[str, ...]]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "shards" and not isinstance(value, ShardTable):
            value = ShardTable(value, refused=self.__dict__.get("refused") is not None)
        object.__setattr__(self, name, value)
        if name == "refused" and "shards" in self.__dict__:
            self.shards.index.set_refused(value is not None)

    # --- views (each from the index: no view walks every shard) -----------------------

    @property
    def index(self) -> ShardIndex:
        return self.shards.index

    @property
    def conflict(self) -> str | None:
        """Why the lock cannot resolve by itself, or None."""
        reasons = dict.fromkeys(s.conflict for s in self.index.waiting_conflicts() if s.conflict)
        if self.refused is not None:
            reasons = {self.refused.why: None, **reasons}
        return "; ".join(reasons) if reasons else None

    @property
    def stage(self) -> Stage:
        if self.refused is not None or self.index.waiting_conflict_count:
            return "conflict"
        if self.index.waiting_count:
            return "waiting"
        return "none"

    def held_shards(self) -> list[ShardState]:
        """Shards whose events are kept (held on a DDL, or awaiting one; every shard while
        the downstream refuses a change), in hold order."""
        return self.index.waiting()

    def downstream(self) -> TableSchema | None:
        """The full downstream schema: the applied schema plus the extract columns."""
        return None if self.applied is None else with_extract(self.applied, self.extract)

    # --- shared mechanics ----------------------------------------------------------

    def note_policy(self, shard: ShardId, sql: str, kind: str, word: str) -> None:
        """A policy other than ``forward`` decided a DDL of ``shard``: keep it (the latest
        few, for ``shardmerge locks``) and count it."""
        self.policy_notes = [*self.policy_notes, PolicyNote(str(shard), sql, kind, word)][
            -POLICY_NOTES_KEPT:
        ]
        key = (kind, word)
        self.policy_counts[key] = self.policy_counts.get(key, 0) + 1
        if word == "warn":
            log.warning(
                "target %s: shard %s ran %r: %s is 'warn' by the target's policy: recorded, "
                "nothing downstream",
                self.id,
                shard,
                sql,
                kind,
            )

    def schemas(self) -> list[TableSchema]:
        """The distinct schemas of the admitted shards, in shard order.

        Joins run over these: shards share a handful of shapes, so at thousands of shards a
        join costs a few lattice operations.
        """
        return self.index.schemas()

    def finals(self) -> list[TableSchema]:
        """The distinct final schemas (``post`` or else ``schema``) of the admitted shards,
        in shard order."""
        return self.index.finals()

    def set_schema(self, state: ShardState, schema: TableSchema) -> None:
        state.schema = schema

    def hold(self, state: ShardState, ddl: PendingDDL, reason: str, out: list[Decision]) -> None:
        self.seq += 1
        state.held_seq = self.seq
        state.pending = [ddl, *state.pending]
        out.append(Hold(self.id, state.shard, state.version, ddl.position, reason))

    def release_rows(self, state: ShardState, until: Position | None, out: list[Decision]) -> None:
        out.append(Release(self.id, state.shard, state.version, until, state.project))

    def run_downstream(
        self, specs: tuple[AlterSpec, ...], schema: TableSchema, reason: str, out: list[Decision]
    ) -> None:
        """Record that ``specs`` run downstream, turning the applied schema into ``schema``."""
        if not specs:
            self.applied = schema
            return
        self.applied = schema
        full = with_extract(schema, self.extract)
        out.append(ApplyDDL(self.id, specs, full, alter_sql(self.id.table, specs), reason))

    def truncate(self, state: ShardState, out: list[Decision], position: Position = None) -> bool:
        """Delete one shard's rows downstream, if the extract columns tell them apart."""
        if not self._told_apart(state.shard):
            return False
        match = tuple(sorted(self.extract.values(state.shard).items()))
        out.append(Truncate(self.id, state.shard, state.version, match, position))
        return True

    def rename(self, old: ShardId, new: ShardId, position: Position) -> Rename:
        """The :class:`Rename` of ``old`` to ``new`` within this target (call before the
        shard is re-keyed): downstream rows rewritten only where the extract columns name
        the two differently and tell ``old`` apart from the other shards."""
        match, values = self.extract.values(old), self.extract.values(new)
        if match == values or not self._told_apart(old):
            match = values = {}
        return Rename(
            self.id,
            old,
            new,
            self.shards[old].version,
            tuple(sorted(match.items())),
            tuple(sorted(values.items())),
            position,
        )

    def _told_apart(self, shard: ShardId) -> bool:
        """:meth:`Extract.tells_apart` of ``shard`` from the target's other shards, from
        counts of their extract values kept while no shard comes or goes (a TRUNCATE
        rolled out over every shard would otherwise compare each shard with all)."""
        if not self.extract.columns():
            return False
        key = (self.shards.stamp, self.extract)
        kept = self._extract_counts
        if kept is None or kept[0] != key:
            kept = self._extract_counts = (
                key,
                Counter(_extract_key(self.extract, s) for s in self.shards),
            )
        return kept[1][_extract_key(self.extract, shard)] == 1

    def truncate_all(
        self, state: ShardState, out: list[Decision], position: Position = None
    ) -> None:
        """An operator executes a TRUNCATE as written: every row of the target goes."""
        out.append(Truncate(self.id, state.shard, state.version, (), position))

    def fail_strict(self, state: ShardState, ddl: PendingDDL, why: str) -> None:
        if self.strict:
            raise ConflictError(
                f"conflict on target {self.id} (strict): shard {state.shard} ran {ddl.sql!r}: {why}"
            )

    def truncate_reason(self, state: ShardState) -> str:
        return (
            f"TRUNCATE on shard {state.shard} cannot be applied: target {self.id} has no "
            "extract columns (extract.source_column / db_column / table_column) that tell "
            "this shard's rows apart from the other shards'; set them, or skip it with "
            f"`shardmerge unlock {self.id} --shard {state.shard} --action skip`"
        )


def _extract_key(extract: Extract, shard: ShardId) -> tuple[str, ...]:
    return tuple(extract.values(shard).values())


def with_extract(schema: TableSchema, extract: Extract) -> TableSchema:
    """The downstream shape: extract columns appended and added to the primary key."""
    names = extract.columns()
    if not names:
        return schema
    extra = [Column(n, EXTRACT_TYPE, nullable=False) for n in names if not schema.has_column(n)]
    pk = schema.primary_key + tuple(
        n for n in names if name_key(n) not in {name_key(p) for p in schema.primary_key}
    )
    return dataclasses.replace(schema, columns=schema.columns + tuple(extra), primary_key=pk)
