"""What the coordinator's driver work costs by number of shards: registering every shard,
and a whole rollout of one ADD COLUMN and then one column rename over every shard.

For each shard count, one target (optimistic) gets every shard registered, then every
shard runs ``ALTER TABLE t ADD COLUMN c INT`` in turn, then every shard runs ``ALTER TABLE
t CHANGE a z INT`` in turn (a conflict DDL: each shard is held until the last one made the
same change, which resolves the lock and releases them all). Each ``Coordinator.on_ddl``
call is timed end to end (wall clock, and the process's CPU time, which other work on the
machine inflates less): parsing, routing, the lock rules, termination. Every shard's
statement is its own text (its own table name); since 2026-12-01 a statement is read once
per shape (``schemas.ddl.parse_ddl``: the same ALTER but for the table's name), so the
rollout tokenizes each of its two statements once.

Baseline, from the same run: the same rollout against the coordinator as of ``--baseline``
(default: the commit before its lock kept an index and before statements were parsed
once), taken out of git with ``git archive`` into a temporary directory. Each side runs in
a child process of its own per shard count (``--worker``), one after the other. The last
column is the seed proposal's termination check as written (every held X × every shard Y),
timed once in the run of this tree, on the state before the last shard's rename.

    .venv/bin/python benchmarks/coordinator_ddl.py [--shards 16,256,1024,4096]
        [--baseline REV | --baseline none]

Prints Markdown tables; docs/benchmarks.md keeps the latest run.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "f22ae8cb204a778d90dabb3172bfe4e0ff0e4610"
SCHEMA_SQL = (
    "CREATE TABLE orders (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, a INT, "
    "status VARCHAR(16) NOT NULL DEFAULT 'NEW', amount DECIMAL(12,2), note TEXT, "
    "created_at DATETIME(3) NOT NULL) DEFAULT CHARSET=utf8mb4"
)
DDL = {
    "normal (ADD COLUMN)": "ALTER TABLE {t} ADD COLUMN c INT",
    "conflict (RENAME COLUMN)": "ALTER TABLE {t} CHANGE a z INT",
}


# --- the worker: one rollout, in whatever tree is first on sys.path ---------------------


def worker(n: int, seed_check: bool) -> dict[str, Any]:
    from coordinator.coordinator import Coordinator, TargetConfig
    from coordinator.ids import ShardId, TargetId
    from coordinator.routing import Route, Router
    from schemas import parse_create_table

    target = TargetId("shop", "orders")
    schema = parse_create_table(SCHEMA_SQL)
    # 8 databases per source of 128 tables, every table name its own
    shards = [ShardId(f"src{i // 128}", f"db_{i % 8}", f"orders_{i}") for i in range(n)]
    c = Coordinator(Router((Route(target),)), {target: TargetConfig("optimistic")})
    start, cpu = time.perf_counter(), time.process_time()
    for s in shards:
        c.register(s, schema.renamed(s.table))
    out: dict[str, Any] = {
        "tree": str(Path(sys.modules["coordinator"].__file__ or "").parents[1]),
        "register": time.perf_counter() - start,
        "register_cpu": time.process_time() - cpu,
        "rollout_cpu": 0.0,
        "seed_check": None,
    }
    position = 0
    for label, template in DDL.items():
        times = []
        for i, shard in enumerate(shards):
            if seed_check and i == n - 1 and "conflict" in label:
                out["seed_check"] = seed_check_seconds(c.targets[target], pair_budget=200_000)
            sql = template.format(t=shard.table)
            position += 1
            cpu = time.process_time()
            begin = time.perf_counter_ns()
            c.on_ddl(shard, sql, position)
            times.append((time.perf_counter_ns() - begin) / 1e6)
            out["rollout_cpu"] += time.process_time() - cpu
        out[label] = times
    lock = c.locks()[0]
    assert lock.stage == "none" and not lock.blocked, lock
    assert lock.schema is not None and lock.schema.has_column("z"), lock
    return out


def seed_check_seconds(t: Any, pair_budget: int) -> tuple[float, bool]:
    """The seed's termination check over all (X, Y) pairs; scaled when over budget."""
    from coordinator.optimistic import join_all
    from schemas import compare, join
    from schemas.errors import Incompatible

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


# --- the parent: both trees, side by side ---------------------------------------------


def baseline_tree(rev: str, into: Path) -> Path:
    """The coordinator and schema packages as of ``rev``, from git."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "coordinator", "schemas",
         "shardmerge"],
        check=True, capture_output=True,
    ).stdout  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def run_worker(tree: Path, n: int, seed_check: bool) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, __file__, "--worker", str(n)] + (["--seed-check"] if seed_check else [])
    done = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(done.stdout)
    assert Path(result["tree"]) == tree.resolve(), (result["tree"], tree)
    return result


def p95(times: list[float]) -> float:
    return statistics.quantiles(times, n=20)[18] if len(times) >= 20 else max(times)


def rollout_seconds(r: dict[str, Any]) -> float:
    return sum(sum(r[label]) for label in DDL) / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", default="16,256,1024,4096")
    parser.add_argument("--baseline", default=BASELINE, help="a git revision, or none")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--seed-check", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        print(json.dumps(worker(args.worker, args.seed_check)))
        return
    sizes = [int(x) for x in args.shards.split(",")]
    runs: dict[int, tuple[dict[str, Any], dict[str, Any] | None]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        old = None if args.baseline == "none" else baseline_tree(args.baseline, Path(tmp))
        for n in sizes:
            print(f"{n} shards ...", file=sys.stderr, flush=True)
            new = run_worker(ROOT, n, seed_check=True)
            runs[n] = (new, None if old is None else run_worker(old, n, seed_check=False))
    print(f"python {platform.python_version()} on {platform.machine()}, {platform.node()}")
    print(f"baseline: {args.baseline}")
    print()
    print("Whole rollout (ADD COLUMN on every shard, then a column rename on every shard):")
    print()
    print(
        "| shards | register s (baseline / now) | rollout s (baseline / now) "
        "| rollout CPU s (baseline / now) | rollout speed-up | rollout ms per DDL (now) |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for n, (new, base) in runs.items():
        now = rollout_seconds(new)
        register, rollout = f"{new['register']:.3f}", f"{now:.3f}"
        cpu, ratio = f"{new['rollout_cpu']:.3f}", "n/a"
        if base is not None:
            then = rollout_seconds(base)
            register = f"{base['register']:.3f} / {register}"
            rollout, ratio = f"{then:.3f} / {rollout}", f"{then / now:.1f}x"
            cpu = f"{base['rollout_cpu']:.3f} / {cpu}"
        print(f"| {n:,} | {register} | {rollout} | {cpu} | {ratio} | {now * 1e3 / (2 * n):.3f} |")
    print()
    print("Each DDL (now):")
    print()
    print("| shards | DDL | p50 ms | p95 ms | max ms | last shard ms | seed check as written ms |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n, (new, _) in runs.items():
        for label in DDL:
            times = new[label]
            seed = "n/a"
            if "conflict" in label and new["seed_check"] is not None:
                seconds, scaled = new["seed_check"]
                seed = f"{seconds * 1e3:,.1f}{'*' if scaled else ''}"
            print(
                f"| {n:,} | {label} | {statistics.median(times):.2f} | {p95(times):.2f} | "
                f"{max(times):.2f} | {times[-1]:.2f} | {seed} |"
            )
    print()
    print("* estimated from a sample of the pairs (the full check would take too long)")


if __name__ == "__main__":
    main()
