"""Optimistic shard DDL: shards may differ as long as their schemas join.

Internal module. Follows the seed proposal (reference/seeds/000): each shard has a
``prev`` schema (``ShardState.schema``); a conflict DDL also gives it a ``post`` schema
and holds it. ``final`` is ``post`` where there is one, else ``prev``. The lock resolves
when (1) the finals join, (2) the join is incomparable with every held shard's ``prev``
(the old shape is gone everywhere) and (3) for every held X and every shard Y,
``Join(prev_X, final_Y) >= post_X`` (the new shape is everywhere), where a ``Join`` that
does not exist because Y already made X's change counts as ``final_Y``.

Termination is incremental in the sense that matters at thousands of shards: every check
runs over *distinct* schemas (shards share a handful of shapes), which the target's index
(:mod:`coordinator.index`) keeps as shards change, so an event costs lattice operations on
the shapes, not a pass over the shards.
"""

from __future__ import annotations

import functools

from coordinator.decisions import Decision
from coordinator.index import PostShape
from coordinator.locks import LockRules
from coordinator.target import PendingDDL, ShardState, Target
from schemas.changes import AlterSpec, AlterTable
from schemas.ddl import apply
from schemas.errors import Incompatible, SchemaError
from schemas.lattice import compare, diff, join
from schemas.model import TableName, TableSchema

_NO_TABLE = TableName("_")

__all__ = ["OptimisticRules", "join_all"]


def join_all(schemas: list[TableSchema]) -> TableSchema:
    """Join of several schemas (raises :class:`Incompatible`).

    A rollout joins the same few shapes on every event: the last joins are kept. A join
    is a value of the shapes, but for its name, which is the first one's."""
    return _join_shapes(schemas[0].name, tuple(schemas))


@functools.lru_cache(maxsize=256)
def _join_shapes(name: str, schemas: tuple[TableSchema, ...]) -> TableSchema:
    result = schemas[0]
    for schema in schemas[1:]:
        result = join(result, schema)
    return result


class OptimisticRules(LockRules):
    def on_alter(
        self, t: Target, st: ShardState, ddl: PendingDDL, change: AlterTable, out: list[Decision]
    ) -> None:
        prev = st.schema
        try:
            post = apply(change, prev)
        except SchemaError as e:
            t.fail_strict(st, ddl, str(e))
            self.block(t, st, ddl, f"shard {st.shard}: {ddl.sql!r} cannot apply: {e}", out)
            return
        try:
            compare(prev, post)
        except Incompatible as e:
            self.conflict_ddl(t, st, ddl, post, e, out)
            return
        # A normal DDL: the join of every shard's schema must still exist.
        t.set_schema(st, post)
        try:
            joined = join_all(t.schemas())
        except Incompatible as e:
            t.set_schema(st, prev)
            t.fail_strict(st, ddl, f"joining is impossible: {e}")
            self.block(
                t, st, ddl, f"shard {st.shard} ran {ddl.sql!r}: joining is impossible: {e}", out
            )
            return
        self.follow_join(t, joined, f"shard {st.shard} ran {ddl.sql!r}", out)
        self.settle(t, out)

    def conflict_ddl(
        self,
        t: Target,
        st: ShardState,
        ddl: PendingDDL,
        post: TableSchema,
        why: Incompatible,
        out: list[Decision],
    ) -> None:
        t.fail_strict(st, ddl, f"conflict DDL ({why})")
        st.post = post
        t.hold(
            st,
            ddl,
            f"shard {st.shard} ran the conflict DDL {ddl.sql!r} ({why}); held until every "
            "shard has made the same change",
            out,
        )
        self.settle(t, out)

    def admit(self, t: Target, st: ShardState, ddl: PendingDDL, out: list[Decision]) -> None:
        try:
            joined = join_all([*t.schemas(), st.schema])
        except Incompatible as e:
            st.admitted = False
            t.fail_strict(st, ddl, f"joining is impossible: {e}")
            self.block(t, st, ddl, f"new table {st.shard} cannot join target {t.id}: {e}", out)
            return
        st.admitted = True
        self.follow_join(t, joined, f"table {st.shard} created", out)

    def forget(self, t: Target, st: ShardState) -> None:
        st.post = None

    def follow_join(self, t: Target, joined: TableSchema, reason: str, out: list[Decision]) -> None:
        """Make the downstream the join: grow at once, shrink when the join shrinks."""
        if t.applied is None or t.applied == joined:
            t.applied = t.applied or joined
            return
        specs = diff(t.applied, joined)
        t.run_downstream(specs, _applied(t.applied, specs, joined), reason, out)

    def settle(self, t: Target, out: list[Decision]) -> None:
        # Contradictions are recomputed from scratch (a skipped or dropped shard may have
        # been one side of one), once per pair of distinct (prev, post) shapes: every shard
        # of a shape gets the first reason its shape meets, set only where it differs.
        groups = t.index.post_groups()
        reasons: dict[PostShape, str | None] = dict.fromkeys(shape for shape, _ in groups)
        for i, (xshape, x) in enumerate(groups):
            for yshape, y in groups[i + 1 :]:
                reason = contradiction(x, y)
                if reason:
                    reasons[xshape] = reasons[xshape] or reason
                    reasons[yshape] = reasons[yshape] or reason
        for shape, why in reasons.items():
            if not t.index.post_conflicts_are(shape, why):
                for s in t.index.post_shards(shape):
                    s.conflict = why
        if not groups or t.index.conflicts:
            return
        joined = terminated(t)
        if joined is not None:
            self.resolve(t, joined, out)

    def resolve(self, t: Target, joined: TableSchema, out: list[Decision]) -> None:
        """All three conditions hold: run the conflict DDL downstream once, replay."""
        posts = [s for s in t.held_shards() if s.post is not None]
        first = posts[0]
        change = first.pending[0].change
        assert isinstance(change, AlterTable) and t.applied is not None
        specs: tuple[AlterSpec, ...] = ()
        mid = t.applied
        try:
            mid = apply(AlterTable(change.table, change.specs), t.applied)
            specs = change.specs
        except SchemaError:
            pass  # the downstream never had that shape: reach the join by difference
        extra = diff(mid, joined)
        for s in posts:
            assert s.post is not None
            t.set_schema(s, s.post)
        reason = f"{len(posts)} shard(s) ran {first.pending[0].sql!r}; the lock resolved"
        t.run_downstream(specs + extra, _applied(mid, extra, joined), reason, out)
        # Every resolved DDL is done before any shard moves on: a DDL a released shard had
        # queued must not be weighed against another shard's DDL that just resolved (that
        # would put the lock in `conflict` with a contradiction that no longer exists).
        for s in posts:
            s.post = None
            s.conflict = None
        for s in posts:
            self.release(t, s, out)
        self.settle(t, out)


