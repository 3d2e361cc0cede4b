"""One long-lived Kafka admin client in the driver's JVM for the batch's own checks.

Each batch asks Kafka two things apart from reading the data: the ids of the topics it read
(``streaming.source.topic_ids``) and the latest offsets of the schema-change topics
(``streaming.source.caught_up``). One ``Admin`` client answers both, made the first time
it is needed and kept for every later batch and query of the session with the same Kafka
settings (a new client per request cost a connection, a metadata fetch and a thread each
batch, and during an outage a 30 s wait per client). Its requests wait as long as the
source's own ``default.api.timeout.ms`` allows (Kafka's default, 60 s, when the source
sets none). A request that fails drops the client (the next one makes a new one), and the
failure fails the batch, which Spark runs again.

The client is configured as Spark's Kafka source is (``kafka.bootstrap``,
``kafka.options``), so any security setup that reads the data works for it too.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from pyspark.sql import SparkSession

from streaming.config import Settings

__all__ = ["DriverKafka", "driver_kafka"]

log = logging.getLogger("shardmerge.kafka")

DEFAULT_TIMEOUT_MS = 60_000  # Kafka's default.api.timeout.ms

_clients: dict[tuple[str, str, tuple[tuple[str, str], ...]], DriverKafka] = {}
_lock = threading.Lock()


def driver_kafka(spark: SparkSession, settings: Settings) -> DriverKafka:
    """The session's client for ``settings``' Kafka (one per session and Kafka settings)."""
    options = tuple(sorted((k, v.get_secret_value()) for k, v in settings.kafka.options.items()))
    key = (str(spark.sparkContext.applicationId), settings.kafka.bootstrap, options)
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = DriverKafka(spark, settings)
        return client


class DriverKafka:
    def __init__(self, spark: SparkSession, settings: Settings) -> None:
        self.spark = spark
        self.settings = settings
        self._admin: Any = None
        self._lock = threading.Lock()
        options = settings.kafka.options
        timeout = options.get("default.api.timeout.ms") or options.get(
            "kafka.default.api.timeout.ms"
        )
        raw = timeout.get_secret_value() if timeout is not None else ""
        self.timeout_ms = int(raw) if raw.isdigit() else DEFAULT_TIMEOUT_MS
        self.made = 0  # clients made (one, unless a request failed)

    def _client(self) -> Any:
        if self._admin is None:
            from streaming.source.caught_up import client_props

            jvm: Any = self.spark._jvm
            known = set(jvm.org.apache.kafka.clients.admin.AdminClientConfig.configNames())
            props = client_props(self.spark, self.settings, known)
            self._admin = jvm.org.apache.kafka.clients.admin.Admin.create(props)
            self.made += 1
        return self._admin

    def _ask(self, what: str, request: Any) -> Any:
        """``request(admin, jvm, timeout_ms)``; a failure drops the client and is raised."""
        jvm: Any = self.spark._jvm
        with self._lock:
            admin = self._client()
            try:
                return request(admin, jvm, self.timeout_ms)
            except Exception:
                log.warning("Kafka at %s: %s failed; a new client next time",
                            self.settings.kafka.bootstrap, what)  # fmt: skip
                self.close()
                raise

    def topic_listing(self) -> tuple[int, str]:
        """How many topics Kafka lists and the listing's text (``TopicListing``s)."""

        def request(admin: Any, jvm: Any, timeout_ms: int) -> tuple[int, str]:
            unit = jvm.java.util.concurrent.TimeUnit.MILLISECONDS
            listings = admin.listTopics().listings().get(timeout_ms, unit)
            # One call for the whole list (two py4j calls per topic cost ~0.5 s a batch at
            # 4,096 topics): the collection's text, checked against its size by the caller.
            return int(listings.size()), str(listings.toString())

        result: tuple[int, str] = self._ask("listing the topics", request)
        return result

    def latest_offsets(self, partitions: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The latest offset of each of ``partitions``."""
        if not partitions:
            return {}

        def request(admin: Any, jvm: Any, timeout_ms: int) -> dict[tuple[str, int], int]:
            latest = jvm.org.apache.kafka.clients.admin.OffsetSpec.latest()
            wanted = jvm.java.util.HashMap()
            for topic, partition in sorted(partitions):
                wanted.put(jvm.org.apache.kafka.common.TopicPartition(topic, partition), latest)
            unit = jvm.java.util.concurrent.TimeUnit.MILLISECONDS
            got = admin.listOffsets(wanted).all().get(timeout_ms, unit)
            return {
                (tp.topic(), int(tp.partition())): int(got.get(tp).offset()) for tp in got.keySet()
            }

        result: dict[tuple[str, int], int] = self._ask("asking the latest offsets", request)
        return result

    def close(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            jvm: Any = self.spark._jvm
            try:
                admin.close(jvm.java.time.Duration.ZERO)
            except Exception as e:  # closing a broken client: nothing more to do with it
                log.warning("closing a Kafka admin client: %s", e)
