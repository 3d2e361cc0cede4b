"""The row plan of a micro-batch: per shard and stretch of positions, what its rows do.

Every control event of the batch goes through the coordinator *before* any row is written;
what a row then does depends only on the coordinator's state at the end of the batch and
on the row's own position, given by a few facts per shard (``coordinator.rowplan``):

- its route (write, hold, drop, unknown), its table version and projection;
- ``hold_from``: a held shard's rows from there on go to the stash, earlier ones (late
  arrivals, or rows released within the batch) are written;
- its late renames and last ALTER (see ``streaming.batch.rows``);
- ``drop_before``: the position of the shard's last TRUNCATE of the batch: its rows before
  it are gone (the TRUNCATE deleted them downstream).

A shard's facts change within a batch only at statements that create, rename or drop
tables; there the shard's rows are cut into *segments* (rows up to the statement take the
facts from before it). The plan is a small table broadcast-joined to the rows by shard and
position range, so no plan or expression grows with shards or control events.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from coordinator.coordinator import Coordinator, RowRoute
from coordinator.decisions import Decision, Release, Truncate
from coordinator.ids import Position, ShardId
from coordinator.rowplan import RowPlan, row_plan
from streaming.source.control import OKEY_TYPE, okey_value
from streaming.sql.local_frame import local_frame

__all__ = ["PLAN_COLUMNS", "Planner", "Segment", "release_frame"]

_PLAN_SCHEMA = (
    f"_ps string, _pd string, _pt string, _after {OKEY_TYPE}, _upto {OKEY_TYPE}, "
    "_act string, _target string, _version int, _project boolean, "
    f"_hold_from {OKEY_TYPE}, _drop_before {OKEY_TYPE}, "
    f"_renames array<struct<pos:{OKEY_TYPE},pairs:map<string,string>>>, _last_alter {OKEY_TYPE}, "
    "_pmoved boolean"
)
# Whether a row's key moves (a split move's ``keys``, streaming.batch.moves): NULL for every row
# when no split move is under way.
NO_MOVED = "CAST(NULL AS BOOLEAN)"
PLAN_COLUMNS = [
    "_act", "_target", "_version", "_project", "_hold_from", "_drop_before", "_renames",
    "_last_alter",
]  # fmt: skip


@dataclass
class Segment:
    """The rows of ``shard`` positioned after ``after`` and up to ``upto`` (None: no
    bound), and their plan. ``closed``: cut by a statement that created, renamed or dropped
    the table; such rows happened under a table that is gone, so they are written
    projected onto the downstream columns. ``moved``: only the rows whose key a split move
    moves (True) or keeps (False); None: every row of the range."""

    shard: ShardId
    after: Position
    upto: Position
    plan: RowPlan
    closed: bool = False
    moved: bool | None = None


class Planner:
    """Collects the segments while the batch's control events go through ``c``."""

    def __init__(self, c: Coordinator) -> None:
        self.c = c
        self.segments: list[Segment] = []
        self.opened: dict[ShardId, Position] = {}
        # Whether a row's key moves (SQL over the row event; streaming.batch.moves).
        self.moved = NO_MOVED

    def cut(self, shards: list[ShardId], position: Position) -> list[Segment]:
        """Before a table-level statement at ``position``: the rows of ``shards`` up to it
        take the plan the shard has now."""
        segs = []
        for s in shards:
            segs.append(Segment(s, self.opened.get(s), position, row_plan(self.c, s), True))
            self.opened[s] = position
        return segs

    def close(self, segs: list[Segment], decisions: list[Decision]) -> None:
        """After the statement: its releases (a dropped table's held rows replay) free
        the held rows of the segments it closed."""
        for seg in segs:
            route = seg.plan.route
            if route.action == "unknown":
                # Rows of a table before the statement that registered it (another topic
                # carried them ahead): they follow the table it created.
                seg.plan, seg.closed = row_plan(self.c, seg.shard), False
                continue
            for d in decisions:
                if (
                    isinstance(d, Release)
                    and d.shard == seg.shard
                    and d.version == route.version
                    and route.action == "hold"
                ):
                    if d.until is None:
                        route = RowRoute("write", d.target, d.version, d.project or route.project)
                    elif seg.plan.hold_from is not None and d.until > seg.plan.hold_from:
                        seg.plan = dataclasses.replace(seg.plan, hold_from=d.until)
            seg.plan = dataclasses.replace(seg.plan, route=route)
        self.segments += segs

    def finish(self, shards: list[ShardId]) -> None:
        """After the last control event: the rest of each shard's rows. Rows cut while
        their table was unknown (a snapshot's DROP TABLE IF EXISTS before its CREATE
        TABLE) follow what the table is at the end of the batch."""
        for seg in self.segments:
            if not seg.closed and seg.plan.route.action == "unknown":
                self.refresh(seg)
        for s in shards:
            self.segments.append(Segment(s, self.opened.get(s), None, row_plan(self.c, s)))

    def refresh(self, seg: Segment) -> None:
        seg.plan = row_plan(self.c, seg.shard)

    def frame(self, spark: SparkSession, truncates: list[Truncate]) -> DataFrame:
        """The plan as a small DataFrame (keys ``_ps``/``_pd``/``_pt`` and the range)."""
        gone: dict[ShardId, Any] = {}
        at: dict[ShardId, list[Any]] = {}
        for t in truncates:
            if t.position is not None:
                at.setdefault(t.shard, []).append(t.position)
                if t.shard not in gone or t.position > gone[t.shard]:
                    gone[t.shard] = t.position
        rows = []
        for seg in self.segments:
            p, r = seg.plan, seg.plan.route
            rows.append(
                (
                    seg.shard.source, seg.shard.db, seg.shard.table,
                    okey_value(seg.after), okey_value(seg.upto),
                    r.action, str(r.target) if r.target else None, r.version,
                    r.project or seg.closed,
                    # A moved key's rows are gone by a TRUNCATE before their freeze only:
                    # one after it (deferred by the move) runs after they were re-homed.
                    okey_value(p.hold_from),
                    okey_value(
                        _before(at.get(seg.shard, []), seg.upto)
                        if seg.moved
                        else gone.get(seg.shard)
                    ),
                    _renames_frame(p.late_renames),
                    okey_value(p.last_alter),
                    seg.moved,
                )
            )  # fmt: skip
        return local_frame(spark, rows, _PLAN_SCHEMA)


