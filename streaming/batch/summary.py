"""The one summary of step 6: every per-target and per-shard fact the driver needs before
a row is written, from one aggregate over the batch's rows and their projections.

Per (shard, target, fate): the key actions and the events they come from (an update that
changes its key is two actions of one event), the first action ahead of a DDL that has not
arrived and why, and the actions whose values do not fit their column. The fast path of a
target (nothing ahead, nothing unfit) needs nothing else: its projection is the MERGE
source as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from coordinator.ids import ShardId, TargetId
from streaming.source.control import okey_position
from streaming.sql.quoting import string

__all__ = ["Summary", "together"]

# Fates of the batch's own rows (a replay is a stash row of an earlier batch).
FRESH_FATES = ("write", "hold", "drop", "unknown", "gone")
_COLUMNS = ["source", "db", "tbl", "_target", "_fate", "_okey", "_rep", "_reason", "_unfit"]
# A key action ahead of a DDL (its value fits: unfit values are dead letters).
_AHEAD = "_reason IS NOT NULL AND _unfit IS NULL"


def together(union: DataFrame, parts: int) -> DataFrame:
    """A union of ``parts`` frames read in as many tasks as the cluster has cores. Each
    task of a union carries the plan of every part, not only of the one it reads: a
    summary over 24 targets' projections ran 42 tasks that each spent about 245 ms
    deserializing that plan, against 17 ms reading rows (docs/benchmarks.md). The parts
    are already split as many ways as there are cores (step 3 reads the batch so), so
    fewer tasks than partitions lose no parallelism."""
    if parts < 2:
        return union
    return union.coalesce(max(1, union.sparkSession.sparkContext.defaultParallelism))


@dataclass(frozen=True)
class Group:
    shard: ShardId
    target: str | None
    fate: str
    actions: int
    events: int
    unfit: int
    first: Any  # the position of the first action ahead of a DDL, or None
    why: str | None


class Summary:
    def __init__(self, groups: list[Group]) -> None:
        self.groups = groups

    @classmethod
    def of(cls, fresh: DataFrame, projected: dict[TargetId, DataFrame]) -> Summary:
        """One Spark job: ``fresh`` (the batch's rows with ``_fate`` and ``_target``) and
        each target's projection (its write rows and replays, as key actions)."""
        keys = ["source", "db", "tbl", "_target", "_fate", "_okey"]
        rep = F.expr("_sub = 1 OR op = 'd'").alias("_rep")  # one action per event
        parts = [
            p.select(*keys, rep, "_reason", "_unfit")
            for _, p in sorted(projected.items(), key=lambda kv: str(kv[0]))
        ]
        names = ", ".join(string(str(t)) for t in projected)
        projected_sql = f"_fate = 'write' AND _target IN ({names})" if projected else "false"
        parts.append(
            fresh.filter(f"NOT coalesce({projected_sql}, false)").select(
                *keys,
                F.lit(True).alias("_rep"),
                F.lit(None).cast("string").alias("_reason"),
                F.lit(None).cast("string").alias("_unfit"),
            )
        )
        rows = parts[0]
        for part in parts[1:]:
            rows = rows.unionByName(part)
        rows = together(rows, len(parts))
        groups = []
        for r in (
            rows.select(*_COLUMNS)
            .groupBy("source", "db", "tbl", "_target", "_fate")
            .agg(
                F.count(F.lit(1)).alias("actions"),
                F.count(F.when(F.col("_rep"), True)).alias("events"),
                F.count("_unfit").alias("unfit"),
                F.expr(f"min(CASE WHEN {_AHEAD} THEN _okey END)").alias("first"),
                # the reason of the first action ahead: the same text on a re-run
                F.expr(
                    f"min_by(CASE WHEN {_AHEAD} THEN _reason END, "
                    f"CASE WHEN {_AHEAD} THEN _okey END)"
                ).alias("why"),
            )
            .collect()
        ):
            groups.append(
                Group(
                    ShardId(r["source"], r["db"], r["tbl"]),
                    r["_target"],
                    r["_fate"],
                    r["actions"],
                    r["events"],
                    r["unfit"],
                    okey_position(r["first"]) if r["first"] is not None else None,
                    r["why"],
                )
            )
        return cls(groups)

    def events(self, fate: str) -> int:
        return sum(g.events for g in self.groups if g.fate == fate)

    def fresh_events(self) -> int:
        return sum(g.events for g in self.groups if g.fate in FRESH_FATES)

    def unfit(self, fate: str | None = None, target: TargetId | None = None) -> int:
        return sum(
            g.unfit
            for g in self.groups
            if (fate is None or g.fate == fate) and (target is None or g.target == str(target))
        )

    def rows(self, target: TargetId) -> int:
        """The key actions to write to ``target`` (its write rows and replays)."""
        return sum(
            g.actions
            for g in self.groups
            if g.target == str(target) and g.fate in ("write", "replay")
        )

    def ahead(self) -> list[tuple[str, ShardId, Any, str]]:
        """Per target (its name) and shard, in name order: the first row ahead of a DDL that has not
        arrived, and why."""
        first: dict[tuple[str, ShardId], tuple[Any, str]] = {}
        for g in self.groups:
            if g.first is None or g.target is None:
                continue
            key = (g.target, g.shard)
            if key not in first or g.first < first[key][0]:
                first[key] = (g.first, g.why or "")
        order = sorted(first.items(), key=lambda kv: (kv[0][0], str(kv[0][1])))
        return [(t, shard, pos, why) for (t, shard), (pos, why) in order]
