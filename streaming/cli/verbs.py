"""The job's verbs of the ``shardmerge`` command line: ``run``, ``locks``, ``unlock``,
``move``, ``history``.

``run`` runs the streaming job; ``locks`` and ``unlock`` operate a running job's shard DDL
locks through the durable command inbox under its checkpoint. The ``shardmerge`` entry
point (:mod:`shardmerge.cli`) adds ``scenario run`` and the development tooling's verbs.
Human-readable progress goes to stderr; machine-readable results to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

__all__ = ["add_job_verbs"]


def _run(args: argparse.Namespace) -> int:
    from shardmerge.printable import setup_logging
    from streaming.config import load_settings
    from streaming.job import run

    setup_logging()
    run(load_settings(args.config), available_now=args.available_now)
    return 0


def _store(config: str) -> Any:
    """The job's state store. A local checkpoint (``file:`` or a path) is read in plain
    Python, in milliseconds; one on S3, GCS or Azure through pyarrow (no JVM; credentials
    from the cloud SDK's chain and spark-defaults.conf's ``fs.s3a.*``); any other (HDFS), or
    any with ``SHARDMERGE_CLI_FS=spark``, through a Spark session's Hadoop filesystem
    (credentials from Spark's conf: spark-defaults.conf or PYSPARK_SUBMIT_ARGS,
    docs/cluster.md)."""
    from urllib.parse import urlsplit

    from streaming.config import load_settings
    from streaming.fs.arrow import ARROW_SCHEMES
    from streaming.fs.local import local_path
    from streaming.storage.state_store import StateStore

    settings = load_settings(config)
    light = local_path(settings.checkpoint) is not None
    light |= urlsplit(settings.checkpoint).scheme.lower() in ARROW_SCHEMES
    if light and os.environ.get("SHARDMERGE_CLI_FS", "").lower() != "spark":
        return StateStore(None, settings.checkpoint)
    from streaming.runtime.spark_session import session_for_job

    return StateStore(session_for_job("shardmerge-cli"), settings.checkpoint)


def _locks(args: argparse.Namespace) -> int:
    from shardmerge.printable import printable as p

    store = _store(args.config)
    latest = store.latest()
    if latest is None:
        print("no batch has run yet: no locks", file=sys.stderr)
        return 0
    batch, data = latest
    policies = _policies(data)
    if args.json:
        out = {"batch": batch, "locks": data["locks"], "stats": data["stats"]}
        out["waiting"] = data.get("waiting", [])
        print(json.dumps({**out, "policy_decisions": policies}))
        return 0
    print(f"after batch {batch}:")
    print(f"{'target':24} {'mode':12} {'stage':9} {'shards':>6}  held shards / pending DDL")
    shown = args.shards or None  # 0: every shard
    for lock in data["locks"]:
        # Names, statements and messages come from upstream: escaped (shardmerge.printable).
        blocked = lock["blocked"][:shown]
        more = len(lock["blocked"]) - len(blocked)
        print(
            f"{p(lock['target']):24} {lock['mode']:12} {lock['stage']:9} {lock['shards']:>6}  "
            + (", ".join(p(s) for s in blocked) or "-")
            + (f" and {more} more held ({len(lock['blocked'])} in all; --shards 0 lists "
               "them)" if more else "")
        )  # fmt: skip
        for pending in lock["pending_ddl"][:shown]:
            print(f"{'':55}{p(pending['shard'])}: {p(pending['sql'])}")
        if shown is not None and len(lock["pending_ddl"]) > shown:
            print(f"{'':55}... {len(lock['pending_ddl']) - shown} more pending statements")
        if lock.get("conflict"):
            print(f"{'':55}conflict: {p(lock['conflict'])}")
        for note in policies.get(lock["target"], [])[-POLICY_SHOWN:]:
            print(
                f"{'':55}policy {note['kind']}: {note['policy']} decided {p(note['shard'])}: "
                f"{p(note['sql'])}"
            )
    waiting = data.get("waiting", [])
    if waiting:
        # Counts of their rows need the stash (a Delta table): the dashboard and the
        # metric shardmerge_waiting_rows show them.
        print("shards whose rows wait without a DDL lock (rows: dashboard / metrics):")
        for w in waiting:
            since = (
                time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(w["since"])) + " UTC"
                if w.get("since")
                else "-"
            )
            print(f"  {p(w['target'])}  {p(w['shard'])}  {w['kind']}  since {since}")
            print(f"{'':4}{p(w['reason'])}")
    failed = store.failure()
    if failed is not None:
        print(f"the job stopped in batch {failed['batch']}: {p(failed['error'])}")
    waiting = store.inbox()
    if waiting:
        print("commands waiting for the next batch (withdraw one: unlock --cancel ID):")
        for c in waiting:
            print(f"  {p(c['id'])}  {p(c['words'])}")
    return 0


POLICY_SHOWN = 5  # the latest decisions of a schema-change policy shown per target


def _policies(data: dict[str, Any]) -> dict[str, list[dict[str, str]]]:
    """Per target, the latest DDLs its schema-change policy decided (a word other than
    ``forward``: ignore, warn, fail, keep), as the coordinator state keeps them."""
    out: dict[str, list[dict[str, str]]] = {}
    for t in data.get("coordinator", {}).get("targets", []):
        notes = t.get("policy_notes", [])
        if notes:
            keys = ("shard", "sql", "kind", "policy")
            out[t["id"]] = [dict(zip(keys, n, strict=True)) for n in notes]
    return out


def _unlock(args: argparse.Namespace) -> int:
    from coordinator.commands import command_from_args, refusal
    from shardmerge.printable import printable

    if args.cancel is not None:
        return _cancel(args)
    if args.target is None:
        print("refused: give the target (db.table), or --cancel ID", file=sys.stderr)
        return 2
    command = command_from_args(args)
    store = _store(args.config)
    latest = store.latest()
    why = refusal(command, latest[1]["locks"]) if latest is not None else None
    if why is not None:
        # Checked against the latest state: refused now, with the reason, rather than a
        # command error at the next batch. exit 2, as for words that do not parse.
        print(f"refused: {printable(why)}", file=sys.stderr)
        return 2
    command_id = store.submit(command)
    print(
        f"queued {printable(command.words())!r} ({command_id}); "
        "it takes effect at the next micro-batch"
    )
    return 0


def _cancel(args: argparse.Namespace) -> int:
    from shardmerge.printable import printable

    others = [args.target, args.shard, args.action, args.replace, args.force_remove, args.retry]
    if any(others):
        print("refused: --cancel ID takes nothing else (no target, no action)", file=sys.stderr)
        return 2
    why = _store(args.config).cancel(args.cancel)
    if why is not None:
        print(f"refused: {printable(why)}", file=sys.stderr)
        return 2
    print(
        f"withdrawn: {printable(args.cancel)}; no batch that starts from now on applies it "
        "(one already running may have)"
    )
    return 0


def _move(args: argparse.Namespace) -> int:
    """``move show``: each declared move's state as the latest batch saved it; ``move
    abort ID`` and ``move switch ID ...``: queue the command (refused at once when the move
    cannot take it)."""
    from shardmerge.printable import printable as p

    store = _store(args.config)
    latest = store.latest()
    saved = latest[1].get("moves", {}) if latest is not None else {}
    progress = saved.get("progress", {})
    if args.move_verb in ("abort", "switch"):
        why, command = _move_command(args, progress)
        if why is not None:
            print(f"refused: {p(why)}", file=sys.stderr)
            return 2
        command_id = store.submit(command)
        print(
            f"queued {p(command.words())!r} ({command_id}); it takes effect at the next micro-batch"
        )
        return 0
    unmet = saved.get("unmet", {})
    if args.json:
        print(json.dumps({"batch": latest[0] if latest else None, **saved}))
        return 0
    if not progress:
        print("no move in the job's state (none declared, or no batch has run yet)")
        return 0
    print(f"after batch {latest[0] if latest else '-'}:")
    print(f"{'move':16} {'state':10} {'frozen at (source: position)':40} switch marker at")
    for move_id, prog in sorted(progress.items()):
        frozen = ", ".join(f"{s}: {pos}" for s, pos in sorted(prog["frozen"].items())) or "-"
        print(f"{p(move_id):16} {prog['state']:10} {p(frozen):40} {prog['switched_at'] or '-'}")
        for why in unmet.get(move_id, []):
            print(f"{'':4}waits: {p(why)}")
        for key in ("queued", "deferred"):
            for r in saved.get(key, {}).get(move_id, []):
                print(f"{'':4}{key} statement of {_kept(r)}")
    pending = saved.get("pending", [])
    if pending:
        print("statements waiting for their source's marker watermark (heartbeat rows):")
        for r in pending:
            print(f"  {_kept(r)}")
    return 0


def _group(args: argparse.Namespace) -> int:
    """``group show``: the group's members (live or down, by their heartbeats' own
    timestamps), the owner's term, and per target the decided and applied versions."""
    import time

    from shardmerge.printable import printable as p
    from streaming.group.member import beat_views, group_status, log_gap

    settings, store = _group_store(args.config)
    if settings is None:
        return 2
    co, root = settings.coordination, settings.group_root()
    status = group_status(store, settings, beat_views(store, co, time.time()))
    if args.json:
        print(json.dumps(status, indent=2, sort_keys=True))
        return 0
    # Names read back from the group store (a term's member, a beat's text) are escaped.
    owner = status["owner"]
    snap = f" (up to {status['snapshot']} in a snapshot)" if status["snapshot"] else ""
    print(f"group {p(co.group)} (lease {co.lease_s:g} s), {status['log']} log records{snap}, "
          f"store {p(root)}")  # fmt: skip
    gap = log_gap(store)
    if gap is not None:
        print(f"the group log has no record {gap} while later ones exist: no member reads past "
              f"it (shardmerge group repair --fill-gap {gap}, docs/groups.md)")  # fmt: skip
    if owner is None:
        print("owner: no term claimed yet")
    else:
        state = "live" if owner["live"] else "DOWN: the next live member takes the term"
        print(f"owner: {p(owner['member'])} (term {owner['term']}, epoch "
              f"{p(_dash(owner['epoch']))}), {state}")  # fmt: skip
    head = f"{'member':16} {'epoch':>5} {'state':5} {'beat age':>9} {'ack':>6} {'batch':>7}"
    print(f"{head}  waiting")
    for m in status["members"]:
        age = "-" if m["silent_s"] == float("inf") else f"{m['silent_s']:.0f} s"
        print(f"{p(m['member']):16} {p(_dash(m['epoch'])):>5} {'live' if m['live'] else 'DOWN':5} "
              f"{age:>9} {p(_dash(m['ack'])):>6} {p(_dash(m['batch'])):>7}  "
              f"{p(m['waiting']) or '-'}")  # fmt: skip
    print(f"{'target':32} {'decided':>7} {'applied':>7}")
    for t in status["targets"]:
        print(f"{p(t['target']):32} {t['decided']:>7} {t['applied']:>7}")
    return 0


