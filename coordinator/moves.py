"""Upstream resharding: a shard table moves to another database or server, is split by a
key predicate, or several shards are merged into one (docs/moves.md).

Pure, like the rest of the core: a :class:`Moves` book folds marker rows, classifies every
event of a moving shard (its side, its position against the side's marker, whether its
key moves) and says which preconditions of the downstream switch are unmet; engines act.

A move has a ``from`` side (one shard, or several for a merge), a ``to`` side (one shard)
and, for a split, a ``keys`` predicate over the key columns (the rows it is true for
move, the others stay home at ``from``). Both sides' sources carry a small *marker table*
(``shardmerge_move`` by default) into which the copy tool or the operator writes
``(move_id, phase)`` rows: ``frozen`` on each ``from`` source once the application stopped
writing the moved keys there (position ``p_F``), ``switched`` on the ``to`` source once the
copy caught up, before the first application write (position ``p_S``).

States: ``declared`` -> ``copying`` (the first event of ``to``) -> ``frozen`` (every
``from`` source's marker folded) -> ``switching`` (``to``'s marker folded; the switch waits
for its preconditions) -> ``switched`` (the downstream switch ran: the moved rows were
re-homed once); ``aborted`` from any state before ``switched`` (``from`` stays home).
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from coordinator.ids import Position, ShardId, TargetId
from coordinator.routing import Router
from schemas.lattice import diff
from schemas.model import ColumnType, TableSchema
from schemas.render import alter_sql
from shardmerge.errors import ShardMergeError

if TYPE_CHECKING:
    from coordinator.coordinator import Coordinator

__all__ = [
    "DEFAULT_MARKER",
    "Classification",
    "KeyPredicate",
    "Kind",
    "Move",
    "MoveCommand",
    "MoveError",
    "MoveSettings",
    "Moves",
    "Rehome",
    "SwitchFacts",
    "check_moves",
    "copy_coordinator",
    "event_kind",
    "kept_statement",
    "lock_views",
    "parse_move_command",
    "real_table",
    "switch_facts",
    "table_kind",
]

DEFAULT_MARKER = "shardmerge_move"
MoveState = Literal["declared", "copying", "frozen", "switching", "switched", "aborted"]
Side = Literal["from", "to", "none"]
EventKind = Literal["row", "ddl", "table"]  # table: TRUNCATE / DROP / RENAME TABLE
# apply: as any shard's event; drop: never applied; defer: a `from` table-level statement
# after the freeze, processed after the downstream switch; shadow: a `to` row before the
# switch marker (the copy, the catch-up), never applied; record: a `to` DDL before the
# switch marker, recorded (compared at the switch), not coordinated; queue: a `to` event
# after the switch marker, held until the downstream switch, then applied in order.
Action = Literal["apply", "drop", "defer", "shadow", "record", "queue"]
PHASES = ("frozen", "switched", "heartbeat")


class MoveError(ShardMergeError):
    """A move is declared wrongly, or a marker row or an operator command does not fit the
    declared moves; the message names the move, the shard and the field."""


def real_table(shard: ShardId) -> ShardId:
    """The table an online-DDL shadow table is of; any other table itself."""
    return shard.with_table(Router.shadow_origin(shard.table) or shard.table)


def copy_coordinator(m: Move) -> Coordinator:
    """A coordinator of the move's own for ``to`` before its switch: it records the copy's
    schema and online-DDL shadow tables (compared at the switch) and coordinates nothing."""
    from coordinator.coordinator import Coordinator, TargetConfig
    from coordinator.routing import Route

    route = Route(TargetId("_move", m.id), m.to.source, m.to.db, m.to.table)
    return Coordinator(Router((route,)), default=TargetConfig("pessimistic"))


def kept_statement(r: Mapping[str, Any]) -> str:
    """A control event a move keeps (its columns, as the state file saves them), as the
    operator reads it: ``source.db.table: statement``."""
    sql = r["ddl"] if r["op"] == "ddl" else "TRUNCATE"
    return f"{r['source']}.{r['db']}.{r['tbl']}: {sql}"


def event_kind(sql: str) -> EventKind:
    """A statement's kind for :meth:`Moves.classify`: ``table`` for a TRUNCATE, DROP or
    RENAME TABLE (an online-DDL cut-over's RENAME is a schema change of the real table:
    ``ddl``), ``ddl`` for everything else, a statement that does not parse included."""
    # Imported here: the operator CLI reads stored move commands without sqlglot.
    from schemas.changes import DropTable, RenameTable, TruncateTable
    from schemas.ddl import parse_ddl
    from schemas.errors import DDLError

    try:
        changes = parse_ddl(sql)
    except DDLError:
        return "ddl"
    if any(isinstance(c, RenameTable) and Router.shadow_origin(c.old.table) for c in changes):
        return "ddl"
    table_level = (TruncateTable, DropTable, RenameTable)
    return "table" if any(isinstance(c, table_level) for c in changes) else "ddl"


MOVE_USAGE = (
    "move abort MOVE_ID, or move switch MOVE_ID --frozen SOURCE=FILE:POS [--frozen ...] "
    "--switched FILE:POS"
)
# A binlog position an operator gives: (file, position).
BinlogPosition = tuple[str, int]


def binlog_position(at: BinlogPosition) -> Position:
    """The job's position of an operator's ``FILE:POS`` (``SHOW MASTER STATUS`` once the
    writes stopped): after every event that starts before it, before every event at or
    after it (streaming.source.control.position_of: file, position, row, time, offset)."""
    return [at[0], at[1], -1, -1, -1]


@dataclass(frozen=True)
class MoveCommand:
    """An operator's command about a move, as a value (stored like an unlock command):
    ``move abort ID`` (``from`` stays home), or ``move switch ID`` with the binlog
    positions of the freeze on each ``from`` source and of the switch on ``to``'s (for a
    copy tool that cannot write the marker rows; docs/moves.md)."""

    action: Literal["abort", "switch"]
    move: str
    frozen: tuple[tuple[str, BinlogPosition], ...] = ()
    switched: BinlogPosition | None = None

    def to_json(self) -> dict[str, Any]:
        return {"move": self.move, "action": self.action, "words": self.words()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MoveCommand:
        return parse_move_command(str(data.get("words", "")))

    def words(self) -> str:
        text = f"move {self.action} {self.move}"
        text += "".join(f" --frozen {s}={f}:{p}" for s, (f, p) in self.frozen)
        if self.switched is not None:
            text += f" --switched {self.switched[0]}:{self.switched[1]}"
        return text


def _binlog(text: str) -> BinlogPosition:
    file, sep, pos = text.rpartition(":")
    if not sep or not file or not pos.isdigit():
        raise MoveError(f"{text!r} is no binlog position FILE:POS (e.g. mysql-bin.000003:1234)")
    return file, int(pos)


def parse_move_command(text: str) -> MoveCommand:
    """``move abort ID`` or ``move switch ID --frozen SOURCE=FILE:POS ... --switched
    FILE:POS`` (as typed, or in a scenario's ``operator`` step)."""
    words = text.split()
    if len(words) < 3 or words[0] != "move" or words[1] not in ("abort", "switch"):
        raise MoveError(f"unknown move command {text!r}; expected {MOVE_USAGE}")
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", words[2]):
        raise MoveError(f"{words[2]!r} is no move id (letters, digits, _ and -, up to 64)")
    if words[1] == "abort":
        if len(words) != 3:
            raise MoveError(f"move abort takes the move's id only; expected {MOVE_USAGE}")
        return MoveCommand("abort", words[2])
    frozen: dict[str, BinlogPosition] = {}
    switched: BinlogPosition | None = None
    rest = words[3:]
    while rest:
        flag, value, rest = rest[0], (rest[1] if len(rest) > 1 else ""), rest[2:]
        if flag == "--frozen" and "=" in value:
            source, _, at = value.partition("=")
            if source in frozen:
                raise MoveError(f"--frozen names source {source!r} twice")
            frozen[source] = _binlog(at)
        elif flag == "--switched" and value and switched is None:
            switched = _binlog(value)
        else:
            raise MoveError(f"move switch: unexpected {flag!r}; expected {MOVE_USAGE}")
    if not frozen or switched is None:
        raise MoveError(f"move switch needs --frozen per from source and --switched: {MOVE_USAGE}")
    return MoveCommand("switch", words[2], tuple(sorted(frozen.items())), switched)


class Kind(enum.Enum):
    """:class:`~coordinator.routing.TableKind` plus the marker table."""

    SHARD = "shard"
    SHADOW = "shadow"
    TRASH = "trash"
    UNROUTED = "unrouted"
    MARKER = "marker"  # a move's marker table: rows are control events, routed nowhere


class KeyPredicate:
    """One boolean SQL expression over key columns (``MOD(id, 2) = 1``), evaluated with
    sqlglot's Python executor: the parser the rest of the project uses."""

    def __init__(self, text: str) -> None:
        # Imported here: reading the settings of a job without moves (the operator CLI)
        # does not load sqlglot's executor.
        import sqlglot
        from sqlglot import exp
        from sqlglot.errors import ParseError

        try:
            parsed = sqlglot.parse_one(text, read="mysql")
        except ParseError as e:
            raise ValueError(f"keys {text!r} is not an SQL expression: {e}") from e
        if not isinstance(parsed, exp.Predicate | exp.Connector | exp.Not | exp.Paren):
            raise ValueError(
                f"keys {text!r} must be one boolean expression over key columns, "
                "e.g. 'MOD(id, 2) = 1'"
            )
        self.text = text
        self.expression = parsed
        self.columns = tuple(sorted({c.name.lower() for c in parsed.find_all(exp.Column)}))
        if not self.columns:
            raise ValueError(f"keys {text!r} names no column")
        self._query = exp.select("*").from_("t").where(parsed.copy())
        self._seen: dict[tuple[Any, ...], bool] = {}

    def __call__(self, row: Mapping[str, Any]) -> bool:
        lowered = {k.lower(): v for k, v in row.items()}
        missing = [c for c in self.columns if c not in lowered]
        if missing:
            raise MoveError(f"keys {self.text!r}: the row has no column {', '.join(missing)}")
        key = tuple(lowered[c] for c in self.columns)
        if key not in self._seen:
            from sqlglot.executor import execute

            table = [dict(zip(self.columns, key, strict=True))]
            self._seen[key] = bool(execute(self._query, tables={"t": table}).rows)
        return self._seen[key]


class MoveSettings(BaseModel):
    """One declared move, as written under ``moves:`` in the settings and scenario files."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    id: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="the move's id (move_id)")
    from_: list[str] = Field(
        alias="from",
        min_length=1,
        description="the shard(s) moving, source.db.table; several: a merge into `to`",
    )
    to: str = Field(description="the shard that becomes home, source.db.table")
    keys: str | None = Field(
        None,
        description="a split: a boolean SQL expression over the key columns; the rows it "
        "is true for move, the others stay at `from`; left out: every key moves",
    )
    marker: str = Field(
        DEFAULT_MARKER,
        pattern=r"^[A-Za-z0-9_]{1,64}$",
        description="the marker table on both sides' sources (in each side's database)",
    )

    @field_validator("from_", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("from_")
    @classmethod
    def _shards(cls, value: list[str]) -> list[str]:
        for text in value:
            ShardId.parse(text)
        if len(set(value)) != len(value):
            raise ValueError(f"a shard is named twice in {value}")
        return value

    @field_validator("to")
    @classmethod
    def _shard(cls, value: str) -> str:
        ShardId.parse(value)
        return value

    @field_validator("keys")
    @classmethod
    def _keys(cls, value: str | None) -> str | None:
        if value is not None:
            KeyPredicate(value)
        return value

    def move(self) -> Move:
        return Move(
            self.id,
            tuple(ShardId.parse(s) for s in self.from_),
            ShardId.parse(self.to),
            self.keys,
            self.marker,
        )


@dataclass(frozen=True)
class Move:
    id: str
    sources: tuple[ShardId, ...]  # the `from` side
    to: ShardId
    keys: str | None = None
    marker: str = DEFAULT_MARKER

    @property
    def pattern(self) -> str:
        if len(self.sources) > 1:
            return "merge"
        return "split" if self.keys else "move"

    @cached_property
    def predicate(self) -> KeyPredicate | None:
        return KeyPredicate(self.keys) if self.keys else None

    def moves_row(self, row: Mapping[str, Any] | None) -> bool:
        """Does this row's key move (every key without a ``keys`` predicate)?"""
        predicate = self.predicate
        return predicate is None or (row is not None and predicate(row))


def _comparable(a: TableSchema, b: TableSchema) -> tuple[TableSchema, TableSchema]:
    """``a`` and ``b`` without the charsets and collations one of them does not state: a
    table read from a snapshot states them (``SHOW CREATE TABLE``), the same table made by
    a ``CREATE TABLE`` that left them to the server's defaults does not, and the job cannot
    know those defaults. What both state is compared."""

    def unstated(t: ColumnType, other: ColumnType | None) -> bool:
        return other is None or t.charset is None or other.charset is None

    def strip(s: TableSchema, other: TableSchema) -> TableSchema:
        columns = tuple(
            dataclasses.replace(c, type=dataclasses.replace(c.type, charset=None, collation=None))
            if unstated(c.type, (o.type if (o := other.column(c.name)) else None))
            else c
            for c in s.columns
        )
        table = s.charset is None or other.charset is None
        return dataclasses.replace(
            s,
            columns=columns,
            charset=None if table else s.charset,
            collation=None if table else s.collation,
        )

    return strip(a, b), strip(b, a)


def check_moves(moves: Sequence[Move], router: Router | None = None) -> list[str]:
    """What is wrong with these declared moves together, each naming ``moves[i].field``."""
    problems: list[str] = []
    ids: dict[str, int] = {}
    to_of: dict[ShardId, int] = {}
    from_of: dict[ShardId, list[int]] = {}
    for i, m in enumerate(moves):
        if m.id in ids:
            problems.append(f"moves[{i}].id: {m.id!r} is also moves[{ids[m.id]}]'s")
        ids.setdefault(m.id, i)
        if m.to in m.sources:
            problems.append(f"moves[{i}].to: {m.to} is also in its from")
        if m.to in to_of:
            problems.append(f"moves[{i}].to: {m.to} is also moves[{to_of[m.to]}]'s to")
        to_of.setdefault(m.to, i)
        for s in m.sources:
            from_of.setdefault(s, []).append(i)
        if router is not None:
            target = router.target(m.to)
            if target is None:
                problems.append(f"moves[{i}].to: {m.to} routes to no target (see routes)")
            for s in m.sources:
                if router.target(s) != target:
                    problems.append(
                        f"moves[{i}].from: {s} routes to {router.target(s)}, "
                        f"{m.to} to {target}: a move stays within one target"
                    )
    for i, m in enumerate(moves):
        for s in m.sources:
            if s in to_of:
                problems.append(f"moves[{i}].from: {s} is moves[{to_of[s]}]'s to")
            others = from_of[s]
            if len(others) > 1 and any(moves[j].keys is None for j in others):
                problems.append(
                    f"moves[{i}].from: {s} is in moves {others}; a shard is in several "
                    "moves only when each has keys (a split)"
                )
    return sorted(set(problems), key=problems.index)


@dataclass(frozen=True)
class Classification:
    """What one event of a moving shard is: its ``side``, whether it is after its side's
    marker (``p_F`` for ``from``, ``p_S`` for ``to``), whether its key moves (rows only),
    and what to do with it."""

    move: str | None
    side: Side
    after_marker: bool
    moved: bool | None
    action: Action
    reason: str = ""


NOT_MOVING = Classification(None, "none", False, None, "apply")


@dataclass(frozen=True)
class SwitchFacts:
    """What the engine knows at a switch attempt: the ``from`` shards held at a position
    before their freeze (with that position), the open online-DDL shadow tables of either
    side, and the sides' schemas now (``None``: the table does not exist)."""

    held: Mapping[ShardId, Position] = field(default_factory=dict)
    migrations: Sequence[ShardId] = ()
    schemas: Mapping[ShardId, TableSchema | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Rehome:
    """The downstream switch of a move: rows homed at ``old`` whose key moves take
    ``new``'s extract values (one commit); nothing to rewrite without extract columns."""

    target: TargetId
    move: str
    old: ShardId
    new: ShardId
    keys: str | None


@dataclass
class MoveProgress:
    state: MoveState = "declared"
    frozen: dict[str, Position] = field(default_factory=dict)  # from source -> p_F
    switched_at: Position = None  # p_S
    dropped: int = 0  # `from` events after the freeze never applied
    shadow: int = 0  # `to` rows before the switch marker never applied


def table_kind(router: Router, moves: Moves, shard: ShardId) -> Kind:
    """The router's kind, or :attr:`Kind.MARKER` for a move's marker table."""
    if moves.is_marker(shard):
        return Kind.MARKER
    return Kind(router.kind(shard).value)


class Moves:
    """Every declared move and its progress."""

    def __init__(self, moves: Iterable[Move] = ()) -> None:
        self.moves = {m.id: m for m in moves}
        problems = check_moves(list(self.moves.values()))
        if problems:
            raise MoveError("; ".join(problems))
        self.progress = {m: MoveProgress() for m in self.moves}

    def __bool__(self) -> bool:
        return bool(self.moves)

    def get(self, move_id: str) -> Move:
        m = self.moves.get(move_id)
        if m is None:
            raise MoveError(
                f"no move {move_id!r} is declared (declared: {', '.join(self.moves) or 'none'})"
            )
        return m

    def state(self, move_id: str) -> MoveState:
        return self.progress[self.get(move_id).id].state

    # --- the marker table -------------------------------------------------------------

    def is_marker(self, shard: ShardId) -> bool:
        return any(
            shard.table == m.marker and shard.source in {s.source for s in (*m.sources, m.to)}
            for m in self.moves.values()
        )

    def marker(self, shard: ShardId, row: Mapping[str, Any], position: Position) -> str | None:
        """Fold one marker row (an insert or update image); the move it changed, if any."""
        values = {k.lower(): v for k, v in row.items()}
        move_id, phase = values.get("move_id"), values.get("phase")
        if move_id is None or phase is None:
            raise MoveError(f"marker row of {shard} has no move_id or phase: {dict(row)}")
        m = self.get(str(move_id))
        if phase not in PHASES:
            raise MoveError(
                f"marker row of {shard}: move {m.id} phase {phase!r} is not one of {PHASES}"
            )
        p = self.progress[m.id]
        if phase == "heartbeat" or p.state in ("switched", "aborted"):
            return None
        if phase == "frozen":
            sources = {s.source for s in m.sources}
            if shard.source not in sources:
                raise MoveError(
                    f"move {m.id}: 'frozen' marker on source {shard.source}, which holds none "
                    f"of its from shards ({', '.join(map(str, m.sources))})"
                )
            p.frozen.setdefault(shard.source, position)
            if set(p.frozen) == sources and p.state in ("declared", "copying"):
                p.state = "frozen"
            return m.id
        if shard.source != m.to.source:
            raise MoveError(
                f"move {m.id}: 'switched' marker on source {shard.source}, but its to "
                f"{m.to} is on source {m.to.source}"
            )
        if p.state != "frozen":
            raise MoveError(
                f"move {m.id}: 'switched' marker on {m.to.source} before every from source "
                f"wrote 'frozen' (frozen: {', '.join(sorted(p.frozen)) or 'none'}): the copy "
                "tool must freeze the old side first"
            )
        p.switched_at = position
        p.state = "switching"
        return m.id

    # --- classification ---------------------------------------------------------------

    def moves_of(self, shard: ShardId) -> list[Move]:
        """The moves ``shard`` takes part in (``to`` or ``from``, shadow tables included)."""
        real = real_table(shard)
        return [m for m in self.moves.values() if real == m.to or real in m.sources]

    def classify(
        self,
        shard: ShardId,
        position: Position,
        kind: EventKind,
        row: Mapping[str, Any] | None = None,
    ) -> Classification:
        """What to do with one event of ``shard`` at ``position`` (positions are compared
        within one source: the markers' own stream). Changes nothing: the engine reports
        what it did with :meth:`note`."""
        involved = self.moves_of(shard)
        if not involved:
            return NOT_MOVING
        real = real_table(shard)
        to_side = [m for m in involved if m.to == real]
        if to_side:
            return self._to(to_side[0], position, kind)
        return self._from(real, involved, position, kind, row)

    def _to(self, m: Move, position: Position, kind: EventKind) -> Classification:
        p = self.progress[m.id]
        if p.state == "aborted":
            return Classification(m.id, "to", False, None, "drop", f"move {m.id} was aborted")
        if p.state == "switched":
            return Classification(m.id, "to", True, None, "apply")
        if p.switched_at is None or position <= p.switched_at:
            if kind != "row":
                return Classification(m.id, "to", False, None, "record", "before the switch")
            return Classification(m.id, "to", False, None, "shadow", "the copy, not applied")
        return Classification(m.id, "to", True, None, "queue", "waiting for the switch")

    def _from(
        self,
        shard: ShardId,
        involved: list[Move],
        position: Position,
        kind: EventKind,
        row: Mapping[str, Any] | None,
    ) -> Classification:
        live = [m for m in involved if self.progress[m.id].state != "aborted"]
        frozen = [
            m
            for m in live
            if (at := self.progress[m.id].frozen.get(shard.source)) is not None and position > at
        ]
        if not frozen:
            mid = involved[0].id
            return Classification(mid, "from", False, None, "apply")
        if kind == "row":
            m = next((m for m in frozen if m.moves_row(row)), None)
            if m is None:
                return Classification(frozen[0].id, "from", True, False, "apply", "key stays")
            why = f"key moved to {m.to} by move {m.id}; after the freeze"
            return Classification(m.id, "from", True, True, "drop", why)
        pending = [m for m in frozen if self.progress[m.id].state != "switched"]
        if kind == "table":
            if pending:
                why = f"after the freeze: processed after move {pending[0].id}'s switch"
                return Classification(pending[0].id, "from", True, None, "defer", why)
            return Classification(frozen[0].id, "from", True, None, "apply")
        # A schema change: `from` is a shard of the lock until the switch (the other shards
        # may wait for it), and the copy must have the change when the switch compares.
        return Classification(frozen[0].id, "from", True, None, "apply", "in the lock")

    def note(self, c: Classification) -> None:
        """The engine took an event classified ``c``: count it; ``to``'s first event
        starts the copy."""
        if c.move is None:
            return
        p = self.progress[c.move]
        if c.side == "to" and p.state == "declared":
            p.state = "copying"
        if c.action == "drop" and c.side == "from":
            p.dropped += 1
        elif c.action == "shadow":
            p.shadow += 1

    # --- the switch -------------------------------------------------------------------

    def can_switch(self, move_id: str, facts: SwitchFacts) -> list[str]:
        """The unmet preconditions of the downstream switch of ``move_id``, each a
        sentence saying what waits and what to do; empty: switch now."""
        m = self.get(move_id)
        p = self.progress[m.id]
        if p.state in ("switched", "aborted"):
            return [f"move {m.id} is {p.state}"]
        unmet = [
            f"move {m.id}: no 'frozen' marker yet in {s.source}.{s.db}.{m.marker} (from {s})"
            for s in m.sources
            if s.source not in p.frozen
        ]
        if p.switched_at is None:
            unmet.append(
                f"move {m.id}: no 'switched' marker yet in {m.to.source}.{m.to.db}.{m.marker} "
                f"(to {m.to})"
            )
        for s in m.sources:
            at = facts.held.get(s)
            if at is not None:
                unmet.append(
                    f"move {m.id}: {s} is held at position {at}, before its freeze at "
                    f"{p.frozen.get(s.source)}: its statements before the freeze are applied "
                    "first (shardmerge locks shows what it waits for)"
                )
        sides = {*m.sources, m.to}
        for shadow in facts.migrations:
            origin = Router.shadow_origin(shadow.table)
            if origin is not None and shadow.with_table(origin) in sides:
                unmet.append(
                    f"move {m.id}: an online DDL migration is running (shadow table {shadow}): "
                    "no switch until it cuts over or is dropped"
                )
        unmet += self._schemas(m, facts.schemas)
        return unmet

    def _schemas(self, m: Move, schemas: Mapping[ShardId, TableSchema | None]) -> list[str]:
        to = schemas.get(m.to)
        if to is None:
            return [f"move {m.id}: to {m.to} does not exist (no CREATE TABLE seen for it)"]
        out = []
        for s in m.sources:
            old = schemas.get(s)
            if old is None:
                continue  # dropped at the freeze already: nothing to compare with
            a, b = _comparable(to.renamed(m.to.table), old.renamed(m.to.table))
            specs = diff(a, b)
            if specs:
                out.append(
                    f"move {m.id}: {m.to} does not have the schema {s} has at its freeze; "
                    f"{alter_sql(m.to.table, specs)} would make them equal: fix the copy "
                    f"upstream, or abort the move (`move abort {m.id}`)"
                )
        return out

    def switched(self, move_id: str, target: TargetId) -> list[Rehome]:
        """The switch ran: the re-home decisions (one per ``from``), in order."""
        m = self.get(move_id)
        self.progress[m.id].state = "switched"
        return [Rehome(target, m.id, s, m.to, m.keys) for s in m.sources]

    def positions(self, move_id: str, frozen: Mapping[str, Position], switched: Position) -> None:
        """An operator's freeze and switch positions instead of marker rows: as if each
        ``from`` source's ``frozen`` marker and ``to``'s ``switched`` marker were read
        there (``move switch``). Every ``from`` source is named, and a freeze a marker
        already gave is not moved."""
        m = self.get(move_id)
        p = self.progress[m.id]
        if p.state in ("switched", "aborted", "switching"):
            raise MoveError(f"move {m.id} is {p.state}: its switch position is set")
        sources = {s.source for s in m.sources}
        if set(frozen) != sources:
            raise MoveError(
                f"move {m.id}: give the freeze position of every from source "
                f"({', '.join(sorted(sources))}), not of {', '.join(sorted(frozen)) or 'none'}"
            )
        for source, at in frozen.items():
            if p.frozen.get(source, at) != at:
                raise MoveError(
                    f"move {m.id}: {source} froze at {p.frozen[source]} (its marker row), "
                    f"not at {at}"
                )
        p.frozen.update(frozen)
        p.switched_at = switched
        p.state = "switching"

    def abort(self, move_id: str) -> None:
        m = self.get(move_id)
        p = self.progress[m.id]
        if p.state == "switched":
            raise MoveError(
                f"move {m.id} is switched: {m.to} is home; declare a move back to abort it"
            )
        p.state = "aborted"

    def pending_switches(self) -> list[str]:
        return [m for m, p in self.progress.items() if p.state == "switching"]

    # --- state ------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            m: {
                "state": p.state,
                "frozen": dict(p.frozen),
                "switched_at": p.switched_at,
                "dropped": p.dropped,
                "shadow": p.shadow,
            }
            for m, p in self.progress.items()
        }

    def restore(self, data: Mapping[str, Any]) -> None:
        """Progress saved by :meth:`to_json`; a move declared since starts ``declared``;
        one saved but no longer declared is an error naming it."""
        for move_id, saved in data.items():
            if move_id not in self.moves:
                raise MoveError(
                    f"saved state has move {move_id!r}, which is no longer declared: "
                    "declare it again (or finish it) before removing it from moves"
                )
            self.progress[move_id] = MoveProgress(
                saved["state"],
                dict(saved["frozen"]),
                saved["switched_at"],
                saved["dropped"],
                saved["shadow"],
            )

    def summary(self) -> dict[str, str]:
        return {m: p.state for m, p in self.progress.items()}


