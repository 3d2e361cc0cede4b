"""The fault suite's CI subset (``scripts/fault-suite`` runs it all, at full size).

Each case runs the job (its restart policy, faults and log lines as ``shardmerge run``
has them) against a broker of its own (the cases stop and restart it), while something
fails, and compares the Delta table with the oracle: nothing lost, nothing duplicated,
nothing invented, every bad record a dead letter, and a permanent failure stops the job
with a message instead of skipping data. The job runs on a thread in the suite's Spark
session (``devkit.killtest.InProcessJob``): a cold JVM per run cost about a minute of
the suite each; the kill -9 test (``test_exactly_once``) and ``scripts/fault-suite`` run
the job as processes of their own. Small workloads: the machine is small and shared.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.errors import StreamingQueryException

from devkit.faultsuite import (
    Broker,
    CaseReport,
    Size,
    case_broker,
    case_malformed,
    case_resend_then_data_loss,
    case_storage,
)
from streaming.job import build_query
from streaming.runtime.supervise import classify
from tests.integration.test_ordering import BASE, Pipeline, ddl, row

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

SIZE = Size(
    shards=2, rows=100, max_offsets=120, outage_s=30, storage_s=5, malformed=320, in_process=True
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    b = Broker(tmp_path_factory.mktemp("faults-kafka"))
    yield b
    b.stop()


def exact(r: CaseReport) -> None:
    print(r.line())
    assert r.lost == 0, r.line()
    assert r.duplicated == 0, r.line()
    assert r.invented == 0, r.line()
    assert r.found == r.expected > 0, r.line()
    assert r.ok, r.line()


def test_broker_stopped_for_30s_mid_run_then_a_batch_run_again(broker, spark, tmp_path: Path):
    # After the outage run, its last batch once more after Spark's commit of it is removed
    # (the kills at every point are test_exactly_once's and the full suite's).
    r = case_broker(broker, spark, tmp_path, SIZE, run_again=True)
    exact(r)
    assert "run again: True" in r.state, r.line()


def test_stash_gone_for_seconds_during_a_release(broker, spark, tmp_path: Path):
    r = case_storage(broker, spark, tmp_path, SIZE, release=True)
    exact(r)
    assert r.restarts >= 1


def test_every_kind_of_malformed_record_is_a_dead_letter(broker, spark, tmp_path: Path):
    r = case_malformed(broker, spark, tmp_path, SIZE)
    exact(r)
    assert r.dead_found == r.dead_expected == SIZE.malformed


def test_resent_events_are_not_duplicated_then_recreated_topics_stop_the_job(
    broker, spark, tmp_path: Path
):
    # One workload and checkpoint for both cases (the loss case's first run is the resend
    # case's last): a job run fewer than the two apart.
    resent, lost = case_resend_then_data_loss(broker, spark, tmp_path, SIZE)
    exact(resent)
    # the second half of the schema-change topic holds each shard's rename and MODIFY
    assert f"; {2 * SIZE.shards} DDL events recognised as sent again" in resent.state, resent.line()
    print(lost.line())
    assert lost.exit_codes == [lost.exit_codes[0]] and lost.exit_codes[0] != 0, lost.line()
    assert "Kafka no longer has records" in lost.state, lost.line()
    assert lost.lost == lost.duplicated == lost.invented == 0, lost.line()
    assert lost.ok, lost.line()


def test_a_topic_recreated_with_more_records_than_were_read_stops_the_job(
    kafka, spark, tmp_path: Path
):
    """Spark's source would read the new topic on from the old topic's offset (it only
    notices offsets that go backwards): the new topic's first records would be skipped.
    The job compares Kafka's topic ids with those it saved and stops with advice."""
    p = Pipeline(kafka, spark, tmp_path, "optimistic")
    create = ddl(p, "t1", BASE.format(t="t1"), BASE)
    first = [r for i in range(3) for r in row(p, "t1", {"id": i, "a": i}, BASE)]
    p.send([create, *first])
    p.run()
    assert [r["id"] for r in p.rows()] == [0, 1, 2]
    topic = first[0].topic
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 60
    while True:  # the deletion completes in the background
        try:
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
            break
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    p.send([r for i in range(10, 16) for r in row(p, "t1", {"id": i, "a": i}, BASE)])
    query, _ = build_query(spark, p.settings, available_now=True)
    with pytest.raises(StreamingQueryException) as stopped:
        query.awaitTermination()
    message = str(stopped.value)
    assert "RecreatedTopic" in message and repr(topic) in message, message[:2000]
    kind, advice = classify(stopped.value, at_start=False)
    assert kind == "recreated_topic" and advice is not None
    assert [r["id"] for r in p.rows()] == [0, 1, 2]  # nothing of the new topic written


def test_a_continuous_job_reads_again_when_the_broker_comes_back(broker, spark, tmp_path: Path):
    """A processing-time trigger (not available-now): the broker stops while the job reads
    (after its first batch), comes back 20 s later on the same address, and the rest of the
    workload arrives; every row is in the table within a minute (devkit/outage.py, which
    `scripts/broker-outage` runs at any size)."""
    from devkit.outage import outage

    result = outage(
        shards=2, rows=120, away=20, deadline=60, max_offsets=120, stop_after=1,
        spark=spark, base=tmp_path, broker=broker,
    )  # fmt: skip
    assert result["job_failed"] is None, result
    assert result["second_half_s"] is not None, result  # equal to the oracle within 60 s
    assert result["batch_after"] > result["batch_before"], result
