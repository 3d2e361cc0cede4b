"""Two jobs, one target: ``scripts/group-test`` (docs/groups.md).

Eight shards of one logical table are captured by two Debezium servers: ``ga`` has
``db_0..db_3``, ``gb`` has ``db_4..db_7``. Job ``a`` reads ``ga``'s topics, job ``b``
``gb``'s; both write ``shop.orders`` in one lake, as the group ``g1``. The workload rolls
three DDLs out over all eight shards (ADD COLUMN, a column rename, a DECIMAL widening),
so every downstream change needs shards of both jobs. Each case runs the two jobs as
``shardmerge run`` processes (``python -m streaming.job``), does something to them, and
waits until the table equals the oracle (the shards' final rows) or a deadline passes:

- ``rollout``: nothing else;
- ``stop``: job ``b`` is stopped (SIGSTOP) past its lease, then continued once the owner
  ran without it a change decided after it stopped (or :data:`PAUSE_MAX_S` passed);
  ``--pause-at`` says where the stop falls (:data:`PAUSE_POINTS`);
- ``owner-kill``: the owner (``a``) is killed (SIGKILL) between an ALTER and the record of
  the table's new version, then started again;
- ``race``: the owner stops (SIGSTOP) right before an ALTER, past its lease; the other
  job takes the term and goes on; then the old owner continues;
- ``ahead``: ``gb``'s ALTERs reach Kafka only once job ``b`` found its shards' rows ahead
  of them (an ``ahead`` record in the group log), as when Debezium's schema-change topic
  lags its data topics; the rows wait for their DDL and replay. At the end both members'
  saved replicas (the coordinator state each folded from the log) must be equal.

Each case prints the rows against the oracle (lost, extra, duplicated keys), how many
times each downstream DDL ran (Delta's history), the owner's terms, and the fenced
batches (a member that found its lease gone, a write Delta refused).

``--sink mariadb|postgresql``: the shared target is a table in a local database server
the run starts (the JDBC sink; the group store, stash and dead letters stay in the lake),
emptied before each case; the rows are read back over JDBC, and the downstream changes are
those of the sink's history table, one row per change made (a change found already made
is recorded once, so a second run shows as none, not as two).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devkit.killtest import DDL, canon

ROOT = Path(__file__).resolve().parents[1]
CASES = ("rollout", "stop", "owner-kill", "race", "ahead")
LEASE_S = 8.0
# Small, so that every case compacts its log while it runs (docs/groups.md, "Compaction").
SNAPSHOT_EVERY = 5
# Where the stop case stops job b (``--pause-at POINT[:N]``): ``joined``, from outside, at
# the first look after its log says it joined (wherever its first batch is then); the
# others, b stops itself (``SHARDMERGE_PAUSE_AT``, streaming.faults) at the N-th time:
PAUSE_POINTS = {
    "joined": "",
    "join": "group_appended_join",  # its join appended (its first batch: it never appends it again)
    "ddl": "group_appended_ddl",  # its N-th ALTER's record appended (after its CREATEs')
    "gate": "group_gate",  # in its N-th batch's gate: its records appended, nothing written
    "write": "group_gate_passed",  # past its N-th gate's last check: its writes follow
    "idle": "after_state",  # its N-th batch saved: between batches
}
# How long b stays stopped at most when the owner does not go on without it.
PAUSE_MAX_S = 120.0


@dataclass
class CaseReport:
    case: str
    pause_at: str = ""
    seconds: float = 0.0
    rows: int = 0
    expected: int = 0
    lost: int = 0
    extra: int = 0
    duplicated: int = 0
    ddl_runs: dict[str, int] = field(default_factory=dict)
    terms: list[str] = field(default_factory=list)
    fenced: int = 0  # batches that failed and ran again: a lease lost, Delta refused a commit
    retried: int = 0  # writes run again within a batch after a data conflict
    owner_races: int = 0
    # per downstream change: seconds from the fold that decided it to its record as applied
    stalls: list[float] = field(default_factory=list)
    gate: dict[str, tuple[float, float]] = field(default_factory=dict)  # job: (total, max)
    stopped: list[str] = field(default_factory=list)  # jobs whose restart policy gave up
    notes: list[str] = field(default_factory=list)
    ahead: int = 0  # `ahead` records in the group log (rows found ahead of their DDL)
    paused: bool = False  # the stop case: job b was stopped (else the case did not happen)
    # whether the members' saved replicas are equal at the end (None: not compared)
    replicas_equal: bool | None = None
    snapshots: list[int] = field(default_factory=list)  # the log records of the snapshots kept
    log_first: int = 0  # the first log file compaction left (0: none removed)
    log_end: int = 0
    # whether the last comparison read the table (else the counts are not its rows), and
    # what the last read that failed raised
    compared: bool = False
    read_error: str = ""

    @property
    def ok(self) -> bool:
        ran_once = all(n == 1 for n in self.ddl_runs.values()) and len(self.ddl_runs) == 3
        rows = not self.lost and not self.extra and not self.duplicated
        ahead = self.case != "ahead" or (self.ahead > 0 and self.replicas_equal is True)
        paused = self.case != "stop" or self.paused
        read = self.compared and self.expected > 0
        return read and rows and ran_once and not self.stopped and ahead and paused

    def lines(self) -> list[str]:
        runs = ", ".join(f"{k}={v}" for k, v in sorted(self.ddl_runs.items()))
        name = f"{self.case} (pause at {self.pause_at})" if self.pause_at else self.case
        return [
            f"case {name}: {'OK' if self.ok else 'FAILED'} in {self.seconds:.0f} s",
            f"  rows {self.rows} of {self.expected}: lost={self.lost} extra={self.extra} "
            f"dup={self.duplicated}; members stopped for good: "
            f"{', '.join(self.stopped) or 'none'}",
            *([] if self.compared else [f"  the table was not read at the end: {self.read_error}"]),
            f"  downstream DDL runs: {runs or 'none'}",
            f"  owner terms: {', '.join(self.terms) or 'none'}; owner races lost: "
            f"{self.owner_races}",
            f"  fenced batches (failed, run again): {self.fenced}; writes retried after "
            f"another job's commit: {self.retried}",
            "  decided -> applied per downstream change: "
            + (", ".join(f"{s:.1f} s" for s in self.stalls) or "none"),
            "  batches' wait in the gate (total / longest): "
            + ", ".join(f"{j} {t:.1f} / {m:.1f} s" for j, (t, m) in sorted(self.gate.items())),
            *(
                [f"  ahead records: {self.ahead}; members' replicas equal: {self.replicas_equal}"]
                if self.case == "ahead"
                else []
            ),
            f"  compaction: snapshots at {', '.join(map(str, self.snapshots)) or 'none'}; "
            f"log kept from record {self.log_first + 1} to {self.log_end}",
            *(f"  {n}" for n in self.notes),
        ]


def produce(
    bootstrap: str, shards: int, rows: int, prefix: str, hold_alters_of: str | None = None
) -> tuple[dict[Any, dict[str, Any]], Any]:
    """The workload, shards split between two sources; the oracle, and a function that
    sends the ALTERs of source ``hold_alters_of`` held back (their rows are sent)."""
    from devkit.producer import DebeziumProducer
    from devkit.workload import Oracle, sharded_workload

    producers = {s: DebeziumProducer(bootstrap, s, topic_namespace=prefix) for s in ("ga", "gb")}
    oracle = Oracle()
    held = []
    for ev in sharded_workload(shards, rows, ddl_at=DDL, seed=11):
        oracle.take(ev)
        source = "ga" if int(ev.db.split("_")[1]) < shards // 2 else "gb"
        p = producers[source]
        if ev.kind == "row":
            p.row(ev.db, ev.table, ev.op, ev.before, ev.after, ev.schema)  # type: ignore[arg-type]
        elif source == hold_alters_of and (ev.statement or "").upper().startswith("ALTER"):
            # built now: its binlog position and time are where it ran; only its delivery
            # is late (Debezium orders no topic against another)
            held.append(p.builder.ddl(ev.db, ev.table, ev.statement or "", ev.schema))
        else:
            p.ddl(ev.db, ev.table, ev.statement or "", ev.schema)
    producers["ga"].close()

    def send_held() -> int:
        p = producers["gb"] if hold_alters_of == "gb" else producers["ga"]
        for record in held:
            p.send(record)
        p.close()
        return len(held)

    if hold_alters_of is None:
        producers["gb"].close()
    return oracle.rows, send_held


def write_config(
    work: Path, job: str, bootstrap: str, prefix: str, lake: str,
    db: dict[str, Any] | None = None,
) -> Path:  # fmt: skip
    """Job ``job``'s settings; ``db``: the target in that database (``sink_settings`` of
    :mod:`devkit.downstream_local`; its password reaches the job in the environment, see
    :func:`db_env`), the stash and dead letters still under ``lake``."""
    path = work / f"{job}.yaml"
    source = f"g{job}"
    sink = f'{{path: "{lake}"}}'
    if db is not None:
        sink = (
            f'{{kind: jdbc, url: "{db["url"]}", dialect: {db["dialect"]}, '
            f'user: "{db["user"]}", path: "{lake}"}}'
        )
    path.write_text(
        f"""kafka:
  bootstrap: "{bootstrap}"
  max_offsets_per_trigger: 400
