"""The project's Delta log store (``jars/logstore/``, ``io.shardmerge.delta.PutIfAbsentLogStore``)
in the suite's JVM: which storage shows a half-written file, overwrites that readers see
whole, and commits of several threads to one Delta log, none lost (docs/groups.md)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from py4j.protocol import Py4JJavaError

from streaming.runtime.spark_session import COMMIT_LOCK_KEY, LOGSTORE_CLASS

pytestmark = [pytest.mark.spark]

# Storage where a file under construction is seen under its name (Delta then writes its
# checkpoints through a rename), and S3, which shows an object only once it is uploaded.
SCHEMES = [
    ("file:/lake/t/_delta_log", True),
    ("/lake/t/_delta_log", True),  # no scheme: the default filesystem's, file:
    ("hdfs://namenode:8020/lake/t/_delta_log", True),
    ("viewfs://cluster/lake/t/_delta_log", True),
    ("abfss://lake@account.dfs.core.windows.net/t/_delta_log", True),
    ("gs://lake/t/_delta_log", True),
    ("s3a://lake/t/_delta_log", False),
    ("s3://lake/t/_delta_log", False),
    ("s3n://lake/t/_delta_log", False),
]


def _store(spark):
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    return spark._jvm.io.shardmerge.delta.PutIfAbsentLogStore(conf), conf


def _path(spark, path: str | Path):
    return spark._jvm.org.apache.hadoop.fs.Path(path.as_uri() if isinstance(path, Path) else path)


def _versions(log: Path) -> int:
    return sum(1 for p in log.iterdir() if p.name.endswith(".json") and p.name[0] != ".")


def _lines(spark, *lines: str):
    java_list = spark._jvm.java.util.ArrayList()
    for line in lines:
        java_list.add(line)
    return java_list.iterator()


@pytest.mark.parametrize(("path", "visible"), SCHEMES, ids=[p for p, _ in SCHEMES])
def test_partial_writes_are_visible_except_on_s3(spark, path: str, visible: bool):
    store, conf = _store(spark)
    assert store.isPartialWriteVisible(_path(spark, path), conf) is visible


def test_the_session_checkpoints_local_tables_through_a_rename(spark, tmp_path):
    """Delta asks the store it was configured with, for file: ours; the commit lock stays
    off (a put-if-absent commit needs none), as it was when the store answered false."""
    table = str(tmp_path / "t")
    spark.range(1).write.format("delta").save(table)
    log = spark._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, table)
    store = log.store()
    assert store.getDelegate(log.logPath()).logStoreImpl().getClass().getName() == LOGSTORE_CLASS
    assert store.isPartialWriteVisible(log.logPath(), log.newDeltaHadoopConf()) is True
    assert spark.conf.get(COMMIT_LOCK_KEY) == "false"


def test_an_overwrite_replaces_last_checkpoint_whole(spark, tmp_path):
    """_last_checkpoint is overwritten through a new file renamed over the old one: a reader
    that opened the old one reads it whole, and Hadoop's checksum file of a write through
    Hadoop (which the store's write replaces without) does not outlive it."""
    store, conf = _store(spark)
    log = tmp_path / "_delta_log"
    log.mkdir()
    last = log / "_last_checkpoint"
    fs = _path(spark, last).getFileSystem(conf)
    out = fs.create(_path(spark, last), True)  # as Delta's own store writes it
    out.writeBytes('{"version":5,"size":3}\n')
    out.close()
    assert (log / "._last_checkpoint.crc").exists()
    with open(last) as reader:
        store.write(_path(spark, last), _lines(spark, '{"version":10,"size":7}'), True, conf)
        assert reader.read() == '{"version":5,"size":3}\n'
    assert last.read_text() == '{"version":10,"size":7}\n'
    assert list(store.read(_path(spark, last), conf)) == ['{"version":10,"size":7}']
    assert sorted(p.name for p in log.iterdir()) == ["_last_checkpoint"]


def test_racing_commits_each_take_one_version(spark, tmp_path):
    """Four threads commit 32 times each to one Delta log through the store, each thread
    trying the version after the log's last, again after every loss (as Delta does): every
    version 0..127 is written once, by one commit, and every commit is in the log (no
    overwrite, no torn file, no leftovers)."""
    store, conf = _store(spark)
    log = tmp_path / "_delta_log"
    log.mkdir()
    threads, commits = 4, 32
    errors: list[BaseException] = []

    def commit(thread: int) -> None:
        version = 0
        try:
            for i in range(commits):
                while True:
                    name = log / f"{version:020d}.json"
                    line = f'{{"commitInfo":{{"thread":{thread},"i":{i},"pad":"{"x" * 512}"}}}}'
                    try:
                        store.write(_path(spark, name), _lines(spark, line), False, conf)
                        break
                    except Py4JJavaError as e:
                        lost = e.java_exception.getClass().getName()
                        assert lost == "java.nio.file.FileAlreadyExistsException", lost
                        version = max(version + 1, _versions(log))
        except BaseException as e:  # reported by the test's thread
            errors.append(e)

    pool = [threading.Thread(target=commit, args=(t,)) for t in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(120)
    assert not errors, errors
    names = sorted(p.name for p in log.iterdir())
    assert names == [f"{v:020d}.json" for v in range(threads * commits)]
    written = [json.loads((log / n).read_text())["commitInfo"] for n in names]
    assert sorted((c["thread"], c["i"]) for c in written) == [
        (t, i) for t in range(threads) for i in range(commits)
    ]


def test_threads_of_one_session_append_to_one_table(spark, tmp_path):
    """Four threads of one session append to one local table at once, with a checkpoint
    every 4 commits (written while others commit): none lost, the table reads whole."""
    table = str(tmp_path / "t")
    spark.sql(
        f"CREATE TABLE delta.`{table}` (thread INT, i INT) USING delta "
        "TBLPROPERTIES (delta.checkpointInterval = 4)"
    )
    threads, appends = 4, 3
    errors: list[BaseException] = []

    def append(thread: int) -> None:
        try:
            for i in range(appends):
                spark.sql(f"INSERT INTO delta.`{table}` VALUES ({thread}, {i})")
        except BaseException as e:  # reported by the test's thread
            errors.append(e)

    pool = [threading.Thread(target=append, args=(t,)) for t in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(300)
    assert not errors, errors
    rows = sorted((r.thread, r.i) for r in spark.read.format("delta").load(table).collect())
    assert rows == [(t, i) for t in range(threads) for i in range(appends)]
    log = tmp_path / "t" / "_delta_log"
    versions = threads * appends  # and version 0, the CREATE TABLE
    commits = sorted(p.name for p in log.iterdir() if p.name.endswith(".json"))
    assert commits == [f"{v:020d}.json" for v in range(versions + 1)]
    assert (log / f"{8:020d}.checkpoint.parquet").exists()
    assert not [p.name for p in log.iterdir() if p.name.endswith(".tmp")]
