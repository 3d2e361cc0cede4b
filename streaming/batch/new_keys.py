"""Rows whose keys are provably new are appended, not MERGEd.

A MERGE joins every row of its source against the target to find the rows it matches; a
row whose key is not in the table matches nothing, and the MERGE then inserts it (an
upsert) or does nothing (a delete). Sharded tables mostly grow by inserts of new keys
(auto-increment keys, ranges per shard, time-ordered ids), so most of what a MERGE joins
finds nothing. When the job can prove a key absent from the table, the key's winner of
the batch (its last action, ``streaming.batch.rows.merge_source``) is appended instead,
or, a delete, not written at all; the other keys are MERGEd as before. A batch with keys
of both kinds is MERGEd whole (:func:`how_written`) unless ``sink.append_mixed`` asks for
the split: it needs its MERGE anyway, and a second commit costs more than the new keys
add to it (measured: docs/benchmarks.md).

**The proof: the key space and its islands.** A target whose primary key is its shards'
extract columns (``routes[].extract``: constant per shard) plus exactly one integer column
``o`` has a key space per *prefix* ``p``, the values of the extract columns in the key
(no extract column in the key: one prefix, the empty one). For each prefix the job keeps
its *islands*: sorted, disjoint, closed ranges of ``o`` that together cover every key with
that prefix the table may hold (:class:`KeyMarks`). A key outside every island of its
prefix is not in the table. The islands are

- **set** from the table once, by one aggregate over it after a batch's writes (keys in
  buckets of :data:`BUCKET` values: one range per bucket with rows, so the ranges of
  shards that use far-apart key ranges stay apart), and used from the next batch on, so a
  batch that Spark runs again splits its rows as its first run did;
- **grown** by every write of the target's rows while they are kept: the batch's winners
  are split, and the buckets of the keys it upserts are added (one small aggregate over
  the batch's winners, which also counts each side), so the islands stay a superset of
  the table's keys; except after a batch that writes rows from the stash (a release's
  replayed rows, rows a move read again): those targets' islands are read from the table
  again after its writes, since a run of the batch again, after a first run whose stash
  delete landed, no longer sees those rows and could not grow the islands by them;
- **coarsened**, never narrowed: at most :data:`ISLANDS` ranges per prefix (the closest
  ones merge; a prefix that is a shard keeps one range). A range too wide only sends a new
  key to the MERGE, which is always right.
- **dropped** (the table is read again later) when something else changes which keys the
  table holds under which prefix: a shard's rows re-homed (a rename, a move) while the key
  has a prefix, a change of the key's columns, or a write of the target's rows by a path
  that does not grow them.

The job must be the only writer of the target's rows: a group of jobs (a shared table)
never takes this path, and a table written by anything else must switch it off
(``sink.append_new_keys: false``). This module is the rule; ``streaming.batch.writer``
applies it and ``streaming.storage.delta_sink.DeltaSink.append`` writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from coordinator.routing import Extract
from schemas.changes import AddColumn, ChangeColumn, DropColumn, ModifyColumn, RenameColumn
from schemas.model import TableSchema

__all__ = [
    "BUCKET",
    "INTEGRAL",
    "ISLANDS",
    "KeyMarks",
    "Marks",
    "coalesce",
    "how_written",
    "key_space",
    "spec_names",
]

# Integer keys, whatever their width and sign (``streaming.sql.spark_types.delta_type``).
INTEGRAL = frozenset({"TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT"})
# Keys are grouped in buckets of this many values when islands are read or grown: one
# range per bucket with keys. 2**24 keeps the ranges of shards that allocate keys a few
# million apart (or more) apart, and a batch's keys in a handful of buckets.
BUCKET = 2**24
# Ranges kept per prefix (the closest merge first); a prefix of extract values keeps one.
ISLANDS = 64

Interval = tuple[int, int]
Prefix = tuple[str, ...]


def key_space(schema: TableSchema, extract: Extract) -> tuple[str, tuple[str, ...]] | None:
    """The ordered column ``o`` and the prefix columns of ``schema``'s primary key, when the
    key is extract columns plus exactly one integer column; else None (the target's rows
    are always MERGEd)."""
    keys = list(schema.primary_key)
    if not keys:
        return None
    extract_cols = {c.lower() for c in extract.columns()}
    rest = [k for k in keys if k.lower() not in extract_cols]
    if len(rest) != 1:
        return None
    column = schema.column(rest[0])
    if column is None or column.type.base not in INTEGRAL:
        return None
    return column.name, tuple(k for k in keys if k.lower() in extract_cols)


def spec_names(spec: object) -> set[str]:
    """The columns (lower-case) whose values a specification of an ALTER can change: a
    key column among them means the islands no longer describe the table's keys."""
    match spec:
        case AddColumn(column) | ModifyColumn(column):
            return {column.name.lower()}
        case DropColumn(name):
            return {name.lower()}
        case ChangeColumn(old, column):
            return {old.lower(), column.name.lower()}
        case RenameColumn(old, new):
            return {old.lower(), new.lower()}
    return set()


