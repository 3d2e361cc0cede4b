"""Running scenario files on an engine and reporting one JSON object per file."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
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


ENGINES: dict[str, Callable[[Scenario], ScenarioResult]] = {"memory": run_memory}


def run_files(
    paths: Iterable[str], engine: str = "memory", progress: TextIO = sys.stderr
) -> list[ScenarioResult]:
    results = []
    paths = list(paths)
    runner = ENGINES[engine]
    for i, path in enumerate(paths, 1):
        try:
            scenario = load_scenario(path)
        except ScenarioFileError as e:
            print(f"[{i}/{len(paths)}] INVALID {e}", file=progress)
            results.append(
                ScenarioResult(
                    str(path),
                    engine,
                    False,
                    {
                        "name": str(path),
                        "ok": False,
                        "engine": engine,
                        "error": str(e),
                        "failures": [str(e)],
                    },
                    invalid=True,
                )
            )
            continue
        result = runner(scenario)
        status = "ok" if result.ok else "FAIL"
        print(f"[{i}/{len(paths)}] {status} {scenario.name} ({path})", file=progress)
        for failure in result.output.get("failures", []):
            print(f"    {failure}", file=progress)
        results.append(result)
    return results
