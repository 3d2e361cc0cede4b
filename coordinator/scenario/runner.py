"""Running scenario files on an engine and reporting one JSON object per file."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from coordinator.scenario.group import GroupEngine, RandomSchedule
from coordinator.scenario.memory import MemoryEngine
from coordinator.scenario.model import Scenario, ScenarioFileError, load_scenario
from coordinator.scenario.observe import check, sorted_rows
from coordinator.scenario.upstream import UpstreamError
from shardmerge.errors import ShardMergeError

__all__ = ["ScenarioResult", "run_files", "run_memory", "select", "skipped"]


@dataclass
class ScenarioResult:
    name: str
    engine: str
    ok: bool
    output: dict[str, Any] = field(default_factory=dict)
    invalid: bool = False
    skipped: bool = False


def skipped(scenario: Scenario, engine: str, sink: str | None = None) -> ScenarioResult:
    """The result for a file whose ``engines`` (or ``sinks``) leave this one out: reported
    as skipped (``"skipped"`` in its JSON, SKIPPED on stderr), never run and never called
    passed."""
    if engine not in scenario.engines:
        why = f"runs on {', '.join(scenario.engines)} only, not on {engine}"
    else:
        why = f"describes a target on {', '.join(scenario.sinks)} only, not on {sink}"
    output = {"name": scenario.name, "ok": True, "skipped": why, "engine": engine,
              "error": None, "failures": []}  # fmt: skip
    return ScenarioResult(scenario.name, engine, True, output, skipped=True)


def select(paths: Iterable[str | Path], engine: str, sink: str | None = None) -> list[Path]:
    """The scenario files whose ``engines`` include ``engine`` (and with ``sink``, whose
    ``sinks`` include it; an invalid file is kept: running it reports why)."""
    out = []
    for path in paths:
        try:
            if not load_scenario(path).runs_on(engine, sink):
                continue
        except ScenarioFileError:
            pass
        out.append(Path(path))
    return out


def run_memory(
    scenario: Scenario,
    *,
    roundtrip: bool = False,
    schedule: RandomSchedule | None = None,
    sink: str | None = None,
) -> ScenarioResult:
    """One file on the memory engine (with ``jobs:``, the group engine; ``schedule``: its
    batches at random instead of in lockstep), planned for a target on ``sink`` (default:
    the file's first sink; a database's columns refuse more values than Delta's)."""
    engine: MemoryEngine | GroupEngine = (
        GroupEngine(scenario, roundtrip=roundtrip, schedule=schedule, sink=sink)
        if scenario.jobs
        else MemoryEngine(scenario, roundtrip=roundtrip, sink=sink)
    )
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
        **({"moves": seen.moves} if seen.moves else {}),
        **({"dead_letters": seen.dead_letter_rows()} if seen.dead_letters else {}),
    }
    return ScenarioResult(scenario.name, engine.name, not failures, output, invalid=invalid)


# An engine runs loaded scenarios in order and yields one result per scenario. The memory
# engine is here; the spark and mariadb engines need Kafka, Spark and MariaDB, so they live
# with the development tooling (devkit.scenario_spark, devkit.scenario_mariadb) and the
# command line passes them in.
EngineRunner = Callable[[list[Scenario]], Iterable[ScenarioResult]]


def run_files(
    paths: Iterable[str],
    engine: str = "memory",
    progress: TextIO = sys.stderr,
    engines: Mapping[str, EngineRunner] | None = None,
    sink: str | None = None,
) -> list[ScenarioResult]:
    """Run files in order on ``engine``: ``memory`` or one of ``engines``, the target on
    ``sink`` (the memory engine plans for it, default each file's first; another engine
    writes it, default Delta, and reports a file for other sinks as skipped)."""
    runners: dict[str, EngineRunner] = {"memory": lambda ss: (run_memory(s, sink=sink) for s in ss)}
    runners.update(engines or {})
    if engine not in runners:
        raise ShardMergeError(
            f"unknown scenario engine {engine!r}: choose one of {', '.join(sorted(runners))}"
        )
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
    # The memory engine plans for each file's first sink unless told one.
    writes = sink if engine == "memory" else (sink or "delta")
    loaded = [
        skipped(s, engine, writes)
        if isinstance(s, Scenario) and not s.runs_on(engine, writes)
        else s
        for s in loaded
    ]
    scenarios = [s for s in loaded if isinstance(s, Scenario)]
    ran = iter(runners[engine](scenarios) if scenarios else ())
    results = []
    for i, item in enumerate(loaded, 1):
        result = item if isinstance(item, ScenarioResult) else next(ran)
        status = (
            "INVALID"
            if result.invalid
            else "SKIPPED"
            if result.skipped
            else "ok"
            if result.ok
            else "FAIL"
        )
        where = paths[i - 1]
        print(f"[{i}/{len(paths)}] {status} {result.name} ({where})", file=progress, flush=True)
        for failure in result.output.get("failures", []):
            print(f"    {failure}", file=progress)
        results.append(result)
    return results