sources:
  - format: debezium
    pattern: '{prefix}{source}(\\..*)?'
    read_schema_ahead: false
routes:
  - target: shop.orders
    table: 'orders_*'
targets:
  shop.orders: {{mode: optimistic}}
sink: {sink}
checkpoint: "{work / ("checkpoint-" + job)}"
trigger_interval: "1 second"
restart: {{attempts: 20, initial_backoff_s: 1, max_backoff_s: 4}}
coordination:
  group: g1
  member: {job}
  members: [a, b]
  lease_s: {LEASE_S}
  heartbeat_s: 1
  snapshot_every: {SNAPSHOT_EVERY}
ops: {{port: 0, generated_token_file: "{work / ("ops-token-" + job)}"}}
"""
    )
    return path


class Job:
    """One ``shardmerge run`` process of the group."""

    def __init__(self, name: str, config: Path, log: Path, env: dict[str, str] | None = None):
        self.name, self.config, self.log = name, config, log
        self.proc: subprocess.Popen[bytes] | None = None
        self.start(env)

    def start(self, env: dict[str, str] | None = None) -> None:
        full = {k: v for k, v in os.environ.items() if not k.startswith("SHARDMERGE_CRASH")}
        full.pop("SHARDMERGE_PAUSE_AT", None)
        full.update(env or {})
        out = open(self.log, "ab")  # noqa: SIM115 - the process keeps it
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streaming.job", "--config", str(self.config)],
            cwd=ROOT, env=full, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def stopped_itself(self) -> bool:
        """Whether the process is in the stopped state (a SIGSTOP it sent itself)."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return fields[0] == "T"
        return False

    def gave_up(self) -> bool:
        """Whether the job ended by itself: its restart policy stopped it for good."""
        return self.proc is not None and self.proc.poll() is not None

    def stop(self) -> None:
        if self.proc is None:
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class InProcessMember:
    """Job ``a`` on a thread of the caller's Spark session (the CI test's: one cold JVM
    fewer); the ``rollout`` and ``stop`` cases, which send it no signal."""

    def __init__(self, config: Path, log: Path, spark: Any) -> None:
        from devkit.killtest import InProcessJob

        self.proc = None
        self.job = InProcessJob(config, log, {}, spark, available_now=False)

    def signal(self, sig: int) -> None:
        raise ValueError("a job in this process takes no signal")

    def stopped_itself(self) -> bool:
        return False

    def stop(self) -> None:
        self.job.kill()
        self.job.wait(120)

    def gave_up(self) -> bool:
        return False


