"""The SparkSession of the job: the submitter's, or the local development one.

Under ``spark-submit`` (or any launcher that started the JVM first: ``PYSPARK_GATEWAY_PORT``
is set) the job takes the session Spark gives it, with its master, jars, memory and conf,
and adds only what it cannot run without, when the submitter did not configure it:
Delta's SQL extension and catalog, the SQL settings :mod:`streaming.sql.quoting` relies on,
and one code generation limit that keeps its projections compiled (``submitted_conf``). A
setting the submitter gave that the job cannot run with is refused with a message, not
overridden.

Everything else builds the local development session (``build_spark``): the demo, the
tests, ``shardmerge run`` without a cluster. Why its settings:
- ``spark.jars`` gets the files in ``.jars/spark/`` (Kafka source, Delta, their
  dependencies minus what pyspark ships; see jars/spark/pom.xml). No ``spark.jars.packages``:
  a session start never resolves or downloads anything, so it works offline and starts the
  same way every time.
- ``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON`` are this interpreter, or Python workers
  start another Python that lacks the venv's pyarrow/pandas.
- The machine has 2 cores: few shuffle partitions, a modest driver heap, no UI.
- Driver bound to 127.0.0.1: a local job talks to nothing outside the machine.
- UTC session time zone, so timestamps from MySQL/Debezium mean the same everywhere.
- ``spark.sql.variable.substitute=false`` (:data:`streaming.sql.quoting.SESSION_CONF`): Spark
  would otherwise rewrite ``${...}`` inside quoted column names before parsing.
- ``spark.kafka.consumer.cache.capacity`` (:data:`KAFKA_POOL_CONF`): Spark's pool of Kafka
  consumers holds 64 by default, and a job reads a topic-partition per shard table: past
  64, every borrow closes idle consumers on the task thread, each close waiting
  ``fetch.max.wait.ms``, so a batch paid about half a second per topic-partition. The pool
  is a soft limit (consumers are made on demand and idle ones expire after
  ``spark.kafka.consumer.cache.timeout``), so a high one costs nothing unused. It is read
  when the executor JVM starts: under spark-submit it must be given there
  (docs/cluster.md); the job only warns when it is missing.
- ``spark.sql.codegen.hugeMethodLimit=8000`` (:data:`CODEGEN_CONF`): a stage whose fused
  method HotSpot would not compile runs operator by operator instead of interpreted; set on
  a submitted session too, unless the submitter set it.
- ``SHARDMERGE_SPARK_CONF`` (environment): more settings for the local session, one
  ``key=value`` per line or separated by spaces; they override the defaults above and are
  overridden by ``extra_conf``. The test suite sets :data:`SMALL_BATCH_CONF` there.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from streaming.runtime._jars import jars
from streaming.runtime.session_conf import ENV_CONF, SMALL_BATCH_CONF, env_conf
from streaming.sql.quoting import SESSION_CONF

__all__ = [
    "CODEGEN_CONF",
    "ENV_CONF",
    "KAFKA_POOL_CONF",
    "SMALL_BATCH_CONF",
    "build_spark",
    "env_conf",
    "session_for_job",
    "submitted",
    "submitted_conf",
]

log = logging.getLogger("shardmerge.session")

_LOG4J2 = "log4j2-spark.properties"
_DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
_DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"

# One pooled consumer per topic-partition read, up to this many (see the module docstring).
KAFKA_POOL_CONF = {"spark.kafka.consumer.cache.capacity": "16384"}
_POOL_KEY = "spark.kafka.consumer.cache.capacity"

# For a local session that sees thousands of short-lived tables (the test suite, scenario
# runs): Delta keeps every table's log and latest snapshot it touched for an hour (cache
# size 10,000), and each snapshot holds its plans (~2 MB of a driver's heap). A whole
# suite's tables then filled a 2 GB driver (GC thrash). A job's own tables are touched every
# batch, so the default suits it; this bounds the cache by count. Read once, when Delta
# first builds the cache: set it when the session is built.
MANY_TABLES_CONF = {"spark.databricks.delta.delta.log.cacheSize": "64"}

# Whole-stage code generation fuses a stage's operators into one Java method; the
# projection of row images onto a target with its checks (streaming.batch.rows) makes that
# method larger than 8,000 bytes of bytecode, which HotSpot never compiles
# (DontCompileHugeMethods): the stage ran interpreted, 23% of a JDBC batch's executor time
# in one Java Flight Recorder profile. At 8,000 (Spark's own advice for HotSpot) such a
# stage is run operator by operator, with its expressions in compiled methods of their
# own (docs/benchmarks.md). A runtime SQL setting: applied to the submitter's session too,
# unless the submitter set it.
CODEGEN_CONF = {"spark.sql.codegen.hugeMethodLimit": "8000"}


# The project's Delta log store (jars/logstore, built by scripts/fetch-jars): a commit is
# created only if no commit has its version, on file: and s3a:, so several drivers can
# write one table (a group, docs/groups.md). Delta's own stores for them are safe within
# one driver only. A local session uses it whenever the jar is there; under spark-submit
# the submitter sets these (docs/cluster.md), and a group member refuses to start without.
LOGSTORE_CLASS = "io.shardmerge.delta.PutIfAbsentLogStore"
LOGSTORE_SCHEMES = ("file", "s3a")
# Delta locks each commit within the JVM when the store says a half-written file is
# visible (OptimisticTransaction.isCommitLockEnabled), which the store says on file: so
# that Delta writes checkpoints through a rename. Its commits are put-if-absent and need no
# lock; kept off, as before, so threads of one session commit as separate drivers do.
COMMIT_LOCK_KEY = "spark.databricks.delta.commitLock.enabled"


def logstore_conf(spark_jars: list[Path]) -> dict[str, str]:
    if not any(str(j).endswith("shardmerge-logstore.jar") for j in spark_jars):
        return {}
    conf = {f"spark.delta.logStore.{s}.impl": LOGSTORE_CLASS for s in LOGSTORE_SCHEMES}
    return {**conf, COMMIT_LOCK_KEY: "false"}


def submitted() -> bool:
    """True when spark-submit (or pyspark) started this Python with its JVM running."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def submitted_conf(given: list[tuple[str, str]]) -> dict[str, str]:
    """What the job adds to a submitter's settings (``given``: ``SparkConf.getAll()``):
    Delta's extension beside the submitter's, Delta's catalog, :data:`SESSION_CONF` and
    :data:`CODEGEN_CONF`, each unless the submitter set it."""
    have = dict(given)
    added: dict[str, str] = {}
    extensions = [e for e in have.get("spark.sql.extensions", "").split(",") if e]
    if _DELTA_EXTENSION not in extensions:
        added["spark.sql.extensions"] = ",".join([*extensions, _DELTA_EXTENSION])
    if "spark.sql.catalog.spark_catalog" not in have:
        added["spark.sql.catalog.spark_catalog"] = _DELTA_CATALOG
    for key, value in {**SESSION_CONF, **CODEGEN_CONF}.items():
        if key not in have:
            added[key] = value
    return added


