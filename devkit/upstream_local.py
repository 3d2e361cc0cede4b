"""A real upstream on loopback: MariaDB servers captured by Debezium on Kafka Connect.

Why: end-to-end tests need what production feeds the job, real Debezium messages from a
real binlog, not the project's own producer. Nothing here is shared with the machine: one
``mariadbd`` per source (Debian's MariaDB, ``scripts/install-databases``) with its own data
dir, and one Kafka Connect standalone worker (``.jars/connect``, ``scripts/fetch-jars``),
all on free loopback ports. State lives in ``<base>/<name>`` (default
``.state/upstream/default`` under the repo root): per source ``<source>/data``, its socket,
pid file, binlogs and ``mariadb.log``; the worker's ``worker.properties``, offsets file
and ``connect.log``; and ``upstream.json`` with every pid and port, so a later
``status``/``stop`` (another process) finds them. Each process leads its own process
group; ``stop`` signals the groups (SIGTERM, then SIGKILL), the worker first.

Users on every server: ``admin``/``admin`` (all privileges; what tests and the engine run
DDL/DML as) and ``debezium``/``debezium`` with ``SELECT, RELOAD, SHOW DATABASES,
REPLICATION SLAVE, REPLICATION CLIENT`` (on MariaDB 10.5+ ``REPLICATION CLIENT`` is the old
name of ``BINLOG MONITOR``, which is what ``SHOW MASTER STATUS``/``SHOW BINARY LOGS`` need;
nothing more was needed).

Which Debezium captures the servers (``SHARDMERGE_DEBEZIUM``, ``connector=``,
``--connector``):

- ``mariadb`` (default): Debezium's own ``MariaDbConnector``, **3.5.0.Final**: the Maven
  Central this project reaches serves no 3.6.x of ``debezium-connector-mariadb``. It works
  with Debian 12's MariaDB 10.11 as it is (``database.ssl.mode=disable``); ``source.gtid``
  carries MariaDB's GTID (``0-1-8``), ``source.connector`` is ``"mariadb"``.
- ``mysql``: Debezium **3.6.1**'s ``MySqlConnector``, which needs each server to report
  ``5.5.5-<version>`` from ``VERSION()`` (see :func:`_reported_version`; otherwise it takes
  "10.11" for a MySQL newer than 8.4 and gives up); ``source.gtid`` is null.

Both run on a Kafka Connect **4.3.1** worker: Debezium 3.5/3.6 call a class Kafka 4.4
moved. Either snapshots, streams inserts, updates, deletes, truncates and DDL, with binlog
file/pos positions. Measured on 2 cores: a fresh server 1.5-4 s (0.4 s on an existing
data dir), the worker 6 s, a connector to streaming ~2 s, stop < 1 s; RSS ~100 MB per
server, ~580 MB for the worker. docs/upstream.md has the details and what the messages
look like.

Event shape (what :meth:`Upstream.add_connector` configures): ``topic.prefix`` is the
source id, so ``source.name`` is e.g. ``s1``; a RegexRouter prefixes every *record* topic
with the run prefix: data ``<run_prefix><source>.<db>.<table>``, schema changes
``<run_prefix><source>``. The schema history topic ``<run_prefix><source>-schemahistory``
is written by Debezium's own producer, which the router does not touch. JSON with schemas;
``decimal.handling.mode=precise`` (DECIMAL as base64 bytes, ``scale`` in the schema
parameters); ``time.precision.mode`` left at its default ``adaptive_time_microseconds``
(DATETIME(3) -> ``io.debezium.time.Timestamp``, epoch millis; DATETIME(4..6) ->
``MicroTimestamp``); ``skipped.operations=none`` (TRUNCATE is ``op: "t"``); tombstones
after deletes.

CLI (``shardmerge upstream ...`` or ``python -m devkit.upstream_local ...``):
``start|stop|status [--name NAME] [--base-dir DIR] [--bootstrap HOST:PORT]
[--sources s1,s2]``; without ``--bootstrap``, ``start`` uses (and starts) the broker of
``shardmerge kafka start``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

from devkit import kafka_local, procs
from shardmerge.errors import ShardMergeError
from streaming.runtime._jars import JARS_DIR, jars

__all__ = [
    "Server",
    "Upstream",
    "UpstreamError",
    "cli_main",
    "running",
    "start",
    "status",
    "stop",
]

DEFAULT_BASE_DIR = Path(".state/upstream")
# Which Debezium connector captures the servers: SHARDMERGE_DEBEZIUM=mysql|mariadb (or the
# ``connector`` argument of start/running, ``--connector`` on the CLI); default mariadb.
CONNECTOR_CLASSES = {
    # Debezium 3.6.1 (jars/connect/debezium-mysql); needs the 5.5.5- version trick.
    "mysql": "io.debezium.connector.mysql.MySqlConnector",
    # Debezium 3.5.0 (jars/connect/debezium-mariadb); MariaDB GTIDs, no trick.
    "mariadb": "io.debezium.connector.mariadb.MariaDbConnector",
}
DEFAULT_CONNECTOR = "mariadb"
# One routed topic per source (:class:`Routed`) needs Debezium 3.6's ByLogicalTableRouter:
# 3.5's puts a column's default in place of an explicit NULL (dbz#1848; read from the
# bytecode: 3.5.0's updateValue copies fields with Struct.get, 3.6.1's with
# getWithoutDefault). The router a connector uses is its own plugin's (pinning
# ``transforms.*.version`` to the other plugin's 3.6.1 did not change that, measured), and
# no 3.6 MariaDbConnector is served, so routed capture takes the 3.6.1 MySqlConnector.
ROUTED_CONNECTOR = "mysql"
CONNECTOR_CLASS = CONNECTOR_CLASSES[DEFAULT_CONNECTOR]  # kept for callers of the old name
ADMIN = ("admin", "admin")
DEBEZIUM = ("debezium", "debezium")
DEBEZIUM_GRANTS = "SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT"
# The worker's environment variable the connector's password comes from.
DEBEZIUM_PASSWORD_ENV = "SHARDMERGE_DEBEZIUM_PASSWORD"
SYSTEM_DATABASES = "mysql,sys,performance_schema,information_schema"
_STATE_FILE = "upstream.json"
_log = logging.getLogger(__name__)

_WORKER_PROPERTIES = """\
# Written by devkit/upstream_local.py at each start; edits are lost.
bootstrap.servers={bootstrap}
listeners=http://127.0.0.1:{rest_port}
rest.advertised.host.name=127.0.0.1
rest.advertised.port={rest_port}
plugin.path={plugins}
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=true
value.converter.schemas.enable=true
# Connect's JsonConverter writes a column's DEFAULT in place of a NULL the row holds unless
# told not to (KIP-581): a NULL sent by the shard must stay NULL downstream.
key.converter.replace.null.with.default=false
value.converter.replace.null.with.default=false
offset.storage.file.filename={offsets}
offset.flush.interval.ms=500
# The connector's password is read from the worker's environment when the task starts
# (KIP-887); the connector config holds only ${{env:...}}, so Connect's REST API never
# returns it. Only that one variable is readable that way.
config.providers=env
config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider
config.providers.env.param.allowlist.pattern={password_env}
"""

_LOG4J2_PROPERTIES = """\
status = warn
shutdownHook = disable
appender.out.type = Console
appender.out.name = out
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
"""


class UpstreamError(procs.ProcessError):
    """The local upstream could not be started, used or stopped; the message says which
    process (and port) and ends with the last lines of its log."""


@dataclass(frozen=True)
class Routed:
    """One topic per logical table (docs/cluster.md, "Thousands of shards"): Debezium's
    ``ByLogicalTableRouter`` sends every data topic of a source but ``exclude_db``'s to
    ``<source>.<logical>``, and ``PartitionRouting`` keeps each shard's rows in one of its
    ``partitions`` partitions (a hash of ``source.db`` and ``source.table``)."""

    logical: str = "routed"
    partitions: int = 4
    exclude_db: str | None = None


def routed_config(routed: Routed, run_prefix: str = "") -> dict[str, str]:
    """The connector settings of :class:`Routed`, before the ``run`` prefix router (which
    must stay last: the topic regexes see topics without the run prefix). The routed topic
    is made with ``routed.partitions`` partitions by Connect's topic creation; every other
    topic with one, as without routing."""
    skip = f"(?!{re.escape(routed.exclude_db)}\\.)" if routed.exclude_db else ""
    logical = f"^([^.]+)\\.{skip}[^.]+\\.[^.]+$"
    routed_topic = f"^[^.]+\\.{re.escape(routed.logical)}$"
    return {
        "transforms": "logical,shard,run",
        "transforms.logical.type": "io.debezium.transforms.ByLogicalTableRouter",
        "transforms.logical.topic.regex": logical,
        "transforms.logical.topic.replacement": f"$1.{routed.logical}",
        "transforms.shard.type": "io.debezium.transforms.partitions.PartitionRouting",
        "transforms.shard.partition.payload.fields": "source.db,source.table",
        "transforms.shard.partition.topic.num": str(routed.partitions),
        "transforms.shard.predicate": "routed",
        "predicates": "routed",
        "predicates.routed.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
        "predicates.routed.pattern": routed_topic,
        "topic.creation.default.partitions": "1",
        "topic.creation.default.replication.factor": "1",
        "topic.creation.groups": "routed",
        "topic.creation.routed.include": re.escape(run_prefix) + routed_topic[1:],
        "topic.creation.routed.partitions": str(routed.partitions),
    }


@dataclass
class Server:
    """One source's ``mariadbd`` on ``127.0.0.1:port``."""

    source: str
    port: int
    server_id: int
    pid: int
    socket: Path
    log_path: Path

    def connect(self, database: str | None = None) -> pymysql.connections.Connection[Any]:
        """An autocommit connection as ``admin`` over TCP (close it, or use ``with``)."""
        return pymysql.connect(
            host="127.0.0.1",
            port=self.port,
            user=ADMIN[0],
            password=ADMIN[1],
            database=database,
            autocommit=True,
            connect_timeout=10,
        )

    def execute(self, sql: str, database: str | None = None) -> list[tuple[Any, ...]]:
        """Run one statement on a fresh connection; the rows it returned (maybe none)."""
        with self.connect(database) as conn, conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())