def _joined(log: Path) -> bool:
    """Whether the job's log says it joined the group (its first batch is under way)."""
    return log.exists() and _JOINED.search(log.read_text(errors="replace")) is not None


# the line a member logs once its group joined (streaming.group.coordination):
# "every member of group g1 joined (waited 0.5 s)"
_JOINED = re.compile(r"every member of group \S+ joined")


def db_env(db: dict[str, Any] | None) -> dict[str, str]:
    """What a job's environment needs for ``db``: its password (never in the YAML)."""
    if db is None or db.get("password") is None:
        return {}
    return {"SHARDMERGE__SINK__PASSWORD": str(db["password"])}


def _db_sink(spark: Any, db: dict[str, Any]) -> Any:
    from streaming.storage.jdbc_sink import JdbcSink

    return JdbcSink(spark, "shardmerge-grouptest-reader", str(db["url"]), db["dialect"],
                    db.get("user"), db.get("password"))  # fmt: skip


def compare(
    spark: Any, lake: str, oracle: dict[Any, dict[str, Any]], r: CaseReport,
    db: dict[str, Any] | None = None,
) -> bool:  # fmt: skip
    """Whether the table equals the oracle (counts in ``r``); False while it cannot be
    read yet (not made, or changed while read): the caller looks again. A read that fails
    is no comparison: ``r.compared`` says whether this one read the table, and
    ``r.read_error`` keeps what the failed read raised (a case whose last read failed is
    not OK)."""
    from coordinator.ids import TargetId

    path = f"{lake}/shop/orders"
    r.compared = False
    try:
        if db is not None:
            df = _db_sink(spark, db).read(TargetId("shop", "orders"))
        else:
            df = spark.read.format("delta").load(path)
        columns = [f.name for f in df.schema.fields if f.name.lower() in _oracle_columns(oracle)]
        # the owner may change the table's schema between the load and the read
        got = [row.asDict() for row in df.collect()]
    except Exception as e:  # recorded: the caller looks again, or the case fails on it
        r.read_error = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"
        return False
    r.compared = True
    ids = [g["id"] for g in got]

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        lowered = {k.lower(): v for k, v in row.items()}
        return tuple((c.lower(), canon(lowered.get(c.lower()))) for c in sorted(columns))

    have = Counter(key(g) for g in got)
    want = Counter(key(o) for o in oracle.values())
    r.rows, r.expected = len(got), len(oracle)
    r.lost = sum((want - have).values())
    r.extra = sum((have - want).values())
    r.duplicated = len(ids) - len(set(ids))
    return (
        not r.lost
        and not r.extra
        and not r.duplicated
        and len(columns) == len(_oracle_columns(oracle))
    )


