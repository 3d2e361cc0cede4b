"""Scenarios on the database sink: the streaming job (real Kafka, Spark) writing its
target into a real MariaDB and a real PostgreSQL (devkit.downstream_local), each file's
rows and columns equal to the memory engine's, as on Delta (test_spark_scenarios).

CI runs this subset, one shared query per database: every DDL kind the sink renders
(add, drop, rename, widen, narrow, defaults, charsets), both modes, a TRUNCATE of one
shard, a move's re-homing (its keys transpiled from Spark SQL), hostile names and
values, values a database column refuses where Delta's takes them (dead letters). The whole set runs with ``shardmerge scenario run --engine spark --sink mariadb`` (or
``postgresql``) on every file."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.scenario.model import load_scenario
from coordinator.scenario.runner import ScenarioResult, run_memory
from devkit import downstream_local
from devkit.scenario_spark import SparkScenarioSession
from tests.integration.test_spark_scenarios import comparable

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.timeout(1200)]

ROOT = Path(__file__).parents[1] / "scenarios"
SUBSET = [
    "dm/dm003-add-column-pessimistic.yaml",
    "dm/dm032-add-drop-add-column-optimistic.yaml",
    "dm/dm049-rename-column-optimistic.yaml",
    "dm/dm107-add-not-null-column-optimistic.yaml",
    "dm/dm130-modify-default-pessimistic.yaml",
    "dm/dm150-modify-varchar-length-optimistic.yaml",
    "dm/dm151-modify-int-to-double-optimistic.yaml",
    "dm/dm-change-utf-charset-optimistic.yaml",
    "dm/beyond-truncate-one-shard-source-column-optimistic.yaml",
    "beyond/hostile-names-optimistic.yaml",
    "beyond/pk-update-decimal-datetime-optimistic.yaml",
    "beyond/dates-before-the-gregorian-switch-keep-their-day-optimistic.yaml",
    "beyond/ignored-modify-then-unfit-value-dead-letter-database-optimistic.yaml",
    "moves/split-by-keys.yaml",
    "beyond/bit-columns-keep-their-values-optimistic.yaml",
    "beyond/json-that-is-not-json-dead-letter-database-optimistic.yaml",
]
CASES = [(sink, f) for sink in ("mariadb", "postgresql") for f in SUBSET]


@pytest.fixture(scope="module")
def results(
    kafka: Any, spark: Any, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Callable[[str, str], ScenarioResult]]:
    """Each database's files in one shared query, run when its first file's test asks."""
    module = sys.modules[__name__]
    selected = [
        item.callspec.params["case"]
        for item in request.session.items
        if getattr(item, "module", None) is module and hasattr(item, "callspec")
    ]
    done: dict[tuple[str, str], ScenarioResult] = {}
    servers = contextlib.ExitStack()

    def result(kind: str, name: str) -> ScenarioResult:
        if (kind, name) not in done:
            files = [f for k, f in selected if k == kind]
            sink = servers.enter_context(
                downstream_local.sink_settings(kind, tmp_path_factory.mktemp(f"jdbc-{kind}"))
            )
            session = servers.enter_context(
                SparkScenarioSession(
                    tmp_path_factory.mktemp(f"scenarios-{kind}"), broker=kafka, sink=sink
                )
            )
            runs = session.run_files([load_scenario(ROOT / f) for f in files])
            done.update({(kind, f): r for f, r in zip(files, runs, strict=True)})
        return done.pop((kind, name))

    with servers:
        yield result


@pytest.mark.parametrize("case", CASES, ids=[f"{k}-{Path(f).stem}" for k, f in CASES])
def test_scenario_on_a_database_sink_agrees_with_memory(results: Any, case: tuple[str, str]):
    kind, name = case
    output = results(kind, name).output
    assert output["failures"] == []
    planned = run_memory(load_scenario(ROOT / name), sink=kind)
    assert comparable(output) == comparable(planned.output)
