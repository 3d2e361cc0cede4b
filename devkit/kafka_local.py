"""A local single-node Kafka broker (KRaft, broker and controller in one JVM).

Why: the job and its integration tests need a real broker, and this machine has no Docker.
The broker runs from the jars that ``scripts/fetch-jars`` copies to ``.jars/kafka/``.
Each broker has a name and a state directory (``<base>/<name>``, default
``.state/kafka/default`` under the repo root) holding its ``server.properties``, a log4j2
config, the data (``data/``), its log (``kafka.log``) and ``broker.json`` with the pid and
bootstrap address, so a later ``status``/``stop`` (another process) finds it.

Ports are free loopback ports picked at start (reused on restart when still free), so
several brokers (a developer's and a test session's) can run side by side. The JVM is the
leader of its own process group; ``stop`` signals the whole group (SIGTERM, then SIGKILL).

CLI (``shardmerge kafka ...`` or ``python -m devkit.kafka_local ...``):
``start|stop|status [--name NAME] [--base-dir DIR]``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import logging
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from devkit import procs
from shardmerge.errors import ShardMergeError
from streaming.runtime._jars import jars

__all__ = ["KafkaBroker", "KafkaLocalError", "cli_main", "running", "start", "status", "stop"]

DEFAULT_BASE_DIR = Path(".state/kafka")
_STATE_FILE = "broker.json"
_HEAP = "-Xmx512m"
_log = logging.getLogger(__name__)

_SERVER_PROPERTIES = """\
# Written by devkit/kafka_local.py at each start; edits are lost.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{broker_port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={data}
num.partitions=1
# One broker: one replica of every internal topic. Few partitions, so that the first
# consumer group does not wait for 50 __consumer_offsets partitions to be created.
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# CDC topics are the job's source of truth for replays: never expire them here.
log.retention.ms=-1
"""

# Everything to stdout, which start() sends to kafka.log. Log4j's own shutdown hook is off:
# it raced Kafka's and dropped the shutdown lines. Config dumps (every client and server
# config, several times; the file is server.properties) and request chatter are off too.
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
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
"""


class KafkaLocalError(procs.ProcessError):
    """The local broker could not be started or stopped; the message says why and what to do."""


@dataclass
class KafkaBroker:
    """A running local broker. ``stop()`` ends it; usable as a context manager."""

    name: str
    state_dir: Path
    bootstrap: str
    pid: int
    log_path: Path
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the broker's process group, SIGKILL it after ``timeout`` seconds."""
        procs.terminate([self.pid], timeout)
        (self.state_dir / _STATE_FILE).unlink(missing_ok=True)

    def __enter__(self) -> KafkaBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def state_dir(name: str = "default", base_dir: str | Path | None = None) -> Path:
    """``<base_dir>/<name>``; a relative ``base_dir`` is taken from the repo root."""
    return procs.state_dir(name, base_dir, DEFAULT_BASE_DIR)


def start(
    name: str = "default",
    base_dir: str | Path | None = None,
    *,
    timeout: float = 90.0,
    die_with_parent: bool = False,
) -> KafkaBroker:
    """Start the broker (or return it if it already runs) and wait until it answers.

    ``die_with_parent``: the kernel SIGTERMs the broker when the calling thread's process
    dies, even by SIGKILL (tests; a CLI-started broker must outlive the CLI).
    """
    if (running_now := status(name, base_dir)) is not None:
        return running_now
    classpath = f"{jars('kafka')[0].parent}/*"
    java = procs.java()
    sdir = state_dir(name, base_dir)
    sdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    taken_lines: list[str] = []
    for _ in range(_BIND_ATTEMPTS):
        try:
            broker = _launch(name, sdir, java, classpath, timeout, die_with_parent)
        except _PortTaken as taken:
            # Another process bound a port between its pick and the broker's bind: pick
            # new ports (the record goes, so none of the old ones is reused) and go again.
            procs.forget_ports(sdir)
            taken_lines.append(taken.port_line)
            _log.warning("kafka %s: %s; starting again on new ports", name, taken.port_line)
            continue
        _log.info(
            "kafka %s ready in %.1fs at %s", name, time.monotonic() - started, broker.bootstrap
        )
        return broker
    raise KafkaLocalError(
        f"kafka {name}: a port was taken at each of {_BIND_ATTEMPTS} starts: "
        + "; ".join(taken_lines)
        + f"; log {sdir / 'kafka.log'}"
    )


