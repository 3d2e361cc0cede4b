"""The spark and mariadb engines run files in turn: one file's error is that file's failure
in the JSON output, and the next file still runs (``devkit.scenario_spark.run_in_session``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coordinator.scenario.model import Scenario, load_scenario
from coordinator.scenario.runner import ScenarioResult
from devkit.scenario_spark import run_in_session
from shardmerge.errors import ShardMergeError

FILES = sorted((Path(__file__).parents[1] / "scenarios" / "beyond").glob("*.yaml"))[:3]


class _Session:
    """Runs files the way an engine session does; the given files fail as given."""

    sink_kind = "delta"

    def __init__(self, errors: dict[str, BaseException]) -> None:
        self.errors = errors
        self.ran: list[str] = []

    def run(self, scenario: Scenario) -> ScenarioResult:
        self.ran.append(scenario.name)
        error = self.errors.get(scenario.name)
        if error is not None:
            raise error
        return ScenarioResult(scenario.name, "mariadb", True, {"name": scenario.name, "ok": True})


def test_any_error_of_one_file_is_its_failure_and_the_run_goes_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    scenarios = [load_scenario(f) for f in FILES]
    first, second, third = (s.name for s in scenarios)
    session = _Session(
        {
            first: KeyError("pymysql: (1049, \"Unknown database 'db1'\")"),
            second: ShardMergeError("Debezium did not capture source(s) s1 within 90 s"),
        }
    )
    results = list(run_in_session(session, scenarios, "mariadb"))  # type: ignore[arg-type]
    assert session.ran == [first, second, third]
    assert [r.ok for r in results] == [False, False, True]
    out: list[dict[str, Any]] = [r.output for r in results]
    assert out[0]["failures"] == [
        "engine error: KeyError: 'pymysql: (1049, \"Unknown database \\'db1\\'\")'"
    ]
    assert out[0]["engine"] == "mariadb" and out[0]["name"] == first
    assert out[1]["error"] == "Debezium did not capture source(s) s1 within 90 s"
    assert "Traceback" in capsys.readouterr().err  # the cause, for whoever reads the log


def test_an_interrupt_still_ends_the_run() -> None:
    scenarios = [load_scenario(f) for f in FILES]
    session = _Session({scenarios[0].name: KeyboardInterrupt()})
    with pytest.raises(KeyboardInterrupt):
        list(run_in_session(session, scenarios, "mariadb"))  # type: ignore[arg-type]
    assert session.ran == [scenarios[0].name]
