"""Records behind, per target and per shard, without Spark (``shardmerge lag``).

What the job has read comes from its checkpoint: Spark's offsets log
(``CHECKPOINT/spark/offsets/<batch>``: a line per Kafka source of the query, each
``{"topic": {"partition": next offset}}``) of the latest batch with a commit
(``CHECKPOINT/spark/commits/<batch>``): every record before those offsets is written. What
is there to read comes from the brokers: their end offsets, asked with kafka-python in one
request per broker, whatever the number of partitions; a topic of the job's sources that
the log does not name yet is behind from its beginning offsets.

A record behind is attributed to a shard when its topic is one of Debezium's per-table
topics (``<topic.prefix>.<db>.<table>``, and the job's routes give the shard's target).
A topic that carries several shards (one topic per logical table, Debezium's routing; a
canal or maxwell topic) is reported per topic: which of its shards the records behind
belong to is only known by reading them. Schema-change topics (Debezium's, named after
``topic.prefix``) are reported apart: DDL records behind.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from coordinator.ids import ShardId
from coordinator.routing import Router
from streaming.config import Settings, SourceSettings
from streaming.fs.hadoop import join
from streaming.source.offsets_log import kafka_offsets, parse_offsets_log

__all__ = [
    "LagError",
    "LagReport",
    "PartitionLag",
    "ReadCost",
    "client_options",
    "committed_offsets",
    "end_offsets",
    "lag_report",
    "log_read_cost",
    "read_cost",
    "source_partitions",
    "source_topics",
]

# Kafka client options of Spark's source (``kafka.options``, the Java client's names) that
# kafka-python takes, under its own names; a PLAIN or SCRAM ``sasl.jaas.config`` gives its
# username and password. Others have no kafka-python equivalent: named in the error when
# the brokers cannot be reached.
_OPTIONS = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "client.id": "client_id",
}
_JAAS = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


class LagError(Exception):
    """The lag cannot be told: the checkpoint or the brokers cannot be read; says which."""


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    read: int | None  # the next offset the job reads (None: not read yet)
    end: int
    behind: int
    kind: str  # "shard", "shared" (several shards) or "schema" (DDL)
    shard: str | None = None
    target: str | None = None


@dataclass
class LagReport:
    batch: int | None
    planned_ms: int | None
    partitions: list[PartitionLag] = field(default_factory=list)

    def targets(self) -> dict[str, dict[str, Any]]:
        """Per target: records behind, shards behind and seen, the shards most behind."""
        out: dict[str, dict[str, Any]] = {}
        per_shard: dict[str, dict[str, int]] = {}
        for p in self.partitions:
            if p.kind != "shard" or p.target is None or p.shard is None:
                continue
            shards = per_shard.setdefault(p.target, {})
            shards[p.shard] = shards.get(p.shard, 0) + p.behind
        for target, shards in sorted(per_shard.items()):
            worst = sorted(shards.items(), key=lambda kv: (-kv[1], kv[0]))
            out[target] = {
                "behind": sum(shards.values()),
                "shards": len(shards),
                "shards_behind": sum(1 for n in shards.values() if n),
                "worst": [{"shard": s, "behind": n} for s, n in worst if n][:5],
            }
        return out

    def shards(self) -> dict[str, int]:
        """Records behind per shard (per-table topics only), most behind first."""
        totals: dict[str, int] = {}
        for p in self.partitions:
            if p.kind == "shard" and p.shard is not None:
                totals[p.shard] = totals.get(p.shard, 0) + p.behind
        return dict(sorted(totals.items(), key=lambda kv: (-kv[1], kv[0])))

    def topics(self, kind: str) -> dict[str, dict[str, int]]:
        """Per topic of ``kind``: records behind and partitions."""
        out: dict[str, dict[str, int]] = {}
        for p in self.partitions:
            if p.kind == kind:
                t = out.setdefault(p.topic, {"behind": 0, "partitions": 0})
                t["behind"] += p.behind
                t["partitions"] += 1
        return dict(sorted(out.items()))

    def as_json(self, now_ms: int) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "planned_ms": self.planned_ms,
            "age_seconds": None if self.planned_ms is None else (now_ms - self.planned_ms) / 1000,
            "behind": sum(p.behind for p in self.partitions if p.kind != "schema"),
            "targets": self.targets(),
            "shared_topics": self.topics("shared"),
            "schema_topics": self.topics("schema"),
            "shards": self.shards(),
            "partitions": [asdict(p) for p in self.partitions],
        }


def _fs(uri: str) -> Any:
    """A filesystem for the checkpoint without a JVM: local, or S3/GCS/Azure (pyarrow)."""
    from urllib.parse import urlsplit

    from streaming.fs.arrow import ARROW_SCHEMES, ArrowFs
    from streaming.fs.local import LocalFs, local_path

    if local_path(uri) is not None:
        return LocalFs()
    if urlsplit(uri).scheme.lower() in ARROW_SCHEMES:
        return ArrowFs(uri)
    raise LagError(f"{uri}: only local, S3, GCS and Azure checkpoints are read without a JVM")


def committed_offsets(
    checkpoint: str, fs: Any = None
) -> tuple[int, int, dict[tuple[str, int], int]] | None:
    """The latest batch Spark committed in ``checkpoint`` (the job's, ``CHECKPOINT/spark``
    under it), when it was planned (ms) and the offsets it read up to; None before the
    first commit."""
    spark_dir = join(checkpoint, "spark")
    fs = fs or _fs(spark_dir)
    commits = join(spark_dir, "commits")
    done = [int(n) for n in fs.names(commits) if n.isdigit()] if fs.exists(commits) else []
    if not done:
        return None
    batch = max(done)
    uri = join(spark_dir, "offsets", str(batch))
    if not fs.exists(uri):
        raise LagError(f"{uri}: batch {batch} is committed but its offsets are not there")
    try:
        planned, lines = parse_offsets_log(fs.read(uri).decode("utf-8"))
        offsets = {tp: o for line in lines for tp, o in kafka_offsets(line).items()}
    except ValueError as e:
        raise LagError(f"{uri}: {e}") from e
    return batch, planned, offsets


def source_topics(sources: Iterable[SourceSettings], topics: Iterable[str]) -> set[str]:
    """The topics among ``topics`` that the job's sources read (whole names, as the job)."""
    patterns = [re.compile(s.pattern) for s in sources if s.pattern]
    named = {t for s in sources for t in s.topics}
    return {t for t in topics if t in named or any(p.fullmatch(t) for p in patterns)}


