"""Start and stop the operations side of a running query: counts, views, the server."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from streaming.config import OpsSettings
from streaming.ops.metrics import registry_for
from streaming.ops.server import OpsServer
from streaming.ops.tables import TableCounts
from streaming.ops.views import Views

__all__ = ["Ops", "start_ops"]


@dataclass
class Ops:
    views: Views
    counts: TableCounts
    server: OpsServer

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def page(self) -> str:
        """The dashboard's address (with a generated token in its fragment)."""
        return self.server.page

    def stop(self) -> None:
        self.server.stop()
        self.counts.stop()


def start_ops(
    spark: SparkSession, processor: Any, query: Any, ops: OpsSettings | None = None
) -> Ops:
    """Serve ``/metrics``, the dashboard and the API of ``query`` (the job's streaming
    query, with its :class:`~streaming.batch.protocol.BatchProcessor`) on ``ops`` (default: the
    job's ``settings.ops``)."""
    settings = processor.settings
    counts = TableCounts(
        spark, processor.observer, processor.stash_path, settings.dead_letters()
    ).start()
    views = Views(settings, processor.store, processor.observer, query, counts)
    views.member = processor.group
    try:
        ops = ops or settings.ops
        server = OpsServer(ops, views, registry_for(views, ops.shard_metrics)).start()
    except OSError:
        counts.stop()
        raise
    return Ops(views, counts, server)
