"""The job on a real Spark standalone cluster, submitted with the README's own command.

A master and a worker (1 core) from the Spark pyspark ships; the executors run in their
own JVMs with only what the command ships (the wheel, the jars, the --confs). The job reads
the local Kafka broker and keeps lake and checkpoint on the S3 API (moto). Its driver is
killed with SIGKILL after some batches and submitted again with the same checkpoint; the
Delta table must then equal the oracle: nothing lost, nothing twice. Two micro-batches in
all (each costs half a minute or more on two JVMs and one core): the first committed, the
driver is killed, the second run reads the rest.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.errors import AnalysisException

from devkit import killtest, objectstore, spark_cluster
from streaming.runtime.session_conf import env_conf
from streaming.storage.state_store import StateStore

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
WHEEL = ROOT / "dist" / "shardmerge-0.1.0-py3-none-any.whl"


def readme_command() -> str:
    """The bash block after the README's ``cluster-command`` marker, verbatim."""
    text = (ROOT / "README.md").read_text()
    after = text.split("<!-- cluster-command", 1)[1]
    return after.split("```bash\n", 1)[1].split("```", 1)[0]


def submit(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", readme_command()],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the driver's group: killed whole, like a lost node
        )


def wait(condition, proc: subprocess.Popen[bytes], log: Path, what: str, timeout=2400) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"the driver exited ({proc.returncode}) before {what}:\n"
                                 + "\n".join(log.read_text().splitlines()[-40:]))  # fmt: skip
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout}s; see {log}")
        time.sleep(2)


def stop(proc: subprocess.Popen[bytes], sig: int) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
    proc.wait(60)


@pytest.mark.timeout(3600)  # two JVM apps on one core: minutes per batch on a busy machine
def test_the_readme_command_on_a_standalone_cluster(kafka, s3, bucket, spark, tmp_path: Path):
    source = "cl" + os.urandom(3).hex()
    oracle = killtest.produce(kafka.bootstrap, source, shards=2, rows=40)
    config, lake, checkpoint = tmp_path / "job.yaml", f"{bucket}/lake", f"{bucket}/checkpoint"
    killtest.write_config(config, kafka.bootstrap, source, lake, checkpoint, max_offsets=50)
    store = StateStore(spark, checkpoint)
    log = tmp_path / "driver.log"

    def batches() -> int:
        latest = store.latest()
        return -1 if latest is None else latest[0]

    def complete() -> bool:
        if not DeltaTable.isDeltaTable(spark, f"{lake}/shop/orders"):
            return False
        try:
            return killtest.compare(spark, lake, oracle).ok  # converged: all there, once
        except AnalysisException as e:
            # The job renamed or retyped a column while this poll read the table: not
            # converged yet (any other error fails the test).
            if "DELTA_SCHEMA_CHANGE_SINCE_ANALYSIS" not in str(e):
                raise
            return False

    # The README's command as given, plus the suite's small-batch settings the way a
    # submitter adds settings: a spark-defaults.conf (streaming.runtime.session_conf).
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    # The executor's collector as the local driver's (streaming.runtime.spark_session).
    defaults = {**env_conf(), "spark.executor.extraJavaOptions": "-XX:+UseParallelGC"}
    (conf_dir / "spark-defaults.conf").write_text(
        "".join(f"{k} {v}\n" for k, v in defaults.items())
    )
    with spark_cluster.running("pytest", tmp_path / "cluster", memory="1g") as cluster:
        env = dict(
            os.environ,
            PATH=f"{spark_cluster.spark_home() / 'bin'}:{os.environ['PATH']}",
            SPARK_HOME=str(spark_cluster.spark_home()),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_MASTER=cluster.master_url,
            S3_ENDPOINT=s3.endpoint,
            S3_REGION=objectstore.REGION,
            S3_ACCESS_KEY=objectstore.ACCESS_KEY,
            S3_SECRET_KEY=objectstore.SECRET_KEY,
            JOB_CONFIG=str(config),
            SPARK_CONF_DIR=str(conf_dir),
        )
        driver = submit(env, log)
        try:
            wait(lambda: batches() >= 0, driver, log, "a committed batch")
            stop(driver, signal.SIGKILL)  # the driver dies mid-stream
            killed_at = batches()
            driver = submit(env, log)  # the same command, the same checkpoint
            # Complete and its state saved: the rows are in the table before the batch
            # that wrote them has saved its state (and a SIGTERM may come in between).
            wait(lambda: batches() > killed_at and complete(), driver, log, "the whole backlog")
        finally:
            stop(driver, signal.SIGTERM)
        apps = sorted((cluster.state_dir / "work").glob("app-*/*/stderr"))
    report = killtest.compare(spark, lake, oracle)
    assert report.missing == [] and report.unexpected == [] and report.duplicated_keys == 0
    assert report.rows == report.expected == len(oracle)
    assert batches() > killed_at >= 0
    text = log.read_text()
    assert f"shardmerge job from {WHEEL}" in text  # the driver ran the wheel's code
    assert len(apps) >= 2, apps  # each run had an executor JVM of its own on the worker
