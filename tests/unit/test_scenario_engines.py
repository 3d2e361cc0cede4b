"""A scenario file says which engines it runs on (``engines:``, default every engine): the
spark test parametrizes over the files that list spark only, and an engine given a file
that leaves it out reports it as skipped, without running it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from coordinator.scenario.model import ENGINES, Scenario, ScenarioFileError, load_scenario
from coordinator.scenario.runner import ScenarioResult, run_files, select
from devkit.scenario_spark import run_in_session

ROOT = Path(__file__).parents[1] / "scenarios"
ALL = sorted(ROOT.rglob("*.yaml"))
MOVES = sorted((ROOT / "moves").glob("*.yaml"))
GROUPS = sorted((ROOT / "groups").glob("*.yaml"))  # several jobs: the memory engine only
MEMORY_ONLY = GROUPS[0]
# a table the job never reads the CREATE of: not on the real upstream (its snapshot)
NOT_MARIADB = sorted(ROOT.rglob("*rows-carry-schema*.yaml"))
EVERYWHERE = ROOT / "dm" / "dm004-add-column-optimistic.yaml"
# moves whose real-upstream run is not settled (each file says why)
MOVES_NOT_MARIADB = [
    ROOT / "moves" / "held-merge-add-column-pessimistic.yaml",
    ROOT / "moves" / "held-rename-moving-table-pessimistic.yaml",
]
# dead letters: the memory engine only, out of the spark test (each file says why)
DEAD_LETTERS_MEMORY_ONLY = [
    ROOT / "beyond" / "row-of-a-table-never-registered-is-held-optimistic.yaml",
]
# dead letters on memory and spark, not on the real upstream (its oracle is the shards')
DEAD_LETTERS_NOT_MARIADB = [
    ROOT / "beyond" / "ignored-modify-then-unfit-value-dead-letter-optimistic.yaml",
]


def test_engines_default_to_every_engine_and_which_files_leave_some_out() -> None:
    assert load_scenario(EVERYWHERE).engines == list(ENGINES)
    assert MOVES and all(
        load_scenario(p).engines == list(ENGINES) for p in MOVES if p not in MOVES_NOT_MARIADB
    )
    assert all(load_scenario(p).engines == ["memory", "spark"] for p in MOVES_NOT_MARIADB)
    assert GROUPS and all(load_scenario(p).engines == ["memory"] for p in GROUPS)
    assert all(load_scenario(p).engines == ["memory"] for p in DEAD_LETTERS_MEMORY_ONLY)
    assert all(load_scenario(p).engines == ["memory", "spark"] for p in DEAD_LETTERS_NOT_MARIADB)


def test_select_keeps_the_files_that_list_the_engine() -> None:
    assert select(ALL, "memory") == ALL
    not_spark = GROUPS + DEAD_LETTERS_MEMORY_ONLY
    assert select(ALL, "spark") == [p for p in ALL if p not in not_spark]
    assert NOT_MARIADB and all(load_scenario(p).unseen for p in NOT_MARIADB)
    left_out = (
        GROUPS + NOT_MARIADB + MOVES_NOT_MARIADB + DEAD_LETTERS_MEMORY_ONLY
        + DEAD_LETTERS_NOT_MARIADB
    )  # fmt: skip
    assert select(ALL, "mariadb") == [p for p in ALL if p not in left_out]


def test_the_spark_test_runs_only_the_files_that_list_spark() -> None:
    from tests.integration.test_spark_scenarios import SCENARIOS

    assert [p for p in ALL if p not in GROUPS + DEAD_LETTERS_MEMORY_ONLY] == SCENARIOS


def test_an_engine_not_listed_reports_the_file_skipped_without_running_it() -> None:
    ran: list[str] = []

    def spark(scenarios: list[Scenario]) -> list[ScenarioResult]:
        ran.extend(s.name for s in scenarios)
        return [ScenarioResult(s.name, "spark", True, {"ok": True}) for s in scenarios]

    progress = io.StringIO()
    results = run_files([MEMORY_ONLY, EVERYWHERE], "spark", progress, {"spark": spark})
    assert ran == [load_scenario(EVERYWHERE).name]
    assert [r.skipped for r in results] == [True, False]
    assert "runs on memory only, not on spark" in results[0].output["skipped"]
    assert "SKIPPED" in progress.getvalue().splitlines()[0]


def test_the_spark_file_runner_skips_a_file_that_leaves_it_out() -> None:
    class Session:
        def run(self, scenario: Scenario) -> ScenarioResult:
            raise AssertionError(f"{scenario.name} must not run on spark")

    results = list(run_in_session(Session(), [load_scenario(MEMORY_ONLY)], "spark"))  # type: ignore[arg-type]
    assert [r.skipped for r in results] == [True]


def test_an_unknown_engine_name_is_an_invalid_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(EVERYWHERE.read_text() + "\nengines: [memory, flink]\n")
    with pytest.raises(ScenarioFileError, match=r"engines\.1"):
        load_scenario(bad)