def client_options(settings: Settings) -> tuple[dict[str, str], list[str]]:
    """kafka-python's settings from the job's ``kafka.options`` (see ``_OPTIONS``), and the
    options it has no equivalent for."""
    options: dict[str, str] = {}
    foreign = []
    for key, secret in settings.kafka.options.items():
        name, value = key.removeprefix("kafka."), secret.get_secret_value()
        found = dict(_JAAS.findall(value)) if name == "sasl.jaas.config" else {}
        if name in _OPTIONS:
            options[_OPTIONS[name]] = value
        elif len(found) == 2:
            options["sasl_plain_username"] = re.sub(r"\\(.)", r"\1", found["username"])
            options["sasl_plain_password"] = re.sub(r"\\(.)", r"\1", found["password"])
        else:
            foreign.append(key)
    return options, foreign


def _consumer(settings: Settings, timeout_ms: int) -> Any:
    """A kafka-python consumer of the job's Kafka (no group, nothing committed)."""
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    options, foreign = client_options(settings)
    try:
        return KafkaConsumer(
            bootstrap_servers=settings.kafka.bootstrap.split(","),
            enable_auto_commit=False,
            request_timeout_ms=timeout_ms,
            bootstrap_timeout_ms=timeout_ms,
            **options,
        )
    except KafkaError as e:
        more = f" (kafka.options without a kafka-python equivalent: {foreign})" if foreign else ""
        raise LagError(f"cannot reach Kafka at {settings.kafka.bootstrap}: {e}{more}") from e