def switch_facts(moves: Moves, m: Move, c: Coordinator, copy: Coordinator) -> SwitchFacts:
    """What :meth:`Moves.can_switch` needs, read from an engine's coordinator ``c`` and the
    move's own ``copy`` coordinator (``to``'s recorded schema and shadow tables)."""
    p = moves.progress[m.id]
    held: dict[ShardId, Position] = {}
    for s in m.sources:
        st = c.shard_state(s)
        if st is None or not (st.held or st.awaiting is not None):
            continue
        at = st.pending[0].position if st.pending else st.awaiting
        frozen = p.frozen.get(s.source)
        if at is None or frozen is None or at < frozen:
            held[s] = at
    to = copy.shard_state(m.to)
    schemas = {s: (st.schema if (st := c.shard_state(s)) else None) for s in m.sources}
    schemas[m.to] = to.schema if to is not None else None
    return SwitchFacts(held, [*c.ghosts, *copy.ghosts], schemas)


def lock_views(
    locks: list[dict[str, Any]], moves: Moves, unmet: Mapping[str, list[str]], router: Router
) -> list[dict[str, Any]]:
    """The lock views (``shardmerge locks``' dicts) with each waiting switch's ``to`` shown
    as held, its ``unmet`` preconditions under ``moves``: stage ``conflict`` when only an
    operator or a fix of the copy can end the wait, else at least ``waiting``."""
    if not any(unmet.values()):
        return locks  # no switch waits: the views as they are
    out = [dict(lock) for lock in locks]
    for move_id, why in unmet.items():
        m = moves.get(move_id)
        target = str(router.target(m.to))
        lock = next((x for x in out if x["target"] == target), None)
        if lock is None or not why:
            continue
        lock["blocked"] = sorted({*lock["blocked"], str(m.to)})
        # A schema difference ends by itself while `from` is held or migrating.
        if all("schema" in u or "does not exist" in u for u in why):
            lock["stage"] = "conflict"
        elif lock["stage"] == "none":
            lock["stage"] = "waiting"
        lock["moves"] = why
    return out
