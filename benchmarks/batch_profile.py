"""Where a micro-batch's time goes: the Spark jobs of the streaming job, per protocol step,
from Spark's event log, next to baseline (d) of ``pipeline_throughput.py`` from the same run.

    .venv/bin/python benchmarks/batch_profile.py [--events 250000] [--shards 16]

Produces the same workload as ``pipeline_throughput.py`` (an ADD COLUMN and a column
rename rolled out shard by shard), runs (d) plain streaming with one persist and one
per-shard aggregate (after a warm-up run of (c)), (c) again warm, then the job, with Spark's event log on. Prints per step (the job
description every batch sets, ``shardmerge batch N: step``) the number of Spark jobs and
their summed wall time, and the slowest jobs with what ran them (the call site).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pipeline_throughput import FINAL, plain_stream, produce_workload, run_job, settings


def jobs(log_dir: Path) -> list[dict[str, Any]]:
    """Every Spark job of the event logs in ``log_dir``: description, call site, seconds."""
    started: dict[int, dict[str, Any]] = {}
    done = []
    # a rolling (v2) log is a folder of events_N_* files beside an empty appstatus file
    for f in sorted(p for p in log_dir.rglob("events_*") if p.is_file()):
        for line in f.read_text().splitlines():
            if not line.strip():
                continue
            e = json.loads(line)
            kind = e.get("Event")
            if kind == "SparkListenerJobStart":
                props = e.get("Properties") or {}
                started[e["Job ID"]] = {
                    "description": props.get("spark.job.description") or "",
                    "site": (props.get("callSite.short") or "")[:70],
                    "start": e["Submission Time"],
                }
            elif kind == "SparkListenerJobEnd" and e["Job ID"] in started:
                j = started.pop(e["Job ID"])
                j["seconds"] = (e["Completion Time"] - j["start"]) / 1000
                done.append(j)
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=250_000)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--max-offsets", type=int, default=62_500)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--steady", action="store_true", help="no DDL rollout: rows only")
    parser.add_argument(
        "--timeline", type=int, default=2, help="list every Spark job of this batch in order"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="shardmerge-profile-"))
    logs = work / "events"
    logs.mkdir()
    os.environ["SHARDMERGE_SPARK_CONF"] = (
        os.environ.get("SHARDMERGE_SPARK_CONF", "")
        + f" spark.eventLog.enabled=true spark.eventLog.compress=false spark.eventLog.dir=file://{logs}"
    )
    from devkit import kafka_local
    from streaming.runtime.spark_session import build_spark

    try:
        with kafka_local.running("bench", work / "kafka") as broker:
            produce_workload(broker.bootstrap, args.shards, args.events, args.steady)
            spark = build_spark("shardmerge-profile")
            s = settings(broker.bootstrap, "bench", work, "optimistic", args.max_offsets)
            # once to warm the JVM up (the first streaming query of a session pays for it)
            plain_stream(spark, s, FINAL, summary=False)
            _, d_secs, batches = plain_stream(spark, s, FINAL, summary=True)
            print(f"(d) plain streaming + persist + aggregate: {d_secs:.1f} s, {batches} batches")
            # (c) again, warm, on tables of its own: the side-by-side baseline of the issue
            warm = settings(broker.bootstrap, "bench", work / "c", "optimistic", args.max_offsets)
            _, c_secs, _ = plain_stream(spark, warm, FINAL, label="baseline c warm")
            print(f"(c) plain streaming, warm: {c_secs:.1f} s")
            j_secs, processor = run_job(spark, s)
            print(
                f"shardmerge job: {j_secs:.1f} s = {c_secs / j_secs:.2f}x (c), "
                f"{d_secs / j_secs:.2f}x (d); "
                f"{processor.observer.totals['fast_path']} target writes on the fast path"
            )
            steps_of: dict[str, list[float]] = defaultdict(list)
            for record in processor.observer.history:
                for name, secs in record.steps.items():
                    steps_of[name].append(secs)
            print("the job's protocol steps, seconds per batch (driver wall time):")
            for name, secs in steps_of.items():
                print(f"  {name:10s} " + " ".join(f"{x:6.2f}" for x in secs))
            spark.stop()
            time.sleep(1)
    finally:
        steps: dict[str, list[float]] = defaultdict(list)
        every = jobs(logs) if logs.exists() and any(logs.iterdir()) else []
        for j in every:
            step = re.sub(r"^shardmerge batch \d+: ", "", j["description"]) or "(no step)"
            if j["description"].startswith("baseline"):
                step = re.sub(r" batch \d+", "", j["description"])
            elif not j["description"].startswith("shardmerge batch"):
                step = "(query) " + j["site"]
            steps[step].append(j["seconds"])
        print("\nSpark jobs by step (count, summed seconds):")
        for step, secs in sorted(steps.items(), key=lambda kv: -sum(kv[1])):
            print(f"  {sum(secs):8.1f} s  {len(secs):4d} jobs  {step}")
        print(f"\nThe {args.top} slowest jobs of the job's batches:")
        mine = [j for j in every if j["description"].startswith("shardmerge batch")]
        for j in sorted(mine, key=lambda j: -j["seconds"])[: args.top]:
            print(f"  {j['seconds']:7.2f} s  {j['description']}  {j['site']}")
        for tag in (
            f"shardmerge batch {args.timeline}:",
            f"baseline d batch {args.timeline}",
            f"baseline c warm batch {args.timeline}",
        ):
            line = [j for j in every if j["description"].startswith(tag)]
            if line:
                print(f"\nEvery Spark job of {tag.rstrip(':')} (start offset, seconds):")
                t0 = line[0]["start"]
                for j in line:
                    step = j["description"][len(tag) :].strip(" :")
                    print(
                        f"  +{(j['start'] - t0) / 1000:6.2f} s {j['seconds']:6.2f} s  {step}  "
                        f"{j['site']}"
                    )
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
