"""Scenario files expect dead letters (``dead_letters:``, docs/scenarios.md): the memory
engine (one job or a group) makes a row its downstream cannot take a dead letter with the
job's reason, and the expectation pairs them one to one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coordinator.scenario.group import GroupEngine
from coordinator.scenario.memory import MemoryEngine
from coordinator.scenario.model import Scenario, ScenarioFileError, Step, load_scenario
from coordinator.scenario.observe import Observation, SeenDeadLetter, check
from coordinator.scenario.runner import run_memory

ROOT = Path(__file__).parents[1] / "scenarios"
UNFIT = ROOT / "beyond" / "ignored-modify-then-unfit-value-dead-letter-optimistic.yaml"
UNREGISTERED = ROOT / "beyond" / "row-of-a-table-never-registered-is-held-optimistic.yaml"
INT = "does not fit the target type INT"


def scenario(steps: list[dict[str, Any]], **expect: Any) -> Scenario:
    return Scenario.model_validate({
        "name": "x", "mode": "optimistic", "target": "shardddl.tb",
        "policy": {"modify_column": "ignore"},
        "shards": {"s1.db1.tb1": "CREATE TABLE tb1 (id INT PRIMARY KEY, a INT)",
                   "s2.db1.tb1": "CREATE TABLE tb1 (id INT PRIMARY KEY, a INT)"},
        "steps": [{"shard": "s1.db1.tb1", "sql": "ALTER TABLE tb1 MODIFY a BIGINT"}, *steps],
        "expect": expect,
    })  # fmt: skip


def big(id_: int) -> dict[str, Any]:
    return {"shard": "s1.db1.tb1", "insert": {"id": id_, "a": 2**31 + id_}}


def seen(*letters: tuple[str, str, dict[str, Any]]) -> Observation:
    dead = tuple(SeenDeadLetter(s, r, i) for s, r, i in letters)
    return Observation(None, [], [], None, dead_letters=dead)


def test_an_unfit_value_is_a_dead_letter_with_the_jobs_reason() -> None:
    out = run_memory(scenario([big(1), {"shard": "s1.db1.tb1", "insert": {"id": 2, "a": 2}}]))
    assert out.output["rows"] == [{"id": 2, "a": 2}]
    assert out.output["dead_letters"] == [{"shard": "s1.db1.tb1", "key": {"id": 1},
                                           "reason": f"value 2147483649 of column a {INT}"}]  # fmt: skip


def test_the_expectation_fails_on_a_dead_letter_missing_or_not_expected() -> None:
    none = run_memory(scenario([big(1)], dead_letters=[]))
    assert not none.ok
    assert "found but not expected [{'shard': 's1.db1.tb1'" in none.output["failures"][0]
    other = run_memory(scenario([big(1)], dead_letters=[{"shard": "s2.db1.tb1", "reason": INT}]))
    assert "expected but not found [{'shard': 's2.db1.tb1'" in other.output["failures"][0]
    wrong_key = {"shard": "s1.db1.tb1", "reason": INT, "key": {"id": 9}}
    assert not run_memory(scenario([big(1)], dead_letters=[wrong_key])).ok
    wrong_reason = {"shard": "s1.db1.tb1", "reason": "never registered"}
    assert not run_memory(scenario([big(1)], dead_letters=[wrong_reason])).ok
    right = {"shard": "s1.db1.tb1", "reason": INT, "key": {"id": 1, "a": 2147483649}}
    assert run_memory(scenario([big(1)], dead_letters=[right])).ok


def test_dead_letters_pair_one_to_one() -> None:
    one = {"shard": "s1.db1.tb1", "reason": INT}
    assert not run_memory(scenario([big(1)], dead_letters=[one, one])).ok
    assert not run_memory(scenario([big(1), big(2)], dead_letters=[one])).ok
    assert run_memory(scenario([big(1), big(2)], dead_letters=[one, one])).ok


def test_a_broad_expectation_does_not_take_the_only_match_of_a_narrow_one() -> None:
    letters = seen(("s1.d.t", f"value 1 {INT}", {"id": 1}), ("s1.d.t", f"value 2 {INT}", {"id": 2}))
    wants = [
        {"shard": "s1.d.t", "reason": INT},
        {"shard": "s1.d.t", "reason": INT, "key": {"id": 1}},
    ]
    expect = scenario([], dead_letters=wants).expect
    assert expect is not None
    assert check(expect, letters, "end") == []


def test_a_key_compares_by_value_as_rows_do() -> None:
    letters = seen(("s1.d.t", "r", {"ID": 1, "price": "1.50"}))
    wants = [{"shard": "s1.d.t", "reason": "r", "key": {"id": 1.0, "price": 1.5}}]
    expect = scenario([], dead_letters=wants).expect
    assert expect is not None and check(expect, letters, "end") == []


def test_an_expectation_names_a_shard_and_a_reason(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(UNFIT.read_text().replace("shard: s1.db1.tb1, reason", "shard: s1, reason"))
    with pytest.raises(ScenarioFileError, match=r"dead_letters\.0\.shard"):
        load_scenario(bad)


def test_a_group_records_a_batch_s_dead_letters_once() -> None:
    # the batch that reads the first unfit row dies after its appends and runs again: its
    # dead letters are recorded once, as the one job records them
    s = load_scenario(UNFIT)
    steps = [*s.steps[:3], Step(crash="eu"), *s.steps[3:]]
    group = s.model_copy(update={"jobs": {"eu": ["s1.*"], "us": ["s2.*"]}, "steps": steps})
    out = run_memory(group, roundtrip=True).output
    assert out["failures"] == []
    assert out["dead_letters"] == run_memory(s).output["dead_letters"]


def test_rows_of_a_table_never_registered_are_held_as_the_job_holds_them() -> None:
    # not dead letters: held until the table's CREATE TABLE arrives (Coordinator.await_ddl);
    # in a group through one `await` record, also when the batch that appends it dies
    s = load_scenario(UNREGISTERED)
    one = MemoryEngine(s)
    one.start()
    for i, step in enumerate(s.steps):
        one.step(i, step)
    assert [str(w.shard) for w in one.coordinator.waiting()] == ["s2.db1.tb2"]
    held = [e.op for events in one.stash.values() for _, e in events]
    assert held == ["insert", "update", "delete"] and one.dead_letters == []
    steps = [s.steps[0], Step(crash="us"), *s.steps[1:]]
    group = GroupEngine(s.model_copy(update={"jobs": {"eu": ["s1.*"], "us": ["s2.*"]},
                                             "steps": steps, "engines": ["memory"]}))  # fmt: skip
    group.start()
    for i, step in enumerate(steps):
        group.step(i, step)
    assert [r.kind for _, r in group.log.read(0)].count("await") == 1
    assert group.dead_letters == []
    assert run_memory(group.scenario, roundtrip=True).output["failures"] == []
