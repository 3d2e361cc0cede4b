"""A group member's rules against a real group store on the local filesystem (no Spark):
idempotent appends, the fold of a batch run again, leases by the reader's clock, the
owner's term, acknowledgements, the gate and the member's own fencing."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from coordinator.group import Record, Replica
from coordinator.ids import ShardId, TargetId
from streaming.config import Settings
from streaming.group.member import Fenced, GroupMember, GroupWaitTimeout, LeaseLost
from streaming.storage.epochs import Superseded
from streaming.storage.group_store import GroupStore, LocalRecords

TARGET = TargetId.parse("shop.orders")
CREATE = "CREATE TABLE orders_0 (id BIGINT NOT NULL, PRIMARY KEY (id))"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def settings(tmp: Path, member: str, **co: Any) -> Settings:
    return Settings.model_validate(
        {
            "kafka": {"bootstrap": "127.0.0.1:9"},
            "sources": [{"pattern": "s.*"}],
            "routes": [{"target": "shop.orders", "table": "orders_*"}],
            "sink": {"path": f"file://{tmp}/lake"},
            "checkpoint": f"file://{tmp}/cp-{member}",
            "coordination": {
                "group": "g1",
                "member": member,
                "members": ["a", "b"],
                "lease_s": 10,
                "heartbeat_s": 1,
                **co,
            },
        }
    )


def member(tmp: Path, name: str, clock: Clock, **co: Any) -> GroupMember:
    s = settings(tmp, name, **co)
    return GroupMember(None, s, f"app-{name}", store=GroupStore(LocalRecords(), s.group_root()),
                       clock=clock)  # fmt: skip


def replica(m: GroupMember) -> Replica:
    s = m.settings
    return Replica.new(s.router(), s.target_configs(), s.default_config())


def ddl(job: str, shard: str, sql: str, at: int) -> Record:
    body = {"shard": shard, "sql": sql, "position": [at], "origin": None, "channel": "t[0]"}
    return Record(f"{job}:ddl:{shard}:{at}", job, "ddl", body)


def test_append_is_idempotent_and_a_rerun_folds_its_records_in_place(tmp_path: Path) -> None:
    clock = Clock()
    a, b = member(tmp_path, "a", clock), member(tmp_path, "b", clock)
    first = a.append(ddl("a", "s1.db_0.orders_0", CREATE, 1))
    assert a.append(ddl("a", "s1.db_0.orders_0", CREATE, 1)) == first  # a re-run: same number
    b.append(ddl("b", "s2.db_1.orders_0", CREATE.replace("orders_0", "orders_0"), 2))
    a.append(ddl("a", "s1.db_0.orders_0", "ALTER TABLE orders_0 ADD COLUMN c INT", 3))
    # a batch of a run again: restored at 0, it folds the others' records up to its own
    # next one, not past it
    r = replica(a)
    folded = a.fold(r, mine_until=0)
    assert [f.seq for f in folded] == []  # record 1 is a's own: it waits for its append
    folded = a.fold(r, mine_until=first)
    assert [f.seq for f in folded] == [1, 2]  # its own record, then b's, then stops
    assert r.versions[TARGET] == 1
    assert [f.seq for f in a.fold(r)] == [3]
    assert r.versions[TARGET] == 2
    # every downstream change is published once, with the record that decided it
    assert a.store.read("decisions/shop.orders/000000000002.json")["seq"] == 3


def test_leases_are_judged_by_the_readers_clock_and_the_term_passes_on(tmp_path: Path) -> None:
    clock_a, clock_b = Clock(), Clock()
    b = member(tmp_path, "b", clock_b)  # b starts first
    a = member(tmp_path, "a", clock_a)
    assert b.owns(b.views()) is False  # a is live and first in members
    assert a.owns(a.views()) is True
    assert a.term()[1]["member"] == "a"
    assert b.owns(b.views()) is False
    # a stops beating: b sees its counter unchanged past the lease on b's own clock
    b.views()
    clock_b.now += 11
    views = {v.member: v for v in b.views()}
    assert views["a"].live is False and views["a"].silent_s == pytest.approx(11)
    assert b.owns(b.views()) is True
    assert b.term() == (1, b.store.read_numbered("terms", 1))
    # a comes back (beats again): the term stays b's while b is live
    a.write_beat()
    assert {v.member: v.live for v in b.views()}["a"] is True
    assert a.owns(a.views()) is False


def test_a_member_fences_itself(tmp_path: Path) -> None:
    clock = Clock()
    a = member(tmp_path, "a", clock)
    a.check()
    clock.now += 10.5
    with pytest.raises(LeaseLost, match=r"no heartbeat for 10\.5 s"):
        a.check()
    a.write_beat()  # late: the batch that runs now must not write, even with a fresh beat
    with pytest.raises(LeaseLost, match="silent past its lease"):
        a.check()
    a.check()  # the next batch (after folding the log) goes on
    member(tmp_path, "a", clock)  # a second driver of member a
    with pytest.raises(Superseded, match="epoch 1"):
        a.check()


def test_the_gate_waits_for_the_owner_and_the_owner_for_acknowledgements(
    tmp_path: Path,
) -> None:
    clock = Clock()
    a = member(tmp_path, "a", clock)
    b = member(tmp_path, "b", clock, gate_timeout_s=0.01)
    seq = b.append(ddl("b", "s2.db_1.orders_0", CREATE, 1))
    r = replica(b)
    b.fold(r)
    assert b.behind(r) == {TARGET: (0, 1)}
    # b is not the owner (a is live and first): its gate waits, then fails the batch
    with pytest.raises(GroupWaitTimeout, match=r"shop\.orders has v0, decided v1"):
        b.gate(r, None)
    assert b.ack == seq  # its writes are planned at its fold
    # a, the owner, waits for b's acknowledgement of the decision's record
    b.write_beat()
    ra = replica(a)
    a.ack = 0
    b.ack = 0
    b.write_beat()
    a.fold(ra)
    assert a.owner_pass(ra, None) == []
    assert "waiting for b to fold log record 1" in a.waiting
    # once the table has the version, b's gate opens at once
    a.store.create_new("applied/shop.orders/000000000001.json", {"member": "a"})
    assert b.gate(r, None) == pytest.approx(0, abs=0.5)
    assert b.behind(r) == {}
    # the owner went on without b: a version b's batch did not fold fences it
    a.store.create_new("applied/shop.orders/000000000002.json", {"member": "a"})
    with pytest.raises(Fenced, match="at version 2, past the 1"):
        b.gate(r, None)


def test_a_member_waits_for_every_member_to_join_before_its_ddl(tmp_path: Path) -> None:
    clock = Clock()
    a = member(tmp_path, "a", clock, gate_timeout_s=0.01)
    b = member(tmp_path, "b", clock)
    assert a.missing() == ["a", "b"]
    with pytest.raises(GroupWaitTimeout, match=r"for member\(s\) b to join"):
        a.join(None)
    assert a.missing() == ["b"]  # its own join is in the log, once
    b.append(Record("b:join", "b", "join", {}))
    assert a.join(None) == pytest.approx(0, abs=0.5)
    assert a.missing() == [] and len(a.store.numbers("log")) == 2
    r = replica(a)
    assert [f.decisions for f in a.fold(r)] == [(), ()]  # joins change no state


def test_the_status_an_operator_reads(tmp_path: Path) -> None:
    from streaming.group.member import beat_views, group_status

    clock = Clock()
    a, b = member(tmp_path, "a", clock), member(tmp_path, "b", clock)
    a.owns(a.views())
    b.append(ddl("b", "s2.db_1.orders_0", CREATE, 1))
    b.fold(replica(b))
    now = __import__("time").time()
    status = group_status(a.store, a.settings, beat_views(a.store, a.co, now))
    assert status["owner"] == {"term": 0, "member": "a", "epoch": 0, "live": True}
    assert status["targets"] == [{"target": "shop.orders", "decided": 1, "applied": 0}]
    assert [m["live"] for m in status["members"]] == [True, True]
    # a member silent past its lease, by its heartbeat's own timestamp
    later = group_status(a.store, a.settings, beat_views(a.store, a.co, now + 60))
    assert [m["live"] for m in later["members"]] == [False, False]
    assert later["owner"]["live"] is False


def test_a_published_change_reads_back_as_the_decision() -> None:
    from coordinator.decisions import ApplyDDL
    from coordinator.group import decision_from_json, decision_to_json
    from schemas.ddl import parse_create_table, parse_ddl

    schema = parse_create_table("CREATE TABLE `a``b'c;--` (id INT NOT NULL, `x y` VARCHAR(3))")
    (alter,) = parse_ddl("ALTER TABLE t ADD COLUMN `n'1` INT")
    d = ApplyDDL(TARGET, alter.specs, schema, "ALTER TABLE t ADD COLUMN `n'1` INT", "why")
    assert decision_from_json(decision_to_json(d)) == d


def test_group_show_reads_the_store_without_a_jvm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from shardmerge.cli import main

    clock = Clock()
    a, b = member(tmp_path, "a", clock), member(tmp_path, "b", clock)
    a.owns(a.views())
    b.append(ddl("b", "s2.db_1.orders_0", CREATE, 1))
    b.fold(replica(b))
    config = tmp_path / "a.yaml"
    config.write_text(yaml.safe_dump(a.settings.model_dump(mode="json", exclude_none=True)))
    assert main(["group", "show", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "owner: a (term 0, epoch 0), live" in out
    assert [line.split()[:3] for line in out.splitlines() if line.startswith(("a ", "b "))] == [
        ["a", "0", "live"], ["b", "0", "live"],
    ]  # fmt: skip
    assert "shop.orders                            1       0" in out
    assert main(["group", "show", "--config", str(config), "--json"]) == 0
    assert '"decided": 1' in capsys.readouterr().out
    alone = tmp_path / "alone.yaml"
    data = a.settings.model_dump(mode="json", exclude_none=True)
    del data["coordination"]
    alone.write_text(yaml.safe_dump(data))
    assert main(["group", "show", "--config", str(alone)]) == 2
    assert "no coordination settings" in capsys.readouterr().out


def test_an_append_reads_the_others_appends_before_it(tmp_path: Path) -> None:
    clock = Clock()
    a, b = member(tmp_path, "a", clock), member(tmp_path, "b", clock)
    append = a.store.append

    def raced(value: dict[str, Any], start: int | None = None) -> int:
        # b appends between a's read of the log and a's own append: a's claim of the
        # number it read up to loses, and it takes the next one
        b.append(ddl("b", "s2.db_1.orders_0", CREATE, 1))
        assert start == 0
        return append(value, start)

    a.store.append = raced  # type: ignore[method-assign]
    assert a.append(ddl("a", "s1.db_0.orders_0", CREATE, 2)) == 2
    r = replica(a)
    assert [f.record.job for f in a.fold(r)] == ["b", "a"]  # none skipped


def applied_to(m: GroupMember, version: int) -> None:
    """The owner ran the target's changes up to ``version`` (the member was down)."""
    for v in range(1, version + 1):
        m.store.create_new(f"applied/shop.orders/{v:012d}.json", {"member": "a"})


