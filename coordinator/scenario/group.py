"""The memory engine with several jobs on one target: a group (seeds 002/004).

A simulation of coordinator/PROTOCOL.md's "Groups" rules, in one process and on a virtual
clock. Each job of the file's ``jobs:`` reads the events of its own shards, runs batches,
and keeps its own :class:`~coordinator.group.Replica` folded from one
:class:`~coordinator.group.MemoryLog`. Per batch a job appends one record per control
event it read (``ddl``), folds the log to its end (its records and the others'), routes its
rows with its replica, and executes the decisions about its own shards (G3). Its writes
wait in an outbox (the stash, in the streaming job) until the target's table has the
version they were planned at (G4). The owner moves the table to its next version only
when every live job has folded that version's decision and has no write planned below it
(G5). A job is live while it heartbeats, and for ``lease_s`` virtual seconds after its
last heartbeat (``pause`` stops both). The owner holds the newest term while it is live,
paused or not; only when it is down does the first live job in ``jobs:`` order take the
next term (:meth:`GroupEngine.owner`, as ``streaming.group.member.GroupMember.owns``). A row the
downstream cannot take is a dead letter, recorded when its batch saves.

A batch folds as the streaming job's does (``coordinator.group.batch_records``): the
others' records up to its own next one, each of its records where it appends it. A job's
start registers its tables (the log's first records, folded by every job); its first
batch appends its ``join`` and goes on only once every job has joined (G0). A batch whose
fold decided a lower version than a table has is *fenced* (G4): it writes nothing and runs
again from its saved state; a job fenced :data:`FENCED_LIMIT` times in a row stops the
run, as the streaming job's restart policy would stop it.

Schedules: ``lockstep`` (the default; the job whose event a step made runs a batch right
after it), or a :class:`RandomSchedule` (after each step, each job runs a batch or not, at
random: the property tests). Before an observation (``expect``, the end) every live job
catches up. ``crash`` makes the job's next batch die after it appended its records: it
restarts from its last saved state and runs the batch again (the log keeps one record per
id). :meth:`GroupEngine.stop_inside` stops a job inside its next batch that appends, after
some of its appends (a SIGSTOP there): the batch runs again once the job runs again.
"""

from __future__ import annotations

import fnmatch
import json
import random
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

from coordinator.commands import parse_command
from coordinator.decisions import ApplyDDL, CreateTarget, Decision, Release, Rename, Truncate
from coordinator.group import (
    Ack,
    MemoryLog,
    Record,
    Replica,
    batch_records,
    owner_waits_for,
    stale_change,
)
from coordinator.ids import Position, ShardId, TargetId
from coordinator.routing import TableKind
from coordinator.scenario.downstream import NEVER_REGISTERED, DeadLetter, MemoryTable
from coordinator.scenario.memory import (
    Late,
    Stash,
    ahead_of_ddl,
    build_coordinator,
    dead_letter,
    hold_late,
    rename_stashed,
    take_released,
)
from coordinator.scenario.model import Scenario, ScenarioFileError, Step
from coordinator.scenario.observe import Observation, observe
from coordinator.scenario.upstream import RowEvent, Upstream
from coordinator.state import snapshot
from schemas.connect import row_schema_text, value_fields
from schemas.ddl import parse_create_table
from shardmerge.errors import ShardMergeError

__all__ = ["FENCED_LIMIT", "GroupEngine", "RandomSchedule"]

# Batches of one job fenced in a row before the run stops (the job's restart policy).
FENCED_LIMIT = 20


@dataclass(frozen=True)
class RandomSchedule:
    """After each step, each job runs a batch with probability ``p`` (seeded)."""

    seed: int
    p: float = 0.5


@dataclass
class _Write:
    """One write a job planned at ``version`` of ``target``'s table."""

    target: TargetId
    version: int
    what: RowEvent | Truncate | Rename
    project: bool = False


