"""The dashboard and /metrics of a running job: real Kafka, Spark, Delta and Chromium.

A pessimistic target of three shards rolls out ADD COLUMN shard by shard: the page shows
the lock go waiting -> none with its progress bar advancing; a second DDL holds one shard
and the page's "skip" (confirmed in its dialog) releases it at the next micro-batch.
/metrics is parsed with the Prometheus client's parser and checked against the job's
state and the Delta table. Screenshots are kept in .artifacts/dashboard/ (CI uploads it).

Chromium is Debian's (scripts/install-chromium), driven through its own chromedriver by
selenium; nothing downloads a browser.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession

from coordinator.ids import TargetId
from devkit.browser import CHROMEDRIVER, CHROMIUM, headless_chromium
from devkit.kafka_local import KafkaBroker
from devkit.producer import DebeziumProducer
from schemas import apply, parse_create_table, parse_ddl
from schemas.model import TableSchema
from streaming.config import Settings
from streaming.job import build_query
from streaming.ops.running import start_ops
from streaming.ops.tables import reason_class
from streaming.storage.state_store import StateStore

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("SHARDMERGE_ARTIFACTS", ROOT / ".artifacts")) / "dashboard"
WAIT = 900  # seconds a page state may take to appear (micro-batches on a busy machine)

pytestmark = [
    pytest.mark.timeout(3600),
    pytest.mark.kafka,
    pytest.mark.spark,
    pytest.mark.skipif(
        not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()),
        reason="Debian's chromium and chromium-driver are needed: run scripts/install-chromium",
    ),
]


@pytest.fixture
def browser() -> Iterator[Any]:
    with headless_chromium() as driver:
        yield driver


class Upstream:
    """Three shards of shop.orders on one Debezium source, their schemas kept here."""

    def __init__(self, bootstrap: str) -> None:
        self.source = f"it{uuid.uuid4().hex[:10]}"
        self.producer = DebeziumProducer(bootstrap, self.source)
        self.schemas: dict[str, TableSchema] = {}
        self.next_id = 0

    def create(self, table: str) -> None:
        sql = f"CREATE TABLE {table} (id INT PRIMARY KEY, v VARCHAR(20))"
        self.schemas[table] = parse_create_table(sql)
        self.producer.ddl("shop", table, sql, self.schemas[table])

    def alter(self, table: str, sql: str) -> None:
        (change,) = parse_ddl(sql)
        self.schemas[table] = apply(change, self.schemas[table])
        self.producer.ddl("shop", table, sql, self.schemas[table])

    def rows(self, table: str, n: int) -> None:
        schema = self.schemas[table]
        for _ in range(n):
            self.next_id += 1
            after = {c.name: None for c in schema.columns}
            after.update(id=self.next_id, v=f"{table}-{self.next_id}")
            self.producer.row("shop", table, "c", None, after, schema)
        self.producer.flush()


QUERY: list[Any] = []  # the running query: a wait ends at once if it failed


def wait_for(driver: Any, script: str, what: str) -> Any:
    """Wait until ``script`` (JS returning a value) gives a truthy value on the page."""

    def check(d: Any) -> Any:
        for q in QUERY:
            if q.exception() is not None:
                raise AssertionError(f"the query failed: {q.exception()}")
        return d.execute_script(script)

    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, WAIT, poll_frequency=0.5).until(check)
    except TimeoutException:
        shot(driver, f"timeout-{what}")
        raise AssertionError(f"the page never showed {what}") from None


def shot(driver: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def lock_is(stage: str, done: int, total: int) -> str:
    return (
        "const t = document.querySelector('[data-target=\"shop.orders\"]');"
        f"if (!t || t.dataset.stage !== '{stage}') return false;"
        "const b = t.querySelector('.bar');"
        f"return b.dataset.done === '{done}' && b.dataset.total === '{total}';"
    )


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url + "metrics", timeout=30) as r:
        text = r.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def get_json(url: str, path: str) -> Any:
    with urllib.request.urlopen(url + path, timeout=30) as r:
        return json.loads(r.read())


def test_rollout_skip_and_metrics_in_a_real_browser(
    kafka: KafkaBroker, spark: SparkSession, tmp_path: Path, browser: Any
) -> None:
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    up = Upstream(kafka.bootstrap)
    tables = ["orders_0", "orders_1", "orders_2"]
    for t in tables:
        up.create(t)
        up.rows(t, 5)
    # One record no decoder can read: a dead letter, listed on the page and counted.
    bad = Producer({"bootstrap.servers": kafka.bootstrap})
    bad.produce(f"{up.source}.shop.orders_2", b"{not json", b"k")
    assert bad.flush(60) == 0
    settings = Settings.model_validate(
        {
            "kafka": {"bootstrap": kafka.bootstrap},
            "sources": [{"format": "debezium", "pattern": rf"{up.source}(\..*)?"}],
            "routes": [{"target": "shop.orders", "table": "orders_*"}],
            # a policy for a kind this run never sees: the page shows it, nothing else changes
            "targets": {
                "shop.orders": {"mode": "pessimistic", "policy": {"truncate_table": "ignore"}}
            },
            "sink": {"path": str(tmp_path / "lake")},
            "checkpoint": str(tmp_path / "checkpoint"),
            "trigger_interval": "1 second",
            "ops": {
                "port": 0,
                "generated_token_file": str(tmp_path / "ops-token"),
                "shard_metrics": True,
            },
        }
    )
    query, processor = build_query(spark, settings)
    ops = start_ops(spark, processor, query)
    QUERY[:] = [query]
    try:
        browser.get(ops.page)  # the generated token in the fragment: the page's skip is a POST
        assert "token" not in browser.current_url  # taken out of the address bar
        run_the_rollout(browser, up, ops.url, tables)
        check_metrics(spark, settings, ops.url, up)
    finally:
        ops.stop()
        query.stop()
    assert query.exception() is None


def run_the_rollout(browser: Any, up: Upstream, url: str, tables: list[str]) -> None:
    wait_for(browser, lock_is("none", 3, 3), "three shards, lock none")
    shot(browser, "1-running")

    add = "ALTER TABLE {t} ADD COLUMN note VARCHAR(64)"
    for t in tables[:2]:
        up.alter(t, add.format(t=t))
        up.rows(t, 4)
    wait_for(browser, lock_is("waiting", 2, 3), "the lock waiting, 2 of 3 shards")
    # Held rows are counted from the stash after a batch: 4 rows of each held shard.
    held = (
        "return [...document.querySelectorAll('[data-target=\"shop.orders\"] tr[data-shard]')]"
        ".map(r => r.dataset.shard + '=' + r.children[2].textContent).join(',') === "
        f"'{up.source}.shop.orders_0=4,{up.source}.shop.orders_1=4';"
    )
    wait_for(browser, held, "4 held rows per held shard")
    label = browser.execute_script(
        "return document.querySelector('[data-target=\"shop.orders\"] .rollout .label').textContent"
    )
    assert label == "ALTER TABLE orders_0 ADD COLUMN note VARCHAR(64): 2 of 3 shards ran it"
    policy = browser.execute_script(
        "return [...document.querySelectorAll('[data-policy=\"shop.orders\"] .badge.policy')]"
        ".map(b => b.textContent).join(',')"
    )
    assert policy == "truncate_table ignore"
    # The joined schema against each shard's: the held shards have the column already.
    browser.find_element("css selector", '[data-schemas="shop.orders"] summary').click()
    diff = (
        "return [...document.querySelectorAll('tr[data-schema-shard]')]"
        ".map(r => r.dataset.schemaShard.split('.').pop() + ':' + r.children[2].textContent)"
        ".join(', ')"
    )
    assert browser.execute_script(diff) == (
        "orders_0:has note (not joined), orders_1:has note (not joined), orders_2:same as joined"
    )
    shot(browser, "2-waiting-2-of-3")
    check_held_filter_and_pages(browser, url)

    up.alter(tables[2], add.format(t=tables[2]))
    up.rows(tables[2], 1)
    wait_for(browser, lock_is("none", 3, 3), "the lock back to none, 3 of 3 shards synced")
    shot(browser, "3-synced")

    # A DDL only one shard runs: it is held; "skip" releases it at the next micro-batch.
    up.alter(tables[0], "ALTER TABLE orders_0 ADD COLUMN memo INT")
    up.rows(tables[0], 3)
    wait_for(browser, lock_is("waiting", 1, 3), "the lock waiting, 1 of 3 shards")
    shard = f"{up.source}.shop.orders_0"
    browser.execute_script(
        'document.querySelector(`tr[data-shard="${arguments[0]}"] button[data-action=skip]`)'
        ".scrollIntoView()",
        shard,
    )
    shot(browser, "4-held-before-skip")
    browser.find_element(
        "css selector", f'tr[data-shard="{shard}"] button[data-action="skip"]'
    ).click()
    wait_for(browser, "return document.getElementById('confirm').open", "the confirmation")
    text = browser.find_element("id", "confirm-text").text
    assert shard in text and "next micro-batch" in text
    shot(browser, "5-confirm-skip")
    browser.find_element("id", "confirm-ok").click()
    # The page posts the command when the dialog closes; its status line shows the answer.
    wait_for(
        browser,
        "return document.getElementById('status').textContent.startsWith('queued: ')",
        "the command queued",
    )
    waiting = get_json(url, "api/commands")["waiting"]
    assert [c["words"] for c in waiting] == [f"unlock shop.orders --shard {shard} --action skip"]
    # The command applies at the next micro-batch, which new data starts.
    up.rows(tables[1], 1)
    wait_for(browser, lock_is("none", 3, 3), "the shard released by skip")
    assert get_json(url, "api/commands")["waiting"] == []
    shot(browser, "6-after-skip")

    # Rows of a fourth table before its CREATE TABLE: no lock holds them, the page says why.
    late = "orders_3"
    create = f"CREATE TABLE {late} (id INT PRIMARY KEY, v VARCHAR(20), note VARCHAR(64))"
    up.schemas[late] = parse_create_table(create)
    up.rows(late, 2)
    waits = (
        "return [...document.querySelectorAll('#waiting tr[data-waiting]')]"
        ".map(r => [...r.children].slice(1).map(c => c.textContent).slice(0, 3).join('/'))"
        f".join(',') === '{up.source}.shop.{late}/before its CREATE TABLE (not registered yet)/2'"
    )
    wait_for(browser, waits, "two rows waiting before their CREATE TABLE")
    tile = "return document.querySelector('[data-tile=\"waiting (no lock)\"] .v').textContent"
    assert browser.execute_script(tile) == "1"
    browser.execute_script("document.getElementById('waiting').scrollIntoView()")
    shot(browser, "6b-rows-waiting-without-a-lock")
    up.producer.ddl("shop", late, create, up.schemas[late])
    up.rows(tables[1], 1)
    wait_for(
        browser,
        "return document.querySelector('#waiting tr[data-waiting]') === null",
        "the waiting rows replayed once the CREATE TABLE came",
    )
    dead = (
        "return [...document.querySelectorAll('#dead-table tbody tr')]"
        ".map(r => [...r.children].slice(1, 4).map(c => c.textContent).join('/')).join(',')"
    )
    wait_for(browser, dead + f" === '{up.source}.shop.orders_2/0/5'", "the dead letter")
    moves = "return document.querySelector('#moves-table tbody').textContent"
    wait_for(browser, moves + ".includes('no move declared')", "the moves panel, no move")
    browser.execute_script("document.getElementById('dead-letters').scrollIntoView()")
    shot(browser, "7-dead-letters")


def held_rows_listed(browser: Any) -> list[str]:
    return browser.execute_script(
        "return [...document.querySelectorAll('[data-target=\"shop.orders\"] tr[data-shard]')]"
        ".map(r => r.dataset.shard.split('.').pop())"
    )


def check_held_filter_and_pages(browser: Any, url: str) -> None:
    """Two held shards: the filter box keeps those whose name contains its text; a page of
    one shard (/?held=1) lists the first and pages to the second."""
    box = browser.find_element("id", "held-filter")
    box.send_keys("ORDERS_1")
    wait_for(
        browser,
        "return document.querySelectorAll('tr[data-shard]').length === 1",
        "the filter's one shard",
    )
    assert held_rows_listed(browser) == ["orders_1"]
    box.clear()
    box.send_keys("orders_9")
    wait_for(
        browser,
        "return document.querySelectorAll('tr[data-shard]').length === 0",
        "no shard matching",
    )
    empty = "return document.querySelector('[data-target=\"shop.orders\"] .empty').textContent"
    assert browser.execute_script(empty) == 'no held shard\'s name contains "orders_9" (2 held)'
    browser.get(url + "?held=1")  # the token stays in the tab's session storage
    text = "return (document.querySelector('[data-pager-of=\"shop.orders\"] .pager-text') || {}).textContent"
    wait_for(browser, text + " === 'held shards 1–1 of 2'", "the first page of one shard")
    assert held_rows_listed(browser) == ["orders_0"]
    browser.find_element(
        "css selector", '[data-pager-of="shop.orders"] [data-pager="next"]'
    ).click()
    wait_for(browser, text + " === 'held shards 2–2 of 2'", "the second page")
    assert held_rows_listed(browser) == ["orders_1"]
    assert browser.find_element(
        "css selector", '[data-pager-of="shop.orders"] [data-pager="next"]'
    ).get_attribute("disabled")
    shot(browser, "2b-held-shards-paged")
    browser.get(url)
    wait_for(
        browser,
        "return document.querySelectorAll('tr[data-shard]').length === 2",
        "both held shards again",
    )


def wait_all_read_and_counted(url: str, up: Upstream) -> None:
    """Wait until /metrics says every topic is read to its end and every row produced is
    counted.

    The page's last wait can end at the batch that read the CREATE TABLE while the row
    produced after it is in the next batch: the counts are read after that one."""
    deadline = time.monotonic() + WAIT
    while True:
        for q in QUERY:  # a query that died after the page's last wait: its error, not a count
            assert q.exception() is None, f"the query failed: {q.exception()}"
        samples = scrape(url)
        lags = [v for k, v in samples.items() if k[0] == "shardmerge_kafka_lag_records"]
        counted = sum(
            samples.get(("shardmerge_rows_total", (("action", a),)), 0.0)
            for a in ("written", "replayed")
        )
        if lags and set(lags) == {0.0} and counted >= up.next_id:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"rows counted {counted} of {up.next_id}, lags {lags}")
        time.sleep(0.5)


def check_metrics(spark: SparkSession, settings: Settings, url: str, up: Upstream) -> None:
    wait_all_read_and_counted(url, up)
    store = StateStore(spark, settings.checkpoint)
    batch, _ = store.latest()
    samples = scrape(url)
    target = (("target", "shop.orders"),)
    assert samples[("shardmerge_last_batch_id", ())] == batch
    assert (
        samples[("shardmerge_lock_stage", (("mode", "pessimistic"), ("stage", "none"), *target))]
        == 1
    )
    assert samples[("shardmerge_held_shards", target)] == 0
    assert samples[("shardmerge_target_shards", target)] == 4
    assert samples[("shardmerge_ddl_applied_total", (("kind", "add_column"),))] == 1
    # every row reached the table once: written directly or replayed from the stash
    rows = spark.read.format("delta").load(settings.table_path(TargetId("shop", "orders"))).count()
    written = samples[("shardmerge_rows_total", (("action", "written"),))]
    replayed = samples[("shardmerge_rows_total", (("action", "replayed"),))]
    assert rows == up.next_id == written + replayed
    # Everything held came back. At least the rows of the held shards (4 + 4 + 3); one
    # more when a row was read before its shard's ALTER (the topics are read side by side)
    # and waited for it in the stash.
    assert samples[("shardmerge_rows_total", (("action", "held"),))] == replayed >= 4 + 4 + 3
    # what Delta reports the MERGEs did adds up to the table's rows
    changed = {
        dict(k[1])["action"]: v for k, v in samples.items()
        if k[0] == "shardmerge_target_rows_total" and (("target", "shop.orders") in k[1])
    }  # fmt: skip
    assert changed.get("inserted", 0) - changed.get("deleted", 0) == rows, changed
    assert changed.get("inserted", 0) > 0
    lags = {k[1]: v for k, v in samples.items() if k[0] == "shardmerge_kafka_lag_records"}
    topics = {dict(labels)["topic"] for labels in lags}
    assert topics == {up.source} | {f"{up.source}.shop.orders_{i}" for i in range(4)}
    assert set(lags.values()) == {0.0}
    per_target = {k[1]: v for k, v in samples.items() if k[0] == "shardmerge_target_lag_records"}
    assert per_target == {(("target", "shop.orders"),): 0.0}, per_target
    dead = {k[1]: v for k, v in samples.items() if k[0] == "shardmerge_dead_letters_total"}
    assert sum(dead.values()) == 1, dead
    (latest,) = get_json(url, "api/dead-letters")["latest"]
    assert (latest["topic"], latest["partition"], latest["offset"]) == (
        f"{up.source}.shop.orders_2",
        0,
        5,
    )
    assert latest["reason"] and dead == {(("reason", reason_class(latest["reason"])),): 1.0}
    assert (
        samples[("shardmerge_batch_step_duration_seconds_count", (("step", "write"),))]
        == samples[("shardmerge_batches_total", ())]
    )


def test_the_replace_dialog_sends_one_statement_per_box(browser, spark, tmp_path: Path):
    """A replacement pasted over two lines stays one statement; a second box is a second
    statement. The page of a server over a saved state (no job runs: the command only has
    to reach the inbox, where `shardmerge unlock` and the batch read it)."""
    from selenium.webdriver.support.ui import WebDriverWait

    from coordinator.commands import parse_command
    from streaming.ops.metrics import registry_for
    from streaming.ops.observer import BatchObserver
    from streaming.ops.server import OpsServer
    from streaming.ops.views import Views
    from streaming.storage.state_store import command_of
    from tests.integration.test_ops_api import TOKEN, job_state, settings

    s = settings(tmp_path, token=TOKEN)  # every API request needs it: the page sends it
    observer = BatchObserver()
    store = StateStore(spark, s.checkpoint)
    job_state(store, s, observer)  # shards orders_0 and orders_1 held on an ADD COLUMN
    views = Views(s, store, observer)
    server = OpsServer(s.ops, views, registry_for(views)).start()
    try:
        browser.get(f"{server.url}#token={TOKEN}")
        replace = 'tr[data-shard="s1.shop.orders_0"] button[data-action="replace"]'
        WebDriverWait(browser, 60).until(
            lambda d: d.execute_script(f"return document.querySelector('{replace}') !== null")
        )
        browser.find_element("css selector", replace).click()
        first = "ALTER TABLE orders_0\n  ADD COLUMN note VARCHAR(64)"
        second = "ALTER TABLE orders_0 ADD COLUMN memo INT"
        browser.find_element("css selector", "#confirm-sql-boxes textarea").send_keys(first)
        browser.find_element("id", "confirm-sql-add").click()
        boxes = browser.find_elements("css selector", "#confirm-sql-boxes textarea")
        assert len(boxes) == 2
        boxes[1].send_keys(second)
        shot(browser, "8-replace-two-boxes")
        browser.find_element("id", "confirm-ok").click()
        WebDriverWait(browser, 60).until(
            lambda d: d.find_element("id", "status").text.startswith(("queued", "refused"))
        )
        assert browser.find_element("id", "status").text.startswith("queued"), browser.find_element(
            "id", "status"
        ).text
    finally:
        server.stop()
    (queued,) = store.inbox()
    command = command_of(queued)
    assert parse_command(queued["words"]) == command
    assert command.action == "replace" and str(command.shard) == "s1.shop.orders_0"
    assert command.statements == (first, second)
