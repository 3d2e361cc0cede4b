"""Pessimistic shard DDL: every shard runs the same DDLs in the same order.

Internal module. The lock's ``expected`` DDL is the first one a shard ran; each shard
that runs it is held and joins ``ready``. DDLs are compared by the schema change they
make (:func:`_same`), so spelling and the way of saying it do not matter (``RENAME
COLUMN`` or ``CHANGE``, ``MODIFY`` or ``ALTER COLUMN ... SET DEFAULT``) and column
position does. A different DDL at that position is a conflict. When every shard of
the target is ready, the DDL runs downstream once and the shards are released in the
order they were held; DDLs they ran meanwhile are then processed one by one, which is how
"each shard's sequence is a prefix of the lock's sequence" is checked.
"""

from __future__ import annotations

from dataclasses import replace

from coordinator.decisions import Decision
from coordinator.locks import LockRules
from coordinator.target import PendingDDL, ShardState, Target
from schemas.changes import AlterTable
from schemas.connect import ConnectField, connect_field
from schemas.ddl import apply, effect, normalize_schema
from schemas.errors import Incompatible, SchemaError
from schemas.lattice import compare
from schemas.model import TableSchema

__all__ = ["PessimisticRules"]


_Effect = tuple[TableSchema, tuple[tuple[str, str | None], ...]]


def _effects(st: ShardState, a: PendingDDL, b: PendingDDL) -> tuple[_Effect, _Effect] | None:
    """What two ALTERs make of the shard's schema (:func:`schemas.ddl.effect`), or None
    when either is no ALTER or does not apply."""
    if not isinstance(a.change, AlterTable) or not isinstance(b.change, AlterTable):
        return None
    try:
        return effect(a.change, st.schema), effect(b.change, st.schema)
    except SchemaError:
        return None


def _same_reading(st: ShardState, a: PendingDDL, b: PendingDDL) -> bool:
    """Whether two DDLs make the same change once column types are read as a Kafka Connect
    schema gives them (same columns, order, nullability and kept data; each type giving the
    same Connect field): one of them was read back from a shadow's rows."""
    effects = _effects(st, a, b)
    if effects is None:
        return False
    (sa, ka), (sb, kb) = effects
    if ka != kb or sa.column_names() != sb.column_names():
        return False
    return all(
        ca.nullable == cb.nullable
        and (
            ConnectField.of(connect_field(ca)).same_as(cb)
            or ConnectField.of(connect_field(cb)).same_as(ca)
        )
        for ca, cb in zip(sa.columns, sb.columns, strict=True)
    )


def _same(st: ShardState, a: PendingDDL, b: PendingDDL) -> bool:
    """Whether two DDLs make the same change to the shard's schema.

    What is compared is the resulting schema change (the schema after it, names folded,
    column order included, and which old column each new one keeps the data of), not the
    text: ``RENAME COLUMN a TO c`` and ``CHANGE a c INT`` on an INT column are the same
    DDL, a DROP and an ADD of the same name are not a rename."""
    if a is b:
        return True
    effects = _effects(st, a, b)
    if effects is None:
        return False
    (sa, ka), (sb, kb) = effects
    return (normalize_schema(sa), ka) == (normalize_schema(sb), kb)


