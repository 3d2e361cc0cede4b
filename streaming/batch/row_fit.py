"""Does a row event fit its own shard's schema at its position? In the JVM, per action.

The decoders keep every column an event names in its row images, a JSON ``null``
included (``{"c": null}`` names ``c``; ``{}`` does not), so the keys of an image are the
columns the event names. Three checks use that, against the shard's schema as the
coordinator has it now (:func:`shard_columns`):

- **ahead of its shard's DDL**: the image names a column its shard does not have yet, or
  lacks a NOT NULL column its shard has (a DROP COLUMN not seen yet). The row waits (its
  shard is held from that row on) until the DDL arrives, whether or not the target
  already has the column: another shard's default must never stand in for a value this
  shard sent, NULL included (:func:`ahead_sql`);
- **no key**: a key column missing from the image, or null, is a dead letter naming the
  column; a row is never written under an invented key (:func:`keyless_sql`);
- values that do not fit their column's type are dead letters too (``streaming.batch.rows``).

The shard check applies only to rows after the shard's last ALTER the coordinator saw:
rows before it belong to an older schema (the caller marks them ``_project``). Only a
column the event does not name is ever filled, with the target's fill value.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from coordinator.ids import ShardId
from schemas.model import TableSchema
from streaming.sql.local_frame import local_frame
from streaming.sql.quoting import map_get, string

__all__ = ["ShardColumns", "ahead_sql", "keyless_sql", "shard_columns", "with_shard_columns"]

_FACTS = (
    "source string, db string, tbl string, _shard_has array<string>, _shard_needs array<string>"
)


@dataclass(frozen=True)
class ShardColumns:
    """One shard's columns (lower-cased keys): all it has, and those a row must name (NOT
    NULL, not generated: a full row image always carries them)."""

    source: str
    db: str
    tbl: str
    has: tuple[str, ...]
    needs: tuple[str, ...]


def shard_columns(shards: list[tuple[ShardId, TableSchema]]) -> list[ShardColumns]:
    """The columns of each shard (``Coordinator.shard_schemas``: as coordination counts
    them now)."""
    out = []
    for shard, schema in shards:
        cols = schema.columns
        out.append(
            ShardColumns(
                shard.source,
                shard.db,
                shard.table,
                tuple(c.key for c in cols),
                tuple(c.key for c in cols if not c.nullable and c.generated is None),
            )
        )
    return out


def with_shard_columns(
    spark: SparkSession, rows: DataFrame, shards: list[ShardColumns]
) -> DataFrame:
    """``rows`` with ``_shard_has``/``_shard_needs`` (NULL for a shard not listed)."""
    facts = local_frame(
        spark, [(s.source, s.db, s.tbl, list(s.has), list(s.needs)) for s in shards], _FACTS
    )
    return rows.join(F.broadcast(facts), ["source", "db", "tbl"], "left")


def _names(array_sql: str) -> str:
    return f"array_join({array_sql}, ', ')"


def ahead_sql(image: str) -> str:
    """Why the upsert of ``image`` (a ``map<string,string>``) is ahead of a DDL of its
    shard, or NULL. Needs ``_shard_has``/``_shard_needs`` (see :func:`with_shard_columns`)."""
    extra = _names(f"filter(map_keys({image}), k -> NOT array_contains(_shard_has, k))")
    lacks = _names(f"filter(_shard_needs, k -> NOT map_contains_key({image}, k))")
    shard = "concat('row of shard ', source, '.', db, '.', tbl"
    return (
        f"CASE WHEN _shard_has IS NULL THEN NULL "
        f"WHEN {extra} <> '' THEN {shard}, ' names column(s) ', {extra}, "
        "' that its shard does not have yet') "
        f"WHEN {lacks} <> '' THEN {shard}, ' lacks NOT NULL column(s) ', {lacks}, "
        "' of its shard (a DROP COLUMN not seen yet?)') END"
    )


def keyless_sql(image: str, keys: list[str], which: str) -> str:
    """Why the ``which`` image (``after``/``before``) has no usable key, or NULL: the first
    key column (lower-cased names in ``keys``) it lacks or holds as null."""
    if not keys:
        return "CAST(NULL AS STRING)"
    whens = []
    for k in keys:
        key = string(k)
        whens.append(
            f"WHEN NOT map_contains_key({image}, {key}) THEN concat('key column ', {key}, "
            f"' is missing from {which} of shard ', source, '.', db, '.', tbl) "
            f"WHEN {map_get(image, k)} IS NULL THEN concat('key column ', {key}, "
            f"' is null in {which} of shard ', source, '.', db, '.', tbl)"
        )
    return f"CASE {' '.join(whens)} END"
