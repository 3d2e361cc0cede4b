"""What the operator's views cost at thousands of shards: a scrape of ``/metrics`` and
``/api/locks``, answer time and size, from the state of a pessimistic rollout half done.

    .venv/bin/python benchmarks/ops_scale.py [--shards 16 1024 4096]

For each shard count, one target's shards are registered and half of them run an ADD
COLUMN (a pessimistic lock holds them), and one more shard's rows wait before its CREATE
TABLE; the state is saved as a batch saves it, and the ops server answers from it as the
running job's does (no Spark: the views read the saved state). Per count: ``/metrics``
with the default per-target series and with ``ops.shard_metrics`` (the baseline of the
same run: what a scrape cost before per-target series were the default), and
``/api/locks`` whole and as the dashboard asks for it (``?held=100``); the first of five answers (the views read the state), the best, and the
body's size. Prints a Markdown table;
docs/benchmarks.md keeps the latest run.
"""

from __future__ import annotations

import argparse
import http.client
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def answer(url: str, path: str, token: str) -> tuple[float, float, int]:
    """The wall time of the first of five GETs of ``path``, the best, and the body's size."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    first, best, size = 0.0, float("inf"), 0
    for i in range(5):
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        started = time.perf_counter()
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        body = conn.getresponse().read()
        took = time.perf_counter() - started
        first = took if i == 0 else first
        best = min(best, took)
        size = len(body)
        conn.close()
    return first, best, size


def run(shards: int, work: Path) -> dict[str, tuple[float, float, int]]:
    from coordinator.coordinator import Coordinator
    from coordinator.ids import ShardId
    from schemas.ddl import parse_create_table
    from streaming.batch.protocol import _lock_json, _wait_json
    from streaming.config import Settings
    from streaming.ops.metrics import registry_for
    from streaming.ops.observer import BatchObserver
    from streaming.ops.server import OpsServer
    from streaming.ops.views import Views
    from streaming.storage.state_store import StateStore

    token = "t" * 16 + "0123456789abcdefghij"
    out = {}
    for per_shard in (False, True):
        root = work / f"{shards}-{per_shard}"
        s = Settings.model_validate(
            {
                "kafka": {"bootstrap": "127.0.0.1:1"},
                "sources": [{"topics": ["s1"]}],
                "routes": [{"target": "shop.orders", "table": "orders_*"}],
                "targets": {"shop.orders": {"mode": "pessimistic"}},
                "sink": {"path": str(root / "lake")},
                "checkpoint": str(root / "cp"),
                "ops": {"port": 0, "token": token, "shard_metrics": per_shard},
            }
        )
        c = Coordinator(s.router(), s.target_configs(), s.default_config())
        ids = [ShardId("s1", f"db_{i // 16}", f"orders_{i % 16}") for i in range(shards)]
        for shard in ids:
            c.register(
                shard, parse_create_table(f"CREATE TABLE {shard.table} (id INT PRIMARY KEY)")
            )
        for i, shard in enumerate(ids[: shards // 2]):
            c.on_ddl(
                shard,
                f"ALTER TABLE {shard.table} ADD COLUMN x INT",
                ["bin.1", 100 + i, 0, 1_700_000_000_000 + i, 5],
            )
        c.await_ddl(ShardId("s1", "late", "orders_0"), ["bin.1", 90, 0, 1_699_999_999_000, 3], "")
        store = StateStore(None, s.checkpoint)
        stats = {"batch": 7, "events": 0, "target_rows": {}}
        state = {"batch": 7, "coordinator": _snapshot(c), "stats": stats,
                 "locks": [_lock_json(v) for v in c.locks()], "applied_commands": [],
                 "waiting": [_wait_json(w) for w in c.waiting()]}  # fmt: skip
        store.save(7, state)
        observer = BatchObserver()
        observer.begin(7)
        observer.done(stats, state)
        views = Views(s, store, observer)
        server = OpsServer(s.ops, views, registry_for(views, per_shard)).start()
        try:
            key = "metrics, per shard" if per_shard else "metrics, per target (default)"
            out[key] = answer(server.url, "/metrics", token)
            if not per_shard:
                out["/api/locks"] = answer(server.url, "/api/locks", token)
                # what the dashboard asks for: 100 held shards listed, every one counted
                out["/api/locks?held=100"] = answer(server.url, "/api/locks?held=100", token)
        finally:
            server.stop()
    return out


def _snapshot(c: object) -> dict:
    from coordinator.state import snapshot

    return snapshot(c)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, nargs="+", default=[16, 1024, 4096])
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="shardmerge-ops-") as tmp:
        for n in args.shards:
            for what, (first, best, size) in run(n, Path(tmp)).items():
                rows.append((n, what, first, best, size))
                print(f"{n} shards, {what}: first {first * 1000:.1f} ms, best "
                      f"{best * 1000:.1f} ms, {size:,} bytes", flush=True)  # fmt: skip
    print("| shards | answer | first | best of 5 | body |")
    print("|---:|---|---:|---:|---:|")
    for n, what, first, best, size in rows:
        print(f"| {n:,} | {what} | {first * 1000:.1f} ms | {best * 1000:.1f} ms | {size:,} bytes |")


if __name__ == "__main__":
    main()
