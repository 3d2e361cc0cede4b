"""A fast producer of Debezium MySQL JSON, for tests, demos and benchmarks.

It sends what :class:`~devkit.debezium_build.DebeziumBuilder` builds: what a
Debezium MySQL connector named ``source`` would write, batched and lz4-compressed.
``shardmerge produce`` runs :func:`cli_main`: a sharded workload
(:mod:`devkit.workload`) pushed to a broker, with progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable
from typing import Any, Literal, cast

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from devkit.debezium_build import DebeziumBuilder, Record
from devkit.workload import WorkloadEvent, sharded_workload
from schemas.model import TableSchema
from shardmerge.errors import ShardMergeError

__all__ = ["DebeziumProducer", "ProduceError", "cli_main", "send_workload", "sharded_workload"]

POLL_EVERY = 1000


class ProduceError(ShardMergeError):
    """Kafka refused a record (the message names the topic and librdkafka's reason)."""


class DebeziumProducer:
    """Sends one Debezium MySQL connector's records (see :class:`DebeziumBuilder`).

    ``decimal_mode`` is Debezium's ``decimal.handling.mode`` (``string``, or ``base64`` for
    ``precise``); ``partitions_hint`` is the partition count of the data topics it creates
    (the schema-change topic always has one, as Debezium requires). ``tombstones`` follows
    ``tombstones.on.delete``. ``sent`` counts records handed to Kafka, ``delivered`` the
    ones it acknowledged; :meth:`flush` raises :class:`ProduceError` on the first failure,
    and so may any call that sends.
    """

    def __init__(
        self,
        bootstrap: str,
        source: str,
        *,
        schemas_enable: bool = False,
        decimal_mode: Literal["string", "base64"] = "string",
        partitions_hint: int = 1,
        tombstones: bool = True,
        topic_namespace: str = "",
        routed: tuple[str, int] | None = None,
    ) -> None:
        """``routed``: ``(logical, partitions)``, records as Debezium's topic routing writes
        them (docs/cluster.md): every table's data on ``<source>.<logical>`` with
        ``partitions`` partitions, a shard's records in the partition ``PartitionRouting``
        picks from ``source.db`` and ``source.table`` (:func:`routed_partition`), its key
        with the field ``ByLogicalTableRouter`` adds (``__dbz__physicalTableIdentifier``:
        the table's own topic)."""
        # topic_namespace is prepended to every topic name, so that tests can run several
        # connectors named alike (source "s1") on one broker without sharing topics.
        self.topic_namespace = topic_namespace
        self.builder = DebeziumBuilder(
            source,
            schemas_enable=schemas_enable,
            decimal_mode=decimal_mode,
            tombstones=tombstones,
            routed=routed is not None,
        )
        self.source, self.partitions_hint = source, partitions_hint
        self.routed = routed
        self.sent = self.delivered = 0
        self._config: dict[str, str | int | float | bool] = {"bootstrap.servers": bootstrap}
        self._producer = Producer(
            {
                **self._config,
                "compression.type": "lz4",
                "linger.ms": 20,
                "batch.num.messages": 10000,
                "queue.buffering.max.messages": 1_000_000,
                "queue.buffering.max.kbytes": 1_048_576,
                # Java clients' partitioner, so keys land where Debezium's would.
                "partitioner": "murmur2_random",
                # A retry on a loaded machine must not reorder a partition (CDC order).
                "enable.idempotence": True,
            }
        )
        self._admin: AdminClient | None = None
        self._topics: set[str] = set()
        self._error: str | None = None

    def row(
        self,
        db: str,
        table: str,
        op: Literal["c", "u", "d", "r"],
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        schema: TableSchema,
        *,
        snapshot: bool = False,
    ) -> None:
        """One row change (see :meth:`DebeziumBuilder.row`)."""
        for record in self.builder.row(db, table, op, before, after, schema, snapshot=snapshot):
            self._send(record)

    def ddl(self, db: str, table: str, statement: str, schema_after: TableSchema | None) -> None:
        """One DDL statement on the schema-change topic (``table`` "" for database DDL)."""
        self._send(self.builder.ddl(db, table, statement, schema_after))

    def send(self, record: Record) -> None:
        """A record built earlier by :attr:`builder` (a DDL delivered late keeps the binlog
        position and time it was built with, as Debezium's record of it does)."""
        self._send(record)

    def truncate(self, db: str, table: str) -> None:
        """``TRUNCATE TABLE`` on the table's data topic (op ``t``, no key)."""
        self._send(self.builder.truncate(db, table))

    def flush(self, timeout: float = 120.0) -> None:
        """Wait until Kafka has every record; ProduceError on the first failure."""
        left = self._producer.flush(timeout)
        self._raise()
        if left:
            raise ProduceError(f"{left} record(s) still unsent after {timeout:.0f}s")

    def close(self) -> None:
        """Flush (:meth:`flush`), then let go of the Kafka clients: no client outlives a
        broker its caller stops next (librdkafka would log each failed reconnect)."""
        try:
            self.flush()
        finally:
            self._producer.close()
            self._admin = None  # librdkafka's admin handle goes with its last reference

    def _send(self, record: Record) -> None:
        topic, key, value, headers = record
        headers = cast(Any, headers)  # librdkafka takes (str, bytes | None) pairs
        schema_topic = topic == self.source
        partitions = 1 if schema_topic else self.partitions_hint
        route: dict[str, Any] = {}
        if self.routed is not None and not schema_topic:
            logical, partitions = self.routed
            _, db, table = topic.split(".", 2)
            topic = f"{self.source}.{logical}"
            if value is not None:  # a tombstone has no payload to hash: the key's partition
                route["partition"] = routed_partition([db, table], partitions)
        topic = self.topic_namespace + topic
        if topic not in self._topics:
            self._ensure_topic(topic, partitions)
        while True:
            try:
                self._producer.produce(
                    topic, value, key, headers=headers or None, on_delivery=self._delivered,
                    **route,
                )  # fmt: skip
                break
            except BufferError:  # the local queue is full: let librdkafka send
                self._producer.poll(0.05)
        self.sent += 1
        if self.sent % POLL_EVERY == 0:
            self._producer.poll(0)
            self._raise()

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        if err is None:
            self.delivered += 1
        elif self._error is None:
            self._error = f"delivery to topic {msg.topic()!r} failed: {err.str()}"

    def _raise(self) -> None:
        if self._error is not None:
            raise ProduceError(self._error)

    def _ensure_topic(self, topic: str, partitions: int) -> None:
        """Create the topic up front (Debezium's topic.creation does too) rather than
        rely on the broker's auto-creation, which may be off and makes one partition."""
        if self._admin is None:
            self._admin = AdminClient(self._config)
        future = self._admin.create_topics([NewTopic(topic, partitions, 1)])[topic]
        try:
            future.result(timeout=30)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise ProduceError(f"cannot create topic {topic!r}: {exc.args[0].str()}") from exc
        self._topics.add(topic)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (a signed 32-bit int) of ``text``."""
    data = text.encode("utf-16-le")  # Java hashes UTF-16 code units
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] | data[i + 1] << 8)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def routed_partition(values: list[str], partitions: int) -> int:
    """The partition Debezium's ``PartitionRouting`` (hash function ``java``) gives a record
    whose payload fields hold ``values``: the sum of their hash codes, its sign bit
    cleared (``Integer.MAX_VALUE`` counts as 0), modulo ``partitions``."""
    total = sum(java_string_hash(v) for v in values) & 0x7FFFFFFF
    return (0 if total == 0x7FFFFFFF else total) % partitions


def send_workload(producer: DebeziumProducer, events: Iterable[WorkloadEvent]) -> int:
    """Hand every workload event to the producer; the number of events."""
    n = 0
    for ev in events:
        if ev.kind == "row":
            producer.row(ev.db, ev.table, ev.op, ev.before, ev.after, ev.schema)  # type: ignore[arg-type]
        else:
            producer.ddl(ev.db, ev.table, ev.statement or "", ev.schema)
        n += 1
    return n


def cli_main(argv: list[str]) -> int:
    """``shardmerge produce``: push a sharded workload; progress on stderr, summary on stdout."""
    parser = argparse.ArgumentParser(
        prog="shardmerge produce",
        description="Write a sharded Debezium MySQL workload (JSON) to Kafka.",
    )
    parser.add_argument("--bootstrap", required=True, metavar="HOST:PORT")
    parser.add_argument("--source", required=True, help="the connector's topic.prefix")
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--rows", type=int, default=100_000, help="row changes per shard")
    parser.add_argument(
        "--ddl",
        action="append",
        default=[],
        metavar="FRACTION:SQL",
        help='e.g. "0.3:ALTER TABLE {table} ADD COLUMN note VARCHAR(64)"',
    )
    parser.add_argument("--schemas-enable", action="store_true")
    parser.add_argument("--decimal-mode", choices=("string", "base64"), default="string")
    parser.add_argument("--partitions", type=int, default=1, help="partitions per data topic")
    parser.add_argument(
        "--topics",
        choices=("per-shard", "per-table"),
        default="per-shard",
        help="per-shard: a topic per shard table (Debezium's default); per-table: one topic "
        "<source>.orders for every shard, as Debezium's ByLogicalTableRouter and "
        "PartitionRouting write it (--partitions partitions, a shard's rows in one)",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    ddl_at = {}
    for item in args.ddl:
        fraction, sep, sql = item.partition(":")
        try:
            ddl_at[float(fraction)] = sql
        except ValueError:
            sep = ""
        if not sep or not sql.strip():
            parser.error(f"--ddl {item!r}: expected FRACTION:SQL, e.g. 0.3:ALTER TABLE ...")
    producer = DebeziumProducer(
        args.bootstrap,
        args.source,
        schemas_enable=args.schemas_enable,
        decimal_mode=args.decimal_mode,
        partitions_hint=args.partitions,
        routed=("orders", args.partitions) if args.topics == "per-table" else None,
    )
    total = args.shards * args.rows
    events = sharded_workload(args.shards, args.rows, ddl_at=ddl_at, seed=args.seed)
    start = last = time.monotonic()
    rows = 0
    try:
        for ev in events:
            send_workload(producer, (ev,))
            rows += ev.kind == "row"
            if rows % 50_000 == 0 and time.monotonic() - last >= 1.0:
                last = time.monotonic()
                rate = producer.sent / (last - start)
                print(
                    f"  {rows:>10,}/{total:,} rows  {producer.sent:>10,} records"
                    f"  {rate:>9,.0f} records/s",
                    file=sys.stderr,
                )
        producer.flush()
    except ProduceError as exc:
        print(f"produce failed: {exc}", file=sys.stderr)
        return 1
    elapsed = time.monotonic() - start
    summary = {
        "source": args.source,
        "shards": args.shards,
        "rows": rows,
        "records": producer.sent,
        "seconds": round(elapsed, 2),
        "records_per_s": round(producer.sent / elapsed),
    }
    print(
        f"{producer.sent:,} records in {elapsed:.1f}s ({summary['records_per_s']:,}/s)",
        file=sys.stderr,
    )
    print(json.dumps(summary))
    return 0
