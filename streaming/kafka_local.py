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

CLI (``shardmerge kafka ...`` or ``python -m streaming.kafka_local ...``):
``start|stop|status [--name NAME] [--base-dir DIR]``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import ctypes
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from schemas.errors import ShardMergeError
from streaming._jars import REPO_ROOT, jars

__all__ = ["KafkaBroker", "KafkaLocalError", "cli_main", "running", "start", "status", "stop"]

DEFAULT_BASE_DIR = Path(".state/kafka")
_STATE_FILE = "broker.json"
_HEAP = "-Xmx512m"
_log = logging.getLogger(__name__)

_SERVER_PROPERTIES = """\
# Written by streaming/kafka_local.py at each start; edits are lost.
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


class KafkaLocalError(ShardMergeError):
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
        _terminate(self.pid, self._proc, timeout)
        (self.state_dir / _STATE_FILE).unlink(missing_ok=True)

    def __enter__(self) -> KafkaBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def state_dir(
    name: str = "default", base_dir: str | Path | None = None, default: Path = DEFAULT_BASE_DIR
) -> Path:
    """``<base_dir>/<name>``; a relative ``base_dir`` is taken from the repo root."""
    base = REPO_ROOT / (default if base_dir is None else Path(base_dir))
    return (base / name).resolve()


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
    java = _java()
    sdir = state_dir(name, base_dir)
    sdir.mkdir(parents=True, exist_ok=True)
    broker_port, controller_port = _ports(sdir)
    props = _write_config(sdir, broker_port, controller_port)
    log_path = sdir / "kafka.log"
    _format_storage(java, classpath, sdir, props)

    started = time.monotonic()
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                java,
                _HEAP,
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
            preexec_fn=_parent_death_signal() if die_with_parent else None,
        )
    broker = KafkaBroker(name, sdir, f"127.0.0.1:{broker_port}", proc.pid, log_path, proc)
    # Recorded before the wait, so that `stop` finds a broker whose starter died meanwhile.
    _write_json(
        sdir / _STATE_FILE,
        {"name": name, "pid": proc.pid, "bootstrap": broker.bootstrap, "log_path": str(log_path)},
    )
    try:
        _wait_ready(broker, proc, timeout)
    except BaseException:
        broker.stop(10.0)
        raise
    _log.info("kafka %s ready in %.1fs at %s", name, time.monotonic() - started, broker.bootstrap)
    return broker


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


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise KafkaLocalError("java not found: install Java 17 (apt-get install openjdk-17-jre)")
    return java


def _parent_death_signal() -> Callable[[], None]:
    """A preexec_fn asking Linux (prctl PR_SET_PDEATHSIG) to SIGTERM the child when we die."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork

    def set_signal() -> None:
        prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG

    return set_signal


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _ports(sdir: Path) -> tuple[int, int]:
    """The ports of the last run if both are still free (stable bootstrap), else new ones."""
    with contextlib.suppress(FileNotFoundError, json.JSONDecodeError, KeyError):
        old = json.loads((sdir / "ports.json").read_text())
        ports = (int(old["broker"]), int(old["controller"]))
        if all(map(_port_free, ports)):
            return ports
    broker = _free_port()
    controller = _free_port()
    while controller == broker:
        controller = _free_port()
    _write_json(sdir / "ports.json", {"broker": broker, "controller": controller})
    return broker, controller


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
            f"delete {sdir} and start again. Log tail:\n{_tail(log_path)}"
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
                f"log {broker.log_path}, tail:\n{_tail(broker.log_path)}"
            )
        with contextlib.suppress(KafkaException):
            if admin.list_topics(timeout=2).brokers:
                return
        time.sleep(0.2)
    raise KafkaLocalError(
        f"kafka {broker.name} did not answer at {broker.bootstrap} within {timeout:.0f}s; "
        f"log {broker.log_path}, tail:\n{_tail(broker.log_path)}"
    )


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def _alive(pid: int) -> bool:
    """True while any thread of ``pid`` runs. Reaps it if it is our child; a zombie whose
    threads are all gone counts as gone (its parent, maybe init, has yet to reap it)."""
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        threads = len(os.listdir(f"/proc/{pid}/task"))
    except (FileNotFoundError, ProcessLookupError):
        return False
    # A JVM's main thread can turn Z before its other threads have finished exiting.
    return state != "Z" or threads > 1


def _is_our_broker(pid: int, sdir: Path) -> bool:
    """The pid runs kafka.Kafka with this state dir's config (a recycled pid does not)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return False
    return (
        _alive(pid)
        and b"kafka.Kafka" in cmdline
        and str(sdir / "server.properties").encode() in cmdline
    )


def _terminate(pid: int, proc: subprocess.Popen[bytes] | None, timeout: float) -> None:
    """SIGTERM the process group, wait, then SIGKILL it; fail loudly if the pid survives."""

    def gone() -> bool:
        return proc.poll() is not None if proc is not None else not _alive(pid)

    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, sig)
        deadline = time.monotonic() + wait
        while not gone() and time.monotonic() < deadline:
            time.sleep(0.1)
        if gone():
            break
    with contextlib.suppress(ProcessLookupError):  # anything left in the group
        os.killpg(pid, signal.SIGKILL)
    if not gone():
        raise KafkaLocalError(f"kafka pid {pid} survived SIGKILL; check `ps -o pid,stat {pid}`")


def _write_json(path: Path, data: dict[str, object]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)


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
