"""Package boundaries: the import contracts (pyproject.toml's [tool.importlinter], checked
by import-linter), what importing the core loads, and the coordinator read only through
its published views.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = (
    "pyspark",
    "confluent_kafka",
    "kafka",
    "pymysql",
    "streaming",
    "delta",
    "py4j",
    "devkit",
    "tests",
)


def lint_imports(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--config", str(config), "--no-cache"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_the_import_contracts_hold() -> None:
    """The layered contracts of pyproject.toml's [tool.importlinter] (scripts/test runs
    them too): the pure core imports no adapter, the job no tooling, the batch no group,
    the ports no implementation."""
    out = lint_imports(ROOT / "pyproject.toml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


def test_a_broken_contract_fails_the_check(tmp_path: Path) -> None:
    """The same tool, given a contract the code breaks (the batch imports its executor):
    it must say so, or the contracts above could never fail."""
    config = tmp_path / "contracts.toml"
    config.write_text(
        "[tool.importlinter]\n"
        'root_packages = ["streaming", "coordinator"]\n\n'
        "[[tool.importlinter.contracts]]\n"
        'name = "the batch without its executor"\n'
        'type = "forbidden"\n'
        'source_modules = ["streaming.batch.protocol"]\n'
        'forbidden_modules = ["streaming.batch.executor"]\n'
    )
    out = lint_imports(config)
    assert out.returncode != 0
    assert "streaming.batch.protocol -> streaming.batch.executor" in out.stdout


def test_importing_the_core_loads_no_adapter() -> None:
    code = (
        "import sys, schemas, coordinator, coordinator.state, coordinator.scenario;"
        f"bad = [m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}];"
        "print(','.join(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""


# Readers of the coordinator (the engine, the dashboard, the metrics, the operator CLI):
# only its methods and published views (coordinator.views, LockView, WaitView), never the
# lock's own Target / ShardState, whose fields the rules change.
READERS = [*sorted((ROOT / "streaming").rglob("*.py")), *sorted((ROOT / "shardmerge").glob("*.py"))]


INTERNALS = ("Target", "ShardState", "ShardTable", "PendingDDL", "Refusal")


def is_coordinator(owner: str) -> bool:
    """A name the job gives a coordinator: ``c``, ``self.c``, ``...coordinator``."""
    return owner == "c" or owner.endswith((".c", "coordinator"))


def coordinator_internals(path: Path) -> list[str]:
    """Where ``path`` imports the lock's own classes (coordinator.target's Target,
    ShardState, ...; its errors and TargetConfig are published) or reads a coordinator's
    ``targets``, ``where`` or ``unregistered``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "coordinator.target":
            names = [a.name for a in node.names if a.name in INTERNALS]
            if names:
                found.append(f"line {node.lineno}: imports {', '.join(names)}")
        elif isinstance(node, ast.Attribute) and node.attr in ("targets", "where", "unregistered"):
            owner = ast.unparse(node.value)
            if is_coordinator(owner):
                found.append(f"line {node.lineno}: reads {owner}.{node.attr}")
    return found


def test_the_job_reads_the_coordinator_only_through_its_published_views() -> None:
    assert READERS and all(p.exists() for p in READERS)
    offenders = [
        f"{p.relative_to(ROOT)} {where}" for p in READERS for where in coordinator_internals(p)
    ]
    assert offenders == []


def test_the_presenter_check_sees_a_reader_of_internals(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from coordinator.target import Target\n\ndef f(c):\n    return c.targets\n")
    assert coordinator_internals(bad) == ["line 1: imports Target", "line 4: reads c.targets"]
