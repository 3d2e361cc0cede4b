"""The ``shardmerge`` command line.

Verbs: ``scenario run`` (run scenario files on an engine), ``kafka start|stop|status``
(a local broker for development and tests). Human-readable progress goes to stderr;
machine-readable results to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["main"]


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


def _kafka(args: argparse.Namespace) -> int:
    from streaming.kafka_local import cli_main

    return cli_main(args.kafka_args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="shardmerge",
        description="Merge sharded MySQL tables from CDC events into one table, "
        "coordinating shard DDL.",
    )
    verbs = parser.add_subparsers(dest="verb", required=True)

    scenario = verbs.add_parser("scenario", help="scenario files: the test-case language")
    scenario_verbs = scenario.add_subparsers(dest="scenario_verb", required=True)
    run = scenario_verbs.add_parser(
        "run",
        help="run scenario files; one JSON object per file on stdout; exit 0 all passed, "
        "1 one failed, 2 a file is invalid",
    )
    run.add_argument("files", nargs="+", metavar="FILE", help="scenario YAML files")
    run.add_argument(
        "--engine",
        default="memory",
        choices=["memory", "spark"],
        help="memory: in-process, no Kafka or Spark (default); spark: real Kafka broker, "
        "the streaming job with AvailableNow, a Delta table",
    )
    run.set_defaults(func=_scenario_run)

    kafka = verbs.add_parser(
        "kafka", help="a local Kafka broker (KRaft) for development: start|stop|status"
    )
    kafka.add_argument("kafka_args", nargs=argparse.REMAINDER)
    kafka.set_defaults(func=_kafka)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