def _group_repair(args: argparse.Namespace) -> int:
    """``group repair --fill-gap N``: write a no-op record at the group log's number ``N``
    (a record lost while later ones exist stops every member), only with ``--yes``."""
    from coordinator.group import GroupError
    from shardmerge.printable import printable as p
    from streaming.group.member import fill_gap, log_gap

    settings, store = _group_store(args.config)
    if settings is None:
        return 2
    gap = log_gap(store)
    n = args.fill_gap
    print(f"group log at {p(settings.group_root())}: {len(store.numbers('log'))} records, "
          f"first gap: {'none' if gap is None else gap}")  # fmt: skip
    if not args.yes:
        print(f"refused: filling log record {n} with a no-op record loses whatever was there "
              "(its job appends it again when its batch runs again); stop every job that "
              "may be writing it, then give --yes", file=sys.stderr)  # fmt: skip
        return 2
    try:
        fill_gap(store, n, "shardmerge group repair --fill-gap")
    except GroupError as e:
        print(f"refused: {p(e)}", file=sys.stderr)
        return 2
    print(f"log record {n}: a no-op record written; the group's members read past it now")
    return 0


def _group_store(config: str) -> tuple[Any, Any]:
    """The settings and the group store of a job's configuration (None, None: the job
    has no coordination settings, which is said)."""
    from streaming.config import load_settings
    from streaming.fs.local import local_path
    from streaming.storage.group_store import group_store

    settings = load_settings(config)
    if settings.coordination is None:
        print(f"{config}: no coordination settings: this job is its targets' only writer")
        return None, None
    root = settings.group_root()
    spark = None
    if local_path(root) is None:
        from streaming.runtime.spark_session import session_for_job

        spark = session_for_job("shardmerge-cli")
    return settings, group_store(root, spark)


