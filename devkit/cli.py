"""The development tooling's verbs of the ``shardmerge`` command line.

Each verb's module parses its own options (``cli_main(argv)``); the scenario engines that
need real infrastructure are offered to ``shardmerge scenario run --engine``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the operator verbs (locks, unlock) load no scenario machinery
    from coordinator.scenario.model import Scenario
    from coordinator.scenario.runner import ScenarioResult

__all__ = ["ENGINE_HELP", "TOOL_VERBS", "run_engine"]

# verb -> (module with cli_main, help)
TOOL_VERBS = {
    "demo": ("devkit.demo", "the embedded default: local Kafka, a sharded workload, Delta"),
    "produce": ("devkit.producer", "write a sharded Debezium workload to Kafka"),
    "kafka": (
        "devkit.kafka_local",
        "a local Kafka broker (KRaft) for development: start|stop|status",
    ),
    "s3": (
        "devkit.objectstore",
        "a local S3-compatible object store (moto) for development: start|stop|status",
    ),
    "cluster": (
        "devkit.spark_cluster",
        "a local Spark standalone cluster (1 master, 1 worker) for development: start|stop|status",
    ),
    "upstream": (
        "devkit.upstream_local",
        "local MariaDB servers captured by Debezium on Kafka Connect: start|stop|status",
    ),
}

ENGINE_HELP = {
    "spark": "a real Kafka broker, the streaming job with AvailableNow, a Delta table",
    "mariadb": "the steps run as SQL on real MariaDB shards captured by Debezium on Kafka "
    "Connect, then as spark; the Delta table is also checked against the shards' own rows",
}


def run_engine(engine: str, scenarios: list[Scenario]) -> Iterable[ScenarioResult]:
    """Run loaded scenarios on the ``spark`` or ``mariadb`` engine (imported on use)."""
    if engine == "spark":
        from devkit.scenario_spark import run_spark_files

        return run_spark_files(scenarios)
    from devkit.scenario_mariadb import run_mariadb_files

    return run_mariadb_files(scenarios)