def status(name: str = "default", base_dir: str | Path | None = None) -> KafkaBroker | None:
    """The running broker recorded in the state dir, or None (no record, or its pid is gone)."""
    sdir = state_dir(name, base_dir)
    try:
        info = json.loads((sdir / _STATE_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    pid = int(info["pid"])
    if not _is_our_broker(pid, sdir):
        return None
    return KafkaBroker(name, sdir, info["bootstrap"], pid, Path(info["log_path"]))


def stop(name: str = "default", base_dir: str | Path | None = None, timeout: float = 30.0) -> bool:
    """Stop the named broker; False if none was running."""
    broker = status(name, base_dir)
    (state_dir(name, base_dir) / _STATE_FILE).unlink(missing_ok=True)
    if broker is None:
        return False
    broker.stop(timeout)
    return True


@contextlib.contextmanager
def running(name: str = "default", base_dir: str | Path | None = None) -> Iterator[KafkaBroker]:
    """A broker for the duration of the block; stopped on exit, also when the block fails
    (also one that was already running under this name and base dir)."""
    broker = start(name, base_dir, die_with_parent=True)
    try:
        yield broker
    finally:
        broker.stop()


# --- internals ---------------------------------------------------------------------------


class _PortTaken(KafkaLocalError):
    """The broker exited because one of its ports was bound by another process."""

    def __init__(self, message: str, port_line: str) -> None:
        super().__init__(message)
        self.port_line = port_line


_BIND_ATTEMPTS = 3


def _launch(
    name: str, sdir: Path, java: str, classpath: str, timeout: float, die_with_parent: bool
) -> KafkaBroker:
    """One start of the JVM on freshly picked (or the last start's) ports, until it answers."""
    ports = procs.pick_ports(sdir, ["broker", "controller"])
    props = _write_config(sdir, ports["broker"], ports["controller"])
    log_path = sdir / "kafka.log"
    _format_storage(java, classpath, sdir, props)
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                java,
                _HEAP,
                # one broker of a small heap: the serial collector spends the least CPU
                "-XX:+UseSerialGC",
                "-XX:+ExitOnOutOfMemoryError",
                "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={sdir / 'log4j2.properties'}",
                "-cp",
                classpath,
                "kafka.Kafka",
                str(props),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=sdir,
            start_new_session=True,  # own process group: stop() signals the group
            preexec_fn=procs.parent_death_signal() if die_with_parent else None,
        )
    broker = KafkaBroker(name, sdir, f"127.0.0.1:{ports['broker']}", proc.pid, log_path, proc)
    # Recorded before the wait, so that `stop` finds a broker whose starter died meanwhile.
    procs.write_json(
        sdir / _STATE_FILE,
        {"name": name, "pid": proc.pid, "bootstrap": broker.bootstrap, "log_path": str(log_path)},
    )
    try:
        _wait_ready(broker, proc, timeout)
    except KafkaLocalError as failed:
        broker.stop(10.0)
        taken = _port_taken_line(log_path) if proc.poll() is not None else None
        if taken is not None:
            raise _PortTaken(str(failed), taken) from failed
        raise
    except BaseException:
        broker.stop(10.0)
        raise
    return broker


def _port_taken_line(log_path: Path) -> str | None:
    """The log's "failed to bind to host:port" line, when the JVM died of a taken port."""
    try:
        text = log_path.read_text(errors="replace")
    except FileNotFoundError:
        return None
    for line in text.splitlines():
        if "failed to bind to" in line and "Address already in use" in line:
            return line[line.index("Socket server") :] if "Socket server" in line else line
    return None


def _write_config(sdir: Path, broker_port: int, controller_port: int) -> Path:
    props = sdir / "server.properties"
    props.write_text(
        _SERVER_PROPERTIES.format(
            broker_port=broker_port, controller_port=controller_port, data=sdir / "data"
        )
    )
    (sdir / "log4j2.properties").write_text(_LOG4J2_PROPERTIES)
    return props


def _format_storage(java: str, classpath: str, sdir: Path, props: Path) -> None:
    """Format ``data/`` once with a new cluster id (a JVM run of ~1-2 s, skipped later)."""
    if (sdir / "data" / "meta.properties").exists():
        return
    cmd = [
        java,
        "-Xmx256m",
        f"-Dlog4j2.configurationFile={sdir / 'log4j2.properties'}",
        "-cp",
        classpath,
        "kafka.tools.StorageTool",
        "format",
        "-t",
        _cluster_id(),
        "-c",
        str(props),
        "--ignore-formatted",
    ]
    log_path = sdir / "format.log"
    with log_path.open("wb") as log:
        done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise KafkaLocalError(
            f"formatting {sdir / 'data'} failed (exit {done.returncode}); "
            f"delete {sdir} and start again. Log tail:\n{procs.tail(log_path)}"
        )


def _cluster_id() -> str:
    """A Kafka ``Uuid`` string (URL-safe base64 of 16 bytes), as ``StorageTool random-uuid``
    prints, made here to save a JVM start. Kafka never hands out ids starting with '-'."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


def _wait_ready(broker: KafkaBroker, proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Poll metadata until the broker lists itself; fail early if the JVM exits."""
    # log_level 0: no "Connection refused" lines from librdkafka while the JVM boots.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise KafkaLocalError(
                f"kafka {broker.name} exited with {proc.returncode} while starting; "
                f"log {broker.log_path}, tail:\n{procs.tail(broker.log_path)}"
            )
        with contextlib.suppress(KafkaException):
            if admin.list_topics(timeout=2).brokers:
                return
        time.sleep(0.2)
    raise KafkaLocalError(
        f"kafka {broker.name} did not answer at {broker.bootstrap} within {timeout:.0f}s; "
        f"log {broker.log_path}, tail:\n{procs.tail(broker.log_path)}"
    )