def _dash(value: Any) -> str:
    return "-" if value is None else str(value)


def _move_command(args: argparse.Namespace, progress: dict[str, Any]) -> tuple[str | None, Any]:
    """The command ``move abort|switch`` asks for, or why it is refused against the latest
    saved state (an unknown move, one that cannot take it, positions that do not parse)."""
    from coordinator.moves import MoveError, parse_move_command

    # The command's words, read back by the one parser (a value with a space is refused).
    words = f"move {args.move_verb} {args.id}"
    if args.move_verb == "switch":
        words += "".join(f" --frozen {f}" for f in args.frozen or [])
        words += f" --switched {args.switched}" if args.switched else ""
    try:
        command = parse_move_command(words)
    except MoveError as e:
        return str(e), None
    state = progress.get(command.move, {}).get("state")
    if state is None:
        known = ", ".join(sorted(progress)) or "none"
        return f"no move {command.move} in the job's state (moves: {known})", None
    if state in ("switched", "aborted") or (args.move_verb == "switch" and state == "switching"):
        return f"move {command.move} is {state}", None
    return None, command


def _kept(r: dict[str, Any]) -> str:
    """A control event a move keeps (its columns, as the state saves them), printable."""
    from coordinator.moves import kept_statement
    from shardmerge.printable import printable

    return printable(kept_statement(r))


