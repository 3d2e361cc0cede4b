"""The memory engine: the real coordinator, routing and schema code, an in-memory
downstream, no Kafka, no Spark. Seconds for the whole scenario suite.

Events are processed one at a time in the file's order. Row events of a held shard are
stashed per (shard, table version) with their position (the step number) and replayed
on release, exactly as the streaming job does with its durable stash. A statement the
file marks ``late`` reaches the engine at its shard's ``arrive`` step; the shard's rows in
between that name a column it does not have yet (or lack one it needs) are ahead of it and
wait for it (:func:`ahead_of_ddl`, as the streaming job's write step finds them).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace
from typing import Any

from coordinator.commands import parse_command
from coordinator.coordinator import Coordinator, RowRoute, TargetConfig
from coordinator.decisions import (
    ApplyDDL,
    CreateTarget,
    Decision,
    Hold,
    Release,
    Rename,
    Truncate,
)
from coordinator.ids import Position, ShardId, TargetId
from coordinator.moves import Moves
from coordinator.policy import Policy
from coordinator.routing import Extract, Route, Router
from coordinator.scenario.downstream import NEVER_REGISTERED, DeadLetter, MemoryTable
from coordinator.scenario.model import Scenario, Step
from coordinator.scenario.moving import MoveDriver
from coordinator.scenario.observe import Observation, observe
from coordinator.scenario.upstream import RowEvent, Upstream, UpstreamError
from coordinator.state import restore, snapshot
from schemas.connect import row_schema_text, value_fields
from schemas.ddl import parse_create_table

__all__ = [
    "Late",
    "MemoryEngine",
    "Stash",
    "ahead_of_ddl",
    "build_coordinator",
    "dead_letter",
    "hold_late",
    "rename_stashed",
    "take_released",
]


Stash = dict[tuple[ShardId, int], list[tuple[Position, RowEvent]]]


def take_released(
    coordinator: Coordinator, stash: Stash, d: Release
) -> tuple[list[RowEvent], tuple[Position, str] | None]:
    """The held events ``d`` releases (those before its ``until``), in order, taken out of
    ``stash``, each judged again as the streaming job's write step judges its replayed rows
    (:func:`ahead_of_ddl`): the first one still ahead of a DDL, and every later one, stay
    in the stash; its position and reason are returned with the events to write (the
    shard waits from there). The later ones (from ``until`` on) stay too."""
    key = (d.shard, d.version)
    events = stash.pop(key, [])
    now = [(p, e) for p, e in events if d.until is None or p < d.until]
    later = [(p, e) for p, e in events if not (d.until is None or p < d.until)]
    route = RowRoute("write", d.target, d.version, d.project)
    ahead: tuple[Position, str] | None = None
    for i, (p, e) in enumerate(now):
        why = ahead_of_ddl(coordinator, e, p, route)
        if why is not None:
            ahead = (p, why)
            now, later = now[:i], now[i:] + later
            break
    if later:
        stash[key] = later
    return [e for _, e in now], ahead


def rename_stashed(stash: Stash, d: Rename) -> None:
    """The renamed shard's held events are kept under its new name, in position order."""
    for shard, version in [k for k in stash if k[0] == d.old]:
        moved = [(p, replace(e, shard=d.new)) for p, e in stash.pop((shard, version))]
        key = (d.new, version)
        stash[key] = sorted(stash.get(key, []) + moved, key=lambda pe: pe[0])


def ahead_of_ddl(
    coordinator: Coordinator, event: RowEvent, position: Position, route: RowRoute
) -> str | None:
    """Why ``event`` (routed ``route``) is ahead of a DDL its shard has not run yet, or
    None: its after image names a column the shard does not have as coordination counts it,
    or lacks a NOT NULL column of it (a full image always carries those). A projected
    shard's rows (an operator skipped its DDL, a policy ignored a column) and rows behind
    the shard's last ALTER are not judged. The streaming job's rule
    (``streaming.batch.rows.project_actions``, ``row_fit.ahead_sql``), with its words."""
    st = coordinator.shard_state(event.shard)
    if route.action != "write" or route.project or st is None or event.after is None:
        return None
    if st.last_alter is not None and not position > st.last_alter:
        return None
    schema = st.schema
    has = {c.key for c in schema.columns}
    named = {k.lower() for k in event.after}
    extra = [k.lower() for k in event.after if k.lower() not in has]
    where = f"row of shard {event.shard}"
    if extra:
        return f"{where} names column(s) {', '.join(extra)} that its shard does not have yet"
    needs = [c.key for c in schema.columns if not c.nullable and c.generated is None]
    lacks = [k for k in needs if k not in named]
    if lacks:
        return (
            f"{where} lacks NOT NULL column(s) {', '.join(lacks)} of its shard "
            "(a DROP COLUMN not seen yet?)"
        )
    return None