def _renames_frame(late: tuple[Any, ...]) -> list[Any]:
    """A plan's late renames as the ``_renames`` column (``streaming.batch.rows.renamed_keys``):
    in order, then a rename of nothing at the latest of their positions, so that a row at
    or after it (most rows) is seen to go through none of them without running the
    renames' interpreted lambdas."""
    renames: list[Any] = [
        (okey_value(pos), {o.lower(): n.lower() for o, n in pairs})
        for pos, pairs in late
        if pos is not None
    ]
    if renames:
        renames.append((max(pos for pos, _ in renames), {}))
    return renames


def _before(positions: list[Any], upto: Position) -> Any:
    """The last of ``positions`` at or before ``upto`` (None: no bound)."""
    return max((p for p in positions if upto is None or p <= upto), default=None)


def join_plan(rows: DataFrame, plan: DataFrame, moved: str = NO_MOVED) -> DataFrame:
    """Each row with the plan of its shard's segment (broadcast; rows without a segment
    get none: a released shard's stash rows may have no fresh rows in the batch).
    ``moved``: whether a row's key moves (``Planner.moved``), for the segments that cover
    only such rows or only the others; the rows keep it as ``_moved``."""
    on = (
        (F.col("source") == F.col("_ps"))
        & (F.col("db") == F.col("_pd"))
        & (F.col("tbl") == F.col("_pt"))
        & (F.col("_after").isNull() | (F.col("_okey") > F.col("_after")))
        & (F.col("_upto").isNull() | (F.col("_okey") <= F.col("_upto")))
        & (F.col("_pmoved").isNull() | (F.col("_pmoved") == F.col("_moved")))
    )
    return (
        rows.withColumn("_moved", F.expr(moved))
        .join(F.broadcast(plan), on, "left")
        .drop("_ps", "_pd", "_pt", "_after", "_upto", "_pmoved")
    )


def release_frame(spark: SparkSession, releases: list[Release]) -> DataFrame:
    """What the batch's releases replay, one row per (target, shard, table version): the
    stash rows before ``_until`` (all when null), projected if any release said so."""
    merged: dict[tuple[str, ShardId, int], tuple[Any, bool]] = {}
    for d in releases:
        key = (str(d.target), d.shard, d.version)
        until, project = merged.get(key, (d.until, False))
        if until is not None and (d.until is None or d.until > until):
            until = d.until
        merged[key] = (until, project or d.project)
    rows = [
        (target, s.source, s.db, s.table, version, okey_value(until), project)
        for (target, s, version), (until, project) in merged.items()
    ]
    return local_frame(
        spark,
        rows,
        "_rtarget string, _rs string, _rd string, _rt string, _rversion int, "
        f"_until {OKEY_TYPE}, _rproject boolean",
    )
