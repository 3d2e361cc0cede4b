"""The ``shardmerge`` command line.

Verbs: ``run`` (the streaming job), ``locks`` and ``unlock`` (operate a running job's
shard DDL locks), ``demo`` (the embedded default: local Kafka, a sharded workload with a
DDL rollout, Delta), ``scenario run`` (scenario files on an engine), ``produce`` (a
sharded Debezium workload to Kafka), ``kafka start|stop|status`` (a local broker),
``upstream start|stop|status`` (local MariaDB servers captured by Debezium on Kafka Connect).
Human-readable progress goes to stderr; machine-readable results to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["main"]

# Verbs whose module parses its own options: verb -> (module with cli_main, help).
FORWARDED = {
    "demo": ("streaming.demo", "the embedded default: local Kafka, a sharded workload, Delta"),
    "produce": ("streaming.producer", "write a sharded Debezium workload to Kafka"),
    "kafka": (
        "streaming.kafka_local",
        "a local Kafka broker (KRaft) for development: start|stop|status",
    ),
    "upstream": (
        "streaming.upstream_local",
        "local MariaDB servers captured by Debezium on Kafka Connect: start|stop|status",
    ),
}


def _scenario_run(args: argparse.Namespace) -> int:
    from streaming.scenario.runner import run_files

    results = run_files(args.files, args.engine)
    for result in results:
        print(json.dumps(result.output, default=str), flush=True)
    if any(r.invalid for r in results):
        return 2
    failed = [r for r in results if not r.ok]
    print(f"{len(results) - len(failed)}/{len(results)} scenario(s) passed", file=sys.stderr)
    return 1 if failed else 0


def _run(args: argparse.Namespace) -> int:
    import logging

    from streaming.config import load_settings
    from streaming.job import run

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    run(load_settings(args.config), available_now=args.available_now)
    return 0


def _store(config: str) -> Any:
    """The job's state store, read through a Spark session's Hadoop filesystem, so the
    checkpoint can be on any filesystem the job writes (its credentials come from Spark's
    conf: spark-defaults.conf or PYSPARK_SUBMIT_ARGS, docs/cluster.md)."""
    from streaming.config import load_settings
    from streaming.spark_session import session_for_job
    from streaming.state_store import StateStore

    settings = load_settings(config)
    return StateStore(session_for_job("shardmerge-cli"), settings.checkpoint)


def _locks(args: argparse.Namespace) -> int:
    store = _store(args.config)
    latest = store.latest()
    if latest is None:
        print("no batch has run yet: no locks", file=sys.stderr)
        return 0
    batch, data = latest
    if args.json:
        print(json.dumps({"batch": batch, "locks": data["locks"], "stats": data["stats"]}))
        return 0
    print(f"after batch {batch}:")
    print(f"{'target':24} {'mode':12} {'stage':9} {'shards':>6}  held shards / pending DDL")
    for lock in data["locks"]:
        print(
            f"{lock['target']:24} {lock['mode']:12} {lock['stage']:9} {lock['shards']:>6}  "
            + (", ".join(lock["blocked"]) or "-")
        )
        for pending in lock["pending_ddl"]:
            print(f"{'':55}{pending['shard']}: {pending['sql']}")
        if lock.get("conflict"):
            print(f"{'':55}conflict: {lock['conflict']}")
    failed = store.failure()
    if failed is not None:
        print(f"the job stopped in batch {failed['batch']}: {failed['error']}")
    waiting = [c["words"] for c in store.inbox()]
    if waiting:
        print("commands waiting for the next batch: " + "; ".join(waiting))
    return 0


def _unlock(args: argparse.Namespace) -> int:
    from coordinator.commands import command_from_args

    command = command_from_args(args)
    store = _store(args.config)
    command_id = store.submit(command.words())
    print(f"queued {command.words()!r} ({command_id}); it takes effect at the next micro-batch")
    return 0


def _forward(module: str) -> object:
    def call(args: argparse.Namespace) -> int:
        import importlib

        code: int = importlib.import_module(module).cli_main(args.rest)
        return code

    return call


def build_parser() -> argparse.ArgumentParser:
    from coordinator.commands import add_unlock_arguments

    parser = argparse.ArgumentParser(
        prog="shardmerge",
        description="Merge sharded MySQL tables from CDC events into one table, "
        "coordinating shard DDL.",
    )
    verbs = parser.add_subparsers(dest="verb", required=True)

    run = verbs.add_parser("run", help="run the streaming job (Kafka -> Delta)")
    run.add_argument("--config", required=True, help="the job's YAML settings file")
    run.add_argument(
        "--available-now", action="store_true", help="process what is in Kafka now, then stop"
    )
    run.set_defaults(func=_run)

    locks = verbs.add_parser("locks", help="show each target's lock: stage, held shards, DDL")
    locks.add_argument("--config", required=True)
    locks.add_argument("--json", action="store_true", help="machine-readable output")
    locks.set_defaults(func=_locks)

    unlock = verbs.add_parser(
        "unlock", help="skip, execute or replace a held shard's DDL, or force-remove a lock"
    )
    unlock.add_argument("--config", required=True)
    add_unlock_arguments(unlock)
    unlock.set_defaults(func=_unlock)

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
        choices=["memory", "spark", "mariadb"],
        help="memory: in-process, no Kafka or Spark (default); spark: real Kafka broker, "
        "the streaming job with AvailableNow, a Delta table; mariadb: the steps run as SQL "
        "on real MariaDB shards captured by Debezium on Kafka Connect, then as spark, and "
        "the Delta table is also checked against the shards' own rows",
    )
    srun.set_defaults(func=_scenario_run)

    for verb, (module, text) in FORWARDED.items():
        forwarded = verbs.add_parser(verb, help=text, add_help=False)
        forwarded.add_argument("rest", nargs=argparse.REMAINDER)
        forwarded.set_defaults(func=_forward(module))
    return parser


def main(argv: list[str] | None = None) -> int:
    import importlib

    from schemas.errors import ShardMergeError

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in FORWARDED:
        # These verbs own their options (argparse cannot pass "--x" through a positional).
        try:
            module = FORWARDED[argv[0]][0]
            forwarded: int = importlib.import_module(module).cli_main(argv[1:])
        except ShardMergeError as e:
            print(f"shardmerge: {e}", file=sys.stderr)
            return 2
        return forwarded
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except ShardMergeError as e:
        print(f"shardmerge: {e}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
