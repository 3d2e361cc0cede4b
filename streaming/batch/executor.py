"""The executor of decisions, inside one micro-batch.

Schema work runs at once, in decision order: ``CreateTarget`` creates the Delta table,
``ApplyDDL`` alters it (each only where the table still lacks the change, so a re-run
batch redoes nothing). Row work is only *recorded*: ``Truncate`` and ``Release`` become
part of the batch's row plan, so that every target gets one DELETE (for the shards that ran
TRUNCATE) and one MERGE (fresh rows and replayed stash rows together), whatever the number
of decisions (see ``streaming.batch.protocol``). ``Hold`` needs nothing: the row plan holds rows
from the shard's hold position on.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field

from coordinator.coordinator import Coordinator
from coordinator.decisions import (
    ApplyDDL,
    CreateTarget,
    Decision,
    Hold,
    Release,
    Rename,
    Truncate,
)
from coordinator.ids import ShardId, TargetId
from schemas.model import TableSchema
from streaming.batch.move_keys import table_predicate
from streaming.config import Settings
from streaming.storage.sink import Sink, apply_downstream
from streaming.storage.slots import Slots
from streaming.storage.stash import Stash

__all__ = ["Executor", "RowWork", "bound", "bounded"]

log = logging.getLogger("shardmerge.batch")


@dataclass
class RowWork:
    """The row decisions of a batch, in the order they were taken."""

    truncates: list[Truncate] = field(default_factory=list)
    releases: list[Release] = field(default_factory=list)
    # Where each (target, shard, version)'s releases are in ``releases``: a hold bounds
    # only its own shard's (:func:`bound`), whatever the number of shards released.
    released_at: dict[tuple[TargetId, ShardId, int], list[int]] = field(default_factory=dict)
    # Shards renamed within their target: the batch's rows of the old name before the
    # rename are written (or held) under the new one (streaming.batch.writer.follow_renames).
    renames: list[Rename] = field(default_factory=list)
    # Rows deleted per target by TRUNCATEs run early: before a later RENAME of their shard
    # in the same batch re-homed its rows (the write step runs the others).
    truncated: dict[TargetId, int] = field(default_factory=dict)
    ran_early: list[Truncate] = field(default_factory=list)
    # The downstream changes applied per target (a key column changed: its islands of
    # keys are read again, streaming.batch.new_keys).
    altered: dict[TargetId, list[ApplyDDL]] = field(default_factory=dict)


@dataclass
class Executor:
    """Runs decisions for one batch; ``slots``: the batch's write slots."""

    c: Coordinator
    sink: Sink
    settings: Settings
    slots: Slots
    # The downstream schemas as executed decisions left them (a refused ALTER does not
    # change them, although the coordinator already counts it as applied).
    schemas: dict[TargetId, TableSchema]
    work: RowWork = field(default_factory=RowWork)
    # The job's stash (held rows), when the engine has one: a rename re-keys its rows.
    stash: Stash | None = None
    downstream_ddl: list[str] = field(default_factory=list)
    refused_ddl: list[str] = field(default_factory=list)

    def run(self, decisions: list[Decision]) -> None:
        i = 0
        while i < len(decisions):
            d = decisions[i]
            i += 1
            match d:
                case CreateTarget() | ApplyDDL():
                    # the one door of a downstream change (streaming.storage.sink), as the owner's
                    rewrite = self.settings.target_settings(d.target).rewrite_incompatible
                    slots = self.slots.taker(f"{d.target}: {d.statement}")
                    change = apply_downstream(self.sink, d, slots, rewrite=rewrite)
                    if not change.applied:
                        # The change waits, with what follows it for this target; the job
                        # goes on and the target's rows wait in the stash (stage conflict).
                        waiting = [x for x in decisions[i - 1 :] if x.target == d.target]
                        decisions = decisions[:i] + [
                            x for x in decisions[i:] if x.target != d.target
                        ]
                        assert isinstance(d, ApplyDDL)
                        self.c.refuse(d.target, waiting, change.advice)
                        self.refused_ddl.append(d.statement)
                        log.error("target %s: %s", d.target, change.advice)
                        continue
                    self.schemas[d.target] = d.schema
                    if isinstance(d, ApplyDDL):
                        self.downstream_ddl.append(d.statement)
                        self.work.altered.setdefault(d.target, []).append(d)
                case Truncate():
                    self.work.truncates.append(d)
                case Rename():
                    self.rename(d)
                case Release():
                    log.info(
                        "target %s: release %s (v%s, until %s%s)",
                        d.target,
                        d.shard,
                        d.version,
                        d.until,
                        ", projected" if d.project else "",
                    )
                    key = (d.target, d.shard, d.version)
                    self.work.released_at.setdefault(key, []).append(len(self.work.releases))
                    self.work.releases.append(d)
                case Hold():
                    # The row plan holds the shard's rows from its position on.
                    log.info(
                        "target %s: hold %s from %s (v%s): %s",
                        d.target,
                        d.shard,
                        d.position,
                        d.version,
                        d.reason or "(no reason given)",
                    )
                    for at in self.work.released_at.get((d.target, d.shard, d.version), ()):
                        self.work.releases[at] = bound(self.work.releases[at], d)

    def rename(self, d: Rename) -> None:
        """A shard renamed within its target: at once (step 5), its rows downstream take
        the new name's extract values and its held rows in the stash its new name, each
        one Delta commit with its own write slot; the batch's own rows of the old name
        before the rename follow in the write step."""
        log.info(
            "target %s: shard %s renamed to %s at %s; its rows follow it%s",
            d.target, d.old, d.new, d.position,
            f" (downstream {dict(d.match)} -> {dict(d.values)})" if d.match else "",
        )  # fmt: skip
        target_slot = self.slots.take(f"{d.target}: re-home {d.old} as {d.new}")
        stash_slot = self.slots.take(f"stash: {d.old} renamed {d.new}")
        # A TRUNCATE of the old name earlier in this batch deletes that name's rows: it
        # runs now, before they take the new name (the write step would find none).
        before = [
            t
            for t in self.work.truncates
            if t.target == d.target
            and t not in self.work.ran_early
            and t.match
            and d.match
            and dict(t.match) == dict(d.match)
        ]
        if before and self.schemas.get(d.target) is not None:
            slot = self.slots.take(f"{d.target}: TRUNCATE before the rename of {d.old}")
            deleted = self.sink.truncate(d.target, [t.match for t in before], slot)
            self.work.truncated[d.target] = self.work.truncated.get(d.target, 0) + deleted
            log.info(
                "target %s: %d rows of %s truncated before its rename", d.target, deleted, d.old
            )
        self.work.ran_early.extend(before)  # kept in truncates: the plan drops rows by them
        schema = self.schemas.get(d.target)
        if d.match and schema is not None:
            where = table_predicate(d.keys, schema) if d.keys else None
            changed = self.sink.rehome(d.target, d.match, d.values, target_slot, where)
            log.info("target %s: %d rows of %s now under %s", d.target, changed, d.old, d.new)
        # A split's old side keeps its name and its held rows (the moved keys' were
        # discarded: streaming.batch.moves). Rows that a release earlier in this batch replays
        # keep the old name: the write step reads them under it (its plan: a TRUNCATE of
        # the old name before them), then renames them as it renames the batch's own rows
        # of the old name (``streaming.batch.writer.follow_renames``).
        if self.stash is not None and not d.keys and self.stash.exists():
            replayed = [
                (r.version, r.until)
                for r in self.work.releases
                if r.target == d.target and r.shard == d.old
            ]
            self.stash.rename(str(d.target), d.old, d.new, stash_slot, keep=replayed)
        self.work.renames.append(d)


def bound(release: Release, hold: Hold) -> Release:
    """``release`` once ``hold`` came after it in the batch: a shard released earlier in
    the batch (its awaited DDL arrived) and held again by a later statement of the batch
    (a conflict DDL that arrived with it) replays only its stashed rows before the hold;
    the rest stay in the stash for the hold's own release (their values would otherwise be
    written under a schema that lacks them). PROTOCOL.md, steps 7 and 8."""
    at = hold.position
    if (
        at is None
        or (release.target, release.shard, release.version)
        != (hold.target, hold.shard, hold.version)
        or (release.until is not None and release.until <= at)
    ):
        return release
    return dataclasses.replace(release, until=at)


def bounded(releases: list[Release], hold: Hold) -> list[Release]:
    """Every one of ``releases`` once ``hold`` came after them (:func:`bound`)."""
    return [bound(r, hold) for r in releases]