@dataclass
class _Job:
    name: str
    patterns: list[str]
    replica: Replica
    saved: dict[str, Any]
    inbox: list[tuple[Position, RowEvent | tuple[ShardId, str]]] = field(default_factory=list)
    stash: Stash = field(default_factory=lambda: defaultdict(list))
    outbox: list[_Write] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)  # the running batch's, until it saves
    paused: bool = False
    crash_next: bool = False
    # stop (SIGSTOP) inside the next batch that appends, after this many of its appends
    stop_after: int | None = None
    heartbeat: float = 0.0
    batches: int = 0
    appends: int = 0  # records the running batch appended (or found)
    # A batch that ended before its write runs again over the same events (Spark runs a
    # failed batch again over the same offsets): how many of the inbox it took.
    taking: int | None = None
    # rows of the running batch ahead of a DDL not received, per shard: where and why
    # (appended as ``ahead`` records after the batch's gate, as the write step does)
    ahead: dict[ShardId, tuple[Position, str]] = field(default_factory=dict)
    fenced: int = 0  # batches fenced in a row
    passed: set[int] = field(default_factory=set)  # streaming.group.member.GroupMember.passed

    def owns(self, shard: ShardId) -> bool:
        return any(fnmatch.fnmatchcase(str(shard), p) for p in self.patterns)


class _Stopped(Exception):
    """The running batch ends before its write: it runs again from the saved state."""


