"""Routing: which downstream target an upstream table belongs to.

Rules are glob patterns over ``source``, ``db`` and ``table``; the first matching rule
wins. Tables named like gh-ost / pt-osc shadow (``_t_gho``, ``_t_new``) or trash
(``_t_ghc``, ``_t_del``, ``_t_old``) tables are classified before any rule, so a broad
pattern such as ``*`` never routes them: their DDL is recorded, their rows dropped.
"""

from __future__ import annotations

import enum
import fnmatch
import re
from dataclasses import dataclass, field

from coordinator.ids import ShardId, TargetId

__all__ = ["Extract", "Route", "Router", "TableKind"]

SHADOW_TABLE = re.compile(r"^_(.+)_(?:new|gho)$")
TRASH_TABLE = re.compile(r"^_(.+)_(?:ghc|del|old)$")


class TableKind(enum.Enum):
    SHARD = "shard"  # routed to a target
    SHADOW = "shadow"  # online-DDL ghost table: DDL recorded, rows dropped
    TRASH = "trash"  # online-DDL leftover: everything dropped
    UNROUTED = "unrouted"  # no rule matches: everything dropped


@dataclass(frozen=True)
class Extract:
    """Extra downstream columns naming where a row came from; they join the primary key."""

    source_column: str | None = None
    db_column: str | None = None
    table_column: str | None = None

    def columns(self) -> tuple[str, ...]:
        return tuple(
            c for c in (self.source_column, self.db_column, self.table_column) if c is not None
        )

    def values(self, shard: ShardId) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.source_column:
            out[self.source_column] = shard.source
        if self.db_column:
            out[self.db_column] = shard.db
        if self.table_column:
            out[self.table_column] = shard.table
        return out

    def tells_apart(self, shard: ShardId, others: list[ShardId]) -> bool:
        """True when the extract values of ``shard`` differ from those of every other shard."""
        if not self.columns():
            return False
        mine = self.values(shard)
        return all(self.values(o) != mine for o in others if o != shard)


@dataclass(frozen=True)
class Route:
    """``source``/``db``/``table`` glob patterns (``*`` matches anything) to ``target``."""

    target: TargetId
    source: str = "*"
    db: str = "*"
    table: str = "*"
    extract: Extract = field(default_factory=Extract)

    def matches(self, shard: ShardId) -> bool:
        return (
            fnmatch.fnmatchcase(shard.source, self.source)
            and fnmatch.fnmatchcase(shard.db, self.db)
            and fnmatch.fnmatchcase(shard.table, self.table)
        )


@dataclass(frozen=True)
class Router:
    routes: tuple[Route, ...]

    def kind(self, shard: ShardId) -> TableKind:
        if SHADOW_TABLE.match(shard.table):
            return TableKind.SHADOW
        if TRASH_TABLE.match(shard.table):
            return TableKind.TRASH
        return TableKind.SHARD if self.route(shard) is not None else TableKind.UNROUTED

    def route(self, shard: ShardId) -> Route | None:
        if SHADOW_TABLE.match(shard.table) or TRASH_TABLE.match(shard.table):
            return None
        return next((r for r in self.routes if r.matches(shard)), None)

    def target(self, shard: ShardId) -> TargetId | None:
        route = self.route(shard)
        return route.target if route else None

    def extract(self, target: TargetId) -> Extract:
        return next((r.extract for r in self.routes if r.target == target), Extract())

    @staticmethod
    def shadow_origin(table: str) -> str | None:
        """The real table a shadow table belongs to (``_t_gho`` -> ``t``)."""
        m = SHADOW_TABLE.match(table)
        return m.group(1) if m else None
