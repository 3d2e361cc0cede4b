"""``shardmerge scenario run``: JSON per file on stdout, exit codes 0 / 1 / 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "tests/scenarios/dm/dm030-add-column-optimistic.yaml"


def run(*files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shardmerge.cli", "scenario", "run", *map(str, files)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


def test_passing_files_print_one_json_object_each_and_exit_0():
    out = run(GOOD, ROOT / "tests/scenarios/dm/dm030-add-column-pessimistic.yaml")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["ok"] for r in lines] == [True, True]
    assert lines[0]["engine"] == "memory"
    assert lines[0]["columns"] == {"id": "INT", "new_col1": "INT"}
    assert lines[0]["locks"][0]["stage"] == "none"
    assert "2/2 scenario(s) passed" in out.stderr


def test_a_failed_expectation_exits_1_and_says_which(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        GOOD.read_text().replace("blocked: []\n  locks", "blocked: [s1.db1.tb1]\n  locks")
    )
    out = run(bad)
    assert out.returncode == 1
    result = json.loads(out.stdout)
    assert result["ok"] is False
    assert any("blocked" in f for f in result["failures"])


def test_an_invalid_file_exits_2_and_says_where(tmp_path: Path):
    bad = tmp_path / "invalid.yaml"
    bad.write_text(GOOD.read_text().replace("mode: optimistic", "mode: sometimes"))
    out = run(GOOD, bad)
    assert out.returncode == 2
    assert "invalid.yaml" in out.stderr and "mode" in out.stderr


def test_an_insert_naming_a_missing_column_makes_the_file_invalid(tmp_path: Path):
    bad = tmp_path / "missing-column.yaml"
    bad.write_text(GOOD.read_text().replace("insert: {id: 2}", "insert: {id: 2, nope: 1}"))
    out = run(bad)
    assert out.returncode == 2
    assert "step 3" in out.stdout and "no column 'nope'" in out.stdout


def test_a_command_is_checked_against_the_latest_state_when_given() -> None:
    from coordinator.commands import parse_command, refusal

    locks = [{"target": "shop.orders", "blocked": ["s1.shop.orders_1"]}]

    def why(words: str) -> str | None:
        return refusal(parse_command(words), locks)

    held = "unlock shop.orders --shard s1.shop.orders_1"
    assert why(f"{held} --action skip") is None
    assert why(f"{held} --replace 'ALTER TABLE orders_1 ADD c INT'") is None
    assert why(f"{held} --replace 'alter table SHOP.Orders_1 add c int'") is None
    assert why(f"{held} --replace 'TRUNCATE TABLE orders_1'") is None
    assert why("unlock shop.orders --force-remove") is None
    assert "no target shop.other" in (why("unlock shop.other --force-remove") or "")
    assert "is not held" in (why("unlock shop.orders --shard s1.shop.orders_2 --action exec") or "")
    assert "not the held shard's table" in (
        why(f"{held} --replace 'ALTER TABLE orders_2 ADD c INT'") or ""
    )
    assert "not the held shard's table" in (
        why(f"{held} --replace 'ALTER TABLE other.orders_1 ADD c INT'") or ""
    )
    assert "statement 2 does not parse" in (
        why(f"{held} --replace 'ALTER TABLE orders_1 ADD c INT' --replace 'ALTER TABLE'") or ""
    )
    assert "is not one ALTER" in (why(f"{held} --replace 'DROP TABLE orders_1'") or "")


def test_the_memory_engine_plans_for_the_sink_it_is_given():
    beyond = ROOT / "tests/scenarios/beyond"
    database = beyond / "ignored-modify-then-unfit-value-dead-letter-database-optimistic.yaml"
    delta = beyond / "ignored-modify-then-unfit-value-dead-letter-optimistic.yaml"
    for sink, skipped in (("postgresql", [False, True]), ("delta", [True, False])):
        out = subprocess.run(
            [sys.executable, "-m", "shardmerge.cli", "scenario", "run", "--sink", sink,
             str(database), str(delta)],
            cwd=ROOT, capture_output=True, text=True,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        lines = [json.loads(line) for line in out.stdout.splitlines()]
        assert ["skipped" in r for r in lines] == skipped
    out = subprocess.run(
        [sys.executable, "-m", "shardmerge.cli", "scenario", "run", "--engine", "mariadb",
         "--sink", "postgresql", str(delta)],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 2 and "writes Delta only" in out.stderr
