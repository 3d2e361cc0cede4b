"""The fault suite: the job against its dependencies failing and against bad input.

Each case produces a sharded Debezium workload with DDL rolled out shard by shard (the
kill test's, :mod:`devkit.killtest`), runs the job as a separate process
(``shardmerge run --available-now``) while something goes wrong, and compares the Delta
table with the oracle (the union of the shards' final rows). A case reports rows expected
and found, lost, duplicated and invented, the dead letters expected and found, how often
the query restarted and how the job ended. ``scripts/fault-suite`` runs every case at full
size; ``tests/integration/test_faults.py`` runs a small subset in CI.

Cases (:data:`CASES`): ``broker`` (the broker stopped for a while mid-run), ``broker_ddl``
(the same while a DDL rollout holds shards), ``kill`` (SIGKILL at every protocol point,
then one batch run again after its ``commits/N`` file is removed), ``storage_target`` and
``storage_release`` (a table folder replaced by a file for seconds, the second during a
release of held rows), ``malformed`` (every kind of bad record, :mod:`devkit.badrecords`),
``resend`` (a connector restart re-sends the last part of what it sent) and ``data_loss``
(topics recreated: Kafka offsets go back; the job must stop and say so).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from devkit import kafka_local
from devkit.killtest import InProcessJob, canon, produce, write_config

ROOT = Path(__file__).resolve().parents[1]
TARGET = ("shop", "orders")
JOB_TIMEOUT = 2400  # one run of the job at most, in seconds (a loaded 2-core machine is slow)
# Quick restarts: the suite's faults last seconds; the defaults are for production.
JOB_ENV = {
    "SHARDMERGE__RESTART__INITIAL_BACKOFF_S": "1",
    "SHARDMERGE__RESTART__MAX_BACKOFF_S": "8",
    "SHARDMERGE__RESTART__ATTEMPTS": "8",
    # Any free port for the ops server: cases (and other jobs) may run side by side.
    "SHARDMERGE__OPS__PORT": "0",
}


@dataclass
class CaseReport:
    case: str
    expected: int = 0
    found: int = 0
    lost: int = 0
    duplicated: int = 0
    invented: int = 0
    dead_expected: int = 0
    dead_found: int = 0
    restarts: int = 0
    exit_codes: list[int] = field(default_factory=list)
    state: str = ""
    notes: list[str] = field(default_factory=list)
    ok: bool = False

    def line(self) -> str:
        return (
            f"{self.case:16} {'OK' if self.ok else 'FAILED':6} rows {self.found}/{self.expected} "
            f"lost {self.lost} dup {self.duplicated} invented {self.invented} "
            f"dead {self.dead_found}/{self.dead_expected} restarts {self.restarts} "
            f"exits {self.exit_codes} | {self.state}" + "".join(f"\n{'':23}{n}" for n in self.notes)
        )


class Broker:
    """The suite's own broker (stopped and started by the cases, so never a shared one)."""

    def __init__(self, base: Path, name: str = "faults") -> None:
        self.base, self.name = base, name
        self.broker = kafka_local.start(name, base, die_with_parent=True)

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def stop(self) -> None:
        self.broker.stop()

    def start(self) -> None:
        self.broker = kafka_local.start(self.name, self.base, die_with_parent=True)


