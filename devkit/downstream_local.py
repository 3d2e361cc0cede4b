"""Local downstream databases for the database sink's tests: a MariaDB (a second
``mariadbd`` beside the upstream's, Debian's package) and a PostgreSQL (Debian's
``postgresql``), each on a free loopback port with its data in a folder of the caller's,
no system service. ``scripts/install-databases`` installs both.

PostgreSQL refuses to run as root: when this process is root, ``initdb`` and ``postgres``
run as the ``postgres`` user Debian's package creates (``runuser``), with their data and
socket in a folder of its own under the system's temp dir (a root-only folder such as
pytest's would not let it in), removed on exit.

    with downstream_local.postgresql(tmp / "pg") as pg:
        pg.execute("CREATE SCHEMA shop")
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devkit import procs, upstream_local
from schemas.model import quote

__all__ = ["DownstreamError", "Postgres", "empty", "mariadb", "postgresql", "sink_settings"]


class DownstreamError(procs.ProcessError):
    """A local downstream database could not be started or used; the message says which
    and ends with its log's last lines."""


@contextlib.contextmanager
def mariadb(workdir: Path, timeout: float = 60.0) -> Iterator[upstream_local.Server]:
    """A ``mariadbd`` of its own on a free port (users as the upstream's: ``admin``),
    stopped on exit."""
    workdir.mkdir(parents=True, exist_ok=True)
    proc = upstream_local._install_db(workdir)
    upstream_local._wait_install(workdir, proc)
    server_proc, server = upstream_local._start_mariadbd(
        workdir, "downstream", 900, procs.free_port(), procs.parent_death_signal(), "mariadb"
    )
    try:
        upstream_local._wait_mariadb(server, server_proc, timeout)
        yield server
    finally:
        procs.terminate([server.pid], 30.0)