def dead_letter(event: RowEvent, reason: str) -> DeadLetter:
    return DeadLetter.of(event.shard, event.op, event.before, event.after, reason)


Late = dict[ShardId, list[tuple[Position, str]]]


def hold_late(upstream: Upstream, late: Late, step: Step, position: Position) -> None:
    """Run a statement marked ``late`` upstream and keep it in ``late`` until its shard's
    ``arrive`` step: a DDL (its rows, which the job reads before it, are the file's later
    steps); a late DML statement is an error of the file."""
    assert step.shard is not None and step.sql is not None
    shard, sql = ShardId.parse(step.shard), step.sql
    head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
    if head in ("INSERT", "UPDATE", "DELETE"):
        raise UpstreamError(f"late is for a DDL statement; {sql!r} changes rows")
    upstream.ddl(shard, sql)
    late.setdefault(shard, []).append((position, sql))


def build_coordinator(scenario: Scenario) -> tuple[Coordinator, Router, TargetConfig]:
    extract = Extract(**scenario.extract.model_dump()) if scenario.extract else Extract()
    target = TargetId.parse(scenario.target)
    router = Router((Route(target, extract=extract),))
    config = TargetConfig(scenario.mode, scenario.strict, Policy.of(scenario.policy))
    return Coordinator(router, {target: config}), router, config


