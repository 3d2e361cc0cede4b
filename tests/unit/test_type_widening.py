"""Which Delta type changes happen in place (Delta 4.x type widening), without a JVM;
tests/integration/test_rewrite.py checks the same rules against real Delta tables."""

from __future__ import annotations

import pytest

from streaming.sql.spark_types import widens_in_place


@pytest.mark.parametrize(
    ("current", "wanted"),
    [
        ("TINYINT", "SMALLINT"),
        ("TINYINT", "BIGINT"),
        ("SMALLINT", "INT"),
        ("INT", "BIGINT"),
        ("INT", "DOUBLE"),
        ("FLOAT", "DOUBLE"),
        ("DATE", "TIMESTAMP_NTZ"),
        ("INT", "DECIMAL(10,0)"),
        ("INT", "DECIMAL(12,2)"),
        ("BIGINT", "DECIMAL(20,0)"),
        ("DECIMAL(5,2)", "DECIMAL(6,3)"),
        ("DECIMAL(5,2)", "DECIMAL(7,2)"),
        ("decimal(5, 2)", "DECIMAL(38,2)"),
    ],
)
def test_in_place(current: str, wanted: str) -> None:
    assert widens_in_place(current, wanted)


@pytest.mark.parametrize(
    ("current", "wanted"),
    [
        ("DECIMAL(5,2)", "DECIMAL(5,3)"),  # more scale, fewer integer digits
        ("DECIMAL(5,2)", "DECIMAL(6,1)"),  # less scale
        ("DECIMAL(5,2)", "DECIMAL(4,2)"),
        ("INT", "DECIMAL(9,0)"),
        ("INT", "DECIMAL(11,2)"),
        ("BIGINT", "DECIMAL(19,0)"),
        ("BIGINT", "DOUBLE"),
        ("BIGINT", "INT"),
        ("DOUBLE", "FLOAT"),
        ("INT", "STRING"),
        ("STRING", "INT"),
        ("TIMESTAMP_NTZ", "DATE"),
        ("DECIMAL(5,2)", "DOUBLE"),
    ],
)
def test_needs_a_rewrite(current: str, wanted: str) -> None:
    assert not widens_in_place(current, wanted)
