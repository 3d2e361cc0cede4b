"""The streaming job: Kafka (Spark's own source) -> decode -> coordinate -> Delta.

Run it with ``shardmerge run --config FILE [--available-now]`` or, on a cluster,
``spark-submit ... shardmerge_main.py --config FILE`` (README, docs/cluster.md): under
spark-submit the job runs in the session Spark gives it (streaming/runtime/spark_session.py).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from shardmerge.errors import ShardMergeError
from shardmerge.printable import setup_logging
from streaming.batch.coordination import Coordination, Solo
from streaming.batch.protocol import BatchProcessor
from streaming.config import Settings, SourceSettings, anchored, load_settings
from streaming.fs.hadoop import join
from streaming.source.caught_up import offsets_log, schema_topic_regex
from streaming.source.decode import parse

__all__ = [
    "KAFKA_SOURCE_DEFAULTS",
    "anchored",
    "build_query",
    "kafka_source_options",
    "main",
    "read_kafka",
    "read_parsed",
]

log = logging.getLogger("shardmerge.job")

# Consumer settings of Spark's Kafka source, unless the user's `kafka.options` set them.
# A micro-batch reads offset ranges that exist already, so a long broker-side wait buys
# nothing, and closing a consumer waits for it (Kafka's default is 500 ms). Larger polls
# mean fewer round trips per topic-partition. The benchmark baselines read with the same.
KAFKA_SOURCE_DEFAULTS = {"fetch.max.wait.ms": "20", "max.poll.records": "5000"}


def read_kafka(
    spark: SparkSession, settings: Settings, layout: list[bool] | None = None
) -> DataFrame:
    """One stream over every configured source; ``__fmt`` tells each record's format.

    A source with a schema-change topic is read by two Kafka sources: its data topics with
    ``maxOffsetsPerTrigger``, its schema-change topics without (they hold a handful of
    records, and a rate limit shared with millions of rows would deliver most DDL after
    the rows that follow it, which then take the stash round trip). Debezium sources have
    one by default (``streaming.source.caught_up.schema_topic_regex``). The data
    source comes first: Spark asks each source for its latest offsets in plan order, so
    the schema-change topics are read at least as far as the data was written.

    A checkpoint made before a source had its schema-change reader keeps its layout (Spark
    refuses a query whose number of sources changed): the job says so and reads that
    source as before (:func:`source_layout`)."""
    split = layout if layout is not None else source_layout(spark, settings)
    frames = [
        frame
        for i, apart in enumerate(split)
        for frame in _source_frames(spark, settings, i, apart)
    ]
    if settings.coordination is not None:
        # The group's ticks for this member: a record there makes Spark run a batch when
        # the group log changed and this job has no data of its own (streaming.group.member).
        from streaming.group.member import tick_topic

        tick = ("subscribe", tick_topic(settings.coordination))
        frames.append(_kafka(spark, settings, settings.sources[0], tick, None)
                      .withColumn("__fmt", F.lit("tick")))  # fmt: skip
    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other)
    return df


def read_parsed(
    spark: SparkSession, settings: Settings, layout: list[bool] | None = None
) -> DataFrame:
    """:func:`read_kafka`, each record parsed in its source's format
    (:func:`streaming.source.decode.parse`, with ``__fmt``): what the job's ``foreachBatch`` takes.

    The parse is part of the streaming query, so Spark analyses its expressions (large:
    the envelope's JSON schema, every check of a record) once, when the query starts, not
    again for every micro-batch (measured: about a second of driver time per batch). One
    parse per format, over the union of its Kafka sources."""
    raw = read_kafka(spark, settings, layout)
    formats = sorted({s.format for s in settings.sources})
    frames = []
    for fmt in formats:
        apart = len(formats) > 1 or settings.coordination is not None  # ticks: no format
        mine = raw.filter(F.col("__fmt") == fmt) if apart else raw
        parsed = parse(mine, fmt, source_for_topic=settings.topic_sources())
        frames.append(parsed.withColumn("__fmt", F.lit(fmt)))
    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other)
    return df


def _source_frames(
    spark: SparkSession, settings: Settings, index: int, apart: bool
) -> list[DataFrame]:
    """The Kafka sources of ``settings.sources[index]``: its data topics (rate-limited)
    and, with ``apart``, its schema-change topics (not), in that order."""
    source = settings.sources[index]
    limited = settings.kafka.max_offsets_per_trigger
    subscriptions = _subscriptions(source) if apart else None
    if subscriptions is None:
        return [_kafka(spark, settings, source, _subscription(source), limited)]
    data, ddl = subscriptions
    return [
        _kafka(spark, settings, source, data, limited),
        _kafka(spark, settings, source, ddl, None),
    ]


def _subscriptions(
    source: SourceSettings,
) -> tuple[tuple[str, str], tuple[str, str]] | None:
    """The data and schema-change subscriptions of ``source``, or None when it has no
    schema-change topics of its own."""
    explicit = source.schema_pattern is not None
    pattern = schema_topic_regex(source)
    if pattern is None or not source.read_schema_ahead:
        return None  # canal and maxwell put DDL in the data topics
    schema = anchored(pattern)
    if source.pattern:
        data = ("subscribePattern", f"^(?!{schema})(?:{source.pattern})$")
        if explicit:
            return data, ("subscribePattern", schema)
        # the default reads only the source's own topics, never another connector's
        return data, ("subscribePattern", f"^(?=(?:{source.pattern})$)(?:{pattern})$")
    regex = re.compile(schema)
    names = [t for t in source.topics if not regex.match(t)]
    ddl_names = [t for t in source.topics if regex.match(t)]
    if not names or not ddl_names:
        if not explicit:
            return None  # the listed topics hold no schema-change topic
        raise ValueError(
            f"source topics {source.topics}: schema_pattern {source.schema_pattern!r} "
            "must match some of them (the schema-change topics) and not all"
        )
    return ("subscribe", ",".join(names)), ("subscribe", ",".join(ddl_names))


def source_layout(spark: SparkSession, settings: Settings) -> list[bool]:
    """Per configured source, whether its schema-change topics get a Kafka source of their
    own: yes when it has any, unless the query's checkpoint was made with fewer Kafka
    sources than that (before the default split), where such sources stay as they were."""
    return layout_for(settings, checkpoint_sources(spark, join(settings.checkpoint, "spark")))


def layout_for(settings: Settings, have: int | None) -> list[bool]:
    """:func:`source_layout` given the number of Kafka sources the checkpoint has."""
    wanted = [_subscriptions(s) is not None for s in settings.sources]
    explicit = [s.schema_pattern is not None and s.read_schema_ahead for s in settings.sources]
    if have is not None and settings.coordination is not None:
        have -= 1  # the group's tick source comes last
    if have is None or have == len(settings.sources) + sum(wanted):
        return wanted
    if have == len(settings.sources) + sum(explicit):
        for source, split, given in zip(settings.sources, wanted, explicit, strict=True):
            if split and not given:
                log.warning(
                    "source %s: its checkpoint predates the separate reader of its schema-change "
                    "topics; they share maxOffsetsPerTrigger with the data, so rows may wait in "
                    "the stash for the DDL before them (a new checkpoint reads them ahead)",
                    source.pattern or ",".join(source.topics),
                )
        return explicit
    return wanted  # another query's layout: Spark names the mismatch itself


def checkpoint_sources(spark: SparkSession, checkpoint: str) -> int | None:
    """How many sources the streaming checkpoint's latest offsets record, or None when it
    has none yet."""
    logged = offsets_log(spark, checkpoint)
    return None if logged is None else len(logged[1])


def kafka_source_options() -> dict[str, str]:
    """:data:`KAFKA_SOURCE_DEFAULTS` as options of Spark's Kafka source (``kafka.`` keys)."""
    return {f"kafka.{k}": v for k, v in KAFKA_SOURCE_DEFAULTS.items()}


def _subscription(source: SourceSettings) -> tuple[str, str]:
    if source.pattern:
        return "subscribePattern", anchored(source.pattern)
    return "subscribe", ",".join(source.topics)


def _kafka(
    spark: SparkSession,
    settings: Settings,
    source: SourceSettings,
    subscription: tuple[str, str],
    max_offsets: int | None,
) -> DataFrame:
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka.bootstrap)
        .option("startingOffsets", settings.kafka.starting_offsets)
        # CDC must never skip data silently: a gap is an error.
        .option("failOnDataLoss", "true")
        .option("includeHeaders", "true")
        # New shard tables bring new topics: notice them within seconds, not minutes.
        .option("kafka.metadata.max.age.ms", "5000")
        .option(*subscription)
    )
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", max_offsets)
    for key, value in KAFKA_SOURCE_DEFAULTS.items():
        if key not in settings.kafka.options:
            reader = reader.option(f"kafka.{key}", value)
    for key, secret in settings.kafka.options.items():
        reader = reader.option(f"kafka.{key}", secret.get_secret_value())
    return reader.load().withColumn("__fmt", F.lit(source.format))


