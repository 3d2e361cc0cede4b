"""Real infrastructure for the integration tests; no mocks of Kafka, Spark or Delta.

One Kafka broker (KRaft, from ``.jars/kafka``) and one SparkSession serve the whole pytest
session; each test takes fresh uuid-named topics, so tests never see each other's data.
The broker lives in a pytest tmp dir and is stopped at the end of the session, also when
tests fail (and by the kernel if pytest itself is killed). Missing jars fail loudly with
"run scripts/fetch-jars": a test that silently skips cannot fail.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession

from devkit import objectstore
from devkit.kafka_local import KafkaBroker, running
from streaming.runtime.spark_session import MANY_TABLES_CONF, build_spark


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """The session's broker; ``kafka.bootstrap`` is its ``127.0.0.1:port``."""
    with running("pytest", tmp_path_factory.mktemp("kafka")) as broker:
        yield broker


@pytest.fixture
def topic(kafka: KafkaBroker) -> Callable[..., str]:
    """``topic(partitions=1)`` creates a new uuid-named topic and returns its name."""
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})

    def make(partitions: int = 1) -> str:
        name = f"it-{uuid.uuid4().hex[:12]}"
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)
        return name

    return make


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The session's local[2] SparkSession with Delta and the Kafka source; Delta's log
    cache bounded (the suite touches thousands of tables)."""
    session = build_spark("shardmerge-integration", extra_conf=MANY_TABLES_CONF)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[objectstore.ObjectStore]:
    """The session's S3-compatible object store (moto's server on loopback)."""
    with objectstore.running("pytest", tmp_path_factory.mktemp("s3")) as store:
        yield store


@pytest.fixture
def bucket(s3: objectstore.ObjectStore, spark: SparkSession) -> str:
    """``s3a://<new bucket>`` on the session's object store, reachable from ``spark``
    through the S3A settings in its Hadoop configuration (as spark.hadoop.* would be)."""
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    for key, value in s3.hadoop_conf().items():
        conf.set(key, value)
    return s3.create_bucket(f"it-{uuid.uuid4().hex[:12]}")