def session_for_job(app_name: str = "shardmerge") -> SparkSession:
    """The active session, else the submitter's (plus Delta if missing), else a local one."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if not submitted():
        return build_spark(app_name)
    SparkContext._ensure_initialized()  # connects to the submitter's JVM
    given = SparkConf()  # what the submitter set: --conf, spark-defaults.conf
    if not given.contains(_POOL_KEY):
        log.warning(
            "%s is not set: Spark pools 64 Kafka consumers, and a job reading more "
            "topic-partitions (one per shard table) closes and reopens consumers every batch "
            "(about 0.5 s each); pass --conf %s=%s to spark-submit (docs/cluster.md)",
            _POOL_KEY, _POOL_KEY, KAFKA_POOL_CONF[_POOL_KEY],
        )  # fmt: skip
    builder = SparkSession.builder
    for key, value in submitted_conf(given.getAll()).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def build_spark(
    app_name: str = "shardmerge",
    *,
    master: str = "local[2]",
    extra_conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A SparkSession with Delta and Kafka, or the active one (``getOrCreate``).

    ``extra_conf`` overrides the defaults below and ``SHARDMERGE_SPARK_CONF``. The JVM
    settings (``spark.jars``, driver memory, Java options) only take effect if no Spark JVM
    runs yet in this process.
    Raises ``JarsMissing`` (run ``scripts/fetch-jars``) when ``.jars/spark/`` is empty.
    """
    spark_jars = jars("spark")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # Spark otherwise binds to the first non-loopback interface it finds; all traffic of a
    # local job stays on loopback.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log4j2 = os.path.join(os.path.dirname(__file__), _LOG4J2)
    conf = {
        "spark.jars": ",".join(str(j) for j in spark_jars),
        "spark.sql.extensions": _DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": _DELTA_CATALOG,
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        # A long-lived local session (the demo, the test suite) runs thousands of MERGEs;
        # 1g ran out in the suite. The status store keeps a bounded history of them.
        "spark.driver.memory": "2g",
        "spark.sql.ui.retainedExecutions": "100",
        "spark.ui.retainedJobs": "200",
        "spark.ui.retainedStages": "200",
        "spark.sql.streaming.ui.retainedQueries": "20",
        # -Xss: the stack of every JVM thread of the driver, the stream execution thread
        # included, where the job plans and runs each micro-batch (Catalyst and Janino
        # recurse over deep plans; 1 MB, Java's default, overflowed once in the suite).
        # A StackOverflowError there ends the query. Reserved, not committed, memory.
        # The parallel collector: a local driver's batches want throughput, and G1's
        # concurrent work cost more CPU than it saves in pauses (18 scenario files on 2
        # cores: 208-225 CPU-seconds with G1, 174 with this one; docs/benchmarks.md).
        "spark.driver.extraJavaOptions": (
            f"-Duser.timezone=UTC -Xss16m -XX:+UseParallelGC -Dlog4j2.configurationFile={log4j2}"
        ),
        # Every live broadcast hash relation (a join's small side, keyed by anything but
        # one integer) holds at least one page on the driver, and the page size Spark
        # derives from a 2 GB local driver is 32 MB: 29 of them held ~1 GB of the suite's
        # heap. Local batches are small; 2 MB pages cost them nothing measurable.
        "spark.buffer.pageSize": "2m",
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "2",
        # Delta's snapshot state reconstruction defaults to 50 partitions.
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.log.level": "WARN",
        # SQL text is written by streaming.sql.quoting, which needs these (e.g. no ${...}
        # substitution inside quoted names).
        **SESSION_CONF,
        **CODEGEN_CONF,
        **KAFKA_POOL_CONF,
        **logstore_conf(spark_jars),
        **env_conf(),
        **(extra_conf or {}),
    }
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
