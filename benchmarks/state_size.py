"""Size and time of saving and restoring the coordinator state, by number of shards.

The streaming job saves the whole coordinator after every micro-batch and restores it at
the start of the next (``streaming/storage/state_store.py``): ``coordinator.state.snapshot``
then ``json.dumps``; ``json.loads`` then ``coordinator.state.restore``. For each shard
count, one target's shards are taken through a rollout of an ADD COLUMN and a column
rename, and the state is timed at three points:

- ``registered``: every shard registered, no DDL yet;
- ``mid-rollout``: every shard ran the ADD, every other one the rename (held on it);
- ``rolled out``: every shard ran both; the lock is resolved.

Positions are either ``step`` numbers (as the memory engine and
``benchmarks/coordinator_ddl.py`` give them) or ``binlog`` positions with DDL origins and
channels, as the streaming job gives them (binlog file, position, row, commit time,
Kafka offset): a shard that ran an ALTER keeps a few of them (its last ALTER, its column
renames, the origin of its last DDL), which no deduplication removes.

The baseline is state version 1 from the same run: the version 1 writer below (as it was
in ``coordinator/state.py``) and its reader (``coordinator._state_v1``).

    .venv/bin/python benchmarks/state_size.py [--shards 16,256,1024,4096]
        [--positions step,binlog] [--repeat 5]

Prints a Markdown table (best of ``--repeat`` runs); docs/benchmarks.md keeps the latest.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable, Iterator
from typing import Any

from coordinator import _state_v1
from coordinator.coordinator import Coordinator, TargetConfig
from coordinator.decisions import ApplyDDL, Decision, Hold, Release, Truncate
from coordinator.ids import ShardId, TargetId
from coordinator.routing import Extract, Route, Router
from coordinator.state import restore, snapshot
from coordinator.target import PendingDDL, ShardState, Target
from schemas import parse_create_table, parse_ddl
from schemas.changes import CreateTable
from schemas.codec import schema_to_json

TARGET = TargetId("shop", "orders")
SCHEMA = parse_create_table(
    "CREATE TABLE orders (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, a INT, "
    "status VARCHAR(16) NOT NULL DEFAULT 'NEW', amount DECIMAL(12,2), note TEXT, "
    "created_at DATETIME(3) NOT NULL) DEFAULT CHARSET=utf8mb4"
)
ADD = "ALTER TABLE {t} ADD COLUMN c INT"
RENAME = "ALTER TABLE {t} CHANGE a z INT"


def shards(n: int) -> list[ShardId]:
    # db_0..db_7 x orders_0..orders_k, spread over sources of 128 tables each
    return [ShardId(f"src{i // 128}", f"db_{i % 8}", f"orders_{i // 8}") for i in range(n)]


def binlog(offset: int) -> list[Any]:
    return ["mysql-bin.000042", 4 + 97 * offset, 0, 1_764_000_000_000 + offset, offset]


def states(n: int, positions: str) -> Iterator[tuple[str, Coordinator]]:
    """The coordinator at each of the three points (the same object, moved on)."""
    route = Route(TARGET, extract=Extract(source_column="src", db_column="db"))
    c = Coordinator(Router((route,)), {TARGET: TargetConfig("optimistic")})
    ids = shards(n)
    for s in ids:
        c.register(s, SCHEMA.renamed(s.table), binlog(0) if positions == "binlog" else 0)
    yield "registered", c
    offset = 0

    def ddl(s: ShardId, template: str) -> None:
        nonlocal offset
        offset += 1
        sql = template.format(t=s.table)
        if positions == "binlog":
            p = binlog(offset)
            c.on_ddl(s, sql, p, p[:4], f"{s.source}.schema[0]")
        else:
            c.on_ddl(s, sql, offset)

    for s in ids:
        ddl(s, ADD)
    for s in ids[::2]:
        ddl(s, RENAME)
    yield "mid-rollout", c
    for s in ids[1::2]:
        ddl(s, RENAME)
    assert c.locks()[0].stage == "none", c.locks()[0]
    yield "rolled out", c


def timed(
    save: Callable[[], dict[str, Any]], load: Callable[[dict[str, Any]], Any], repeat: int
) -> tuple[int, float, float]:
    """(bytes, save seconds, restore seconds) as the state store does it: the CPU time of
    this process, best of ``repeat`` (the machine is shared; wall time varies more).

    Restore pauses Python's garbage collector; the collection of the young generations it
    leaves due runs at the next allocation, which is timed with it."""
    saves, loads, size = [], [], 0
    for _ in range(repeat):
        start = time.process_time()
        text = json.dumps(save())
        saved = time.process_time()
        restored = [load(json.loads(text))]  # an allocation: what the collector has due runs
        loads.append(time.process_time() - saved)
        del restored
        saves.append(saved - start)
        size = len(text.encode())
    return size, min(saves), min(loads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", default="16,256,1024,4096")
    parser.add_argument("--positions", default="step,binlog")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}, {platform.node()}")
    print()
    print("| shards | positions | state | v1 MB | v1 save + restore s | v2 MB | v2 save s "
          "| v2 restore s | v2 save + restore s | v2 schemas |")  # fmt: skip
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in args.shards.split(",")):
        # version 1 takes seconds at thousands of shards: fewer runs of it
        old_repeat = max(1, args.repeat // 2) if n >= 1024 else args.repeat
        for positions in args.positions.split(","):
            for label, c in states(n, positions):
                old, new = measure(c, old_repeat, args.repeat)
                kinds = len(snapshot(c)["schemas"])
                print(
                    f"| {n} | {positions} | {label} | {old[0] / 1e6:.2f} | "
                    f"{old[1] + old[2]:.3f} | {new[0] / 1e6:.3f} | {new[1]:.3f} | "
                    f"{new[2]:.3f} | {new[1] + new[2]:.3f} | {kinds} |",
                    flush=True,
                )


def measure(
    c: Coordinator, old_repeat: int, repeat: int
) -> tuple[tuple[int, float, float], tuple[int, float, float]]:
    def old_load(data: dict[str, Any]) -> None:
        _state_v1.restore(data, c.router, c.configs, TargetConfig())

    def new_load(data: dict[str, Any]) -> None:
        restore(data, c.router, c.configs)

    old = timed(lambda: v1_snapshot(c), old_load, old_repeat)
    new = timed(lambda: snapshot(c), new_load, repeat)
    return old, new


# --- the version 1 writer, as it was (the baseline) ----------------------------------------


def v1_snapshot(c: Coordinator) -> dict[str, Any]:
    return {
        "format": "shardmerge-coordinator",
        "version": 1,
        "targets": [_target(t) for t in c.targets.values()],
        "versions": [[str(s), v] for s, v in c.versions.items()],
        "unregistered": [[str(s), p] for s, p in c.unregistered.items()],
        "ghosts": [
            [str(s), {"schema": schema_to_json(g.schema), "statements": g.statements}]
            for s, g in c.ghosts.items()
        ],
        "ddl_origins": [[k, list(o.origin), o.digests] for k, o in c.ddl_origins.items()],
    }


def _pending(d: PendingDDL) -> dict[str, Any]:
    out: dict[str, Any] = {"sql": d.sql, "position": d.position, "error": d.error}
    if isinstance(d.change, CreateTable):
        out["create"] = schema_to_json(d.change.schema)
    elif d.change is not None:
        out["index"] = parse_ddl(d.sql).index(d.change) if d.error is None else 0
    return out


def _shard(s: ShardState) -> dict[str, Any]:
    return {
        "shard": str(s.shard),
        "version": s.version,
        "schema": schema_to_json(s.schema),
        "pending": [_pending(d) for d in s.pending],
        "post": None if s.post is None else schema_to_json(s.post),
        "held_seq": s.held_seq,
        "project": s.project,
        "conflict": s.conflict,
        "awaiting": s.awaiting,
        "admitted": s.admitted,
        "renamed": [[pos, [list(pair) for pair in pairs]] for pos, pairs in s.renamed],
        "last_alter": s.last_alter,
        "fingerprint": s.fingerprint,
    }


def _target(t: Target) -> dict[str, Any]:
    return {
        "id": str(t.id),
        "mode": t.mode,
        "strict": t.strict,
        "extract": {
            "source_column": t.extract.source_column,
            "db_column": t.extract.db_column,
            "table_column": t.extract.table_column,
        },
        "applied": None if t.applied is None else schema_to_json(t.applied),
        "seq": t.seq,
        "expected": None if t.expected is None else _pending(t.expected),
        "ready": [str(s) for s in t.ready],
        "owed": [[str(s), _pending(d)] for s, d in t.owed.items()],
        "shards": [_shard(s) for s in t.shards.values()],
        "refused": None
        if t.refused is None
        else {"why": t.refused.why, "deferred": [_decision(d) for d in t.refused.deferred]},
    }


def _decision(d: Decision) -> dict[str, Any]:
    match d:
        case ApplyDDL():
            return {"kind": "alter", "target": str(d.target), "statement": d.statement,
                    "schema": schema_to_json(d.schema), "reason": d.reason}  # fmt: skip
        case Release():
            return {"kind": "release", "target": str(d.target), "shard": str(d.shard),
                    "version": d.version, "until": d.until, "project": d.project}  # fmt: skip
        case Hold():
            return {"kind": "hold", "target": str(d.target), "shard": str(d.shard),
                    "version": d.version, "position": d.position, "reason": d.reason}  # fmt: skip
        case Truncate():
            return {"kind": "truncate", "target": str(d.target), "shard": str(d.shard),
                    "version": d.version, "match": [list(m) for m in d.match],
                    "position": d.position}  # fmt: skip
    raise ValueError(d)


if __name__ == "__main__":
    main()