def _applied(base: TableSchema, specs: tuple[AlterSpec, ...], fallback: TableSchema) -> TableSchema:
    """The downstream after ``specs``, keeping its real column order."""
    try:
        return apply(AlterTable(_NO_TABLE, specs), base)
    except SchemaError:
        return fallback


def terminated(t: Target) -> TableSchema | None:
    """The joined schema when the three termination conditions hold, else None."""
    finals = t.finals()
    pairs = tuple(shape for shape, _ in t.index.post_groups())
    return _terminated(finals[0].name, tuple(finals), pairs)


@functools.lru_cache(maxsize=256)
def _terminated(
    name: str, finals: tuple[TableSchema, ...], pairs: tuple[PostShape, ...]
) -> TableSchema | None:
    """:func:`terminated` of these shapes (kept: a rollout asks on every event while the
    shapes stay the same); ``name`` is the first final's, which the join takes."""
    try:
        joined = join_all(list(finals))
    except Incompatible:
        return None  # condition 1
    for prev in {p for p, _ in pairs}:
        try:
            compare(joined, prev)
            return None  # condition 2: the old shape is still joined
        except Incompatible:
            pass
    for prev, post in pairs:
        for final in finals:
            try:
                larger = join(prev, final)
            except Incompatible:
                larger = final  # Y already made X's change
            try:
                if compare(larger, post) < 0:
                    return None  # condition 3
            except Incompatible:
                return None
    return joined


def contradiction(x: ShardState, y: ShardState) -> str | None:
    """Why the pending conflict DDLs of two held shards can never all hold, or None."""
    assert x.post is not None and y.post is not None
    sx, sy = x.pending[0].sql, y.pending[0].sql
    head = f"shard {x.shard} ran {sx!r} and shard {y.shard} ran {sy!r}"
    try:
        both = join(x.post, y.post)
    except Incompatible as e:
        return f"{head}: their schemas cannot be joined: {e}"
    for a, b in ((x, y), (y, x)):
        assert a.post is not None and b.post is not None
        try:
            if compare(both, a.schema) >= 0:
                return f"{head}: {b.shard} keeps what {a.shard} changed away"
        except Incompatible:
            pass
        try:
            larger = join(a.schema, b.post)
        except Incompatible:
            larger = b.post
        try:
            if compare(larger, a.post) < 0:
                return f"{head}: {b.shard} never reaches the schema of {a.shard}"
        except Incompatible as e:
            return f"{head}: they change the schema in different ways: {e}"
    return None