def _history(args: argparse.Namespace) -> int:
    """The target table's Delta commits, newest first, each downstream change with the
    statement and the shard DDL or operator command that caused it (its userMetadata)."""
    from coordinator.ids import TargetId
    from shardmerge.printable import printable as p
    from streaming.config import load_settings
    from streaming.runtime.spark_session import session_for_job
    from streaming.storage.delta_sink import delta_table_at
    from streaming.storage.sinks import sink_of

    settings = load_settings(args.config)
    try:
        target = TargetId.parse(args.target)
    except ValueError as e:
        print(f"refused: {p(str(e))}", file=sys.stderr)
        return 2
    spark = session_for_job("shardmerge-cli")
    if settings.sink.kind == "jdbc":
        path = f"{settings.sink.url} {target}"
    else:
        path = settings.table_path(target)
        if not delta_table_at(spark, path):
            print(f"no Delta table for {target} at {p(path)} yet", file=sys.stderr)
            return 2
    commits = sink_of(spark, settings, "shardmerge-cli").history(target, args.limit)
    if args.json:
        print(json.dumps({"target": str(target), "path": path, "commits": commits}))
        return 0
    print(f"{target} at {p(path)}, newest first:")
    for c in commits:
        line = f"{c['version']:>6}  {c['timestamp']}  {c['operation']}"
        if c["cause"] is not None:
            line += f"  {p(c['cause'].get('statement', ''))}"
            line += f"\n{'':8}because: {p(c['cause'].get('reason', ''))}"
        elif c["user_metadata"]:
            line += f"  (metadata: {p(c['user_metadata'])})"
        print(line)
    return 0


def _lag(args: argparse.Namespace) -> int:
    from shardmerge.printable import printable as p
    from streaming.config import load_settings
    from streaming.ops.lag import LagError, lag_report, now_ms

    settings = load_settings(args.config)
    try:
        report = lag_report(settings)
    except LagError as e:
        print(f"shardmerge lag: {p(str(e))}", file=sys.stderr)
        return 1
    out = report.as_json(now_ms())
    if args.json:
        print(json.dumps(out))
        return 0
    if report.batch is None:
        print("no batch committed yet: every record of the job's topics is behind")
    else:
        print(f"after batch {report.batch} (planned {out['age_seconds']:.0f} s ago): "
              f"{out['behind']:,} records behind")  # fmt: skip
    print(f"{'target':32} {'records behind':>15} {'shards behind':>14}  most behind")
    for target, t in out["targets"].items():
        worst = ", ".join(f"{p(w['shard'])} {w['behind']:,}" for w in t["worst"]) or "-"
        counted = f"{t['shards_behind']} of {t['shards']}"
        print(f"{p(target):32} {t['behind']:>15,} {counted:>14}  {worst}")
    shared = out["shared_topics"]
    if shared:
        print("topics that carry several shards (which shard's records are behind is known "
              "only by reading them):")  # fmt: skip
        for topic, t in shared.items():
            print(f"  {p(topic):40} {t['behind']:>12,} behind in {t['partitions']} partition(s)")
    schema = {k: v for k, v in out["schema_topics"].items() if v["behind"]}
    for topic, t in schema.items():
        print(f"schema-change topic {p(topic)}: {t['behind']:,} DDL record(s) behind")
    if args.shards:
        print("shards behind:")
        for shard, n in out["shards"].items():
            if n:
                print(f"  {p(shard):48} {n:>12,}")
    if args.partitions:
        print(f"{'topic':48} {'partition':>9} {'read to':>12} {'end':>12} {'behind':>10}")
        for part in out["partitions"]:
            read = "-" if part["read"] is None else f"{part['read']:,}"
            print(f"{p(part['topic']):48} {part['partition']:>9} {read:>12} "
                  f"{part['end']:>12,} {part['behind']:>10,}")  # fmt: skip
    return 0


