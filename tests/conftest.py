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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that starts the SparkSession says so (``-m "not spark"`` must leave it out):
    collection fails on one that takes the ``spark`` fixture without the marker."""
    unmarked = unmarked_spark_tests(items)
    if unmarked:
        raise pytest.UsageError(
            "these tests use the spark fixture without the spark marker; add "
            "@pytest.mark.spark (or the module's pytestmark):\n  " + "\n  ".join(unmarked)
        )