def _oracle_columns(oracle: dict[Any, dict[str, Any]]) -> set[str]:
    return {c.lower() for row in oracle.values() for c in row}


def ddl_runs(spark: Any, lake: str, db: dict[str, Any] | None = None) -> dict[str, int]:
    """How many commits of the table ran each downstream DDL (Delta's history; in a
    database, the sink's history table: one row per change made, by its statement)."""
    if db is not None:
        from coordinator.ids import TargetId

        changes = _db_sink(spark, db).history(TargetId("shop", "orders"), 1000)
        return dict(
            Counter(
                str((h["cause"] or {}).get("statement"))
                for h in changes
                if h["operation"] == "ALTER TABLE"
            )
        )
    hist = spark.sql(f"DESCRIBE HISTORY delta.`{lake}/shop/orders`").collect()
    out: Counter[str] = Counter()
    for h in hist:
        op = h["operation"]
        if op in ("ADD COLUMNS", "CHANGE COLUMN", "RENAME COLUMN", "ALTER COLUMN"):
            params = h["operationParameters"] or {}
            what = params.get("columns") or params.get("column") or params.get("newColumnPath")
            out[f"{op} {_column_name(what)}".strip()] += 1
    return dict(out)


def _column_name(raw: Any) -> str:
    """The column an ALTER's history entry names (its parameters are JSON text)."""
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return str(raw)
    if isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, dict):
        value = value.get("column", value)
        value = value.get("name", value) if isinstance(value, dict) else value
    return str(value)


def pause_env(pause_at: str, shards: int) -> dict[str, str]:
    """``SHARDMERGE_PAUSE_AT`` for job b to stop itself at ``pause_at`` (``POINT[:N]``,
    :data:`PAUSE_POINTS`); nothing for ``joined`` (stopped from outside)."""
    point, _, n = pause_at.partition(":")
    if point not in PAUSE_POINTS:
        raise ValueError(f"--pause-at {pause_at}: points are {', '.join(PAUSE_POINTS)}")
    if point == "joined":
        return {}
    count = int(n or 1)
    if point == "ddl":
        count += shards // 2  # its CREATE TABLEs' records come first
    return {"SHARDMERGE_PAUSE_AT": f"{PAUSE_POINTS[point]}:{count}"}