def end_offsets(
    settings: Settings, known: set[tuple[str, int]], timeout_ms: int = 30_000
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """The brokers' end offsets of every partition of the job's topics and of ``known``,
    and the beginning offsets of those not in ``known`` (a topic the job has not read)."""
    from kafka import TopicPartition
    from kafka.errors import KafkaError

    consumer = _consumer(settings, timeout_ms)
    try:
        topics = source_topics(settings.sources, consumer.topics()) | {t for t, _ in known}
        parts = []
        for topic in sorted(topics):
            for p in sorted(consumer.partitions_for_topic(topic) or ()):
                parts.append(TopicPartition(topic, p))
        ends = consumer.end_offsets(parts) if parts else {}
        new = [tp for tp in parts if (tp.topic, tp.partition) not in known]
        starts = consumer.beginning_offsets(new) if new else {}
    except KafkaError as e:
        raise LagError(f"Kafka at {settings.kafka.bootstrap}: {e}") from e
    finally:
        consumer.close()
    return (
        {(tp.topic, tp.partition): int(o) for tp, o in ends.items()},
        {(tp.topic, tp.partition): int(o) for tp, o in starts.items()},
    )


def classify(
    topic: str, sources: list[SourceSettings], router: Router
) -> tuple[str, str | None, str | None]:
    """(kind, shard, target) of a topic: Debezium's per-table topic of one shard, a
    schema-change topic (no dot), or a topic that carries several shards."""
    source = next(
        (s for s in sources if (s.pattern and re.fullmatch(s.pattern, topic)) or topic in s.topics),
        None,
    )
    if source is None or source.format != "debezium":
        return "shared", None, None
    parts = topic.split(".")
    if len(parts) == 1:
        return "schema", None, None
    if len(parts) != 3 or not all(parts):
        return "shared", None, None
    shard = ShardId(parts[0], parts[1], parts[2])
    target = router.target(shard)
    return "shard", str(shard), None if target is None else str(target)


Offsets = dict[tuple[str, int], int]


def lag_report(
    settings: Settings,
    offsets: Callable[[set[tuple[str, int]]], tuple[Offsets, Offsets]] | None = None,
    timeout_ms: int = 30_000,
) -> LagReport:
    """The job's lag now (see the module docstring). ``offsets``: the brokers' (end,
    beginning) offsets for a set of known partitions (default: :func:`end_offsets`, each
    request given ``timeout_ms``)."""
    found = committed_offsets(settings.checkpoint)
    batch, planned, read = (None, None, {}) if found is None else found
    ends, starts = (offsets or (lambda k: end_offsets(settings, k, timeout_ms)))(set(read))
    router = settings.router()
    report = LagReport(batch, planned)
    for (topic, part), end in sorted(ends.items()):
        position = read.get((topic, part))
        start = position if position is not None else starts.get((topic, part), 0)
        kind, shard, target = classify(topic, settings.sources, router)
        report.partitions.append(
            PartitionLag(topic, part, position, end, max(0, end - start), kind, shard, target)
        )
    return report


def now_ms() -> int:
    return int(time.time() * 1000)


# --- what reading the job's topics will cost (logged at start) ------------------------------

# Measured (docs/benchmarks.md, "On a quiet machine, and the file descriptors it takes"):
# the Spark JVM holds about 12 descriptors per topic-partition it reads (a pooled consumer,
# its sockets and buffers), and the first batch that reads a topic-partition pays about
# 40 ms for it (a consumer made, a fetch and a seek: 41 s at 1,024 shard topics).
DESCRIPTORS_PER_PARTITION = 12
FIRST_READ_SECONDS_PER_PARTITION = 0.04
# Past this many topic-partitions, one topic per logical table is advised.
ROUTING_ADVISED_FROM = 256


@dataclass(frozen=True)
class ReadCost:
    """What the job's sources will cost to read: topic-partitions, the descriptors and
    first-batch seconds they take by the measured rates, the limits, and advice."""

    topics: int
    partitions: int
    descriptors: int
    first_batch_seconds: float
    open_files_limit: int | None
    consumer_pool: int | None
    advice: tuple[str, ...]


def read_cost(
    partitions: dict[str, int], open_files_limit: int | None, consumer_pool: int | None
) -> ReadCost:
    """The read cost of ``partitions`` (partitions per topic the job reads), against the
    process's open-files limit and Spark's Kafka consumer pool (None: not known)."""
    n = sum(partitions.values())
    descriptors = n * DESCRIPTORS_PER_PARTITION
    advice = []
    if open_files_limit is not None and descriptors > open_files_limit // 2:
        advice.append(
            f"{n:,} topic-partitions take about {descriptors:,} open files in the Spark JVM, "
            f"more than half its limit of {open_files_limit:,}: raise it (ulimit -n, "
            f"{2 * descriptors:,} or more) or read fewer topic-partitions (one topic per "
            "logical table, docs/cluster.md)"
        )
    if consumer_pool is not None and n > consumer_pool:
        advice.append(
            f"{n:,} topic-partitions but Spark pools {consumer_pool:,} Kafka consumers "
            "(spark.kafka.consumer.cache.capacity): past the pool every batch closes and "
            f"makes consumers; set it to {n:,} or more (docs/cluster.md)"
        )
    if n >= ROUTING_ADVISED_FROM and len(partitions) >= ROUTING_ADVISED_FROM:
        advice.append(
            f"{len(partitions):,} topics (a topic per shard table): a batch's read grows with "
            f"them (about {n * FIRST_READ_SECONDS_PER_PARTITION:.0f} s for a first batch); "
            "one topic per logical table (Debezium's ByLogicalTableRouter with "
            "PartitionRouting, docs/cluster.md) keeps it flat in shards"
        )
    return ReadCost(
        len(partitions), n, descriptors, round(n * FIRST_READ_SECONDS_PER_PARTITION, 1),
        open_files_limit, consumer_pool, tuple(advice),
    )  # fmt: skip


def source_partitions(settings: Settings, timeout_ms: int = 30_000) -> dict[str, int]:
    """Partitions per topic of the job's sources, from the brokers (kafka-python)."""
    from kafka.errors import KafkaError

    consumer = _consumer(settings, timeout_ms)
    try:
        topics = source_topics(settings.sources, consumer.topics())
        return {t: len(consumer.partitions_for_topic(t) or ()) for t in sorted(topics)}
    except KafkaError as e:
        raise LagError(f"cannot list the topics at {settings.kafka.bootstrap}: {e}") from e
    finally:
        consumer.close()


def log_read_cost(settings: Settings, consumer_pool: int | None) -> ReadCost | None:
    """At the job's start: count its topic-partitions and log what reading them costs,
    with advice past the thresholds (:func:`read_cost`), against this process's open-files
    limit. A broker that cannot be listed this way (a security setup kafka-python lacks)
    is logged and the count skipped: the job itself reads through Spark's client."""
    import logging
    import resource

    log = logging.getLogger("shardmerge.read_cost")
    try:
        partitions = source_partitions(settings, timeout_ms=10_000)
    except LagError as e:
        log.warning("topic-partitions not counted (no read-cost advice): %s", e)
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    cost = read_cost(partitions, None if soft == resource.RLIM_INFINITY else soft, consumer_pool)
    log.info(
        "the job reads %d topic-partitions of %d topics: about %d open files, a first batch "
        "about %.1f s of Kafka reads (open-files limit %s, Kafka consumer pool %s)",
        cost.partitions, cost.topics, cost.descriptors, cost.first_batch_seconds,
        cost.open_files_limit, cost.consumer_pool,
    )  # fmt: skip
    for line in cost.advice:
        log.warning("read cost: %s", line)
    return cost