def add_job_verbs(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``run``, ``locks`` and ``unlock`` on a subparsers object."""
    from coordinator.commands import add_unlock_arguments

    run = verbs.add_parser("run", help="run the streaming job (Kafka -> Delta)")
    run.add_argument("--config", required=True, help="the job's YAML settings file")
    run.add_argument(
        "--available-now", action="store_true", help="process what is in Kafka now, then stop"
    )
    run.set_defaults(func=_run)

    locks = verbs.add_parser("locks", help="show each target's lock: stage, held shards, DDL")
    locks.add_argument("--config", required=True)
    locks.add_argument("--json", action="store_true", help="machine-readable output")
    locks.add_argument(
        "--shards",
        type=int,
        default=20,
        metavar="N",
        help="held shards and pending statements listed per target (default 20; 0: all; "
        "--json always has all)",
    )
    locks.set_defaults(func=_locks)

    unlock = verbs.add_parser(
        "unlock", help="skip, execute or replace a held shard's DDL, or force-remove a lock"
    )
    unlock.add_argument("--config", required=True)
    add_unlock_arguments(unlock, cancel=True)
    unlock.set_defaults(func=_unlock)

    move = verbs.add_parser(
        "move", help="declared moves (docs/moves.md): show their state, or abort one"
    )
    move_verbs = move.add_subparsers(dest="move_verb", required=True)
    show = move_verbs.add_parser(
        "show", help="each move's state, freeze and switch positions, what its switch waits for"
    )
    show.add_argument("--config", required=True)
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.set_defaults(func=_move)
    abort = move_verbs.add_parser(
        "abort", help="abort a move before its switch: the old side stays home"
    )
    abort.add_argument("--config", required=True)
    abort.add_argument("id", help="the move's id, as declared under moves:")
    abort.set_defaults(func=_move)
    switch = move_verbs.add_parser(
        "switch",
        help="the freeze and switch positions of a move whose copy tool cannot write the "
        "marker rows: the switch runs once its preconditions hold",
    )
    switch.add_argument("--config", required=True)
    switch.add_argument("id", help="the move's id, as declared under moves:")
    switch.add_argument(
        "--frozen",
        action="append",
        metavar="SOURCE=FILE:POS",
        help="a from source's binlog position once its writes stopped (repeat per source)",
    )
    switch.add_argument(
        "--switched",
        metavar="FILE:POS",
        help="to's source's binlog position once the copy caught up, before its first write",
    )
    switch.set_defaults(func=_move)

    group = verbs.add_parser(
        "group", help="several jobs on one target (docs/groups.md): members, owner, versions"
    )
    group_verbs = group.add_subparsers(dest="group_verb", required=True)
    gshow = group_verbs.add_parser(
        "show", help="members (live or down), the owner's term, decided and applied versions"
    )
    gshow.add_argument("--config", required=True)
    gshow.add_argument("--json", action="store_true", help="machine-readable output")
    gshow.set_defaults(func=_group)
    grepair = group_verbs.add_parser(
        "repair", help="fill a gap of the group log (a lost record) with a no-op record"
    )
    grepair.add_argument("--config", required=True)
    grepair.add_argument(
        "--fill-gap", type=int, required=True, metavar="N",
        help="the log's number N without a record (group show names it)",
    )  # fmt: skip
    grepair.add_argument(
        "--yes", action="store_true", help="write it (without: say what would be done)"
    )
    grepair.set_defaults(func=_group_repair)

    lag = verbs.add_parser(
        "lag",
        help="records behind per target and shard: the checkpoint's offsets against the "
        "brokers' end offsets (no JVM)",
    )
    lag.add_argument("--config", required=True)
    lag.add_argument("--shards", action="store_true", help="every shard behind, not the worst")
    lag.add_argument("--partitions", action="store_true", help="every topic-partition too")
    lag.add_argument("--json", action="store_true", help="machine-readable output")
    lag.set_defaults(func=_lag)

    history = verbs.add_parser(
        "history",
        help="a target's Delta commits, each downstream change with its statement and cause",
    )
    history.add_argument("--config", required=True)
    history.add_argument("target", help="the downstream table, db.table")
    history.add_argument("--limit", type=int, default=20, help="newest commits shown (20)")
    history.add_argument("--json", action="store_true", help="machine-readable output")
    history.set_defaults(func=_history)
