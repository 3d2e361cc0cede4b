"""``/api/locks`` paging and filtering (``streaming.ops.server.page_held``), on a view
made here: thousands of held shards are listed a page at a time, filtered by name."""

from __future__ import annotations

from typing import Any

import pytest

from streaming.ops.server import ApiError, page_held


def _locks(held: int, other: int = 1) -> dict[str, Any]:
    def target(name: str, n: int) -> dict[str, Any]:
        shards = [f"s1.db_{i % 8}.orders_{i}" for i in range(n)]
        return {
            "target": name,
            "held": [{"shard": s, "held_rows": 2} for s in shards],
            "shard_schemas": [
                {"shard": s, "held": True, "missing": [], "extra": [], "retyped": []}
                for s in shards
            ],
        }

    return {"batch": 7, "targets": [target("shop.orders", held), target("shop.items", other)]}


def test_a_page_of_held_shards_counts_them_all() -> None:
    out = page_held(_locks(4_096), "held=100&offset=200")
    orders, items = out["targets"]
    assert [h["shard"] for h in orders["held"]][:2] == ["s1.db_0.orders_200", "s1.db_1.orders_201"]
    assert len(orders["held"]) == 100 and len(orders["shard_schemas"]) == 100
    assert (orders["held_count"], orders["held_matching"], orders["held_offset"]) == (
        4096,
        4096,
        200,
    )
    assert orders["held_rows"] == 2 * 4_096
    assert items["held"] == []  # one held shard, and the page starts at the 200th


def test_the_filter_applies_before_the_page_and_one_target_can_be_asked() -> None:
    out = page_held(_locks(4_096), "held=10&offset=10&shard=DB_3.&target=shop.orders")
    (orders,) = out["targets"]
    assert orders["held_matching"] == 512 and orders["held_count"] == 4_096
    assert orders["held"][0]["shard"] == "s1.db_3.orders_83"  # the 11th match
    assert all(".db_3." in h["shard"] for h in orders["held"])
    assert page_held(_locks(3), "target=shop.none")["targets"] == []


@pytest.mark.parametrize("query", ["held=-1", "offset=x", "page=2", "held=1.5"])
def test_a_bad_parameter_is_refused_by_name(query: str) -> None:
    with pytest.raises(ApiError) as e:
        page_held(_locks(3), query)
    assert query.split("=")[0] in str(e.value)