class Workdir:
    """One case's job: its config, checkpoint, lake and log."""

    def __init__(
        self,
        path: Path,
        bootstrap: str,
        source: str,
        max_offsets: int,
        mode: str = "optimistic",
        *,
        read_ahead: bool = False,
        spark: Any = None,
        ddl_grace_ms: int | None = None,
    ) -> None:
        shutil.rmtree(path, ignore_errors=True)
        self.spark = spark  # the session to run the job in, else a process of its own
        path.mkdir(parents=True)
        self.path, self.source = path, source
        self.config, self.log = path / "job.yaml", path / "job.log"
        lake, checkpoint = str(path / "lake"), str(path / "checkpoint")
        write_config(
            self.config, bootstrap, source, lake, checkpoint, max_offsets, mode, read_ahead,
            ddl_grace_ms,
        )  # fmt: skip
        self.checkpoint = path / "checkpoint"
        self.table = path / "lake" / TARGET[0] / TARGET[1]
        self.stash = self.checkpoint / "shardmerge" / "stash"
        self.dead = self.checkpoint / "dead_letter"

    def start(self, env: dict[str, str] | None = None) -> subprocess.Popen[bytes] | InProcessJob:
        if self.spark is not None:
            return InProcessJob(self.config, self.log, {**JOB_ENV, **(env or {})}, self.spark)
        full = {**os.environ, **JOB_ENV, **(env or {})}
        with open(self.log, "ab") as out:
            return subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "shardmerge.cli",
                    "run",
                    "--config",
                    str(self.config),
                    "--available-now",
                ],
                cwd=ROOT,
                env=full,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def run(self, env: dict[str, str] | None = None) -> int:
        proc = self.start(env)
        try:
            return proc.wait(JOB_TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def commits(self) -> list[int]:
        folder = self.checkpoint / "spark" / "commits"
        return sorted(int(p.name) for p in folder.glob("[0-9]*")) if folder.is_dir() else []

    def restarts(self) -> int:
        return self.log.read_text(errors="replace").count("query failed (")

    def stopped_with(self) -> str:
        """The job's own last word, when it stopped for good (``shardmerge: ...``)."""
        lines = [ln for ln in self.log.read_text(errors="replace").splitlines()]
        said = [ln for ln in lines if ln.startswith("shardmerge: ")]
        return said[-1][:400] if said else ""

    def held_shards(self, spark: Any) -> int:
        from streaming.storage.state_store import StateStore

        latest = StateStore(spark, str(self.checkpoint)).latest()
        return 0 if latest is None else sum(len(lk["blocked"]) for lk in latest[1]["locks"])


def wait_until(
    what: str, check: Callable[[], bool], proc: subprocess.Popen[bytes] | InProcessJob
) -> None:
    deadline = time.monotonic() + JOB_TIMEOUT
    while not check():
        if proc.poll() is not None:
            raise RuntimeError(f"the job ended (exit {proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {what} within {JOB_TIMEOUT}s")
        time.sleep(0.5)


def compare(spark: Any, work: Workdir, oracle: dict[Any, dict[str, Any]], r: CaseReport) -> None:
    """Rows found against the oracle: lost (a key missing or a row differing from the
    final one), duplicated (a key twice), invented (a key the oracle lacks)."""
    df = spark.read.format("delta").load(str(work.table))
    got = [row.asDict() for row in df.collect()]
    r.expected, r.found = len(oracle), len(got)
    by_key: dict[Any, list[dict[str, Any]]] = {}
    for row in got:
        by_key.setdefault(row["id"], []).append(row)
    r.duplicated = sum(len(v) - 1 for v in by_key.values())
    r.invented = sum(1 for k in by_key if k not in oracle)
    columns = [f.name for f in df.schema.fields]

    def same(want: dict[str, Any], have: dict[str, Any]) -> bool:
        lowered = {k.lower(): v for k, v in want.items()}
        return all(canon(have[c]) == canon(lowered.get(c.lower())) for c in columns)

    lost = [k for k, want in oracle.items() if not any(same(want, h) for h in by_key.get(k, []))]
    r.lost = len(lost)
    if lost:
        r.notes.append(f"lost keys (first 5): {sorted(lost, key=str)[:5]}")


def dead_letters(spark: Any, work: Workdir) -> list[dict[str, Any]]:
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, str(work.dead)):
        return []
    df = spark.read.format("delta").load(str(work.dead))
    return [r.asDict() for r in df.select("topic", "partition", "offset", "reason").collect()]


