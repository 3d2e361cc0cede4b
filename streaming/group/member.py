"""This job as a member of a group: several jobs writing the same targets (docs/groups.md).

The rules are coordinator/PROTOCOL.md's "Groups" (G1-G5); this module runs them against the
group store (``streaming.storage.group_store``), under ``coordination.store``:

- ``log/N.json``: the group log (records of ``coordinator.group``). A batch appends what it
  would have told its coordinator and folds the log (``streaming.batch.protocol``); an append whose
  id the log holds already returns that record's number (a batch run again appends
  nothing twice).
- ``members/M/epochs/N.json``: each start of member ``M`` claims the next epoch; a run that
  finds a newer one stops (:class:`~streaming.storage.epochs.Superseded`): two drivers of one
  member never both write.
- ``members/M/beat.json``: ``M``'s heartbeat, replaced every ``heartbeat_s`` by a thread
  of its driver: a counter, and its *acknowledgement* (``ack``): the log number every write
  it may still make was planned at or beyond. Liveness is judged by the reader's own
  clock: a member whose counter has not changed for ``lease_s`` is down (no clock is
  compared across machines).
- ``terms/N.json``: the owner's terms. The newest term's member is the owner while it is
  live; when it is not, the first live member of ``members`` claims the next term
  (put-if-absent: one winner).
- ``decisions/T/V.json``: target ``T``'s downstream change at version ``V`` (1: its
  creation), published by whichever job folded it first (every replica decides the same).
- ``applied/T/V.json``: written by the owner once the table has version ``V``.
- ``snapshots/S.json``: the log folded up to its record ``S`` (the replica, who had
  joined, the settings fingerprint), written by the owner every ``snapshot_every``
  records. The owner then removes the log's records that the newest snapshot holds and
  every member's batches have folded past (each heartbeat's ``floor``): a start restores
  the newest snapshot and reads the records after it (:func:`compact`).

**The gate** (G4): before its write step a batch waits until every target has the version
its replica decided (``applied`` up to it); it never writes an old schema's rows after a
newer version was decided, nor a new schema's before the table has it. **The owner**
(G5): runs version ``V`` only when every live member acknowledged its decision's record,
in a batch's gate or from the heartbeat thread when the driver is idle. **Fencing**: a
member whose own heartbeat has not been written for ``lease_s`` stops writing (its batch
fails and runs again: :class:`LeaseLost`), and Delta's commit check refuses a write whose
table changed underneath it (the batch runs again, folding the newer log).
"""

from __future__ import annotations

import calendar
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from coordinator.decisions import ApplyDDL, CreateTarget
from coordinator.group import (
    Ack,
    Folded,
    GroupError,
    Record,
    Replica,
    batch_records,
    decision_from_json,
    decision_to_json,
    owner_waits_for,
    settings_differences,
    settings_fingerprint,
    stale_change,
)
from coordinator.ids import TargetId
from shardmerge.errors import ShardMergeError
from streaming.config import CoordinationSettings, Settings
from streaming.faults import crash_point
from streaming.storage.epochs import Superseded
from streaming.storage.group_store import GroupStore, group_store, probe
from streaming.storage.slots import Slots

__all__ = [
    "Fenced",
    "GroupMember",
    "GroupWaitTimeout",
    "LeaseLost",
    "MemberView",
    "Ticker",
    "compact",
    "fill_gap",
    "log_gap",
    "newest_snapshot",
    "tick_topic",
]

log = logging.getLogger("shardmerge.group")


class Fenced(ShardMergeError):
    """The group went on without this member (its lease ran out, or a target has a version
    its batch did not fold): the batch writes nothing and runs again, folding the log."""


class LeaseLost(Fenced):
    """This member's heartbeat was not written for its lease: the owner may have gone on
    without it, so it writes nothing until a batch run again has folded the log."""


class GroupWaitTimeout(ShardMergeError):
    """A batch waited ``gate_timeout_s`` for a target to reach its decided version."""


@dataclass(frozen=True)
class MemberView:
    """One member as this job sees it (``shardmerge group show``, metrics, the dashboard)."""

    member: str
    epoch: int | None
    live: bool
    beat: int | None
    silent_s: float  # since its heartbeat last changed, by this job's clock
    ack: int | None
    batch: int | None
    waiting: str

    def to_json(self) -> dict[str, Any]:
        return {
            "member": self.member,
            "epoch": self.epoch,
            "live": self.live,
            "beat": self.beat,
            "silent_s": round(self.silent_s, 1),
            "ack": self.ack,
            "batch": self.batch,
            "waiting": self.waiting,
        }


def shared_log_store(spark: Any, sink: str) -> None:
    """Refuse a sink whose Delta log store lets two drivers overwrite each other's commit:
    ``file:`` and ``s3a://`` need the project's
    (``streaming.runtime.spark_session.LOGSTORE_CLASS``); HDFS and ABFS's own create a
    commit only if absent."""
    from streaming.runtime.spark_session import LOGSTORE_CLASS

    scheme = urlsplit(sink).scheme.lower() or "file"
    if scheme not in ("file", "s3a"):
        return
    key = f"spark.delta.logStore.{scheme}.impl"
    have = spark.sparkContext.getConf().get(key)
    if have != LOGSTORE_CLASS:
        raise ShardMergeError(
            f"the sink {sink} is written by several jobs of a group, and Delta's log store "
            f"for {scheme}: ({have or 'its default'}) is safe for one driver only: two jobs "
            f"would overwrite each other's commits. Set {key}={LOGSTORE_CLASS} and ship "
            "shardmerge-logstore.jar (scripts/fetch-jars builds it; docs/groups.md)"
        )


