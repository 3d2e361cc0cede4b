"""A release the batch's later statements bound: the executor replays a shard's stashed
rows only up to a hold that came after the release in the same batch (PROTOCOL.md, steps
7 and 8). No Spark: the executor records row work; only schema work touches a sink."""

from __future__ import annotations

from typing import Any, cast

from coordinator import Coordinator, Route, Router, ShardId, TargetConfig, TargetId
from coordinator.decisions import Hold, Release
from schemas import parse_create_table
from streaming.batch.executor import Executor, bounded

T = TargetId("shardddl", "tb")
S1, S2 = ShardId.parse("s1.db1.tb1"), ShardId.parse("s2.db1.tb1")
BASE = "CREATE TABLE {t} (id INT PRIMARY KEY, a INT)"


def coord() -> Coordinator:
    c = Coordinator(Router((Route(T),)), {T: TargetConfig("optimistic")})
    for s in (S1, S2):
        c.register(s, parse_create_table(BASE.format(t=s.table)), 0)
    return c


def executor(c: Coordinator) -> Executor:
    # Row decisions only: the sink, settings and slots serve schema work, not used here.
    none = cast(Any, None)
    return Executor(c, none, none, none, {})


def test_a_late_add_then_a_late_rename_in_one_batch_replay_only_rows_before_the_rename():
    c = coord()
    c.on_ddl(S2, "ALTER TABLE tb1 ADD COLUMN note VARCHAR(20)", 1)
    # s1's rows from position 4 named a column its shard lacked: they wait in the stash
    assert [type(d) for d in c.await_ddl(S1, 4, "ahead")] == [Hold]
    # one batch reads both late statements: the ADD (3) releases, the rename (5) holds
    decisions = c.on_ddl(S1, "ALTER TABLE tb1 ADD COLUMN note VARCHAR(20)", 3)
    decisions += c.on_ddl(S1, "ALTER TABLE tb1 CHANGE note memo VARCHAR(20)", 5)
    kinds = [(type(d).__name__, getattr(d, "until", None)) for d in decisions]
    assert ("Release", None) in kinds and any(k == "Hold" for k, _ in kinds)
    ex = executor(c)
    ex.run(decisions)
    assert [(r.shard, r.until) for r in ex.work.releases] == [(S1, 5)]


def test_a_hold_bounds_only_its_own_shard_and_version_and_never_widens():
    r1, r2 = Release(T, S1, 1), Release(T, S2, 1)
    early = Release(T, S1, 1, until=2)
    old = Release(T, S1, 0)
    hold = Hold(T, S1, 1, 5, "a conflict DDL")
    assert bounded([r1, r2, early, old], hold) == [
        Release(T, S1, 1, until=5),
        r2,
        early,
        old,
    ]


def test_a_release_after_the_hold_replays_everything():
    c = coord()
    ex = executor(c)
    ex.run([Hold(T, S1, 1, 5, "held"), Release(T, S1, 1)])
    assert ex.work.releases == [Release(T, S1, 1)]
