"""The operator HTTP API and /metrics of a job, over a real server on a free port.

The job's state here is a real coordinator's (4 shards of a pessimistic target, 2 of them
held on an ADD COLUMN) persisted by the real state store, as a batch leaves it; the full
path with Kafka, Spark, Delta and a browser is tests/integration/test_dashboard.py. The state
store goes through the Spark session's Hadoop FileSystem, hence the session (and the spark
marker) for every test that serves; the rest are pure."""

from __future__ import annotations

import http.client
import json
import logging
import re
import socket
import threading
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from coordinator import Coordinator, ShardId, parse_command, snapshot
from coordinator.commands import CommandError
from schemas import parse_create_table
from streaming.batch.protocol import _lock_json, _wait_json
from streaming.config import ConfigError, Settings, load_settings
from streaming.ops.connections import MAX_BODY, THREADS
from streaming.ops.metrics import progress_time, registry_for
from streaming.ops.observer import BatchObserver, ddl_kind
from streaming.ops.server import OpsServer, command_from_json
from streaming.ops.views import Views, lag_by_partition
from streaming.storage.state_store import StateStore

SHARDS = [ShardId("s1", "shop", f"orders_{i}") for i in range(4)]
LATE = ShardId("s1", "shop", "orders_9")
ADD = "ALTER TABLE orders_{i} ADD COLUMN note VARCHAR(64)"
TOKEN = "t0k-en-5f1c9a3e7b2d4086c1e9a7f3b5d2c4e6"  # 36 characters


def settings(tmp_path: Path, **ops) -> Settings:
    return Settings.model_validate(
        {
            "kafka": {"bootstrap": "127.0.0.1:1"},
            "sources": [{"topics": ["s1"]}],
            "routes": [{"target": "shop.orders", "table": "orders_*"}],
            "targets": {"shop.orders": {"mode": "pessimistic"}},
            "moves": [{"id": "m1", "from": "s1.shop.orders_3", "to": "s2.shop.orders_3"}],
            "sink": {"path": str(tmp_path / "lake")},
            "checkpoint": str(tmp_path / "cp"),
            "ops": {"port": 0, **ops},
        }
    )


def job_state(store: StateStore, s: Settings, observer: BatchObserver) -> dict:
    """Batch 7 of a job whose lock waits: shards 0 and 1 ran the ADD COLUMN."""
    c = Coordinator(s.router(), s.target_configs(), s.default_config())
    for shard in SHARDS:
        c.register(
            shard, parse_create_table(f"CREATE TABLE {shard.table} (id INT PRIMARY KEY, v INT)")
        )
    for i in (0, 1):
        c.on_ddl(SHARDS[i], ADD.format(i=i), ["bin.1", 100 + i, 0, 1_700_000_000_000 + i, 5 + i])
    # rows of a fifth table came before its CREATE TABLE: they wait, with no lock
    c.await_ddl(LATE, ["bin.1", 90, 0, 1_699_999_999_000, 3], "before its CREATE TABLE")
    stats = {"batch": 7, "events": 30, "written": 21, "held": 7, "replayed": 0, "dropped": 0,
             "dead_letters": 0, "ddl": 2, "downstream_ddl": ["ALTER TABLE `orders` ADD COLUMN `x` INT"],
             "refused_ddl": [], "command_errors": [],
             "target_rows": {"shop.orders": {"inserted": 18, "updated": 2, "deleted": 1}}}  # fmt: skip
    state = {"batch": 7, "coordinator": snapshot(c), "stats": stats,
             "locks": [_lock_json(v) for v in c.locks()], "applied_commands": [],
             "waiting": [_wait_json(w) for w in c.waiting()]}  # fmt: skip
    store.save(7, state)
    observer.begin(7)
    observer.lap("restore")
    observer.done(stats, state)
    return state


@pytest.fixture
def serve(tmp_path: Path, spark):
    servers = []

    def start(**ops) -> tuple[OpsServer, Settings, BatchObserver]:
        if "token" not in ops:
            ops.setdefault("generated_token_file", str(tmp_path / "secret" / "ops-token"))
        s = settings(tmp_path, **ops)
        observer = BatchObserver()
        store = StateStore(spark, s.checkpoint)
        job_state(store, s, observer)
        views = Views(s, store, observer)
        server = OpsServer(s.ops, views, registry_for(views, s.ops.shard_metrics)).start()
        servers.append(server)
        return server, s, observer

    yield start
    for server in servers:
        server.stop()


