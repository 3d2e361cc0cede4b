"""A sharded workload: interleaved inserts, updates and deletes on many shards of one
logical table, with DDL statements rolled out shard by shard, as a DM-style sharded
migration sees them. Deterministic for a given seed. Feeds :mod:`devkit.producer`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal, NamedTuple

from schemas import apply, parse_create_table, parse_ddl
from schemas.changes import AlterTable, ChangeColumn, RenameColumn
from schemas.model import Column, TableSchema, name_key

__all__ = [
    "BASE_TABLE_SQL",
    "MOVE_FROM",
    "MOVE_ID",
    "MOVE_TO",
    "Oracle",
    "WorkloadEvent",
    "moving_workload",
    "shard_name",
    "sharded_workload",
]

BASE_TABLE_SQL = (
    "CREATE TABLE {table} (id BIGINT NOT NULL AUTO_INCREMENT, user_id INT NOT NULL, "
    "status VARCHAR(16) NOT NULL DEFAULT 'NEW', amount DECIMAL(10,2) NOT NULL, "
    "created DATETIME(3) NOT NULL, PRIMARY KEY (id))"
)
STATUSES = ("NEW", "PAID", "SHIPPED", "DONE", "CANCELLED")
# A shard's DDL fires once its own progress passes fraction + STAGGER * index / shards: the
# rollout over all shards spans STAGGER of the workload, the way an operator's runs do.
STAGGER = 0.05
_START = dt.datetime(2024, 1, 1)
# A column's value maker: (column name, (rng.random, row id) -> value).
Faker = tuple[str, Callable[[Callable[[], float], int], Any]]


class WorkloadEvent(NamedTuple):
    """One upstream change: a row change (``kind="row"``) or a DDL statement."""

    kind: Literal["row", "ddl"]
    db: str
    table: str
    schema: TableSchema | None  # the table's schema for rows; the schema after, for DDL
    op: Literal["c", "u", "d"] | None = None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    statement: str | None = None


class Oracle:
    """The rows a merged table must hold after a workload's events: the shards' final
    rows by primary key (``id``), a renamed column's values under its new name."""

    def __init__(self) -> None:
        self.rows: dict[Any, dict[str, Any]] = {}
        self._table_of: dict[Any, tuple[str, str]] = {}

    def take(self, ev: WorkloadEvent) -> None:
        if ev.kind == "ddl":
            # A rename moves the values of the shard's existing rows to the new name.
            renames = [
                (spec.old_name, spec.column.name)
                for change in parse_ddl(ev.statement or "")
                if isinstance(change, AlterTable)
                for spec in change.specs
                if isinstance(spec, ChangeColumn)
            ]
            rows = [r for k, r in self.rows.items() if self._table_of.get(k) == (ev.db, ev.table)]
            for old, new in renames:
                for row in rows:
                    if old in row:
                        row[new] = row.pop(old)
            return
        if ev.after is not None:
            self._table_of[ev.after["id"]] = (ev.db, ev.table)
        if ev.op == "d":
            assert ev.before is not None
            self.rows.pop(ev.before["id"], None)
        else:
            assert ev.after is not None
            if ev.before is not None and ev.before["id"] != ev.after["id"]:
                self.rows.pop(ev.before["id"], None)
            self.rows[ev.after["id"]] = dict(ev.after)


def shard_name(i: int) -> tuple[str, str]:
    """Shard ``i``'s ``(db, table)``: eight databases, ``orders_{i//8}`` in each."""
    return f"db_{i % 8}", f"orders_{i // 8}"


@dataclass
class _Shard:
    index: int
    db: str
    table: str
    schema: TableSchema
    next_id: int
    ddl: list[tuple[float, str]]
    done: int = 0
    rows: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict)
    live: list[int] = dataclasses.field(default_factory=list)
    fakers: list[Faker] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        self.fakers = [(c.name, _faker(c)) for c in self.schema.columns]


def sharded_workload(
    shards: int,
    rows_per_shard: int,
    *,
    ddl_at: dict[float, str] | None = None,
    seed: int = 0,
    create: bool = True,
    stagger: float = STAGGER,
) -> Iterator[WorkloadEvent]:
    """``rows_per_shard`` row changes on each of ``shards`` shards, round robin.

    About 60% inserts, 25% updates, 15% deletes. ``ddl_at`` maps a fraction of progress to
    a statement (``{table}`` and ``{db}`` are filled per shard); each shard runs it when
    its progress passes the fraction (staggered by shard over ``stagger`` of the workload,
    :data:`STAGGER` by default), and its
    later rows follow the new schema. With ``create``, each shard starts with its
    ``CREATE TABLE``. Primary keys are unique across shards.
    """
    rng = random.Random(seed)
    plan = sorted((ddl_at or {}).items())
    state = []
    for i in range(shards):
        db, table = shard_name(i)
        schema = parse_create_table(BASE_TABLE_SQL.format(table=table))
        shard = _Shard(i, db, table, schema, i * 1_000_000_000 + 1, list(plan))
        state.append(shard)
        if create:
            yield WorkloadEvent("ddl", db, table, schema, statement=schema.to_sql(table))
    for step in range(rows_per_shard):
        for shard in state:
            while shard.ddl and step >= (shard.ddl[0][0] + stagger * shard.index / shards) * (
                rows_per_shard
            ):
                _, template = shard.ddl.pop(0)
                yield _run_ddl(shard, template.format(table=shard.table, db=shard.db))
            yield _row(shard, rng)


