"""The demo's rollout (``shardmerge demo``): each DDL reaches the shards one after another
over a span of the workload, and the lock's story is told in words."""

from __future__ import annotations

from devkit.demo import DDL_ROLLOUT, ROLLOUT_SPAN, _lock_story
from devkit.workload import sharded_workload


def test_each_statement_rolls_out_over_the_span_shard_after_shard() -> None:
    shards, rows = 8, 1_000
    events = list(sharded_workload(shards, rows, ddl_at=DDL_ROLLOUT, stagger=ROLLOUT_SPAN))
    total = len(events)
    for template in DDL_ROLLOUT.values():
        verb = template.split("{table}")[1].split()[0]  # ADD / CHANGE
        at = [
            i
            for i, e in enumerate(events)
            if e.kind == "ddl" and e.statement and f" {verb} " in e.statement
        ]
        assert len(at) == shards  # once per shard, in shard order
        tables = [events[i].table for i in at]
        assert tables == sorted(tables, key=lambda t: int(t.rsplit("_", 1)[1]))
        # the last shard runs it about ROLLOUT_SPAN * (shards - 1) / shards after the first
        spread = (at[-1] - at[0]) / total
        assert abs(spread - ROLLOUT_SPAN * (shards - 1) / shards) < 0.01
    first_rename = min(i for i, e in enumerate(events) if e.statement and " CHANGE " in e.statement)
    last_add = max(i for i, e in enumerate(events) if e.statement and " ADD " in e.statement)
    assert last_add < first_rename  # the rollouts do not overlap


def test_the_lock_story_names_the_statement_and_the_held_shards() -> None:
    held = [f"shop.db_{i}.orders_{i}" for i in range(6)]
    lock = {
        "stage": "waiting",
        "blocked": held,
        "shards": 8,
        "pending_ddl": [{"shard": held[0], "sql": "ALTER TABLE orders_0 CHANGE note memo"}],
    }
    story = _lock_story(lock, ("none", ()))
    assert story == (
        "lock waiting: 6 of 8 shards ran 'ALTER TABLE orders_0 CHANGE note memo' and are held "
        "(their rows wait in the stash): db_0.orders_0, db_1.orders_1, db_2.orders_2, "
        "db_3.orders_3 and 2 more"
    )
    done = _lock_story({"stage": "none", "blocked": [], "shards": 8}, ("waiting", tuple(held)))
    assert done == "lock none: every shard ran it; the held rows were replayed in order"
    assert _lock_story({"stage": "none", "blocked": []}, None) == "lock none: no shard held"
