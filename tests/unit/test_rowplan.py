"""The row plan: what an engine may know about a shard's rows, as a value."""

from __future__ import annotations

from coordinator import Coordinator, Route, Router, ShardId, TargetConfig, TargetId
from coordinator.rowplan import row_plan
from schemas import parse_create_table

T = TargetId("shardddl", "tb")
S1, S2 = ShardId.parse("s1.db1.tb1"), ShardId.parse("s2.db1.tb1")
BASE = "CREATE TABLE {t} (id INT PRIMARY KEY, a INT)"


def coord(mode: str = "optimistic") -> Coordinator:
    c = Coordinator(Router((Route(T),)), {T: TargetConfig(mode)})
    for s in (S1, S2):
        c.register(s, parse_create_table(BASE.format(t=s.table)))
    return c


def test_a_free_shard_writes_from_anywhere():
    plan = row_plan(coord(), S1)
    assert plan.route.action == "write" and plan.route.target == T
    assert plan.hold_from is None and plan.late_renames == () and plan.last_alter is None


def test_a_held_shard_waits_from_its_ddl_and_writes_earlier_rows():
    c = coord()
    c.on_ddl(S1, "ALTER TABLE tb1 CHANGE a c INT", 5)
    plan = row_plan(c, S1)
    assert plan.route.action == "hold" and plan.hold_from == 5 and plan.last_alter == 5
    # The downstream still has ``a``: a row before the rename keeps its name.
    assert plan.late_renames == ()
    assert row_plan(c, S2).route.action == "write"


def test_rows_before_a_rename_that_ran_downstream_take_the_new_name():
    c = coord()
    c.on_ddl(S1, "ALTER TABLE tb1 CHANGE a c INT", 5)
    c.on_ddl(S2, "ALTER TABLE tb1 CHANGE a c INT", 7)
    for shard, position in ((S1, 5), (S2, 7)):
        plan = row_plan(c, shard)
        assert plan.route.action == "write" and plan.hold_from is None
        assert plan.late_renames == ((position, (("a", "c"),)),)


def test_a_table_never_registered_holds_every_row_once_awaited():
    c = coord()
    new = ShardId.parse("s1.db1.tb9")
    assert row_plan(c, new).route.action == "unknown"
    c.await_ddl(new, 3, "")
    plan = row_plan(c, new)
    assert plan.route.action == "hold" and plan.route.target == T and plan.hold_from is None