def coordination_of(p: BatchProcessor) -> Coordination:
    """The job's coordination (streaming.batch.coordination): alone, its own coordinator; with
    ``coordination`` settings, a member of its group (its heartbeat and ticks start now)."""
    if p.settings.coordination is None:
        return Solo(p.coordinator_from)
    from streaming.group.coordination import GroupCoordination
    from streaming.group.member import GroupMember, Ticker

    member = GroupMember(p.spark, p.settings, p.app_id)
    member.start(Ticker(p.spark, p.settings))
    return GroupCoordination(member, p.router)


def check_runnable(settings: Settings) -> None:
    """Refuse settings the streaming job would not honour: a shard split by several moves
    at once (the pure core and the memory engine run that; the job tells a row's key apart
    for one move per shard)."""
    seen: dict[str, str] = {}
    for m in settings.moves:
        for shard in m.from_:
            if shard in seen:
                raise ShardMergeError(
                    f"moves {seen[shard]} and {m.id} both split {shard}, which the streaming "
                    "job does not run yet (docs/moves.md, docs/status.md): one move per "
                    "shard at a time. Declare the second once the first switched"
                )
            seen[shard] = m.id


def build_query(
    spark: SparkSession,
    settings: Settings,
    *,
    available_now: bool = False,
    processor: BatchProcessor | None = None,
) -> tuple[StreamingQuery, BatchProcessor]:
    check_runnable(settings)
    processor = processor or BatchProcessor(spark, settings, coordination_of)
    layout = processor.caught_up.layout = source_layout(spark, settings)
    every = settings.stash_maintenance_every

    def batch(df: DataFrame, batch_id: int) -> None:
        processor(df, batch_id)
        if batch_id % every == every - 1:
            maintain_stash(df.sparkSession, processor.stash_path)

    writer = (
        read_parsed(spark, settings, layout)
        .writeStream.foreachBatch(batch)
        .option("checkpointLocation", join(settings.checkpoint, "spark"))
        .queryName("shardmerge")
    )
    writer = (
        writer.trigger(availableNow=True)
        if available_now
        else writer.trigger(processingTime=settings.trigger_interval)
    )
    return writer.start(), processor


