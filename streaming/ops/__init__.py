"""Operations: what the running job shows about itself.

- :mod:`streaming.ops.observer`: a small record the batch processor updates (step timings,
  counts, the state after each batch); reading it never starts a Spark job.
- :mod:`streaming.ops.metrics`: Prometheus metrics built from it and Spark's query progress.
- :mod:`streaming.ops.views`: the JSON views (locks, shards, progress, dead letters).
- :mod:`streaming.ops.server`: the HTTP server (metrics, dashboard, operator API).
"""
