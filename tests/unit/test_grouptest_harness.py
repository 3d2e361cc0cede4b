"""scripts/group-test's own checks: a case that did not happen is not a pass."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from devkit.grouptest import CaseReport, _joined, compare

ROOT = Path(__file__).resolve().parents[2]


def test_the_stop_case_sees_the_line_a_member_logs_when_the_group_joined(
    tmp_path: Path,
) -> None:
    # The message as streaming/group/coordination.py logs it: the stop case stops job b
    # once its log has it (a changed message once left b running, and the case "passed").
    source = (ROOT / "streaming" / "group" / "coordination.py").read_text()
    (fmt,) = re.findall(r'log\.info\("(every member of group[^"]*)"', source)
    log = tmp_path / "b.log"
    log.write_text("2026-12-01 02:35:52,741 shardmerge.batch starting\n")
    assert not _joined(log)
    log.write_text(log.read_text() + "2026-12-01 shardmerge.batch " + fmt % ("g1", 0.5) + "\n")
    assert _joined(log)


def test_a_stop_case_whose_member_was_never_stopped_fails() -> None:
    runs = {"ADD COLUMNS note": 1, "RENAME COLUMN memo": 1, "CHANGE COLUMN amount": 1}
    r = CaseReport("stop", "joined", rows=10, expected=10, ddl_runs=runs, compared=True)
    assert not r.ok
    r.paused = True
    assert r.ok


class _Unreadable:
    """A session whose every read of the table fails (the table gone, a bug in the read)."""

    class read:  # as spark.read
        @staticmethod
        def format(_: str) -> Any:
            raise RuntimeError("Path does not exist: file:/lake/shop/orders\nat ...")


def test_a_case_whose_table_was_never_read_fails_naming_the_error() -> None:
    # Every count stays 0 when no read succeeds: without `compared` such a case "passed".
    runs = {"ADD COLUMNS note": 1, "RENAME COLUMN memo": 1, "CHANGE COLUMN amount": 1}
    r = CaseReport("rollout", ddl_runs=runs)
    assert not compare(_Unreadable(), "file:/lake", {1: {"id": 1}}, r)
    assert not r.compared and not r.ok
    assert r.read_error == "RuntimeError: Path does not exist: file:/lake/shop/orders"
    assert any("not read at the end: RuntimeError" in line for line in r.lines())
    r.compared, r.rows, r.expected = True, 1, 1
    assert r.ok
