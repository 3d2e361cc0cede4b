"""Settings every test process and the jobs it starts share.

The suite's Spark batches hold tens of rows: its local sessions interpret expressions
instead of compiling them (``streaming.runtime.session_conf.SMALL_BATCH_CONF``). Set in the
environment, so the jobs the tests start as processes of their own (the kill test, the
fault suite) run the same way; a value already there is kept.

Every test that takes the ``spark`` fixture carries the ``spark`` marker; collection fails
otherwise (``pytest_collection_modifyitems``).
"""

from __future__ import annotations

import os

import pytest

from streaming.runtime.session_conf import ENV_CONF, SMALL_BATCH_CONF

os.environ.setdefault(ENV_CONF, " ".join(f"{k}={v}" for k, v in SMALL_BATCH_CONF.items()))


def unmarked_spark_tests(items: list[pytest.Item]) -> list[str]:
    """The ids of the tests that take the ``spark`` fixture, directly or through another
    fixture, without the ``spark`` marker."""
    return [
        item.nodeid
        for item in items
        if "spark" in getattr(item, "fixturenames", ()) and item.get_closest_marker("spark") is None
    ]


# The slowest modules, slowest first (seconds each in a whole run on 2 cores, 2026-11-30).
# scripts/test runs the suite on two workers, a module whole on one (``--dist loadfile``),
# handed out in collection order: the longest first, so that both workers end together,
# and one's waits (a broker down on purpose, a process starting) overlap the other's work.
SLOWEST = [
    "integration/test_spark_scenarios.py",  # 664
    "integration/test_exactly_once.py",  # 201
    "integration/test_cluster.py",  # 172
    "integration/test_faults.py",  # 150
    "integration/test_mariadb_scenarios.py",  # 120
    "integration/test_jdbc_scenarios.py",  # 114
    "integration/test_append_new_keys.py",  # 105
    "integration/test_object_store.py",  # 95
    "integration/test_checkpoint_identity.py",  # 87
    "integration/test_ordering.py",  # 80
    "integration/test_group_jobs.py",  # 72
    "integration/test_dashboard.py",  # 49
]


def _rank(item: pytest.Item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return next((i for i, slow in enumerate(SLOWEST) if path.endswith(slow)), len(SLOWEST))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that starts the SparkSession says so (``-m "not spark"`` must leave it out):
    collection fails on one that takes the ``spark`` fixture without the marker. The
    slowest modules run first (:data:`SLOWEST`), the others in the order collected."""
    unmarked = unmarked_spark_tests(items)
    if unmarked:
        raise pytest.UsageError(
            "these tests use the spark fixture without the spark marker; add "
            "@pytest.mark.spark (or the module's pytestmark):\n  " + "\n  ".join(unmarked)
        )
    items.sort(key=_rank)  # stable: each module keeps its own order
