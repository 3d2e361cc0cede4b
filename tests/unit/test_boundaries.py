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
