"""Keep the streaming query running through transient failures of its dependencies.

Spark's Kafka source already rides out a short broker outage on its own (its consumers
reconnect; the driver's offset requests wait ``default.api.timeout.ms`` and are retried,
``fetchOffset.numRetries``). What it cannot ride out fails the query: a task whose fetch
timed out, a Delta write whose files vanished for a moment. Spark then stops the query with
the checkpoint intact, and the batch that failed runs again when the query restarts (the
foreachBatch protocol in ``streaming/batch/protocol.py`` makes the re-run write nothing twice).

:func:`supervise` restarts the query like Flink's exponential-delay restart strategy:
``restart.initial_backoff_s`` doubled per failure in a row up to ``restart.max_backoff_s``,
at most ``restart.attempts`` restarts in a row; a query that has run ``restart.reset_after_s``
without failing starts counting afresh. Every restart is logged and counted in
:data:`RESTARTS` (read by the metrics). A *permanent* error is never retried: the job stops
at once with :class:`JobStopped`, whose message says what the operator must do:

- Kafka says records the job has not read are gone (a topic deleted or recreated, offsets
  reset, retention shorter than the job's lag): the source keeps ``failOnDataLoss`` on, so
  the job stops instead of skipping silently;
- the coordinator stopped at a strict conflict (it recorded the batch for
  ``shardmerge locks``);
- a topic the job had read was deleted and recreated with as many records or more
  (``streaming.source.topic_ids``);
- the settings are refused when the query starts.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
from pyspark.errors import AnalysisException, IllegalArgumentException
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql.streaming.query import StreamingQuery

from shardmerge.errors import ShardMergeError
from streaming.config import RestartSettings
from streaming.faults import storage_fault_noticed
from streaming.source.topic_ids import RECREATED

__all__ = ["RESTARTS", "JobStopped", "Restarts", "classify", "supervise"]

log = logging.getLogger("shardmerge.supervise")

# What a failed query's error says when it is permanent, and what the operator does then.
DATA_LOSS = (
    "Kafka no longer has records the job has not read yet (a topic deleted or recreated, "
    "offsets reset, or retention shorter than the job's lag); the job stopped rather than "
    "skip them. Nothing after the last committed batch was written. Find out what happened "
    "upstream: if the topics can be restored, restore them and run again; if the data is "
    "gone, re-snapshot the source tables (Debezium: a new snapshot into new topics) and run "
    "the job with a new checkpoint and sink, then swap the tables"
)
CONFLICT = (
    "the coordinator stopped at a strict schema conflict: see `shardmerge locks --config "
    "FILE` for the target and the DDL, resolve it with `shardmerge unlock ...`, then run "
    "again (the failed batch runs again, nothing is lost)"
)
SETTINGS = "Spark refused the query's settings: fix the configuration, then run again"
SUPERSEDED = (
    "another run of this job started on the same checkpoint and took it over (see the "
    "error for where): only one run may write; this one stopped. Nothing is lost: the "
    "other run goes on from the last committed batch"
)
_SUPERSEDED_MARKS = ("Superseded",)
_RECREATED_MARKS = ("RecreatedTopic",)

_DATA_LOSS_MARKS = ("KAFKA_DATA_LOSS", "data may have been lost", "failOnDataLoss")
_CONFLICT_MARKS = ("ConflictError",)
# A failed query (awaitTermination) or a refused start: Spark's errors, converted or not.
QUERY_FAILURES: tuple[type[BaseException], ...] = (CapturedException, Py4JJavaError)


class JobStopped(ShardMergeError):
    """The job stopped for good: a permanent error, or too many failures in a row. The
    message says why and what to do; the checkpoint is intact."""


@dataclass
class Restarts:
    """The supervisor's counters. One instance, :data:`RESTARTS`, per process; the metrics
    read it (:meth:`snapshot`) while the supervisor updates it from another thread."""

    total: int = 0
    in_a_row: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    last_error: str | None = None
    last_at: float | None = None
    stopped: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def restarted(self, kind: str, error: str) -> None:
        with self._lock:
            self.total += 1
            self.in_a_row += 1
            self.by_kind[kind] += 1
            self.last_error, self.last_at = error, time.time()

    def ran_fine(self) -> None:
        with self._lock:
            self.in_a_row = 0

    def stop(self, why: str) -> None:
        with self._lock:
            self.stopped = why

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "total": self.total,
                "in_a_row": self.in_a_row,
                "by_kind": dict(self.by_kind),
                "last_error": self.last_error,
                "last_at": self.last_at,
                "stopped": self.stopped,
            }


RESTARTS = Restarts()


def classify(error: BaseException, *, at_start: bool) -> tuple[str, str | None]:
    """``(kind, advice)``: the failure's kind for the counters, and for a permanent one
    what the operator must do (None: transient, restart)."""
    text = f"{type(error).__name__}: {error}"
    if any(mark in text for mark in _DATA_LOSS_MARKS):
        return "data_loss", DATA_LOSS
    if any(mark in text for mark in _CONFLICT_MARKS):
        return "conflict", CONFLICT
    if any(mark in text for mark in _RECREATED_MARKS):
        return "recreated_topic", RECREATED
    if any(mark in text for mark in _SUPERSEDED_MARKS):
        return "superseded", SUPERSEDED
    if at_start and isinstance(error, AnalysisException | IllegalArgumentException):
        return "settings", SETTINGS
    if "org.apache.kafka.common.errors" in text:
        return "kafka", None
    return "query", None


def backoff(policy: RestartSettings, in_a_row: int) -> float:
    """Seconds before restart number ``in_a_row`` (1, 2, ...) of a run of failures."""
    return float(min(policy.max_backoff_s, policy.initial_backoff_s * 2 ** (in_a_row - 1)))


def supervise(
    start: Callable[[], StreamingQuery],
    policy: RestartSettings,
    *,
    counters: Restarts = RESTARTS,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    failures: tuple[type[BaseException], ...] = QUERY_FAILURES,
) -> None:
    """Run the query ``start()`` returns until it ends without error; restart it after a
    transient failure (see the module docstring). Raises :class:`JobStopped`."""
    while True:
        started = clock()
        at_start = True
        try:
            query = start()
            at_start = False
            query.awaitTermination()
            counters.ran_fine()
            return
        except failures as e:
            error = e
        storage_fault_noticed()  # a fault test's outage ends some seconds after this
        if clock() - started >= policy.reset_after_s:
            counters.ran_fine()
        kind, advice = classify(error, at_start=at_start)
        summary = _first_line(error)
        if advice is not None:
            counters.stop(kind)
            log.error("the job stops (%s): %s. Error: %s", kind, advice, summary)
            raise JobStopped(f"{advice}. Error: {summary}") from error
        if counters.in_a_row >= policy.attempts:
            counters.stop("gave_up")
            raise JobStopped(
                f"the query failed {counters.in_a_row + 1} times in a row "
                f"(restart.attempts={policy.attempts}); last error ({kind}): {summary}. The "
                "checkpoint is intact: fix the cause (broker, storage, permissions) and run "
                "again; the failed batch runs again and writes nothing twice"
            ) from error
        counters.restarted(kind, summary)
        wait = backoff(policy, counters.in_a_row)
        log.warning(
            "query failed (%s), restart %d of %d in a row in %.0fs: %s",
            kind,
            counters.in_a_row,
            policy.attempts,
            wait,
            summary,
        )
        sleep(wait)


def _first_line(error: BaseException) -> str:
    """The error's gist without stack traces: its first line, and for a Python error
    raised in the batch, the last line of its traceback (the exception itself)."""
    text = str(error).split("\n\nJVM stacktrace:")[0]
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln[0].isspace()]
    if not lines:
        return type(error).__name__
    raised = [ln for ln in lines[1:] if re.match(r"^[\w.]+(Error|Exception)\b", ln)]
    gist = f"{lines[0]} ... {raised[-1]}" if raised else lines[0]
    return gist[:800]