def run_again(m: GroupMember, told: list[Record], runs: int = 3) -> tuple[Replica, list[str]]:
    """The member's batch run again as streaming.batch.protocol runs it (restored at the start of
    the log; the others' records up to its own next one; each of ``told`` appended again
    and folded up to it; the gate), until it passes its gate: each run's outcome."""
    out = []
    for _ in range(runs):
        r = replica(m)
        m.fold(r, r.seq)
        for record in told:
            m.fold(r, m.append(record))
        try:
            m.gate(r, None)
        except Fenced as e:
            out.append(str(e))
            continue
        out.append("written")
        break
    return r, out


def test_a_batch_stopped_after_its_join_plans_at_the_new_version_when_it_runs_again(
    tmp_path: Path,
) -> None:
    # issue 40: b's first batch appends its CREATE and its join, then stops (SIGSTOP) past
    # its lease; a adds a column and the owner runs it without b
    clock = Clock()
    a, b = member(tmp_path, "a", clock), member(tmp_path, "b", clock)
    b_create = ddl("b", "s2.db_1.orders_0", CREATE, 1)
    b.fold(replica(b), b.append(b_create))
    b.append(Record("b:join", "b", "join", {}))
    a.append(ddl("a", "s1.db_0.orders_0", CREATE, 1))
    a.append(Record("a:join", "a", "join", {}))
    a.append(ddl("a", "s1.db_0.orders_0", "ALTER TABLE orders_0 ADD COLUMN c INT", 2))
    applied_to(a, 2)
    # b's batch runs again: its CREATE again (found), no join (every member joined). It
    # folds its join at its place and the log on to its end: it plans at version 2 at
    # once, and appends nothing twice.
    assert b.missing() == []
    r, runs = run_again(b, [b_create])
    assert runs == ["written"]
    assert r.versions[TARGET] == 2 and r.seq == 5 and b.ack == 5
    assert b.fenced == 0 and len(b.store.numbers("log")) == 5


