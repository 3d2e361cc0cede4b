"""Row events to MERGE input, in the JVM: the latest action per downstream key, every row
projected onto the downstream schema.

Each event becomes one or two *key actions*: an insert/read/update upserts its after
image; a delete deletes its before image's key; an update whose key changed also deletes
the old key. The last action per key (by source position) wins, which gives per-key order
inside a MERGE. Values are read from the images as text (``map<string,string>``, keys
lower-cased, MySQL names are case-insensitive) and cast to the Delta type; a column the
image lacks gets the downstream column's fill value (its default, NULL, or MySQL's
implicit value). A row naming a column the downstream lacks is not written: its shard
waits for the DDL it is ahead of, unless the shard is projected (an operator skipped a
DDL). A value that does not fit its column's type (``_unfit``) makes a dead letter.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from coordinator.routing import Extract
from schemas.model import TableSchema
from streaming.quoting import ident, map_get, string
from streaming.spark_types import literal_expr, value_expr

__all__ = ["Renamed", "merge_source", "project_actions", "renamed_keys"]


Renamed = tuple[str, str, str, str, tuple[tuple[str, str], ...]]


def renamed_keys(image: str, renames: list[Renamed]) -> str:
    """``image`` (a ``map<string,string>`` expression) with the column names of rows
    positioned before a column rename of their shard renamed as it did: each entry is
    (source, db, table, the rename's position as an ``_okey`` SQL struct, old/new pairs),
    applied in order, so a chain a -> b -> c takes an old row's ``a`` to ``c``."""
    for source, db, tbl, okey, pairs in renames:
        whens = " ".join(
            f"WHEN k = {string(old.lower())} THEN {string(new.lower())}" for old, new in pairs
        )
        image = (
            f"transform_keys({image}, (k, v) -> CASE WHEN source = {string(source)} AND "
            f"db = {string(db)} AND tbl = {string(tbl)} AND _okey < {okey} "
            f"THEN CASE {whens} ELSE k END ELSE k END)"
        )
    return image


def project_actions(
    rows: DataFrame,
    schema: TableSchema,
    extract: Extract,
    project_all: bool = False,
    renames: list[Renamed] | None = None,
    behind: list[tuple[str, str, str, str]] | None = None,
) -> DataFrame:
    """Every event's key actions, projected onto the downstream columns, with
    ``_action``, ``_okey``, ``_sub`` and ``_reason`` (not null: the action cannot be
    written, and why); the event's own columns are kept for the dead letters. Rows behind
    a column rename take the new names (``renames``, see :func:`renamed_keys`); rows
    behind their shard's last ALTER (``behind``: source, db, table, position) lose the
    values of columns the target no longer has."""
    extra = {
        (extract.source_column or "").lower(): "source",
        (extract.db_column or "").lower(): "db",
        (extract.table_column or "").lower(): "tbl",
    }
    extra.pop("", None)
    data_cols = [c for c in schema.columns if c.key not in extra]
    known = "array(" + ", ".join(string(c.key) for c in data_cols) + ")"
    upstream_key = [k for k in schema.primary_key if k.lower() not in extra]

    lower = "transform_keys(from_json({0}, 'map<string,string>'), (k, v) -> lower(k))"
    df = rows.withColumn(
        "_after", F.expr(renamed_keys(lower.format("after"), renames or []))
    ).withColumn("_before", F.expr(renamed_keys(lower.format("before"), renames or [])))
    if "_project" not in df.columns:
        df = df.withColumn("_project", F.lit(project_all))
    if behind:
        # A row before its shard's last ALTER that names a column the target lacks is
        # behind that DDL (the column was dropped since), not ahead of a missing one.
        late = " OR ".join(
            f"(source = {string(s)} AND db = {string(d)} AND tbl = {string(t)} AND _okey < {okey})"
            for s, d, t, okey in behind
        )
        df = df.withColumn("_project", F.expr(f"_project OR ({late})"))
    key_changed = (
        " OR ".join(
            f"NOT ({map_get('_before', k.lower())} <=> {map_get('_after', k.lower())})"
            for k in upstream_key
        )
        or "false"
    )
    df = df.withColumn(
        "_acts",
        F.expr(
            "filter(array("
            f"CASE WHEN op = 'd' OR (op = 'u' AND ({key_changed})) "
            "THEN named_struct('a', 'd', 'img', _before, 'sub', 0) END, "
            "CASE WHEN op IN ('c', 'r', 'u') "
            "THEN named_struct('a', 'u', 'img', _after, 'sub', 1) END), x -> x IS NOT NULL)"
        ),
    )
    df = df.withColumn("_act", F.explode("_acts")).drop("_acts")
    unknown = f"array_join(filter(map_keys(_act.img), k -> NOT array_contains({known}, k)), ', ')"
    df = df.withColumn(
        "_reason",
        F.expr(
            f"CASE WHEN _act.a = 'u' AND NOT _project AND {unknown} <> '' THEN "
            "concat('row of shard ', source, '.', db, '.', tbl, ' has column(s) ', "
            f"{unknown}, ' that the target lacks') END"
        ),
    )
    projected = []
    unfit = []
    for col in schema.columns:
        if col.key in extra:
            projected.append(F.col(extra[col.key]).alias(f"_c_{col.key}"))
            continue
        got = map_get("_act.img", col.key)
        fill = literal_expr(col.type, col.fill_sql())
        value = value_expr(col.type, got)
        projected.append(
            F.expr(
                f"CASE WHEN map_contains_key(_act.img, {string(col.key)}) "
                f"THEN {value} ELSE {fill} END"
            ).alias(f"_c_{col.key}")
        )
        why = string(f" of column {col.name} does not fit the target type {col.type.type_sql()}")
        unfit.append(
            f"WHEN {got} IS NOT NULL AND ({value}) IS NULL THEN concat('value ', {got}, {why})"
        )
    keep = [c for c in rows.columns if not c.startswith("_") or c in ("_okey", "_version")]
    return df.select(
        *keep,
        *projected,
        F.col("_act.a").alias("_action"),
        F.col("_act.sub").alias("_sub"),
        F.col("_reason"),
        # A value that cannot be stored (malformed for the column's type): a dead letter.
        F.expr(
            f"CASE WHEN _act.a = 'u' AND _reason IS NULL THEN CASE {' '.join(unfit)} END END"
            if unfit
            else "CAST(NULL AS STRING)"
        ).alias("_unfit"),
    )


def merge_source(projected: DataFrame, schema: TableSchema) -> DataFrame:
    """The MERGE source: downstream columns and ``_action``, the last action per key."""
    cols = [F.col(ident(f"_c_{c.key}")).alias(c.name) for c in schema.columns]
    src = projected.select(*cols, "_action", "_okey", "_sub")
    key_names = list(schema.primary_key) or list(schema.column_names())
    latest = Window.partitionBy(*[F.col(ident(k)) for k in key_names]).orderBy(
        F.col("_okey").desc(), F.col("_sub").desc()
    )
    return (
        src.withColumn("_rn", F.row_number().over(latest))
        .filter("_rn = 1")
        .drop("_rn", "_okey", "_sub")
    )
