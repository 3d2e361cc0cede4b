"""The Coordination port of a group member (``streaming.batch.coordination``; docs/groups.md).

What a job writing alone would tell its coordinator, a member appends to the group log as
a record (its id: what the batch gives again when it runs again), then folds the log up to
that record, the others' records before it first, and executes the decisions about its own
shards (G2, G3). Downstream changes are the owner's (``GroupMember.owner_pass``, G5); the
batch writes a target only at the version its fold decided (the gate, G4). The batch never
calls the replica's coordinator to change it: every change is a fold of the log, the same
in every member's replica.

Rows ahead of a DDL found at step 6 (the summary, after the gate) are an ``ahead`` record:
appended there, folded by the member's next batch (or this batch run again) at its place in
the log, as every other member folds it. The batch does not fold it at once: a fold at step
6 would fold the others' records appended since the gate, whose downstream changes the
batch's rows were not planned for.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from coordinator.coordinator import Coordinator
from coordinator.decisions import ApplyDDL, CreateTarget, Decision, Rename
from coordinator.fingerprints import fingerprints_change
from coordinator.group import Folded, Record, Replica
from coordinator.ids import ShardId
from coordinator.routing import Router, TableKind
from streaming.batch.coordination import CREATE_TABLE, Position, Statement, Taken, record_key
from streaming.batch.executor import Executor
from streaming.group.member import GroupMember

__all__ = ["GroupCoordination"]

log = logging.getLogger("shardmerge.batch")


class GroupCoordination:
    """One member's coordination: its group log appends, folds and own decisions."""

    shared = True

    def __init__(self, member: GroupMember, router: Router) -> None:
        self.member = member
        self.router = router
        self.replica: Replica | None = None
        self.ex: Executor | None = None
        self.records = 0

    @property
    def c(self) -> Coordinator:
        assert self.replica is not None, "the batch's coordination has not started"
        return self.replica.coordinator

    # --- the batch's frame ---------------------------------------------------------------

    def begin(self) -> None:
        self.records = 0
        self.member.begin()  # one batch at a time, and only while this member's lease holds

    def start(self, c: Coordinator, ex: Executor, saved: dict[str, Any] | None) -> None:
        """The group log's records since the saved batch: the others', and this member's
        own only when this batch does not append them again (``GroupMember.fold``)."""
        meta = None if saved is None else saved.get("group")
        self.replica = Replica(c) if meta is None else Replica.with_coordinator(c, meta)
        self.ex = ex
        ex.c = c
        self.fold(self.replica.seq)

    def end(self, batch: int, done: bool) -> None:
        if done and self.replica is not None:
            self.member.finish(self.replica, batch)
        else:
            self.member.abort()
        self.replica = self.ex = None

    def saved(self) -> dict[str, Any]:
        """The replica as saved beside the coordinator (its coordinator is that one)."""
        assert self.replica is not None
        return {"group": self.replica.meta()}

    # --- the log -------------------------------------------------------------------------

    def tell(
        self, kind: Any, shard: ShardId | None, key: str, body: dict[str, Any], fold: bool = True
    ) -> Folded | None:
        """A record of ``kind`` appended (its id from ``key``: a batch run again gives it
        again), then, with ``fold``, the log folded up to it. The fold of the record
        itself, if it was folded now."""
        about = {} if shard is None else {"shard": str(shard)}
        m = self.member
        seq = m.append(Record(f"{m.member}:{key}", m.member, kind, {**about, **body}))
        self.records += 1
        if not fold:
            return None
        folded = self.fold(seq)
        return next((f for f in folded if f.seq == seq), None)

    def fold(self, mine_until: int) -> list[Folded]:
        """Fold the log (up to this member's next record above ``mine_until``) and execute
        the decisions about this member's shards."""
        assert self.replica is not None and self.ex is not None
        folded = self.member.fold(self.replica, mine_until)
        # a refused command leaves the replica with a coordinator restored from before it
        self.ex.c = self.replica.coordinator
        for f in folded:
            if f.refused and f.record.job == self.member.member:
                log.error("group log record %s not taken: %s", f.record.id, f.refused)
            self.ex.run(self.own(f.decisions))
        return folded

    def own(self, decisions: Sequence[Decision]) -> list[Decision]:
        """The decisions this member executes: those about its own shards (the owner runs
        the downstream changes)."""
        assert self.replica is not None
        mine = self.member.member
        owners = self.replica.owners
        out: list[Decision] = []
        for d in decisions:
            if isinstance(d, CreateTarget | ApplyDDL):
                continue
            shard = d.new if isinstance(d, Rename) else d.shard
            if owners.get(shard, mine) == mine:
                out.append(d)
        return out

    # --- what the batch tells ------------------------------------------------------------

    def mark(self) -> Any:
        return None  # a command the fold refused leaves the replica as it was (Replica)

    def rollback(self, mark: Any) -> None:
        pass

    def command(self, cid: str, command: Any) -> None:
        """An operator command given to this member: the group's, at its place in the log.

        ``retry`` is not one: a downstream change the table refused is the owner's, which
        runs it again at each of its passes (every ``heartbeat_s``) until the table takes
        it, so there is nothing to append; the command is refused with what the owner
        waits for."""
        if command.action == "retry":
            m = self.member
            _, holder = m.term()
            owner = (holder or {}).get("member", "no member yet")
            waits = m.waiting if owner == m.member else ""
            raise ValueError(
                f"in group {m.co.group} the owner ({owner}) runs a downstream change the "
                f"table refused again at each of its passes, every {m.co.heartbeat_s:g} s, "
                "until the table takes it: fix the table, and nothing else is needed"
                + (f" (it waits for: {waits})" if waits else "")
                + f"; shardmerge group show says what the owner waits for ({command.target})"
            )
        folded = self.tell("command", None, f"command:{cid}", {"command": command.to_json()})
        if folded is not None and folded.refused:
            raise ValueError(folded.refused)

    def join(self, creates: Sequence[Statement], spark: Any) -> None:
        """Before this member's first DDL record: the tables this batch creates (each
        shard's first CREATE TABLE) go to the log, then its ``join`` record, and the
        batch waits until every member joined (``GroupMember.join``)."""
        m = self.member
        if not m.missing():
            return
        for s in creates:
            if not CREATE_TABLE.match(s.sql) or self.c.shard_state(s.shard) is not None:
                continue
            if self.router.route(s.shard) is None:
                continue
            self.ddl_record(s)
        waited = m.join(spark)
        log.info("every member of group %s joined (waited %.1f s)", m.co.group, waited)
        # the others' records up to this member's join (its own later ones keep their place)
        self.fold(m.ids[f"{m.member}:join"])

    def ddl_record(self, s: Statement) -> Folded | None:
        body = {"sql": s.sql, "position": s.position, "origin": s.origin, "channel": s.channel}
        return self.tell("ddl", s.shard, f"ddl:{record_key(s.position)}", body)

    def ddl(self, s: Statement) -> Taken:
        """A control event: a ``ddl`` record, folded in log order (a statement sent again
        is the fold's to judge: ``Replica``)."""
        mine = self.ddl_record(s)
        if mine is None:
            return Taken()
        if mine.refused:
            return Taken(refused=mine.refused)
        return Taken(self.own(mine.decisions))

    def shadow(self, shard: ShardId, seen: list[tuple[Position, str]]) -> None:
        if self.router.kind(shard) is TableKind.SHADOW:
            self.tell("shadow", shard, f"shadow:{shard}:{record_key(seen)}",
                      {"seen": [list(x) for x in seen]})  # fmt: skip

    def prints(self, shard: ShardId, seen: list[tuple[Position, str]]) -> None:
        if fingerprints_change(self.c.shard_state(shard), seen):
            self.tell("prints", shard, f"prints:{shard}:{record_key(seen)}",
                      {"seen": [list(x) for x in seen]})  # fmt: skip

    def stop(self, shard: ShardId, since: Position) -> None:
        self.tell("stop", shard, f"stop:{shard}:{record_key(since)}", {})

    def await_ddl(self, shard: ShardId, position: Position, reason: str) -> None:
        self.tell("await", shard, f"await:{shard}:{record_key(position)}",
                  {"position": position, "reason": reason})  # fmt: skip

    def gate(self, spark: Any) -> float:
        """G4: the batch writes only once every target has the version its fold decided;
        the downstream schemas are the fold's from then on."""
        assert self.replica is not None and self.ex is not None
        waited = self.member.gate(self.replica, spark)
        self.ex.schemas.update(self.c.downstream_schemas())
        return waited

    def ahead(self, shard: ShardId, position: Position, reason: str) -> None:
        """Rows of ``shard`` from ``position`` on are ahead of a DDL not received: an
        ``ahead`` record, folded from the member's next batch on (this module's text). The
        batch itself stashes the rows (the write step)."""
        self.tell("ahead", shard, f"ahead:{shard}:{record_key(position)}",
                  {"position": position, "reason": reason}, fold=False)  # fmt: skip