def test_a_record_an_earlier_run_appended_and_this_one_did_not_is_folded_in_place(
    tmp_path: Path,
) -> None:
    # A record of b's earlier run of the batch that this run does not append again (its
    # state called for it then, not now): the fold stops before it once; the gate notes
    # it, and the next run folds it at its place and the others' records after it.
    clock = Clock()
    a, b = member(tmp_path, "a", clock), member(tmp_path, "b", clock)
    b_create = ddl("b", "s2.db_1.orders_0", CREATE, 1)
    b.fold(replica(b), b.append(b_create))
    gone = b.append(ddl("b", "s2.db_1.orders_0", "ALTER TABLE orders_0 ADD COLUMN d INT", 2))
    a.append(ddl("a", "s1.db_0.orders_0", CREATE, 1))
    a.append(ddl("a", "s1.db_0.orders_0", "ALTER TABLE orders_0 ADD COLUMN c INT", 2))
    applied_to(a, 3)  # created, b's d, a's c
    r, runs = run_again(b, [b_create])
    assert len(runs) == 2 and runs[-1] == "written", runs
    assert "at version 3, past the 1" in runs[0]
    assert r.seq == 4 and r.versions[TARGET] == 3 and gone in b.passed


def test_rows_ahead_of_a_ddl_reach_every_replica_through_the_log(tmp_path: Path) -> None:
    """Step 6's rows ahead of a DDL, in a group: an ``ahead`` record appended through the
    coordination port, not a call on the replica's coordinator (G2). The batch that
    appends it does not fold it (its rows were planned); the member's next batch folds it
    at its place, past the others' records before it, and every replica ends equal."""
    from coordinator.state import snapshot
    from streaming.batch.coordination import Statement
    from streaming.batch.executor import Executor
    from streaming.group.coordination import GroupCoordination
    from streaming.storage.slots import Slots

    clock = Clock()
    a, b = member(tmp_path, "a", clock), member(tmp_path, "b", clock)
    s1, s2 = "s1.db_0.orders_0", "s2.db_1.orders_0"
    for m, shard, at in ((a, s1, 1), (b, s2, 2)):
        # as the port names a ddl record (a batch run again gives the same id)
        m.append(replace(ddl(m.member, shard, CREATE, at), id=f"{m.member}:ddl:[{at}]"))
        m.append(Record(f"{m.member}:join", m.member, "join", {}))

    def batch(m: GroupMember, saved: dict[str, Any] | None) -> GroupCoordination:
        co = GroupCoordination(m, m.settings.router())
        r = replica(m)
        ex = Executor(r.coordinator, None, m.settings, Slots(0), {})  # type: ignore[arg-type]
        co.begin()
        co.start(r.coordinator if saved is None else saved["c"], ex, saved)
        return co

    # a's saved state: its batches before folded the creates and joins
    r0 = replica(a)
    a.fold(r0)
    co = batch(a, {"c": r0.coordinator, "group": r0.meta()})
    assert co.replica is not None and co.replica.seq == 4
    co.ahead(ShardId.parse(s1), [7], "rows ahead: waiting for its DDL")
    assert co.records == 1
    assert co.c.waiting() == []  # appended, not folded by the batch that planned the rows
    # b appends a DDL of its own meanwhile; a's record stays before it in the log
    b.append(ddl("b", s2, "ALTER TABLE orders_0 ADD COLUMN c INT", 8))
    saved = {"c": co.c, **co.saved()}
    co.end(1, done=True)
    # a's next batch folds its own ahead record (it never appends it again) and b's after it
    nxt = batch(a, saved)
    assert nxt.replica is not None and nxt.replica.seq == 6
    assert [(w.shard, w.kind) for w in nxt.c.waiting()] == [(ShardId.parse(s1), "ahead_of_ddl")]
    rb = replica(b)
    b.fold(rb)
    assert snapshot(rb.coordinator) == snapshot(nxt.c)
    assert rb.meta() == nxt.replica.meta()
    # the same batch run again would fold it too (no fold stops before an ``ahead`` record)
    nxt.end(2, done=False)
    again = batch(a, None)
    again.ddl(Statement(ShardId.parse(s1), CREATE, [1], None, "t[0]"))  # appended again
    assert again.replica is not None and again.replica.seq == 6
    assert [w.shard for w in again.c.waiting()] == [ShardId.parse(s1)]
    again.end(1, done=False)