def finish(
    spark: Any, work: Workdir, oracle: dict[Any, Any], r: CaseReport, *, dead: int = 0
) -> CaseReport:
    compare(spark, work, oracle, r)
    r.dead_expected, r.dead_found = dead, len(dead_letters(spark, work))
    r.restarts = work.restarts()
    r.state = r.state or ("finished" if r.exit_codes[-1:] == [0] else work.stopped_with())
    r.ok = (
        r.exit_codes[-1:] == [0]
        and r.lost == r.duplicated == r.invented == 0
        and r.found == r.expected
        and r.dead_found == r.dead_expected
        and not r.notes
    )
    return r


# --- the cases -------------------------------------------------------------------------------


@dataclass
class Size:
    shards: int = 4
    rows: int = 400
    max_offsets: int = 150
    outage_s: float = 30
    storage_s: float = 6
    malformed: int = 10_000
    # The job on a thread of the caller's Spark session (InProcessJob), else a process per
    # run; the kill case always runs processes.
    in_process: bool = False

    def session(self, spark: Any) -> Any:
        return spark if self.in_process else None


def case_broker(
    broker: Broker,
    spark: Any,
    base: Path,
    size: Size,
    *,
    mid_ddl: bool = False,
    run_again: bool = False,
) -> CaseReport:
    """Stop the broker mid-run (or while shards are held mid-DDL) for ``outage_s``; with
    ``run_again``, then the last batch once more after its commit file is removed (what
    ``case_kill`` ends with, without the kill runs)."""
    name = "broker_ddl" if mid_ddl else "broker"
    r = CaseReport(name)
    source = f"fb{int(mid_ddl)}"
    oracle = produce(broker.bootstrap, source, size.shards, size.rows)
    work = Workdir(
        base / name, broker.bootstrap, source, size.max_offsets, spark=size.session(spark)
    )
    proc = work.start()
    try:
        if mid_ddl:
            wait_until("shards held by a DDL", lambda: work.held_shards(spark) > 0, proc)
        else:
            wait_until("a committed batch", lambda: len(work.commits()) >= 1, proc)
        at = len(work.commits())
        address = broker.bootstrap
        broker.stop()
        time.sleep(size.outage_s)
        broker.start()
        if broker.bootstrap != address:
            r.notes.append(f"the broker came back at {broker.bootstrap}, not {address}")
        r.exit_codes.append(proc.wait(JOB_TIMEOUT))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    r.state = f"broker down {size.outage_s:.0f}s after {at} batches; " + (
        "finished" if r.exit_codes[-1] == 0 else work.stopped_with()
    )
    if run_again and r.exit_codes[-1] == 0:
        r.state += "; " + run_last_again(work, r)
    return finish(spark, work, oracle, r)


def case_kill(broker: Broker, spark: Any, base: Path, size: Size, points: list[str]) -> CaseReport:
    """SIGKILL at each point in turn (a run each), a clean run, then the last batch again
    after its ``commits/N`` file is removed."""
    r = CaseReport("kill")
    oracle = produce(broker.bootstrap, "fk", size.shards, size.rows)
    work = Workdir(base / "kill", broker.bootstrap, "fk", size.max_offsets)
    for point in points:
        r.exit_codes.append(work.run({"SHARDMERGE_CRASH_AT": point}))
    r.exit_codes.append(work.run())
    killed = sum(1 for c in r.exit_codes if c == -9)
    r.state = f"{killed} of {len(points)} runs killed; " + run_last_again(work, r)
    return finish(spark, work, oracle, r)


def run_last_again(work: Workdir, r: CaseReport) -> str:
    """Remove the last batch's ``commits/N`` file (and its checksum, as a lost write would
    leave neither) and run the job again: the batch must be committed again, and write
    nothing twice."""
    last = work.commits()[-1]
    commits = work.checkpoint / "spark" / "commits"
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    r.exit_codes.append(work.run())
    again = work.commits()[-1] == last
    if not again:
        r.notes.append(f"batch {last} was not committed again after its commit was removed")
    return f"batch {last} run again: {again}"


