"""Package boundaries: the pure core imports no adapter; the job imports no tooling.

``schemas/`` and ``coordinator/`` import neither Spark nor a Kafka client nor the job;
``streaming/`` (the job) imports neither the development tooling (``devkit/``) nor the
tests' oracle.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

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
JOB_FORBIDDEN = ("devkit", "tests", "confluent_kafka", "kafka", "pymysql")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("package", ["schemas", "coordinator"])
def test_core_sources_import_no_adapter(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no sources found under {package}/"
    offenders = [
        f"{f.relative_to(ROOT)} imports {m}"
        for f in files
        for m in imported_modules(f)
        if m.split(".")[0] in FORBIDDEN
    ]
    assert offenders == []


def test_the_job_imports_no_tooling() -> None:
    files = sorted((ROOT / "streaming").rglob("*.py"))
    assert files, "no sources found under streaming/"
    offenders = [
        f"{f.relative_to(ROOT)} imports {m}"
        for f in files
        for m in imported_modules(f)
        if m.split(".")[0] in JOB_FORBIDDEN
    ]
    assert offenders == []


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


def test_the_boundary_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nfrom pyspark.sql import SparkSession\nimport kafka.admin\n")
    assert {"pyspark.sql", "kafka.admin"} <= imported_modules(bad)


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
