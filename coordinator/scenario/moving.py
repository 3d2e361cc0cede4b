"""Moves on the memory engine: the marker table, the classification of every event of a
moving shard, the downstream switch, and the copy tool's scenario steps (docs/moves.md).

The engine hands each event here first. A `to` side's statements before its ``switched``
marker go to a coordinator of its own (the copy's schema and online-DDL shadow tables are
recorded, not coordinated); `to`'s events after the marker and `from`'s table-level
statements after its freeze wait here, in order, for the switch; `from`'s events after the
freeze that are never applied are kept too, in case the move is aborted (then `from` stays
home and they apply as if no freeze had happened).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coordinator.ids import Position, ShardId
from coordinator.moves import (
    Classification,
    Move,
    MoveError,
    Moves,
    SwitchFacts,
    copy_coordinator,
    event_kind,
    lock_views,
    parse_move_command,
    switch_facts,
)
from coordinator.scenario.upstream import RowEvent, Upstream, UpstreamError
from coordinator.scenario.values import fill_value
from coordinator.state import restore, snapshot
from schemas.model import TableSchema, quote

if TYPE_CHECKING:
    from coordinator.scenario.memory import MemoryEngine

__all__ = ["CopyTool", "MoveDriver"]

# `n` counts the writes of a row: a heartbeat that updates its row changes it, so a real
# binlog has an event for it (an UPDATE that changes nothing has none).
MARKER_DDL = (
    "CREATE TABLE {name} (move_id VARCHAR(64) NOT NULL, phase VARCHAR(16) NOT NULL, "
    "n BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (move_id, phase))"
)


@dataclass(frozen=True)
class Held:
    """An event kept by a move: a row, or a statement (already run on the upstream)."""

    position: Position
    row: RowEvent | None = None
    shard: ShardId | None = None
    sql: str = ""
    behind: bool = False  # kept behind a deferred statement, not classified yet


class MoveDriver:
    def __init__(self, engine: MemoryEngine, moves: Moves) -> None:
        self.engine = engine
        self.moves = moves
        self.copies = {m.id: copy_coordinator(m) for m in moves.moves.values()}
        self.queued: dict[str, list[Held]] = defaultdict(list)  # `to` after its marker
        self.kept: dict[str, list[Held]] = defaultdict(list)  # `from` after its freeze
        self.unmet: dict[str, list[str]] = {}

    # --- events ----------------------------------------------------------------------

    def take_ddl(self, shard: ShardId, sql: str, position: Position) -> bool:
        """True when the move took the statement (the coordinator must not)."""
        if self.moves.is_marker(shard):
            return True  # the marker table's own DDL: nothing downstream
        c = self.moves.classify(shard, position, event_kind(sql))
        return self._take(c, Held(position, shard=shard, sql=sql))

    def take_row(self, event: RowEvent, position: Position) -> bool:
        """True when the move took the row (the engine must not write it)."""
        if self.moves.is_marker(event.shard):
            if event.after is not None:
                self.moves.marker(event.shard, event.after, position)
            return True
        c = self.moves.classify(event.shard, position, "row", event.after or event.before)
        return self._take(c, Held(position, row=event))

    def register(self, shard: ShardId, schema: TableSchema) -> bool:
        """A table of the file's ``shards:``: True when it is a move's marker table or
        ``to`` (its copy exists before the move), which the target's lock must not see."""
        if self.moves.is_marker(shard):
            return True
        for m in self.moves.moves.values():
            if m.to == shard:
                self.copies[m.id].register(shard, schema, 0)
                return True
        return False

    def _take(self, c: Classification, held: Held) -> bool:
        if c.move is None:
            return False
        from_kept = self.kept.get(c.move)
        if c.side == "from" and from_kept and any(h.sql for h in from_kept):
            # Behind a deferred TRUNCATE/DROP/RENAME of `from`: keep the shard's order.
            from_kept.append(Held(held.position, held.row, held.shard, held.sql, behind=True))
            return True
        self.moves.note(c)
        switched = self.moves.state(c.move) == "switched"
        match c.action:
            case "apply":
                return False
            case "drop" if switched:
                pass
            case "drop" | "defer":
                self.kept[c.move].append(held)
            case "record":
                assert held.shard is not None
                self.copies[c.move].on_ddl(held.shard, held.sql, held.position)
            case "queue":
                self.queued[c.move].append(held)
            case "shadow":
                pass
        return True

    def replay(self, held: Held) -> None:
        if held.row is not None:
            self.engine.row(held.row, held.position)
        else:
            assert held.shard is not None
            self.engine.ddl(held.shard, held.sql, held.position)

    # --- the switch ------------------------------------------------------------------

    def facts(self, m: Move) -> SwitchFacts:
        return switch_facts(self.moves, m, self.engine.coordinator, self.copies[m.id])

    def try_switches(self, position: Position) -> None:
        for move_id in self.moves.pending_switches():
            m = self.moves.get(move_id)
            unmet = self.moves.can_switch(move_id, self.facts(m))
            self.unmet[move_id] = unmet
            if not unmet:
                self.switch(m, position)

    def switch(self, m: Move, position: Position) -> None:
        e = self.engine
        target = e.router.target(m.to)
        if target is None:
            raise MoveError(f"move {m.id}: to {m.to} routes to no target")
        to = self.copies[m.id].shard_state(m.to)
        assert to is not None  # can_switch checked it exists
        table = e.tables[target]
        extract = e.router.extract(target)
        for rehome in self.moves.switched(m.id, target):
            table.rehome(extract.values(rehome.old), extract.values(rehome.new), m.moves_row)
        e.execute(e.coordinator.register(m.to, to.schema, position))
        if m.pattern != "split":
            for s in m.sources:  # `from` leaves the lock; its rows stay, re-homed
                e.execute(e.coordinator.on_ddl(s, f"DROP TABLE {quote(s.table)}", position))
        self.unmet.pop(m.id, None)
        del self.copies[m.id]
        for held in self.queued.pop(m.id, []):
            self.replay(held)
        # `from` after the freeze: its moved keys' rows are never applied; its table-level
        # statements (and what came behind them) are processed now, after the switch.
        for held in self.kept.pop(m.id, []):
            if held.sql or held.behind:
                self.replay(held)

    def abort(self, move_id: str) -> None:
        m = self.moves.get(move_id)
        self.moves.abort(m.id)
        self.queued.pop(m.id, None)
        self.unmet.pop(m.id, None)
        for held in self.kept.pop(m.id, []):  # `from` stays home: as if never frozen
            self.replay(held)

    def command(self, text: str) -> None:
        """``move abort ID``: the operator's words (as ``shardmerge move abort`` takes).
        ``move switch`` names binlog positions, which this engine's events do not have."""
        cmd = parse_move_command(text)
        if cmd.action != "abort":
            raise MoveError(f"{text!r}: the memory engine has no binlog positions; use markers")
        self.abort(cmd.move)

    # --- the copy tool ---------------------------------------------------------------

    def copy(self, move_id: str, position: Position) -> None:
        self.tool(position).copy(self.moves.get(move_id))

    def marker(self, move_id: str, phase: str, position: Position) -> None:
        self.tool(position).marker(self.moves.get(move_id), phase)

    def tool(self, position: Position) -> CopyTool:
        e = self.engine
        return CopyTool(
            e.upstream,
            lambda shard, sql: e.ddl(shard, sql, position),
            lambda event: e.row(event, position),
            heartbeats=e.scenario.heartbeats,
        )

    # --- observing -------------------------------------------------------------------

    def locks(self, locks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The lock views with each waiting switch's ``to`` shown as held."""
        return lock_views(locks, self.moves, self.unmet, self.engine.router)

    # --- state -----------------------------------------------------------------------

    def roundtrip(self) -> None:
        """Through JSON, as the streaming job would save it; raises if anything changed."""
        import json

        saved = json.loads(json.dumps(self.moves.to_json()))
        again = Moves(self.moves.moves.values())
        again.restore(saved)
        if again.to_json() != self.moves.to_json():
            raise AssertionError("move state changed through a JSON round trip")
        self.moves.progress = again.progress
        for move_id, copy in list(self.copies.items()):
            state = snapshot(copy)
            restored = restore(json.loads(json.dumps(state)), copy.router, {}, copy.default)
            if snapshot(restored) != state:
                raise AssertionError(f"move {move_id}: copy state changed through JSON")
            self.copies[move_id] = restored


class CopyTool:
    """The copy tool of the scenario steps (``copy``, ``freeze``, ``switch``), for any
    engine: it changes ``upstream`` and hands each statement to ``sql`` (after the
    upstream ran it) and each row change to ``row``. ``prefix`` goes before the move id
    in the marker rows (the spark engine's files in a shared job, see devkit)."""

    def __init__(
        self,
        upstream: Upstream,
        sql: Callable[[ShardId, str], None],
        row: Callable[[RowEvent], None],
        prefix: str = "",
        heartbeats: bool = True,
    ) -> None:
        self.upstream = upstream
        self.sql = sql
        self.row = row
        self.prefix = prefix
        self.heartbeats = heartbeats

    def copy(self, m: Move) -> None:
        """Bring ``to`` to ``from``'s current rows of the moved keys: the first copy
        inserts them (after ``to``'s CREATE TABLE when it does not exist), a later one
        catches up (inserts, updates, deletes)."""
        up = self.upstream
        if m.to not in up.tables:
            schema = up.table(m.sources[0]).schema
            sql = schema.to_sql(m.to.table)
            up.ddl(m.to, sql)
            self.sql(m.to, sql)
        to = up.table(m.to)
        want: dict[tuple[Any, ...], dict[str, Any]] = {}
        came: dict[tuple[Any, ...], ShardId] = {}
        for s in m.sources:
            for row in list(up.table(s).rows.values()):
                if not m.moves_row(row):
                    continue
                lowered = {k.lower(): v for k, v in row.items()}
                image = {
                    c.name: lowered[c.key] if c.key in lowered else fill_value(c)
                    for c in to.schema.columns
                }
                key = to.key_of(image)
                if key in want:
                    raise UpstreamError(
                        f"copy {m.id}: key {key} is in both {came[key]} and {s}; "
                        f"{m.to} cannot hold both"
                    )
                want[key], came[key] = image, s
        pk = to.schema.primary_key or to.schema.column_names()
        for key, image in want.items():
            have = to.rows.get(key)
            if have is None:
                self.row(up.insert(m.to, image))
            elif have != image:
                self.row(up.update(m.to, dict(zip(pk, key, strict=True)), image))
        for key in [k for k in to.rows if k not in want]:
            self.row(up.delete(m.to, dict(zip(pk, key, strict=True))))
        # As a copy tool writes them while a move runs (every second, say): a heartbeat
        # row on each side's source moves the job's marker watermark past the copy.
        if self.heartbeats:
            self.marker(m, "heartbeat")

    def marker(self, m: Move, phase: str) -> None:
        """``frozen``: a marker row on every ``from`` source; ``switched``: one on ``to``'s
        source; ``heartbeat``: one on every side's source (each in its side's database;
        the marker table created when missing)."""
        up = self.upstream
        sides = {"frozen": list(m.sources), "switched": [m.to]}.get(phase, [*m.sources, m.to])
        places = {s.source: s for s in reversed(sides)}  # one per source: its first shard
        for s in sorted(places.values(), key=lambda s: sides.index(s)):
            marker = s.with_table(m.marker)
            if marker not in up.tables:
                sql = MARKER_DDL.format(name=quote(m.marker))
                up.ddl(marker, sql)
                self.sql(marker, sql)
            key = {"move_id": self.prefix + m.id, "phase": phase}
            have = up.table(marker).rows.get(up.table(marker).key_of(key))
            if have is not None:
                self.row(up.update(marker, key, {"n": int(have.get("n") or 0) + 1}))
            else:
                self.row(up.insert(marker, {**key, "n": 1}))
