"""A scenario file says which engines it runs on (``engines:``, default every engine) and
which sinks its expectations describe (``sinks:``, default every sink): the spark test
parametrizes over the files that list spark and Delta only, and an engine given a file
that leaves it (or the sink it writes) out reports it as skipped, without running it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from coordinator.scenario.model import ENGINES, Scenario, ScenarioFileError, load_scenario
from coordinator.scenario.runner import ScenarioResult, run_files, run_memory, select
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
# values whose real-upstream capture is not checked (the file says why)
VALUES_NOT_MARIADB = [
    ROOT / "beyond" / "dates-before-the-gregorian-switch-keep-their-day-optimistic.yaml",
]
# dead letters: the memory engine only, out of the spark test (each file says why)
DEAD_LETTERS_MEMORY_ONLY = [
    ROOT / "beyond" / "row-of-a-table-never-registered-is-held-optimistic.yaml",
]
# dead letters on memory and spark, not on the real upstream (its oracle is the shards')
DEAD_LETTERS_NOT_MARIADB = [
    ROOT / "beyond" / "enum-set-year-tinytext-past-a-database-column-dead-letter-optimistic.yaml",
    ROOT / "beyond" / "ignored-modify-then-unfit-value-dead-letter-database-optimistic.yaml",
    ROOT / "beyond" / "ignored-modify-then-unfit-value-dead-letter-optimistic.yaml",
    ROOT / "beyond" / "temporal-counts-past-any-day-dead-letter-optimistic.yaml",
    ROOT / "beyond" / "json-that-is-not-json-dead-letter-database-optimistic.yaml",
]
# a target on a database (the JDBC sink): its VARCHAR(3) refuses what Delta's takes; and
# one on MariaDB and MySQL only (PostgreSQL's TEXT and SMALLINT take its values)
MYSQL_FAMILY_ONLY = [DEAD_LETTERS_NOT_MARIADB[0]]
DATABASE_ONLY = [DEAD_LETTERS_NOT_MARIADB[1]]
# every database-only file (DATABASE_ONLY is the one the sink tests below run)
ON_DATABASES = [*DATABASE_ONLY, DEAD_LETTERS_NOT_MARIADB[4]]
DELTA_ONLY = [DEAD_LETTERS_NOT_MARIADB[2]]


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
    on_delta = [p for p in ALL if p not in not_spark + ON_DATABASES + MYSQL_FAMILY_ONLY]
    assert select(ALL, "spark", "delta") == on_delta
    on_mariadb = [p for p in ALL if p not in not_spark + DELTA_ONLY]
    assert select(ALL, "spark", "mariadb") == on_mariadb
    on_postgresql = [p for p in on_mariadb if p not in MYSQL_FAMILY_ONLY]
    assert select(ALL, "spark", "postgresql") == on_postgresql
    assert NOT_MARIADB and all(load_scenario(p).unseen for p in NOT_MARIADB)
    left_out = (
        GROUPS + NOT_MARIADB + MOVES_NOT_MARIADB + DEAD_LETTERS_MEMORY_ONLY
        + DEAD_LETTERS_NOT_MARIADB + VALUES_NOT_MARIADB
    )  # fmt: skip
    assert select(ALL, "mariadb") == [p for p in ALL if p not in left_out]


def test_the_spark_test_runs_only_the_files_that_list_spark() -> None:
    from tests.integration.test_spark_scenarios import SCENARIOS

    left_out = GROUPS + DEAD_LETTERS_MEMORY_ONLY + ON_DATABASES + MYSQL_FAMILY_ONLY
    assert [p for p in ALL if p not in left_out] == SCENARIOS


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
        sink_kind = "delta"

        def run(self, scenario: Scenario) -> ScenarioResult:
            raise AssertionError(f"{scenario.name} must not run on spark")

    files = [load_scenario(MEMORY_ONLY), load_scenario(DATABASE_ONLY[0])]
    results = list(run_in_session(Session(), files, "spark"))  # type: ignore[arg-type]
    assert [r.skipped for r in results] == [True, True]


def test_an_unknown_engine_name_is_an_invalid_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(EVERYWHERE.read_text() + "\nengines: [memory, flink]\n")
    with pytest.raises(ScenarioFileError, match=r"engines\.1"):
        load_scenario(bad)


def test_a_file_for_other_sinks_is_skipped_by_an_engine_writing_another() -> None:
    ran: list[str] = []

    def spark(scenarios: list[Scenario]) -> list[ScenarioResult]:
        ran.extend(s.name for s in scenarios)
        return [ScenarioResult(s.name, "spark", True, {"ok": True}) for s in scenarios]

    files = [*DATABASE_ONLY, *DELTA_ONLY]
    results = run_files(files, "spark", io.StringIO(), {"spark": spark})  # Delta by default
    assert ran == [load_scenario(DELTA_ONLY[0]).name]
    assert [r.skipped for r in results] == [True, False]
    assert "on mariadb, mysql, postgresql only, not on delta" in results[0].output["skipped"]
    ran.clear()
    results = run_files(files, "spark", io.StringIO(), {"spark": spark}, sink="postgresql")
    assert ran == [load_scenario(DATABASE_ONLY[0]).name]
    assert [r.skipped for r in results] == [False, True]


def test_the_memory_engine_plans_for_the_files_first_sink_or_the_one_it_is_given() -> None:
    database, delta = load_scenario(DATABASE_ONLY[0]), load_scenario(DELTA_ONLY[0])
    assert database.sinks == ["mariadb", "mysql", "postgresql"] and delta.sinks == ["delta"]
    assert load_scenario(EVERYWHERE).sinks == ["delta", "mariadb", "mysql", "postgresql"]
    # each passes as it is planned by default; run_files skips the other when told a sink
    results = run_files([*DATABASE_ONLY, *DELTA_ONLY], "memory", io.StringIO())
    assert [r.ok and not r.skipped for r in results] == [True, True]
    results = run_files([*DATABASE_ONLY, *DELTA_ONLY], "memory", io.StringIO(), sink="delta")
    assert [r.skipped for r in results] == [True, False]
    # planned for the other kind of sink, each file's expectations fail: they differ
    assert not run_memory(database, sink="delta").ok
    assert not run_memory(delta, sink="mariadb").ok
    with pytest.raises(ScenarioFileError, match="unknown sink 'iceberg'"):
        run_memory(delta, sink="iceberg")