def _row(shard: _Shard, rng: random.Random) -> WorkloadEvent:
    rand = rng.random
    r = rand()
    schema = shard.schema
    if not shard.live or r < 0.6:
        row_id = shard.next_id
        shard.next_id += 1
        row = {name: fake(rand, row_id) for name, fake in shard.fakers}
        row["id"] = row_id
        shard.rows[row_id] = row
        shard.live.append(row_id)
        return WorkloadEvent("row", shard.db, shard.table, schema, "c", None, row)
    k = int(rand() * len(shard.live))
    row_id = shard.live[k]
    before = shard.rows[row_id]
    if r < 0.85:
        after = dict(before)
        fakers = shard.fakers
        for _ in range(2):  # one or two columns (the same one twice is fine)
            name, fake = fakers[1 + int(rand() * (len(fakers) - 1))]
            after[name] = fake(rand, row_id)
        shard.rows[row_id] = after
        return WorkloadEvent("row", shard.db, shard.table, schema, "u", before, after)
    shard.live[k] = shard.live[-1]
    shard.live.pop()
    del shard.rows[row_id]
    return WorkloadEvent("row", shard.db, shard.table, schema, "d", before, None)


def _run_ddl(shard: _Shard, statement: str) -> WorkloadEvent:
    old = shard.schema
    for change in parse_ddl(statement):
        shard.schema = apply(change, shard.schema)
        if isinstance(change, AlterTable):
            _migrate(shard, old, change)
    shard.fakers = [(c.name, _faker(c)) for c in shard.schema.columns]
    return WorkloadEvent("ddl", shard.db, shard.table, shard.schema, statement=statement)


def _migrate(shard: _Shard, old: TableSchema, change: AlterTable) -> None:
    """Rewrite the shard's live rows to the new schema, as MySQL does to the table."""
    renamed = {}
    for spec in change.specs:
        if isinstance(spec, ChangeColumn):
            renamed[name_key(spec.column.name)] = spec.old_name
        elif isinstance(spec, RenameColumn):
            renamed[name_key(spec.new_name)] = spec.old_name
    fills = {}
    for col in shard.schema.columns:
        source = renamed.get(col.key, col.name)
        have = old.column(source)
        fills[col.name] = have.name if have is not None else None
    for row_id, row in shard.rows.items():
        shard.rows[row_id] = {
            name: (row.get(src) if src is not None else None) for name, src in fills.items()
        }


def _faker(col: Column) -> Callable[[Callable[[], float], int], Any]:
    """A function ``(rand, row id) -> value`` for the column; ``rand`` is ``rng.random``,
    the cheapest draw (the workload must outrun the producer)."""
    t = col.type.base
    if col.key == "status":
        return lambda rand, n: STATUSES[int(rand() * len(STATUSES))]
    if t in ("TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT"):
        top = 100 if t == "TINYINT" else 100_000
        return lambda rand, n: 1 + int(rand() * top)
    if t == "DECIMAL":
        exp = -(col.type.scale or 0)
        return lambda rand, n: Decimal(100 + int(rand() * 999_900)).scaleb(exp)
    if t in ("FLOAT", "DOUBLE"):
        return lambda rand, n: round(rand() * 1000, 3)
    if t in ("DATETIME", "TIMESTAMP"):
        return lambda rand, n: _START + dt.timedelta(seconds=n % 10_000_000, milliseconds=n % 997)
    if t == "DATE":
        return lambda rand, n: (_START + dt.timedelta(days=n % 3650)).date()
    if t in ("CHAR", "VARCHAR") or t.endswith("TEXT"):
        width, name = min(col.type.length or 32, 24), col.name
        return lambda rand, n: f"{name}-{n}"[:width]
    return lambda rand, n: None


# The move of ``moving_workload``: shard 0 (``db_0.orders_0``) moves to a table no other
# shard has (``shard_name`` gives databases db_0..db_7 only), on the same source.
MOVE_FROM = ("db_0", "orders_0")
MOVE_TO = ("db_9", "orders_90")
MOVE_ID = "m1"
MARKER_TABLE_SQL = (
    "CREATE TABLE {table} (move_id VARCHAR(64) NOT NULL, phase VARCHAR(16) NOT NULL, "
    "n BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (move_id, phase))"
)
MOVE_ALTER = "ALTER TABLE {table} ADD COLUMN note VARCHAR(64)"