def _is_our_broker(pid: int, sdir: Path) -> bool:
    """The pid runs kafka.Kafka with this state dir's config (a recycled pid does not)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return False
    return (
        procs.alive(pid)
        and b"kafka.Kafka" in cmdline
        and str(sdir / "server.properties").encode() in cmdline
    )


def cli_main(argv: list[str]) -> int:
    """``shardmerge kafka start|stop|status``; ``argv`` is what follows ``kafka``.

    Exit codes: 0 ok (status: running), 1 error, 3 status: not running.
    """
    parser = argparse.ArgumentParser(
        prog="shardmerge kafka", description="A local single-node Kafka broker (KRaft)."
    )
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--name", default="default", help="broker name (default: default)")
    parser.add_argument(
        "--base-dir",
        default=None,
        help=f"state base dir, relative to the repo root (default: {DEFAULT_BASE_DIR})",
    )
    args = parser.parse_args(argv)
    where = state_dir(args.name, args.base_dir)
    try:
        if args.action == "start":
            broker = start(args.name, args.base_dir)
            print(
                f"kafka {args.name}: running at {broker.bootstrap} (pid {broker.pid}, "
                f"log {broker.log_path})"
            )
        elif args.action == "stop":
            was = stop(args.name, args.base_dir)
            print(f"kafka {args.name}: {'stopped' if was else 'was not running'} ({where})")
        else:
            found = status(args.name, args.base_dir)
            if found is None:
                print(f"kafka {args.name}: not running ({where})")
                return 3
            print(
                f"kafka {args.name}: running at {found.bootstrap} (pid {found.pid}, "
                f"log {found.log_path})"
            )
    except ShardMergeError as err:
        print(f"shardmerge kafka {args.action}: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(cli_main(sys.argv[1:]))
