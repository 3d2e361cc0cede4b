"""A real gh-ost run on a local MariaDB server, for the mariadb scenario engine.

The project's machines cannot install gh-ost (the Go module proxy refuses
``github.com/github/gh-ost``), so this runs only when ``SHARDMERGE_GH_OST`` names a gh-ost
binary (e.g. one built from its repository's vendored sources: ``go build -mod=vendor
./go/cmd/gh-ost``). Then a scenario file whose ``shards:`` list an online-DDL shadow table
beside its real table (a migration that began before the job) gets a real migration: gh-ost
creates and alters the shadow, copies the rows and follows the real table's binlog, and
waits at its cut-over (``--postpone-cut-over-flag-file``) until the file's cut-over step.
See ``devkit.scenario_mariadb`` and docs/upstream.md.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from coordinator.ids import ShardId
from schemas.lattice import diff
from schemas.model import TableSchema
from schemas.render import spec_sql
from shardmerge.errors import ShardMergeError

__all__ = ["ENV", "GhostMigration", "binary"]

ENV = "SHARDMERGE_GH_OST"
READY_TIMEOUT_S = 60.0
CUT_OVER_TIMEOUT_S = 60.0


def binary() -> str | None:
    """The gh-ost binary ``SHARDMERGE_GH_OST`` names, checked; None when unset."""
    path = os.environ.get(ENV, "").strip()
    if not path:
        return None
    if not os.access(path, os.X_OK):
        raise ShardMergeError(f"{ENV}={path!r} is not an executable gh-ost binary")
    return path


class GhostMigration:
    """One gh-ost migration of ``real`` to ``target``'s schema, waiting at its cut-over."""

    def __init__(
        self,
        gh_ost: str,
        server: Any,
        user: tuple[str, str],
        real: ShardId,
        schema: TableSchema,
        target: TableSchema,
        workdir: Path,
    ) -> None:
        specs = diff(schema, target.renamed(schema.name))
        if not specs:
            raise ShardMergeError(f"gh-ost for {real}: the shadow's schema is the table's")
        self.alter = ", ".join(spec_sql(s) for s in specs)  # gh-ost's --alter: the specs
        self.real = real
        workdir.mkdir(parents=True, exist_ok=True)
        self.flag = workdir / f"{real.db}.{real.table}.postpone"
        self.flag.touch()
        self.log_path = workdir / f"{real.db}.{real.table}.gh-ost.log"
        args = [
            gh_ost,
            "--host=127.0.0.1",
            f"--port={server.port}",
            f"--user={user[0]}",
            f"--password={user[1]}",
            f"--database={real.db}",
            f"--table={real.table}",
            f"--alter={self.alter}",
            "--allow-on-master",
            "--assume-rbr",
            # MariaDB has no metadata-lock instrument of MySQL's kind: gh-ost refuses it
            # without this.
            "--skip-metadata-lock-check",
            "--initially-drop-ghost-table",
            "--initially-drop-old-table",
            f"--postpone-cut-over-flag-file={self.flag}",
            "--default-retries=10",
            "--verbose",
            "--execute",
        ]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_copied(self) -> None:
        """Return once gh-ost copied every row and waits at its postponed cut-over."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while "Row copy complete" not in self.log():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise ShardMergeError(
                    f"gh-ost on {self.real} did not finish its row copy "
                    f"(exit {self.proc.returncode}); see {self.log_path}"
                )
            time.sleep(0.2)

    def cut_over(self) -> None:
        """Let the cut-over happen; return when gh-ost has finished."""
        self.flag.unlink(missing_ok=True)
        try:
            code = self.proc.wait(CUT_OVER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.stop()
            raise ShardMergeError(
                f"gh-ost on {self.real} did not cut over in {CUT_OVER_TIMEOUT_S:.0f} s; "
                f"see {self.log_path}"
            ) from None
        if code != 0:
            raise ShardMergeError(
                f"gh-ost on {self.real} failed (exit {code}); see {self.log_path}"
            )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
