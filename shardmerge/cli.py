"""The ``shardmerge`` command line.

Verbs: ``run`` (the streaming job), ``locks`` and ``unlock`` (operate a running job's shard
DDL locks), ``scenario run`` (scenario files on an engine), and, with the development
tooling (the ``dev`` extra), ``demo`` (the embedded default: local Kafka, a sharded
workload with a DDL rollout, Delta), ``produce`` (a sharded Debezium workload to Kafka),
``kafka start|stop|status`` (a local broker) and ``upstream start|stop|status`` (local
MariaDB servers captured by Debezium on Kafka Connect). Human-readable progress goes to
stderr; machine-readable results to stdout.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable

from devkit.cli import ENGINE_HELP, TOOL_VERBS
from shardmerge.errors import ShardMergeError

__all__ = ["main"]


class ToolingMissing(ShardMergeError):
    """A development verb was asked for, but the ``dev`` extra is not installed."""


def _import_tool(module: str) -> object:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is not None and e.name.split(".")[0] in ("confluent_kafka", "pymysql"):
            raise ToolingMissing(
                f"{module} needs the development tooling ({e.name} is not installed): "
                "pip install 'shardmerge[dev]' or run scripts/bootstrap"
            ) from e
        raise


def _scenario_run(args: argparse.Namespace) -> int:
    from coordinator.scenario.runner import run_files
    from devkit.cli import run_engine

    engines = {name: (lambda ss, n=name: run_engine(n, ss)) for name in ENGINE_HELP}
    results = run_files(args.files, args.engine, engines=engines)
    for result in results:
        print(json.dumps(result.output, default=str), flush=True)
    if any(r.invalid for r in results):
        return 2
    failed = [r for r in results if not r.ok]
    print(f"{len(results) - len(failed)}/{len(results)} scenario(s) passed", file=sys.stderr)
    return 1 if failed else 0


def _forward(module: str) -> Callable[[argparse.Namespace], int]:
    def call(args: argparse.Namespace) -> int:
        code: int = _import_tool(module).cli_main(args.rest)  # type: ignore[attr-defined]
        return code

    return call


def build_parser() -> argparse.ArgumentParser:
    from streaming.cli import add_job_verbs

    parser = argparse.ArgumentParser(
        prog="shardmerge",
        description="Merge sharded MySQL tables from CDC events into one table, "
        "coordinating shard DDL.",
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
        choices=["memory", *ENGINE_HELP],
        help="memory: in-process, no Kafka or Spark (default); "
        + "; ".join(f"{name}: {text}" for name, text in ENGINE_HELP.items()),
    )
    srun.set_defaults(func=_scenario_run)

    for verb, (module, text) in TOOL_VERBS.items():
        forwarded = verbs.add_parser(verb, help=text, add_help=False)
        forwarded.add_argument("rest", nargs=argparse.REMAINDER)
        forwarded.set_defaults(func=_forward(module))
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in TOOL_VERBS:
            # These verbs own their options (argparse cannot pass "--x" through a positional).
            code: int = _import_tool(TOOL_VERBS[argv[0]][0]).cli_main(argv[1:])  # type: ignore[attr-defined]
            return code
        args = build_parser().parse_args(argv)
        code = args.func(args)
    except ShardMergeError as e:
        print(f"shardmerge: {e}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
