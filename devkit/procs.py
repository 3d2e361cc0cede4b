"""Process supervision for the local services (Kafka broker, MariaDB, Kafka Connect, ...).

Every service runs as the leader of its own process group, records its pid and ports in a
state directory (``<base>/<name>`` under the repo root) so a later ``status``/``stop`` from
another process finds it, and dies with its parent when asked (Linux PR_SET_PDEATHSIG).
``terminate`` signals whole groups (SIGTERM, then SIGKILL) and never a recycled pid.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import random
import shutil
import signal
import socket
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from shardmerge.errors import ShardMergeError
from streaming.runtime._jars import REPO_ROOT

__all__ = [
    "ProcessError",
    "alive",
    "forget_ports",
    "free_port",
    "java",
    "leads_group",
    "parent_death_signal",
    "pick_ports",
    "port_free",
    "state_dir",
    "tail",
    "terminate",
    "write_json",
]


class ProcessError(ShardMergeError):
    """A local service could not be started or stopped."""


def state_dir(name: str, base_dir: str | Path | None, default: Path) -> Path:
    """``<base_dir>/<name>``; a relative ``base_dir`` (or ``default``) is under the repo root."""
    base = REPO_ROOT / (default if base_dir is None else Path(base_dir))
    return (base / name).resolve()


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).exists():
        raise ProcessError("java not found: install Java 17 (apt-get install openjdk-17-jre)")
    return found


def parent_death_signal() -> Callable[[], None]:
    """A preexec_fn asking Linux (prctl PR_SET_PDEATHSIG) to SIGTERM the child when we die."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork

    def set_signal() -> None:
        prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG

    return set_signal


# Listening ports are drawn from below the kernel's ephemeral range: a port the kernel
# handed out by bind(0) lies inside that range, where any outgoing connection (Spark's,
# a Kafka client's, another test worker's) may take it between the pick and the service's
# own bind; below it only a listener can, and several workers drawing at random rarely
# meet. Where the range leaves too little room below it, bind(0) is the fallback.
_LISTEN_FLOOR = 15000
_ATTEMPTS = 200


def _ephemeral_floor() -> int:
    try:
        low = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0]
    except (FileNotFoundError, IndexError):  # not Linux: the IANA dynamic range
        return 49152
    return int(low)


def free_port() -> int:
    """A loopback port free now, outside the ephemeral range where the kernel allows."""
    top = _ephemeral_floor()
    if top - _LISTEN_FLOOR >= 1000:
        draw = random.SystemRandom()
        for _ in range(_ATTEMPTS):
            port = draw.randrange(_LISTEN_FLOOR, top)
            if port_free(port):
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_free(port: int) -> bool:
    with socket.socket() as s:
        # As servers bind (Java's ServerSocket too): connections of the service's last run
        # in TIME_WAIT do not make its port taken, so a restarted broker keeps its address.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def pick_ports(sdir: Path, roles: Iterable[str]) -> dict[str, int]:
    """One free loopback port per role; the ports of the last start when still free (so a
    restarted service keeps its address), recorded in ``sdir/ports.json``."""
    roles = list(roles)
    record = sdir / _PORTS_RECORD
    with contextlib.suppress(FileNotFoundError, json.JSONDecodeError, ValueError):
        # no record, or one a crash left half-written: pick new ports
        old = json.loads(record.read_text())
        if set(old) == set(roles) and all(port_free(int(p)) for p in old.values()):
            return {k: int(v) for k, v in old.items()}
    ports: dict[str, int] = {}
    for role in roles:
        port = free_port()
        while port in ports.values():
            port = free_port()
        ports[role] = port
    write_json(record, dict(ports))
    return ports


def forget_ports(sdir: Path) -> None:
    """Drop the record of the last start's ports: the next :func:`pick_ports` draws anew."""
    (sdir / _PORTS_RECORD).unlink(missing_ok=True)


_PORTS_RECORD = "ports.json"


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def alive(pid: int) -> bool:
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


def leads_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False


def terminate(pids: Iterable[int], timeout: float) -> None:
    """SIGTERM each pid's process group, wait, then SIGKILL; fail loudly if one survives.
    A recycled pid is never signalled: only pids that lead their own group are ours."""
    ours = [p for p in pids if alive(p) and leads_group(p)]
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        for pid in ours:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, sig)
        deadline = time.monotonic() + wait
        while any(map(alive, ours)) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not any(map(alive, ours)):
            break
    for pid in ours:  # anything left in the groups
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    if survivors := [p for p in ours if alive(p)]:
        raise ProcessError(f"pids {survivors} survived SIGKILL; check `ps -o pid,stat,cmd`")


def write_json(path: Path, data: dict[str, object]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)