def how_written(merge: int, append: int, mixed: bool) -> str:
    """How a target's split winners are written, from the split's counts: ``append``
    (new keys alone: no MERGE at all), ``split`` (``sink.append_mixed``: the new keys
    appended, the rest MERGEd, two commits), ``merge`` (one MERGE of every winner: a batch
    that writes keys the table may hold needs its MERGE anyway, and a second commit costs
    more than the new keys add to it, benchmarks.md; or nothing to append)."""
    if not merge:
        return "append" if append else "merge"
    return "split" if mixed and append else "merge"


def coalesce(ranges: list[Interval], limit: int) -> list[Interval]:
    """The union of ``ranges`` as sorted disjoint ranges, at most ``limit`` of them: when
    there are more, the smallest gaps between neighbours are filled (a superset, never a
    subset, of the union)."""
    merged: list[list[int]] = []
    for a, b in sorted(ranges):
        if merged and a <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    if len(merged) > max(1, limit):
        # keep the (limit - 1) widest gaps as the separators
        gaps = sorted(range(1, len(merged)), key=lambda i: merged[i][0] - merged[i - 1][1])
        cuts = sorted(gaps[len(gaps) - (max(1, limit) - 1) :]) if limit > 1 else []
        out: list[Interval] = []
        start = 0
        for cut in [*cuts, len(merged)]:
            out.append((merged[start][0], max(m[1] for m in merged[start:cut])))
            start = cut
        return out
    return [(a, b) for a, b in merged]


@dataclass
class KeyMarks:
    """One target's islands (see the module's text): ``key`` is ``o`` and ``prefix`` the
    extract columns of the key, as the schema named them when the islands were read."""

    key: str
    prefix: tuple[str, ...]
    islands: dict[Prefix, list[Interval]] = field(default_factory=dict)

    def limit(self) -> int:
        return 1 if self.prefix else ISLANDS

    def add(self, p: Prefix, ranges: list[Interval]) -> None:
        """``ranges`` of keys with prefix ``p`` may now be in the table."""
        if ranges:
            self.islands[p] = coalesce([*self.islands.get(p, []), *ranges], self.limit())

    def fits(self, schema: TableSchema, extract: Extract) -> bool:
        """Whether the target's key is still the one these islands were read for."""
        space = key_space(schema, extract)
        return space is not None and space == (self.key, self.prefix)

    def free_sql(self, key_sql: str) -> str:
        """A Spark SQL condition, true where the key ``key_sql`` (an expression of ``o``)
        is outside every island of the empty prefix (a key without a prefix)."""
        assert not self.prefix, "a key with a prefix is judged through bounds_rows()"
        k = f"CAST({key_sql} AS DECIMAL(20,0))"
        inside = " OR ".join(f"{k} BETWEEN {a}BD AND {b}BD" for a, b in self.islands.get((), []))
        return f"({k} IS NOT NULL AND NOT ({inside}))" if inside else f"({k} IS NOT NULL)"

    def bounds_rows(self) -> list[tuple[Any, ...]]:
        """Per prefix with keys: its values, then the lowest and highest key (one island),
        as decimals (a key column may be BIGINT UNSIGNED)."""
        return [(*p, Decimal(r[0][0]), Decimal(r[-1][1])) for p, r in self._in_order() if r]

    def _in_order(self) -> list[tuple[Prefix, list[Interval]]]:
        # a prefix value may be NULL (None): ordered by its JSON text
        return sorted(self.islands.items(), key=lambda kv: json.dumps(kv[0]))

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "prefix": list(self.prefix),
            "islands": [[list(p), [[str(a), str(b)] for a, b in r]] for p, r in self._in_order()],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KeyMarks:
        return cls(
            data["key"],
            tuple(data["prefix"]),
            {tuple(p): [(int(a), int(b)) for a, b in r] for p, r in data["islands"]},
        )


class Marks:
    """Every target's islands, as the batch's saved state keeps them (``to_json``)."""

    def __init__(self, saved: dict[str, Any] | None = None) -> None:
        self.targets: dict[str, KeyMarks] = {
            t: KeyMarks.from_json(m) for t, m in (saved or {}).items()
        }

    def get(self, target: str) -> KeyMarks | None:
        return self.targets.get(target)

    def put(self, target: str, marks: KeyMarks) -> None:
        self.targets[target] = marks

    def drop(self, target: str) -> None:
        self.targets.pop(target, None)

    def to_json(self) -> dict[str, Any]:
        return {t: m.to_json() for t, m in sorted(self.targets.items())}

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return json.dumps(self.to_json())
