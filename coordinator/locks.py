"""Lock rules shared by both modes: DDL dispatch, release with queued DDLs, operator
commands. Internal module; the mode-specific rules subclass :class:`LockRules`.

All functions mutate the given :class:`~coordinator.target.Target` and append decisions
to ``out``; they never perform I/O.
"""

from __future__ import annotations

from coordinator.decisions import Decision
from coordinator.policy import Word, alter_verdict, partition_kind
from coordinator.target import PendingDDL, ShardState, Target
from schemas.changes import AlterTable, CreateTable, DropTable, RenameTable, TruncateTable
from schemas.ddl import apply
from schemas.errors import SchemaError
from schemas.model import TableSchema
from shardmerge.errors import ShardMergeError

__all__ = ["LockRules", "OperatorError"]


class OperatorError(ShardMergeError):
    """An operator command cannot be carried out (unknown target/shard, nothing pending)."""


class LockRules:
    """Stateless rules; the state is the :class:`Target` passed in."""

    # --- entry point for a DDL of a shard that is not held ---------------------------

    def on_ddl(self, t: Target, st: ShardState, ddl: PendingDDL, out: list[Decision]) -> None:
        if t.policy or st.ignored:
            left = self.by_policy(t, st, ddl, out)
            if left is None:
                return
            ddl = left
        if isinstance(ddl.change, DropTable | RenameTable):
            # a DROP or RENAME TABLE queued while the shard was held: only a ``fail``
            # policy queues one (the coordinator takes the others at once)
            kind = "drop_table" if isinstance(ddl.change, DropTable) else "rename_table"
            self.fail_by_policy(t, st, ddl, kind, "fail", out)
            return
        if ddl.change is None:
            reason = f"cannot parse DDL {ddl.sql!r}: {ddl.error}"
            t.fail_strict(st, ddl, reason)
            self.block(t, st, ddl, reason, out)
            return
        if isinstance(ddl.change, TruncateTable):
            if not t.truncate(st, out, ddl.position):
                t.fail_strict(st, ddl, "TRUNCATE needs extract columns")
                self.block(t, st, ddl, t.truncate_reason(st), out)
            return
        if isinstance(ddl.change, CreateTable):  # a re-queued new table: try to admit it
            self.admit(t, st, ddl, out)
            return
        self.on_alter(t, st, ddl, ddl.change, out)

    def on_alter(
        self, t: Target, st: ShardState, ddl: PendingDDL, change: AlterTable, out: list[Decision]
    ) -> None:
        raise NotImplementedError

    def by_policy(
        self, t: Target, st: ShardState, ddl: PendingDDL, out: list[Decision]
    ) -> PendingDDL | None:
        """The target's schema-change policy, before the lock rules
        (:mod:`coordinator.policy`): the DDL left to them, or None when the policy decided
        alone (ignored: the shard goes on; failed: the shard is held in ``conflict``)."""
        change = ddl.change
        if isinstance(change, AlterTable):
            verdict = alter_verdict(t.policy, change, st.schema, st.ignored)
            for noted, said in verdict.notes:
                t.note_policy(st.shard, ddl.sql, noted, said)
            if verdict.fail is not None:
                self.fail_by_policy(t, st, ddl, *verdict.fail, out)
                return None
            if verdict.ignored != st.ignored:
                st.ignored = verdict.ignored
            if verdict.project:
                st.project = True  # its rows may carry what the downstream does not get
            if verdict.change is None:
                return None
            return (
                ddl
                if verdict.change is change
                else PendingDDL(ddl.sql, ddl.position, verdict.change)
            )
        if isinstance(change, TruncateTable):
            kind: str | None = "truncate_table"
        elif change is None:
            kind = partition_kind(ddl.sql)
        else:
            kind = None  # CREATE TABLE: the coordinator applies `create_table` itself
        word = "forward" if kind is None else t.policy.word(kind)
        if kind is None or word == "forward":
            return ddl
        t.note_policy(st.shard, ddl.sql, kind, word)
        if word == "fail":
            self.fail_by_policy(t, st, ddl, kind, word, out)
        return None  # ignore / warn: no row is deleted downstream

    def fail_by_policy(
        self,
        t: Target,
        st: ShardState,
        ddl: PendingDDL,
        kind: str,
        word: Word,
        out: list[Decision],
    ) -> None:
        """A ``fail`` policy: the shard is held, stage ``conflict``; never raises."""
        why = (
            f"shard {st.shard} ran {ddl.sql!r}: {kind} is {word!r} by the policy of target "
            f"{t.id}; skip it (`shardmerge unlock {t.id} --shard {st.shard} --action skip`), "
            "run it downstream (`--action exec`) or replace it"
        )
        self.block(t, st, ddl, why, out)

    def admit(self, t: Target, st: ShardState, ddl: PendingDDL, out: list[Decision]) -> None:
        """A new shard table joins the target (``st.schema`` is its schema)."""
        raise NotImplementedError

    def settle(self, t: Target, out: list[Decision]) -> None:
        """Re-evaluate the lock after shards changed (resolve what can be resolved)."""
        raise NotImplementedError

    def forget(self, t: Target, st: ShardState) -> None:
        """Drop mode-specific references to a shard's pending DDL (skip, drop table)."""

    # --- shared mechanics --------------------------------------------------------------

    def block(
        self, t: Target, st: ShardState, ddl: PendingDDL, conflict: str, out: list[Decision]
    ) -> None:
        """Hold a shard in the conflict stage."""
        t.hold(st, ddl, conflict, out)
        st.conflict = conflict

    def release(self, t: Target, st: ShardState, out: list[Decision]) -> None:
        """The shard's blocking DDL is done with: replay its held events and process the
        DDLs that arrived while it was held, in order, holding it again if one blocks."""
        st.pending = st.pending[1:]
        st.post = None
        st.conflict = None
        self.drain(t, st, out)

    def drain(self, t: Target, st: ShardState, out: list[Decision]) -> None:
        rest, st.pending = st.pending, []
        while rest:
            nxt = rest.pop(0)
            t.release_rows(st, nxt.position, out)
            self.on_ddl(t, st, nxt, out)
            if st.held:
                st.pending = [*st.pending, *rest]
                return
        t.release_rows(st, None, out)

    # --- operator commands -------------------------------------------------------------

    def skip(self, t: Target, st: ShardState, out: list[Decision]) -> None:
        """The pending DDL never runs downstream; the shard keeps its schema from before it
        and its events replay projected onto the downstream schema."""
        self.forget(t, st)
        st.project = True
        if not st.admitted:
            assert t.applied is not None
            st.schema = t.applied
            st.admitted = True
        self.release(t, st, out)
        self.settle(t, out)

    def execute(self, t: Target, st: ShardState, out: list[Decision]) -> None:
        """The pending DDL runs downstream as written, then the shard's events replay."""
        ddl = st.pending[0]
        if ddl.change is None:
            raise OperatorError(
                f"cannot execute {ddl.sql!r} on {t.id}: it could not be parsed ({ddl.error}); "
                "replace it with statements shardmerge understands (--replace)"
            )
        if isinstance(ddl.change, TruncateTable):
            self.forget(t, st)
            # This shard's rows where the extract columns tell them apart (a TRUNCATE a
            # policy held), else every row of the target, as written.
            if not t.truncate(st, out, ddl.position):
                t.truncate_all(st, out, ddl.position)
            self.release(t, st, out)
        elif isinstance(ddl.change, CreateTable):
            self.forget(t, st)
            st.admitted = True
            self.release(t, st, out)
        else:
            # a DROP or RENAME TABLE is the coordinator's to take (Coordinator._take_table)
            assert isinstance(ddl.change, AlterTable) and t.applied is not None
            try:
                downstream = apply(AlterTable(ddl.change.table, ddl.change.specs), t.applied)
                post = st.post or apply(ddl.change, st.schema)
            except SchemaError as e:
                raise OperatorError(f"cannot execute {ddl.sql!r} on {t.id}: {e}") from e
            t.run_downstream(ddl.change.specs, downstream, f"operator exec on {st.shard}", out)
            self.executed(t, st, post, out)
        self.settle(t, out)

    def executed(self, t: Target, st: ShardState, post: TableSchema, out: list[Decision]) -> None:
        """After an operator ran a shard's DDL downstream: the shard moves on."""
        self.forget(t, st)
        t.set_schema(st, post)
        self.release(t, st, out)

    def replace(
        self, t: Target, st: ShardState, ddls: list[PendingDDL], out: list[Decision]
    ) -> None:
        """Replace the pending DDL with other statements, processed in its place."""
        self.forget(t, st)
        st.pending = [*ddls, *st.pending[1:]]
        st.post = None
        st.conflict = None
        self.drain(t, st, out)
        self.settle(t, out)
