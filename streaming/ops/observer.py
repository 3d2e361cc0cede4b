"""What the batch processor tells the operations side, as it goes.

The processor calls :meth:`BatchObserver.begin`, :meth:`~BatchObserver.lap` after each
protocol step and :meth:`~BatchObserver.done` with the batch's counts and the state it
persisted. Everything here is plain driver memory guarded by a lock: a scrape of
``/metrics`` or a dashboard request reads it and never starts a Spark job, and never
blocks a batch for longer than a copy.

Counters count since the job started (Prometheus handles the reset at a restart). A batch
that fails and runs again reaches :meth:`done` once, when it succeeds.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from schemas.changes import AlterTable
from schemas.ddl import parse_ddl
from schemas.errors import DDLError

__all__ = ["STEP_BUCKETS", "BatchObserver", "BatchRecord", "ddl_kind"]

# Seconds; a micro-batch step takes from milliseconds (restore) to minutes (a big MERGE).
STEP_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
HISTORY = 240  # batches kept for the dashboard's charts


def ddl_kind(statement: str) -> list[str]:
    """The kinds of change a downstream statement makes, from a small fixed set (a metric
    label must stay bounded): ``add_column``, ``drop_column``, ``create_table``, ...
    A statement the parser does not know counts as ``other``."""
    try:
        changes = parse_ddl(statement)
    except DDLError:
        return ["other"]
    kinds = []
    for change in changes:
        specs = change.specs if isinstance(change, AlterTable) else (change,)
        kinds += [_snake(type(s).__name__) for s in specs]
    return kinds or ["other"]


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


@dataclass
class BatchRecord:
    batch: int
    ended_at: float  # unix seconds
    steps: dict[str, float]  # protocol step -> seconds
    stats: dict[str, Any]


@dataclass
class _Histogram:
    buckets: list[int] = field(default_factory=lambda: [0] * len(STEP_BUCKETS))
    count: int = 0
    total: float = 0.0

    def observe(self, seconds: float) -> None:
        self.count += 1
        self.total += seconds
        for i, bound in enumerate(STEP_BUCKETS):
            if seconds <= bound:
                self.buckets[i] += 1


class BatchObserver:
    """Updated by the batch processor; read by metrics, views and the dashboard."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batch: int | None = None
        self._mark = 0.0
        self._steps: dict[str, float] = {}
        self.history: deque[BatchRecord] = deque(maxlen=HISTORY)
        self.totals: Counter[str] = Counter()
        self.ddl_applied: Counter[str] = Counter()
        self.conflicts: Counter[str] = Counter()  # target -> times it entered conflict
        # (target, action) -> rows Delta reports inserted/updated/deleted/truncated
        self.target_rows: Counter[tuple[str, str]] = Counter()
        self.step_histograms: dict[str, _Histogram] = {}
        self.state: dict[str, Any] | None = None  # as persisted by the last batch
        self._stages: dict[str, str] = {}
        self._listeners: list[Any] = []

    # --- called by the batch processor ----------------------------------------------------

    def begin(self, batch: int) -> None:
        with self._lock:
            self._batch = batch
            self._mark = time.monotonic()
            self._steps = {}

    def lap(self, step: str) -> None:
        """The named step ended now: it took the time since the previous lap (or begin)."""
        now = time.monotonic()
        with self._lock:
            self._steps[step] = self._steps.get(step, 0.0) + now - self._mark
            self._mark = now

    def done(self, stats: dict[str, Any], state: dict[str, Any]) -> None:
        """The batch persisted ``state`` (the JSON of the state store) with ``stats``."""
        with self._lock:
            record = BatchRecord(int(stats["batch"]), time.time(), dict(self._steps), stats)
            self.history.append(record)
            for step, seconds in record.steps.items():
                self.step_histograms.setdefault(step, _Histogram()).observe(seconds)
            for key, value in stats.items():
                if isinstance(value, int) and key != "batch":
                    self.totals[key] += value
            for statement in stats.get("downstream_ddl", []):
                self.ddl_applied.update(ddl_kind(statement))
            for target, counts in stats.get("target_rows", {}).items():
                for action, n in counts.items():
                    self.target_rows[(target, action)] += n
            self.totals["refused_ddl"] += len(stats.get("refused_ddl", []))
            self.totals["command_errors"] += len(stats.get("command_errors", []))
            for lock in state.get("locks", []):
                before = self._stages.get(lock["target"])
                if lock["stage"] == "conflict" and before != "conflict":
                    self.conflicts[lock["target"]] += 1
                self._stages[lock["target"]] = lock["stage"]
            self.state = state
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    # --- read side -----------------------------------------------------------------------

    def on_batch(self, listener: Any) -> None:
        """Call ``listener()`` (no arguments, on the batch's thread: keep it short) after
        each batch."""
        with self._lock:
            self._listeners.append(listener)

    def snapshot(self) -> dict[str, Any]:
        """A consistent copy of everything, for one scrape or one request."""
        with self._lock:
            return {
                "history": list(self.history),
                "totals": dict(self.totals),
                "ddl_applied": dict(self.ddl_applied),
                "conflicts": dict(self.conflicts),
                "target_rows": dict(self.target_rows),
                "steps": {k: copy.copy(v) for k, v in self.step_histograms.items()},
                "state": self.state,
            }
