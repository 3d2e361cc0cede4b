"""What a group member's start costs as its group log grows, with and without compaction.

    .venv/bin/python benchmarks/group_start.py [--records 2000 10000 20000] [--shards 64]
        [--tail 200]

A group store on the local filesystem gets a log of ``--records`` records of one member
(every shard's CREATE TABLE, then ADD COLUMN rollouts over every shard, optimistic; what
a long-running group appends most: DDL records). Per size, two starts of a second member,
each measured from nothing to its owner's view folded to the log's end (the construction
of ``GroupMember``, then a fold of ``latest``, as its first idle pass does):

- *whole log*: no snapshot; the start reads and folds every record (the only way before
  compaction, and still what happens while a member's floor holds compaction at 0);
- *compacted*: after the owner's compaction with every floor ``--tail`` records before the
  end: the start restores the snapshot and reads and folds the last ``--tail`` records.

Prints a Markdown table (seconds, records read into memory, the snapshot's size); no
assertion on times (docs/benchmarks.md keeps the latest run). Plain Python, no Spark.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from coordinator.group import Record, settings_fingerprint
from streaming.config import Settings
from streaming.group.member import GroupMember, compact
from streaming.storage.group_store import GroupStore, LocalRecords


def settings(tmp: Path, member: str, every: int) -> Settings:
    return Settings.model_validate(
        {
            "kafka": {"bootstrap": "127.0.0.1:9"},
            "sources": [{"pattern": "s.*"}],
            "routes": [{"target": "shop.orders", "table": "orders_*"}],
            "targets": {"shop.orders": {"mode": "optimistic"}},
            "sink": {"path": f"file://{tmp}/lake"},
            "checkpoint": f"file://{tmp}/cp-{member}",
            "coordination": {
                "group": "bench",
                "member": member,
                "members": ["a", "b"],
                "lease_s": 600,
                "heartbeat_s": 1,
                "snapshot_every": every,
            },
        }
    )


def store_of(s: Settings) -> GroupStore:
    return GroupStore(LocalRecords(), s.group_root())


def fill(tmp: Path, records: int, shards: int) -> None:
    """Append ``records`` records of member a: the shards' CREATE TABLEs, then rollouts
    (each append from the number it knows is next, as a member appends)."""
    s = settings(tmp, "a", 0)
    store = store_of(s)
    summary = s.fold_summary()
    joined = {"settings": {"fingerprint": settings_fingerprint(summary), "summary": summary}}
    names = [f"s1.db_{i // 16}.orders_{i % 16}" for i in range(shards)]
    store.append(Record("a:join", "a", "join", joined).to_json(), start=0)
    store.append(Record("b:join", "b", "join", joined).to_json(), start=1)
    n, column = 2, 0
    for i, shard in enumerate(names):
        sql = f"CREATE TABLE orders_{i % 16} (id BIGINT NOT NULL, v INT, PRIMARY KEY (id))"
        body = {"shard": shard, "sql": sql, "position": [n], "origin": None, "channel": "t"}
        store.append(Record(f"a:ddl:{shard}:{n}", "a", "ddl", body).to_json(), start=n)
        n += 1
    while n < records:
        for i, shard in enumerate(names):
            if n >= records:
                break
            sql = f"ALTER TABLE orders_{i % 16} ADD COLUMN c{column} INT"
            body = {"shard": shard, "sql": sql, "position": [n], "origin": None, "channel": "t"}
            store.append(Record(f"a:ddl:{shard}:{n}", "a", "ddl", body).to_json(), start=n)
            n += 1
        column += 1


def start(tmp: Path, every: int) -> tuple[float, int, int]:
    """A start of member b folded to the log's end: seconds, records in memory, seq."""
    s = settings(tmp, "b", every)
    began = time.perf_counter()
    m = GroupMember(None, s, "app-b", store=store_of(s))
    m.fold(m.latest)
    took = time.perf_counter() - began
    return took, len(m.records), m.latest.seq


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, nargs="+", default=[2000, 10000, 20000])
    ap.add_argument("--shards", type=int, default=64)
    ap.add_argument("--tail", type=int, default=200)
    args = ap.parse_args()
    rows: list[str] = []
    for records in args.records:
        tmp = Path(tempfile.mkdtemp(prefix="group-start-"))
        try:
            began = time.perf_counter()
            fill(tmp, records, args.shards)
            filled = time.perf_counter() - began
            whole, held, seq = start(tmp, 0)
            # the owner compacts: a snapshot at the end, every floor --tail records before it
            s = settings(tmp, "a", 1)
            owner = GroupMember(None, s, "app-a", store=store_of(s))
            owner.fold(owner.latest)
            floor = max(0, seq - args.tail)
            snap_seq, removed = compact(owner.store, owner.latest, ["a", "b"], {
                "fingerprint": owner.fingerprint, "summary": owner.summary},
                "a", {"a": floor, "b": floor}, 1)  # fmt: skip
            path = tmp / "lake/_shardmerge/groups/bench/snapshots" / f"{snap_seq:012d}.json"
            size = path.stat().st_size
            compacted, held_after, seq_after = start(tmp, 1)
            assert seq_after == seq, (seq_after, seq)
            rows.append(
                f"| {records:,} | {args.shards} | {whole:.2f} s ({held:,} read) | "
                f"{compacted:.2f} s ({held_after:,} read) | {whole / compacted:.1f}x | "
                f"{removed:,} | {size / 1e6:.2f} MB | {filled:.0f} s |"
            )
            print(rows[-1], flush=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print()
    print(
        "| log records | shards | start, whole log | start, compacted | faster | records "
        "removed | snapshot | filling the log |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
