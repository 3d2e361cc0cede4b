"""The driver's one Kafka admin client (streaming/source/driver_kafka.py): shared by the
batch's topic-id and caught-up checks, kept across requests, made again after a failure."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from streaming.config import Settings
from streaming.source.driver_kafka import driver_kafka

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_one_client_answers_every_check_and_a_failure_makes_a_new_one(
    spark, kafka, topic, tmp_path
):
    settings = Settings.model_validate(
        {
            "kafka": {
                "bootstrap": kafka.bootstrap,
                "options": {"default.api.timeout.ms": "5000", "request.timeout.ms": "5000"},
            },
            "sources": [{"pattern": "it-.*"}],
            "routes": [{"target": "shop.orders", "table": "orders_*"}],
            "sink": {"path": str(tmp_path / "lake")},
            "checkpoint": str(tmp_path / "cp"),
        }
    )
    name = topic(2)
    p = Producer({"bootstrap.servers": kafka.bootstrap})
    for _ in range(3):
        p.produce(name, b"{}", partition=0)
    assert p.flush(30) == 0
    client = driver_kafka(spark, settings)
    assert driver_kafka(spark, settings) is client
    assert client.timeout_ms == 5000
    assert client.latest_offsets({(name, 0), (name, 1)}) == {(name, 0): 3, (name, 1): 0}
    count, text = client.topic_listing()
    assert count >= 1 and f"name={name}," in text
    assert client.made == 1  # one client for both requests
    with pytest.raises(Exception, match=r"UnknownTopicOrPartition|TimeoutException"):
        client.latest_offsets({("it-no-such-topic", 0)})
    assert client.latest_offsets({(name, 0)}) == {(name, 0): 3}
    assert client.made == 2  # the failed request dropped its client
