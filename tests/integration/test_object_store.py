"""The job's storage on a real S3 API (moto's server on loopback, through Hadoop's S3A):
the state store's checks on an object store, and the stash's compaction there. The whole
job with checkpoint and lake in a bucket runs in tests/integration/test_cluster.py."""

from __future__ import annotations

import multiprocessing
import time
import uuid
from collections.abc import Callable

import pytest
from delta.tables import DeltaTable

from coordinator.commands import parse_command
from shardmerge.cli import main
from streaming.fs.arrow import ArrowFs
from streaming.job import maintain_stash
from streaming.storage.group_store import group_store, probe
from streaming.storage.state_store import StateStore, command_of
from tests.integration.test_state_store import CHECKS
from tests.unit.test_group_store import race_threads
from tests.unit.test_light_cli import CONFIG

pytestmark = [pytest.mark.spark]
# Fresh interpreters, not forks of a test process that runs a JVM.
SPAWN = multiprocessing.get_context("spawn")


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_state_store_on_s3(spark, bucket: str, check: Callable[[StateStore], None]) -> None:
    check(StateStore(spark, f"{bucket}/checkpoints/job"))


def test_the_stash_is_compacted_and_vacuumed(spark, bucket: str):
    path = f"{bucket}/checkpoint/shardmerge/stash"
    maintain_stash(spark, path)  # no stash yet: nothing to do, no table made
    assert not DeltaTable.isDeltaTable(spark, path)
    for first in (0, 10, 20):
        spark.range(first, first + 10).coalesce(1).write.format("delta").mode("append").save(path)
    assert _detail(spark, path)["numFiles"] == 3
    maintain_stash(spark, path)
    detail = _detail(spark, path)
    assert detail["numFiles"] == 1 and detail["properties"]["delta.logRetentionDuration"]
    assert sorted(r.id for r in spark.read.format("delta").load(path).collect()) == list(range(30))
    operations = [h["operation"] for h in DeltaTable.forPath(spark, path).history().collect()]
    assert "OPTIMIZE" in operations, operations


def _detail(spark, path: str):
    return DeltaTable.forPath(spark, path).detail().collect()[0]


@pytest.fixture
def spark_defaults(s3, tmp_path, monkeypatch) -> str:
    """A spark-defaults.conf holding the store's S3A settings (as on a machine set up for
    spark-submit), and a new bucket: what the operator CLI reads without a JVM."""
    conf = tmp_path / "spark-conf"
    conf.mkdir()
    lines = [f"spark.hadoop.{k} {v}" for k, v in s3.hadoop_conf().items()]
    (conf / "spark-defaults.conf").write_text("# from devkit\n" + "\n".join(lines) + "\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    return s3.create_bucket(f"it-{uuid.uuid4().hex[:12]}")


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_state_store_on_s3_without_a_jvm(spark_defaults: str, check) -> None:
    """The same checks through pyarrow's S3 filesystem (the operator CLI's path)."""
    store = StateStore(None, f"{spark_defaults}/checkpoints/job")
    assert isinstance(store.fs, ArrowFs)
    check(store)


def no_session(*args: object, **kwargs: object) -> None:
    raise AssertionError("the light CLI asked for a Spark session")


def test_a_command_the_cli_queues_on_s3_is_what_the_job_reads(
    spark, spark_defaults: str, s3, tmp_path, monkeypatch, capsys
):
    """The light CLI and the job's Hadoop S3A see the same records: a state the job saved
    is listed by `locks`, a command `unlock` queues is in the job's inbox."""
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    for key, value in s3.hadoop_conf().items():
        conf.set(key, value)
    checkpoint = f"{spark_defaults}/checkpoints/job"
    held = "s1.shop.orders_1"
    lock = {"target": "shop.orders", "mode": "pessimistic", "stage": "waiting",
            "blocked": [held], "pending_ddl": [], "conflict": None, "shards": 2, "columns": {}}  # fmt: skip
    StateStore(spark, checkpoint).save(3, {"batch": 3, "locks": [lock], "stats": {}})
    light = StateStore(None, checkpoint)
    assert light.latest() == StateStore(spark, checkpoint).latest()
    # `shardmerge locks` and `unlock` on the s3a:// checkpoint, never asking for a session
    monkeypatch.setattr("streaming.runtime.spark_session.session_for_job", no_session)
    config = tmp_path / "job.yaml"
    config.write_text(CONFIG.format(checkpoint=checkpoint))
    assert main(["locks", "--config", str(config)]) == 0
    assert held in capsys.readouterr().out
    assert main(["unlock", "--config", str(config), "shop.orders", "--shard", held,
                 "--action", "skip"]) == 0  # fmt: skip
    command = parse_command(f"unlock shop.orders --shard {held} --action skip")
    (queued,) = StateStore(spark, checkpoint).inbox()
    assert command_of(queued) == command
    assert light.cancel(queued["id"]) is None
    assert StateStore(spark, checkpoint).inbox() == []


THREADS, APPENDS = 4, 5


def _race(store, worker: str, outcomes: list) -> None:
    """``THREADS`` threads of one writer: each tries for one name, then appends."""
    race_threads(store, worker, THREADS, APPENDS, 10_000, outcomes)


def _race_in_a_process(root: str, conf: dict, worker: str, results) -> None:
    """A writer of its own: a process with its own Spark JVM and S3A client."""
    from streaming.runtime.spark_session import build_spark

    spark = build_spark(
        f"race-{worker}",
        master="local[1]",
        extra_conf={"spark.driver.memory": "512m", "spark.ui.enabled": "false",
                    **{f"spark.hadoop.{k}": v for k, v in conf.items()}},
    )  # fmt: skip
    outcomes: list[bool] = []
    _race(group_store(root, spark), worker, outcomes)
    results.put((worker, outcomes))
    spark.stop()


def test_group_store_on_s3_one_winner_per_name_and_a_dense_log(spark, bucket: str, s3) -> None:
    """Put-if-absent on S3 (a conditional PUT through S3A), raced by a process with its own
    JVM and this one, four threads each: one winner for a name, every log number taken
    once, no record overwritten; and the probe passes."""
    root = f"{bucket}/lake/_shardmerge/groups/g"
    store = group_store(root, spark)
    probe(store)
    results = SPAWN.Queue()
    other = SPAWN.Process(target=_race_in_a_process, args=(root, s3.hadoop_conf(), "p1", results))
    other.start()
    try:
        time.sleep(5)  # its JVM starting: both race while it appends
        mine: list[bool] = []
        _race(store, "p0", mine)
        _, theirs = results.get(timeout=240)
        other.join(60)
    finally:
        if other.is_alive():
            other.kill()
    outcomes = mine + theirs
    assert len(outcomes) == 2 * THREADS and outcomes.count(True) == 1, outcomes
    winner = store.read("owner/000000000001.json")
    assert winner is not None and winner["worker"] in ("p0", "p1")
    total = 2 * THREADS * APPENDS
    assert store.numbers("log") == list(range(total))  # dense: no gap, no number twice
    seen = [(r["writer"], r["i"]) for _, r in store.log()]
    assert len(set(seen)) == total  # nothing overwritten
    for writer in {w for w, _ in seen}:  # each writer's appends in its own order
        assert [i for w, i in seen if w == writer] == list(range(APPENDS))
