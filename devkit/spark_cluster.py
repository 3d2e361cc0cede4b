"""A local Spark standalone cluster: one master and one worker from the Spark pyspark ships.

Why: under spark-submit the job must take the session Spark gives it, and its executors
run in their own JVMs, which read Kafka and write the lake with only the jars and settings
the submit command ships. A cluster on loopback shows exactly that. Kept small for a shared
machine: one worker with one core and ``memory`` for executors.

Both run as ``$SPARK_HOME/bin/spark-class org.apache.spark.deploy.{master.Master,
worker.Worker}`` (SPARK_HOME: pyspark's package folder), each the leader of its own process
group, recorded in ``<base>/<name>/cluster.json`` (default ``.state/spark-cluster``);
worker and application logs go to ``<base>/<name>/work``.

CLI (``shardmerge cluster ...``): ``start|stop|status [--name NAME] [--base-dir DIR]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from devkit import procs
from shardmerge.errors import ShardMergeError

__all__ = ["Cluster", "cli_main", "running", "spark_home", "start", "status", "stop"]

DEFAULT_BASE_DIR = Path(".state/spark-cluster")
_STATE_FILE = "cluster.json"


def spark_home() -> Path:
    """The Spark that pyspark ships (its package folder holds bin/ and jars/)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class Cluster:
    name: str
    state_dir: Path
    master_url: str  # spark://127.0.0.1:PORT
    master_ui: str  # http://127.0.0.1:PORT
    pids: list[int]

    def stop(self, timeout: float = 20.0) -> None:
        procs.terminate(self.pids, timeout)
        (self.state_dir / _STATE_FILE).unlink(missing_ok=True)

    def state(self) -> dict[str, object]:
        """The master's view (its web UI's JSON): workers, cores, running applications."""
        with urllib.request.urlopen(self.master_ui + "/json/", timeout=10) as answer:
            data: dict[str, object] = json.loads(answer.read())
        return data


def _spawn(args: list[str], log_path: Path, sdir: Path, die_with_parent: bool) -> int:
    env = dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1")
    env["SPARK_NO_DAEMONIZE"] = "1"
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=sdir,
            env=env,
            start_new_session=True,
            preexec_fn=procs.parent_death_signal() if die_with_parent else None,
        )
    return proc.pid


def start(
    name: str = "default",
    base_dir: str | Path | None = None,
    *,
    memory: str = "1g",
    timeout: float = 180.0,
    die_with_parent: bool = False,
) -> Cluster:
    """Start master and worker (or return the running cluster); wait until the worker
    has registered with the master."""
    if (found := status(name, base_dir)) is not None:
        return found
    sdir = state_dir(name, base_dir)
    (sdir / "work").mkdir(parents=True, exist_ok=True)
    ports = procs.pick_ports(sdir, ["master", "master_ui", "worker", "worker_ui"])
    master_url = f"spark://127.0.0.1:{ports['master']}"
    master = _spawn(
        [
            *("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"),
            *("--port", str(ports["master"]), "--webui-port", str(ports["master_ui"])),
        ],
        sdir / "master.log",
        sdir,
        die_with_parent,
    )
    worker = _spawn(
        [
            *("org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1"),
            *("--port", str(ports["worker"]), "--webui-port", str(ports["worker_ui"])),
            *("--cores", "1", "--memory", memory, "--work-dir", str(sdir / "work")),
            master_url,
        ],
        sdir / "worker.log",
        sdir,
        die_with_parent,
    )
    cluster = Cluster(
        name, sdir, master_url, f"http://127.0.0.1:{ports['master_ui']}", [master, worker]
    )
    procs.write_json(
        sdir / _STATE_FILE,
        {"master_url": master_url, "master_ui": cluster.master_ui, "pids": cluster.pids},
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not all(procs.alive(p) for p in cluster.pids):
            cluster.stop()
            raise procs.ProcessError(
                f"spark cluster {name}: master or worker exited while starting; "
                f"{sdir}/master.log:\n{procs.tail(sdir / 'master.log')}\n"
                f"{sdir}/worker.log:\n{procs.tail(sdir / 'worker.log')}"
            )
        with contextlib.suppress(OSError, ValueError):
            if cluster.state().get("aliveworkers", 0):
                return cluster
        time.sleep(0.5)
    cluster.stop()
    raise procs.ProcessError(
        f"spark cluster {name}: no worker registered within {timeout:.0f}s; "
        f"{sdir}/worker.log:\n{procs.tail(sdir / 'worker.log')}"
    )


def state_dir(name: str = "default", base_dir: str | Path | None = None) -> Path:
    return procs.state_dir(name, base_dir, DEFAULT_BASE_DIR)


def status(name: str = "default", base_dir: str | Path | None = None) -> Cluster | None:
    sdir = state_dir(name, base_dir)
    try:
        info = json.loads((sdir / _STATE_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    pids = [int(p) for p in info["pids"]]
    if not all(procs.alive(p) and procs.leads_group(p) for p in pids):
        return None
    return Cluster(name, sdir, info["master_url"], info["master_ui"], pids)


def stop(name: str = "default", base_dir: str | Path | None = None) -> bool:
    cluster = status(name, base_dir)
    (state_dir(name, base_dir) / _STATE_FILE).unlink(missing_ok=True)
    if cluster is None:
        return False
    cluster.stop()
    return True


@contextlib.contextmanager
def running(
    name: str = "default", base_dir: str | Path | None = None, *, memory: str = "1g"
) -> Iterator[Cluster]:
    """A cluster for the duration of the block; stopped on exit, also when it fails."""
    cluster = start(name, base_dir, memory=memory, die_with_parent=True)
    try:
        yield cluster
    finally:
        cluster.stop()


def cli_main(argv: list[str]) -> int:
    """``shardmerge cluster start|stop|status``. Exit codes: 0 ok, 1 error, 3 not running."""
    parser = argparse.ArgumentParser(
        prog="shardmerge cluster",
        description="A local Spark standalone cluster: one master, one worker (1 core).",
    )
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--name", default="default")
    parser.add_argument("--base-dir", default=None, help=f"default: {DEFAULT_BASE_DIR}")
    parser.add_argument("--memory", default="1g", help="the worker's memory for executors")
    args = parser.parse_args(argv)
    try:
        if args.action == "start":
            c = start(args.name, args.base_dir, memory=args.memory)
            print(f"cluster {args.name}: master {c.master_url}, web UI {c.master_ui}")
        elif args.action == "stop":
            was = stop(args.name, args.base_dir)
            print(f"cluster {args.name}: {'stopped' if was else 'was not running'}")
        elif (c := status(args.name, args.base_dir)) is None:
            print(f"cluster {args.name}: not running")
            return 3
        else:
            print(f"cluster {args.name}: master {c.master_url}, web UI {c.master_ui}")
    except ShardMergeError as err:
        print(f"shardmerge cluster {args.action}: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(cli_main(sys.argv[1:]))