def case_storage(
    broker: Broker, spark: Any, base: Path, size: Size, *, release: bool
) -> CaseReport:
    """The target table (after the 3rd target write) or the stash (during a release, after
    its rows were merged and before they leave the stash) is a file until the query has
    failed on it, then for ``storage_s``: the batch fails until it comes back. The release
    case runs pessimistic, so shards that ran a DDL are held in the stash until the last
    shard's DDL arrives in a later batch."""
    name = "storage_release" if release else "storage_target"
    r = CaseReport(name)
    source = f"fs{int(release)}"
    mode = "pessimistic" if release else "optimistic"
    work = Workdir(
        base / name, broker.bootstrap, source, size.max_offsets, mode, spark=size.session(spark)
    )
    pause = None
    if release:
        # Whether a rollout spans micro-batches depends on how the rate limit splits the
        # topics; to be sure the stash is used, the job first runs up to the second
        # shard's ALTER (the first shard held, its rows in the stash), then the rest is
        # produced and the fault run releases them.
        def pause() -> None:
            r.exit_codes.append(work.run())

    oracle = produce(broker.bootstrap, source, size.shards, size.rows, pause=pause)
    path, point = (work.stash, "before_stash_delete:1") if release else (work.table, "after_rows:3")
    fault = f"{point}:{size.storage_s:g}:{path}"
    r.exit_codes.append(work.run({"SHARDMERGE_STORAGE_FAULT": fault}))
    text = work.log.read_text(errors="replace")
    if "storage fault:" not in text:
        r.notes.append(f"the fault never fired ({point} not reached)")
    if not path.is_dir() or Path(f"{path}.away").exists():
        r.notes.append(f"{path} was not restored")
    r.state = f"{path.name} a file from {point} until the query failed, then {size.storage_s:g}s"
    out = finish(spark, work, oracle, r)
    if out.restarts == 0:
        out.ok = False
        out.notes.append("the query never failed: the fault went unnoticed")
    return out


def case_malformed(broker: Broker, spark: Any, base: Path, size: Size) -> CaseReport:
    """The valid workload plus ``malformed`` bad records of every kind: every one a dead
    letter with its reason, the valid rows exact."""
    from devkit.badrecords import send_bad_records

    r = CaseReport("malformed")
    oracle = produce(broker.bootstrap, "fm", size.shards, size.rows)
    sent = send_bad_records(broker.bootstrap, "fm", size.shards, size.malformed)
    work = Workdir(
        base / "malformed",
        broker.bootstrap,
        "fm",
        max(size.max_offsets, 2000),
        read_ahead=True,
        spark=size.session(spark),
        # Every record was sent before the job starts: no DDL can be in flight, so the
        # grace for one is 0 (with the default 1 s, a first batch decoded in under a
        # second leaves the rows that need a DDL waiting, and nothing else runs after it).
        ddl_grace_ms=0,
    )
    r.exit_codes.append(work.run())
    # A record that claims a DDL nobody ran must not leave its shard waiting for it.
    from streaming.storage.state_store import StateStore

    latest = StateStore(spark, str(work.checkpoint)).latest()
    for lock in latest[1]["locks"] if latest else []:
        if lock["stage"] != "none":
            r.notes.append(f"lock {lock['target']} left {lock['stage']}: {lock['blocked']}")
    dead = {
        (d["topic"], d["partition"], d["offset"]): d["reason"] for d in dead_letters(spark, work)
    }
    by_kind: dict[str, list[int]] = {}
    for where, kind in sent.items():
        counts = by_kind.setdefault(kind, [0, 0])
        counts[0] += 1
        counts[1] += where in dead and bool(dead[where])
    for kind, (n, got) in sorted(by_kind.items()):
        if got != n:
            sample = next((w for w, k in sent.items() if k == kind and w not in dead), None)
            r.notes.append(f"{kind}: {got} of {n} dead-lettered (e.g. offset {sample})")
    r.state = "finished; reasons e.g. " + "; ".join(sorted({v for v in dead.values()})[:3])
    return finish(spark, work, oracle, r, dead=len(sent))


