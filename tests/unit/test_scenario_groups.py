"""Scenario files side by side in one streaming query (``devkit.scenario_spark``): which
files may share a query, each file's names in the shared job and back, and the order and
grouping of the results."""

from __future__ import annotations

import itertools
from pathlib import Path

from coordinator.scenario.model import Scenario, load_scenario
from coordinator.scenario.runner import ScenarioResult
from devkit.scenario_spark import GROUP_SIZE, SparkScenarioSession, _Names, rounds, shares_query

ROOT = Path(__file__).parents[1] / "scenarios"
PLAIN = ROOT / "dm" / "dm004-add-column-optimistic.yaml"
STRICT = ROOT / "beyond" / "strict-conflict-ddl-optimistic.yaml"
MEMORY_ONLY = sorted((ROOT / "groups").glob("*.yaml"))[0]  # several jobs: memory only


def test_a_file_meant_to_stop_the_job_runs_alone() -> None:
    assert shares_query(load_scenario(PLAIN))
    assert not shares_query(load_scenario(STRICT))  # strict, and its run stops
    expected_error = load_scenario(PLAIN).model_copy(
        update={"expect": load_scenario(PLAIN).expect.model_copy(update={"error": "boom"})}
    )
    assert not shares_query(expected_error)


def test_names_in_the_shared_job_and_back() -> None:
    names = _Names("m007_", load_scenario(PLAIN))
    assert names.source("s1") == "m007_s1"
    words = "unlock shardddl.tb --shard s1.db1.tb2 --replace 'ALTER TABLE tb1 ADD COLUMN b INT'"
    assert names.words(words) == (
        "unlock m007_shardddl.tb --shard m007_s1.db1.tb2 "
        "--replace 'ALTER TABLE tb1 ADD COLUMN b INT'"
    )
    # a shard of a source the file does not have is left as written (the job refuses it)
    assert names.words("unlock shardddl.tb --shard s9.db1.tb1") == (
        "unlock m007_shardddl.tb --shard s9.db1.tb1"
    )
    assert (
        names.back("shard m007_s2.db1.tb1 of m007_shardddl.tb") == "shard s2.db1.tb1 of shardddl.tb"
    )
    assert names.back(None) is None


def test_a_file_alone_keeps_its_own_names() -> None:
    names = _Names("", load_scenario(PLAIN))
    assert names.source("s1") == "s1"
    assert names.words("unlock shardddl.tb --shard s1.db1.tb1") == (
        "unlock shardddl.tb --shard s1.db1.tb1"
    )
    assert names.back("m007_x") == "m007_x"


class _Session:
    """Records how files were run; results name the way each ran."""

    sink_kind = "delta"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def run(self, scenario: Scenario) -> ScenarioResult:
        self.calls.append([scenario.name])
        return ScenarioResult(scenario.name, "spark", True, {"ran": "alone"})

    def run_together(self, scenarios: list[Scenario]) -> list[ScenarioResult]:
        self.calls.append([s.name for s in scenarios])
        return [ScenarioResult(s.name, "spark", True, {"ran": "together"}) for s in scenarios]


def test_results_come_in_the_order_given_grouped_up_to_the_group_size() -> None:
    plain = [p for p in sorted((ROOT / "dm").glob("*.yaml"))][: GROUP_SIZE + 2]
    files = [load_scenario(p) for p in [plain[0], STRICT, MEMORY_ONLY, *plain[1:]]]
    session = _Session()
    results = list(SparkScenarioSession.run_files(session, files))  # type: ignore[arg-type]
    assert [r.name for r in results] == [s.name for s in files]
    alone = {s.name for s in files if not shares_query(s) and s.runs_on("spark")}
    assert alone == {files[1].name}
    assert [r.output.get("ran") for r in results][:3] == ["together", "alone", None]
    assert results[2].skipped  # a memory-only file
    by_name = {s.name: s for s in files}
    shared = {s.name for s in files if s.runs_on("spark") and shares_query(s)}
    groups = [c for c in session.calls if c[0] in shared]
    assert sorted(n for g in groups for n in g) == sorted(shared)  # each shared file once
    assert all(len(g) <= GROUP_SIZE for g in groups) and len(groups) > 1
    # grouped by how many rounds the files take: a group's longest file sets its rounds
    spans = sorted((min(rounds(by_name[n]) for n in g), max(rounds(by_name[n]) for n in g))
                   for g in groups)  # fmt: skip
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert all(g == sorted(g, key=[s.name for s in files].index) for g in groups)


def test_a_group_that_fails_as_a_whole_fails_each_of_its_files() -> None:
    class Broken(_Session):
        def run_together(self, scenarios: list[Scenario]) -> list[ScenarioResult]:
            raise RuntimeError("the JVM is gone")

    files = [load_scenario(p) for p in sorted((ROOT / "dm").glob("*.yaml"))[:3]]
    results = list(SparkScenarioSession.run_files(Broken(), files))  # type: ignore[arg-type]
    assert [r.ok for r in results] == [False, False, False]
    assert all("RuntimeError: the JVM is gone" in r.output["error"] for r in results)


def test_rounds_count_the_points_where_the_job_catches_up() -> None:
    scenario = load_scenario(ROOT / "beyond" / "operator-replace-pessimistic.yaml")
    assert rounds(scenario) == 3  # an expect step, an operator step, the end
