"""Declared moves in the streaming job (docs/moves.md): the marker rows as control events,
the classification of every event of a moving shard, its rows' fate in the row plan, and
the downstream switch, each at its place in the batch's steps (coordinator/PROTOCOL.md).

The pure rules are ``coordinator.moves`` (the same :class:`~coordinator.moves.Moves` book
the memory engine folds); this module maps them onto the batch:

- step 4: the rows of a move's marker table are read on the driver (a few per move) and
  taken out of the batch's rows;
- step 5: marker rows go through the book in the global order of control events; a
  statement of ``to`` before its ``switched`` marker goes to the move's own coordinator
  (the copy's schema, recorded), one after it waits for the switch, a TRUNCATE/DROP/RENAME
  of ``from`` after its freeze is deferred to after the switch; the rest go to the job's
  coordinator as before. After each control event the pending switches are tried;
- the row plan: ``to``'s rows up to its marker are the copy (dropped), after it they wait
  in the stash (version :data:`MOVE_QUEUE`) until the switch releases them; ``from``'s rows
  after its freeze wait in the stash too (version :data:`MOVE_KEEP`): the switch discards
  them (a moved key's changes after the freeze are never applied), an abort replays them;
- the switch: the kept rows discarded, then one Delta UPDATE per ``from`` re-homing its
  rows (``Coordinator.switch_home``: a :class:`~coordinator.decisions.Rename` each, so the
  batch's own earlier rows of ``from`` follow too), ``to``'s queued rows released, its
  queued statements and ``from``'s deferred ones run, in that order.

The book, the copies' coordinators and the waiting statements are part of the saved
state (``moves`` in the state file), so a re-run batch starts from the same point.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterable
from typing import Any, Protocol

from coordinator.coordinator import Coordinator, RowRoute
from coordinator.decisions import Decision, Release, Rename
from coordinator.ids import Position, ShardId, TargetId
from coordinator.moves import (
    Move,
    MoveCommand,
    MoveError,
    Moves,
    binlog_position,
    copy_coordinator,
    event_kind,
    lock_views,
    real_table,
    switch_facts,
)
from coordinator.routing import Router
from coordinator.rowplan import RowPlan
from coordinator.state import restore, snapshot
from shardmerge.errors import ShardMergeError
from streaming.batch.move_keys import image_predicate
from streaming.batch.plan import NO_MOVED, Planner, Segment
from streaming.faults import crash_point
from streaming.source.control import as_dict, control_sql, position_of, upstream_origin
from streaming.sql.quoting import string

__all__ = ["MOVE_BEHIND", "MOVE_KEEP", "MOVE_QUEUE", "MOVE_WAIT", "MoveKeeper"]

log = logging.getLogger("shardmerge.moves")

# Stash versions of rows a move keeps (a shard table's own versions are never negative).
MOVE_QUEUE = -1  # `to`'s rows after its switch marker, until the switch
MOVE_KEEP = -2  # `from`'s moved keys' rows after its freeze: discarded at the switch
# A split's `from` rows of the keys that stay, behind a TRUNCATE/DROP/RENAME the move
# deferred: replayed after it, at the switch (or the abort).
MOVE_BEHIND = -3
# Rows of a moving shard beyond its source's marker watermark: not classified yet. Every
# batch reads them again with its own rows (``MoveKeeper.rereads``) and classifies them
# with what it knows then.
MOVE_WAIT = -4


class Host(Protocol):
    """What the keeper uses of the batch (``streaming.batch.protocol._Batch``)."""

    batch: int

    @property
    def c(self) -> Coordinator: ...

    def run_decisions(self, decisions: list[Decision]) -> None: ...

    def discard_stashed(self, target: TargetId, shard: ShardId, version: int) -> None: ...

    def release(self, d: Release) -> None: ...

    def replay_control(self, r: dict[str, Any], planner: Planner) -> None: ...

    def dead_control(self, r: dict[str, Any], why: str) -> None: ...


def _shard(r: dict[str, Any]) -> ShardId:
    return ShardId(r["source"], r["db"], r["tbl"])


class MoveKeeper:
    """The job's moves across batches: restored at step 1, saved at step 7."""

    def __init__(self, moves: Iterable[Move], router: Router, saved: dict[str, Any] | None) -> None:
        self.router = router
        self.moves = Moves(moves)
        self.copies = {m.id: copy_coordinator(m) for m in self.moves.moves.values()}
        # Control events (as dicts of the event's columns) kept for later: ``to``'s after
        # its switch marker and ``from``'s table-level ones after its freeze, run at the
        # switch (or the abort); and, in the order read, those that cannot be classified
        # yet (beyond their source's marker watermark).
        self.queued: dict[str, list[dict[str, Any]]] = {}
        self.deferred: dict[str, list[dict[str, Any]]] = {}
        self.pending: list[dict[str, Any]] = []
        # Per source, the position of the newest marker row read: every marker row of the
        # source before it has been read (the marker table's topic is read in order).
        self.watermark: dict[str, Position] = {}
        # The unmet preconditions of each waiting switch (shown on the target's lock).
        self.unmet: dict[str, list[str]] = {}
        if saved:
            self.moves.restore(saved["progress"])
            for move_id, state in saved.get("copies", {}).items():
                if move_id in self.copies:
                    c = self.copies[move_id]
                    self.copies[move_id] = restore(state, c.router, {}, c.default)
            for move_id in saved.get("switched", []):
                self.copies.pop(move_id, None)
            self.queued = {k: list(v) for k, v in saved.get("queued", {}).items()}
            self.deferred = {k: list(v) for k, v in saved.get("deferred", {}).items()}
            self.pending = list(saved.get("pending", []))
            self.watermark = dict(saved.get("watermark", {}))
            self.unmet = {k: list(v) for k, v in saved.get("unmet", {}).items()}

    def __bool__(self) -> bool:
        return bool(self.moves)

    def restored(self, saved: dict[str, Any]) -> MoveKeeper:
        """The keeper as :meth:`to_json` saved it (a refused command's changes undone)."""
        return MoveKeeper(self.moves.moves.values(), self.router, saved)

    def to_json(self) -> dict[str, Any]:
        return {
            "progress": self.moves.to_json(),
            "copies": {m: snapshot(c) for m, c in self.copies.items()},
            "switched": sorted(m for m in self.moves.moves if m not in self.copies),
            "queued": self.queued,
            "deferred": self.deferred,
            "pending": self.pending,
            "watermark": self.watermark,
            "unmet": self.unmet,
        }

    # --- step 4 ---------------------------------------------------------------------------

    def marker_rows(self) -> str:
        """An SQL condition true for the rows of the moves' marker tables (on the sources
        of each move's sides, in any database)."""
        parts = []
        for m in self.moves.moves.values():
            sources = sorted({s.source for s in (*m.sources, m.to)})
            parts.append(
                f"(tbl = {string(m.marker)} AND source IN ({', '.join(map(string, sources))}))"
            )
        return " OR ".join(parts) if parts else "false"

    def rereads(self) -> bool:
        """Whether rows may wait for a watermark (:data:`MOVE_WAIT`): the batch reads them
        again with its own. Only while a move copies or is frozen without its switch
        marker: then a side's events beyond its source's watermark are not classified."""
        return any(p.state in ("copying", "frozen") for p in self.moves.progress.values())

    # --- step 5 ---------------------------------------------------------------------------

    def marker(self, r: Any, position: Position, host: Host) -> None:
        """One marker row (an event of the marker table: insert, update or snapshot read).
        One that does not fit the declared moves is a dead letter with the reason."""
        shard = _shard(r)
        if self.watermark.get(shard.source) is None or position > self.watermark[shard.source]:
            self.watermark[shard.source] = position
        if r["after"] is None:
            return  # a marker row deleted: the copy tool cleaning up
        try:
            row = json.loads(r["after"])
            if not isinstance(row, dict):
                raise MoveError(f"marker row of {shard} is no JSON object: {r['after']!r}")
            move_id = self.moves.marker(shard, row, position)
        except (ValueError, MoveError) as e:
            log.error("marker row of %s at %s refused: %s", shard, position, e)
            host.dead_control(as_dict(r), f"marker row refused: {e}")
            return
        if move_id is not None:
            log.info(
                "move %s: %s marker read on %s at %s (now %s)",
                move_id, row.get("phase"), shard, position, self.moves.state(move_id),
            )  # fmt: skip

    def uncertain(self, shard: ShardId, position: Position, sql: str) -> bool:
        """Whether a statement of ``shard`` at ``position`` cannot be classified yet: its
        side's marker is not read and its source's watermark is not past it (``to``'s
        switch marker: every statement of ``to``; ``from``'s freeze, while the move
        copies: a TRUNCATE, DROP or RENAME TABLE, deferred after the freeze)."""
        mark = self.watermark.get(shard.source)
        if mark is not None and position <= mark:
            return False
        for m in self.moves.moves_of(shard):
            p = self.moves.progress[m.id]
            if p.state in ("switched", "aborted"):
                continue
            if real_table(shard) == m.to and p.switched_at is None:
                return True
            if (
                real_table(shard) in m.sources
                and p.state == "copying"
                and shard.source not in p.frozen
                and event_kind(sql) == "table"
            ):
                return True
        return False

    def started(self, shard: ShardId) -> None:
        """An event of ``shard`` was read: a move whose ``to`` it is copies from now on."""
        for m in self.moves.moves_of(shard):
            if real_table(shard) == m.to and self.moves.progress[m.id].state == "declared":
                self.moves.progress[m.id].state = "copying"

    def take(self, r: dict[str, Any], position: Position, host: Host) -> bool:
        """A statement (``r``: the control event): True when a move took it (the job's
        coordinator must not see it now)."""
        shard = _shard(r)
        if self.moves.is_marker(shard):
            return True  # the marker table's own DDL: nothing downstream
        if not self.moves.moves_of(shard):
            renamed = self._renamed_from(shard, control_sql(r))
            if renamed is None:
                return False
            # Debezium names a RENAME TABLE event after the new name; the statement is
            # the moving table's (the same the memory engine's step names).
            r = {**as_dict(r), "db": renamed.db, "tbl": renamed.table}
            shard = renamed
        self.started(shard)
        behind = any(real_table(_shard(q)) == real_table(shard) for q in self.pending)
        if behind or self.uncertain(shard, position, control_sql(r)):
            log.info("%s's statement waits for its source's move markers: %s", shard, r["ddl"])
            self.pending.append(r)
            return True
        return self._classified(r, position, host)

    def _renamed_from(self, shard: ShardId, sql: str) -> ShardId | None:
        """The moving table a ``RENAME TABLE`` event of ``shard`` renames (its old name),
        if any."""
        if "rename" not in sql.lower() or event_kind(sql) != "table":
            return None
        from schemas.changes import RenameTable
        from schemas.ddl import parse_ddl

        for c in parse_ddl(sql):  # event_kind parsed it already
            if isinstance(c, RenameTable):
                old = ShardId(shard.source, c.old.db or shard.db, c.old.table)
                if self.moves.moves_of(old):
                    return old
        return None

    def _classified(self, r: dict[str, Any], position: Position, host: Host) -> bool:
        shard = _shard(r)
        sql = control_sql(r)
        c = self.moves.classify(shard, position, event_kind(sql))
        if c.move is None:
            return False
        self.moves.note(c)
        match c.action:
            case "record":
                self._record(c.move, r, position, host)
            case "queue":
                self.queued.setdefault(c.move, []).append(r)
            case "defer":
                self.deferred.setdefault(c.move, []).append(r)
            case "drop":
                log.info("move %s: %s's statement dropped (%s): %s", c.move, shard, c.reason, sql)
            case _:
                return False
        if c.action != "drop":
            log.info("move %s: %s's statement %s (%s): %s", c.move, shard, c.action, c.reason, sql)
        return True

    def _record(self, move_id: str, r: dict[str, Any], position: Position, host: Host) -> None:
        """A statement of ``to`` before its switch marker: the copy's schema, recorded in
        the move's own coordinator (compared with ``from``'s at the switch). One sent
        again (a connector restarted) is not taken twice; one the copy's coordinator
        cannot take is a dead letter, and the copy's schema stays as it was (a switch
        that then finds it different waits in ``conflict``: fix the copy or abort)."""
        copy, shard, sql = self.copies[move_id], _shard(r), control_sql(r)
        origin, channel = upstream_origin(r), f"{r['topic']}[{r['partition']}]"
        if copy.resent(shard, sql, origin, channel):
            log.warning("move %s: %s's statement taken already, sent again: %s", move_id,
                        shard, sql)  # fmt: skip
            return
        try:
            copy.on_ddl(shard, sql, position, origin, channel)
        except ShardMergeError as e:
            log.error("move %s: the copy's statement %r refused: %s", move_id, sql, e)
            host.dead_control(r, f"move {move_id}: the copy's statement refused: {e}")

    def settle(self, host: Host, planner: Planner) -> None:
        """After each control event: statements that waited for the markers and can be
        classified now, in order; an aborted move's deferred statements; then every
        switch whose preconditions hold."""
        waiting: set[ShardId] = set()
        still = []
        for r in self.pending:
            shard, position = _shard(r), position_of(r)
            if real_table(shard) in waiting or self.uncertain(shard, position, control_sql(r)):
                waiting.add(real_table(shard))
                still.append(r)
            elif not self._classified(r, position, host):
                host.replay_control(r, planner)
        self.pending = still
        for m in self.moves.moves.values():
            if self.moves.progress[m.id].state == "aborted" and m.id in self.deferred:
                target = self._target(m)
                for r in self.deferred.pop(m.id):
                    host.replay_control(r, planner)
                for s in m.sources:
                    host.release(Release(target, s, MOVE_BEHIND))
        self.try_switches(host, planner)

    def try_switches(self, host: Host, planner: Planner) -> None:
        """Every move whose switch marker was read switches once its preconditions hold
        (``planner``: the batch's row plan so far)."""
        for move_id in self.moves.pending_switches():
            m = self.moves.get(move_id)
            facts = switch_facts(self.moves, m, host.c, self.copies[m.id])
            unmet = self.moves.can_switch(move_id, facts)
            if any(real_table(_shard(r)) in (*m.sources, m.to) for r in self.pending):
                unmet.append(
                    f"move {m.id}: a statement of its tables waits for the marker "
                    "watermark of its source (heartbeat rows in the marker table move it)"
                )
            if unmet != self.unmet.get(move_id):
                for why in unmet:
                    log.warning("move %s: the switch waits: %s", move_id, why)
            self.unmet[move_id] = unmet
            if not unmet:
                self.switch(m, host, planner)

    def _target(self, m: Move) -> TargetId:
        target = self.router.target(m.to)
        if target is None:
            raise MoveError(f"move {m.id}: to {m.to} routes to no target")
        return target

    def switch(self, m: Move, host: Host, planner: Planner) -> None:
        target = self._target(m)
        to = self.copies[m.id].shard_state(m.to)
        assert to is not None  # can_switch checked that it exists
        p = self.moves.progress[m.id]
        log.info("move %s: switching %s to %s", m.id, ", ".join(map(str, m.sources)), m.to)
        for s in m.sources:
            host.discard_stashed(target, s, MOVE_KEEP)
        self.moves.switched(m.id, target)
        sources = [(s, p.frozen[s.source]) for s in m.sources]
        if m.keys is None:
            # The batch's rows of `from` up to its freeze keep the plan they have now (they
            # are written under `to`'s name: the Rename), whatever `from` is after it.
            segs = [seg for s, frozen in sources for seg in planner.cut([s], frozen)]
        else:
            segs = []  # a split's `from` stays a shard of the target
        decisions = host.c.switch_home(sources, m.to, to.schema, p.switched_at, m.keys)
        planner.close(segs, decisions)
        host.run_decisions(decisions)
        crash_point("after_switch")
        self.unmet.pop(m.id, None)
        del self.copies[m.id]
        host.release(Release(target, m.to, MOVE_QUEUE))
        for r in [*self.queued.pop(m.id, []), *self.deferred.pop(m.id, [])]:
            host.replay_control(r, planner)
        if m.keys is not None:
            for s in m.sources:
                host.release(Release(target, s, MOVE_BEHIND))

    def command(self, cmd: MoveCommand, host: Host) -> None:
        """``move switch ID``: the operator's freeze and switch positions, as if the marker
        rows were read there (the switch runs at step 5 once its preconditions hold).
        ``move abort ID``: ``from`` stays home; its rows kept since the freeze and those
        waiting for the watermark apply in order (its deferred statements at step 5:
        :meth:`settle`); ``to``'s queued and waiting ones are dropped, and its later ones
        too."""
        if cmd.action == "switch":
            assert cmd.switched is not None
            frozen = {s: binlog_position(at) for s, at in cmd.frozen}
            self.moves.positions(cmd.move, frozen, binlog_position(cmd.switched))
            log.warning("move %s: the operator set its freeze %s and switch %s",
                        cmd.move, frozen, cmd.switched)  # fmt: skip
            return
        m = self.moves.get(cmd.move)
        self.moves.abort(m.id)
        target = self._target(m)
        log.warning("move %s aborted by the operator: %s stays home", m.id, ", ".join(
            map(str, m.sources)))  # fmt: skip
        host.discard_stashed(target, m.to, MOVE_QUEUE)
        host.discard_stashed(target, m.to, MOVE_WAIT)
        self.queued.pop(m.id, None)
        self.unmet.pop(m.id, None)
        for s in m.sources:
            host.release(Release(target, s, MOVE_KEEP))
            host.release(Release(target, s, MOVE_WAIT))

    # --- the row plan ---------------------------------------------------------------------

    def plan(self, planner: Planner, c: Coordinator, renames: list[Rename]) -> None:
        """The planner's segments with the moves' fates: each segment of a moving shard
        cut at its side's marker, or at its source's watermark while the marker is not
        read (see the module docstring); a split's ``from`` segments after its freeze in
        two, the rows whose key moves and the others. ``renames``: the batch's shard
        renames (``RowWork.renames``), which the rows of an old side positioned before its
        freeze and read only after the switch (their topic lagged) join: they are written
        under ``to``'s name, as the switch re-homed their like."""
        for seg in planner.segments:
            self.started(seg.shard)  # `to`'s first rows
        planner.moved = self.moved_sql(c)
        out: list[Segment] = []
        for seg in planner.segments:
            out += self._late(seg, c, renames) or self._segments(seg)
        planner.segments = out

    def _late(self, seg: Segment, c: Coordinator, renames: list[Rename]) -> list[Segment]:
        """Rows of a switched move's ``from`` read after the batch of its switch: those
        before the freeze follow ``to`` (its plan, and a rename of the batch's rows);
        those after it are dropped (a split's kept keys keep their own plan)."""
        for m in self.moves.moves.values():
            p = self.moves.progress[m.id]
            if seg.shard not in m.sources or p.state != "switched":
                continue
            if any(r.old == seg.shard and r.new == m.to for r in renames):
                return []  # the batch of the switch: its Rename and cut hold already
            target = self._target(m)
            frozen = p.frozen[seg.shard.source]
            home = c.route_row(m.to)
            renames.append(Rename(target, seg.shard, m.to, home.version, position=frozen,
                                  keys=m.keys))  # fmt: skip
            log.warning(
                "move %s: rows of %s before its freeze read after the switch: written as %s's",
                m.id, seg.shard, m.to,
            )  # fmt: skip
            if m.keys is not None:
                return self._split(seg, m, target)
            after = RowRoute("drop", target, reason=f"move {m.id}: after the freeze")
            return _cut(seg, frozen, home, after)
        return []

    def moved_sql(self, c: Coordinator) -> str:
        """Whether a row's key moves, as SQL over a row event: each split move's ``keys``
        over the images of its ``from`` shard (read with the shard's column types)."""
        cases = []
        for m in self.moves.moves.values():
            if m.keys is None or self.moves.progress[m.id].state in ("declared", "aborted"):
                continue
            for s in m.sources:
                st = c.shard_state(s)
                if st is None:
                    continue
                cases.append(
                    f"WHEN source = {string(s.source)} AND db = {string(s.db)} "
                    f"AND tbl = {string(s.table)} THEN {image_predicate(m.keys, st.schema)}"
                )
        return f"CASE {' '.join(cases)} END" if cases else NO_MOVED

    def _split(self, seg: Segment, m: Move, target: TargetId | None) -> list[Segment]:
        """A split's ``from`` segment: the rows whose key moves keep their plan up to the
        freeze, then wait (or, after the switch, are dropped); the others keep theirs,
        but wait behind a TRUNCATE/DROP/RENAME the move deferred."""
        p = self.moves.progress[m.id]
        frozen = p.frozen[seg.shard.source]
        moved = dataclasses.replace(seg, moved=True)
        stays = dataclasses.replace(seg, moved=False)
        later = (
            RowRoute("drop", target, reason=f"move {m.id}: after the freeze")
            if p.state == "switched"
            else RowRoute("hold", target, MOVE_KEEP, reason=f"move {m.id}: kept")
        )
        out = _cut(moved, frozen, None, later)
        behind = [position_of(r) for r in self.deferred.get(m.id, []) if _shard(r) == seg.shard]
        if behind:
            why = f"move {m.id}: behind a statement deferred to the switch"
            out += _cut(stays, behind[0], None, RowRoute("hold", target, MOVE_BEHIND, reason=why))
        else:
            out.append(stays)
        return out

    def _segments(self, seg: Segment) -> list[Segment]:
        for m in self.moves.moves.values():
            p = self.moves.progress[m.id]
            target = self.router.target(m.to)
            wait = RowRoute("hold", target, MOVE_WAIT, reason=f"move {m.id}: beyond the watermark")
            mark = self.watermark.get(seg.shard.source)
            if seg.shard == m.to:
                if p.state == "aborted":
                    return [_with(seg, RowRoute("drop", target, reason=f"move {m.id} aborted"))]
                if p.switched_at is None:
                    # Up to the watermark, before the switch marker: the copy, never
                    # written; beyond it, not known yet.
                    shadow = RowRoute("drop", target, reason=f"move {m.id}: the copy")
                    if mark is None:
                        return [_with(seg, wait)]
                    return _cut(seg, mark, shadow, wait)
                later = (
                    seg.plan.route
                    if p.state == "switched"
                    else RowRoute("hold", target, MOVE_QUEUE, reason=f"move {m.id}: queued")
                )
                return _cut(seg, p.switched_at, RowRoute("drop", target), later)
            if seg.shard in m.sources and p.state != "aborted":
                frozen = p.frozen.get(seg.shard.source)
                if frozen is None and p.state == "copying":
                    # Beyond the watermark the freeze may have come already: not known yet.
                    return [_with(seg, wait)] if mark is None else _cut(seg, mark, None, wait)
                if frozen is None:
                    continue
                if m.keys is not None:
                    return self._split(seg, m, target)
                later = (
                    RowRoute("drop", target, reason=f"move {m.id}: after the freeze")
                    if p.state == "switched"
                    else RowRoute("hold", target, MOVE_KEEP, reason=f"move {m.id}: kept")
                )
                return _cut(seg, frozen, None, later)
        return [seg]

    # --- observing ------------------------------------------------------------------------

    def locks(self, locks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The lock views with each waiting switch's ``to`` shown as held."""
        return lock_views(locks, self.moves, self.unmet, self.router)


def _with(seg: Segment, route: RowRoute) -> Segment:
    return dataclasses.replace(seg, plan=RowPlan(route))


def _cut(seg: Segment, at: Position, before: RowRoute | None, after: RowRoute) -> list[Segment]:
    """``seg`` split at ``at``: its rows up to ``at`` take ``before`` (None: their own
    plan), those after it ``after`` (its own plan when it is the segment's route)."""
    out = []
    if seg.after is None or seg.after < at:
        upto = at if seg.upto is None or at < seg.upto else seg.upto
        low = dataclasses.replace(seg, upto=upto)
        out.append(low if before is None else _with(low, before))
    if seg.upto is None or at < seg.upto:
        after_at = at if seg.after is None or seg.after < at else seg.after
        high = dataclasses.replace(seg, after=after_at)
        out.append(high if after is seg.plan.route else _with(high, after))
    return out
