"""A local S3-compatible object store (moto's server) on loopback, for tests and development.

Why: the job must run with its checkpoint and lake on an object store, which has no atomic
rename and no partially visible files; a real S3 API server shows what S3A does there. The
server is the ``moto[server]`` package of the dev extra; it keeps objects in memory, so a
stop forgets everything (a test's store lives as long as the test session).

Like the Kafka broker (devkit/kafka_local.py) it runs as the leader of its own process
group with a state directory (``<base>/<name>``, default ``.state/s3/default``) holding
``s3.json`` (pid, endpoint) and ``s3.log``. ``hadoop_conf(endpoint)`` gives the S3A settings
that reach it (as ``spark.hadoop.*`` for spark-submit, see docs/cluster.md).

CLI (``shardmerge s3 ...``): ``start|stop|status [--name NAME] [--base-dir DIR]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from devkit import procs
from shardmerge.errors import ShardMergeError

__all__ = ["ObjectStore", "cli_main", "hadoop_conf", "running", "start", "status", "stop"]

DEFAULT_BASE_DIR = Path(".state/s3")
_STATE_FILE = "s3.json"
# moto accepts any key pair; these name the local store in logs and confs.
ACCESS_KEY, SECRET_KEY, REGION = "shardmerge-local", "shardmerge-local-secret", "us-east-1"


@dataclass
class ObjectStore:
    name: str
    state_dir: Path
    endpoint: str  # http://127.0.0.1:PORT
    pid: int
    log_path: Path

    def stop(self, timeout: float = 15.0) -> None:
        procs.terminate([self.pid], timeout)
        (self.state_dir / _STATE_FILE).unlink(missing_ok=True)

    def create_bucket(self, bucket: str) -> str:
        """Create ``bucket`` (S3 CreateBucket, path style) and return ``s3a://bucket``."""
        request = urllib.request.Request(f"{self.endpoint}/{bucket}", method="PUT")
        with urllib.request.urlopen(request, timeout=30) as answer:
            if answer.status != 200:
                raise procs.ProcessError(f"creating bucket {bucket}: HTTP {answer.status}")
        return f"s3a://{bucket}"

    def hadoop_conf(self) -> dict[str, str]:
        return hadoop_conf(self.endpoint)


def hadoop_conf(endpoint: str) -> dict[str, str]:
    """S3A settings for this store (Hadoop keys; prefix ``spark.hadoop.`` for Spark conf)."""
    return {
        "fs.s3a.endpoint": endpoint,
        "fs.s3a.endpoint.region": REGION,
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.access.key": ACCESS_KEY,
        "fs.s3a.secret.key": SECRET_KEY,
        "fs.s3a.aws.credentials.provider": (
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        ),
    }


def state_dir(name: str = "default", base_dir: str | Path | None = None) -> Path:
    return procs.state_dir(name, base_dir, DEFAULT_BASE_DIR)


def start(
    name: str = "default",
    base_dir: str | Path | None = None,
    *,
    timeout: float = 60.0,
    die_with_parent: bool = False,
) -> ObjectStore:
    """Start the store (or return the running one) and wait until it answers."""
    if (found := status(name, base_dir)) is not None:
        return found
    sdir = state_dir(name, base_dir)
    sdir.mkdir(parents=True, exist_ok=True)
    port = procs.pick_ports(sdir, ["s3"])["s3"]
    log_path = sdir / "s3.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=sdir,
            start_new_session=True,
            preexec_fn=procs.parent_death_signal() if die_with_parent else None,
        )
    store = ObjectStore(name, sdir, f"http://127.0.0.1:{port}", proc.pid, log_path)
    procs.write_json(
        sdir / _STATE_FILE,
        {"pid": proc.pid, "endpoint": store.endpoint, "log_path": str(log_path)},
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            store.stop()
            raise procs.ProcessError(
                f"s3 {name} exited with {proc.returncode} while starting; "
                f"tail of {log_path}:\n{procs.tail(log_path)}"
            )
        # OSError: refused while it boots, or a read timeout on a busy machine
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(store.endpoint + "/", timeout=10),
        ):
            return store
        time.sleep(0.2)
    store.stop()
    raise procs.ProcessError(
        f"s3 {name} did not answer at {store.endpoint} within {timeout:.0f}s; "
        f"tail of {log_path}:\n{procs.tail(log_path)}"
    )


def status(name: str = "default", base_dir: str | Path | None = None) -> ObjectStore | None:
    sdir = state_dir(name, base_dir)
    try:
        info = json.loads((sdir / _STATE_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    pid = int(info["pid"])
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return None
    if not (procs.alive(pid) and procs.leads_group(pid) and b"moto.server" in cmdline):
        return None  # gone, or a recycled pid
    return ObjectStore(name, sdir, info["endpoint"], pid, Path(info["log_path"]))


def stop(name: str = "default", base_dir: str | Path | None = None) -> bool:
    store = status(name, base_dir)
    (state_dir(name, base_dir) / _STATE_FILE).unlink(missing_ok=True)
    if store is None:
        return False
    store.stop()
    return True


@contextlib.contextmanager
def running(name: str = "default", base_dir: str | Path | None = None) -> Iterator[ObjectStore]:
    """A store for the duration of the block; stopped on exit, also when the block fails."""
    store = start(name, base_dir, die_with_parent=True)
    try:
        yield store
    finally:
        store.stop()


def cli_main(argv: list[str]) -> int:
    """``shardmerge s3 start|stop|status``. Exit codes: 0 ok, 1 error, 3 not running."""
    parser = argparse.ArgumentParser(
        prog="shardmerge s3", description="A local S3-compatible object store (moto)."
    )
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--name", default="default")
    parser.add_argument("--base-dir", default=None, help=f"default: {DEFAULT_BASE_DIR}")
    args = parser.parse_args(argv)
    try:
        if args.action == "start":
            store = start(args.name, args.base_dir)
            print(f"s3 {args.name}: running at {store.endpoint} (pid {store.pid})")
        elif args.action == "stop":
            print(f"s3 {args.name}: {'stopped' if stop(args.name, args.base_dir) else 'idle'}")
        elif (found := status(args.name, args.base_dir)) is None:
            print(f"s3 {args.name}: not running")
            return 3
        else:
            print(f"s3 {args.name}: running at {found.endpoint} (pid {found.pid})")
    except ShardMergeError as err:
        print(f"shardmerge s3 {args.action}: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(cli_main(sys.argv[1:]))
