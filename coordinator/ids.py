"""Value objects that name things: shards and targets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Position", "ShardId", "TargetId"]

# A position in a shard's event stream, opaque to the coordinator: the memory engine uses
# step numbers, the streaming job (Kafka partition, offset) pairs. It must be JSON-able and
# ordered within one shard; the coordinator only stores positions and hands them back.
Position = Any


@dataclass(frozen=True, order=True)
class ShardId:
    """One upstream table: ``source.db.table`` (source = the CDC source / server id)."""

    source: str
    db: str
    table: str

    def __str__(self) -> str:
        return f"{self.source}.{self.db}.{self.table}"

    @classmethod
    def parse(cls, text: str) -> ShardId:
        parts = text.split(".")
        if len(parts) != 3 or not all(parts):
            raise ValueError(f"a shard is written source.db.table, got {text!r}")
        return cls(*parts)

    def with_table(self, table: str, db: str | None = None) -> ShardId:
        return ShardId(self.source, db or self.db, table)


@dataclass(frozen=True, order=True)
class TargetId:
    """The downstream table every shard of a logical table is merged into: ``db.table``."""

    db: str
    table: str

    def __str__(self) -> str:
        return f"{self.db}.{self.table}"

    @classmethod
    def parse(cls, text: str) -> TargetId:
        db, sep, table = text.partition(".")
        if not sep or not db or not table or "." in table:
            raise ValueError(f"a target is written db.table, got {text!r}")
        return cls(db, table)