def _ahead_records(store: Any) -> int:
    """How many ``ahead`` records the group log holds (from its first record kept:
    compaction removes the first ones)."""
    first = min(store.numbers("log"), default=0)
    return sum(
        isinstance(value, dict) and value.get("kind") == "ahead"
        for _, value in store.log(first - 1)
    )


def _replicas_equal(spark: Any, work: Path, r: CaseReport, wait_s: float = 120.0) -> bool:
    """Whether the two members' saved states hold the same coordinator (each member's
    replica of the group log, G1) once both folded the log as far (the same ``group.seq``:
    an idle member folds at its next tick, so this waits up to ``wait_s`` for it); a
    difference is noted with the first keys that differ."""
    import time

    from streaming.storage.state_store import StateStore

    def saved() -> dict[str, Any]:
        out = {}
        for job in ("a", "b"):
            latest = StateStore(spark, f"file://{work / ('checkpoint-' + job)}").latest()
            out[job] = latest[1] if latest else {}
        return out

    deadline = time.monotonic() + wait_s
    states = saved()
    seqs = {j: (s.get("group") or {}).get("seq") for j, s in states.items()}
    while len(set(seqs.values())) > 1 and time.monotonic() < deadline:
        time.sleep(2)
        states = saved()
        seqs = {j: (s.get("group") or {}).get("seq") for j, s in states.items()}
    if len(set(seqs.values())) > 1:
        r.notes.append(f"members' replicas never at one log position within {wait_s:.0f} s: {seqs}")
        return False
    a, b = states["a"].get("coordinator"), states["b"].get("coordinator")
    if a == b and a is not None:
        return True
    differ = sorted(k for k in set(a or {}) | set(b or {}) if (a or {}).get(k) != (b or {}).get(k))
    r.notes.append(f"members' replicas differ at log position {seqs['a']} in {differ[:5]}")
    return False


def _decided(store: Any) -> int:
    """The newest version of the table the group decided (published) so far."""
    return max(store.numbers("decisions/shop.orders"), default=0)


def _versions(store: Any) -> str:
    from streaming.group.member import applied

    return f"the table at v{applied(store, 'shop.orders')}, v{_decided(store)} decided"