class MemoryEngine:
    name = "memory"

    def __init__(
        self, scenario: Scenario, *, roundtrip: bool = False, sink: str | None = None
    ) -> None:
        self.scenario = scenario
        self.roundtrip = roundtrip
        # The target's table is a database's (its columns refuse more values) or Delta's.
        self.dialect = scenario.planned_dialect(sink)
        self.coordinator, self.router, self.config = build_coordinator(scenario)
        self.upstream = Upstream()
        self.tables: dict[TargetId, MemoryTable] = {}
        self.stash: Stash = defaultdict(list)
        self.error: str | None = None
        self.dead_letters: list[DeadLetter] = []  # rows not written, as the job's table
        # statements marked late, until their shard's `arrive` step
        self.late: Late = {}
        moves = Moves(m.move() for m in scenario.moves)
        self.mover = MoveDriver(self, moves) if moves else None

    # --- driving -------------------------------------------------------------------------

    def start(self) -> None:
        for name, sql in self.scenario.shards.items():
            shard = ShardId.parse(name)
            schema = parse_create_table(sql)
            self.upstream.create(shard, schema)
            if name in self.scenario.unseen:
                continue  # exists upstream; the job never reads its CREATE
            if self.mover is not None and self.mover.register(shard, schema):
                continue
            self.execute(self.coordinator.register(shard, schema, 0))

    def step(self, index: int, step: Step) -> None:
        """Run one step; a :class:`ShardMergeError` stops the run (recorded in ``error``)."""
        position = index + 1
        kind = step.kind
        words = (step.operator or "").split()
        if kind == "operator" and self.mover is not None and words[:1] == ["move"]:
            self.mover.command(step.operator or "")
        elif kind == "operator":
            assert step.operator is not None
            self.execute(self.coordinator.command(parse_command(step.operator)))
        elif kind == "copy" and self.mover is not None:
            self.mover.copy(step.action("copy"), position)
        elif kind in ("freeze", "switch") and self.mover is not None:
            phase = "frozen" if kind == "freeze" else "switched"
            self.mover.marker(step.action(kind), phase, position)
        elif kind == "sql" and step.late:
            hold_late(self.upstream, self.late, step, position)
        elif kind == "arrive":
            shard = ShardId.parse(step.arrive or "")
            for at, sql in self.late.pop(shard, []):
                self.ddl(shard, sql, at)
        elif kind == "sql":
            assert step.shard is not None and step.sql is not None
            self.sql(ShardId.parse(step.shard), step.sql, position)
        elif kind in ("insert", "update", "delete"):
            self.row(self.upstream.step(ShardId.parse(step.shard or ""), step), position)
        if self.mover is not None:
            self.mover.try_switches(position)
        if self.roundtrip:
            self.check_roundtrip()

    def sql(self, shard: ShardId, sql: str, position: int) -> None:
        events = self.upstream.dml(shard, sql)
        if events is not None:
            for event in events:
                self.row(event, position)
            return
        self.upstream.ddl(shard, sql)
        self.ddl(shard, sql, position)

    def ddl(self, shard: ShardId, sql: str, position: Position) -> None:
        """A statement the upstream ran: to the coordinator, unless a move takes it."""
        if self.mover is not None and self.mover.take_ddl(shard, sql, position):
            return
        self.execute(self.coordinator.on_ddl(shard, sql, position))

    def row(self, event: RowEvent, position: Position) -> None:
        if self.mover is not None and self.mover.take_row(event, position):
            return
        if self.scenario.row_schemas:
            # as the streaming job keeps them: only an online-DDL shadow's are used
            text = row_schema_text(value_fields(event.schema))
            self.coordinator.shadow_rows(event.shard, [(position, text)])
        route = self.coordinator.route_row(event.shard)
        if route.action == "unknown":
            # A routed table whose CREATE TABLE was never read: as the job does
            # (streaming.batch.protocol, await_unregistered), its rows are held until it arrives.
            self.execute(self.coordinator.await_ddl(event.shard, position, ""))
            route = self.coordinator.route_row(event.shard)
        why = ahead_of_ddl(self.coordinator, event, position, route)
        if why is not None:
            self.execute(self.coordinator.await_ddl(event.shard, position, why))
            route = self.coordinator.route_row(event.shard)
        if route.action == "hold":
            self.stash[(event.shard, route.version)].append((position, event))
        elif route.action == "write":
            assert route.target is not None
            self.write(route.target, event, route.project)
        elif route.action == "unknown":  # nothing holds it: the job's dead letter
            self.dead_letters.append(dead_letter(event, NEVER_REGISTERED))
        # "drop": a shadow, trash or unrouted table's row, dropped by design

    def write(self, target: TargetId, event: RowEvent, project: bool) -> None:
        extra = self.router.extract(target).values(event.shard)
        why = self.tables[target].write(event.shard, event.before, event.after, extra, project)
        if why is not None:
            self.dead_letters.append(dead_letter(event, why))

    # --- decisions -----------------------------------------------------------------------

    def execute(self, decisions: list[Decision]) -> None:
        for d in decisions:
            match d:
                case CreateTarget():
                    self.tables.setdefault(d.target, MemoryTable.create(d, self.dialect))
                case ApplyDDL():
                    self.tables[d.target].apply(d)
                case Truncate():
                    self.tables[d.target].truncate(d)
                case Rename():
                    self.rename(d)
                case Hold():
                    pass  # rows from here on are routed to the stash
                case Release():
                    released, ahead = take_released(self.coordinator, self.stash, d)
                    for event in released:
                        self.write(d.target, event, d.project)
                    if ahead is not None:  # the rest wait in the stash for their DDL
                        self.execute(self.coordinator.await_ddl(d.shard, *ahead))

    def rename(self, d: Rename) -> None:
        """The renamed shard's held events are kept under its new name (their order kept),
        and its rows downstream take the new name's extract values."""
        rename_stashed(self.stash, d)
        if d.match and d.target in self.tables:
            self.tables[d.target].rehome(dict(d.match), dict(d.values), lambda _: True)

    def check_roundtrip(self) -> None:
        state = snapshot(self.coordinator)
        text = json.dumps(state)  # as the streaming job saves it: JSON values only
        configs = {TargetId.parse(self.scenario.target): self.config}
        again = restore(json.loads(text), self.router, configs)
        if snapshot(again) != state:
            raise AssertionError("coordinator state changed through a JSON round trip")
        self.coordinator = again
        if self.mover is not None:
            self.mover.roundtrip()

    # --- observing -----------------------------------------------------------------------

    def observe(self) -> Observation:
        target = TargetId.parse(self.scenario.target)
        table = self.tables.get(target)
        rows: list[dict[str, Any]] = list(table.rows.values()) if table else []
        seen = observe(
            self.coordinator, target, table.schema if table else None, rows, self.error,
            self.dead_letters,
        )  # fmt: skip
        if self.mover is None:
            return seen
        return replace(seen, locks=self.mover.locks(seen.locks), moves=self.mover.moves.summary())