def moving_workload(
    shards: int, rows_per_shard: int, *, seed: int = 0, marker: str = "shardmerge_move"
) -> Iterator[tuple[WorkloadEvent, bool]]:
    """A whole-table move of shard 0 while an ``ADD COLUMN`` rolls out over the shards,
    as docs/moves.md's copy tool and a pessimistic lock see it; each event with whether
    the merged table shows it (``False``: the copy's rows, marker rows, and the old home's
    cleanup after its freeze).

    In fractions of ``rows_per_shard``: every shard writes rows; at 0.2 the copy creates
    ``MOVE_TO`` and copies shard 0's rows; at 0.25 shard 0 runs the ALTER first (a
    pessimistic job holds its later rows: the other shards lag) and the copier runs it on
    the new home; at 0.5 the copy catches up, shard 0 freezes, the new home's switch
    marker follows and it takes shard 0's writes (queued until the switch); shard 0
    deletes some rows (the cleanup, dropped); from 0.6 the other shards run the ALTER one
    by one, the last one releasing shard 0's held rows, and the switch runs in that batch.
    A heartbeat marker row every 50 steps, as a copy tool writes one every second."""
    rng = random.Random(seed)
    state = []
    for i in range(shards):
        db, table = shard_name(i)
        schema = parse_create_table(BASE_TABLE_SQL.format(table=table))
        state.append(_Shard(i, db, table, schema, i * 1_000_000_000 + 1, []))
        yield WorkloadEvent("ddl", db, table, schema, statement=schema.to_sql(table)), True
    old, others = state[0], state[1:]
    mark_schema = parse_create_table(MARKER_TABLE_SQL.format(table=marker))
    mdb = MOVE_FROM[0]
    yield (
        WorkloadEvent("ddl", mdb, marker, mark_schema, statement=mark_schema.to_sql(marker)),
        False,
    )
    beats = 0

    def mark(phase: str) -> WorkloadEvent:
        nonlocal beats
        if phase != "heartbeat":
            return WorkloadEvent("row", mdb, marker, mark_schema, "c", None,
                                 {"move_id": MOVE_ID, "phase": phase, "n": 0})  # fmt: skip
        beats += 1
        before = {"move_id": MOVE_ID, "phase": phase, "n": beats - 1}
        after = {"move_id": MOVE_ID, "phase": phase, "n": beats}
        if beats == 1:
            return WorkloadEvent("row", mdb, marker, mark_schema, "c", None, after)
        return WorkloadEvent("row", mdb, marker, mark_schema, "u", before, after)

    new: _Shard | None = None
    frozen = False

    def copy() -> Iterator[tuple[WorkloadEvent, bool]]:
        """The new home brought to the old home's rows (the copy, never shown)."""
        assert new is not None
        for row_id in sorted(set(new.rows) - set(old.rows)):
            gone = new.rows.pop(row_id)
            new.live.remove(row_id)
            yield WorkloadEvent("row", new.db, new.table, new.schema, "d", gone, None), False
        for row_id, row in sorted(old.rows.items()):
            if new.rows.get(row_id) == row:
                continue
            before = new.rows.get(row_id)
            if before is None:
                new.live.append(row_id)
            new.rows[row_id] = dict(row)
            op: Literal["c", "u"] = "c" if before is None else "u"
            yield WorkloadEvent("row", new.db, new.table, new.schema, op, before, dict(row)), False

    last = others[-1] if others else old
    for step in range(rows_per_shard):
        at = step / rows_per_shard
        if new is None and at >= 0.2:
            schema = old.schema
            new = _Shard(99, *MOVE_TO, schema, 0, [])
            yield WorkloadEvent("ddl", new.db, new.table, schema, statement=schema.to_sql(new.table)), False  # fmt: skip  # noqa: E501
            yield from copy()
        if new is not None and not old.done and at >= 0.25:
            old.done = 1
            yield _run_ddl(old, MOVE_ALTER.format(table=old.table)), True
            yield _run_ddl(new, MOVE_ALTER.format(table=new.table)), False
        if not frozen and at >= 0.5:
            yield from copy()
            yield mark("frozen"), False
            frozen = True
            yield mark("switched"), False
            assert new is not None
            new.next_id = old.next_id + 10_000_000  # the new home's own keys
            for _ in range(min(5, len(old.live))):  # the old home's cleanup: dropped
                yield _row_delete(old, rng), False
        for shard in others:
            if shard.done == 0 and at >= 0.6 + STAGGER * shard.index / shards:
                shard.done = 1
                yield _run_ddl(shard, MOVE_ALTER.format(table=shard.table)), True
        if step % 50 == 0 and new is not None:
            yield mark("heartbeat"), False
        for shard in others:
            yield _row(shard, rng), True
        if not frozen:
            yield _row(old, rng), True
        else:
            assert new is not None
            yield _row(new, rng), True
    assert last.done or not others


def _row_delete(shard: _Shard, rng: random.Random) -> WorkloadEvent:
    k = int(rng.random() * len(shard.live))
    row_id = shard.live[k]
    shard.live[k] = shard.live[-1]
    shard.live.pop()
    before = shard.rows.pop(row_id)
    return WorkloadEvent("row", shard.db, shard.table, shard.schema, "d", before, None)