def applied(store: GroupStore, target: str) -> int:
    """The version the target's table has (the owner's records, without gaps)."""
    taken = set(store.numbers(f"applied/{target}"))
    v = 0
    while v + 1 in taken:
        v += 1
    return v


def log_gap(store: GroupStore) -> int | None:
    """The first number of the group log without a record while a later one has one, or
    None. A number is claimed put-if-absent and a record is visible whole once written,
    so a later record means this one was written and then lost (deleted by hand, a
    bucket's lifecycle rule): no member reads past it (``GroupStore.since``). The numbers
    the newest snapshot holds (``snapshots/S.json``: files below ``S``) are no gap when
    absent: compaction removes them."""
    snap = newest_snapshot_seq(store)
    numbers = [n for n in store.numbers("log") if n >= snap]
    return next((n for n, have in enumerate(numbers, start=snap) if n != have), None)


def newest_snapshot_seq(store: GroupStore) -> int:
    """The log record the newest snapshot is folded up to (0: no snapshot); the log's
    files below it (``log/N.json`` holds record ``N + 1``) are in the snapshot."""
    return max(store.numbers("snapshots"), default=0)


def newest_snapshot(store: GroupStore) -> dict[str, Any] | None:
    """The newest snapshot of the folded group log, or None."""
    seq = newest_snapshot_seq(store)
    if seq == 0:
        return None
    value = store.read_numbered("snapshots", seq)
    if value is None or value.get("seq") != seq or not isinstance(value.get("replica"), dict):
        raise GroupError(
            f"snapshots/{_n(seq)} of the group store is not a snapshot of log record {seq}: "
            "remove it (the log's records after the one before it are still there) and "
            'start the member again (docs/groups.md, "Compaction")'
        )
    return value


