"""Every scenario the project ships passes on the spark engine (real Kafka, the streaming
job, Delta), and the spark and memory engines agree on the result.

Each file runs alone here, one query per observation point. The engine can run files
side by side in one query (``SparkScenarioSession.run_files``, docs/scenarios.md), but in
the whole suite's session, after the tests before this one, the 2 GB driver ran out of
heap on those groups' batches (docs/status.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.scenario.model import load_scenario
from coordinator.scenario.runner import run_memory, select
from devkit.scenario_spark import SparkScenarioSession

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

# Only the files that list the spark engine (`engines:`, default every engine).
SCENARIOS = select(sorted((Path(__file__).parents[1] / "scenarios").rglob("*.yaml")), "spark")


@pytest.fixture(scope="module")
def engine(kafka, spark, tmp_path_factory):
    with SparkScenarioSession(tmp_path_factory.mktemp("scenarios"), broker=kafka) as session:
        yield session


def comparable(output: dict) -> dict:
    return {
        "columns": output["columns"],
        "primary_key": output["primary_key"],
        "rows": output["rows"],
        "locks": [(lock["stage"], sorted(lock["blocked"])) for lock in output["locks"]],
        "stopped": output["error"] is not None,
    }


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_passes_on_spark_and_agrees_with_memory(engine, path: Path):
    scenario = load_scenario(path)
    spark_result = engine.run(scenario)
    assert spark_result.output["failures"] == []
    assert comparable(spark_result.output) == comparable(run_memory(scenario).output)
