"""A Kafka topic deleted and recreated under the same name is noticed, never read on from
an old offset.

Spark's Kafka source keeps offsets per topic name. When a topic is deleted and recreated
with fewer records than the job had read, the source sees its offsets go backwards and
stops (``failOnDataLoss``). With as many records or more, nothing looks wrong to it: the
next batch starts at the old topic's offset in the new topic, and the new topic's first
records are skipped without a word.

Kafka gives every topic an id (a UUID) when it is created, and a recreated topic gets a new
one. The job keeps the id of every topic it has read in its saved state (``topic_ids``)
and, each batch, before anything is written, asks Kafka for the ids of the topics in the
batch's offsets (one ``listTopics`` request of the driver's long-lived admin client,
``streaming.source.driver_kafka``, configured as Spark's Kafka source is, so any security
setup that reads the data reads them too). A topic whose id changed stops the batch with
:class:`RecreatedTopic`, which names it, and the supervisor stops the job
(``streaming.runtime.supervise``): nothing of the new topic is written, and each run of
the batch stops the same way until an operator acts.

Not covered: a topic recreated between the moment Spark fixed a batch's offsets and this
check (about a second) is recorded with its new id; a topic that is gone is left to Spark
(``failOnDataLoss``).
"""

from __future__ import annotations

import logging
import re

from pyspark.sql import SparkSession

from shardmerge.errors import ShardMergeError
from streaming.config import Settings
from streaming.source.caught_up import topics_of
from streaming.source.driver_kafka import driver_kafka

__all__ = ["RECREATED", "RecreatedTopic", "TopicIds", "recreated"]

log = logging.getLogger("shardmerge.topic_ids")

RECREATED = (
    "a Kafka topic the job had read was deleted and recreated under the same name: the "
    "job's offsets belong to the old topic, and reading on would skip the new topic's "
    "first records. Nothing of the new topic was written. If the new topic holds the "
    "table's events again (a new snapshot), run the job with a new checkpoint and sink and "
    "swap the tables; if it was recreated by mistake, restore the old topic's records"
)


class RecreatedTopic(ShardMergeError):
    """A topic's Kafka id differs from the one the job saw when it last read it."""


def recreated(saved: dict[str, str], now: dict[str, str]) -> dict[str, tuple[str, str]]:
    """The topics whose id changed: ``{topic: (saved id, id now)}``. A topic only in one
    of the two is not a change (read for the first time, or gone)."""
    return {t: (saved[t], now[t]) for t in sorted(saved.keys() & now.keys()) if saved[t] != now[t]}


class TopicIds:
    """Per batch, the Kafka ids of the topics the batch read, checked against those saved."""

    def __init__(self, spark: SparkSession, settings: Settings) -> None:
        self.spark = spark
        self.settings = settings

    def check(
        self, batch: int, saved: dict[str, str], logged: tuple[int, list[str]] | None
    ) -> dict[str, str]:
        """The ids to save with ``batch``: those of the topics in its offsets log
        (``logged``, :func:`~streaming.source.caught_up.offsets_log`). Raises
        :class:`RecreatedTopic` when one of them changed since it was saved. A batch run
        without a streaming query (no offsets log) keeps ``saved``."""
        if logged is None:
            return saved
        topics = {t for line in logged[1] for t in topics_of(line)}
        if not topics:
            return saved
        now = self._ids(topics)
        changed = recreated(saved, now)
        if changed:
            what = "; ".join(
                f"{t!r}: id {old} when last read, {new} now" for t, (old, new) in changed.items()
            )
            raise RecreatedTopic(f"batch {batch}: {what}. {RECREATED}")
        gone = sorted(topics - now.keys())
        if gone:
            log.warning(
                "batch %d: topics in the batch's offsets that Kafka no longer lists: %s",
                batch, gone,
            )  # fmt: skip
        return now

    def _ids(self, topics: set[str]) -> dict[str, str]:
        """``{topic: id}`` of those of ``topics`` Kafka lists now."""
        count, text = driver_kafka(self.spark, self.settings).topic_listing()
        listed = dict(_LISTING.findall(text))
        if len(listed) != count:
            raise ShardMergeError(
                f"could not read the topic ids of Kafka's topic list ({count} topics, "
                f"{len(listed)} read from {text[:200]!r}): the Kafka client's TopicListing "
                "text is not the one this version of shardmerge knows"
            )
        return {t: i for t, i in listed.items() if t in topics}


# Kafka's TopicListing as text: ``(name=orders, topicId=AbC-_1..., internal=false)``. Topic
# names are [a-zA-Z0-9._-] and ids URL-safe base64, so neither holds a comma or a paren.
_LISTING = re.compile(
    r"\(name=([A-Za-z0-9._-]+), topicId=([A-Za-z0-9_-]+), internal=(?:true|false)\)"
)