def maintain_stash(spark: SparkSession, path: str) -> None:
    """Compact the stash and remove the files no version within retention needs.

    Every batch that holds or releases rows appends to and deletes from the stash, so its
    files and log grow with the batches, not with what it holds. This runs after a batch
    has saved its state, so nothing else touches the stash meanwhile; run twice (a re-run
    batch), it only finds less to do. The table keeps one day of history (its own log and
    removed files): the stash is read only at its newest version."""
    from delta.tables import DeltaTable

    from streaming.sql.quoting import string, table_at
    from streaming.storage.delta_sink import delta_table_at

    if not delta_table_at(spark, path):
        return  # nothing was ever held
    table = table_at(path)
    wanted = {
        "delta.logRetentionDuration": "interval 1 days",
        "delta.deletedFileRetentionDuration": "interval 1 days",
    }
    have = DeltaTable.forPath(spark, path).detail().collect()[0]["properties"]
    if any(have.get(k) != v for k, v in wanted.items()):
        props = ", ".join(f"{string(k)} = {string(v)}" for k, v in wanted.items())
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ({props})")
    spark.sql(f"OPTIMIZE {table}")
    spark.sql(f"VACUUM {table}")
    log.info("stash %s compacted and vacuumed", path)


def run(
    settings: Settings, *, available_now: bool = False, spark: SparkSession | None = None
) -> None:
    """Run the job in ``spark``, else the session it is given (spark-submit), else the
    local development session."""
    if spark is None:
        from streaming.runtime.spark_session import session_for_job

        spark = session_for_job("shardmerge")
    from streaming.runtime.supervise import supervise

    ops = None
    processor: BatchProcessor | None = None
    from streaming.ops.lag import log_read_cost

    pool = spark.conf.get("spark.kafka.consumer.cache.capacity", "64")
    cost = log_read_cost(settings, int(pool) if pool and pool.isdigit() else None)

    def start() -> StreamingQuery:
        # One processor (and its observer) for every restart of the query, so the ops
        # server keeps counting across restarts; it follows the newest query's progress.
        nonlocal ops, processor
        query, processor = build_query(
            spark, settings, available_now=available_now, processor=processor
        )
        if ops is not None:
            ops.views.query = query
        elif settings.ops.enabled:
            from streaming.ops.running import start_ops

            ops = start_ops(spark, processor, query)
            ops.views.read_cost = cost
            log.info("metrics: %smetrics", ops.url)
        return query

    try:
        # Restarts the query after a transient failure, with backoff and a limit.
        supervise(start, settings.restart)
    finally:
        if ops is not None:
            ops.stop()
        if processor is not None and processor.group is not None:
            processor.group.stop()  # its heartbeat: the others see this member leave


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="streaming.job", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--available-now", action="store_true")
    args = parser.parse_args(argv)
    setup_logging()
    # where the code comes from (a wheel shipped with --py-files, an install): for support
    log.info("shardmerge job from %s", os.path.dirname(os.path.dirname(__file__)))
    run(load_settings(args.config), available_now=args.available_now)
    return 0


if __name__ == "__main__":
    sys.exit(main())
