"""The recreated-topic check's pure parts (the real broker case is in
tests/integration/test_faults.py)."""

from __future__ import annotations

from streaming.source.topic_ids import _LISTING, recreated


def test_only_a_topic_known_on_both_sides_with_another_id_is_recreated():
    saved = {"s1.db.t1": "AAAA", "s1.db.t2": "BBBB", "s1.db.gone": "CCCC"}
    now = {"s1.db.t1": "AAAA", "s1.db.t2": "ZZZZ", "s1.db.new": "DDDD"}
    assert recreated(saved, now) == {"s1.db.t2": ("BBBB", "ZZZZ")}
    assert recreated({}, now) == {}  # the first batch records the ids
    assert recreated(saved, {}) == {}  # topics gone are left to Spark's failOnDataLoss


def test_the_listing_text_of_the_kafka_client_parses_to_names_and_ids():
    # As kafka-clients 3.9 prints a collection of TopicListing (checked on a real broker
    # in the integration test: a count that differs from the parse fails the batch).
    text = (
        "[(name=a.b-c_d, topicId=rTZMEg7yTMaf81lI9VQPfg, internal=false), "
        "(name=__x, topicId=FImcG_QMQGCCvFZop8ApEQ, internal=true)]"
    )
    assert _LISTING.findall(text) == [
        ("a.b-c_d", "rTZMEg7yTMaf81lI9VQPfg"),
        ("__x", "FImcG_QMQGCCvFZop8ApEQ"),
    ]
