"""Every scenario the project ships passes on the spark engine (real Kafka, the streaming
job, Delta), and the spark and memory engines agree on the result.

The files run side by side, up to ``GROUP_SIZE`` in one streaming query
(``SparkScenarioSession.run_files``; files that stop the job run alone): each file still
sees the batches it would see alone, and each keeps its own test here."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from coordinator.scenario.model import load_scenario
from coordinator.scenario.runner import ScenarioResult, run_memory, select
from devkit.scenario_spark import SparkScenarioSession

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

# Only the files that list the spark engine (`engines:`, default every engine) and Delta
# (`sinks:`, default every sink).
SCENARIOS = select(
    sorted((Path(__file__).parents[1] / "scenarios").rglob("*.yaml")), "spark", "delta"
)


# Sink settings for every file, as JSON (scripts/append-check: the append path of new keys
# taken from each target's second batch on, ``{"append_new_keys": true, "append_min_rows": 0}``).
SINK_ENV = "SHARDMERGE_SCENARIO_SINK"


@pytest.fixture(scope="module")
def engine(kafka, spark, tmp_path_factory):
    sink = json.loads(os.environ.get(SINK_ENV) or "{}")
    with SparkScenarioSession(
        tmp_path_factory.mktemp("scenarios"), broker=kafka, sink=sink
    ) as session:
        yield session


@pytest.fixture(scope="module")
def spark_result(engine, request) -> Callable[[Path], ScenarioResult]:
    """The spark result of a file; the files this session selected run in order, grouped,
    a group when its first file's test asks."""
    module = sys.modules[__name__]
    selected = [
        item.callspec.params["path"]
        for item in request.session.items
        if getattr(item, "module", None) is module and hasattr(item, "callspec")
    ]
    results: Iterator[ScenarioResult] = engine.run_files([load_scenario(p) for p in selected])
    pending = iter(selected)
    ready: dict[Path, ScenarioResult] = {}

    def result(path: Path) -> ScenarioResult:
        while path not in ready:
            ready[next(pending)] = next(results)
        return ready.pop(path)

    return result


def comparable(output: dict) -> dict:
    return {
        "columns": output["columns"],
        "primary_key": output["primary_key"],
        "rows": output["rows"],
        "locks": [(lock["stage"], sorted(lock["blocked"])) for lock in output["locks"]],
        "stopped": output["error"] is not None,
        "moves": output.get("moves", {}),
    }


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_passes_on_spark_and_agrees_with_memory(spark_result, path: Path):
    scenario = load_scenario(path)
    output = spark_result(path).output
    assert output["failures"] == []
    assert comparable(output) == comparable(run_memory(scenario).output)
