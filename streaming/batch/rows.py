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
from schemas.storage import limit
from streaming.batch.row_fit import ShardColumns, ahead_sql, keyless_sql, with_shard_columns
from streaming.config import SourceSettings, anchored
from streaming.sql.quoting import ident, map_get, string
from streaming.sql.spark_types import (
    debezium_member_expr,
    limit_sql,
    literal_expr,
    value_expr,
    zero_date_sql,
)

__all__ = [
    "ahead_of_ddl",
    "merge_source",
    "no_ddl_sql",
    "project_actions",
    "read_ahead_sql",
    "renamed_keys",
]


def renamed_keys(image: str) -> str:
    """``image`` (a ``map<string,string>`` expression) with the column names of a row
    positioned before column renames of its shard renamed as they did. ``_renames`` (from
    the row plan: ``array<struct<pos, pairs: map old -> new>>``, in order) is applied in
    order, so a chain a -> b -> c takes an old row's ``a`` to ``c``; the expression is the
    same whatever the number of shards and renames.

    A name a rename takes that the row still holds, not renamed by the same statement, is
    a column dropped between the row and the rename (the table had no such column when
    the rename ran; one renamed away earlier was renamed in the row too): its value is
    the dropped column's and leaves the image (``DROP COLUMN status`` then ``RENAME
    COLUMN status_new TO status``: an older row's ``status`` is not the new one).

    The plan ends ``_renames`` with a rename of nothing at the latest of their positions
    (``streaming.batch.plan``): a row at or after it goes through none, and is not run
    through the lambdas, which Spark evaluates interpreted, reading its session settings
    for every field of every element. Renames are kept per shard for late rows, so without
    this every row of every batch after a rename took that path (a projection of 250,000
    rows: 1.46-1.76 s against 1.75-2.28 s; docs/benchmarks.md). A row before it skips the
    rename of nothing inside the fold too (500,000 rows before one rename: 5.7-7.1 s
    against 8.3-8.6 s)."""
    return (
        f"CASE WHEN _renames IS NULL OR size(_renames) = 0 THEN {image} "
        f"WHEN _okey >= element_at(_renames, -1).pos THEN {image} "
        f"ELSE aggregate(_renames, {image}, "
        "(acc, r) -> CASE WHEN size(r.pairs) > 0 AND _okey < r.pos "
        "THEN transform_keys(map_filter(acc, (k, v) -> map_contains_key(r.pairs, k) "
        "OR NOT array_contains(map_values(r.pairs), k)), "
        "(k, v) -> coalesce(r.pairs[k], k)) ELSE acc END) END"
    )


def ahead_of_ddl(known: str) -> str:
    """Why a key action cannot be written yet, or NULL: an upsert whose image names a
    column the downstream lacks (``known``: an array of the downstream's lower-cased data
    column names) is ahead of a DDL of its shard that has not arrived. Rows of a shard that
    projects (an operator skipped its DDL, or the row is behind its shard's last ALTER)
    are never ahead: their extra values are dropped."""
    unknown = (
        f"array_join(filter(map_keys(_change.img), k -> NOT array_contains({known}, k)), ', ')"
    )
    return (
        f"CASE WHEN _change.a = 'u' AND NOT _project AND {unknown} <> '' THEN "
        "concat('row of shard ', source, '.', db, '.', tbl, ' has column(s) ', "
        f"{unknown}, ' that the target lacks') END"
    )


