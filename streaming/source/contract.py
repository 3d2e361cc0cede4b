"""The internal event form in Spark: what every CDC format decodes to.

One row per upstream change. Spark decodes Kafka records into :data:`EVENT_SCHEMA` in
the JVM (``streaming.source.decode``); Python code (fixtures, the producer, the reference
decoder) uses :class:`schemas.events.ShardEvent`, which has the same fields. Records that cannot be
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
  The keys of an image are exactly the columns the event names: a column sent as JSON
  ``null`` is a key with a null value, a column the event leaves out is no key. Only a
  column the event does not name may take a default downstream (``streaming.batch.row_fit``).
- ``pos_file``, ``pos``, ``pos_row``: the binlog position (file, offset, row in event);
  ``gtid`` when known; ``ts_ms``: the source commit time in ms (maxwell's seconds
  converted). Together they order one shard's events across topics.
- ``schema_fp``: a fingerprint of the row's schema as the connector sent it (Debezium with
  ``schemas.enable``: a hash of the value schema's ``after`` fields), None when unknown. A
  row whose fingerprint changed proves a DDL came before it.
- ``row_schema``: for rows of online-DDL shadow tables only (gh-ost ``_t_gho``, pt-osc
  ``_t_new``): Debezium's, the text the fingerprint hashes: per row field ``[field, type,
  name, optional, parameters]`` as canonical JSON (``schemas.connect.row_schema_text``);
  canal-json's, ``mysqlType`` as ``[[column, MySQL type], ...]`` in column order; None
  otherwise. A cut-over whose shadow's CREATE the job never read takes the shadow's
  schema from it.
- ``snapshot``: True for rows of an initial snapshot.
- ``topic``, ``partition``, ``offset``: the Kafka record the event came from;
  ``format``: ``debezium``, ``canal`` or ``maxwell``.
"""

from __future__ import annotations

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

__all__ = ["DEAD_LETTER_SCHEMA", "EVENT_SCHEMA"]

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
        StructField("row_schema", StringType(), True),
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
