"""The coordinator: one object per job, all targets, every upstream table.

It turns shard events into decisions (see :mod:`coordinator.decisions`) following the
protocol in ``coordinator/PROTOCOL.md``. Table-level statements (CREATE/DROP/RENAME
TABLE, DROP DATABASE, online-DDL shadow tables) are handled here; DDL that changes a
shard's schema goes to the target's lock rules.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from coordinator.commands import OperatorCommand
from coordinator.decisions import CreateTarget, Decision, Hold, Release
from coordinator.fingerprints import fingerprint_wait
from coordinator.ids import Position, ShardId, TargetId
from coordinator.locks import LockRules, OperatorError
from coordinator.optimistic import OptimisticRules, join_all
from coordinator.pessimistic import PessimisticRules
from coordinator.routing import Extract, Router, TableKind
from coordinator.target import (
    PendingDDL,
    Refusal,
    ShardState,
    Stage,
    Target,
    TargetConfig,
)
from coordinator.views import TargetView, target_view
from schemas.changes import (
    AddColumn,
    AlterSpec,
    AlterTable,
    ChangeColumn,
    CreateDatabase,
    CreateTable,
    CreateTableLike,
    DropColumn,
    DropDatabase,
    DropTable,
    RenameColumn,
    RenameTable,
    SchemaChange,
    TruncateTable,
)
from schemas.connect import carried_schema, parse_fields
from schemas.ddl import apply, parse_ddl
from schemas.errors import DDLError, SchemaError
from schemas.lattice import diff
from schemas.model import TableName, TableSchema, name_key
from schemas.render import alter_sql
from shardmerge.errors import ShardMergeError

__all__ = ["Coordinator", "LockView", "RowRoute", "TargetConfig", "UnknownShardError", "WaitView"]

RULES: dict[str, LockRules] = {"optimistic": OptimisticRules(), "pessimistic": PessimisticRules()}


class UnknownShardError(ShardMergeError):
    """A DDL names a routed table whose schema shardmerge has never seen.

    Register the table first (its CREATE TABLE or the CDC snapshot schema)."""


DEFAULT_CONFIG = TargetConfig()
RENAMES_KEPT = 8  # column renames remembered per shard, for rows that arrive late


@dataclass(frozen=True)
class RowRoute:
    """What to do with a row event of one shard.

    ``write`` it downstream (``project``: drop values of columns the downstream lacks),
    ``hold`` it (the shard is held), ``drop`` it (shadow/trash/unrouted table; ``reason``
    says which), or ``unknown`` (a routed table never registered: dead-letter it).
    """

    action: Literal["write", "hold", "drop", "unknown"]
    target: TargetId | None = None
    version: int = 0
    project: bool = False
    reason: str = ""


@dataclass(frozen=True)
class LockView:
    """What ``shardmerge locks`` shows for one target."""

    target: TargetId
    mode: str
    stage: Stage
    blocked: tuple[ShardId, ...]
    pending_ddl: tuple[tuple[ShardId, str, Position], ...]
    conflict: str | None
    schema: TableSchema | None
    shards: int


@dataclass(frozen=True)
class WaitView:
    """A shard whose rows wait in the stash without a DDL lock holding it: rows that came
    before their table's CREATE TABLE (``before_create``: the shard is known to the job
    but not registered in its target yet), or rows ahead of a DDL not received yet
    (``ahead_of_ddl``: the shard counts as held in its lock too)."""

    target: TargetId
    shard: ShardId
    kind: Literal["before_create", "ahead_of_ddl"]
    since: Position
    reason: str


@dataclass
class DDLOrigin:
    """Where and when the latest DDL statement taken for one table happened upstream
    (binlog file, position, row, commit time: see :meth:`Coordinator.resent`), and the
    digests of the statements taken at that place (a snapshot gives several one place)."""

    origin: tuple[Any, ...]
    digests: list[str] = field(default_factory=list)


def _origin(origin: Any) -> tuple[Any, ...]:
    if not isinstance(origin, list | tuple) or len(origin) < 2:
        raise ValueError(f"a DDL origin is (place..., time), not {origin!r}")
    return tuple(origin)


def _origin_key(shard: ShardId, channel: str) -> str:
    return f"{shard} via {channel}" if channel else str(shard)


def _digest(sql: str) -> str:
    return hashlib.sha256(sql.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass
class Ghost:
    """An online-DDL shadow table: its schema and the ALTERs run on it, recorded."""

    schema: TableSchema
    statements: list[str] = field(default_factory=list)
    # The schema is the one the shadow's rows carried (its CREATE never read).
    carried: bool = False


class Coordinator:
    def __init__(
        self,
        router: Router,
        configs: dict[TargetId, TargetConfig] | None = None,
        default: TargetConfig = DEFAULT_CONFIG,
    ) -> None:
        self.router = router
        self.configs = dict(configs or {})
        self.default = default
        self.targets: dict[TargetId, Target] = {}
        self.where: dict[ShardId, TargetId] = {}  # shard -> its target
        self.versions: dict[ShardId, int] = {}  # last table version per shard (ABA)
        self.ghosts: dict[ShardId, Ghost] = {}
        # Per shadow table whose CREATE was never read: the row schemas its rows carried
        # (Connect fields as JSON text), each with the position of its first row, in order.
        self.carried: dict[ShardId, list[tuple[Position, str]]] = {}
        # Routed tables whose rows came before their CREATE TABLE (another topic): held.
        self.unregistered: dict[ShardId, Position] = {}
        # Per table named by a DDL event, and the stream it came on (kept after a DROP or
        # RENAME): where its latest statement came from upstream (see resent()).
        self.ddl_origins: dict[str, DDLOrigin] = {}

    # --- queries -----------------------------------------------------------------------

    def route_row(self, shard: ShardId) -> RowRoute:
        kind = self.router.kind(shard)
        if kind is not TableKind.SHARD:
            return RowRoute("drop", reason=f"{kind.value} table")
        target = self.where.get(shard)
        if target is None:
            route = self.router.route(shard)
            if shard in self.unregistered and route is not None:
                return RowRoute("hold", route.target, self.versions.get(shard, 0) + 1)
            return RowRoute("unknown", reason=f"table {shard} was never registered")
        t = self.targets[target]
        st = t.shards[shard]
        if st.held or st.awaiting is not None or t.refused is not None:
            return RowRoute("hold", target, st.version)
        return RowRoute("write", target, st.version, st.project)

    def shard_state(self, shard: ShardId) -> ShardState | None:
        target = self.where.get(shard)
        return None if target is None else self.targets[target].shards[shard]

    def locks(self) -> list[LockView]:
        views = []
        for tid in sorted(self.targets):
            t = self.targets[tid]
            held = t.held_shards()
            views.append(
                LockView(
                    target=tid,
                    mode=t.mode,
                    stage=t.stage,
                    blocked=tuple(sorted(s.shard for s in held)),
                    pending_ddl=tuple((s.shard, d.sql, d.position) for s in held for d in s.pending)
                    + tuple(
                        (s.shard, "(rows ahead of a DDL not yet received)", s.awaiting)
                        for s in held
                        if s.awaiting is not None and not s.pending
                    ),
                    conflict=t.conflict,
                    schema=t.downstream(),
                    shards=len(t.shards),
                )
            )
        return views

    def target_views(self) -> list[TargetView]:
        """Every target as a published value (:mod:`coordinator.views`), in name order."""
        return [target_view(self.targets[tid]) for tid in sorted(self.targets)]

    def target_view(self, target: TargetId) -> TargetView | None:
        t = self.targets.get(target)
        return None if t is None else target_view(t)

    # Light views for the streaming engine, read every batch (no per-shard schema work).

    def target_ids(self) -> list[TargetId]:
        return sorted(self.targets)

    def registered(self) -> Mapping[ShardId, TargetId]:
        """Every registered shard and its target (read-only)."""
        return MappingProxyType(self.where)

    def downstream_schemas(self) -> dict[TargetId, TableSchema]:
        """Each target's downstream schema (extract columns included), where it has one."""
        return {tid: s for tid, t in self.targets.items() if (s := t.downstream()) is not None}

    def extract_of(self, target: TargetId) -> Extract:
        return self.targets[target].extract

    def shard_schemas(self, target: TargetId) -> list[tuple[ShardId, TableSchema]]:
        """Each shard of ``target`` and its schema as coordination counts it now."""
        return [(st.shard, st.schema) for st in self.targets[target].shards.values()]

    def waiting(self) -> list[WaitView]:
        """Shards whose rows wait without a DDL of theirs pending, in target and shard order."""
        views = []
        for shard, position in self.unregistered.items():
            route = self.router.route(shard)
            if route is not None:
                views.append(
                    WaitView(
                        route.target,
                        shard,
                        "before_create",
                        position,
                        "rows came before the table's CREATE TABLE: held until it arrives",
                    )
                )
        for tid, t in self.targets.items():
            for st in t.held_shards():  # the index's waiting shards: no walk of every shard
                if st.awaiting is not None and not st.pending:
                    views.append(
                        WaitView(
                            tid,
                            st.shard,
                            "ahead_of_ddl",
                            st.awaiting,
                            "rows carry a schema change whose DDL has not arrived: held "
                            "until it does",
                        )
                    )
        return sorted(views, key=lambda v: (v.target, v.shard))

    # --- events ------------------------------------------------------------------------

    def register(
        self, shard: ShardId, schema: TableSchema, position: Position = None
    ) -> list[Decision]:
        """A table known at start (snapshot / initial schema): it joins its target. An
        online-DDL shadow table known at start is a migration that began before the job:
        its schema is recorded for the cut-over."""
        out: list[Decision] = []
        if self.router.kind(shard) is TableKind.SHADOW:
            self.ghosts[shard] = Ghost(schema)
            return out
        ddl = PendingDDL(
            schema.to_sql(shard.table), position, CreateTable(TableName(shard.table), schema)
        )
        self._create(shard, schema, ddl, out)
        return out

    def resent(self, shard: ShardId, sql: str, origin: Any, channel: str = "") -> bool:
        """Is this DDL event one the coordinator already took, sent again?

        An at-least-once upstream (a connector restarted from an older offset) sends
        events again, DDLs included; taking a statement twice would run it on a shard
        that already has it (a rename or drop of a column that is gone) or truncate rows
        written after it. ``origin`` is the statement's upstream place and time, ``(binlog
        file, position, row, commit time)``, or ``None`` when the format has no place (then
        nothing is ever called a re-send). Against the latest statement taken for the same
        table, it is a re-send when it is the same statement at the same place (a snapshot
        gives different statements one place), or when its place is before and its time is
        not after: a binlog that starts again from its first file (a new server after a
        failover, ``RESET MASTER``) has places before but times after.

        ``channel`` names the ordered stream the event came on (a Kafka topic-partition):
        statements are compared only within one, because two streams (a schema-change
        topic, a table topic carrying TRUNCATE) may deliver one table's statements out of
        order, while a re-send comes again on its own stream."""
        if origin is None:
            return False
        seen = self.ddl_origins.get(_origin_key(shard, channel))
        if seen is None:
            return False
        here = _origin(origin)
        if here[:-1] == seen.origin[:-1]:
            return _digest(sql) in seen.digests
        return here[:-1] < seen.origin[:-1] and here[-1] <= seen.origin[-1]

    def _took_ddl(self, shard: ShardId, sql: str, origin: Any, channel: str) -> None:
        """The latest statement taken for this table (taken in upstream order: the caller
        asked :meth:`resent` first)."""
        if origin is None:
            return
        here = _origin(origin)
        key = _origin_key(shard, channel)
        seen = self.ddl_origins.get(key)
        if seen is not None and seen.origin[:-1] == here[:-1]:
            seen.digests.append(_digest(sql))
        else:
            self.ddl_origins[key] = DDLOrigin(here, [_digest(sql)])

    def on_ddl(
        self,
        shard: ShardId,
        sql: str,
        position: Position,
        origin: Any = None,
        channel: str = "",
    ) -> list[Decision]:
        """A DDL statement from the binlog of ``shard``'s source and database.

        ``origin`` and ``channel`` (optional) say where it came from; see :meth:`resent`,
        which the caller asks first: this method takes the statement either way."""
        self._took_ddl(shard, sql, origin, channel)
        out: list[Decision] = []
        try:
            changes = parse_ddl(sql)
        except DDLError as e:
            st = self.shard_state(shard)
            if st is not None:
                self._lock_ddl(st, PendingDDL(sql, position, None, e.reason), out)
            return out  # an unparseable statement on a table we do not route is irrelevant
        self._remember_renames(shard, changes, position)
        renames = [c for c in changes if isinstance(c, RenameTable)]
        if renames:
            self._renames(shard, renames, sql, position, out)
        for change in changes:
            if not isinstance(change, RenameTable):
                self._change(shard, change, sql, position, out)
        return self._defer(out)

    def _remember_renames(
        self, shard: ShardId, changes: Sequence[SchemaChange], position: Position
    ) -> None:
        if position is None:
            return
        for change in changes:
            if not isinstance(change, AlterTable):
                continue
            st = self.shard_state(self._table(shard, change.table))
            if st is None:
                continue
            st.altered_at(position)
            pairs = []
            for spec in change.specs:
                if isinstance(spec, RenameColumn):
                    pairs.append((spec.old_name, spec.new_name))
                elif isinstance(spec, ChangeColumn) and name_key(spec.old_name) != name_key(
                    spec.column.name
                ):
                    pairs.append((spec.old_name, spec.column.name))
            if pairs:
                st.renamed = [*st.renamed, (position, tuple(pairs))][-RENAMES_KEPT:]

    def _defer(self, decisions: list[Decision]) -> list[Decision]:
        """Decisions for a target whose downstream refused a change wait with it."""
        out = []
        for d in decisions:
            t = self.targets.get(d.target)
            if t is not None and t.refused is not None:
                t.refused.deferred.append(d)
            else:
                out.append(d)
        return out

    def refuse(self, target: TargetId, decisions: list[Decision], why: str) -> None:
        """The downstream cannot run ``decisions[0]`` (an :class:`ApplyDDL`): ``why`` says
        why and what the operator can do. The target's lock goes to stage ``conflict``;
        every row of the target is held, and ``decisions`` (with any taken later) wait for
        ``unlock TARGET --retry``."""
        t = self.targets[target]
        if t.refused is None:
            t.refused = Refusal(why, list(decisions))
        else:
            t.refused.deferred[:0] = decisions

    def _retry(self, t: Target) -> list[Decision]:
        if t.refused is None:
            raise OperatorError(f"target {t.id} has no refused downstream change to retry")
        out = list(t.refused.deferred)
        t.refused = None
        for st in sorted(t.shards.values(), key=lambda s: str(s.shard)):
            until = st.pending[0].position if st.held else st.awaiting
            t.release_rows(st, until, out)
        return out

    def command(self, cmd: OperatorCommand) -> list[Decision]:
        """An operator command (``shardmerge unlock ...``); takes effect at once."""
        t = self.targets.get(cmd.target)
        if t is None:
            raise OperatorError(
                f"no target {cmd.target}; targets: {', '.join(map(str, self.targets)) or 'none'}"
            )
        if cmd.action == "retry":
            return self._retry(t)
        out = self._command(t, cmd)
        # The operator settled what the shard's rows wait for: the fingerprint is learnt
        # again from its next rows, which would otherwise wait on it once more.
        for st in t.shards.values():
            if cmd.action == "force-remove" or st.shard == cmd.shard:
                st.fingerprint = None
        return self._defer(out)

    def _command(self, t: Target, cmd: OperatorCommand) -> list[Decision]:
        out: list[Decision] = []
        rules = RULES[t.mode]
        if cmd.action == "force-remove":
            for held in list(t.held_shards()):
                if held.held and held.pending[0].table_statement:
                    if self.shard_state(held.shard) is held:
                        out.extend(self._take_table(t, held, cmd))
                elif held.held:
                    rules.skip(t, held, out)
                else:
                    self._stop_awaiting(t, held, out)
            return out
        assert cmd.shard is not None
        st = t.shards.get(cmd.shard)
        if st is not None and not st.held and st.awaiting is not None and cmd.action == "skip":
            self._stop_awaiting(t, st, out)
            return out
        if st is None or not st.held:
            names = ", ".join(str(s.shard) for s in t.held_shards()) or "none"
            raise OperatorError(f"shard {cmd.shard} is not held on {t.id} (held: {names})")
        if st.pending[0].table_statement:
            return self._take_table(t, st, cmd)
        if cmd.action == "skip":
            rules.skip(t, st, out)
        elif cmd.action == "exec":
            rules.execute(t, st, out)
        else:
            position = st.pending[0].position
            ddls = [self._pending(st.shard, s, position) for s in cmd.statements]
            rules.replace(t, st, ddls, out)
        return out

    # --- table-level statements ----------------------------------------------------------

    def _table(self, shard: ShardId, name: TableName) -> ShardId:
        return ShardId(shard.source, name.db or shard.db, name.table)

    def _change(
        self,
        shard: ShardId,
        change: SchemaChange,
        sql: str,
        position: Position,
        out: list[Decision],
    ) -> None:
        match change:
            case CreateTable(table, schema, if_not_exists):
                self._on_create(
                    self._table(shard, table), schema, if_not_exists, sql, position, out
                )
            case CreateTableLike(table, like, if_not_exists):
                base = self._schema_of(self._table(shard, like))
                if base is None:
                    raise UnknownShardError(
                        f"CREATE TABLE ... LIKE {like}: table {like} is unknown"
                    )
                new = self._table(shard, table)
                self._on_create(new, base.renamed(new.table), if_not_exists, sql, position, out)
            case AlterTable(table, _):
                self._on_alter(self._table(shard, table), change, sql, position, out)
            case TruncateTable(table):
                target = self._table(shard, table)
                st = self.shard_state(target)
                if st is not None:
                    self._lock_ddl(st, PendingDDL(sql, position, change), out)
            case DropTable(table, _):
                self._drop_table(self._table(shard, table), sql, position, out)
            case DropDatabase(name, _):
                for s in [s for s in self.where if s.source == shard.source and s.db == name]:
                    self._drop_table(s, sql, position, out)
                for s in [s for s in self.ghosts if s.source == shard.source and s.db == name]:
                    del self.ghosts[s]
                for s in [s for s in self.carried if s.source == shard.source and s.db == name]:
                    del self.carried[s]
            case CreateDatabase():
                pass

    def _drop_table(
        self, shard: ShardId, sql: str, position: Position, out: list[Decision]
    ) -> None:
        ddl = PendingDDL(sql, position, DropTable(TableName(shard.table, shard.db), True))
        if not self._hold_table(shard, ddl, "drop_table", out):
            self._note_table(shard, sql, "drop_table")
            self._drop(shard, out)

    def _hold_table(self, shard: ShardId, ddl: PendingDDL, kind: str, out: list[Decision]) -> bool:
        """A DROP or RENAME TABLE of a registered shard whose target's policy says ``fail``
        for ``kind``: the shard is held in ``conflict`` from it (or it queues behind the
        DDL the shard is held on; the lock's rules hold it when they reach it), until an
        operator takes it (:meth:`_take_table`). True when held or queued."""
        tid = self.where.get(shard)
        if tid is None:
            return False
        t = self.targets[tid]
        st = t.shards[shard]
        if self._behind_table(st, ddl):
            return True
        if t.policy.word(kind) != "fail":
            return False
        t.note_policy(shard, ddl.sql, kind, "fail")
        self._fail_table(t, st, ddl, kind, out)
        return True

    @staticmethod
    def _fail_table(
        t: Target, st: ShardState, ddl: PendingDDL, kind: str, out: list[Decision]
    ) -> None:
        """Hold ``st`` in ``conflict`` on a table statement, or queue it behind the DDL the
        shard is held on (the lock's rules hold it in ``conflict`` when they reach it)."""
        if st.held:
            st.pending = [*st.pending, ddl]
        else:
            RULES[t.mode].fail_by_policy(t, st, ddl, kind, "fail", out)

    @staticmethod
    def _behind_table(st: ShardState, ddl: PendingDDL) -> bool:
        """A statement of a shard with a DROP or RENAME TABLE held (or queued): it waits
        behind it, in order (the table it names may be another incarnation)."""
        if any(p.table_statement for p in st.pending):
            st.pending = [*st.pending, ddl]
            return True
        return False

    def _take_table(self, t: Target, st: ShardState, cmd: OperatorCommand) -> list[Decision]:
        """An operator takes a DROP or RENAME TABLE a ``fail`` policy held (``exec``, or
        ``skip`` as ``ignore``: the same for a table statement, which never runs
        downstream): as with ``forward``, the shard leaves (or moves within) its lock;
        then the statements that queued behind it follow, in order."""
        ddl = st.pending[0]
        if cmd.action not in ("skip", "exec", "force-remove"):
            raise OperatorError(
                f"{ddl.sql!r} on {st.shard} is a table statement a `fail` policy held: take it "
                f"(`shardmerge unlock {t.id} --shard {st.shard} --action exec`; `--action skip` "
                "is the same, since shardmerge never drops or renames a downstream table); it "
                "cannot be replaced"
            )
        out: list[Decision] = []
        if isinstance(ddl.change, DropTable):
            queued = st.pending[1:]
            st.pending = st.pending[:1]  # held still: _drop replays its events, projected
            shard = st.shard
            self._drop(shard, out)
            self._dispatch(shard, queued, out)
            return out
        # RENAME TABLE: the statement is taken as a whole, for every shard it holds
        mine = [
            s
            for tt in self.targets.values()
            for s in tt.shards.values()
            if any(p.table_statement and (p.sql, p.position) == (ddl.sql, ddl.position)
                   for p in s.pending)
        ]  # fmt: skip
        for s in mine:
            first = s.pending[0]
            if (first.sql, first.position) != (ddl.sql, ddl.position):
                raise OperatorError(
                    f"{ddl.sql!r} also renames {s.shard}, which is held on {first.sql!r} "
                    f"before it: resolve that one first (shardmerge locks {self.where[s.shard]})"
                )
        held = [(s.shard, s) for s in mine]
        later: dict[ShardId, list[PendingDDL]] = {}
        for old, s in held:
            later[old] = s.pending[1:]
            s.pending = s.pending[:1]
            s.conflict = None
            tt = self.targets[self.where[old]]
            RULES[tt.mode].forget(tt, s)
        for old, new in ddl.renames:
            self._note_table(old, ddl.sql, "rename_table")
            self._rename(old, new, out, ddl.position)
        for old, s in held:
            if self.shard_state(s.shard) is s and s.held:
                tt = self.targets[self.where[s.shard]]
                RULES[tt.mode].release(tt, s, out)
                RULES[tt.mode].settle(tt, out)
            self._dispatch(old, later[old], out)
        return out

    def _dispatch(self, shard: ShardId, statements: list[PendingDDL], out: list[Decision]) -> None:
        """Statements that queued behind a table statement, taken in order now that it
        is (each as when it came)."""
        for p in statements:
            change = p.change
            if change is None:
                st = self.shard_state(shard)
                if st is not None:
                    self._lock_ddl(st, p, out)
            elif isinstance(change, RenameTable):
                self._rename_pairs(list(p.renames), p.sql, p.position, out)
            else:
                self._change(shard, change, p.sql, p.position, out)

    def _on_create(
        self,
        shard: ShardId,
        schema: TableSchema,
        if_not_exists: bool,
        sql: str,
        position: Position,
        out: list[Decision],
    ) -> None:
        kind = self.router.kind(shard)
        if kind is TableKind.SHADOW:
            self.ghosts[shard] = Ghost(schema)
            return
        if kind is not TableKind.SHARD:
            return
        st = self.shard_state(shard)
        queued = PendingDDL(sql, position, CreateTable(TableName(shard.table, shard.db), schema,
                                                       if_not_exists))  # fmt: skip
        if st is not None and self._behind_table(st, queued):
            return
        if shard in self.where:
            if if_not_exists:
                return
            self._drop(shard, out)  # re-created without a DROP we saw: a new incarnation
        ddl = PendingDDL(sql, position, CreateTable(TableName(shard.table), schema))
        self._create(shard, schema, ddl, out, by_ddl=True)

    def _create(
        self,
        shard: ShardId,
        schema: TableSchema,
        ddl: PendingDDL,
        out: list[Decision],
        by_ddl: bool = False,
    ) -> None:
        """``shard`` joins its target; ``by_ddl``: by a CREATE TABLE, which the target's
        ``create_table`` policy decides (the first table of a target always creates it)."""
        route = self.router.route(shard)
        if route is None:
            return
        tid = route.target
        t = self.targets.get(tid)
        if t is None:
            config = self.configs.get(tid, self.default)
            t = Target(
                tid,
                config.mode,
                config.strict,
                route.extract,
                applied=schema.renamed(tid.table),
                policy=config.policy,
            )
            self.targets[tid] = t
            how = "its CREATE TABLE" if by_ddl else "its schema when it joined"
            reason = f"{shard} is the target's first table ({how})"
            out.append(CreateTarget(tid, t.downstream() or schema, ddl.sql, reason))
            by_ddl = False
        word = t.policy.word("create_table") if by_ddl and t.applied is not None else "forward"
        if word != "forward":
            t.note_policy(shard, ddl.sql, "create_table", word)
            if word != "fail" and t.applied is not None:
                schema = t.applied  # ignored: it joins as the downstream is, rows projected
        version = self.versions.get(shard, 0) + 1
        self.versions[shard] = version
        st = ShardState(shard, version, schema.renamed(shard.table), admitted=False)
        t.shards[shard] = st
        self.where[shard] = tid
        if word == "fail":
            RULES[t.mode].fail_by_policy(t, st, ddl, "create_table", word, out)
        else:
            RULES[t.mode].admit(t, st, ddl, out)
            st.project = st.project or word != "forward"
        if self.unregistered.pop(shard, None) is not None and not st.held:
            out.append(Release(tid, shard, version, None, st.project))

    def _on_alter(
        self, shard: ShardId, change: AlterTable, sql: str, position: Position, out: list[Decision]
    ) -> None:
        kind = self.router.kind(shard)
        if kind is TableKind.SHADOW:
            ghost = self.ghosts.get(shard)
            if ghost is not None:
                # A statement that fails here fails again, visibly, on the real table.
                with contextlib.suppress(SchemaError):
                    ghost.schema = apply(change, ghost.schema)
                ghost.statements.append(sql)
            return
        st = self.shard_state(shard)
        if st is None:
            if kind is TableKind.SHARD:
                raise UnknownShardError(f"ALTER TABLE on {shard}, whose schema is unknown: {sql!r}")
            return
        self._lock_ddl(st, PendingDDL(sql, position, change), out)

    def _lock_ddl(self, st: ShardState, ddl: PendingDDL, out: list[Decision]) -> None:
        t = self.targets[self.where[st.shard]]
        if st.held:
            st.pending = [*st.pending, ddl]  # processed in order when the shard is released
            return
        awaited = st.awaiting is not None
        st.awaiting = None
        RULES[t.mode].on_ddl(t, st, ddl, out)
        if awaited and not st.held:
            # The DDL the early rows were waiting for is here: they follow it.
            t.release_rows(st, None, out)

    @staticmethod
    def _stop_awaiting(t: Target, st: ShardState, out: list[Decision]) -> None:
        """No DDL came: the early rows replay projected onto the downstream schema."""
        st.awaiting = None
        st.project = True
        t.release_rows(st, None, out)

    def stop_waiting(self, shard: ShardId) -> list[Decision]:
        """``shard`` awaited a DDL that never came (the engine read its source's
        schema-change topics past the wait): it stops waiting and its kept rows replay
        under the target's schema; those that still need a DDL are the engine's to refuse
        (dead letters). Unlike ``skip``, the shard does not project from then on. Nothing
        to do for a shard held on a DDL or not waiting."""
        st = self.shard_state(shard)
        if st is None or st.held or st.awaiting is None:
            return []
        out: list[Decision] = []
        st.awaiting = None
        self.targets[self.where[shard]].release_rows(st, None, out)
        return out

    def switch_home(
        self,
        sources: Sequence[tuple[ShardId, Position]],
        new: ShardId,
        schema: TableSchema,
        position: Position,
        keys: str | None = None,
    ) -> list[Decision]:
        """A declared move's downstream switch (docs/moves.md), for an engine that writes
        rows in batches: ``new`` joins its target with ``schema`` (its copy's, at
        ``position``); each of ``sources`` (with its freeze position) hands its rows
        downstream to ``new``: a :class:`Rename` of its extract values to ``new``'s, ordered
        at its freeze; unless ``keys`` (a split: only the rows whose key it is true for
        go, and the keys that stay are still the source's own), it then leaves the
        target's lock. Only rows go: the sources' held events are the engine's (a move
        switches only when none is held before its freeze)."""
        out = self.register(new, schema, position)
        tid = self.where.get(new)
        if tid is None:
            raise UnknownShardError(f"{new} routes to no target: it cannot become a home")
        t = self.targets[tid]
        for old, at in sources:
            if self.where.get(old) != tid:
                continue  # dropped upstream before the switch: no rows of it to hand on
            rename = t.rename(old, new, at)
            out.append(dataclasses.replace(rename, keys=keys) if keys else rename)
            if not keys:
                self._drop(old, out)
        return out

    def await_ddl(self, shard: ShardId, position: Position, reason: str) -> list[Decision]:
        """Rows of ``shard`` from ``position`` on carry a schema change whose DDL has not
        arrived (Debezium orders no topic against another): keep them until it does."""
        st = self.shard_state(shard)
        if st is None:
            route = self.router.route(shard)
            if route is None or shard in self.unregistered:
                return []
            self.unregistered[shard] = position
            version = self.versions.get(shard, 0) + 1
            why = f"rows of {shard} came before its CREATE TABLE: held until it arrives"
            return [Hold(route.target, shard, version, position, why)]
        if st.held or st.awaiting is not None:
            return []
        t = self.targets[self.where[shard]]
        t.seq += 1
        st.held_seq = t.seq
        st.awaiting = position
        return [Hold(t.id, shard, st.version, position, reason)]

    def schema_fingerprints(
        self, shard: ShardId, seen: Sequence[tuple[Position, str]]
    ) -> list[Decision]:
        """Rows of ``shard`` carry these schema fingerprints (each with the position of its
        first row in the batch): a fingerprint other than the one its rows carried since
        its last DDL means a DDL came before those rows that has not arrived; the shard
        waits for it from there (:meth:`await_ddl`). See :mod:`coordinator.fingerprints`."""
        st = self.shard_state(shard)
        if st is None:
            return []
        known = st.fingerprint
        at = fingerprint_wait(st, seen)
        if at is None:
            return []
        changed = next(fp for p, fp in seen if p == at)
        return self.await_ddl(
            shard,
            at,
            f"rows of {shard} carry schema fingerprint {changed} where its rows since its last "
            f"DDL carried {known or st.fingerprint}: a DDL came before them that has not "
            "arrived; waiting for its DDL",
        )

    def shadow_rows(self, shard: ShardId, seen: Sequence[tuple[Position, str]]) -> None:
        """Rows of the online-DDL shadow table ``shard`` carry these row schemas (JSON text
        of Connect fields, as Debezium sends them with ``schemas.enable``), each with the
        position of its first row. Kept for a cut-over whose shadow's CREATE the job never
        read (a migration that began before the job): then its schema is the one its last
        rows before the cut-over carried (:func:`schemas.connect.carried_schema`). Rows of
        any other table, and of a shadow whose CREATE was read, change nothing."""
        if self.router.kind(shard) is not TableKind.SHADOW or shard in self.ghosts:
            return
        merged: list[tuple[Position, str]] = []
        for position, text in sorted([*self.carried.get(shard, []), *seen], key=lambda p: p[0]):
            if not merged or merged[-1][1] != text:
                merged.append((position, text))  # a schema is kept from its first row on
        self.carried[shard] = merged

    def _carried_ghost(self, shadow: ShardId, real: ShardState, position: Position) -> Ghost | str:
        """The shadow's schema from its rows, read against ``real`` (see shadow_rows), or
        why there is none."""
        kept = self.carried.pop(shadow, [])
        before = [t for p, t in kept if position is None or p < position]
        later = [(p, t) for p, t in kept if not (position is None or p < position)]
        if later:
            self.carried[shadow] = later  # a next migration's shadow, seen ahead
        if not before:
            return (
                "the job never saw that table (the migration began before the job's first offset)"
            )
        try:
            t = self.targets[self.where[real.shard]]
            others = [s.schema for s in t.shards.values() if s is not real]
            known = tuple(x for x in (t.downstream(), *others) if x is not None)
            schema = carried_schema(real.schema, parse_fields(before[-1]), known)
        except SchemaError as e:
            return f"the schema its rows carry cannot be read back: {e}"
        return Ghost(schema, carried=True)

    def _drop(self, shard: ShardId, out: list[Decision]) -> None:
        self.ghosts.pop(shard, None)
        self.carried.pop(shard, None)
        tid = self.where.pop(shard, None)
        if tid is None:
            return
        t = self.targets[tid]
        st = t.shards.pop(shard)
        rules = RULES[t.mode]
        if st.held or st.awaiting is not None:
            # The table is gone: its held events happened, so they replay; its pending DDLs
            # will never matter.
            rules.forget(t, st)
            out.append(Release(tid, shard, st.version, None, project=True))
        if isinstance(rules, OptimisticRules) and t.schemas():
            rules.follow_join(t, join_all(t.schemas()), f"table {shard} dropped", out)
        rules.settle(t, out)

    def _renames(
        self,
        shard: ShardId,
        renames: list[RenameTable],
        sql: str,
        position: Position,
        out: list[Decision],
    ) -> None:
        pairs = [(self._table(shard, r.old), self._table(shard, r.new)) for r in renames]
        self._rename_pairs(pairs, sql, position, out)

    def _rename_pairs(
        self,
        pairs: list[tuple[ShardId, ShardId]],
        sql: str,
        position: Position,
        out: list[Decision],
    ) -> None:
        cut_over = {new for old, new in pairs if self.router.kind(old) is TableKind.SHADOW}
        plain = [(old, new) for old, new in pairs if new not in cut_over and old not in cut_over]
        if self._hold_renames(plain, sql, position, out):
            for old, new in pairs:
                if new in cut_over:
                    self._cut_over(old, new, position, out)
            return
        for old, new in pairs:
            if new in cut_over:
                self._cut_over(old, new, position, out)
            elif old in cut_over:
                continue  # the real table moves aside for its shadow: not a change
            else:
                self._note_table(old, sql, "rename_table")
                self._rename(old, new, out, position)

    def _hold_renames(
        self,
        pairs: list[tuple[ShardId, ShardId]],
        sql: str,
        position: Position,
        out: list[Decision],
    ) -> bool:
        """A RENAME TABLE whose registered tables include one of a target whose policy
        says ``fail`` for ``rename_table`` (or one held on a table statement already): every
        registered table it renames is held on it (the statement is one: a swap through a
        third name is taken whole or not at all), until an operator takes it."""
        olds = [old for old, _ in pairs if old in self.where]
        if not olds:
            return False
        states = {old: self.targets[self.where[old]].shards[old] for old in olds}
        behind = any(p.table_statement for st in states.values() for p in st.pending)
        failing = any(
            self.targets[self.where[o]].policy.word("rename_table") == "fail" for o in olds
        )
        if not behind and not failing:
            return False
        for old, new in pairs:
            st = states.get(old)
            if st is None:
                continue
            t = self.targets[self.where[old]]
            ddl = PendingDDL(sql, position, RenameTable(TableName(old.table, old.db),
                             TableName(new.table, new.db)), renames=tuple(pairs))  # fmt: skip
            if self._behind_table(st, ddl):
                continue
            word = t.policy.word("rename_table")
            if word != "forward":
                t.note_policy(old, sql, "rename_table", word)
            self._fail_table(t, st, ddl, "rename_table", out)
        return True

    def _note_table(self, shard: ShardId, sql: str, kind: str) -> None:
        """A DROP or RENAME TABLE is taken whatever the policy (the upstream table is gone
        or moved; no lock can wait for it): a word other than ``forward`` is recorded."""
        tid = self.where.get(shard)
        if tid is None:
            return
        t = self.targets[tid]
        word = t.policy.word(kind)
        if word != "forward":
            t.note_policy(shard, sql, kind, word)

    def _rename(
        self, old: ShardId, new: ShardId, out: list[Decision], position: Position = None
    ) -> None:
        tid = self.where.get(old)
        if tid is None:
            ghost = self.ghosts.pop(old, None)
            if ghost is not None and self.router.kind(new) is TableKind.SHADOW:
                self.ghosts[new] = ghost
            return
        t = self.targets[tid]
        if self.router.target(new) == tid and new not in self.where:
            # Same target: not a schema change. The shard carries on under its new name;
            # its held events and its rows downstream follow it (Rename).
            rename = t.rename(old, new, position)
            st = t.shards.pop(old)
            st.shard = new
            t.shards[new] = st
            del self.where[old]
            self.where[new] = tid
            self.versions[new] = st.version
            if old in t.ready:
                t.ready[t.ready.index(old)] = new
            out.append(rename)
            if self.unregistered.pop(new, None) is not None and not st.held:
                # Rows under the new name came before the rename itself: they follow it.
                out.append(Release(tid, new, st.version, None, st.project))
            return
        schema = t.shards[old].schema
        self._drop(old, out)
        if self.router.kind(new) is TableKind.SHARD:
            self._create(
                new, schema, PendingDDL(f"RENAME TABLE {old.table} TO {new.table}", None, None), out
            )

    def _cut_over(
        self, shadow: ShardId, real: ShardId, position: Position, out: list[Decision]
    ) -> None:
        """gh-ost / pt-osc cut-over: the shadow's recorded ALTERs become the real table's.

        A migration that began before the job's first offset left no ALTER to record:
        then the change is the difference between the real table's schema and the
        shadow's (known from its CREATE, e.g. the snapshot's), taken as is when it only
        adds and modifies columns; a difference that drops and adds columns could be a
        rename, which a diff cannot tell, and waits for the operator with the statement
        spelled out. A shadow the job never saw at all waits for the operator too."""
        ghost: Ghost | str | None = self.ghosts.pop(shadow, None)
        st = self.shard_state(real)
        if st is None:
            self.carried.pop(shadow, None)
            return
        target = self.where[real]
        if ghost is None:
            ghost = self._carried_ghost(shadow, st, position)
        else:
            self.carried.pop(shadow, None)
        if isinstance(ghost, str):
            reason = (
                f"online-DDL cut-over from {shadow.table}, but {ghost}: its schema is "
                f"unknown. Give the migration's ALTER with `shardmerge unlock {target} "
                f"--shard {real} --action replace --sql 'ALTER TABLE {real.table} ...'`, "
                "or skip it if it changed nothing downstream"
            )
            self._lock_ddl(
                st,
                PendingDDL(f"RENAME TABLE {shadow.table} TO {real.table}", position, None, reason),
                out,
            )
            return
        if ghost.statements:
            specs: list[AlterSpec] = []
            for statement in ghost.statements:
                for change in parse_ddl(statement):
                    if isinstance(change, AlterTable):
                        specs.extend(change.specs)
        else:
            specs = list(diff(st.schema, ghost.schema.renamed(st.schema.name)))
            if not specs:
                return  # the shadow had the real table's schema: nothing changed
            kinds = {type(s) for s in specs}
            if DropColumn in kinds and AddColumn in kinds:
                sql = alter_sql(real.table, tuple(specs))
                told = " (as its rows carry it)" if ghost.carried else ""
                reason = (
                    f"online-DDL cut-over from {shadow.table}, whose ALTER began before the "
                    f"job: the shadow's schema{told} differs by {sql}, which drops and adds "
                    "columns, and a column rename cannot be told from that. Give the "
                    f"migration's ALTER with `shardmerge unlock {target} --shard {real} "
                    "--action replace --sql '...'` (this statement if it is right)"
                )
                self._lock_ddl(st, PendingDDL(sql, position, None, reason), out)
                return
        change = AlterTable(TableName(real.table), tuple(specs))
        if position is not None:
            st.altered_at(position)  # the real table's rows from here on are the shadow's
        sql = alter_sql(real.table, change.specs)
        self._lock_ddl(st, PendingDDL(sql, position, change, carried=ghost.carried), out)

    def _schema_of(self, shard: ShardId) -> TableSchema | None:
        st = self.shard_state(shard)
        if st is not None:
            return st.schema
        ghost = self.ghosts.get(shard)
        return ghost.schema if ghost else None

    def _pending(self, shard: ShardId, sql: str, position: Position) -> PendingDDL:
        try:
            changes = parse_ddl(sql)
        except DDLError as e:
            return PendingDDL(sql, position, None, e.reason)
        if len(changes) != 1 or not isinstance(changes[0], AlterTable | TruncateTable):
            raise OperatorError(f"a replacement must be one ALTER TABLE or TRUNCATE, got {sql!r}")
        return PendingDDL(sql, position, changes[0])
