"""Decode Kafka records of one CDC format into events, in Spark's JVM.

:func:`decode` takes the columns of Spark's Kafka source (``key``, ``value``, ``topic``,
``partition``, ``offset``; others are ignored) and returns two DataFrames: the events
(:data:`~streaming.source.contract.EVENT_SCHEMA`) and the dead letters
(:data:`~streaming.source.contract.DEAD_LETTER_SCHEMA`). It is the Spark twin of the
reference decoder :func:`tests.oracle.decode_py.decode_record` and follows the same
rules (see that module): the tests decode every fixture with both and compare.

How it runs: ``from_json`` with an explicit schema per format, then Spark SQL expressions
(``transform``, ``aggregate``, ``to_json``, regexes, VARIANT for maxwell's untyped
values and canal's converted ones) built by the internal
modules ``streaming.source._decode.{debezium,canal,maxwell}``. No Python runs per row. Each
record is parsed once; every check is a branch of one ``CASE``, the first failing check
gives the dead letter's reason (``"<what> at <field path>"``), and every expression is
total (``try_cast``, ``try_element_at``...), so one bad record never fails the batch.

Order: no shuffle. Events keep the Kafka order within each topic-partition (one Spark
partition each); a record with several events (canal rows, Debezium DDL statements)
yields them in message order.

Cost: both frames derive from the same parse. When both are consumed, take them from a
persisted :func:`parse` (``split``), or Spark parses every record twice.

Differences from the reference decoder, all on malformed input: messages produced by
pydantic in Python ("Input should be a valid integer...") are worded differently here,
with the same field path; JSON syntax errors say "bad JSON (not parseable) at value"
without Python's position; scalars of the wrong JSON type inside the envelope (``"db":
3``) are read as their text; DECIMAL values beyond 38 digits (Spark's limit) are dead
letters; canal/maxwell topics without a configured source are dead letters (the
reference raises ValueError, a configuration error); maxwell's fractional numbers nested
inside a JSON column stay numbers (the reference turns them into strings).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streaming.source._decode import canal, debezium, maxwell
from streaming.source._decode.sql import EVENT_FIELDS, EVENT_TYPE, lit
from streaming.source.contract import EVENT_SCHEMA
from streaming.sql.quoting import ident

__all__ = ["FORMATS", "Format", "decode", "parse", "split"]

Format = Literal["debezium", "canal", "maxwell"]
FORMATS: tuple[Format, ...] = ("debezium", "canal", "maxwell")
_MODULES = {"debezium": debezium, "canal": canal, "maxwell": maxwell}
# Fields the filters guarantee but Spark cannot prove non-null; coalesced with a value
# that never shows, so the frames carry exactly the contract's schemas (nullable=False).
_KAFKA_TYPES = {"topic": "STRING", "partition": "INT", "offset": "BIGINT"}
_NOT_NULL_FALLBACK = {"STRING": "''", "INT": "0", "BIGINT": "0L", "BOOLEAN": "false"}


def decode(
    df: DataFrame,
    fmt: Format,
    *,
    source_for_topic: Mapping[str, str] | None = None,
) -> tuple[DataFrame, DataFrame]:
    """``(events, dead_letters)`` of the Kafka records in ``df``, decoded as ``fmt``.

    ``source_for_topic`` maps a topic to its CDC source id. Debezium takes
    ``source.name`` first (the mapping is the fallback); canal and maxwell carry no source
    id and need the mapping (a record of an unmapped topic becomes a dead letter).
    Tombstones (null value) and Debezium's ``{"schema":..., "payload":null}`` give no
    event and no dead letter; maxwell's bootstrap markers give no event.

    Raises ValueError for an unknown format, or canal/maxwell without any mapping.
    """
    return split(parse(df, fmt, source_for_topic=source_for_topic), fmt)


def parse(
    df: DataFrame,
    fmt: Format,
    *,
    source_for_topic: Mapping[str, str] | None = None,
) -> DataFrame:
    """Every record of ``df`` parsed once: ``topic``, ``partition``, ``offset``, ``_reason``
    (NULL for a good record), ``_events`` (its events, NULL for a dead letter), and the
    ``key`` and ``value`` of dead letters only (NULL for good records, so that a persisted
    frame does not keep every record's bytes). :func:`split` makes the two frames of
    :func:`decode` from it; persist it when both are consumed, and the records are parsed
    once. Arguments and errors as :func:`decode`."""
    if fmt not in _MODULES:
        raise ValueError(f"unknown CDC format {fmt!r}; known: {', '.join(FORMATS)}")
    mapping = dict(source_for_topic or {})
    if fmt != "debezium" and not mapping:
        raise ValueError(f"{fmt} records carry no source id: pass source_for_topic")
    module = _MODULES[fmt]
    source_map = (
        "map(" + ", ".join(f"{lit(t)}, {lit(s)}" for t, s in sorted(mapping.items())) + ")"
        if mapping
        else "CAST(map() AS MAP<STRING,STRING>)"
    )

    staged = (
        df.where(F.col("value").isNotNull())
        .select("key", "value", "topic", "partition", "offset")
        .withColumn("_v", F.expr("CAST(value AS STRING)"))
        .withColumn(
            "_j",
            F.expr(
                f"from_json(_v, {lit(module.PARSE_SCHEMA)}, "
                "map('columnNameOfCorruptRecord', '_corrupt'))"
            ),
        )
    )
    for adds, drops in module.stages(source_map):
        staged = staged.select("*", *[F.expr(sql).alias(name) for name, sql in adds])
        staged = staged.drop(*drops)
    staged = staged.withColumn("_reason", F.expr(module.reason_sql()))
    skip = "coalesce(_tomb, false)" if fmt == "debezium" else "false"
    return staged.select(
        "topic",
        "partition",
        "offset",
        F.expr("CASE WHEN _reason IS NOT NULL THEN key END").alias("key"),
        F.expr("CASE WHEN _reason IS NOT NULL THEN value END").alias("value"),
        "_reason",
        F.expr(
            f"CASE WHEN _reason IS NULL AND NOT {skip} "
            f"THEN CAST({module.events_sql()} AS {EVENT_TYPE}) END"
        ).alias("_events"),
    )


def split(parsed: DataFrame, fmt: Format) -> tuple[DataFrame, DataFrame]:
    """``(events, dead_letters)`` of a :func:`parse` result."""
    # No filter on _reason for the events: Spark would push it below the projection and
    # evaluate the reason twice; _events is NULL for a dead letter, and inline() of NULL
    # is no row.
    events = parsed.select("topic", "partition", "offset", F.inline("_events")).select(
        *[_event_column(f.name, fmt) for f in EVENT_SCHEMA.fields]
    )
    dead = parsed.where("_reason IS NOT NULL").select(
        F.expr("coalesce(topic, '')").alias("topic"),
        F.expr("coalesce(`partition`, 0)").alias("partition"),
        F.expr("coalesce(`offset`, 0L)").alias("offset"),
        F.col("key"),
        F.col("value"),
        F.lit(fmt).alias("format"),
        F.expr("coalesce(_reason, '')").alias("reason"),
        F.current_timestamp().alias("seen_at"),
    )
    return events, dead


def _event_column(name: str, fmt: str) -> Column:
    if name == "format":
        return F.lit(fmt).alias(name)
    field = EVENT_SCHEMA[name]
    sql_type = _KAFKA_TYPES.get(name) or dict(EVENT_FIELDS)[name]
    expr = f"CAST({ident(name)} AS {sql_type})"
    if not field.nullable:
        expr = f"coalesce({expr}, {_NOT_NULL_FALLBACK[sql_type]})"
    return F.expr(expr).alias(name)