def call(server: OpsServer, method: str, path: str, body=None, headers=None, *, auth=True):
    """One request; a POST to a server with a generated token carries it unless ``auth``
    is false (as the page does, from its URL's fragment)."""
    host, port = server.address
    conn = http.client.HTTPConnection(host, port, timeout=10)
    data = None if body is None else json.dumps(body).encode()
    bearer = {"Authorization": f"Bearer {server.token.decode()}"}
    hdrs = {
        "Host": f"127.0.0.1:{port}",
        **({"Content-Type": "application/json"} if body is not None else {}),
        **(bearer if auth and server.generated and method == "POST" else {}),
        **(headers or {}),
    }
    conn.request(method, path, body=data, headers=hdrs)
    r = conn.getresponse()
    raw = r.read()
    conn.close()
    return r.status, r.headers, raw  # case-insensitive names


@pytest.mark.spark
def test_locks_show_the_rollout_held_shards_and_each_shards_difference(serve):
    server, _, _ = serve()
    status, headers, raw = call(server, "GET", "/api/locks")
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    (t,) = json.loads(raw)["targets"]
    assert (t["target"], t["mode"], t["stage"]) == ("shop.orders", "pessimistic", "waiting")
    assert t["rollout"] == {"ddl": ADD.format(i=0), "done": 2, "total": 4, "of": "ran it"}
    assert [h["shard"] for h in t["held"]] == ["s1.shop.orders_0", "s1.shop.orders_1"]
    assert t["held"][0]["pending_ddl"] == [ADD.format(i=0)]
    assert t["held"][1]["since"] == pytest.approx(1_700_000_000.001)
    diffs = {d["shard"]: d for d in t["shard_schemas"]}
    assert diffs["s1.shop.orders_0"]["extra"] == ["note"] and diffs["s1.shop.orders_0"]["held"]
    assert diffs["s1.shop.orders_3"] == {
        "shard": "s1.shop.orders_3",
        "held": False,
        "missing": [],
        "extra": [],
        "retyped": [],
    }
    assert t["joined"] == {"id": "INT", "v": "INT"}
    # a shard known to the job, not registered: listed with why and since, not in the lock
    (w,) = json.loads(raw)["waiting"]
    assert (w["target"], w["shard"], w["kind"]) == ("shop.orders", str(LATE), "before_create")
    assert w["since"] == pytest.approx(1_699_999_999.0) and "CREATE TABLE" in w["reason"]
    assert w["rows"] == 0  # no stash counts in this test (tests/integration/test_dashboard.py)
    assert (t["held_count"], t["held_rows"]) == (2, 0)


@pytest.mark.spark
def test_locks_page_their_held_shards_on_demand(serve):
    server, _, _ = serve()

    def held(query: str) -> tuple[list[str], int]:
        status, _, raw = call(server, "GET", f"/api/locks?{query}")
        assert status == 200, raw
        (t,) = json.loads(raw)["targets"]
        return [h["shard"] for h in t["held"]], t["held_count"]

    assert held("held=1") == (["s1.shop.orders_0"], 2)
    assert held("held=1&offset=1") == (["s1.shop.orders_1"], 2)
    assert held("held=0") == ([], 2)
    status, _, raw = call(server, "GET", "/api/locks?held=2")
    (t,) = json.loads(raw)["targets"]
    # the held shards differ from the joined schema: they come first
    assert [s["shard"] for s in t["shard_schemas"]] == ["s1.shop.orders_0", "s1.shop.orders_1"]
    assert t["shard_schemas_count"] == 4
    assert held("offset=5") == ([], 2)
    # filtered by a part of the shard's name (any case), then paged; one target asked for
    assert held("shard=ORDERS_1") == (["s1.shop.orders_1"], 2)
    assert held("held=1&offset=1&shard=orders_") == (["s1.shop.orders_1"], 2)
    status, _, raw = call(server, "GET", "/api/locks?shard=orders_1&target=shop.orders")
    (t,) = json.loads(raw)["targets"]
    assert (t["held_count"], t["held_matching"], t["held_offset"]) == (2, 1, 0)
    status, _, raw = call(server, "GET", "/api/locks?target=shop.nothing")
    assert json.loads(raw)["targets"] == []
    for bad in ("held=-1", "held=x", "offset=1.5", "page=2"):
        status, _, raw = call(server, "GET", f"/api/locks?{bad}")
        assert status == 400 and bad.split("=")[0] in json.loads(raw)["error"], (bad, raw)