def run_case(
    case: str, bootstrap: str, work: Path, spark: Any, *, shards: int, rows: int,
    deadline_s: float, in_process: bool = False, storage: str | None = None,
    env: dict[str, str] | None = None, pause_at: str = "joined",
    pause_max_s: float = PAUSE_MAX_S, db: dict[str, Any] | None = None,
) -> CaseReport:  # fmt: skip
    """One case; ``in_process``: job ``a`` runs in ``spark`` (the rollout and stop cases);
    ``storage``: a URI under which the lake goes (a bucket), ``env`` what reaches both jobs
    (their S3A settings); ``pause_at``: where the stop case stops job b, ``pause_max_s``:
    how long at most (at least its lease and 10 s); ``db``: the target in that database
    (``devkit.downstream_local.sink_settings``; jobs as processes only)."""
    import shutil

    from streaming.group.member import applied as table_version
    from streaming.storage.group_store import group_store

    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    prefix = f"{case.replace('-', '')}{int(time.time())}."
    r = CaseReport(case, pause_at if case == "stop" else "")
    started = time.monotonic()
    oracle, send_held = produce(bootstrap, shards, rows, prefix,
                                "gb" if case == "ahead" else None)  # fmt: skip
    held_sent = case != "ahead"
    lake = f"{storage.rstrip('/')}/{case}/lake" if storage else f"file://{work / 'lake'}"
    configs = {j: write_config(work, j, bootstrap, prefix, lake, db) for j in ("a", "b")}
    env_a: dict[str, str] = {**(env or {}), **db_env(db)}
    env_b: dict[str, str] = {**(env or {}), **db_env(db)}
    if case == "owner-kill":
        env_a["SHARDMERGE_CRASH_AT"] = "group_after_alter:2"  # the 1st is the CREATE
    elif case == "race":
        env_a["SHARDMERGE_PAUSE_AT"] = "group_before_alter:2"
    elif case == "stop":
        env_b.update(pause_env(pause_at, shards))
    if in_process and case not in ("rollout", "stop", "ahead"):
        raise ValueError(f"case {case} signals job a: it needs a process of its own")
    if in_process and db is not None:
        raise ValueError("a database target: both jobs run as processes (its password)")
    jobs: dict[str, Job | InProcessMember] = {
        "a": InProcessMember(configs["a"], work / "a.log", spark)
        if in_process
        else Job("a", configs["a"], work / "a.log", env_a),
        "b": Job("b", configs["b"], work / "b.log", env_b),
    }
    store = group_store(f"{lake}/_shardmerge/groups/g1", spark)
    stopped_b = continued = False
    stop_at, last = 0.0, 0  # when a job was stopped, and the table's version then
    outside = case == "stop" and "SHARDMERGE_PAUSE_AT" not in env_b
    try:
        while time.monotonic() - started < deadline_s:
            time.sleep(3)
            elapsed = time.monotonic() - started
            a, b = jobs["a"], jobs["b"]
            if outside and not stopped_b and _joined(work / "b.log"):
                b.signal(signal.SIGSTOP)
                stopped_b, stop_at, last = True, elapsed, _decided(store)
                r.paused = True
                r.notes.append(f"b SIGSTOPped at {elapsed:.0f} s ({_versions(store)})")
            if case == "stop" and not outside and not stopped_b and b.stopped_itself():
                stopped_b, stop_at, last = True, elapsed, _decided(store)
                r.paused = True
                r.notes.append(f"b stopped itself at {env_b['SHARDMERGE_PAUSE_AT']} at "
                               f"{elapsed:.0f} s ({_versions(store)})")  # fmt: skip
            # b goes on once the owner ran, without it, a change decided after it stopped
            # (b's batch then finds the table past what it planned for), or pause_max_s on
            went_on = (
                case == "stop"
                and stopped_b
                and (table_version(store, "shop.orders") > last or elapsed > stop_at + pause_max_s)
            )
            if case == "stop" and went_on and not continued and elapsed > stop_at + LEASE_S + 10:
                b.signal(signal.SIGCONT)
                continued = True
                r.notes.append(f"b continued at {elapsed:.0f} s ({_versions(store)})")
            if (case == "owner-kill" and isinstance(a, Job) and a.proc is not None
                    and a.proc.poll() is not None):  # fmt: skip
                r.notes.append(f"a died (exit {a.proc.returncode}) at {elapsed:.0f} s; restarted")
                a.start({k: v for k, v in env_a.items() if k != "SHARDMERGE_CRASH_AT"})
            if case == "race" and not continued and a.stopped_itself():
                if not stopped_b:
                    stopped_b, stop_at = True, elapsed
                    r.notes.append(f"a stopped itself before an ALTER at {elapsed:.0f} s")
                elif elapsed > stop_at + LEASE_S + 15:
                    a.signal(signal.SIGCONT)
                    continued = True
                    r.notes.append(f"a continued at {elapsed:.0f} s")
            ahead = 0 if held_sent else _ahead_records(store)
            if not held_sent and (ahead or elapsed > 120):
                n = send_held()
                held_sent = True
                r.ahead = ahead  # compaction may remove the record before the end
                r.notes.append(f"gb's {n} ALTERs sent at {elapsed:.0f} s, "
                               f"{ahead} ahead record(s) in the log")  # fmt: skip
            if case in ("race", "stop") and stopped_b and not continued:
                continue
            if not held_sent:
                continue
            if compare(spark, lake, oracle, r, db):
                break
        else:
            r.notes.append(f"deadline of {deadline_s:.0f} s passed")
        if case == "ahead":
            # while both jobs run: an idle member folds the last records at its next tick
            r.replicas_equal = _replicas_equal(spark, work, r)
    finally:
        r.stopped = [name for name, j in jobs.items() if j.gave_up()]
        for j in jobs.values():
            j.stop()
    compare(spark, lake, oracle, r, db)
    r.seconds = time.monotonic() - started
    if case == "ahead":
        r.ahead = max(r.ahead, _ahead_records(store))
    r.ddl_runs = ddl_runs(spark, lake, db)
    r.snapshots = store.numbers("snapshots")
    kept = store.numbers("log")
    r.log_first, r.log_end = (kept[0], kept[-1] + 1) if kept else (0, 0)
    for n in store.numbers("terms"):
        t = store.read_numbered("terms", n) or {}
        r.terms.append(f"{n}:{t.get('member')}@{t.get('epoch')}")
    for v in store.numbers("decisions/shop.orders"):
        decided = store.read_numbered("decisions/shop.orders", v) or {}
        applied = store.read_numbered("applied/shop.orders", v) or {}
        if isinstance(decided.get("at"), float) and isinstance(applied.get("at"), float):
            r.stalls.append(applied["at"] - decided["at"])
    for name in ("a", "b"):
        lines = (work / f"{name}.log").read_text(errors="replace").splitlines()
        if name not in r.stopped and any("JobStopped" in line for line in lines):
            r.stopped.append(name)
        r.fenced += sum("shardmerge.supervise query failed" in line for line in lines)
        r.retried += sum("writing again" in line for line in lines)
        r.owner_races += sum("recorded it first" in line for line in lines)
        waits = [float(m) for line in lines for m in re.findall(r"gate_seconds=([0-9.]+)", line)]
        r.gate[name] = (sum(waits), max(waits, default=0.0))
    return r


