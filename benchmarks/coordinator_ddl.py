"""Cost of accepting one shard DDL and deciding termination, by number of shards.

For each shard count, every shard of one target runs the same DDL in turn (a rolling
schema change), and each ``Coordinator.on_ddl`` call is timed end to end: parsing,
routing, the lock rules and, for the conflict DDL, the termination check. The baseline is
the seed proposal's check as written (for every held X and every shard Y:
``Compare(Join(prev_X, final_Y), post_X)``), timed once on the state just before the last
shard's DDL, in the same run.

    .venv/bin/python benchmarks/coordinator_ddl.py [--shards 16,256,1024,4096]

Prints a Markdown table; docs/benchmarks.md keeps the latest run.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

from coordinator.coordinator import Coordinator, TargetConfig
from coordinator.ids import ShardId, TargetId
from coordinator.optimistic import join_all
from coordinator.routing import Route, Router
from schemas import compare, join, parse_create_table
from schemas.errors import Incompatible

TARGET = TargetId("shop", "orders")
SCHEMA = parse_create_table(
    "CREATE TABLE orders (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, a INT, "
    "status VARCHAR(16) NOT NULL DEFAULT 'NEW', amount DECIMAL(12,2), note TEXT, "
    "created_at DATETIME(3) NOT NULL) DEFAULT CHARSET=utf8mb4"
)
DDL = {
    "normal (ADD COLUMN)": "ALTER TABLE {t} ADD COLUMN c INT",
    "conflict (RENAME COLUMN)": "ALTER TABLE {t} CHANGE a z INT",
}


def shards(n: int) -> list[ShardId]:
    # db_0..db_7 x orders_0..orders_k, spread over sources of 128 tables each
    return [ShardId(f"src{i // 128}", f"db_{i % 8}", f"orders_{i // 8}") for i in range(n)]


def build(n: int) -> tuple[Coordinator, list[ShardId]]:
    c = Coordinator(Router((Route(TARGET),)), {TARGET: TargetConfig("optimistic")})
    ids = shards(n)
    for s in ids:
        c.register(s, SCHEMA.renamed(s.table))
    return c, ids


def naive_check_seconds(c: Coordinator, pair_budget: int) -> tuple[float, bool]:
    """The seed's termination check over all (X, Y) pairs; scaled when over budget."""
    t = c.targets[TARGET]
    states = [s for s in t.shards.values() if s.admitted]
    posts = [s for s in states if s.post is not None]
    pairs = len(posts) * len(states)
    step = max(1, pairs // pair_budget)
    start = time.perf_counter()
    finals = [s.final for s in states]
    try:
        joined = join_all(finals)
    except Incompatible:
        joined = None
    if joined is not None:
        for x in posts:
            try:
                compare(joined, x.schema)
            except Incompatible:
                pass
    done = 0
    for i, x in enumerate(posts):
        for j, y in enumerate(states):
            if (i * len(states) + j) % step:
                continue
            assert x.post is not None
            try:
                larger = join(x.schema, y.final)
            except Incompatible:
                larger = y.final
            try:
                compare(larger, x.post)
            except Incompatible:
                pass
            done += 1
    elapsed = time.perf_counter() - start
    return elapsed * (pairs / max(done, 1)), step > 1


def run(n: int, label: str, template: str) -> dict[str, float | str]:
    c, ids = build(n)
    times = []
    naive = 0.0
    scaled = False
    for i, shard in enumerate(ids):
        if i == len(ids) - 1 and "conflict" in label:
            naive, scaled = naive_check_seconds(c, pair_budget=200_000)
        sql = template.format(t=shard.table)
        start = time.perf_counter_ns()
        c.on_ddl(shard, sql, i)
        times.append((time.perf_counter_ns() - start) / 1e6)
    lock = c.locks()[0]
    assert lock.stage == "none" and not lock.blocked, lock
    return {
        "shards": n,
        "ddl": label,
        "p50": statistics.median(times),
        "p95": statistics.quantiles(times, n=20)[18] if len(times) >= 20 else max(times),
        "max": max(times),
        "last": times[-1],
        "naive": naive * 1e3,
        "scaled": "*" if scaled else "",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", default="16,256,1024,4096")
    args = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}, {platform.node()}")
    print()
    print("| shards | DDL | p50 ms | p95 ms | max ms | last shard ms | seed check as written ms |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in args.shards.split(",")):
        for label, template in DDL.items():
            r = run(n, label, template)
            naive = f"{r['naive']:.1f}{r['scaled']}" if "conflict" in label else "n/a"
            print(
                f"| {r['shards']} | {r['ddl']} | {r['p50']:.2f} | {r['p95']:.2f} | "
                f"{r['max']:.2f} | {r['last']:.2f} | {naive} |",
                flush=True,
            )
    print()
    print("* estimated from a sample of the pairs (the full check would take too long)")


if __name__ == "__main__":
    main()