@pytest.mark.spark
def test_without_a_token_on_loopback_other_host_names_are_refused(serve):
    server, _, _ = serve()
    status, _, _ = call(server, "GET", "/api/locks", headers={"Host": "evil.example:80"})
    assert status == 403


@pytest.mark.spark
def test_with_a_token_every_request_but_the_pages_files_needs_it(serve):
    server, _, _ = serve(token=TOKEN)
    assert not server.generated and server.page == server.url  # never logged
    for path in ("/metrics", "/api/locks", "/api/progress"):
        status, headers, _ = call(server, "GET", path)
        assert status == 401, path
        assert headers["WWW-Authenticate"].startswith("Bearer")
        assert call(server, "GET", path, headers={"Authorization": "Bearer wrong"})[0] == 401
        assert call(server, "GET", path, headers={"Authorization": f"Bearer {TOKEN}"})[0] == 200
        assert call(server, "GET", f"{path}?token={TOKEN}")[0] == 401  # never in a URL
    for path in ("/", "/static/app.js", "/static/app.css"):  # the page loads, then asks
        assert call(server, "GET", path)[0] == 200, path
    command = {"target": "shop.orders", "action": "force-remove"}
    assert call(server, "POST", "/api/commands", command)[0] == 401
    assert call(server, "POST", f"/api/commands?token={TOKEN}", command)[0] == 401
    ok = call(server, "POST", "/api/commands", command, {"Authorization": f"Bearer {TOKEN}"})
    assert ok[0] == 202, ok


@pytest.mark.spark
def test_without_a_token_one_is_generated_and_every_post_needs_it(serve, tmp_path: Path):
    server, _, _ = serve()
    assert server.generated and len(server.token) >= 32
    secret = tmp_path / "secret" / "ops-token"
    assert secret.read_text().strip() == server.token.decode()
    assert secret.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "secret").stat().st_mode & 0o777 == 0o700
    assert server.page == f"{server.url}#token={server.token.decode()}"
    assert call(server, "GET", "/api/locks")[0] == 200  # reads on loopback need none
    command = {"target": "shop.orders", "action": "force-remove"}
    assert call(server, "POST", "/api/commands", command, auth=False)[0] == 401
    wrong = {"Authorization": "Bearer " + "x" * 43}
    assert call(server, "POST", "/api/commands", command, wrong)[0] == 401
    assert call(server, "POST", "/api/commands", command)[0] == 202
    server.stop()
    assert not secret.exists()  # a token that no server takes is not left behind


def test_any_address_but_loopback_requires_a_token(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"ops\.token"):
        load_settings(None, environ={
            "SHARDMERGE__KAFKA__BOOTSTRAP": "k:9092", "SHARDMERGE__SOURCES": "[{topics: [a]}]",
            "SHARDMERGE__ROUTES": "[{target: a.b}]", "SHARDMERGE__SINK__PATH": str(tmp_path),
            "SHARDMERGE__CHECKPOINT": str(tmp_path), "SHARDMERGE__OPS__BIND": "0.0.0.0",
        })  # fmt: skip
    assert settings(tmp_path, bind="0.0.0.0", token=TOKEN).ops.bind == "0.0.0.0"


@pytest.mark.spark
def test_commands_are_post_only_and_go_to_the_clis_durable_inbox(serve, spark):
    server, s, _ = serve()
    body = {"target": "shop.orders", "shard": "s1.shop.orders_1", "action": "skip"}
    for method in ("PUT", "DELETE", "PATCH", "OPTIONS"):
        assert call(server, method, "/api/commands", body)[0] == 405, method
    assert call(server, "POST", "/api/locks", body)[0] == 405
    status, _, raw = call(server, "POST", "/api/commands", body)
    assert status == 202, raw
    answer = json.loads(raw)
    assert answer["words"] == "unlock shop.orders --shard s1.shop.orders_1 --action skip"
    inbox = StateStore(spark, s.checkpoint).inbox()
    assert [(c["id"], c["words"]) for c in inbox] == [(answer["id"], answer["words"])]
    # the same value the batch parses from the inbox, and the CLI writes
    assert parse_command(inbox[0]["words"]) == command_from_json(body)
    status, _, raw = call(server, "GET", "/api/commands")
    assert json.loads(raw)["waiting"] == inbox
    locks = json.loads(call(server, "GET", "/api/locks")[2])
    assert locks["commands_waiting"] == [answer["words"]]
    # withdrawn by its id, as `shardmerge unlock --cancel` does; then no longer queued
    assert call(server, "POST", "/api/commands/cancel", {"id": answer["id"], "x": 1})[0] == 400
    status, _, raw = call(server, "POST", "/api/commands/cancel", {"id": answer["id"]})
    assert status == 200 and json.loads(raw) == {"id": answer["id"], "withdrawn": True}, raw
    assert StateStore(spark, s.checkpoint).inbox() == []
    assert json.loads(call(server, "GET", "/api/commands")[2])["waiting"] == []
    status, _, raw = call(server, "POST", "/api/commands/cancel", {"id": "nope"})
    assert status == 404 and "no queued command nope" in json.loads(raw)["error"]