def case_resend(broker: Broker, spark: Any, base: Path, size: Size) -> CaseReport:
    """A connector restart: after the job has read everything, the last half of every
    topic is sent again, byte for byte (DDL included); the job reads it again."""
    return _resend(broker, spark, base, size)[0]


def _resend(
    broker: Broker, spark: Any, base: Path, size: Size, source: str = "fr"
) -> tuple[CaseReport, Workdir, dict[Any, dict[str, Any]]]:
    r = CaseReport("resend")
    oracle = produce(broker.bootstrap, source, size.shards, size.rows)
    work = Workdir(
        base / "resend", broker.bootstrap, source, size.max_offsets, spark=size.session(spark)
    )
    r.exit_codes.append(work.run())
    again = resend_tail(broker.bootstrap, source, 0.5)
    r.exit_codes.append(work.run())
    resent = work.log.read_text(errors="replace").count(": not run twice: ")
    r.state = (
        f"{again} records sent again after a full run; {resent} DDL events recognised as sent again"
    )
    return finish(spark, work, oracle, r), work, oracle


def case_resend_then_data_loss(
    broker: Broker, spark: Any, base: Path, size: Size
) -> tuple[CaseReport, CaseReport]:
    """``resend``, then ``data_loss`` on the same topics and checkpoint (its first run is
    the resend case's): one workload and one job run fewer than the two cases apart."""
    resent, work, oracle = _resend(broker, spark, base, size, source="frl")
    return resent, _data_loss(broker, spark, size, work, oracle, CaseReport("data_loss"))


def case_data_loss(broker: Broker, spark: Any, base: Path, size: Size) -> CaseReport:
    """The topics are deleted and recreated with fewer records than the job has read: the
    job must stop with a message, and write nothing of the new topics."""
    r = CaseReport("data_loss")
    oracle = produce(broker.bootstrap, "fl", size.shards, size.rows)
    work = Workdir(
        base / "data_loss", broker.bootstrap, "fl", size.max_offsets, spark=size.session(spark)
    )
    r.exit_codes.append(work.run())
    if r.exit_codes[0] != 0:
        r.state = f"the first run failed: {work.stopped_with() or 'see ' + str(work.log)}"
        return r
    return _data_loss(broker, spark, size, work, oracle, r)


