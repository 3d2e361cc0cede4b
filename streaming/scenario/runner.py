"""Running scenario files on an engine and reporting one JSON object per file."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

from schemas.errors import ShardMergeError
from streaming.scenario.memory import MemoryEngine
from streaming.scenario.model import Scenario, ScenarioFileError, load_scenario
from streaming.scenario.observe import check, sorted_rows
from streaming.scenario.upstream import UpstreamError

__all__ = ["ScenarioResult", "run_files", "run_memory"]


@dataclass
class ScenarioResult:
    name: str
    engine: str
    ok: bool
    output: dict[str, Any] = field(default_factory=dict)
    invalid: bool = False


def run_memory(scenario: Scenario, *, roundtrip: bool = False) -> ScenarioResult:
    engine = MemoryEngine(scenario, roundtrip=roundtrip)
    failures: list[str] = []
    invalid = False
    try:
        engine.start()
        for index, step in enumerate(scenario.steps):
            try:
                engine.step(index, step)
            except UpstreamError as e:
                # The file asks for something the upstream cannot do: the file is wrong.
                engine.error = f"{scenario.path}: step {index + 1}: {e}"
                failures.append(f"invalid file: {engine.error}")
                invalid = True
                break
            except ShardMergeError as e:
                engine.error = f"step {index + 1}: {e}"
                break
            if step.expect is not None:
                failures += check(step.expect, engine.observe(), f"step {index + 1}")
    except ShardMergeError as e:
        engine.error = str(e)
    seen = engine.observe()
    if scenario.expect is not None:
        failures += check(scenario.expect, seen, "end")
    expected_error = scenario.expect is not None and scenario.expect.error is not None
    if engine.error is not None and not expected_error and not any("error" in f for f in failures):
        failures.append(f"run stopped: {engine.error}")
    output = {
        "name": scenario.name,
        "ok": not failures,
        "engine": engine.name,
        "columns": seen.columns(),
        "primary_key": list(seen.schema.primary_key) if seen.schema else [],
        "rows": sorted_rows(seen),
        "locks": seen.locks,
        "error": seen.error,
        "failures": failures,
    }
    return ScenarioResult(scenario.name, engine.name, not failures, output, invalid=invalid)


ENGINES = ("memory", "spark", "mariadb")


def run_files(
    paths: Iterable[str], engine: str = "memory", progress: TextIO = sys.stderr
) -> list[ScenarioResult]:
    """Run files in order; the spark engine shares one broker and one Spark session."""
    paths = list(paths)
    loaded: list[Scenario | ScenarioResult] = []
    for path in paths:
        try:
            loaded.append(load_scenario(path))
        except ScenarioFileError as e:
            loaded.append(
                ScenarioResult(
                    str(path), engine, False,
                    {"name": str(path), "ok": False, "engine": engine, "error": str(e),
                     "failures": [str(e)]},
                    invalid=True,
                )
            )  # fmt: skip
    scenarios = [s for s in loaded if isinstance(s, Scenario)]
    if engine == "spark" and scenarios:
        from streaming.scenario.spark_engine import run_spark_files

        ran = iter(run_spark_files(scenarios))
    elif engine == "mariadb" and scenarios:
        from streaming.scenario.mariadb_engine import run_mariadb_files

        ran = iter(run_mariadb_files(scenarios))
    else:
        ran = (run_memory(s) for s in scenarios)
    results = []
    for i, item in enumerate(loaded, 1):
        result = item if isinstance(item, ScenarioResult) else next(ran)
        status = "INVALID" if result.invalid else "ok" if result.ok else "FAIL"
        where = paths[i - 1]
        print(f"[{i}/{len(paths)}] {status} {result.name} ({where})", file=progress, flush=True)
        for failure in result.output.get("failures", []):
            print(f"    {failure}", file=progress)
        results.append(result)
    return results