class GroupEngine:
    name = "memory"

    def __init__(
        self,
        scenario: Scenario,
        *,
        schedule: RandomSchedule | None = None,
        roundtrip: bool = False,
        sink: str | None = None,
    ) -> None:
        if not scenario.jobs:
            raise ScenarioFileError(f"{scenario.path}: a group needs `jobs:`")
        self.scenario = scenario
        self.roundtrip = roundtrip
        self.dialect = scenario.planned_dialect(sink)
        _, self.router, config = build_coordinator(scenario)
        self.configs = {TargetId.parse(scenario.target): config}
        self.log = MemoryLog()
        self.jobs = {
            name: _Job(name, patterns, Replica.new(self.router, self.configs), {})
            for name, patterns in scenario.jobs.items()
        }
        self.upstream = Upstream()
        self.tables: dict[TargetId, MemoryTable] = {}
        self.versions: dict[TargetId, int] = {}  # the version each table has
        self.decided: dict[tuple[TargetId, int], CreateTarget | ApplyDDL] = {}
        self.now = 0.0
        self.rng = random.Random(schedule.seed) if schedule else None
        self.p = schedule.p if schedule else 1.0
        self.error: str | None = None
        self.dead_letters: list[DeadLetter] = []
        # statements marked late, until their shard's `arrive` step
        self.late: Late = {}
        # The owner's terms: how many were claimed, and the job holding the newest one.
        self.terms = 0
        self.holder: str | None = None
        self.fenced = 0  # writes re-planned because the table moved past their version
        self.fenced_batches = 0  # batches that ran again: their fold was behind a table

    # --- driving -----------------------------------------------------------------------------

    def job_of(self, shard: ShardId) -> _Job:
        for job in self.jobs.values():
            if job.owns(shard):
                return job
        raise ScenarioFileError(f"{self.scenario.path}: no job reads shard {shard}")

    def start(self) -> None:
        """Each job registers the tables it knows at its start and folds them; then every
        job runs its first batch, which joins the group (G0)."""
        for name, sql in self.scenario.shards.items():
            shard = ShardId.parse(name)
            self.upstream.create(shard, parse_create_table(sql))
            if name in self.scenario.unseen:
                continue
            job = self.job_of(shard)
            record = Record(f"{job.name}:register:{name}", job.name, "register",
                            {"shard": name, "create": sql, "position": 0})  # fmt: skip
            self.log.append(record)
        for job in self.jobs.values():
            self.fold(job)
            job.saved = job.replica.snapshot()
        for _ in range(2):  # a first batch before the last job joined waits (runs again)
            for job in self.jobs.values():
                if not job.paused:
                    self.batch(job)
        self.owner_pass()

    def stop_inside(self, job: str, appends: int) -> None:
        """``job`` stops (SIGSTOP) inside its next batch that appends a record: after
        ``appends`` of its appends (0: before the first), or after its last one, before
        its gate, when it appends fewer. The batch writes nothing; once the job runs again
        (``resume``) it runs the batch again from its saved state, as the streaming job
        does when it finds its lease lost."""
        self.jobs[job].stop_after = appends

    def step(self, index: int, step: Step) -> None:
        position = index + 1
        kind = step.kind
        touched: _Job | None = None
        if kind == "operator":
            assert step.operator is not None
            # an operator acts on what the dashboard shows: the jobs caught up
            self.settle()
            cmd = parse_command(step.operator)
            record = Record(f"operator:{position}", "operator", "command",
                            {"command": cmd.to_json()})  # fmt: skip
            self.log.append(record)
        elif kind == "pause":
            self.jobs[step.pause or ""].paused = True
        elif kind == "resume":
            job = self.jobs[step.resume or ""]
            job.paused = False
            touched = job
        elif kind == "crash":
            self.jobs[step.crash or ""].crash_next = True
        elif kind == "clock":
            self.now += step.clock or 0.0
        elif kind == "expect":
            self.settle()
        elif kind == "sql" and step.late:
            hold_late(self.upstream, self.late, step, position)
        elif kind == "arrive":
            shard = ShardId.parse(step.arrive or "")
            touched = self.job_of(shard)
            late: list[tuple[Position, RowEvent | tuple[ShardId, str]]] = [
                (at, (shard, sql)) for at, sql in self.late.pop(shard, [])
            ]
            # A batch reads its control events before its rows, in position order (the
            # streaming job's steps 5 and 6): rows not read yet that came after the
            # statement are behind it, not ahead. A batch to run again keeps its events.
            keep = 0 if touched.taking is None else touched.taking
            rest = sorted(touched.inbox[keep:] + late, key=lambda item: item[0])
            touched.inbox = touched.inbox[:keep] + rest
        elif kind == "sql":
            assert step.shard is not None and step.sql is not None
            touched = self.sql(ShardId.parse(step.shard), step.sql, position)
        elif kind in ("insert", "update", "delete"):
            event = self.upstream.step(ShardId.parse(step.shard or ""), step)
            touched = self.read(event, position)
        else:
            raise ScenarioFileError(f"{self.scenario.path}: a group cannot run {kind} steps")
        for job in self.jobs.values():
            if not job.paused:
                job.heartbeat = self.now  # the heartbeat thread, between batches
        if self.rng is None:
            # lockstep: the job that read the step's event, then every other (an idle
            # job's batch folds and acknowledges, as its heartbeat thread does)
            if touched is not None and not touched.paused:
                self.batch(touched)
            for job in self.jobs.values():
                if job is not touched and not job.paused:
                    self.batch(job)
        else:
            for job in self.jobs.values():
                if not job.paused and self.rng.random() < self.p:
                    self.batch(job)
        self.owner_pass()

    def sql(self, shard: ShardId, sql: str, position: int) -> _Job:
        events = self.upstream.dml(shard, sql)
        if events is not None:
            jobs = [self.read(event, position) for event in events]
            return jobs[0] if jobs else self.job_of(shard)
        self.upstream.ddl(shard, sql)
        job = self.job_of(shard)
        job.inbox.append((position, (shard, sql)))
        return job

    def read(self, event: RowEvent, position: Position) -> _Job:
        job = self.job_of(event.shard)
        job.inbox.append((position, event))
        return job

    # --- a job's batch ---------------------------------------------------------------------

    def batch(self, job: _Job) -> None:
        """One micro-batch of ``job``: append, fold, route, execute its own decisions,
        drain what the table's version allows, save (G2-G4)."""
        if job.crash_next and job.inbox:
            job.crash_next = False
            self.run_batch(job, dies=True)  # dies after its appends, before any write
        self.run_batch(job)

    def run_batch(self, job: _Job, dies: bool = False) -> bool:
        """The batch, as the streaming job's steps (coordinator/PROTOCOL.md, "Groups"):
        whether it wrote and saved. A batch that ends before its write (it waits for a
        job to join, dies, stops inside, is fenced) changed nothing but the log: the job
        runs it again from its saved state."""
        job.batches += 1
        job.appends = 0
        kept = (list(job.inbox), {k: list(v) for k, v in job.stash.items()}, list(job.outbox))
        job.dead = []
        job.ahead = {}
        taking = len(job.inbox) if job.taking is None else job.taking
        try:
            self.fold(job, job.replica.seq)
            if self.missing():
                self.tell(job, Record(f"{job.name}:join", job.name, "join", {}))
                if self.missing():
                    raise _Stopped  # G0: it waits for every job to join
            for position, item in job.inbox[:taking]:
                if isinstance(item, tuple):
                    shard, sql = item
                    body = {"shard": str(shard), "sql": sql, "position": position}
                    self.tell(job, Record(f"{job.name}:ddl:{position}", job.name, "ddl", body))
                else:
                    self.route(job, item, position)
            job.inbox = job.inbox[taking:]
            if dies or (job.stop_after is not None and job.appends):
                if not dies:
                    job.paused, job.stop_after = True, None
                raise _Stopped
            self.gate(job)
            for shard, (position, why) in job.ahead.items():
                # the write step's finding, after the gate: folded from the next batch on
                body = {"shard": str(shard), "position": position, "reason": why}
                self.log.append(Record(f"{job.name}:ahead:{shard}:{position}", job.name,
                                       "ahead", body))  # fmt: skip
        except _Stopped:
            job.replica = Replica.restore(job.saved, self.router, self.configs)
            job.inbox, job.outbox = kept[0], kept[2]
            job.stash = defaultdict(list, kept[1])
            job.taking = taking
            return False
        job.fenced, job.taking = 0, None
        self.dead_letters += job.dead  # the batch's dead letters, written with its rows
        job.dead = []
        self.drain(job)
        job.saved = job.replica.snapshot()
        job.heartbeat = self.now
        if self.roundtrip:
            again = Replica.restore(json.loads(json.dumps(job.saved)), self.router, self.configs)
            if again.snapshot() != job.saved:
                raise AssertionError(f"job {job.name}: replica changed through a JSON round trip")
        return True

    def missing(self) -> list[str]:
        """The jobs whose ``join`` is not in the log yet."""
        return [j for j in self.jobs if f"{j}:join" not in self.log.ids]

    def tell(self, job: _Job, record: Record) -> int:
        """``record`` appended (or found, by its id), then the log folded up to it."""
        if job.stop_after is not None and job.appends >= job.stop_after:
            job.paused, job.stop_after = True, None
            raise _Stopped  # SIGSTOP before this append
        seq = self.log.append(record)
        job.appends += 1
        self.fold(job, seq)
        return seq

    def gate(self, job: _Job) -> None:
        """G4 before the write: a table past the version the batch's fold decided (the
        group went on without this job) fences the batch, which runs again and folds the
        log again. Records of its own past its fold (an earlier run's, not appended
        again) are folded at their places from then on (streaming.group.member.left_behind)."""
        job.passed.update(n for n, r in self.log.read(job.replica.seq) if r.job == job.name)
        behind = [t for t, v in job.replica.versions.items() if self.versions.get(t, 0) > v]
        if not behind:
            return
        job.fenced += 1
        self.fenced_batches += 1
        if job.fenced >= FENCED_LIMIT:
            t = behind[0]
            raise ShardMergeError(
                f"job {job.name} stops: {job.fenced} batches in a row fenced ({t} is at "
                f"version {self.versions[t]}, past the {job.replica.versions[t]} its "
                "batch planned for)"
            )
        raise _Stopped

    def fold(self, job: _Job, mine_until: int | None = None) -> None:
        records = batch_records(self.log.read(job.replica.seq), job.name, mine_until, job.passed)
        for folded in job.replica.fold(records):
            for d, version in zip(folded.decisions, folded.versions, strict=True):
                self.execute(job, d, version)

    def route(self, job: _Job, event: RowEvent, position: Position) -> None:
        if self.scenario.row_schemas and self.router.kind(event.shard) is TableKind.SHADOW:
            # what the job learns from its rows, it appends (G2); the fold applies it
            text = row_schema_text(value_fields(event.schema))
            body = {"shard": str(event.shard), "seen": [[position, text]]}
            self.tell(job, Record(f"{job.name}:shadow:{position}", job.name, "shadow", body))
        route = job.replica.coordinator.route_row(event.shard)
        if route.action == "unknown":
            # its CREATE TABLE was never read: held until it arrives, through the log (G2)
            body = {"shard": str(event.shard), "position": position, "reason": ""}
            rid = f"{job.name}:await:{event.shard}:{position}"
            self.tell(job, Record(rid, job.name, "await", body))
            route = job.replica.coordinator.route_row(event.shard)
        if route.action == "write":
            why = ahead_of_ddl(job.replica.coordinator, event, position, route)
            if why is not None or event.shard in job.ahead:
                # ahead of a DDL not received: this row and the shard's later ones in the
                # batch wait; the record goes to the log after the gate (G2)
                job.ahead.setdefault(event.shard, (position, why or ""))
                route = replace(route, action="hold")
        if route.action == "hold":
            job.stash[(event.shard, route.version)].append((position, event))
        elif route.action == "write":
            assert route.target is not None
            version = job.replica.versions.get(route.target, 0)
            job.outbox.append(_Write(route.target, version, event, route.project))
        elif route.action == "unknown":  # nothing holds it: as MemoryEngine.row
            job.dead.append(dead_letter(event, NEVER_REGISTERED))

    def execute(self, job: _Job, d: Decision, version: int) -> None:
        """A decision ``job``'s fold made, with the version its target had in the fold
        then: the target-level ones are the owner's (kept once, by version); ``job``
        executes those about its own shards (G3), its writes planned at ``version``."""
        if isinstance(d, CreateTarget | ApplyDDL):
            self.decided.setdefault((d.target, version), d)
            return
        if isinstance(d, Release) and job.owns(d.shard):
            released, ahead = take_released(job.replica.coordinator, job.stash, d)
            job.outbox += [_Write(d.target, version, e, d.project) for e in released]
            if ahead is not None:  # the rest wait in the stash; an ahead record (G2)
                job.ahead.setdefault(d.shard, ahead)
        elif isinstance(d, Truncate) and job.owns(d.shard):
            job.outbox.append(_Write(d.target, version, d))
        elif isinstance(d, Rename) and job.owns(d.new):
            rename_stashed(job.stash, d)
            job.outbox.append(_Write(d.target, version, d))

    def drain(self, job: _Job) -> None:
        """Execute the job's writes in order while the table has their version (G4). A
        write planned below the table's version (the job was not live when the table moved
        on) is planned again at the table's version (``fenced``)."""
        while job.outbox:
            w = job.outbox[0]
            have = self.versions.get(w.target, 0)
            if w.version > have:
                return  # the table is behind what this job decided: wait for the owner
            if w.version < have:
                self.fenced += 1
                w.version = have
            job.outbox.pop(0)
            table = self.tables[w.target]
            if isinstance(w.what, Truncate):
                table.truncate(w.what)
            elif isinstance(w.what, Rename):
                if w.what.match:
                    table.rehome(dict(w.what.match), dict(w.what.values), lambda _: True)
            else:
                event = w.what
                extra = self.router.extract(w.target).values(event.shard)
                why = table.write(event.shard, event.before, event.after, extra, w.project)
                if why is not None:
                    self.dead_letters.append(dead_letter(event, why))

    # --- the owner -----------------------------------------------------------------------

    def live(self, job: _Job) -> bool:
        return not job.paused or self.now - job.heartbeat <= self.scenario.lease_s

    def owner(self) -> _Job | None:
        """The holder of the owner's term (``streaming.group.member.GroupMember.owns``): the job
        holding the newest term while it is live, paused or not (a job paused within its
        lease keeps the term, and the owner's work waits for it); when it is down, the
        first live job in the file's order claims the next term, unless it is paused
        itself (a stopped job claims nothing). None: no job acts as the owner now."""
        holder = self.jobs.get(self.holder or "")
        if holder is not None and self.live(holder):
            return holder
        first = next((j for j in self.jobs.values() if self.live(j)), None)
        if first is None or first.paused:
            return None
        self.terms += 1
        self.holder = first.name
        return first

    def owner_pass(self) -> None:
        """Move each table to its next decided version while every live job has folded
        that decision and planned nothing below it (G5), when the owner runs."""
        owner = self.owner()
        if owner is None or owner.paused:
            return
        progress = True
        while progress:
            progress = False
            for (target, version), d in sorted(self.decided.items(), key=lambda kv: kv[0][1]):
                if version != self.versions.get(target, 0) + 1:
                    continue
                acks = (self.ack(j, target, version) for j in self.jobs.values())
                if owner_waits_for(acks):  # G5, as the streaming job's owner applies it
                    continue
                if isinstance(d, CreateTarget):
                    self.tables.setdefault(target, MemoryTable.create(d, self.dialect))
                else:
                    before = self.decided[(target, version - 1)].schema.column_names()
                    have = self.tables[target].schema.column_names()
                    # the job's owner checks the table first (an owner that stopped inside
                    # its change); none stops there in this engine, so any answer but
                    # "run it" is a defect of the engine
                    stale = stale_change(before, d.schema.column_names(), have, d.statement)
                    if stale is not None:
                        raise AssertionError(f"{target} v{version}: {stale}")
                    self.tables[target].apply(d)
                self.versions[target] = version
                progress = True
        for job in self.jobs.values():
            if not job.paused:
                self.drain(job)

    def ack(self, job: _Job, target: TargetId, version: int) -> Ack:
        return Ack(
            job.name,
            self.live(job),
            job.replica.versions.get(target, 0) >= version,
            any(w.target == target and w.version < version for w in job.outbox),
        )

    def settle(self) -> None:
        """Every live job catches up: batches until nothing changes (G1 then holds)."""
        for _ in range(10):
            before = (len(self.log), dict(self.versions))
            for job in self.jobs.values():
                if not job.paused:
                    self.batch(job)
            self.owner_pass()
            if (len(self.log), dict(self.versions)) == before:
                break
        states = {
            json.dumps(snapshot(j.replica.coordinator), sort_keys=True)
            for j in self.jobs.values()
            if not j.paused
        }
        if len(states) > 1:
            raise AssertionError("jobs that folded the same log hold different states (G1)")

    # --- observing ---------------------------------------------------------------------

    def observe(self) -> Observation:
        if self.error is None:
            try:
                self.settle()
            except ShardMergeError as e:  # a strict conflict stops the job that met it
                self.error = str(e)
        # what a running job's dashboard shows (they all hold the same state: G1)
        running = [j for j in self.jobs.values() if not j.paused]
        job = running[0] if running else next(iter(self.jobs.values()))
        target = TargetId.parse(self.scenario.target)
        table = self.tables.get(target)
        rows: list[dict[str, Any]] = list(table.rows.values()) if table else []
        schema = table.schema if table else None
        return observe(job.replica.coordinator, target, schema, rows, self.error, self.dead_letters)
