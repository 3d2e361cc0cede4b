"""The ``shardmerge`` command line.

Verbs: ``run`` (the streaming job), ``locks``, ``unlock``, ``move``, ``group`` and
``history`` (operate a running job, :mod:`streaming.cli.verbs`), ``scenario run`` (scenario files
on an engine) and the development kit's verbs: ``demo`` (the embedded default: local Kafka,
a sharded workload with a DDL rollout, Delta), ``produce`` (a sharded Debezium workload to
Kafka), ``kafka``, ``s3``, ``cluster`` and ``upstream`` (local services: start|stop|status).
Human-readable progress goes to stderr; machine-readable results to stdout.

The development kit (``devkit/``) is not in the wheel: it lives in a clone of the
repository, and the ``dev`` extra brings its dependencies. So this module names its verbs
and scenario engines as ``"module:function"`` strings and imports one only when it is
asked for; the job's verbs and the memory engine work from the wheel alone.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import sys
from typing import Any

from shardmerge.errors import ShardMergeError

__all__ = ["DEV_ENGINES", "DEV_VERBS", "main"]

# verb -> (function taking the verb's own argv, help)
DEV_VERBS = {
    "demo": (
        "devkit.demo:cli_main",
        "the embedded default: local Kafka, a sharded workload, Delta",
    ),
    "produce": ("devkit.producer:cli_main", "write a sharded Debezium workload to Kafka"),
    "kafka": (
        "devkit.kafka_local:cli_main",
        "a local Kafka broker (KRaft) for development: start|stop|status",
    ),
    "s3": (
        "devkit.objectstore:cli_main",
        "a local S3-compatible object store (moto) for development: start|stop|status",
    ),
    "cluster": (
        "devkit.spark_cluster:cli_main",
        "a local Spark standalone cluster (1 master, 1 worker) for development: start|stop|status",
    ),
    "upstream": (
        "devkit.upstream_local:cli_main",
        "local MariaDB servers captured by Debezium on Kafka Connect: start|stop|status",
    ),
}

# ``scenario run --engine`` name -> (function running loaded scenarios, help); ``memory``
# is coordinator.scenario's own and needs none of these.
DEV_ENGINES = {
    "spark": (
        "devkit.scenario_spark:run_spark_files",
        "a real Kafka broker, the streaming job with AvailableNow, a Delta table",
    ),
    "mariadb": (
        "devkit.scenario_mariadb:run_mariadb_files",
        "the steps run as SQL on real MariaDB shards captured by Debezium on Kafka Connect, "
        "then as spark; the Delta table is also checked against the shards' own rows",
    ),
}

# Modules the development kit needs beyond the job's dependencies (the ``dev`` extra).
_DEV_EXTRA = ("confluent_kafka", "pymysql")


class ToolingMissing(ShardMergeError):
    """A development verb or scenario engine was asked for, but the development kit cannot
    be imported: run it from a clone of the repository after ``scripts/bootstrap``."""


def _load(target: str, what: str) -> Any:
    """The function ``target`` (``"module:function"``) names, imported now."""
    module, _, name = target.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as e:
        # Without the kit the missing name is "devkit" (or the module itself, when a
        # "devkit" that is no package is in the way); a module the kit's own code fails to
        # find is a broken clone and keeps its error.
        if e.name in ("devkit", module):
            raise ToolingMissing(
                f"{what} is part of the development kit (devkit/), which the shardmerge "
                "wheel does not ship: run it from a clone of the repository after "
                "scripts/bootstrap"
            ) from e
        if e.name is not None and e.name.split(".")[0] in _DEV_EXTRA:
            raise ToolingMissing(
                f"{what} needs the development tooling ({e.name} is not installed): "
                "pip install 'shardmerge[dev]' or run scripts/bootstrap"
            ) from e
        raise


def _run_dev_verb(verb: str, argv: list[str]) -> int:
    code: int = _load(DEV_VERBS[verb][0], f"`shardmerge {verb}`")(argv)
    return code


def _scenario_run(args: argparse.Namespace) -> int:
    from coordinator.scenario.runner import run_files

    engines = {}
    if args.engine in DEV_ENGINES:
        # Loaded before any file is read, so a missing kit is said at once.
        engines[args.engine] = _load(DEV_ENGINES[args.engine][0], f"the {args.engine} engine")
    if args.sink is not None and args.engine == "mariadb" and args.sink != "delta":
        print("shardmerge: the mariadb engine writes Delta only (--sink)", file=sys.stderr)
        return 2
    if args.engine == "spark" and args.sink not in (None, "delta"):
        engines["spark"] = functools.partial(engines["spark"], sink=args.sink)
    if args.topics != "per-shard":
        if args.engine != "mariadb":
            print("shardmerge: --topics is the mariadb engine's", file=sys.stderr)
            return 2
        engines["mariadb"] = functools.partial(engines["mariadb"], topics=args.topics)
    results = run_files(args.files, args.engine, engines=engines, sink=args.sink)
    for result in results:
        print(json.dumps(result.output, default=str), flush=True)
    if any(r.invalid for r in results):
        return 2
    failed = [r for r in results if not r.ok]
    print(f"{len(results) - len(failed)}/{len(results)} scenario(s) passed", file=sys.stderr)
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    from streaming.cli.verbs import add_job_verbs

    parser = argparse.ArgumentParser(
        prog="shardmerge",
        description="Merge sharded MySQL tables from CDC events into one table, "
        "coordinating shard DDL.",
        epilog=f"{', '.join(DEV_VERBS)} and the scenario engines {' and '.join(DEV_ENGINES)} "
        "are the development kit's (devkit/): they run from a clone of the repository after "
        "scripts/bootstrap, not from the wheel.",
    )
    verbs = parser.add_subparsers(dest="verb", required=True)
    add_job_verbs(verbs)

    scenario = verbs.add_parser("scenario", help="scenario files: the test-case language")
    scenario_verbs = scenario.add_subparsers(dest="scenario_verb", required=True)
    srun = scenario_verbs.add_parser(
        "run",
        help="run scenario files; one JSON object per file on stdout; exit 0 all passed, "
        "1 one failed, 2 a file is invalid",
    )
    srun.add_argument("files", nargs="+", metavar="FILE", help="scenario YAML files")
    srun.add_argument(
        "--engine",
        default="memory",
        choices=["memory", *DEV_ENGINES],
        help="memory: in-process, no Kafka or Spark (default); "
        + "; ".join(f"{name}: {text}" for name, (_, text) in DEV_ENGINES.items()),
    )
    srun.add_argument(
        "--sink",
        default=None,
        choices=["delta", "mariadb", "postgresql"],
        help="spark engine: where the job writes the target: a Delta table (default), or a "
        "local MariaDB or PostgreSQL server the run starts (the JDBC sink); memory engine: "
        "the sink it plans for (default each file's first `sinks:` entry, Delta unless the "
        "file says otherwise); a file whose `sinks:` leave it out is skipped by the engines "
        "that write",
    )
    srun.add_argument(
        "--topics",
        default="per-shard",
        choices=["per-shard", "per-table"],
        help="mariadb engine: Debezium's topic per shard table (default), or one topic per "
        "logical table (ByLogicalTableRouter and PartitionRouting, four partitions, a "
        "shard's rows in one; docs/cluster.md)",
    )
    srun.set_defaults(func=_scenario_run)

    for verb, (_, text) in DEV_VERBS.items():
        # Listed for --help; main() hands these verbs their argv before argparse sees it.
        forwarded = verbs.add_parser(verb, help=text, add_help=False)
        forwarded.add_argument("rest", nargs=argparse.REMAINDER)
        forwarded.set_defaults(func=lambda args, v=verb: _run_dev_verb(v, args.rest))
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in DEV_VERBS:
            # These verbs own their options (argparse cannot pass "--x" through a positional).
            return _run_dev_verb(argv[0], argv[1:])
        args = build_parser().parse_args(argv)
        code: int = args.func(args)
    except ShardMergeError as e:
        print(f"shardmerge: {e}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