@pytest.mark.spark
def test_commands_refused_unless_json_from_the_same_origin_and_well_formed(serve, spark):
    server, s, _ = serve()
    _, port = server.address
    good = {"target": "shop.orders", "shard": "s1.shop.orders_1", "action": "exec"}
    form = call(
        server,
        "POST",
        "/api/commands",
        None,
        {"Content-Type": "application/x-www-form-urlencoded", "Content-Length": "0"},
    )
    assert form[0] == 415
    assert call(server, "POST", "/api/commands", good, {"Origin": "http://evil.example"})[0] == 403
    assert call(server, "POST", "/api/commands", {**good, "action": "drop"})[0] == 400
    assert call(server, "POST", "/api/commands", {**good, "shard": "nodots"})[0] == 400
    assert call(server, "POST", "/api/commands", {**good, "target": "no.such"})[0] == 404
    replace = {
        **good,
        "action": "replace",
        "statements": ["ALTER TABLE orders_1 ADD COLUMN `a``b'c;--` INT"],
    }
    # checked against the latest state when given: 400 with the reason
    for bad, why in (
        ({**good, "shard": "s1.shop.orders_3"}, "not held"),
        ({**replace, "statements": ["ALTER TABLE orders_0 ADD x INT"]}, "not the held shard"),
        ({**replace, "statements": ["ALTER TABLE orders_1 ADD"]}, "does not parse"),
    ):
        status, _, raw = call(server, "POST", "/api/commands", bad)
        assert status == 400 and why in raw.decode(), raw
    status, _, raw = call(
        server, "POST", "/api/commands", replace, {"Origin": f"http://127.0.0.1:{port}"}
    )
    assert status == 202, raw
    assert parse_command(json.loads(raw)["words"]).statements == tuple(replace["statements"])
    assert [c["words"] for c in StateStore(spark, s.checkpoint).inbox()] == [
        json.loads(raw)["words"]
    ]
    with pytest.raises(CommandError):
        command_from_json({"target": "shop.orders", "action": "skip"})  # skip needs a shard


@pytest.mark.spark
def test_no_cors_headers_ever(serve):
    server, _, _ = serve()
    for method, path in (("GET", "/api/locks"), ("OPTIONS", "/api/commands"), ("GET", "/metrics")):
        _, headers, _ = call(server, method, path, headers={"Origin": "http://evil.example"})
        assert not [h for h in headers if h.lower().startswith("access-control-")]


