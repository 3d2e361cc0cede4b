"""Held rows per shard and dead letters by reason, counted from their Delta tables.

These are the two figures the coordinator's state does not carry. They are counted by a
thread of their own after a batch ends (never inside a batch: a scrape or a dashboard
request only reads the last counts), at most every ``min_interval`` seconds, and the
stash only while some shard is held or waits without a lock, the last batch held rows,
or rows were held at the last count. A count that
fails is logged, counted (``shardmerge_ops_refresh_errors_total``) and shown with the
error; the previous figures stay, marked with the batch they are from.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streaming.ops.observer import BatchObserver

__all__ = ["TableCounts", "reason_class"]

log = logging.getLogger("shardmerge.ops")

LATEST = 20  # dead letters the dashboard lists
_CUT = re.compile(r"\s+at\s+|[:(\"'`\[{0-9]")


def reason_class(reason: str) -> str:
    """A dead letter's reason without its particulars (field paths, values, names), for a
    bounded metric label: ``"expected a JSON object at $.payload"`` -> ``"expected a JSON
    object"``."""
    head = _CUT.split(reason or "", maxsplit=1)[0].strip().rstrip(",;.")
    return head[:60] or "unknown"


class TableCounts:
    def __init__(
        self,
        spark: SparkSession,
        observer: BatchObserver,
        stash_path: str,
        dead_letter_path: str,
        min_interval: float = 5.0,
    ) -> None:
        self.spark = spark
        self.observer = observer
        self.stash_path = stash_path
        self.dead_letter_path = dead_letter_path
        self.min_interval = min_interval
        self._lock = threading.Lock()
        self._held: dict[tuple[str, str], int] = {}
        self._dead: dict[str, Any] = {"by_reason": {}, "latest": [], "as_of": None, "error": None}
        self.errors = 0
        self.counted = 0  # refreshes done, for tests and the dashboard
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name="shardmerge-ops-counts", daemon=True
        )

    def start(self) -> TableCounts:
        self.observer.on_batch(self._wake.set)
        self._wake.set()  # count once at start: a restarted job shows what it holds
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=60)

    # --- read side -----------------------------------------------------------------------

    def held_rows(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self._held)

    def dead_letters(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._dead)

    # --- the counting thread -------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            if self._stop.is_set():
                return
            self._wake.clear()
            started = time.monotonic()
            self.refresh()
            self._stop.wait(max(0.0, self.min_interval - (time.monotonic() - started)))

    def refresh(self) -> None:
        state = self.observer.snapshot()["state"]
        batch = None if state is None else state["batch"]
        try:
            held = self._count_stash(state)
            dead = self._count_dead_letters()
        except Exception as e:
            # Not swallowed: logged with its stack, counted in a metric, and shown on the
            # dashboard; the last good figures stay, marked with the batch they are from.
            log.exception("counting held rows / dead letters after batch %s failed", batch)
            with self._lock:
                self.errors += 1
                self._dead = {**self._dead, "error": f"{type(e).__name__}: {e}"}
            return
        with self._lock:
            if held is not None:
                self._held = held
            self._dead = {**dead, "as_of": batch, "error": None}
            self.counted += 1

    def _count_stash(self, state: dict[str, Any] | None) -> dict[tuple[str, str], int] | None:
        holding = state is not None and (
            any(lock["blocked"] for lock in state.get("locks", []))
            or bool(state.get("waiting"))
            or bool(state.get("stats", {}).get("held"))
        )
        if not holding and not any(self._held.values()):
            return {}
        if not DeltaTable.isDeltaTable(self.spark, self.stash_path):
            return {}
        rows = (
            self.spark.read.format("delta")
            .load(self.stash_path)
            .groupBy("target", "source", "db", "tbl")
            .count()
            .collect()
        )
        return {(r["target"], f"{r['source']}.{r['db']}.{r['tbl']}"): r["count"] for r in rows}

    def _count_dead_letters(self) -> dict[str, Any]:
        if not DeltaTable.isDeltaTable(self.spark, self.dead_letter_path):
            return {"by_reason": {}, "latest": []}
        table = self.spark.read.format("delta").load(self.dead_letter_path)
        by_reason: dict[str, int] = {}
        for r in table.groupBy("reason").count().collect():
            key = reason_class(r["reason"])
            by_reason[key] = by_reason.get(key, 0) + r["count"]
        latest = [
            {
                "topic": r["topic"],
                "partition": r["partition"],
                "offset": r["offset"],
                "reason": r["reason"],
                "format": r["format"],
                "seen_at": r["seen_at"].isoformat() if r["seen_at"] else None,
            }
            for r in table.orderBy(F.col("seen_at").desc(), F.col("offset").desc())
            .limit(LATEST)
            .collect()
        ]
        return {"by_reason": by_reason, "latest": latest}