@dataclass
class Postgres:
    """A running PostgreSQL: ``port`` on 127.0.0.1, superuser ``postgres``, its unix
    socket in ``socket_dir``."""

    port: int
    socket_dir: Path
    pid: int
    log_path: Path

    def execute(self, sql: str, database: str = "postgres") -> str:
        """Run statements with ``psql`` (stops at the first error, which it raises with
        psql's message); what psql printed, unaligned, tuples only."""
        done = subprocess.run(
            [
                _tool("psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                "-h", str(self.socket_dir), "-p", str(self.port), "-U", "postgres",
                "-d", database, "-c", sql,
            ],
            capture_output=True,
            text=True,
            check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise DownstreamError(f"psql failed on {sql!r}: {done.stderr.strip()}")
        return done.stdout


def _tool(name: str) -> str:
    """A PostgreSQL program: on PATH, or in Debian's versioned folder."""
    found = shutil.which(name) or next(
        iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None
    )
    if found is None:
        raise DownstreamError(f"{name} not found: run scripts/install-databases")
    return found


def _as_postgres() -> list[str]:
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


@contextlib.contextmanager
def postgresql(workdir: Path, timeout: float = 60.0) -> Iterator[Postgres]:
    """``initdb`` then ``postgres`` on a free port, trust auth on loopback and the
    socket, stopped on exit."""
    workdir.mkdir(parents=True, exist_ok=True)
    home = workdir
    if os.geteuid() == 0:
        home = Path(tempfile.mkdtemp(prefix="shardmerge-postgres-"))
        shutil.chown(home, "postgres")
    try:
        yield from _postgresql(workdir, home, timeout)
    finally:
        if home != workdir:
            shutil.rmtree(home, ignore_errors=True)


def _postgresql(workdir: Path, home: Path, timeout: float) -> Iterator[Postgres]:
    data = home / "data"
    log_path = workdir / "postgres.log"
    if not (data / "PG_VERSION").exists():
        init = subprocess.run(
            [*_as_postgres(), _tool("initdb"), "-D", str(data), "-U", "postgres",
             "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8"],
            capture_output=True,
            text=True,
            check=False,
        )  # fmt: skip
        if init.returncode != 0:
            raise DownstreamError(f"initdb {data} failed: {init.stderr.strip()[-2000:]}")
    port = procs.free_port()
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [*_as_postgres(), _tool("postgres"), "-D", str(data), "-p", str(port),
             "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={home}",
             "-c", "shared_buffers=16MB", "-c", "fsync=on"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=procs.parent_death_signal(),
        )  # fmt: skip
    server = Postgres(port, home, proc.pid, log_path)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise DownstreamError(
                    f"postgres on port {port} exited with {proc.returncode} while starting; "
                    f"log {log_path}, tail:\n{procs.tail(log_path)}"
                )
            try:
                server.execute("SELECT 1")
                break
            except DownstreamError as e:
                if time.monotonic() > deadline:
                    raise DownstreamError(
                        f"postgres on port {port} took no connection within {timeout:.0f}s "
                        f"({e}); log {log_path}, tail:\n{procs.tail(log_path)}"
                    ) from e
                time.sleep(0.2)
        yield server
    finally:
        procs.terminate([proc.pid], 30.0)


# A running server's emptying, by the URL of its sink settings (registered while
# sink_settings runs it): what empty() calls.
_EMPTIERS: dict[str, Callable[[], None]] = {}

# PostgreSQL drops every schema a run made and the tables in ``public``; %I quotes each
# name on the server.
_EMPTY_POSTGRES = """DO $$ DECLARE n text; BEGIN
  FOR n IN SELECT nspname FROM pg_namespace
           WHERE nspname NOT LIKE 'pg\\_%' AND nspname NOT IN ('information_schema', 'public')
  LOOP EXECUTE format('DROP SCHEMA %I CASCADE', n); END LOOP;
  FOR n IN SELECT tablename FROM pg_tables WHERE schemaname = 'public'
  LOOP EXECUTE format('DROP TABLE public.%I CASCADE', n); END LOOP;
END $$"""


def _empty_mariadb(server: upstream_local.Server) -> None:
    system = set(upstream_local.SYSTEM_DATABASES.split(","))
    for (name,) in server.execute("SHOW DATABASES"):
        if name.lower() not in system:
            server.execute(f"DROP DATABASE {quote(name)}")


@contextlib.contextmanager
def sink_settings(kind: str, workdir: Path) -> Iterator[dict[str, object]]:
    """A local downstream database of ``kind`` (``mariadb`` or ``postgresql``) running,
    and the job's ``sink`` settings that write to it (``kind: jdbc``); stopped on exit.
    While it runs, :func:`empty` takes those settings."""
    if kind == "mariadb":
        with mariadb(workdir) as server:
            user, password = upstream_local.ADMIN
            url = f"jdbc:mariadb://127.0.0.1:{server.port}/"
            _EMPTIERS[url] = functools.partial(_empty_mariadb, server)
            try:
                yield {"kind": "jdbc", "url": url, "dialect": "mariadb", "user": user,
                       "password": password}  # fmt: skip
            finally:
                del _EMPTIERS[url]
    elif kind == "postgresql":
        with postgresql(workdir) as pg:
            url = f"jdbc:postgresql://127.0.0.1:{pg.port}/postgres"
            _EMPTIERS[url] = functools.partial(pg.execute, _EMPTY_POSTGRES)
            try:
                yield {"kind": "jdbc", "url": url, "dialect": "postgresql", "user": "postgres"}
            finally:
                del _EMPTIERS[url]
    else:
        raise ValueError(f"unknown downstream database {kind!r}: mariadb or postgresql")


def empty(sink: dict[str, Any]) -> None:
    """Drop everything runs made on the server of ``sink`` (settings from
    :func:`sink_settings`, still running): each scenario file, or group of files, starts on
    an empty server, as it starts on an empty lake on Delta (targets' names repeat from
    run to run)."""
    from streaming.storage.jdbc_sink import forget_made

    url = str(sink["url"])
    if url not in _EMPTIERS:
        raise DownstreamError(f"{url} is not a server sink_settings runs: nothing emptied")
    _EMPTIERS[url]()
    forget_made(url)
