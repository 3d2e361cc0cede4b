"""The rollout the dashboard, ``/api/locks`` and ``shardmerge_rollout_shards`` show: how many
shards ran the DDL in flight, in both modes, from the pure coordinator's view of a target."""

from __future__ import annotations

from coordinator import Coordinator, Route, Router, ShardId, TargetConfig, TargetId
from schemas import parse_create_table
from streaming.ops.views import Views

T = TargetId("shop", "orders")
SHARDS = [ShardId.parse(f"s1.db_{i}.orders") for i in range(4)]
CREATE = "CREATE TABLE orders (id INT PRIMARY KEY, a INT, b VARCHAR(10))"


def coordinator(mode: str) -> Coordinator:
    c = Coordinator(Router((Route(T),)), {T: TargetConfig(mode, False)})
    for s in SHARDS:
        c.register(s, parse_create_table(CREATE))
    return c


def rollout(c: Coordinator) -> dict[str, object]:
    view = c.target_view(T)
    assert view is not None
    return Views._rollout(view)


def test_a_held_rename_counts_the_shards_that_ran_it_not_those_still_on_the_old_schema():
    # Optimistic: a rename conflicts, so the shards that ran it are held until all did,
    # and the joined schema keeps the old name meanwhile.
    c = coordinator("optimistic")
    for position, shard in enumerate(SHARDS[:3], start=10):
        c.on_ddl(shard, "ALTER TABLE orders RENAME COLUMN a TO a2", position)
    r = rollout(c)
    assert (r["done"], r["total"], r["of"]) == (3, 4, "ran it")
    assert "RENAME COLUMN" in str(r["ddl"])


def test_an_optimistic_add_column_counts_the_shards_with_the_joined_schema():
    c = coordinator("optimistic")
    c.on_ddl(SHARDS[0], "ALTER TABLE orders ADD COLUMN c INT", 10)
    assert rollout(c) == {"ddl": None, "done": 1, "total": 4, "of": "synced"}


def test_a_pessimistic_lock_counts_the_shards_that_ran_its_ddl():
    c = coordinator("pessimistic")
    for position, shard in enumerate(SHARDS[:2], start=10):
        c.on_ddl(shard, "ALTER TABLE orders ADD COLUMN c INT", position)
    r = rollout(c)
    assert (r["done"], r["total"], r["of"]) == (2, 4, "ran it")
