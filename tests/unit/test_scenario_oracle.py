"""The mariadb engine's oracle (the shards' own rows) is compared unless the file exempts
it, for a reason in ``_MariaRun.oracle_exemption``; an oracle the run leaves no way to
compare is a failure, and the output says which (``devkit/scenario_mariadb.py``). No
server here: the run's end state is an ``Observation`` written out, the oracle's rows are
the downstream's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coordinator.scenario.model import Scenario, load_scenario
from coordinator.scenario.observe import Observation
from coordinator.scenario.runner import run_memory
from devkit.scenario_mariadb import _MariaRun
from schemas import parse_create_table

ROOT = Path(__file__).parents[1] / "scenarios"
MOVES = ROOT / "moves"
ON_MARIADB = [p for p in sorted(ROOT.rglob("*.yaml")) if "mariadb" in load_scenario(p).engines]
SCHEMA = parse_create_table("CREATE TABLE orders (id INT PRIMARY KEY, total INT)")
ROWS = [{"id": 1, "total": 10}]
NO_LOCK = [{"target": "shop.orders", "stage": "none", "blocked": []}]


def scenario(**expect: Any) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "one shard",
            "mode": "pessimistic",
            "target": "shop.orders",
            "shards": {"s1.db1.orders": "CREATE TABLE orders (id INT PRIMARY KEY, total INT)"},
            "steps": [{"shard": "s1.db1.orders", "insert": {"id": 1, "total": 10}}],
            "expect": {"error": None, **expect},
        }
    )


class _Checks(_MariaRun):
    """The checks of a run, without the servers: the shards hold the downstream's rows."""

    def __init__(self, s: Scenario) -> None:  # no session: nothing runs
        self.scenario = s
        self.dropped_rows = []
        self.oracle_outcome = "not compared: the run did not finish"

    def oracle(self, seen: Observation) -> list[dict[str, Any]]:
        return seen.rows


def finish(s: Scenario, seen: Observation) -> tuple[list[str], str]:
    run = _Checks(s)
    failures = run.finish(seen)
    assert run.finish_output() == {"oracle": run.oracle_outcome}
    return failures, run.oracle_outcome


def test_an_end_state_like_the_shards_is_compared() -> None:
    assert finish(scenario(), Observation(SCHEMA, ROWS, NO_LOCK, None)) == ([], "compared")


@pytest.mark.parametrize(
    ("seen", "why"),
    [
        (Observation(None, [], [], None), "no downstream table"),
        (
            Observation(SCHEMA, ROWS, NO_LOCK, "job died"),
            "the run stopped with an error (job died)",
        ),
        (
            Observation(SCHEMA, ROWS, [{**NO_LOCK[0], "stage": "waiting"}], None),
            "a lock is open",
        ),
        (
            Observation(SCHEMA, ROWS, [{**NO_LOCK[0], "blocked": ["s1.db1.orders"]}], None),
            "a lock is open",
        ),
    ],
)
def test_an_oracle_the_file_does_not_exempt_and_cannot_be_compared_fails(
    seen: Observation, why: str
) -> None:
    failures, outcome = finish(scenario(), seen)
    assert outcome == f"not compared: {why}"
    (failure,) = failures
    assert failure.startswith(f"oracle not compared: {why}, which the file does not expect")


@pytest.mark.parametrize(
    ("s", "seen", "why"),
    [
        (
            scenario(error="refused"),
            Observation(SCHEMA, ROWS, NO_LOCK, "refused: x"),
            "the file expects the run to stop with an error",
        ),
        (
            scenario(locks={"shop.orders": "waiting"}, blocked=["s1.db1.orders"]),
            Observation(SCHEMA, [], [{**NO_LOCK[0], "stage": "waiting"}], None),
            "the file expects a lock open at the end (held rows are not downstream)",
        ),
    ],
)
def test_a_file_that_expects_another_end_exempts_its_oracle(
    s: Scenario, seen: Observation, why: str
) -> None:
    assert finish(s, seen) == ([], f"exempt: {why}")


def test_a_differing_oracle_fails() -> None:
    class Differs(_Checks):
        def oracle(self, seen: Observation) -> list[dict[str, Any]]:
            return [{"id": 1, "total": 11}]

    run = Differs(scenario())
    (failure,) = run.finish(Observation(SCHEMA, ROWS, NO_LOCK, None))
    assert failure.startswith("oracle (the shards' own rows) differs")
    assert run.oracle_outcome == "compared"


def test_every_move_file_on_the_real_upstream_has_its_oracle_compared_but_the_abort() -> None:
    """The memory engine's end state stands in for the real run's: no move file on the
    mariadb engine ends where its oracle cannot be compared, and only the operator's
    abort exempts one."""
    exempt = {}
    for path in sorted(MOVES.glob("*.yaml")):
        s = load_scenario(path)
        if "mariadb" not in s.engines:
            continue
        out = run_memory(s).output
        assert out["error"] is None, path.name
        assert all(lock["stage"] == "none" and not lock["blocked"] for lock in out["locks"])
        # the file's own reasons (the schema-dependent ones need the downstream table)
        why = _Checks(s).oracle_exemption(Observation(None, [], [], None))
        if why:
            exempt[path.name] = why
    assert exempt == {
        "schema-differs-then-abort.yaml": "an operator step changed what reaches the downstream"
    }


@pytest.mark.parametrize("path", ON_MARIADB, ids=lambda p: p.stem)
def test_no_file_on_the_real_upstream_ends_where_its_oracle_cannot_be_compared(
    path: Path,
) -> None:
    """On the memory engine's end state, every file the mariadb engine runs either ends
    as its shards do (no error, no lock open) or exempts its oracle for a reason of its
    own: none would fail with "oracle not compared"."""
    s = load_scenario(path)
    out = run_memory(s).output
    ended_apart = out["error"] is not None or any(
        lock["stage"] != "none" or lock["blocked"] for lock in out["locks"]
    )
    if ended_apart:
        assert _Checks(s).oracle_exemption(Observation(None, [], [], None)), path.name


def test_the_oracle_holds_the_zero_date_as_the_downstream_does() -> None:
    """MySQL's zero date, which the server returns as ``0000-00-00 ...``, is NULL
    downstream (docs/ddl-coverage.md): the oracle projects it so, other values as read."""
    from coordinator.ids import ShardId

    schema = parse_create_table(
        "CREATE TABLE orders (id INT PRIMARY KEY, ts TIMESTAMP NOT NULL DEFAULT 0, note CHAR(20))"
    )
    seen = Observation(schema, [], NO_LOCK, None)
    shard = ShardId.parse("s1.db1.orders")
    row = {"id": 1, "ts": "0000-00-00 00:00:00", "note": "0000-00-00"}
    assert _MariaRun.project(row, shard, seen, {}) == {"id": 1, "ts": None, "note": "0000-00-00"}
    dated = _MariaRun.project({**row, "ts": "2021-05-06 07:08:09"}, shard, seen, {})
    assert dated["ts"] == "2021-05-06 07:08:09"