@dataclass
class Upstream:
    """A running upstream: ``servers`` by source id and the Connect worker at ``rest``."""

    name: str
    state_dir: Path
    bootstrap: str
    servers: dict[str, Server]
    rest: str
    connect_pid: int
    connect_log: Path
    connector: str = DEFAULT_CONNECTOR
    startup_seconds: dict[str, float] = field(default_factory=dict, compare=False)

    def add_connector(
        self,
        source: str,
        *,
        run_prefix: str,
        bootstrap: str,
        snapshot_mode: str = "initial",
        name: str | None = None,
        timeout: float = 60.0,
        routed: Routed | None = None,
    ) -> str:
        """Capture ``source``'s server with a Debezium connector; its name once connector
        and task are RUNNING and the snapshot is over: the connector reads the binlog (a
        new ``Binlog Dump`` thread on the server), so later SQL arrives as change events,
        never inside the snapshot. ``UpstreamError`` with the task's trace if one FAILED.

        Topics: ``<run_prefix><source>.<db>.<table>`` (data) and ``<run_prefix><source>``
        (schema changes); ``<run_prefix><source>-schemahistory`` is Debezium's own. With
        ``routed``, the data of every table but ``routed.exclude_db``'s goes to one topic
        per source, ``<run_prefix><source>.<routed.logical>`` (:func:`routed_config`).
        """
        if routed is not None and self.connector != ROUTED_CONNECTOR:
            raise UpstreamError(
                f"one routed topic per source needs Debezium 3.6's ByLogicalTableRouter; the "
                f"{self.connector} connector here is Debezium 3.5, whose router replaces an "
                "explicit NULL with the column's default (dbz#1848): start the upstream with "
                f"connector {ROUTED_CONNECTOR} (SHARDMERGE_DEBEZIUM={ROUTED_CONNECTOR})"
            )
        server = self.servers[source]
        name = name or f"{run_prefix}{source}"
        config = {
            "connector.class": CONNECTOR_CLASSES[self.connector],
            "tasks.max": "1",
            "database.hostname": "127.0.0.1",
            "database.port": str(server.port),
            "database.user": DEBEZIUM[0],
            "database.password": f"${{env:{DEBEZIUM_PASSWORD_ENV}}}",
            "database.server.id": str(_connector_server_id(name)),
            # MySqlConnector: disabled|preferred|...; MariaDbConnector: disable|trust|...
            "database.ssl.mode": "disable" if self.connector == "mariadb" else "disabled",
            "database.exclude.list": SYSTEM_DATABASES,
            "topic.prefix": source,
            "include.schema.changes": "true",
            "schema.history.internal.kafka.bootstrap.servers": bootstrap,
            "schema.history.internal.kafka.topic": f"{run_prefix}{source}-schemahistory",
            "snapshot.mode": snapshot_mode,
            "skipped.operations": "none",
            "tombstones.on.delete": "true",
            "decimal.handling.mode": "precise",
            "transforms": "run",
            "transforms.run.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.run.regex": "^(.*)$",
            # A java.util.regex replacement: '$' and '\\' of the prefix are escaped.
            "transforms.run.replacement": re.sub(r"([$\\])", r"\\\1", run_prefix) + "$1",
        }
        if routed is not None:
            config.update(routed_config(routed, run_prefix))
        last_thread = _binlog_dumps(server)[1]
        _rest(self.rest, "POST", "/connectors", {"name": name, "config": config})
        deadline = time.monotonic() + timeout
        self._wait_running(name, timeout)
        if snapshot_mode != "initial_only":  # the one mode that never reads the binlog
            self._wait_streaming(name, server, last_thread, deadline)
        return name

    def remove_connector(self, name: str) -> None:
        """Delete the connector (its offsets stay in the worker's offsets file)."""
        _rest(self.rest, "DELETE", f"/connectors/{name}")

    def _wait_running(self, name: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        state: dict[str, Any] = {}
        while time.monotonic() < deadline:
            with contextlib.suppress(UpstreamError):
                state = _rest(self.rest, "GET", f"/connectors/{name}/status")
            parts = [state.get("connector", {}), *state.get("tasks", [])]
            failed = [p for p in parts if p.get("state") == "FAILED"]
            if failed:
                raise UpstreamError(
                    f"connector {name} FAILED: {failed[0].get('trace', '(no trace)')}\n"
                    f"connect log {self.connect_log}, tail:\n{procs.tail(self.connect_log)}"
                )
            if len(parts) > 1 and all(p.get("state") == "RUNNING" for p in parts):
                return
            time.sleep(0.2)
        raise UpstreamError(
            f"connector {name} not RUNNING within {timeout:.0f}s (status {state}); "
            f"connect log {self.connect_log}, tail:\n{procs.tail(self.connect_log)}"
        )

    def _wait_streaming(self, name: str, server: Server, after: int, deadline: float) -> None:
        while time.monotonic() < deadline:
            if any(thread > after for thread in _binlog_dumps(server)[0]):
                return
            self._wait_running(name, 5.0)  # fails fast if the task FAILED meanwhile
            time.sleep(0.2)
        raise UpstreamError(
            f"connector {name} RUNNING but not reading the binlog of {server.source} "
            f"(port {server.port}): snapshot not over; connect log {self.connect_log}, "
            f"tail:\n{procs.tail(self.connect_log)}"
        )

    def pids(self) -> list[int]:
        """Every process of this upstream: the worker, then one ``mariadbd`` per source."""
        return [self.connect_pid, *(s.pid for s in self.servers.values())]

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the worker, then the servers (SIGTERM each group, SIGKILL after timeout)."""
        procs.terminate([self.connect_pid], timeout)
        procs.terminate([s.pid for s in self.servers.values()], timeout)
        (self.state_dir / _STATE_FILE).unlink(missing_ok=True)

    def __enter__(self) -> Upstream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def state_dir(name: str = "default", base_dir: str | Path | None = None) -> Path:
    """``<base_dir>/<name>`` (default ``.state/upstream/<name>``), as for the broker."""
    return procs.state_dir(name, base_dir, DEFAULT_BASE_DIR)


def start(
    bootstrap: str,
    *,
    sources: Sequence[str] = ("s1", "s2"),
    name: str = "default",
    base_dir: str | Path | None = None,
    timeout: float = 120.0,
    die_with_parent: bool = False,
    connector: str | None = None,
) -> Upstream:
    """Start the servers and the worker (or return them if they run) and wait until the
    servers take connections and the worker lists the Debezium connector class.

    ``die_with_parent``: the kernel SIGTERMs every process when the caller dies (tests).
    ``connector``: ``mysql`` or ``mariadb`` (default: env ``SHARDMERGE_DEBEZIUM``, else
    ``mariadb``).
    """
    connector = _connector_choice(connector)
    if (found := status(name, base_dir)) is not None:
        return found
    stop(name, base_dir)  # whatever is left of a half-dead earlier start
    for tool in ("mariadbd", "mariadb-install-db"):
        if _which(tool) is None:
            raise UpstreamError(f"{tool} not found: run scripts/install-databases (as root)")
    sdir = state_dir(name, base_dir)
    sdir.mkdir(parents=True, exist_ok=True)
    ports = procs.pick_ports(sdir, ["connect", *sources])
    preexec = procs.parent_death_signal() if die_with_parent else None
    t0 = time.monotonic()
    connect_proc, rest = _start_connect(sdir, bootstrap, ports["connect"], preexec)
    servers: dict[str, Server] = {}
    children: dict[str, subprocess.Popen[bytes]] = {}
    upstream = Upstream(
        name, sdir, bootstrap, servers, rest, connect_proc.pid, sdir / "connect.log", connector
    )
    try:
        installs = {s: _install_db(sdir / s) for s in sources}
        for server_id, source in enumerate(sources, start=1):
            _wait_install(sdir / source, installs[source])
            proc, server = _start_mariadbd(
                sdir / source, source, server_id, ports[source], preexec, connector
            )
            children[source], servers[source] = proc, server
        _record(upstream)
        for source, server in servers.items():
            _wait_mariadb(server, children[source], timeout)
            upstream.startup_seconds[f"mariadb {source}"] = round(time.monotonic() - t0, 1)
        _wait_connect(upstream, connect_proc, timeout)
        upstream.startup_seconds["connect"] = round(time.monotonic() - t0, 1)
    except BaseException:
        upstream.stop(10.0)
        raise
    _log.info("upstream %s ready: %s", name, upstream.startup_seconds)
    return upstream


def status(name: str = "default", base_dir: str | Path | None = None) -> Upstream | None:
    """The running upstream recorded in the state dir, or None (no record, or one of its
    processes is gone)."""
    info = _read_state(state_dir(name, base_dir))
    if info is None:
        return None
    upstream = _from_state(info)
    if not all(procs.alive(pid) for pid in upstream.pids()):
        return None
    return upstream


def stop(name: str = "default", base_dir: str | Path | None = None, timeout: float = 30.0) -> bool:
    """Stop whatever the state dir records as running; False if nothing was."""
    sdir = state_dir(name, base_dir)
    info = _read_state(sdir)
    (sdir / _STATE_FILE).unlink(missing_ok=True)
    if info is None:
        return False
    upstream = _from_state(info)
    alive = [pid for pid in upstream.pids() if procs.alive(pid)]
    upstream.stop(timeout)
    return bool(alive)


@contextlib.contextmanager
def running(
    bootstrap: str,
    *,
    sources: Sequence[str] = ("s1", "s2"),
    name: str = "default",
    base_dir: str | Path | None = None,
    connector: str | None = None,
) -> Iterator[Upstream]:
    """An upstream for the duration of the block; stopped on exit, also when it fails."""
    upstream = start(
        bootstrap,
        sources=sources,
        name=name,
        base_dir=base_dir,
        die_with_parent=True,
        connector=connector,
    )
    try:
        yield upstream
    finally:
        upstream.stop()


# --- internals ---------------------------------------------------------------------------


def _connector_choice(connector: str | None) -> str:
    choice = connector or os.environ.get("SHARDMERGE_DEBEZIUM") or DEFAULT_CONNECTOR
    if choice not in CONNECTOR_CLASSES:
        raise UpstreamError(
            f"unknown Debezium connector {choice!r} (SHARDMERGE_DEBEZIUM or connector=): "
            f"one of {sorted(CONNECTOR_CLASSES)}"
        )
    return choice


def _which(tool: str) -> str | None:
    return shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/usr/bin")


def _binlog_dumps(server: Server) -> tuple[list[int], int]:
    """Thread ids of the server's binlog readers, and the highest thread id now."""
    rows = server.execute(
        "SELECT ID, COMMAND FROM information_schema.PROCESSLIST"
        " UNION ALL SELECT CONNECTION_ID(), ''"
    )
    dumps = [int(i) for i, command in rows if command.startswith("Binlog Dump")]
    return dumps, max(int(i) for i, _ in rows)


def _connector_server_id(connector: str) -> int:
    """A replica id per connector name, far above the servers' own ids (1, 2, ...):
    two binlog clients with one id make MariaDB drop the older one."""
    return 100_000 + zlib.crc32(connector.encode()) % 2_000_000_000


def _install_db(ddir: Path) -> subprocess.Popen[bytes] | None:
    """Start ``mariadb-install-db`` for a new data dir (None when it exists already)."""
    if (ddir / "data" / "mysql").is_dir():
        return None
    shutil.rmtree(ddir, ignore_errors=True)
    (ddir / "binlog").mkdir(parents=True)
    (ddir / "tmp").mkdir()
    with (ddir / "install-db.log").open("wb") as log:
        return subprocess.Popen(
            [
                str(_which("mariadb-install-db")),
                "--no-defaults",
                "--user=root",
                f"--datadir={ddir / 'data'}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
                # Own temp dir: two installs at once in /tmp lost each other's temp
                # tables ("Could not remove temporary table", then "Unknown table").
                f"--tmpdir={ddir / 'tmp'}",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _wait_install(ddir: Path, proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None and proc.wait() != 0:
        log = ddir / "install-db.log"
        shutil.rmtree(ddir / "data", ignore_errors=True)
        raise UpstreamError(
            f"mariadb-install-db for {ddir / 'data'} failed (exit {proc.returncode}); "
            f"log {log}, tail:\n{procs.tail(log)}"
        )


def _reported_version() -> str:
    """What the server says it is: ``5.5.5-<its version>``, which MariaDB 10.x itself sends
    in the client handshake (so that old replicas parse a 5.x) but not from VERSION().

    Why: Debezium 3.6.1's MySqlConnector first tries ``SHOW BINARY LOG STATUS`` (MySQL
    8.4+), then reads ``SELECT VERSION()``: "10.11..." counts as newer than 8.4 and it gives
    up, while "5.5..." makes it use ``SHOW MASTER STATUS``, which MariaDB 10.11 has. A
    "5.7.20+" would not do: the JDBC driver would then ask for ``@@transaction_isolation``,
    which MariaDB only has from 11.1.
    """
    out = subprocess.run(
        [str(_which("mariadbd")), "--no-defaults", "--version"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    found = re.search(r"Ver (\S+)", out)
    return f"5.5.5-{found.group(1) if found else '10.11-MariaDB'}"


def _start_mariadbd(
    ddir: Path, source: str, server_id: int, port: int, preexec: Any, connector: str
) -> tuple[subprocess.Popen[bytes], Server]:
    log_path = ddir / "mariadb.log"
    sock = ddir / "mysqld.sock"
    cmd = [
        str(_which("mariadbd")),
        "--no-defaults",  # nothing from /etc/mysql: this server is ours alone
        "--user=root",
        f"--datadir={ddir / 'data'}",
        f"--port={port}",
        "--bind-address=127.0.0.1",
        f"--socket={sock}",
        f"--tmpdir={ddir / 'tmp'}",
        f"--pid-file={ddir / 'mariadbd.pid'}",
        f"--log-error={log_path}",
        f"--server-id={server_id}",
        f"--log-bin={ddir / 'binlog' / 'binlog'}",
        "--binlog-format=ROW",
        "--binlog-row-image=FULL",
        "--skip-name-resolve",
        "--character-set-server=utf8mb4",
        "--collation-server=utf8mb4_general_ci",
        # Small: a test server holds kilobytes; the default pool is 128 MB per server.
        "--innodb-buffer-pool-size=32M",
        "--performance-schema=OFF",
    ]
    if connector == "mysql":  # MariaDbConnector takes the real VERSION() as it is
        cmd.append(f"--version={_reported_version()}")
    with (ddir / "mariadbd.out").open("wb") as out:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=preexec,
        )
    return proc, Server(source, port, server_id, proc.pid, sock, log_path)


def _wait_mariadb(server: Server, proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait for the socket to take root, then create the users (idempotent)."""
    deadline = time.monotonic() + timeout
    what = f"mariadbd for {server.source} (port {server.port}, pid {server.pid})"
    while True:
        if proc.poll() is not None:
            raise UpstreamError(
                f"{what} exited with {proc.returncode} while starting; "
                f"log {server.log_path}, tail:\n{procs.tail(server.log_path)}"
            )
        try:
            conn = pymysql.connect(unix_socket=str(server.socket), user="root", autocommit=True)
            break
        except pymysql.err.OperationalError as err:
            if time.monotonic() > deadline:
                raise UpstreamError(
                    f"{what} took no connection within {timeout:.0f}s ({err}); "
                    f"log {server.log_path}, tail:\n{procs.tail(server.log_path)}"
                ) from err
            time.sleep(0.1)
    with conn, conn.cursor() as cur:
        for user, password, grants in (
            (*ADMIN, "ALL PRIVILEGES"),
            (*DEBEZIUM, DEBEZIUM_GRANTS),
        ):
            cur.execute(f"CREATE USER IF NOT EXISTS '{user}'@'%' IDENTIFIED BY '{password}'")
            cur.execute(f"GRANT {grants} ON *.* TO '{user}'@'%'")


def _start_connect(
    sdir: Path, bootstrap: str, rest_port: int, preexec: Any
) -> tuple[subprocess.Popen[bytes], str]:
    classpath = f"{jars('connect')[0].parent}/*"
    plugins = JARS_DIR / "connect" / "plugins"
    if not any(plugins.glob("*/*.jar")):
        raise UpstreamError(f"no connector plugins in {plugins}: run scripts/fetch-jars")
    props = sdir / "worker.properties"
    props.write_text(
        _WORKER_PROPERTIES.format(
            bootstrap=bootstrap,
            rest_port=rest_port,
            plugins=plugins,
            offsets=sdir / "connect.offsets",
            password_env=DEBEZIUM_PASSWORD_ENV,
        )
    )
    (sdir / "log4j2.properties").write_text(_LOG4J2_PROPERTIES)
    with (sdir / "connect.log").open("wb") as log:
        proc = subprocess.Popen(
            [
                procs.java(),
                "-Xmx512m",
                # A test worker moves kilobytes: the serial collector and the C1 compiler
                # start faster on 2 cores and keep the resident size down.
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-XX:+ExitOnOutOfMemoryError",
                "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={sdir / 'log4j2.properties'}",
                "-cp",
                classpath,
                "org.apache.kafka.connect.cli.ConnectStandalone",
                str(props),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=sdir,
            env={**os.environ, DEBEZIUM_PASSWORD_ENV: DEBEZIUM[1]},
            start_new_session=True,
            preexec_fn=preexec,
        )
    return proc, f"http://127.0.0.1:{rest_port}"


def _wait_connect(upstream: Upstream, proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait until ``GET /connector-plugins`` lists the Debezium connector class."""
    deadline = time.monotonic() + timeout
    what = f"kafka connect (REST {upstream.rest}, pid {proc.pid})"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise UpstreamError(
                f"{what} exited with {proc.returncode} while starting; "
                f"log {upstream.connect_log}, tail:\n{procs.tail(upstream.connect_log)}"
            )
        with contextlib.suppress(UpstreamError):
            plugins = _rest(upstream.rest, "GET", "/connector-plugins")
            wanted = CONNECTOR_CLASSES[upstream.connector]
            if any(p.get("class") == wanted for p in plugins):
                return
            raise UpstreamError(
                f"{what} answers but lacks {wanted} (it has "
                f"{[p.get('class') for p in plugins]}): run scripts/fetch-jars"
            )
        time.sleep(0.3)
    raise UpstreamError(
        f"{what} did not answer within {timeout:.0f}s; "
        f"log {upstream.connect_log}, tail:\n{procs.tail(upstream.connect_log)}"
    )


def _rest(base: str, method: str, path: str, body: object = None) -> Any:
    """One call to the Connect REST API; its JSON answer (None when empty)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        base + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as err:
        answer = err.read().decode(errors="replace")
        raise UpstreamError(f"connect REST {method} {path} answered {err.code}: {answer}") from err
    except OSError as err:
        raise UpstreamError(f"connect REST {method} {base}{path} failed: {err}") from err
    return json.loads(raw) if raw else None


def _record(upstream: Upstream) -> None:
    """Written before the waits, so that ``stop`` finds processes whose starter died."""
    procs.write_json(
        upstream.state_dir / _STATE_FILE,
        {
            "name": upstream.name,
            "bootstrap": upstream.bootstrap,
            "connector": upstream.connector,
            "connect": {
                "pid": upstream.connect_pid,
                "rest": upstream.rest,
                "log_path": str(upstream.connect_log),
            },
            "servers": {
                s.source: {
                    "pid": s.pid,
                    "port": s.port,
                    "server_id": s.server_id,
                    "socket": str(s.socket),
                    "log_path": str(s.log_path),
                }
                for s in upstream.servers.values()
            },
        },
    )


def _read_state(sdir: Path) -> dict[str, Any] | None:
    try:
        info: dict[str, Any] = json.loads((sdir / _STATE_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    info["state_dir"] = str(sdir)
    return info


def _from_state(info: dict[str, Any]) -> Upstream:
    servers = {
        source: Server(
            source, s["port"], s["server_id"], s["pid"], Path(s["socket"]), Path(s["log_path"])
        )
        for source, s in info["servers"].items()
    }
    c = info["connect"]
    return Upstream(
        info["name"],
        Path(info["state_dir"]),
        info["bootstrap"],
        servers,
        c["rest"],
        c["pid"],
        Path(c["log_path"]),
        info.get("connector", DEFAULT_CONNECTOR),
    )


def cli_main(argv: list[str]) -> int:
    """``shardmerge upstream start|stop|status``; ``argv`` is what follows ``upstream``.

    Exit codes: 0 ok (status: running), 1 error, 3 status: not running.
    """
    parser = argparse.ArgumentParser(
        prog="shardmerge upstream",
        description="Local MariaDB servers captured by Debezium on Kafka Connect.",
    )
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--name", default="default", help="upstream name (default: default)")
    parser.add_argument(
        "--base-dir",
        default=None,
        help=f"state base dir, relative to the repo root (default: {DEFAULT_BASE_DIR})",
    )
    parser.add_argument(
        "--bootstrap",
        default=None,
        help="Kafka bootstrap HOST:PORT (default: the broker of `shardmerge kafka start`, "
        "started if needed)",
    )
    parser.add_argument("--sources", default="s1,s2", help="source ids (default: s1,s2)")
    parser.add_argument(
        "--connector",
        choices=sorted(CONNECTOR_CLASSES),
        default=None,
        help="Debezium connector (default: env SHARDMERGE_DEBEZIUM, else mariadb)",
    )
    args = parser.parse_args(argv)
    where = state_dir(args.name, args.base_dir)
    try:
        if args.action == "start":
            bootstrap = args.bootstrap or kafka_local.start().bootstrap
            sources = [s for s in args.sources.split(",") if s]
            up = start(
                bootstrap,
                sources=sources,
                name=args.name,
                base_dir=args.base_dir,
                connector=args.connector,
            )
            _print(up)
        elif args.action == "stop":
            was = stop(args.name, args.base_dir)
            print(f"upstream {args.name}: {'stopped' if was else 'was not running'} ({where})")
        else:
            found = status(args.name, args.base_dir)
            if found is None:
                print(f"upstream {args.name}: not running ({where})")
                return 3
            _print(found)
    except ShardMergeError as err:
        print(f"shardmerge upstream {args.action}: error: {err}", file=sys.stderr)
        return 1
    return 0


def _print(up: Upstream) -> None:
    print(
        f"upstream {up.name}: kafka {up.bootstrap}, connect {up.rest} (pid {up.connect_pid}, "
        f"{CONNECTOR_CLASSES[up.connector]})"
    )
    for s in up.servers.values():
        print(
            f"  {s.source}: mariadb 127.0.0.1:{s.port} server_id {s.server_id} (pid {s.pid}, "
            f"user {ADMIN[0]}/{ADMIN[1]}, log {s.log_path})"
        )


if __name__ == "__main__":
    sys.exit(cli_main(sys.argv[1:]))
