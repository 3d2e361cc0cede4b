"""Decisions: what the coordinator tells an engine to do, as values.

The coordinator never performs I/O. Each call returns a list of decisions that the
engine (the in-memory scenario engine or the streaming job) executes *in order*.
"""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.ids import Position, ShardId, TargetId
from schemas.changes import AlterSpec
from schemas.model import TableSchema

__all__ = [
    "ApplyDDL",
    "CreateTarget",
    "Decision",
    "Hold",
    "Release",
    "Rename",
    "Truncate",
]


@dataclass(frozen=True)
class CreateTarget:
    """Create the downstream table (if it does not exist) with this schema.

    ``statement`` is the first shard's statement that brought the target (its CREATE
    TABLE, a CREATE TABLE made from the schema known at start, or a RENAME TABLE);
    ``reason`` says which shard and how (recorded with the Delta commit, as for
    :class:`ApplyDDL`)."""

    target: TargetId
    schema: TableSchema
    statement: str = ""
    reason: str = ""


@dataclass(frozen=True)
class ApplyDDL:
    """Run these ALTER specs on the downstream table; ``schema`` is the result.

    ``statement`` is the rendered MySQL statement (for logs, the dashboard and JDBC sinks);
    ``reason`` says which shard DDL caused it.
    """

    target: TargetId
    specs: tuple[AlterSpec, ...]
    schema: TableSchema
    statement: str
    reason: str


@dataclass(frozen=True)
class Hold:
    """From ``position`` on, keep this shard's events (durably, in order) instead of
    writing them downstream."""

    target: TargetId
    shard: ShardId
    version: int
    position: Position
    reason: str


@dataclass(frozen=True)
class Release:
    """Replay the held events of a shard, in order, then write its new events again.

    Only events before ``until`` are replayed when ``until`` is set (the shard is held again
    from there). With ``project``, values of columns the downstream lacks are dropped (the
    shard's DDL was skipped by an operator); otherwise such a value is an error.
    """

    target: TargetId
    shard: ShardId
    version: int
    until: Position | None = None
    project: bool = False


@dataclass(frozen=True)
class Truncate:
    """Delete the downstream rows of one shard: those whose columns equal ``match``
    (every row of the target when ``match`` is empty). ``position`` is the TRUNCATE's
    own: the shard's rows before it are gone too, wherever they are still on their way."""

    target: TargetId
    shard: ShardId
    version: int
    match: tuple[tuple[str, str], ...]
    position: Position = None


@dataclass(frozen=True)
class Rename:
    """A shard renamed within its target (``RENAME TABLE``): it carries on under ``new``,
    and everything of it follows. Its held events (kept under ``old``) are released under
    ``new``, in their order. Downstream, every row whose extract columns equal ``match``
    (the old name's values) takes ``values`` (the new name's), in one statement, ordered
    between the shard's events before and after the rename; ``match`` is empty when there
    is nothing to rewrite: no extract column names the shard differently, or the extract
    columns do not tell it from the target's other shards (their rows cannot be told
    apart, and stay where they are). ``keys``: only the rows this predicate (a split
    move's, MySQL over the key columns) is true for follow; the shard itself stays."""

    target: TargetId
    old: ShardId
    new: ShardId
    version: int
    match: tuple[tuple[str, str], ...] = ()
    values: tuple[tuple[str, str], ...] = ()
    position: Position = None
    keys: str | None = None


Decision = CreateTarget | ApplyDDL | Hold | Release | Truncate | Rename