def _samples(server: OpsServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, headers, raw = call(server, "GET", "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(raw.decode()):
        assert family.name.startswith("shardmerge_"), family.name
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


@pytest.mark.spark
def test_metrics_are_per_target_unless_shard_metrics_are_asked_for(serve):
    samples = _samples(serve()[0])
    names = {name for name, _ in samples}
    labels = {k for _, labels in samples for k, _ in labels}
    assert "shard" not in labels and "partition" not in labels
    assert "shardmerge_kafka_lag_records" not in names
    target = (("target", "shop.orders"),)
    # two held shards: the oldest time, the rows summed
    assert samples[("shardmerge_held_since_timestamp_seconds", target)] == pytest.approx(
        1_700_000_000.0
    )
    assert samples[("shardmerge_held_rows", target)] == 0
    waiting = (("kind", "before_create"), ("target", "shop.orders"))
    assert samples[("shardmerge_waiting_since_timestamp_seconds", waiting)] == pytest.approx(
        1_699_999_999.0
    )
    assert samples[("shardmerge_waiting_rows", waiting)] == 0
    assert samples[("shardmerge_waiting_shards", waiting)] == 1


@pytest.mark.spark
def test_metrics_parse_and_match_the_jobs_state(serve):
    server, _, _ = serve(shard_metrics=True)
    samples = _samples(server)
    target = (("target", "shop.orders"),)
    stage = {
        st: samples[
            (
                "shardmerge_lock_stage",
                (("mode", "pessimistic"), ("stage", st), ("target", "shop.orders")),
            )
        ]
        for st in ("none", "waiting", "conflict")
    }
    assert stage == {"none": 0.0, "waiting": 1.0, "conflict": 0.0}
    assert samples[("shardmerge_target_shards", target)] == 4
    assert samples[("shardmerge_held_shards", target)] == 2
    assert samples[("shardmerge_pending_ddls", target)] == 2
    assert samples[("shardmerge_rollout_shards", target)] == 2
    assert samples[("shardmerge_last_batch_id", ())] == 7
    assert samples[("shardmerge_rows_total", (("action", "written"),))] == 21
    assert samples[("shardmerge_rows_total", (("action", "held"),))] == 7
    assert samples[("shardmerge_ddl_applied_total", (("kind", "add_column"),))] == 1
    changed = {
        dict(k[1])["action"]: v
        for k, v in samples.items()
        if k[0] == "shardmerge_target_rows_total" and dict(k[1])["target"] == "shop.orders"
    }
    assert changed == {"inserted": 18, "updated": 2, "deleted": 1}
    assert samples[("shardmerge_batches_total", ())] == 1
    assert samples[("shardmerge_batch_step_duration_seconds_count", (("step", "restore"),))] == 1
    held_since = (
        "shardmerge_held_since_timestamp_seconds",
        (("shard", "s1.shop.orders_0"), ("target", "shop.orders")),
    )
    assert samples[held_since] == pytest.approx(1_700_000_000.0)
    waiting = (("kind", "before_create"), ("target", "shop.orders"))
    assert samples[("shardmerge_waiting_shards", waiting)] == 1
    late = (("kind", "before_create"), ("shard", str(LATE)), ("target", "shop.orders"))
    assert samples[("shardmerge_waiting_since_timestamp_seconds", late)] == pytest.approx(
        1_699_999_999.0
    )
    assert samples[("shardmerge_waiting_rows", late)] == 0
    # a declared move no batch has seen a marker of
    assert samples[("shardmerge_move_state", (("move", "m1"), ("state", "declared")))] == 1
    assert samples[("shardmerge_move_state", (("move", "m1"), ("state", "switched")))] == 0
    assert samples[("shardmerge_move_switch_waits", (("move", "m1"),))] == 0
    (move,) = json.loads(call(server, "GET", "/api/moves")[2])["moves"]
    assert move["id"] == "m1" and move["state"] == "declared" and move["to"] == "s2.shop.orders_3"


def test_kafka_lag_is_latest_minus_end_offset_per_partition():
    progress = {"sources": [
        {"description": "KafkaV2[Subscribe[a]]", "endOffset": {"a": {"0": 10, "1": 7}}, "latestOffset": {"a": {"0": 25, "1": 7}}},
        {"description": "KafkaV2[Subscribe[ddl]]", "endOffset": '{"ddl": {"0": 3}}', "latestOffset": '{"ddl": {"0": 4}}'},
    ]}  # fmt: skip
    assert lag_by_partition(progress) == {("a", 0): 15, ("a", 1): 0, ("ddl", 0): 1}


def test_ddl_kinds_are_a_bounded_set():
    assert ddl_kind("ALTER TABLE t ADD COLUMN a INT, DROP COLUMN b") == [
        "add_column",
        "drop_column",
    ]
    assert ddl_kind("not sql at all ((") == ["other"]


@pytest.mark.spark
def test_every_served_metric_is_documented_and_every_documented_one_served(serve):
    server, _, _ = serve(shard_metrics=True)  # every family, the per-shard ones too
    served = {
        (f.name + "_total" if f.type == "counter" else f.name, f.type)
        for f in text_string_to_metric_families(call(server, "GET", "/metrics")[2].decode())
    }
    doc = (Path(__file__).resolve().parents[2] / "docs/operations.md").read_text()
    documented = set(re.findall(r"^\| `(shardmerge_[a-z_]+)` \| (\w+) \|", doc, re.M))
    assert served == documented


def raw_request(server: OpsServer, data: bytes) -> bytes:
    """Bytes sent as they are (what http.client would refuse to send); the answer."""
    with socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.spark
def test_malformed_requests_are_answered_400_and_logged_once(serve, caplog):
    server, _, _ = serve()
    host = f"Host: 127.0.0.1:{server.address[1]}\r\n".encode()
    with caplog.at_level(logging.WARNING, logger="shardmerge.ops"):
        for request in (
            b"GARBAGE\r\n\r\n",
            b"GET /api/locks HTTP/1.1\r\n" + host + b"Bad Header Line\r\n\r\n",
            b"POST /api/commands HTTP/1.1\r\n" + host + b"Content-Length: -1\r\n\r\n",
            b"POST /api/commands HTTP/1.1\r\n" + host + b"Content-Length: 1e3\r\n\r\n",
        ):
            answer = raw_request(server, request)
            assert answer.startswith(b"HTTP/1.0 400") or answer.startswith(b"HTTP/1.1 400"), (
                request,
                answer[:200],
            )
        answer = raw_request(  # refused on its headers, before any of the body is read
            server,
            b"POST /api/commands HTTP/1.1\r\n" + host + b"Content-Type: application/json\r\n"
            b"Content-Length: " + str(MAX_BODY + 1).encode() + b"\r\n\r\n",
        )
        assert b" 413 " in answer.split(b"\r\n")[0], answer[:200]
    refused = [r for r in caplog.records if "refused a malformed request" in r.getMessage()]
    assert len(refused) == 5 and all("\n" not in r.getMessage() for r in refused)
    assert call(server, "GET", "/api/locks")[0] == 200  # and the server still answers


@pytest.mark.spark
def test_idle_connections_do_not_starve_a_request(serve):
    """More idle connections than worker threads (some with half a request) and a real
    request is still answered at once; the driver did not start a thread per connection."""
    server, _, _ = serve()
    threads = threading.active_count()
    idle = []
    try:
        for i in range(60):
            sock = socket.create_connection(server.address, timeout=10)
            if i % 2:
                sock.sendall(b"GET /api/locks HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never ends
            idle.append(sock)
        time.sleep(0.5)
        started = time.monotonic()
        assert call(server, "GET", "/api/progress")[0] == 200
        assert time.monotonic() - started < 5
        assert threading.active_count() <= threads + THREADS
    finally:
        for sock in idle:
            sock.close()


@pytest.mark.spark
def test_a_failure_answers_500_with_an_incident_id_never_the_exception(serve, caplog):
    server, _, _ = serve()

    def broken() -> dict:
        raise RuntimeError("/secret/path/state.json is unreadable")

    server.views.shards = broken
    with caplog.at_level(logging.ERROR, logger="shardmerge.ops"):
        status, _, raw = call(server, "GET", "/api/shards")
    assert status == 500 and b"secret" not in raw and b"RuntimeError" not in raw
    incident = json.loads(raw)["error"].rsplit(" ", 1)[1]
    (logged,) = [r for r in caplog.records if incident in r.getMessage()]
    assert logged.exc_info is not None  # the stack is in the log, under the id


@pytest.mark.spark
def test_gets_are_computed_at_most_once_a_second(serve):
    server, _, _ = serve()
    calls = []
    progress = server.views.progress

    def counted() -> dict:
        calls.append(1)
        return progress()

    server.views.progress = counted
    first = call(server, "GET", "/api/progress")
    assert call(server, "GET", "/api/progress")[2] == first[2]
    assert len(calls) == 1
    time.sleep(1.1)
    call(server, "GET", "/api/progress")
    assert len(calls) == 2


@pytest.mark.spark
def test_an_ipv6_loopback_bind_serves(serve):
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        socket.create_server(("::1", 0), family=socket.AF_INET6).close()
    except OSError as e:
        pytest.skip(f"no IPv6 loopback here: {e}")
    server, _, _ = serve(bind="::1")
    assert server.url.startswith("http://[::1]:")
    conn = http.client.HTTPConnection("::1", server.address[1], timeout=10)
    conn.request("GET", "/api/locks", headers={"Host": f"[::1]:{server.address[1]}"})
    assert conn.getresponse().status == 200
    conn.close()


def test_the_last_trigger_time_is_sparks_progress_timestamp():
    assert progress_time("2026-11-28T07:51:22.312Z") == pytest.approx(1795852282.312)