def _data_loss(
    broker: Broker,
    spark: Any,
    size: Size,
    work: Workdir,
    oracle: dict[Any, dict[str, Any]],
    r: CaseReport,
) -> CaseReport:
    """After a run that read everything of ``work.source``: its topics recreated with
    fewer records, the job run again."""
    source = work.source
    before = spark.read.format("delta").load(str(work.table)).count()
    topics = [
        t
        for t in AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30).topics
        if t == source or t.startswith(f"{source}.")
    ]
    recreate(broker.bootstrap, topics)
    produce(broker.bootstrap, source, size.shards, max(size.rows // 10, 5))
    logged = len(work.log.read_text(errors="replace"))
    r.exit_codes.append(work.run())
    after = spark.read.format("delta").load(str(work.table)).count()
    said = work.stopped_with()
    r.state = said or "(no message)"
    compare(spark, work, oracle, r)
    r.restarts = work.log.read_text(errors="replace")[logged:].count("query failed (")
    r.ok = (
        r.exit_codes[-1] != 0
        and "Kafka no longer has records" in said
        and before == after
        and r.lost == r.duplicated == r.invented == 0
    )
    if before != after:
        r.notes.append(f"the table changed after the loss: {before} -> {after} rows")
    return r


# --- Kafka helpers -------------------------------------------------------------------------


def resend_tail(bootstrap: str, source: str, fraction: float) -> int:
    """Send the last ``fraction`` of every topic of ``source`` again, in order."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        t for t in admin.list_topics(timeout=30).topics if t == source or t.startswith(f"{source}.")
    ]
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"resend-{time.time_ns()}",
            "enable.auto.commit": False,
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap})
    sent = 0
    for topic in sorted(topics):
        for p in admin.list_topics(topic, timeout=30).topics[topic].partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            start = high - int((high - low) * fraction)
            consumer.assign([TopicPartition(topic, p, start)])
            while start < high:
                msg = consumer.poll(10)
                if msg is None:
                    raise RuntimeError(f"{topic}[{p}]: no record at offset {start}")
                if msg.error():
                    raise RuntimeError(f"{topic}[{p}]: {msg.error()}")
                producer.produce(topic, msg.value(), msg.key(), partition=p, headers=msg.headers())
                sent += 1
                start = msg.offset() + 1
    producer.flush(60)
    consumer.close()
    return sent


def recreate(bootstrap: str, topics: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.delete_topics(topics).values():
        f.result(timeout=60)
    deadline = time.monotonic() + 60
    while set(topics) & set(admin.list_topics(timeout=30).topics):
        if time.monotonic() > deadline:
            raise RuntimeError(f"topics {topics} not deleted within 60s")
        time.sleep(0.5)
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
        f.result(timeout=60)


# --- the script --------------------------------------------------------------------------------

CASES = (
    "broker",
    "broker_ddl",
    "kill",
    "storage_target",
    "storage_release",
    "malformed",
    "resend",
    "data_loss",
)


def run_case(
    name: str, broker: Broker, spark: Any, base: Path, size: Size, points: list[str]
) -> CaseReport:
    if name in ("broker", "broker_ddl"):
        return case_broker(broker, spark, base, size, mid_ddl=name == "broker_ddl")
    if name == "kill":
        return case_kill(broker, spark, base, size, points)
    if name.startswith("storage"):
        return case_storage(broker, spark, base, size, release=name == "storage_release")
    return {"malformed": case_malformed, "resend": case_resend, "data_loss": case_data_loss}[name](
        broker, spark, base, size
    )


def main() -> int:
    from streaming.faults import POINTS
    from streaming.runtime.spark_session import build_spark

    parser = argparse.ArgumentParser(
        description="the fault suite: faults and bad input vs the oracle"
    )
    parser.add_argument("cases", nargs="*", help=f"of {', '.join(CASES)} (default: all)")
    parser.add_argument("--workdir", default=str(ROOT / ".state" / "faultsuite"))
    parser.add_argument("--json", help="also write the reports to this file")
    parser.add_argument("--shards", type=int, default=Size.shards)
    parser.add_argument("--rows", type=int, default=Size.rows, help="row changes per shard")
    parser.add_argument("--malformed", type=int, default=Size.malformed)
    parser.add_argument("--outage", type=float, default=Size.outage_s, help="broker down, s")
    args = parser.parse_args()
    unknown = set(args.cases) - set(CASES)
    if unknown:
        parser.error(f"unknown case(s) {sorted(unknown)}; cases: {', '.join(CASES)}")
    base = Path(args.workdir)
    shutil.rmtree(base, ignore_errors=True)
    size = Size(args.shards, args.rows, outage_s=args.outage, malformed=args.malformed)
    points = [f"{p}:{n}" for n in (1, 2) for p in POINTS]
    broker = Broker(base / "kafka")
    spark = build_spark("shardmerge-faultsuite")
    reports = []
    try:
        for name in args.cases or CASES:
            started = time.monotonic()
            try:
                report = run_case(name, broker, spark, base, size, points)
            except Exception as e:  # the case fails; its report says why
                report = CaseReport(name, state=f"the case broke: {type(e).__name__}: {e}")
            report.notes.append(f"{time.monotonic() - started:.0f}s")
            print(report.line(), flush=True)
            reports.append(report)
    finally:
        broker.stop()
    if args.json:
        Path(args.json).write_text(json.dumps([r.__dict__ for r in reports], indent=1, default=str))
    failed = [r.case for r in reports if not r.ok]
    print("all cases OK" if not failed else f"FAILED: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