class PessimisticRules(LockRules):
    def on_alter(
        self, t: Target, st: ShardState, ddl: PendingDDL, change: AlterTable, out: list[Decision]
    ) -> None:
        try:
            apply(change, st.schema)
        except SchemaError as e:
            self.block(t, st, ddl, f"shard {st.shard}: {ddl.sql!r} cannot apply: {e}", out)
            return
        owed = t.owed.get(st.shard)
        if owed is not None and _same(st, owed, ddl):
            # An operator already ran this DDL downstream: the shard just catches up.
            del t.owed[st.shard]
            t.set_schema(st, apply(change, st.schema))
            return
        if t.expected is None:
            t.expected = ddl
            t.ready = [st.shard]
            t.hold(st, ddl, f"shard {st.shard} ran {ddl.sql!r}; waiting for the other shards", out)
        elif _same(st, ddl, t.expected):
            t.ready.append(st.shard)
            t.hold(st, ddl, f"shard {st.shard} ran {ddl.sql!r}; waiting for the other shards", out)
        elif ddl.carried != t.expected.carried and _same_reading(st, ddl, t.expected):
            # One side was read from a shadow's rows (a Connect schema), the other is the
            # statement itself: the statement says what the reading could not.
            exact = t.expected if ddl.carried else ddl
            if not ddl.carried:
                for shard in t.ready:  # the shards held on the reading take the statement
                    held = t.shards[shard]
                    at = held.pending[0].position
                    held.pending = [replace(exact, position=at), *held.pending[1:]]
                t.expected = t.shards[t.ready[0]].pending[0]
            t.ready.append(st.shard)
            mine = replace(exact, position=ddl.position)
            why = f"shard {st.shard} ran {mine.sql!r}; waiting for the other shards"
            t.hold(st, mine, why, out)
        else:
            first = t.ready[0] if t.ready else None
            self.block(
                t,
                st,
                ddl,
                f"shard {st.shard} ran {ddl.sql!r} but shard {first} ran "
                f"{t.expected.sql!r} at the same position",
                out,
            )
        self.settle(t, out)

    def admit(self, t: Target, st: ShardState, ddl: PendingDDL, out: list[Decision]) -> None:
        if t.applied is not None:
            schema = st.schema
            if schema.charset is None and schema.collation is None:
                # No table charset written (a plain CREATE TABLE): the database default,
                # which a snapshot's SHOW CREATE TABLE spells out; not a difference.
                schema = schema.replace(charset=t.applied.charset, collation=t.applied.collation)
            try:
                same = compare(t.applied, schema) == 0
            except Incompatible:
                same = False
            if not same:
                st.admitted = False
                self.block(
                    t,
                    st,
                    ddl,
                    f"new table {st.shard} has a schema that differs from target {t.id}'s",
                    out,
                )
                return
        st.admitted = True
        if t.applied is None:
            t.applied = st.schema

    def forget(self, t: Target, st: ShardState) -> None:
        if st.shard in t.ready:
            t.ready.remove(st.shard)
        if not t.ready:
            t.expected = None

    def executed(self, t: Target, st: ShardState, post: TableSchema, out: list[Decision]) -> None:
        ddl = st.pending[0]
        same = t.expected is not None and _same(st, t.expected, ddl)
        peers = [t.shards[s] for s in t.ready if s in t.shards] if same else []
        if st not in peers:
            peers.append(st)
        if same:
            # The lock's DDL ran downstream: shards that have not run it yet owe it.
            for other in t.shards.values():
                if other.admitted and other not in peers:
                    t.owed[other.shard] = ddl
            t.expected = None
            t.ready = []
        else:
            self.forget(t, st)
        self._finish(t, peers, out)

    def settle(self, t: Target, out: list[Decision]) -> None:
        if t.expected is None or t.index.conflicts:
            return
        # Fewer ready shards than admitted ones: some admitted shard is not ready (the
        # common case, decided without a pass over the shards).
        if len(t.ready) < t.index.admitted:
            return
        ready = set(t.ready)
        if any(s.shard not in ready for s in t.shards.values() if s.admitted):
            return
        ddl = t.expected
        assert isinstance(ddl.change, AlterTable) and t.applied is not None
        try:
            downstream = apply(AlterTable(ddl.change.table, ddl.change.specs), t.applied)
        except SchemaError as e:
            st = t.shards[t.ready[0]]
            st.conflict = f"{ddl.sql!r} cannot run downstream on {t.id}: {e}"
            return
        reason = f"every shard of {t.id} ran {ddl.sql!r}"
        t.run_downstream(ddl.change.specs, downstream, reason, out)
        self._finish(t, [t.shards[s] for s in t.ready], out)

    def _finish(self, t: Target, done: list[ShardState], out: list[Decision]) -> None:
        """The shards in ``done`` have their DDL downstream: new schemas, then release."""
        if t.expected is not None and {s.shard for s in done} >= set(t.ready):
            t.expected = None
            t.ready = []
        for s in done:
            change = s.pending[0].change
            assert isinstance(change, AlterTable)
            t.set_schema(s, apply(change, s.schema))
        for s in sorted(done, key=lambda s: s.held_seq):
            self.release(t, s, out)
