"""shardmerge: merge sharded MySQL tables from CDC events on Kafka into one Delta table.

Where things are:
- ``streaming/``: the Spark Structured Streaming job (source, decoding, the foreachBatch
  protocol, the Delta sink and stash, state, settings, the ``run``/``locks``/``unlock`` verbs).
- ``coordinator/``: the pure lock state machines, routing and the scenario planner.
- ``schemas/``: the pure table-schema model, type lattice, DDL parsing and event models.
- ``devkit/``: development tooling (local Kafka, local MariaDB + Debezium, producer,
  workload, demo, kill harness, the spark and mariadb scenario engines), in a clone of
  the repository only: the wheel does not ship it, and nothing here imports it.

This package holds only what belongs to all of them: the root error, the command line,
printable output and lazy package namespaces.
"""

from shardmerge.errors import ShardMergeError

__all__ = ["ShardMergeError"]
