"""The internal event form: what every CDC format decodes to, in Spark and in Python.

One row per upstream change. Spark decodes Kafka records into :data:`EVENT_SCHEMA` in
the JVM (``streaming.decode``); Python code (fixtures, the producer, the DDL path on the
driver) uses :class:`ShardEvent`, which has the same fields. Records that cannot be
decoded become :data:`DEAD_LETTER_SCHEMA` rows instead, with the reason.

Fields:
- ``source``, ``db``, ``tbl``: the shard (``ShardId(source, db, tbl)``). ``source`` is the
  CDC source id: Debezium's ``source.name`` (the connector's topic.prefix); for canal and
  maxwell, the source configured for the topic.
- ``op``: ``c`` insert, ``u`` update, ``d`` delete, ``r`` snapshot read, ``t`` truncate,
  ``ddl`` a DDL statement (in ``ddl``).
- ``before``/``after``: the row images as JSON objects (column -> value), values already
  normalised: DECIMAL as a decimal string, canal's strings converted by ``mysqlType``,
  temporal values as the connector gives them. None where the op has no such image.
- ``pos_file``, ``pos``, ``pos_row``: the binlog position (file, offset, row in event);
  ``gtid`` when known; ``ts_ms``: the source commit time in ms (maxwell's seconds
  converted). Together they order one shard's events across topics.
- ``schema_fp``: a fingerprint of the row's schema as the connector sent it (Debezium with
  ``schemas.enable``: a hash of the value schema's ``after`` fields), None when unknown. A
  row whose fingerprint changed proves a DDL came before it.
- ``snapshot``: True for rows of an initial snapshot.
- ``topic``, ``partition``, ``offset``: the Kafka record the event came from;
  ``format``: ``debezium``, ``canal`` or ``maxwell``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

__all__ = ["DEAD_LETTER_SCHEMA", "EVENT_SCHEMA", "DeadLetter", "Op", "ShardEvent"]

Op = Literal["c", "u", "d", "r", "t", "ddl"]

EVENT_SCHEMA = StructType(
    [
        StructField("source", StringType(), False),
        StructField("db", StringType(), False),
        StructField("tbl", StringType(), False),
        StructField("op", StringType(), False),
        StructField("before", StringType(), True),
        StructField("after", StringType(), True),
        StructField("ddl", StringType(), True),
        StructField("pos_file", StringType(), True),
        StructField("pos", LongType(), True),
        StructField("pos_row", IntegerType(), True),
        StructField("gtid", StringType(), True),
        StructField("ts_ms", LongType(), True),
        StructField("schema_fp", StringType(), True),
        StructField("snapshot", BooleanType(), False),
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("offset", LongType(), False),
        StructField("format", StringType(), False),
    ]
)

DEAD_LETTER_SCHEMA = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("offset", LongType(), False),
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("format", StringType(), False),
        StructField("reason", StringType(), False),
        StructField("seen_at", TimestampType(), False),
    ]
)


class ShardEvent(BaseModel):
    """One decoded event, in Python (same fields as :data:`EVENT_SCHEMA`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str
    db: str
    tbl: str
    op: Op
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    ddl: str | None = None
    pos_file: str | None = None
    pos: int | None = None
    pos_row: int | None = None
    gtid: str | None = None
    ts_ms: int | None = None
    schema_fp: str | None = None
    snapshot: bool = False
    topic: str = ""
    partition: int = 0
    offset: int = 0
    format: Literal["debezium", "canal", "maxwell"] = "debezium"


class DeadLetter(BaseModel):
    """A record that could not be decoded, kept with the reason."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    format: str
    reason: str