# --- names, settings fingerprints, malformed records and gaps (review findings 1-3) -------


def test_member_and_group_names_are_refused_unless_safe(tmp_path: Path) -> None:
    from streaming.config import ConfigError, load_settings

    config = tmp_path / "job.yaml"
    for co, field, value in [
        ({"members": ["a", "../../x"]}, "coordination.members", "'../../x'"),
        ({"group": "../g"}, "coordination.group", "'../g'"),
        ({"member": "a/b", "members": ["a/b"]}, "coordination.member", "'a/b'"),
        ({"members": ["a", "x" * 65]}, "coordination.members", "'" + "x" * 65 + "'"),
    ]:
        data = settings(tmp_path, "a").model_dump(mode="json", exclude_none=True)
        data["coordination"].update(co)
        config.write_text(__import__("yaml").safe_dump(data))
        with pytest.raises(ConfigError, match="is not a valid name") as e:
            load_settings(config)
        assert field in str(e.value) and value in str(e.value), str(e.value)
    assert settings(tmp_path, "a", members=["a", "b.2_x-y"]).coordination is not None


def test_group_show_escapes_what_it_reads_from_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from shardmerge.cli import main

    clock = Clock()
    a = member(tmp_path, "a", clock)
    # a term whose member names no job, with a terminal escape in it (a hand-edited store)
    a.store.create_new("terms/000000000000.json", {"member": "x\x1b[2J\u202e", "epoch": 0})
    config = tmp_path / "a.yaml"
    config.write_text(yaml.safe_dump(a.settings.model_dump(mode="json", exclude_none=True)))
    assert main(["group", "show", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out
    assert "owner: x\\x1b[2J\\u202e (term 0" in out


def pessimistic(tmp: Path, name: str, clock: Clock) -> GroupMember:
    """Member ``name`` with the target pessimistic (a policy changed by a restart)."""
    data = settings(tmp, name).model_dump(mode="json", exclude_none=True)
    data["targets"] = {"shop.orders": {"mode": "pessimistic"}}
    s = Settings.model_validate(data)
    return GroupMember(None, s, f"app-{name}", store=GroupStore(LocalRecords(), s.group_root()),
                       clock=clock)  # fmt: skip


def test_a_member_whose_settings_differ_from_a_joined_one_refuses_to_go_on(
    tmp_path: Path,
) -> None:
    from coordinator.group import GroupError

    clock = Clock()
    b = pessimistic(tmp_path, "b", clock)  # started before a joined
    a = member(tmp_path, "a", clock, gate_timeout_s=0.01)
    with pytest.raises(GroupWaitTimeout):
        a.join(None)
    join = a.store.read_numbered("log", 0)
    assert join is not None and join["body"]["settings"]["fingerprint"] == a.fingerprint
    # b, running, reads a's join: it refuses to go on, naming a and what differs
    with pytest.raises(GroupError, match="member a joined") as e:
        b.missing()
    assert 'targets.shop.orders.mode ("pessimistic" here, "optimistic" there)' in str(e.value)
    with pytest.raises(GroupError, match="member a joined"):  # on every later read too
        b.read()
    # b started again with those settings: refused at its start, before its epoch
    with pytest.raises(GroupError, match=r"targets\.shop\.orders\.mode"):
        pessimistic(tmp_path, "b", clock)
    assert a.store.numbers("members/b/epochs") == [0]
    member(tmp_path, "b", clock)  # with the group's settings it starts


def test_a_decision_published_with_other_settings_stops_the_member_that_reads_it(
    tmp_path: Path,
) -> None:
    from coordinator.group import GroupError

    clock = Clock()
    a, b = member(tmp_path, "a", clock), pessimistic(tmp_path, "b", clock)
    a.append(ddl("a", "s1.db_0.orders_0", CREATE, 1))
    a.fold(replica(a))
    published = a.store.read("decisions/shop.orders/000000000001.json")
    assert published is not None and published["settings"]["fingerprint"] == a.fingerprint
    with pytest.raises(GroupError, match=r"member a published shop\.orders v1 with settings"):
        b.fold(replica(b))


def test_records_without_a_fingerprint_are_taken_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    a, b = member(tmp_path, "a", clock), member(tmp_path, "b", clock)
    a.store.append(Record("a:join", "a", "join", {}).to_json())  # an earlier version's
    b.store.append(Record("b:join", "b", "join", {}).to_json())
    with caplog.at_level("WARNING", logger="shardmerge.group"):
        assert b.missing() == []
    assert sum("without a settings fingerprint" in r.message for r in caplog.records) == 1


def test_a_malformed_record_is_refused_alike_by_every_member(tmp_path: Path) -> None:
    clock = Clock()
    a, b = member(tmp_path, "a", clock), member(tmp_path, "b", clock)
    a.store.append({"id": "a:x", "job": "a", "kind": "ddl", "body": []})  # not an object
    a.store.append({"id": "a:y", "job": "a", "kind": "shadow",
                    "body": {"shard": "s1.db_0.orders_0", "seen": 5}})  # fmt: skip
    a.store.append({"id": "a:z", "job": "a", "kind": "command", "body": {"command": "x"}})
    a.append(ddl("a", "s1.db_0.orders_0", CREATE, 1))
    ra, rb = replica(a), replica(b)
    folded = a.fold(ra)
    b.fold(rb)
    assert [f.refused is not None for f in folded] == [True, True, True, False]
    assert "body is an object" in (folded[0].refused or "")
    assert "'seen' must be a list" in (folded[1].refused or "")
    assert "'command' must be an object" in (folded[2].refused or "")
    assert ra.versions[TARGET] == 1 and ra.meta() == rb.meta()
    assert [seq for seq, _ in ra.refused] == [1, 2, 3]


def test_a_gap_in_the_log_names_the_number_and_the_repair_fills_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    import yaml

    from coordinator.group import GroupError
    from shardmerge.cli import main

    clock = Clock()
    a, b = member(tmp_path, "a", clock), member(tmp_path, "b", clock)
    for at in (1, 2, 3):
        a.append(ddl("a", "s1.db_0.orders_0", CREATE, at))
    os.remove(a.store.uri("log", "000000000001.json")[len("file://") :])  # lost by hand
    # b has not read past it: its append lands past the gap, which it names (no KeyError)
    with pytest.raises(GroupError, match=r"no record 1 .*--fill-gap 1 --yes"):
        b.append(ddl("b", "s2.db_1.orders_0", CREATE, 1))
    with pytest.raises(GroupError, match=r"no record 1 "):  # and a start is refused
        member(tmp_path, "b", clock)
    config = tmp_path / "a.yaml"
    config.write_text(yaml.safe_dump(a.settings.model_dump(mode="json", exclude_none=True)))
    assert main(["group", "show", "--config", str(config)]) == 0
    assert "no record 1 while later ones exist" in capsys.readouterr().out
    repair = ["group", "repair", "--config", str(config)]
    assert main([*repair, "--fill-gap", "1"]) == 2  # not without --yes
    assert main([*repair, "--fill-gap", "0", "--yes"]) == 2  # not a gap
    assert main([*repair, "--fill-gap", "9", "--yes"]) == 2  # past the end
    assert a.store.read_numbered("log", 1) is None
    assert main([*repair, "--fill-gap", "1", "--yes"]) == 0
    assert "a no-op record written" in capsys.readouterr().out
    b = member(tmp_path, "b", clock)
    folded = b.fold(replica(b))
    assert [(f.record.kind, f.record.job, f.refused) for f in folded] == [
        ("ddl", "a", None), ("noop", "operator", None), ("ddl", "a", None), ("ddl", "b", None),
    ]  # fmt: skip


def test_a_retry_in_a_group_says_the_owner_retries_on_its_own(tmp_path: Path) -> None:
    """``unlock --retry``: in a group the owner runs a refused change again at each pass,
    so the command appends nothing and is refused with who the owner is and what it waits
    for."""
    from coordinator.commands import OperatorCommand
    from streaming.group.coordination import GroupCoordination

    clock = Clock()
    a = member(tmp_path, "a", clock)
    assert a.owns(a.views())  # a holds the term
    a.waiting = "shop.orders v2: refused downstream: a type Delta cannot widen"
    co = GroupCoordination(a, a.settings.router())
    with pytest.raises(ValueError) as e:
        co.command("c1", OperatorCommand.of(TARGET, "retry"))
    text = str(e.value)
    assert "the owner (a) runs a downstream change the table refused again" in text
    assert "every 1 s" in text and "refused downstream: a type Delta cannot widen" in text
    assert list(a.store.log(-1)) == []  # nothing appended


def finished(m: GroupMember, r: Replica, batch: int) -> None:
    """A batch of ``m`` saved its state with replica ``r`` (as ``GroupMember.finish``)."""
    m.lock.acquire()
    m.finish(r, batch)
    m.write_beat()


def test_the_owner_compacts_the_log_and_a_start_reads_what_is_recent(tmp_path: Path) -> None:
    """Compaction: a snapshot every ``snapshot_every`` records, the log removed below
    every member's floor, a start that restores the snapshot and reads the rest, a member
    without saved state that starts from the snapshot, and one whose state is older than
    the log refused with what to do."""
    from coordinator.group import GroupError
    from coordinator.state import snapshot
    from streaming.group.member import log_gap

    clock = Clock()
    a = member(tmp_path, "a", clock, snapshot_every=8)
    b = member(tmp_path, "b", clock, snapshot_every=8)
    assert a.owns(a.views())
    a.append(Record("a:join", "a", "join", {}))
    b.append(Record("b:join", "b", "join", {}))
    shards = [f"s1.db_{i}.orders_0" for i in range(4)]
    for i, shard in enumerate(shards):
        a.append(ddl("a", shard, CREATE, i))
    for at in range(10, 30):
        shard = shards[at % 4]
        a.append(ddl("a", shard, f"ALTER TABLE orders_0 ADD COLUMN c{at} INT", at))
    everything = [(n + 1, Record.read(v)) for n, v in a.store.log(-1)]
    assert len(everything) == 26
    whole = replica(a)
    whole.fold(everything)

    # b has saved one batch only: its floor is 0, which holds the log where it is
    rb = replica(b)
    b.fold(rb)
    finished(b, rb, 0)
    a.fold(a.latest)
    a.compact_log()
    assert a.store.numbers("snapshots") == [26] and a.snapshots_written == 1
    assert a.store.numbers("log") == list(range(26)) and a.records_removed == 0
    a.compact_log()  # at most once per lease
    assert a.records_removed == 0
    # a start that reads while the owner removes the log's first records (lowest first)
    # skips what went: those records are in the snapshot it starts from
    racing = member(tmp_path, "b", clock, snapshot_every=8)
    real = racing.store.read_numbered

    def removed_meanwhile(folder: str, n: int) -> dict[str, Any] | None:
        if folder == "log" and n == 3:
            racing.store.prune_below("log", 12)
        return real(folder, n)

    racing.store.read_numbered = removed_meanwhile  # type: ignore[method-assign]
    racing.base = racing.end = 0
    racing.records.clear()
    racing.read()
    assert racing.base == 12 and sorted(racing.records) == list(range(13, 27))
    racing.fold(racing.latest)
    assert snapshot(racing.latest.coordinator) == snapshot(whole.coordinator)
    for n, record in everything[:12]:  # put the log back as it was for what follows
        a.store.create_new(f"log/{n - 1:012d}.json", record.to_json())

    # both members saved two batches (at 20, then 26): floors 20; the log keeps 20 on
    ra, rb2 = replica(a), replica(b)
    for m, r in ((a, ra), (b, rb2)):
        r.fold(everything[:20])
        finished(m, r, 1)
        m.fold(r)
        finished(m, r, 2)
    assert (a.floor, b.floor) == (20, 20)
    clock.now += 11
    a.compact_log()
    assert a.store.numbers("log") == list(range(20, 26)) and a.records_removed == 20
    assert log_gap(a.store) is None  # what compaction removed is no gap
    assert a.base == 20 and min(a.records) == 21  # a's memory holds what it still folds

    # a start reads the snapshot and the records after its floor, not the whole log
    b2 = member(tmp_path, "b", clock, snapshot_every=8)
    assert b2.base == 20 and sorted(b2.records) == list(range(21, 27))
    assert snapshot(b2.latest.coordinator) == snapshot(whole.coordinator)
    assert b2.latest.meta() == whole.meta() and b2.missing() == []
    # its batch restored at its floor folds on; one with nothing saved starts from the
    # snapshot; one saved before the floor is refused with what to do
    at20 = replica(b2)
    at20.fold(everything[:20])
    b2.fold(at20)
    assert at20.meta() == whole.meta()
    fresh = replica(b2)
    b2.fold(fresh)
    assert snapshot(fresh.coordinator) == snapshot(whole.coordinator)
    old = replica(b2)
    old.fold(everything[:5])
    with pytest.raises(GroupError, match=r"folded to log record 5, .* from 21 on .*new checkpoint"):
        b2.fold(old)
    # the group goes on past the snapshot: every replica folds the new record alike
    a.append(ddl("a", shards[0], "ALTER TABLE orders_0 ADD COLUMN z INT", 99))
    whole.fold([(27, Record.read(a.store.read_numbered("log", 26)))])
    b2.fold(b2.latest)
    assert snapshot(b2.latest.coordinator) == snapshot(whole.coordinator)


def test_a_gap_below_the_snapshot_is_none_and_the_repair_leaves_it(tmp_path: Path) -> None:
    from coordinator.group import GroupError
    from streaming.group.member import compact, fill_gap, log_gap

    clock = Clock()
    a = member(tmp_path, "a", clock)
    for at in range(6):
        a.append(ddl("a", "s1.db_0.orders_0", CREATE if at == 0 else
                     f"ALTER TABLE orders_0 ADD COLUMN c{at} INT", at))  # fmt: skip
    a.fold(a.latest)
    written, removed = compact(a.store, a.latest, ["a"], {}, "a", {"a": 4, "b": 3}, every=4)
    assert (written, removed) == (6, 3)  # files 0..2: below the lowest floor
    assert log_gap(a.store) is None
    with pytest.raises(GroupError, match="held by the snapshot of log record 6"):
        fill_gap(a.store, 1, "test")
    # a record lost above the snapshot is a gap again
    a.append(ddl("a", "s1.db_0.orders_0", "ALTER TABLE orders_0 ADD COLUMN y INT", 7))
    a.append(ddl("a", "s1.db_0.orders_0", "ALTER TABLE orders_0 ADD COLUMN w INT", 8))
    import os

    os.remove(a.store.uri("log", "000000000006.json")[len("file://") :])
    assert log_gap(a.store) == 6