def main() -> int:
    from devkit import downstream_local, kafka_local
    from streaming.runtime.spark_session import build_spark

    parser = argparse.ArgumentParser(description="two shardmerge jobs writing one table")
    parser.add_argument("--cases", default=",".join(CASES), help=f"of {', '.join(CASES)}")
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--rows", type=int, default=300, help="row changes per shard")
    parser.add_argument("--deadline", type=float, default=600.0, help="seconds per case")
    parser.add_argument(
        "--pause-at",
        default="joined",
        help="where the stop case stops job b, POINT[:N]: joined (from outside, once its log "
        "says it joined), join (its join record appended), ddl[:N] (its N-th ALTER's record "
        "appended), gate[:N] (in its N-th batch's gate), write[:N] (past its N-th gate), "
        "idle[:N] (its N-th batch saved); b is continued once the owner ran without it a "
        f"change decided after it stopped, or after {PAUSE_MAX_S:.0f} s",
    )
    parser.add_argument("--workdir", default=str(ROOT / ".state" / "grouptest"))
    parser.add_argument(
        "--storage",
        choices=["local", "s3"],
        default="local",
        help="where the shared lake (and the group store) goes: the workdir, or a bucket on "
        "a local S3 store, through S3A (the project's log store makes Delta's commits "
        "conditional PUTs there)",
    )
    parser.add_argument(
        "--sink",
        choices=["delta", "mariadb", "postgresql"],
        default="delta",
        help="where the shared target goes: a Delta table in the lake, or a table in a "
        "local MariaDB or PostgreSQL server the run starts (the JDBC sink)",
    )
    args = parser.parse_args()
    pause_env(args.pause_at, args.shards)  # a point that does not exist: before any JVM
    work = Path(args.workdir)
    reports = []
    with contextlib.ExitStack() as stack:
        broker = stack.enter_context(kafka_local.running("grouptest", work / "kafka"))
        storage, env = None, None
        if args.storage == "s3":
            from devkit.killtest import on_object_store

            storage, env, spark = on_object_store(stack, work / "s3")
            print(f"the lake under {storage}", file=sys.stderr, flush=True)
        else:
            spark = build_spark("shardmerge-grouptest")
        db = None
        if args.sink != "delta":
            db = stack.enter_context(downstream_local.sink_settings(args.sink, work / "db"))
        for case in args.cases.split(","):
            if db is not None:
                downstream_local.empty(db)  # each case on an empty server
            print(f"== {case}", file=sys.stderr, flush=True)
            r = run_case(case, broker.bootstrap, work / case, spark, shards=args.shards,
                         rows=args.rows, deadline_s=args.deadline, storage=storage,
                         env=env, pause_at=args.pause_at, db=db)  # fmt: skip
            reports.append(r)
            print("\n".join(r.lines()), flush=True)
    ok = all(r.ok for r in reports)
    print("OK: every case lost=0 dup=0, each DDL ran once, no member stopped" if ok else "FAILED")
    print("logs:", shlex.quote(str(work)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
