"""Several jobs, one target (coordinator/group.py, coordinator/scenario/group.py): the
coordinator as a replicated state machine folded from one group log.

- G1: replicas that folded the same records hold equal snapshots; one restored from a
  snapshot folds on as the one that made it.
- A group of one is the memory engine: every shipped file, the same output.
- Every shipped file with shards on two or more sources, split into one job per source,
  passes its own expectations in lockstep; and under random schedules, those that end
  with no lock, no error and no operator step give the single job's columns, rows and
  locks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator import Extract, Route, Router, ShardId, TargetConfig, TargetId
from coordinator.commands import parse_command
from coordinator.group import GroupError, MemoryLog, Record, Replica
from coordinator.scenario.group import GroupEngine, RandomSchedule
from coordinator.scenario.model import Scenario, ScenarioFileError, Step, load_scenario
from coordinator.scenario.observe import sorted_rows
from coordinator.scenario.runner import run_memory

ROOT = Path(__file__).parents[1] / "scenarios"
SHARED = sorted(p for p in ROOT.rglob("*.yaml") if p.parent.name not in ("moves", "groups"))
T = TargetId("shardddl", "tb")
CREATE = "CREATE TABLE tb1 (id INT PRIMARY KEY, a INT)"


def sources(s: Scenario) -> list[str]:
    names = [*s.shards, *(step.shard for step in s.steps if step.shard)]
    return sorted({ShardId.parse(n).source for n in names})


def split(s: Scenario, jobs: int | None = None) -> Scenario:
    """One job per source (or ``jobs`` jobs, sources dealt round-robin)."""
    names = sources(s)
    n = len(names) if jobs is None else jobs
    split_jobs: dict[str, list[str]] = {f"j{i}": [] for i in range(n)}
    for i, source in enumerate(names):
        split_jobs[f"j{i % n}"].append(f"{source}.*")
    return s.model_copy(update={"jobs": split_jobs, "engines": ["memory"]})


def bare(s: Scenario) -> Scenario:
    """The file without its expectations (the end state is compared instead)."""
    return s.model_copy(update={"expect": None, "steps": [x for x in s.steps if not x.expect]})


def outcome(s: Scenario, **kw: object) -> tuple[object, ...]:
    out = run_memory(s, **kw).output  # type: ignore[arg-type]
    locks = [(lock["stage"], lock["blocked"]) for lock in out["locks"]]
    return out["columns"], out["rows"], locks, out["error"] is None


MULTI = [p for p in SHARED if len(sources(load_scenario(p))) >= 2]


def _converges(p: Path) -> bool:
    s = load_scenario(p)
    out = run_memory(bare(s)).output
    ended_open = any(lock["stage"] != "none" or lock["blocked"] for lock in out["locks"])
    # an operator's command names what they saw at that moment, and a reading from a
    # shadow's rows depends on what the other shards ran before: both are order-bound
    return not (out["error"] or ended_open or s.row_schemas or any(x.operator for x in s.steps))


CONVERGING = [p for p in MULTI if _converges(p)]


# --- the log and the fold --------------------------------------------------------------


def test_records_round_trip_and_refuse_what_is_not_one() -> None:
    r = Record("eu:ddl:3", "eu", "ddl", {"shard": "s1.db1.tb1", "sql": "x", "position": 3})
    assert Record.from_json(json.loads(r.text())) == r
    for bad in [{}, {"id": 1, "job": "eu", "kind": "ddl", "body": {}},
                {"id": "a", "job": "eu", "kind": "nope", "body": {}},
                {"id": "a", "job": "eu", "kind": "ddl", "body": []}]:  # fmt: skip
        with pytest.raises(GroupError):
            Record.from_json(bad)


def test_an_append_with_a_known_id_keeps_the_first_record() -> None:
    log = MemoryLog()
    first = Record("eu:ddl:1", "eu", "ddl", {"shard": "s1.db1.tb1", "sql": "a"})
    assert log.append(first) == 1
    assert log.append(Record("us:ddl:1", "us", "ddl", {"shard": "s2.db1.tb1", "sql": "b"})) == 2
    assert log.append(Record("eu:ddl:1", "eu", "ddl", {"shard": "s1.db1.tb1", "sql": "c"})) == 1
    assert [(seq, r.body["sql"]) for seq, r in log.read(0)] == [(1, "a"), (2, "b")]
    assert [seq for seq, _ in log.read(1)] == [2]


def replica() -> Replica:
    return Replica.new(Router((Route(T, extract=Extract()),)), {T: TargetConfig("pessimistic")})


def group_log() -> MemoryLog:
    log = MemoryLog()
    shards = [("eu", "s1.db1.tb1"), ("us", "s2.db1.tb1")]
    for job, shard in shards:
        log.append(Record(f"{job}:r", job, "register", {"shard": shard, "create": CREATE}))
    for i, (job, shard) in enumerate(shards):
        log.append(Record(f"{job}:d{i}", job, "ddl", {"shard": shard, "position": 10 + i,
                          "sql": "ALTER TABLE tb1 ADD COLUMN c INT"}))  # fmt: skip
    cmd = parse_command("unlock shardddl.tb --shard s9.db1.tb1 --action skip").to_json()
    log.append(Record("op:1", "operator", "command", {"command": cmd}))
    # a job naming a shard that is another job's: refused, the same way everywhere
    log.append(Record("us:x", "us", "ddl", {"shard": "s1.db1.tb1", "sql": "DROP TABLE tb1"}))
    return log


def test_replicas_that_folded_the_same_records_are_equal_g1() -> None:
    log = group_log()
    a, b = replica(), replica()
    folded = a.fold(log.read(0))
    for seq, record in log.read(0):  # one record at a time, restored in between
        b.fold([(seq, record)])
        b = Replica.restore(json.loads(json.dumps(b.snapshot())), b.coordinator.router,
                            b.coordinator.configs)  # fmt: skip
    assert a.snapshot() == b.snapshot() and a.seq == len(log)
    assert a.versions == {T: 2}  # created, then the ADD COLUMN every shard ran
    kinds = [[type(d).__name__ for d in f.decisions] for f in folded]
    assert kinds[3] == ["Hold", "ApplyDDL", "Release", "Release"]
    assert folded[3].versions == (1, 2, 2, 2)  # each decision with its target's version
    assert [f.refused is not None for f in folded] == [False] * 4 + [True, True]
    assert "not taken" in (folded[4].refused or "") and "s9.db1.tb1" in (folded[4].refused or "")
    assert "belongs to job eu" in (folded[5].refused or "")
    with pytest.raises(GroupError, match="gap"):
        replica().fold(log.read(1))


def test_a_crashed_batch_run_again_appends_nothing_twice() -> None:
    s = load_scenario(ROOT / "groups" / "owner-lease-expiry-pessimistic.yaml")
    engine = GroupEngine(s)
    engine.start()
    for i, step in enumerate(s.steps):
        engine.step(i, step)
    ids = [r.id for _, r in engine.log.read(0)]
    assert len(ids) == len(set(ids)) and "eu:ddl:13" in ids
    assert engine.observe().error is None


def test_the_owner_s_term_passes_on_only_when_its_holder_is_down() -> None:
    # streaming.group.member.GroupMember.owns: the newest term's holder is the owner while it is
    # live, paused within its lease or not; the first live job claims a term only then
    s = load_scenario(ROOT / "groups" / "paused-owner-keeps-its-term-optimistic.yaml")
    engine = GroupEngine(s)
    engine.start()
    owners = []
    for i, step in enumerate(s.steps):
        engine.step(i, step)
        owner = engine.owner()
        owners.append((step.kind, owner.name if owner else None))
    assert owners == [
        ("pause", "eu"), ("sql", "eu"), ("insert", "eu"), ("expect", "eu"),
        ("pause", "eu"),  # paused, still live: it keeps the term
        ("resume", "eu"), ("expect", "eu"), ("insert", "eu"), ("expect", "eu"),
        ("clock", "us"),  # its lease ran out: us claims the next term
        ("expect", "us"),
        ("resume", "us"),  # eu runs again; us, live, keeps the term
        ("sql", "us"), ("insert", "us"),
    ]  # fmt: skip
    assert engine.terms == 2


def test_the_file_format_checks_jobs() -> None:
    base = {"name": "x", "mode": "optimistic", "target": "a.b", "shards": {}}
    with pytest.raises(ValueError, match="need `jobs:`"):
        Scenario.model_validate({**base, "steps": [{"pause": "eu"}]})
    with pytest.raises(ValueError, match="no job 'us'"):
        Scenario.model_validate({**base, "jobs": {"eu": ["s1.*"]}, "engines": ["memory"],
                                 "steps": [{"crash": "us"}]})  # fmt: skip
    with pytest.raises(ValueError, match="memory engine only"):
        Scenario.model_validate({**base, "jobs": {"eu": ["s1.*"]}})
    orphan = Scenario.model_validate(
        {**base, "jobs": {"eu": ["s1.*"]}, "engines": ["memory"], "shards": {"s2.d.t": CREATE}}
    )
    with pytest.raises(ScenarioFileError, match=r"no job reads shard s2\.d\.t"):
        GroupEngine(orphan).start()


# --- the shipped scenarios as groups ----------------------------------------------------


@pytest.mark.parametrize("path", SHARED, ids=[p.stem for p in SHARED])
def test_a_group_of_one_is_the_memory_engine(path: Path) -> None:
    s = load_scenario(path)
    if s.moves:
        pytest.skip("moves run with one job")
    one = s.model_copy(update={"jobs": {"only": ["*"]}, "engines": ["memory"]})
    assert run_memory(one, roundtrip=True).output == run_memory(s).output


@pytest.mark.parametrize("path", MULTI, ids=[p.stem for p in MULTI])
def test_one_job_per_source_passes_the_files_own_expectations(path: Path) -> None:
    result = run_memory(split(load_scenario(path)), roundtrip=True)
    assert result.output["failures"] == []


@pytest.mark.parametrize("path", CONVERGING, ids=[p.stem for p in CONVERGING])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), p=st.floats(0.1, 0.9), jobs=st.sampled_from([2, 3]))
def test_random_schedules_end_as_one_job_does(path: Path, seed: int, p: float, jobs: int) -> None:
    s = bare(load_scenario(path))
    n = min(jobs, len(sources(s)))
    schedule = RandomSchedule(seed, p)
    assert outcome(split(s, n), schedule=schedule) == outcome(s)


def test_the_property_covers_enough_files() -> None:
    assert len(MULTI) >= 40 and len(CONVERGING) >= 25


# --- a job stopped inside a batch (issue 40) --------------------------------------------

SHARDS = ("s1.db1.tb1", "s1.db2.tb1", "s2.db1.tb1", "s2.db2.tb1")


def rollout() -> list[dict[str, object]]:
    """Rows on every shard around three DDLs each shard runs in turn: an ADD COLUMN (the
    first shard's decides it), a rename (it waits for all four) and a widening."""
    steps: list[dict[str, object]] = []
    key = iter(range(1, 1000))
    cols = {s: {"a": 1} for s in SHARDS}

    def row(shard: str) -> None:
        steps.append({"shard": shard, "insert": {"id": next(key), **cols[shard]}})

    for shard in SHARDS:
        row(shard)
    for ddl, old, new in [("ADD COLUMN c INT", None, "c"), ("CHANGE c d INT", "c", "d"),
                          ("MODIFY a BIGINT", None, None)]:  # fmt: skip
        for shard in SHARDS:
            steps.append({"shard": shard, "sql": f"ALTER TABLE tb1 {ddl}"})
            cols[shard].pop(old or "", None)
            cols[shard].update({new: 2} if new else {})
            row(shard)
    for shard in SHARDS:
        row(shard)
    steps.append({"shard": SHARDS[2], "delete": {"id": 3}})
    return steps


ROLLOUT = Scenario.model_validate({
    "name": "a rollout over two jobs", "mode": "optimistic", "target": "shardddl.tb",
    "shards": {s: CREATE for s in SHARDS}, "steps": rollout(),
})  # fmt: skip
ONE_JOB = outcome(ROLLOUT)


@settings(max_examples=150, deadline=None)
@given(
    who=st.sampled_from(["eu", "us"]),
    at=st.integers(-1, len(ROLLOUT.steps) - 1),
    appends=st.integers(0, 3),
    lease_out=st.one_of(st.none(), st.integers(0, 8)),
    resume=st.integers(0, 8),
)
def test_a_job_stopped_anywhere_in_a_batch_ends_as_one_job_does(
    who: str, at: int, appends: int, lease_out: int | None, resume: int
) -> None:
    # A job stops (SIGSTOP) inside its next batch that appends after step `at` (-1: its
    # first, which joins), before or after `appends` of its appends. Its lease runs out
    # `lease_out` steps later (None: never; the owner waits for it), so the owner's next
    # ALTER comes before or after; it runs again `resume` steps after that. Its batch runs
    # again: it is not fenced for good, appends nothing twice, and ends as one job does.
    s = ROLLOUT.model_copy(update={"jobs": {"eu": ["s1.*"], "us": ["s2.*"]},
                                   "engines": ["memory"]})  # fmt: skip
    engine = GroupEngine(s)
    if at < 0:
        engine.stop_inside(who, appends)
    engine.start()
    job = engine.jobs[who]
    stopped = -1 if job.paused else None
    for i, step in enumerate(s.steps):
        engine.step(i, step)
        if i == at:
            engine.stop_inside(who, appends)
        if stopped is None and job.paused:
            stopped = i
        if stopped is None or not job.paused:
            continue
        if lease_out is not None and i == stopped + lease_out:
            engine.step(i, Step(clock=s.lease_s + 1))
        if i == stopped + (lease_out or 0) + resume:
            engine.step(i, Step(resume=who))
    if job.paused:
        engine.step(len(s.steps), Step(resume=who))
    seen = engine.observe()
    assert engine.error is None
    ids = [r.id for _, r in engine.log.read(0)]
    assert len(ids) == len(set(ids))  # a batch run again appended nothing twice
    locks = [(lock["stage"], lock["blocked"]) for lock in seen.locks]
    assert (seen.columns(), sorted_rows(seen), locks, True) == ONE_JOB


def test_a_record_of_the_wrong_shape_is_refused_alike_in_every_replica() -> None:
    log = group_log()
    bad = [
        Record("eu:b1", "eu", "shadow", {"shard": "s1.db1.tb1", "seen": 5}),
        Record("eu:b2", "eu", "prints", {"shard": "s1.db1.tb1", "seen": [[1, 2]]}),
        Record("eu:b3", "eu", "ddl", {"shard": ["s1"], "sql": "x"}),
        Record("eu:b4", "eu", "command", {"command": "unlock"}),
        Record("eu:b5", "eu", "register", {"shard": "s3.db1.tb1", "create": None}),
        Record.read({"id": "eu:b6", "job": "eu", "kind": "ddl", "body": "x"}),
        Record.read(["not", "a", "record"]),
        Record("op:n", "operator", "noop", {"reason": "a gap filled"}),
    ]
    # as a member reads its store (Record.read): the unreadable ones stand for themselves
    records = log.read(0) + [(len(log) + i, r) for i, r in enumerate(bad, start=1)]
    a, b = replica(), replica()
    folded = a.fold(records)
    for seq, record in records:
        b.fold([(seq, record)])
    assert a.snapshot() == b.snapshot() and a.versions == {T: 2}
    why = {f.record.id: f.refused for f in folded[6:]}
    assert [w is not None for w in why.values()] == [True] * 7 + [False]
    assert "malformed shadow record: 'seen' must be a list" in (why["eu:b1"] or "")
    assert "malformed ddl record: 'shard' must be a string" in (why["eu:b3"] or "")
    assert "body is an object" in (why["eu:b6"] or "")
    assert [seq for seq, _ in a.refused][-7:] == list(range(7, 14))


def test_the_owner_waits_for_every_live_member_that_has_not_folded_the_decision() -> None:
    from coordinator.group import Ack, owner_waits_for

    acks = [
        Ack("a", live=True, folded=True),
        Ack("b", live=True, folded=False),  # has not folded it: waited for
        Ack("c", live=False, folded=False),  # down: fenced when it comes back (G4)
        Ack("d", live=True, folded=True, planned_below=True),  # a write planned below it
    ]
    assert owner_waits_for(acks) == ["b", "d"]
    assert owner_waits_for([Ack("a", True, True), Ack("c", False, False)]) == []


def test_a_change_is_run_only_on_the_table_it_starts_from() -> None:
    from coordinator.group import stale_change

    before, after = ["id", "Memo"], ["id", "note"]  # RENAME memo TO note
    assert stale_change(before, after, ["ID", "memo"], "r") is None  # case-blind
    assert stale_change(before, after, ["id", "note"], "r") == "done"
    # memo added again after the rename: neither before nor after
    why = stale_change(before, after, ["id", "memo", "note"], "RENAME")
    assert why is not None and "'RENAME'" in why and "nothing is run" in why
    assert stale_change(["id", "a"], ["id", "a"], ["id", "a"], "MODIFY a BIGINT") is None


def test_a_ddl_record_whose_origin_is_a_binlog_position_is_taken() -> None:
    """The streaming job's ``origin`` is the upstream's id of the statement: a binlog
    position (a list) as often as a GTID (text); the fold's shape check takes either."""
    from coordinator.group import body_problem

    body = {"shard": "s1.db_0.orders_0", "sql": "ALTER TABLE orders_0 ADD COLUMN c INT",
            "position": ["mysql-bin.000001", 36383, 0, 1795972709094, 7],
            "origin": ["mysql-bin.000001", 36383, 0, 1795972709094], "channel": "t[0]"}  # fmt: skip
    assert body_problem("ddl", body) is None
    assert body_problem("ddl", {**body, "origin": "3E11FA47-71CA-11E1-9E33:23"}) is None
    assert body_problem("ddl", {**body, "origin": None}) is None
    assert body_problem("ddl", {**body, "channel": 7}) is not None


# --- rows ahead of a DDL that reaches the job late (issue 41) ----------------------------

AHEAD = load_scenario(ROOT / "groups" / "row-ahead-of-its-ddl-optimistic.yaml")


def test_rows_ahead_of_a_late_ddl_leave_every_member_s_replica_equal() -> None:
    # eu's write step finds s1's rows naming column c before the ALTER that added it
    # reached eu: an `ahead` record, folded by every member; at the end (and at each
    # observation) every member folded the same records and holds the same replica.
    engine = GroupEngine(AHEAD, roundtrip=True)
    engine.start()
    for i, step in enumerate(AHEAD.steps):
        engine.step(i, step)
        if step.expect is not None:
            snapshots = {name: job.replica.snapshot() for name, job in engine.jobs.items()}
            assert snapshots["eu"] == snapshots["us"], f"after step {i + 1}"
    assert engine.error is None
    kinds = [(r.job, r.kind, r.body.get("shard")) for _, r in engine.log.read(0)]
    assert ("eu", "ahead", "s1.db1.tb1") in kinds
    ahead = next(r for _, r in engine.log.read(0) if r.kind == "ahead")
    assert ahead.body["position"] == 3  # the first row naming c, not the ones before it
    assert "names column(s) c that its shard does not have yet" in ahead.body["reason"]
    assert run_memory(AHEAD).output["failures"] == []


def test_rows_ahead_of_a_late_ddl_end_as_one_job_does() -> None:
    one = outcome(AHEAD.model_copy(update={"jobs": {}}))
    assert one == outcome(AHEAD)
    for seed in range(40):
        schedule = RandomSchedule(seed, 0.3 + 0.1 * (seed % 5))
        assert outcome(bare(AHEAD), schedule=schedule) == one, f"seed {seed}"


def test_a_late_statement_is_held_until_its_shard_s_arrive_step() -> None:
    base = {"name": "x", "mode": "optimistic", "target": "shardddl.tb", "engines": ["memory"],
            "shards": {"s1.db1.tb1": CREATE}}  # fmt: skip
    late = {"shard": "s1.db1.tb1", "sql": "ALTER TABLE tb1 ADD COLUMN c INT", "late": True}
    with pytest.raises(ValueError, match="never arrives"):
        Scenario.model_validate({**base, "steps": [late]})
    with pytest.raises(ValueError, match=r"no late statement of s1\.db1\.tb1"):
        Scenario.model_validate({**base, "steps": [{"arrive": "s1.db1.tb1"}]})
    with pytest.raises(ValueError, match="late is for a sql step"):
        Scenario.model_validate({**base, "steps": [{"shard": "s1.db1.tb1", "insert": {"id": 1},
                                                    "late": True}]})  # fmt: skip
    with pytest.raises(ValueError, match="memory engine only"):
        Scenario.model_validate({**base, "engines": ["memory", "spark"],
                                 "steps": [late, {"arrive": "s1.db1.tb1"}]})  # fmt: skip
    s = Scenario.model_validate({**base, "steps": [
        late,
        {"shard": "s1.db1.tb1", "insert": {"id": 1, "a": 1, "c": 1}},
        {"expect": {"rows": [], "blocked": ["s1.db1.tb1"]}},
        {"arrive": "s1.db1.tb1"},
        {"expect": {"rows": [{"id": 1, "a": 1, "c": 1}], "blocked": []}},
    ]})  # fmt: skip
    assert run_memory(s, roundtrip=True).output["failures"] == []
    dml = s.model_copy(update={"steps": [
        Step(shard="s1.db1.tb1", sql="INSERT INTO tb1 VALUES (1, 1)", late=True),
        Step(arrive="s1.db1.tb1"),
    ]})  # fmt: skip
    assert "late is for a DDL statement" in run_memory(dml).output["failures"][0]
