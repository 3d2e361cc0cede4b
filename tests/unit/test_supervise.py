"""The restart policy of the query: backoff, limit, reset, and permanent errors.

The failures the job really meets (a broker restart, storage gone for a while, Kafka data
loss) are in tests/integration/test_faults.py; here the policy alone, with a stand-in for
Spark's failed query (RuntimeError) and a recorded sleep instead of waiting."""

from __future__ import annotations

import pytest

from streaming.config import RestartSettings
from streaming.runtime.supervise import JobStopped, Restarts, backoff, classify, supervise

POLICY = RestartSettings(attempts=3, initial_backoff_s=2, max_backoff_s=5, reset_after_s=100)


class Query:
    """A query that ends after ``runs`` seconds of the fake clock, failing with ``error``."""

    def __init__(self, clock: list[float], runs: float, error: str | None) -> None:
        self.clock, self.runs, self.error = clock, runs, error

    def awaitTermination(self) -> None:
        self.clock[0] += self.runs
        if self.error is not None:
            raise RuntimeError(self.error)


def run(outcomes: list[tuple[float, str | None]]) -> tuple[list[float], Restarts, int]:
    clock = [0.0]
    waits: list[float] = []
    counters = Restarts()
    started = 0

    def start() -> Query:
        nonlocal started
        started += 1
        return Query(clock, *outcomes.pop(0))

    def sleep(s: float) -> None:
        waits.append(s)
        clock[0] += s

    supervise(
        start,
        POLICY,
        counters=counters,
        sleep=sleep,
        clock=lambda: clock[0],
        failures=(RuntimeError,),
    )
    return waits, counters, started


def test_backoff_doubles_up_to_the_maximum():
    assert [backoff(POLICY, n) for n in (1, 2, 3, 4)] == [2, 4, 5, 5]


def test_transient_failures_are_restarted_with_backoff_then_the_query_ends():
    waits, counters, started = run(
        [(1, "org.apache.kafka.common.errors.TimeoutException: x"), (1, "io"), (5, None)]
    )
    assert waits == [2, 4]
    assert started == 3
    assert counters.total == 2 and counters.in_a_row == 0
    assert counters.by_kind == {"kafka": 1, "query": 1}


def test_too_many_failures_in_a_row_stop_the_job_with_advice():
    with pytest.raises(JobStopped, match=r"failed 4 times in a row.*checkpoint is intact"):
        run([(1, "io")] * 4)


def test_a_long_healthy_run_resets_the_count():
    # three quick failures (the limit), then a run longer than reset_after_s that fails
    # and two more quick ones: the long run started a new count, so the job goes on
    outcomes: list[tuple[float, str | None]] = [(1, "io")] * 3 + [(200, "io")] + [(1, "io")] * 2
    waits, counters, _ = run([*outcomes, (1, None)])
    assert waits == [2, 4, 5, 2, 4, 5]
    assert counters.total == 6


@pytest.mark.parametrize(
    ("message", "kind", "advice"),
    [
        (
            "[KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED] Some data may have been lost",
            "data_loss",
            "re-snapshot",
        ),
        ("coordinator.target.ConflictError: at column x", "conflict", "shardmerge locks"),
        (
            "streaming.source.topic_ids.RecreatedTopic: batch 3: 's1.db.t1': id A when last read",
            "recreated_topic",
            "new checkpoint",
        ),
        (
            "streaming.storage.epochs.Superseded: Superseded: another run of this job claimed ...",
            "superseded",
            "another run of this job started on the same checkpoint",
        ),
    ],
)
def test_permanent_errors_stop_at_once_with_what_to_do(message: str, kind: str, advice: str):
    assert classify(RuntimeError(message), at_start=False)[0] == kind
    counters = Restarts()
    with pytest.raises(JobStopped, match=advice):
        supervise(
            lambda: Query([0.0], 1, message),  # type: ignore[arg-type,return-value]
            POLICY,
            counters=counters,
            sleep=lambda s: None,
            failures=(RuntimeError,),
        )
    assert counters.total == 0 and counters.stopped == kind


def test_the_gist_of_an_error_leaves_out_stack_traces_and_plans():
    from streaming.runtime.supervise import _first_line

    python = (
        "[STREAM_FAILED] Query terminated with exception: Return Message: Traceback (most "
        'recent call last):\n  File "b.py", line 1\n    f()\n'
        'coordinator.target.ConflictError: at column "p"\n\nJVM stacktrace:\norg.X\n\tat y'
    )
    assert _first_line(RuntimeError(python)).endswith(
        '... coordinator.target.ConflictError: at column "p"'
    )
    plan = "[STREAM_FAILED] Some data may have been lost\n+- ~Project [key#8]\n\tat x"
    assert _first_line(RuntimeError(plan)) == "[STREAM_FAILED] Some data may have been lost"
