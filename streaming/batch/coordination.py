"""The Coordination port: what a micro-batch asks of its coordination, alone or in a group.

The batch (``streaming.batch.protocol``) runs the protocol's steps; every step that tells the
coordinator something, or waits on it, goes through one object of this port, so the batch
has one path whether the job writes its targets alone or as one member of a group
(docs/groups.md, coordinator/PROTOCOL.md "Groups"):

- :class:`Solo` calls the job's coordinator in place and executes every decision at once;
- ``streaming.group.coordination.GroupCoordination`` appends what the batch would tell the
  coordinator to the group log, folds the log up to it (the others' records before it
  first) and executes the decisions about its own shards; the owner runs the downstream
  changes (G2, G3, G5).

``streaming.job`` picks one. The calls, in the order a batch makes them:

==============  =====================================================================
``begin``       the batch starts (a group member: one batch at a time, its lease held)
``start``       step 1: the restored coordinator and the batch's executor
``mark`` and    step 2, an operator command: a command the coordinator refused leaves
``rollback``    it as it was
``command``     step 2: the operator's command (decisions executed)
``join``        step 5, first: a member that has not joined its group joins
``shadow``      step 5: the row schemas of an online-DDL shadow table
``ddl``         step 5: a control event (its decisions executed)
``prints``      step 5: the schema fingerprints of a shard's rows
``stop``        step 5: a shard stops waiting for a DDL its topics do not hold
``await_ddl``   step 5: rows of a routed table whose CREATE TABLE has not arrived
``gate``        end of step 5: wait until every target has the version decided
``ahead``       step 6: rows ahead of a DDL that has not arrived
``saved``       step 7: what the coordination keeps beside the coordinator's state
``end``         the batch ended (done or failed)
==============  =====================================================================
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from coordinator.commands import OperatorCommand
from coordinator.coordinator import Coordinator, UnknownShardError
from coordinator.decisions import Decision
from coordinator.ids import ShardId
from coordinator.state import snapshot

if TYPE_CHECKING:  # the port names no sink: the executor is the batch's
    from streaming.batch.executor import Executor

__all__ = ["CREATE_TABLE", "Coordination", "Solo", "Statement", "Taken", "record_key"]

log = logging.getLogger("shardmerge.batch")

CREATE_TABLE = re.compile(r"^\s*CREATE\s+TABLE\b", re.IGNORECASE)

Position = Any  # a binlog position as the control events carry it (streaming.source.control)


@dataclass(frozen=True)
class Statement:
    """A control event as the coordination reads it: its shard, statement, position,
    upstream origin (a shard's own id of the statement) and channel (``topic[partition]``).
    """

    shard: ShardId
    sql: str
    position: Position
    origin: Any
    channel: str


@dataclass(frozen=True)
class Taken:
    """What the coordination made of a control event: the decisions executed for the
    batch's shards (the row plan closes its segments with them); ``refused``: why it was
    not taken (the event is a dead letter); ``resent``: taken already, sent again."""

    decisions: list[Decision] = field(default_factory=list)
    refused: str | None = None
    resent: bool = False


def record_key(value: Any) -> str:
    """A position (or positions) as part of a group record's id: a batch run again gives
    the same id, so the log keeps one record of it."""
    return json.dumps(value, separators=(",", ":"), default=str)


class Coordination(Protocol):
    """The calls the batch makes of its coordination (the table in this module's text)."""

    # Several jobs write these targets (the sink then refuses a write that races another
    # job's on data alone; streaming.storage.delta_sink).
    shared: bool
    # Records this batch appended to a group log (0 alone).
    records: int
    # The group member, for the ops views and the job's stop (None alone).
    member: Any

    @property
    def c(self) -> Coordinator:
        """The coordinator the batch plans with (a group's: the replica's, folded)."""
        ...

    def begin(self) -> None: ...

    def start(self, c: Coordinator, ex: Executor, saved: dict[str, Any] | None) -> None: ...

    def mark(self) -> Any: ...

    def rollback(self, mark: Any) -> None: ...

    def command(self, cid: str, command: OperatorCommand) -> None: ...

    def join(self, creates: Sequence[Statement], spark: Any) -> None: ...

    def shadow(self, shard: ShardId, seen: list[tuple[Position, str]]) -> None: ...

    def ddl(self, s: Statement) -> Taken: ...

    def prints(self, shard: ShardId, seen: list[tuple[Position, str]]) -> None: ...

    def stop(self, shard: ShardId, since: Position) -> None: ...

    def await_ddl(self, shard: ShardId, position: Position, reason: str) -> None: ...

    def gate(self, spark: Any) -> float: ...

    def ahead(self, shard: ShardId, position: Position, reason: str) -> None: ...

    def saved(self) -> dict[str, Any]: ...

    def end(self, batch: int, done: bool) -> None: ...


class Solo:
    """A job that writes its targets alone: its coordinator decides in place and the
    batch's executor runs every decision at once. ``restore``: a coordinator from its
    saved snapshot (a command the coordinator refused leaves it as it was)."""

    shared = False
    records = 0
    member = None

    def __init__(self, restore: Callable[[dict[str, Any]], Coordinator]) -> None:
        self.restore = restore
        self.ex: Executor | None = None

    @property
    def c(self) -> Coordinator:
        assert self.ex is not None, "the batch's coordination has not started"
        return self.ex.c

    def run(self, decisions: list[Decision]) -> None:
        assert self.ex is not None
        self.ex.run(decisions)

    def begin(self) -> None:
        pass

    def start(self, c: Coordinator, ex: Executor, saved: dict[str, Any] | None) -> None:
        ex.c = c
        self.ex = ex

    def mark(self) -> Any:
        return snapshot(self.c)

    def rollback(self, mark: Any) -> None:
        assert self.ex is not None
        self.ex.c = self.restore(mark)

    def command(self, cid: str, command: OperatorCommand) -> None:
        self.run(self.c.command(command))

    def join(self, creates: Sequence[Statement], spark: Any) -> None:
        pass  # no group to join

    def shadow(self, shard: ShardId, seen: list[tuple[Position, str]]) -> None:
        self.c.shadow_rows(shard, seen)

    def ddl(self, s: Statement) -> Taken:
        if self.c.resent(s.shard, s.sql, s.origin, s.channel):
            return Taken(resent=True)
        try:
            decisions = self.c.on_ddl(s.shard, s.sql, s.position, s.origin, s.channel)
        except UnknownShardError as e:
            return Taken(refused=str(e))
        self.run(decisions)
        return Taken(decisions)

    def prints(self, shard: ShardId, seen: list[tuple[Position, str]]) -> None:
        self.run(self.c.schema_fingerprints(shard, seen))

    def stop(self, shard: ShardId, since: Position) -> None:
        self.run(self.c.stop_waiting(shard))

    def await_ddl(self, shard: ShardId, position: Position, reason: str) -> None:
        self.run(self.c.await_ddl(shard, position, reason))

    def gate(self, spark: Any) -> float:
        return 0.0  # the job's own executor brought every target to its version

    def ahead(self, shard: ShardId, position: Position, reason: str) -> None:
        self.await_ddl(shard, position, reason)  # alone, the same call as while deciding

    def saved(self) -> dict[str, Any]:
        return {}

    def end(self, batch: int, done: bool) -> None:
        self.ex = None
