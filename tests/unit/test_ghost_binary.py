"""The real gh-ost hook of the mariadb engine (devkit.ghost_binary): off unless
SHARDMERGE_GH_OST names an executable; the migration's --alter is the schemas' difference."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from coordinator.ids import ShardId
from devkit import ghost_binary
from schemas import parse_create_table
from shardmerge.errors import ShardMergeError


def test_off_unless_the_variable_names_an_executable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(ghost_binary.ENV, raising=False)
    assert ghost_binary.binary() is None
    plain = tmp_path / "gh-ost"
    plain.write_text("not a program")
    monkeypatch.setenv(ghost_binary.ENV, str(plain))
    with pytest.raises(ShardMergeError, match="not an executable gh-ost binary"):
        ghost_binary.binary()
    plain.chmod(0o755)
    assert ghost_binary.binary() == str(plain)


def test_the_migration_alters_by_the_difference_and_fails_loudly(tmp_path: Path) -> None:
    real = parse_create_table("CREATE TABLE tb1 (id INT PRIMARY KEY, b INT)")
    shadow = parse_create_table("CREATE TABLE _tb1_gho (id INT PRIMARY KEY, b BIGINT, c INT)")
    # a stand-in binary that exits at once: the copy never completes
    fake = tmp_path / "fake"
    fake.write_text(f"#!{sys.executable}\nimport sys; print(sys.argv[1:]); sys.exit(3)\n")
    fake.chmod(0o755)
    server = SimpleNamespace(port=1)
    m = ghost_binary.GhostMigration(
        str(fake), server, ("u", "p"), ShardId.parse("s1.db1.tb1"), real, shadow, tmp_path
    )
    assert m.alter == "ADD COLUMN `c` INT NULL AFTER `b`, MODIFY COLUMN `b` BIGINT NULL"
    with pytest.raises(ShardMergeError, match="did not finish its row copy"):
        m.wait_copied()
    assert "--alter=ADD COLUMN" in m.log() and "--postpone-cut-over-flag-file=" in m.log()
    with pytest.raises(ShardMergeError, match="the shadow's schema is the table's"):
        ghost_binary.GhostMigration(
            str(fake), server, ("u", "p"), ShardId.parse("s1.db1.tb1"), real, real, tmp_path
        )
