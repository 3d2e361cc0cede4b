"""The sink of the settings: which implementation of the Sink port
(``streaming.storage.sink``) writes the targets (``sink.kind``)."""

from __future__ import annotations

from pyspark.sql import SparkSession

from streaming.config import Settings
from streaming.storage.sink import Sink

__all__ = ["sink_of"]


def sink_of(spark: SparkSession, settings: Settings, app_id: str, *, shared: bool = False) -> Sink:
    """The targets' sink: ``DeltaSink`` under ``sink.path``, or ``JdbcSink`` on
    ``sink.url``. ``app_id`` names the job's write slots; ``shared``: several jobs write
    the same tables (a group)."""
    s = settings.sink
    if s.kind == "jdbc":
        from streaming.storage.jdbc_sink import JdbcSink

        assert s.url is not None and s.dialect is not None  # SinkSettings checks it
        password = s.password.get_secret_value() if s.password is not None else None
        sink: Sink = JdbcSink(spark, app_id, s.url, s.dialect, s.user, password, s.meta)
        return sink
    from streaming.storage.delta_sink import DeltaSink

    return DeltaSink(spark, app_id, settings.table_path, shared=shared)