def compact(
    store: GroupStore,
    latest: Replica,
    joined: list[str],
    settings: dict[str, Any],
    member: str,
    floors: dict[str, int],
    every: int,
) -> tuple[int | None, int]:
    """The owner's compaction of the group log: a snapshot of ``latest`` when it is
    ``every`` records past the newest one, then the removal of the log's files below the
    lowest of the newest snapshot and every member's ``floors`` (the record its batches
    may restore from: a member without a floor yet holds everything); the snapshot
    written (or None) and how many files were removed. Snapshots but the newest three
    are removed too."""
    if every <= 0:
        return None, 0
    written = None
    snap = newest_snapshot_seq(store)
    if latest.seq >= snap + every:
        value = {"seq": latest.seq, "replica": latest.snapshot(), "joined": sorted(joined),
                 "settings": settings, "member": member,
                 "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
        if store.create_new(f"snapshots/{_n(latest.seq)}", value):
            written = latest.seq
        snap = max(snap, latest.seq)
    below = min([snap, *floors.values()])
    removed = store.prune_below("log", below) if below > 0 else 0
    store.prune("snapshots", 3)
    return written, removed


def fill_gap(store: GroupStore, n: int, reason: str) -> None:
    """Write a ``noop`` record at the group log's number ``n`` (``shardmerge group repair
    --fill-gap N``), refused unless ``n`` is a gap: no record there, a later one present.
    The record that was at ``n`` is lost: the member that appended it appends it again
    (at the log's end) when its batch runs again, if it still needs it."""
    numbers = store.numbers("log")
    if n in numbers:
        raise GroupError(f"the group log has a record {n} (log/{_n(n)}): nothing to fill")
    snap = newest_snapshot_seq(store)
    if n < snap:
        raise GroupError(
            f"log/{_n(n)} is held by the snapshot of log record {snap} (compaction removed "
            "it): nothing to fill"
        )
    if n < 0 or not numbers or n > numbers[-1]:
        last = numbers[-1] if numbers else "none"
        raise GroupError(
            f"the group log has no record after {n} (its last is {last}): {n} is not a gap "
            "(a member may be appending it now); nothing is written"
        )
    record = Record(f"repair:fill-gap:{n}", "operator", "noop", {
        "reason": reason, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})  # fmt: skip
    if not store.create_new(f"log/{_n(n)}", record.to_json()):
        raise GroupError(f"log/{_n(n)} was written meanwhile: nothing is written")


def group_status(
    store: GroupStore, settings: Settings, members: list[MemberView], log: int | None = None
) -> dict[str, Any]:
    """Members (live or down), the owner's term, and per routed target the version the
    group decided and the one its table has, from the group store; ``log``: the number
    of the group log's last record, when the caller has read it (else the store's log is
    listed); ``snapshot``: the record the newest snapshot holds the log up to."""
    co = settings.coordination
    assert co is not None
    numbers = store.numbers("terms")
    term = store.read_numbered("terms", numbers[-1]) if numbers else None
    by = {v.member: v for v in members}
    holder = by.get(str((term or {}).get("member")))
    owner_live = holder is not None and holder.live and holder.epoch == (term or {}).get("epoch")
    targets = []
    for name in sorted({r.target for r in settings.routes}):
        decided = max(store.numbers(f"decisions/{name}"), default=0)
        targets.append({"target": name, "decided": decided, "applied": applied(store, name)})
    owner = None
    if term is not None:
        owner = {"term": numbers[-1], "member": term.get("member"), "epoch": term.get("epoch"),
                 "live": owner_live}  # fmt: skip
    return {
        "group": co.group,
        "lease_s": co.lease_s,
        "members": [v.to_json() for v in members],
        "owner": owner,
        "targets": targets,
        "log": _log_end(store) if log is None else log,
        "snapshot": newest_snapshot_seq(store),
    }


def _log_end(store: GroupStore) -> int:
    """The number of the group log's last record (compaction removes the first ones)."""
    numbers = store.numbers("log")
    return numbers[-1] + 1 if numbers else 0


def beat_views(store: GroupStore, co: CoordinationSettings, now: float) -> list[MemberView]:
    """The members as their heartbeats' own timestamps say (``shardmerge group show``, run
    outside the job: it has no earlier reading to compare a beat with, so it judges by the
    clock of the machine that wrote it)."""
    out = []
    for m in co.members:
        beat = store.read(f"members/{m}/beat.json")
        epochs = store.numbers(f"members/{m}/epochs")
        if beat is None:
            out.append(MemberView(m, epochs[-1] if epochs else None, False, None, float("inf"),
                                  None, None, ""))  # fmt: skip
            continue
        at = calendar.timegm(time.strptime(str(beat["at"]), "%Y-%m-%dT%H:%M:%SZ"))
        silent = max(0.0, now - at)
        out.append(MemberView(
            m, beat.get("epoch"), silent <= co.lease_s and beat.get("epoch") == (
                epochs[-1] if epochs else None), beat.get("beat"), silent, beat.get("ack"),
            beat.get("batch"), str(beat.get("waiting", "")),
        ))  # fmt: skip
    return out


def tick_topic(co: CoordinationSettings) -> str:
    """The Kafka topic whose records make member ``co.member`` run a batch."""
    return f"shardmerge.tick.{co.group}.{co.member}"


class Ticker:
    """Writes a record to this member's tick topic (created at start, one partition)
    through a Kafka client in the driver's JVM, configured as the job's Kafka source."""

    def __init__(self, spark: Any, settings: Settings) -> None:
        from streaming.source.caught_up import client_props

        assert settings.coordination is not None
        self.topic = tick_topic(settings.coordination)
        jvm: Any = spark._jvm
        self.jvm = jvm
        admin = jvm.org.apache.kafka.clients.admin.Admin.create(client_props(spark, settings))
        try:
            new = jvm.org.apache.kafka.clients.admin.NewTopic(
                self.topic, jvm.java.util.Optional.of(1), jvm.java.util.Optional.empty()
            )
            topics = jvm.java.util.ArrayList()
            topics.add(new)
            try:
                admin.createTopics(topics).all().get(30, jvm.java.util.concurrent.TimeUnit.SECONDS)
            except Exception as e:  # one that exists already is the topic we want
                if "TopicExistsException" not in str(e):
                    raise
        finally:
            admin.close()
        props = client_props(spark, settings)
        serializer = "org.apache.kafka.common.serialization.StringSerializer"
        props.setProperty("key.serializer", serializer)
        props.setProperty("value.serializer", serializer)
        self.producer = jvm.org.apache.kafka.clients.producer.KafkaProducer(props)

    def tick(self, why: str) -> None:
        record = self.jvm.org.apache.kafka.clients.producer.ProducerRecord(self.topic, why)
        self.producer.send(record).get(30, self.jvm.java.util.concurrent.TimeUnit.SECONDS)

    def close(self) -> None:
        self.producer.close()


def _n(n: int) -> str:
    return f"{n:012d}.json"


class GroupMember:
    """This job's membership: the log, its heartbeat, the owner's work and the gate."""

    def __init__(
        self,
        spark: Any,
        settings: Settings,
        app_id: str,
        *,
        store: GroupStore | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        co = settings.coordination
        if co is None:
            raise ShardMergeError("a group member needs coordination settings")
        self.co = co
        self.spark = spark
        self.settings = settings
        self.member = co.member
        self.store = store or group_store(settings.group_root(), spark)
        self.clock = clock
        if spark is not None:
            shared_log_store(spark, settings.sink.path)
        probe(self.store)
        # The log as read, by replica number: ``base + 1`` to ``end`` (the records at or
        # below ``base`` are in a snapshot, or folded by every replica this member keeps).
        self.records: dict[int, Record] = {}
        self.ids: dict[str, int] = {}
        self.joined: dict[str, int] = {}  # member: the number of its first join record
        self.base = self.end = 0
        # What this member's fold depends on (routes, targets' modes and policies, the
        # record format): in its join record and the decisions it publishes; a member
        # whose settings differ from them refuses to go on (``conflict``, sticky).
        self.summary = settings.fold_summary()
        self.fingerprint = settings_fingerprint(self.summary)
        self.conflict: str | None = None
        self._unknown_warned = False
        # Compaction (``compact``): the newest snapshot, and where the log starts.
        router, configs, default = (settings.router(), settings.target_configs(),
                                    settings.default_config())  # fmt: skip
        snap = newest_snapshot(self.store)
        self.snapshot = 0 if snap is None else int(snap["seq"])
        self.snapshot_value = snap
        if snap is not None:
            self.check_settings(snap.get("settings"), f"the snapshot of log record {self.snapshot}")
            self.joined = {str(m): 0 for m in snap.get("joined", [])}
        self.base = self.end = self._log_start()
        # Refused before it claims an epoch (a run refused at its start supersedes none):
        # a member that joined with other settings, a log with a gap.
        self.read()
        self.check_gap()
        self.epoch = self.store.claim_next(
            f"members/{self.member}/epochs",
            {"app_id": app_id, "checkpoint": settings.checkpoint,
             "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        )  # fmt: skip
        # Batches, the owner's work and the idle heartbeat's fold: one at a time.
        self.lock = threading.RLock()
        self.ack = 0  # every write this member may still make is planned at or past it
        self.batch: int | None = None  # the last batch saved
        self.beat = 0
        self.beat_ok = self.clock()  # when this member's heartbeat was last written
        # member: ((epoch, beat counter), when this job saw it change)
        self.seen: dict[str, tuple[tuple[Any, int | None], float]] = {}
        self.waiting = ""  # what the batch in the gate waits for
        # counters (metrics)
        self.gate_waits = 0
        self.gate_seconds = 0.0
        self.applied_here = 0
        self.owner_races = 0
        self.fenced = 0
        self.terms_claimed = 0
        self.stale_refused = 0
        self.batch_seq = 0  # the log number the last saved batch folded to
        # The lowest log number a run of this member's batches may restore its replica at
        # (the last two saved batches': a batch run again restores the one before it), in
        # its heartbeat: compaction keeps the log's records above every member's floor.
        self.floor = 0
        self.compacted_at = -float("inf")  # when this member (as the owner) last compacted
        self.snapshots_written = 0
        self.records_removed = 0
        # Records of this member that a run of a batch left behind its fold (an earlier
        # run's, not appended again): every later fold folds them at their places.
        self.passed: set[int] = set()
        self.lapses = 0  # heartbeats written later than the lease after the one before
        self.lapses_seen = 0  # ... as the running batch began
        self._all_joined = False
        self.ticker: Ticker | None = None
        self.ticked = 0.0
        self.ticks = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        # The log folded to its end, for the owner's work and an idle member's
        # acknowledgement (no decision of it is executed: the batches fold their own).
        self.latest = Replica.new(router, configs, default) if snap is None else self._snapped()
        self.write_beat()
        log.info(
            "group %s: member %s, epoch %d, store %s",
            co.group, self.member, self.epoch, self.store.root,
        )  # fmt: skip

    # --- the log ------------------------------------------------------------------------------

    def _log_start(self) -> int:
        """The replica number the log is read above at a start: the lowest from which
        the store holds every file up to the newest snapshot (compaction removes the
        files below it lowest first), 0 when nothing was removed."""
        numbers = [n for n in self.store.numbers("log") if n < self.snapshot]
        start = self.snapshot
        while numbers and numbers[-1] == start - 1:
            start = numbers.pop()
        return start

    def read(self) -> None:
        """Read the log records not read yet (a record, once read, never changes), in
        order: ``records`` holds ``base + 1`` to ``end`` without a gap. Below the snapshot
        this member started from, a record the owner's compaction removed while this
        member read (it removes the lowest first) is skipped, with the ones before it:
        they are in the snapshot, and no replica of this member needs them (each is at
        or past the floor the compaction kept)."""
        while True:
            self._read_on()
            if self.end >= self.snapshot:
                return
            start = self._log_start()
            if start <= self.end:
                return
            self.forget_below(start)
            self.end = start

    def _read_on(self) -> None:
        for n, value in self.store.log(self.end - 1):
            # a stored value that is not a record is read as an ``invalid`` one: the
            # fold refuses it with the reason, in every member alike
            record = Record.read(value)
            self.records[n + 1] = record
            self.end = n + 1
            if record.id:
                self.ids.setdefault(record.id, n + 1)
            if record.kind == "join":
                self.joined.setdefault(record.job, n + 1)
                self.check_settings(record.body.get("settings"),
                                    f"member {record.job} joined (log record {n + 1})")  # fmt: skip
        if self.conflict is not None:
            raise GroupError(self.conflict)

    def check_settings(self, settings: Any, what: str) -> None:
        """Refuse to go on (``conflict``, raised by every later :meth:`read`) when a join
        or a published decision carries a settings fingerprint other than this member's.
        One without a fingerprint (written by an earlier version) cannot be checked: a
        warning, once."""
        if not isinstance(settings, dict) or not isinstance(settings.get("fingerprint"), str):
            if not self._unknown_warned:
                self._unknown_warned = True
                log.warning(
                    "group %s: %s without a settings fingerprint (an earlier version's "
                    "record): member %s cannot check that its routes and targets are the "
                    "group's", self.co.group, what, self.member,
                )  # fmt: skip
            return
        if settings["fingerprint"] == self.fingerprint or self.conflict is not None:
            return
        theirs = settings.get("summary")
        diff = settings_differences(self.summary, theirs) if isinstance(theirs, dict) else []
        self.conflict = (
            f"group {self.co.group}: {what} with settings that differ from member "
            f"{self.member}'s: {'; '.join(diff) or 'fingerprint ' + settings['fingerprint']}. "
            "Members whose routes or targets' modes or policies differ fold the group log "
            "differently (one is fenced, or waits in its gate, for good): give every job of "
            "the group the same routes and targets and start this one again; changing them "
            "in a running group needs a new group (docs/groups.md)"
        )
        log.error("%s", self.conflict)

    def check_gap(self) -> None:
        """A group log with a gap stops every member: the error names the number and the
        repair (``shardmerge group repair --fill-gap N``)."""
        n = log_gap(self.store)
        if n is not None:
            raise GroupError(
                f"group {self.co.group}: the group log has no record {n} (log/{_n(n)}) while "
                "later ones exist: no member reads past it. If it was lost (deleted by hand), "
                f"fill it with a no-op record: shardmerge group repair --config JOB.yaml "
                f"--fill-gap {n} --yes (docs/groups.md); the job that appended it appends it "
                "again when its batch runs again"
            )

    def append(self, record: Record) -> int:
        """``record`` at the log's first free number, or the number its id has already."""
        self.read()
        seq = self.ids.get(record.id)
        if seq is not None:
            return seq
        # every number below ``end`` holds a record (read): claim from there, unlisted
        taken = self.store.append(record.to_json(), start=self.end) + 1
        # Read up to it: the numbers before it may be other members' appends of the
        # meantime (a record kept out of order would leave them unread).
        self.read()
        seq = self.ids.get(record.id)
        if seq is None:
            self.check_gap()
            raise GroupError(f"group log record {record.id} was appended at {taken} and is "
                             "not in the log as read")  # fmt: skip
        if seq != taken:
            raise GroupError(f"group log record {record.id} is at {seq}, appended at {taken}")
        crash_point(f"group_appended_{record.kind}")
        return seq

    def fold(self, replica: Replica, mine_until: int | None = None) -> list[Folded]:
        """Fold the log to its end; publish every downstream change the fold decided.

        ``mine_until``: stop before a record of this member numbered above it that the
        batch appends again (``coordinator.group.batch_records``): a batch run again after
        an earlier run appended finds its records in the log and folds each at its place
        in the batch, as that run did; its join, and the records its gate found left
        behind (``passed``), do not stop it (coordinator/PROTOCOL.md, "Groups", step 2)."""
        self.read()
        if replica.seq < self.base:
            self._from_snapshot(replica)
        todo = batch_records(
            ((n, self.records[n]) for n in range(replica.seq + 1, self.end + 1)),
            self.member, mine_until, self.passed,
        )  # fmt: skip
        folded = replica.fold(todo)
        for f in folded:
            for d, version in zip(f.decisions, f.versions, strict=True):
                if isinstance(d, CreateTarget | ApplyDDL):
                    name = f"decisions/{d.target}/{_n(version)}"
                    settings = {"fingerprint": self.fingerprint, "summary": self.summary}
                    if not self.store.create_new(name, {
                            "seq": f.seq, "decision": decision_to_json(d), "at": time.time(),
                            "member": self.member, "settings": settings}):  # fmt: skip
                        # published by another member: decided with the same settings?
                        self.check_published(self.store.read(name), f"{d.target} v{version}")
        return folded

    def _from_snapshot(self, replica: Replica) -> None:
        """A replica folded to below the log's start: the records it lacks were compacted
        into the snapshot. One that folded nothing (a member without saved state: new, or
        started with a new checkpoint) takes the newest snapshot, which is every replica
        folded that far (folds are prefixes of the log). One that folded some records
        cannot: it was saved before the floor its member published (a checkpoint restored
        from an old copy), and the error says so."""
        snap = self.snapshot_value
        if replica.seq == 0 and snap is not None and self.snapshot >= self.base:
            taken = self._snapped()
            replica.coordinator, replica.seq = taken.coordinator, taken.seq
            replica.owners, replica.versions = taken.owners, taken.versions
            replica.refused = taken.refused
            log.info("group %s: member %s starts from the snapshot of log record %d",
                     self.co.group, self.member, replica.seq)  # fmt: skip
            return
        raise GroupError(
            f"group {self.co.group}: member {self.member}'s batch state is folded to log "
            f"record {replica.seq}, and the group log holds records from {self.base + 1} on "
            f"(the ones before are compacted into the snapshot of record {self.snapshot}): "
            "its checkpoint is older than the floor its heartbeat published. Start the member "
            "with a new checkpoint (it then starts from the snapshot; docs/groups.md, "
            '"Compaction")'
        )

    def _snapped(self) -> Replica:
        """A replica restored from the snapshot this member started with."""
        assert self.snapshot_value is not None
        s = self.settings
        return Replica.restore(self.snapshot_value["replica"], s.router(), s.target_configs(),
                               s.default_config())  # fmt: skip

    def check_published(self, published: dict[str, Any] | None, what: str) -> None:
        """A published decision's settings fingerprint against this member's."""
        if published is None:
            return
        who = f"member {published['member']}" if "member" in published else "a member"
        self.check_settings(published.get("settings"), f"{who} published {what}")
        if self.conflict is not None:
            raise GroupError(self.conflict)

    # --- versions ---------------------------------------------------------------------------

    def applied(self, target: TargetId) -> int:
        return applied(self.store, str(target))

    def behind(self, replica: Replica) -> dict[TargetId, tuple[int, int]]:
        """The targets whose table lacks the version the replica decided: (has, decided).
        A table past it (the owner went on without this member) fences the batch: its
        rows were planned for a schema the table no longer has (G4)."""
        out = {}
        for target, decided in replica.versions.items():
            have = self.applied(target)
            if have > decided:
                self.fenced += 1
                raise Fenced(
                    f"group {self.co.group}: {target} is at version {have}, past the {decided} "
                    f"member {self.member}'s batch planned for; the batch runs again"
                )
            if have < decided:
                out[target] = (have, decided)
        return out

    # --- members, leases, the owner's term ------------------------------------------------------

    def write_beat(self) -> None:
        gap = self.clock() - self.beat_ok
        if gap > self.co.lease_s:
            # This member was silent past its lease (a pause, a store it could not reach):
            # the batch running now must not write (check).
            self.lapses += 1
            log.warning("group %s: member %s wrote no heartbeat for %.1f s (lease %s s)",
                        self.co.group, self.member, gap, self.co.lease_s)  # fmt: skip
        self.beat += 1
        self.store.put(
            f"members/{self.member}/beat.json",
            {"member": self.member, "epoch": self.epoch, "beat": self.beat, "ack": self.ack,
             "batch": self.batch, "floor": self.floor, "waiting": self.waiting,
             "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        )  # fmt: skip
        self.beat_ok = self.clock()

    def views(self) -> list[MemberView]:
        now = self.clock()
        out = []
        for m in self.co.members:
            if m == self.member:
                out.append(MemberView(m, self.epoch, True, self.beat, now - self.beat_ok,
                                      self.ack, self.batch, self.waiting))  # fmt: skip
                continue
            beat = self.store.read(f"members/{m}/beat.json")
            counter = None if beat is None else int(beat.get("beat", 0))
            key = (None if beat is None else beat.get("epoch"), counter)
            last = self.seen.get(m)
            if last is None or (last[0] != key and beat is not None):
                self.seen[m] = (key, now)
                last = self.seen[m]
            silent = now - last[1]
            live = beat is not None and silent <= self.co.lease_s
            out.append(MemberView(
                m, None if beat is None else beat.get("epoch"), live, counter, silent,
                None if beat is None else beat.get("ack"),
                None if beat is None else beat.get("batch"),
                "" if beat is None else str(beat.get("waiting", "")),
            ))  # fmt: skip
        return out

    def term(self) -> tuple[int, dict[str, Any] | None]:
        numbers = self.store.numbers("terms")
        if not numbers:
            return -1, None
        return numbers[-1], self.store.read_numbered("terms", numbers[-1])

    def owns(self, views: list[MemberView]) -> bool:
        """Whether this member holds the owner's term (claiming it when its holder is
        down and this member is the first live one of ``members``)."""
        n, holder = self.term()
        by = {v.member: v for v in views}
        held = by.get(str(holder.get("member"))) if holder is not None else None
        if held is not None and held.live and held.epoch == holder.get("epoch"):  # type: ignore[union-attr]
            return held.member == self.member
        # No term yet, or its holder is down (or restarted: a new epoch claims anew).
        first = next((v.member for v in views if v.live), None)
        if first != self.member:
            return False
        record = {"member": self.member, "epoch": self.epoch,
                  "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
        if self.store.create_new(f"terms/{_n(n + 1)}", record):
            self.terms_claimed += 1
            log.warning(
                "group %s: member %s takes the owner's term %d (the last holder: %s)",
                self.co.group, self.member, n + 1,
                holder.get("member") if holder else "none",
            )  # fmt: skip
            return True
        return False

    # --- the owner's work ---------------------------------------------------------------------

    def owner_pass(self, replica: Replica, spark: Any) -> list[str]:
        """As the owner: bring each target to the next decided version while every live
        member acknowledged it (G5). What is waited for goes to ``self.waiting``."""
        views = self.views()
        if not self.owns(views):
            return []
        from streaming.storage.sink import apply_downstream
        from streaming.storage.sinks import sink_of

        sink = sink_of(spark, self.settings, f"shardmerge-group-{self.co.group}", shared=True)
        ran: list[str] = []
        waiting = []
        for target in sorted(replica.versions, key=str):
            while True:
                want = self.applied(target) + 1
                if replica.versions[target] < want:
                    break
                published = self.store.read(f"decisions/{target}/{_n(want)}")
                if published is None:
                    waiting.append(f"{target} v{want}: its decision is not published yet")
                    break
                self.check_published(published, f"{target} v{want}")
                seq = int(published["seq"])
                # G5: every live member folded the record that decided it
                late = owner_waits_for(
                    Ack(v.member, v.live, v.ack is not None and int(v.ack) >= seq)
                    for v in views if v.member != self.member
                )  # fmt: skip
                if late:
                    waiting.append(
                        f"{target} v{want}: waiting for {', '.join(late)} to fold log record {seq}"
                    )
                    break
                d = decision_from_json(published["decision"])
                crash_point("group_before_alter")
                n, holder = self.term()
                holder = holder or {}
                if (holder.get("member"), holder.get("epoch")) != (self.member, self.epoch):
                    # the term passed on meanwhile: the new owner does it
                    log.warning("group %s: %s v%d left to %s, who holds term %d now",
                                self.co.group, target, want, holder.get("member"), n)  # fmt: skip
                    break
                stale = None if isinstance(d, CreateTarget) else self.stale(sink, d, want)
                # Still this member's lease right before the change: a pause between the
                # checks above and the ALTER would let it run an old change over a newer one.
                self.check()
                if stale == "done":
                    pass  # run by an owner before this one, not recorded: recorded now
                elif stale is not None:
                    self.stale_refused += 1
                    log.error("group %s: %s v%d not run: %s", self.co.group, target, want, stale)
                    waiting.append(f"{target} v{want}: {stale}")
                    break
                else:
                    # the one door of a downstream change (streaming.storage.sink), as a solo job's
                    rewrite = self.settings.target_settings(target).rewrite_incompatible
                    change = apply_downstream(
                        sink, d, Slots(want).taker(d.statement), rewrite=rewrite
                    )
                    if not change.applied:
                        # The group stays at the version before it: every member's rows of
                        # the target wait in their gates; the operator fixes the table.
                        log.error("group %s: target %s: %s", self.co.group, target,
                                  change.advice)  # fmt: skip
                        waiting.append(f"{target} v{want}: refused downstream: {change.advice}")
                        break
                # The owner dies here: the table has the version, the group does not know
                # it; the next owner runs the change again (it finds it done) and records it.
                crash_point("group_after_alter")
                record = {"member": self.member, "epoch": self.epoch, "statement": d.statement,
                          "at": time.time()}  # fmt: skip
                if self.store.create_new(f"applied/{target}/{_n(want)}", record):
                    self.applied_here += 1
                    ran.append(d.statement)
                    log.info("group %s: %s is at version %d: %s", self.co.group, target, want,
                             d.statement)  # fmt: skip
                else:
                    # Another owner recorded it first: the same change (stale() checked it).
                    self.owner_races += 1
                    log.warning("group %s: %s v%d: another owner recorded it first",
                                self.co.group, target, want)  # fmt: skip
        self.waiting = "; ".join(waiting)
        if replica is self.latest:
            self.compact_log()
        return ran

    def compact_log(self) -> None:
        """As the owner, at most once per lease: a snapshot every ``snapshot_every``
        records, and the log's records below every member's floor removed
        (:func:`compact`). A member without a heartbeat, or whose heartbeat has no floor
        (it has not saved two batches since it started), holds the log where it is."""
        now = self.clock()
        if self.co.snapshot_every <= 0 or now - self.compacted_at < self.co.lease_s:
            return
        self.compacted_at = now
        floors = {self.member: self.floor}
        for m in self.co.members:
            if m != self.member:
                beat = self.store.read(f"members/{m}/beat.json") or {}
                floor = beat.get("floor")
                floors[m] = floor if isinstance(floor, int) and floor >= 0 else 0
        joined = [m for m, n in self.joined.items() if n <= self.latest.seq]
        settings = {"fingerprint": self.fingerprint, "summary": self.summary}
        written, removed = compact(self.store, self.latest, joined, settings, self.member,
                                   floors, self.co.snapshot_every)  # fmt: skip
        if written is not None:
            self.snapshots_written += 1
        self.records_removed += removed
        if written is not None or removed:
            low = min(floors, key=lambda m: floors[m])
            log.info(
                "group %s: compaction: %s; %d log record(s) removed (the lowest floor: "
                "member %s at %d)", self.co.group,
                "no snapshot" if written is None else f"snapshot of log record {written}",
                removed, low, floors[low],
            )  # fmt: skip

    def stale(self, sink: Any, d: ApplyDDL, version: int) -> str | None:
        """Whether the table is where change ``version`` starts from: None (run it),
        ``"done"`` (the table has it already: an owner ran it and died before recording
        it), or why neither (an owner that stopped past its lease must not run an old
        change over a newer one: a column added again after it was renamed). Judged on
        the columns the change adds or takes away (a change of types only is run: Delta
        widens a type once)."""
        before = self.store.read(f"decisions/{d.target}/{_n(version - 1)}")
        if before is None:
            return f"the decision of version {version - 1} is not in the group store"
        old = decision_from_json(before["decision"]).schema.column_names()
        return stale_change(old, d.schema.column_names(), sink.columns(d.target), d.statement)

    # --- joining -----------------------------------------------------------------------------

    def missing(self) -> list[str]:
        """The members that have not joined yet (appended their ``join`` record)."""
        if self._all_joined:
            return []
        self.read()
        out = [m for m in self.co.members if m not in self.joined]
        self._all_joined = not out
        return out

    def join(self, spark: Any) -> float:
        """Append this member's ``join`` record, then wait until every member has (the
        owner's work goes on meanwhile); the seconds waited. A member appends no record
        but the registrations of the tables its first batch creates before it, so every
        member's tables are in the fold before anyone's DDL: a rename cannot complete
        among one member's shards while another member's are still unknown."""
        settings = {"fingerprint": self.fingerprint, "summary": self.summary}
        self.append(Record(f"{self.member}:join", self.member, "join", {"settings": settings}))

        def pending() -> str | None:
            missing = self.missing()
            return f"member(s) {', '.join(missing)} to join the group" if missing else None

        return self.wait(spark, pending)

    def wait(self, spark: Any, pending: Callable[[], str | None]) -> float:
        """Wait while ``pending()`` says what for (None: nothing more), doing the owner's
        work and checking this member's lease meanwhile, at most ``gate_timeout_s``; the
        seconds waited."""
        started = last_log = time.monotonic()
        while (what := pending()) is not None:
            waited = time.monotonic() - started
            self.waiting = f"waiting for {what}"
            if waited > self.co.gate_timeout_s:
                raise GroupWaitTimeout(
                    f"group {self.co.group}: member {self.member} waited {waited:.0f} s for "
                    f"{what}; the batch runs again"
                )
            if time.monotonic() - last_log > 10:
                log.warning("group %s: %s", self.co.group, self.waiting)
                last_log = time.monotonic()
            self.owner_work(spark)
            self.check()
            time.sleep(min(self.co.heartbeat_s / 2, 0.5))
        self.waiting = ""
        return time.monotonic() - started

    # --- what operators see ----------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The group as this member sees it (``/api/group``, metrics, the dashboard)."""
        out = group_status(self.store, self.settings, self.views(), self.end)
        out["this"] = {
            "member": self.member, "epoch": self.epoch, "gate_waits": self.gate_waits,
            "gate_seconds": round(self.gate_seconds, 3), "applied_here": self.applied_here,
            "owner_races": self.owner_races, "fenced": self.fenced,
            "stale_refused": self.stale_refused, "terms_claimed": self.terms_claimed,
            "ticks": self.ticks, "floor": self.floor,
            "snapshots_written": self.snapshots_written, "records_removed": self.records_removed,
        }  # fmt: skip
        return out

    # --- a batch ------------------------------------------------------------------------------

    def begin(self) -> None:
        """A batch starts: one driver per member, and a member whose lease ran out does
        not go on as if it had not."""
        self.lock.acquire()
        self.lapses_seen = self.lapses
        try:
            self.check()
        except BaseException:
            self.lock.release()
            raise

    def check(self) -> None:
        newest = max(self.store.numbers(f"members/{self.member}/epochs"), default=self.epoch)
        if newest > self.epoch:
            raise Superseded(
                f"Superseded: another run of group member {self.member} claimed epoch "
                f"{newest}; this run (epoch {self.epoch}) stops so that one run writes"
            )
        silent = self.clock() - self.beat_ok
        if self.lapses > self.lapses_seen:
            self.fenced += 1
            self.lapses_seen = self.lapses
            raise LeaseLost(
                f"group {self.co.group}: member {self.member} was silent past its lease "
                f"({self.co.lease_s} s) while this batch ran: the owner may have gone on "
                "without it; the batch runs again after folding the log"
            )
        if silent > self.co.lease_s:
            self.fenced += 1
            raise LeaseLost(
                f"group {self.co.group}: member {self.member} wrote no heartbeat for "
                f"{silent:.1f} s (lease {self.co.lease_s} s): the owner may have gone on "
                "without it; the batch runs again after folding the log"
            )

    def gate(self, replica: Replica, spark: Any) -> float:
        """Wait until every target has the version the replica decided (G4), doing the
        owner's work meanwhile when this member holds the term; the seconds waited. The
        batch's replica is not folded further here (the decisions of a fold are the
        batch's to execute, and its row plan is made): the member with the lowest
        acknowledgement can always go on, so members waiting in their gates never wait
        for each other in a circle."""
        crash_point("group_gate")
        self.left_behind(replica)
        self.ack = replica.seq
        calls = 0

        def pending() -> str | None:
            nonlocal calls
            calls += 1
            behind = self.behind(replica)
            if not behind:
                return None
            if calls == 1:
                self.gate_waits += 1
            what = ", ".join(f"{t} has v{h}, decided v{d}" for t, (h, d) in behind.items())
            return f"the owner: {what} (rows wait in the gate)"

        waited = self.wait(spark, pending)
        self.check()  # right before the write step: still this member's lease
        crash_point("group_gate_passed")
        self.gate_seconds += waited
        return waited

    def left_behind(self, replica: Replica) -> None:
        """Records of this member past the batch's fold when its decide step is over: an
        earlier run's of the batch that this run did not append again (it appends in log
        order and folds through each record it appends). The fold stopped before the first
        of them and would stop there in every later run: they go to ``passed``, and the
        next fold (this batch run again, or the next batch) folds them at their places and
        the log on past them."""
        self.read()
        left = [n for n in range(replica.seq + 1, self.end + 1)
                if self.records[n].job == self.member and n not in self.passed]  # fmt: skip
        if left:
            self.passed.update(left)
            log.warning(
                "group %s: member %s's batch did not append again the record(s) %s of its "
                "earlier run; its fold stopped at %d: they are folded at their places from "
                "its next run on", self.co.group, self.member,
                ", ".join(self.records[n].id for n in left), replica.seq,
            )  # fmt: skip

    def finish(self, replica: Replica, batch: int) -> None:
        """The batch saved its state: its acknowledgement is its fold."""
        self.floor = min(self.batch_seq, replica.seq)
        self.ack = self.batch_seq = replica.seq
        self.batch = batch
        self.forget_below(min(self.floor, self.latest.seq))
        self.lock.release()

    def forget_below(self, n: int) -> None:
        """Drop the records numbered ``n`` and below from memory: every replica this
        member keeps is folded past them (a member that runs for months holds what is
        recent)."""
        if n <= self.base:
            return
        for k in range(self.base + 1, min(n, self.end) + 1):  # read: no record past end
            record = self.records.pop(k)
            if record.id and self.ids.get(record.id) == k:
                del self.ids[record.id]
        self.passed = {k for k in self.passed if k > n}
        self.base = n

    def abort(self) -> None:
        """The batch failed: it runs again (its acknowledgement stays what it was)."""
        self.lock.release()

    def owner_work(self, spark: Any) -> list[str]:
        """Fold the latest replica to the log's end, then the owner's work with it."""
        self.fold(self.latest)
        return self.owner_pass(self.latest, spark)

    # --- the heartbeat thread ---------------------------------------------------------------

    def start(self, ticker: Ticker | None = None) -> None:
        """Heartbeats every ``heartbeat_s``; when no batch runs, fold the log (so an idle
        member acknowledges), do the owner's work, and tick (``ticker``) when the log has
        records this job's batches have not folded."""
        self.ticker = ticker
        self._threads = [
            threading.Thread(target=self._every, args=(self.write_beat,), daemon=True,
                             name="shardmerge-group-beat"),
            threading.Thread(target=self._every, args=(self.idle,), daemon=True,
                             name="shardmerge-group-idle"),
        ]  # fmt: skip
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)
        if self.ticker is not None:
            self.ticker.close()

    def _every(self, work: Callable[[], None]) -> None:
        """``work`` every ``heartbeat_s`` (the heartbeat on a thread of its own: an owner's
        long ALTER must not make its own lease run out)."""
        while not self._stop.wait(self.co.heartbeat_s):
            try:
                work()
            # Logged; a member that cannot write its heartbeat is fenced by its lease (check).
            except Exception:
                log.exception("group %s: %s of %s failed", self.co.group, work.__name__,
                              self.member)  # fmt: skip

    def idle(self) -> None:
        if not self.lock.acquire(blocking=False):
            return  # a batch runs: it acknowledges at its gate and its end
        try:
            self.fold(self.latest)
            # No batch runs: the next one folds at least this far before it writes.
            self.ack = self.latest.seq
            self.owner_pass(self.latest, self.spark)
            # Records this job's batches have not folded (a release of its held shards,
            # a version its rows wait for): a batch must run even without data.
            now = self.clock()
            if (self.ticker is not None and self.latest.seq > self.batch_seq
                    and now - self.ticked > 2 * self.co.heartbeat_s):  # fmt: skip
                self.ticker.tick(f"log {self.latest.seq}")
                self.ticked = now
                self.ticks += 1
        finally:
            self.lock.release()
