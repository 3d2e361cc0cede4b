"""A test that takes the ``spark`` fixture, directly or through another fixture, carries the
``spark`` marker, or collection fails (the hook in ``tests/conftest.py``). Run on a small
suite of its own in a pytest process, with a stand-in ``spark`` fixture: nothing starts."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = """
import pytest

from tests.conftest import pytest_collection_modifyitems  # the hook under test

@pytest.fixture
def spark():
    return "a stand-in: no session starts"

@pytest.fixture
def serve(spark):
    return spark
"""


def collect(tmp_path: Path, tests: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    spark: needs Spark\n")
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_some.py").write_text("import pytest\n\n" + textwrap.dedent(tests))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_test_taking_spark_without_the_marker_fails_collection(tmp_path: Path) -> None:
    out = collect(
        tmp_path,
        """
        @pytest.mark.spark
        def test_marked(spark): pass

        def test_direct(spark): pass

        def test_through_a_fixture(serve): pass

        def test_pure(): pass
        """,
    )
    assert out.returncode == 4, out.stdout + out.stderr  # pytest's usage error
    assert "use the spark fixture without the spark marker" in out.stderr
    unmarked = [line.strip() for line in out.stderr.splitlines() if "::" in line]
    assert unmarked == ["test_some.py::test_direct", "test_some.py::test_through_a_fixture"]


def test_marked_tests_and_tests_without_spark_collect(tmp_path: Path) -> None:
    out = collect(
        tmp_path,
        """
        pytestmark = pytest.mark.spark

        def test_direct(spark): pass

        def test_through_a_fixture(serve): pass
        """,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 tests collected" in out.stdout