def project_actions(
    rows: DataFrame,
    schema: TableSchema,
    extract: Extract,
    project_all: bool = False,
    shards: list[ShardColumns] | None = None,
    judged: bool = False,
    dialect: str | None = None,
) -> DataFrame:
    """Every event's key actions, projected onto the downstream columns, with
    ``_action``, ``_okey``, ``_sub`` and ``_reason`` (not null: the action cannot be
    written, and why); the event's own columns are kept for the dead letters. Row plan
    columns, where ``rows`` has them: ``_renames`` (see :func:`renamed_keys`),
    ``_last_alter`` (a row before it loses the values of columns the target no longer
    has), ``_project``. With ``shards`` (each shard's columns now), a row after its
    shard's last ALTER that does not fit its own shard's columns is ahead of a DDL too, and
    a row without its key is a dead letter (``streaming.batch.row_fit``). ``judged``: the
    caller already knows that no row is ahead of a DDL (the fast path judged every shard's
    sets of named columns, ``streaming.batch.writer.Writer.fast_targets``), so ``_reason`` is
    NULL and the per-row checks behind it (the shard columns' join included) are left
    out. ``dialect``: the targets are a database's tables (``sink.dialect``), whose
    columns refuse more values than Delta's (``schemas.storage.limit``): those are unfit
    too."""
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
    planned = "_renames" in rows.columns
    # One projection for the three (each withColumn is an analysis of the whole plan).
    project = (
        F.coalesce(F.col("_project"), F.lit(False))
        if "_project" in rows.columns
        else F.lit(bool(project_all))
    )
    if "_last_alter" in rows.columns:
        # A row before its shard's last ALTER that names a column the target lacks is
        # behind that DDL (the column was dropped since), not ahead of a missing one.
        project = project | F.coalesce(F.col("_okey") < F.col("_last_alter"), F.lit(False))
    df = rows.withColumns(
        {
            "_after": F.expr(
                renamed_keys(lower.format("after")) if planned else lower.format("after")
            ),
            "_before": F.expr(
                renamed_keys(lower.format("before")) if planned else lower.format("before")
            ),
            "_project": project,
        }
    )
    checked = bool(shards) and not judged  # each row checked against its shard's columns
    if checked:
        df = with_shard_columns(rows.sparkSession, df, shards or [])
    key_changed = (
        " OR ".join(
            f"NOT ({map_get('_before', k.lower())} <=> {map_get('_after', k.lower())})"
            for k in upstream_key
        )
        or "false"
    )
    df = df.withColumn(
        "_change",
        F.explode(
            F.expr(
                "filter(array("
                f"CASE WHEN op = 'd' OR (op = 'u' AND ({key_changed})) "
                "THEN named_struct('a', 'd', 'img', _before, 'sub', 0) END, "
                "CASE WHEN op IN ('c', 'r', 'u') "
                "THEN named_struct('a', 'u', 'img', _after, 'sub', 1) END), x -> x IS NOT NULL)"
            )
        ),
    )
    reason = "CAST(NULL AS STRING)" if judged else ahead_of_ddl(known)
    if checked:  # ahead of its own shard's DDL, whether or not the target has the column
        reason = f"coalesce({reason}, CASE WHEN _change.a = 'u' AND NOT _project THEN " + (
            f"{ahead_sql('_change.img')} END)"
        )
    df = df.withColumn("_reason", F.expr(reason))
    # An ENUM/SET value of a Debezium row read from the binlog is the member as Debezium's
    # own DDL parser kept it (backslash escapes left in): mapped back to the member by the
    # column's members (schemas.debezium_enum). Snapshot rows hold the member itself.
    binlog = (
        "(format = 'debezium' AND op IN ('c', 'u', 'd'))"
        if {"format", "op"} <= set(rows.columns)
        else "false"
    )
    # Bytes, BIT and spatial values are written differently by each CDC tool.
    fmt = "format" if "format" in rows.columns else None
    projected = []
    unfit = []
    for col in schema.columns:
        if col.key in extra:
            projected.append(F.col(extra[col.key]).alias(f"_c_{col.key}"))
            continue
        got = map_get("_change.img", col.key)
        fill = literal_expr(col.type, col.fill_sql())
        value = value_expr(col.type, debezium_member_expr(col.type, got, binlog), fmt)
        projected.append(
            F.expr(
                f"CASE WHEN map_contains_key(_change.img, {string(col.key)}) "
                f"THEN {value} ELSE {fill} END"
            ).alias(f"_c_{col.key}")
        )
        why = string(f" of column {col.name} does not fit the target type {col.type.type_sql()}")
        # Read from the projected value, computed once: a value the image holds (not
        # null) that came out NULL did not convert (a column the image lacks took its
        # fill, and the image's own value is NULL then).
        projected_value = ident(f"_c_{col.key}")
        refused = f"{projected_value} IS NULL"
        if col.type.base in ("DATE", "DATETIME", "TIMESTAMP"):  # the zero date is NULL
            refused += f" AND NOT {zero_date_sql(got)}"
        bound = limit(col.type, dialect, schema.charset)
        if bound is not None:  # a database refuses more than the Delta type does
            refused += f" OR {limit_sql(bound, projected_value)}"
        refused = f"{got} IS NOT NULL AND ({refused})"
        unfit.append(f"WHEN {refused} THEN concat('value ', {got}, {why})")
    # A row is never written under a key it does not carry (its delete, for op d).
    keys = [k.lower() for k in upstream_key]
    keyless = (
        f"CASE WHEN _change.a = 'u' THEN {keyless_sql('_change.img', keys, 'after')} "
        f"WHEN op = 'd' THEN {keyless_sql('_change.img', keys, 'before')} END"
    )
    keep = [
        c
        for c in rows.columns
        if not c.startswith("_") or c in ("_okey", "_version", "_fate", "_target")
    ]
    values = [F.col(ident(f"_c_{c.key}")) for c in schema.columns]
    # Two projections: the values first, then the checks that read them (Spark keeps the
    # two apart, as a value read twice is not inlined twice; each cast runs once per row).
    return df.select(*keep, *projected, "_change", "_reason").select(
        *keep,
        *values,
        F.col("_change.a").alias("_action"),
        F.col("_change.sub").alias("_sub"),
        F.col("_reason"),
        # A value that cannot be stored (malformed for the column's type): a dead letter.
        F.expr(
            f"coalesce({keyless}, "
            + (
                f"CASE WHEN _change.a = 'u' AND _reason IS NULL THEN CASE {' '.join(unfit)} END END"
                if unfit
                else "CAST(NULL AS STRING)"
            )
            + ")"
        ).alias("_unfit"),
    )


