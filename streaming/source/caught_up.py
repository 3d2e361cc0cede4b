"""Whether a micro-batch read its sources' schema-change topics to their end.

A row that needs a DDL its job has not read (it names a column its shard lacks, it lacks
one its shard has) is ahead of that DDL only if the DDL can still come. Debezium writes a
table's DDL to the schema-change topic before the rows that follow it, so once a batch has
read the schema-change topics as far as they go, the DDL of every row it read is in it,
but for records still in flight between Kafka's partitions. This module says, per
configured source, whether that holds for the running batch:

- the batch's end offsets are those Spark wrote, before running the batch, in its offsets
  log (``CHECKPOINT/spark/offsets/<batch>``: a line per Kafka source of the query, in plan
  order, as ``streaming.job.read_kafka`` built it);
- their latest offsets now come from the driver's long-lived admin client
  (``streaming.source.driver_kafka``), configured as Spark's Kafka source is
  (``kafka.bootstrap``, ``kafka.options``), so any security setup that reads the data
  reads them too;
- a source is *caught up* when no schema-change topic-partition has grown since the
  batch's offsets were fixed, and they were fixed at least ``ddl_grace_ms`` ago (a DDL
  record Kafka had not appended yet when the batch was planned, though the rows after it
  were, has had that long to arrive). Its rows that still need a DDL are then dead letters
  (``streaming.batch.rows.no_ddl_sql``) and its waiting shards stop waiting.

Sources whose schema-change topics are not known (canal, maxwell: DDL shares the data
topics) are never caught up: their rows wait for the DDL as before.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from pyspark.sql import SparkSession

from streaming.config import Settings, SourceSettings, anchored
from streaming.fs.hadoop import HadoopFs, join
from streaming.source.offsets_log import kafka_offsets, parse_offsets_log

__all__ = [
    "DEBEZIUM_SCHEMA_TOPICS",
    "CaughtUp",
    "client_props",
    "offsets_log",
    "schema_topic_regex",
    "topics_of",
]

log = logging.getLogger("shardmerge.caught_up")

# Debezium names its schema-change topic after the connector's ``topic.prefix`` and every
# data topic ``prefix.db.table``: among a source's topics, those without a dot carry DDL.
DEBEZIUM_SCHEMA_TOPICS = r"[^.]+"


def schema_topic_regex(source: SourceSettings) -> str | None:
    """The regex (unanchored) of ``source``'s schema-change topics, or None (unknown)."""
    if source.schema_pattern is not None:
        return source.schema_pattern
    if source.format == "debezium":
        return DEBEZIUM_SCHEMA_TOPICS
    return None


class CaughtUp:
    """Per batch, which configured sources were read to the end of their schema-change
    topics, asked of Kafka from the driver's JVM."""

    def __init__(self, spark: SparkSession, settings: Settings) -> None:
        self.spark = spark
        self.settings = settings
        self.layout: list[bool] = [False] * len(settings.sources)  # set by build_query

    def sources(self, batch: int, logged: tuple[int, list[str]] | None) -> list[SourceSettings]:
        """The configured sources caught up in ``batch`` (see the module docstring);
        ``logged``: the batch's :func:`offsets_log` (read once per batch by its caller)."""
        known = [schema_topic_regex(s) for s in self.settings.sources]
        if not any(known):
            return []
        if logged is None:
            return []
        planned, lines = logged
        age = int(time.time() * 1000) - planned
        if age < self.settings.ddl_grace_ms:
            log.info(
                "batch %d was planned %d ms ago (ddl_grace_ms %d): records may still be in "
                "flight to its schema-change topics; rows that need a DDL wait for it",
                batch, age, self.settings.ddl_grace_ms,
            )  # fmt: skip
            return []
        wanted = sum(2 if split else 1 for split in self.layout)
        if self.settings.coordination is not None:
            wanted += 1  # the group's tick source, last (streaming.job.read_kafka)
        if len(lines) != wanted:
            log.warning(
                "batch %d: the offsets log has %d sources, the query %d: no source counts as "
                "caught up with its schema-change topics",
                batch, len(lines), wanted,
            )  # fmt: skip
            return []
        ends: list[dict[tuple[str, int], int]] = []
        at = 0
        for split, regex in zip(self.layout, known, strict=True):
            line = lines[at + 1] if split else lines[at]
            at += 2 if split else 1
            if regex is None:
                ends.append({})
                continue
            pattern = re.compile(anchored(regex))
            found = kafka_offsets(line)
            ends.append({tp: o for tp, o in found.items() if pattern.fullmatch(tp[0])})
        latest = self._latest({tp for e in ends for tp in e})
        out = []
        for source, regex, end in zip(self.settings.sources, known, ends, strict=True):
            if regex is None or not end:
                continue
            grown = {tp: (o, latest.get(tp)) for tp, o in end.items() if latest.get(tp) != o}
            if grown:
                log.info(
                    "batch %d: schema-change topics of %s grew since the batch was planned "
                    "(offset read, latest): %s",
                    batch, _name(source), grown,
                )  # fmt: skip
                continue
            out.append(source)
        return out

    def _latest(self, partitions: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
        from streaming.source.driver_kafka import driver_kafka

        return driver_kafka(self.spark, self.settings).latest_offsets(partitions)


def client_props(spark: SparkSession, settings: Settings, known: set[str] | None = None) -> Any:
    """``java.util.Properties`` for a Kafka client in the driver's JVM, configured as Spark's
    Kafka source is (``kafka.bootstrap``, ``kafka.options``), so any security setup that
    reads the data works for it too; ``known``: keep only these option names (a client
    logs a warning for each setting it does not know)."""
    jvm: Any = spark._jvm
    props = jvm.java.util.Properties()
    props.setProperty("bootstrap.servers", settings.kafka.bootstrap)
    for key, secret in settings.kafka.options.items():
        if known is None or key in known:
            props.setProperty(key, secret.get_secret_value())
    return props


def offsets_log(
    spark: SparkSession, checkpoint: str, batch: int | None = None
) -> tuple[int, list[str]] | None:
    """When Spark planned ``batch`` (default: the latest) of the streaming ``checkpoint``, in
    ms, and its offsets, a line per source of the query; None when it has no such batch."""
    folder = join(checkpoint, "offsets")
    fs = HadoopFs(spark, folder)
    if batch is None:
        batches = [int(n) for n in fs.names(folder) if n.isdigit()]
        if not batches:
            return None
        batch = max(batches)
    uri = join(folder, str(batch))
    if not fs.exists(uri):
        return None  # a batch not run by a streaming query (a test calling the processor)
    return parse_offsets_log(fs.read(uri).decode("utf-8"))


def topics_of(line: str) -> set[str]:
    """The topics of a source's line in the offsets log."""
    return {topic for topic, _ in kafka_offsets(line)}


def _name(source: SourceSettings) -> str:
    return source.pattern or ",".join(source.topics)
