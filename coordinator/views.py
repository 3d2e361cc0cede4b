"""Published views of the coordinator's state: what the dashboard, the metrics and the
operator CLI read of a target and its shards, as values. They never hand out a
:class:`~coordinator.target.Target` or :class:`~coordinator.target.ShardState` (whose
fields the lock rules own and change), so a reader cannot depend on them
(``tests/unit/test_boundaries.py`` checks who imports what).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from coordinator.ids import Position, ShardId, TargetId
from coordinator.policy import PolicyNote
from schemas import apply
from schemas.changes import AlterTable, CreateTable
from schemas.model import TableSchema
from shardmerge.errors import ShardMergeError

if TYPE_CHECKING:
    from coordinator.target import ShardState, Target

__all__ = ["HeldView", "ShardView", "TargetView", "target_view"]


@dataclass(frozen=True)
class HeldView:
    """A shard whose events are kept: held on a DDL (``pending``: its statements and
    positions, the first the one it waits on) or awaiting one (``awaiting``)."""

    shard: ShardId
    pending: tuple[tuple[str, Position], ...]
    awaiting: Position
    conflict: str | None
    ready: bool  # pessimistic: it ran the lock's DDL

    @property
    def since(self) -> Position:
        return self.pending[0][1] if self.pending else self.awaiting


@dataclass(frozen=True)
class ShardView:
    shard: ShardId
    version: int
    schema: TableSchema  # as coordination counts it
    upstream: TableSchema  # as its upstream has it: after the DDLs it holds on
    held: bool


@dataclass(frozen=True)
class TargetView:
    id: TargetId
    mode: str
    stage: str
    conflict: str | None
    joined: TableSchema | None  # the downstream schema, extract columns left out
    downstream: TableSchema | None  # with the extract columns
    expected_sql: str | None  # pessimistic: the DDL every shard must run next
    held: tuple[HeldView, ...]  # in hold order
    shards: tuple[ShardView, ...]  # in shard order
    policy_words: tuple[tuple[str, str], ...]
    policy_notes: tuple[PolicyNote, ...]  # frozen values already
    policy_counts: tuple[tuple[str, str, int], ...]  # (kind, word, count), sorted


def upstream_schema(st: ShardState) -> TableSchema:
    """The shard's schema as its upstream has it: after the DDLs it holds on (a pending
    statement that does not apply leaves the schema as it was; the lock shows why)."""
    schema = st.final
    for d in st.pending:
        if isinstance(d.change, AlterTable | CreateTable):
            try:
                schema = apply(d.change, schema)
            except ShardMergeError:
                break
    return schema


def target_view(t: Target) -> TargetView:
    held = t.held_shards()
    ready = set(t.ready)
    held_ids = {st.shard for st in held}
    return TargetView(
        id=t.id,
        mode=t.mode,
        stage=t.stage,
        conflict=t.conflict,
        joined=t.applied,
        downstream=t.downstream(),
        expected_sql=t.expected.sql if t.expected is not None else None,
        held=tuple(
            HeldView(
                st.shard,
                tuple((d.sql, d.position) for d in st.pending),
                st.awaiting,
                st.conflict,
                st.shard in ready,
            )
            for st in held
        ),
        shards=tuple(
            ShardView(s, st.version, st.schema, upstream_schema(st), s in held_ids)
            for s, st in sorted(t.shards.items())
        ),
        policy_words=tuple(t.policy.words),
        policy_notes=tuple(t.policy_notes),
        policy_counts=tuple((k, w, n) for (k, w), n in sorted(t.policy_counts.items())),
    )