def read_ahead_sql(sources: list[SourceSettings]) -> str:
    """A SQL condition on an event's ``topic``: it came from one of ``sources``."""
    terms = []
    for s in sources:
        if s.pattern:
            terms.append(f"topic RLIKE {string(anchored(s.pattern))}")
        else:
            terms.append(f"topic IN ({', '.join(string(t) for t in s.topics)})")
    return " OR ".join(f"({t})" for t in terms) or "false"


def no_ddl_sql(caught: list[SourceSettings]) -> str:
    """``_unfit`` of a projected row, where a row ahead of a DDL (``_reason``) that no DDL
    can explain is a dead letter too: it came from a source whose schema-change topics the
    batch read to their end (``caught``: ``streaming.source.caught_up``). Such a row (a malformed
    record, a column no DDL added) must not hold the rows after it."""
    if not caught:
        return "_unfit"
    why = string(
        "; no DDL of its shard explains it (its schema-change topics were read to the end)"
    )
    return (
        f"CASE WHEN _unfit IS NULL AND _reason IS NOT NULL AND ({read_ahead_sql(caught)}) "
        f"THEN concat(_reason, {why}) ELSE _unfit END"
    )


def merge_source(projected: DataFrame, schema: TableSchema) -> DataFrame:
    """The MERGE source: downstream columns and ``_action``, the last action per key."""
    cols = [F.col(ident(f"_c_{c.key}")).alias(c.name) for c in schema.columns]
    src = projected.select(*cols, "_action", "_okey", "_sub", "topic", "partition")
    key_names = list(schema.primary_key) or list(schema.column_names())
    # A total order, so that a batch run again picks the same winner: the position, then
    # the action within the event, then where the record sits in Kafka. Positions of
    # different upstream servers (two shards writing one downstream key) compare by their
    # values (binlog file name and offset), which no clock orders: the tie-breakers make
    # the choice deterministic, not meaningful (docs/ordering.md).
    latest = Window.partitionBy(*[F.col(ident(k)) for k in key_names]).orderBy(
        F.col("_okey").desc(), F.col("_sub").desc(), F.col("topic").desc(),
        F.col("partition").desc(),
    )  # fmt: skip
    return (
        src.withColumn("_rn", F.row_number().over(latest))
        .filter("_rn = 1")
        .drop("_rn", "_okey", "_sub", "topic", "partition")
    )
