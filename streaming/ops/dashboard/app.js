// shardmerge dashboard: plain JS, inline SVG charts, no dependencies, no network but
// this job's own API. Every value from the job is put in the page as text (never as HTML):
// table and column names can hold any character.
"use strict";

const REFRESH_MS = 2000;
const STEP_COLORS = { restore: "#8e9aaf", commands: "#b07aa1", decode: "#4e79a7",
  decide: "#76b7b2", write: "#f28e2b", persist: "#59a14f" };
let token = null;

(function takeToken() {
  // The job logs this page's address with its token in the fragment (#token=...), which a
  // browser never sends to a server. The page keeps it for this tab only (sessionStorage),
  // removes it from the address bar and history, and sends it as a bearer header.
  const url = new URL(window.location.href);
  const fragment = new URLSearchParams(url.hash.replace(/^#/, ""));
  if (fragment.has("token")) {
    token = fragment.get("token");
    try { sessionStorage.setItem("shardmerge-token", token); } catch (e) { /* memory only */ }
    window.history.replaceState(null, "", url.pathname + url.search);
  } else {
    try { token = sessionStorage.getItem("shardmerge-token"); } catch (e) { token = null; }
  }
})();

function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (token) h["Authorization"] = "Bearer " + token;
  return h;
}

async function getJSON(path) {
  const r = await fetch(path, { headers: headers(), cache: "no-store" });
  if (!r.ok) throw new Error(path + ": HTTP " + r.status);
  return r.json();
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else if (k === "text") e.textContent = v;
    else e[k] = v;
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function fmt(n, digits) {
  if (n === null || n === undefined || Number.isNaN(n)) return "–";
  if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (Math.abs(n) >= 1e4) return (n / 1e3).toFixed(1) + "k";
  return Number(n).toFixed(digits === undefined ? 0 : digits);
}

function ago(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const s = Math.max(0, Date.now() / 1000 - seconds);
  if (s < 90) return Math.round(s) + " s ago";
  if (s < 5400) return Math.round(s / 60) + " min ago";
  return Math.round(s / 3600) + " h ago";
}

// --- charts ------------------------------------------------------------------------

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

function frame(box, maxY) {
  const W = 600, H = 160, L = 44, B = 18;
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img" });
  for (const f of [0, 0.5, 1]) {
    const y = H - B - f * (H - B - 6);
    root.append(svg("line", { x1: L, x2: W, y1: y, y2: y, stroke: "#e3e6eb" }));
    const t = svg("text", { x: L - 4, y: y + 4, "text-anchor": "end", "font-size": 10, fill: "#5d6675" });
    t.textContent = fmt(maxY * f, maxY < 10 ? 1 : 0);
    root.append(t);
  }
  box.replaceChildren(root);
  return { root, W, H, L, B, plotW: W - L, plotH: H - B - 6 };
}

function legend(box, items) {
  const l = el("div", { class: "legend" });
  for (const [name, color] of items) {
    const i = el("i");
    i.style.background = color;
    l.append(el("span", {}, i, name));
  }
  box.append(l);
}

function lineChart(box, series) {
  const xs = series.flatMap((s) => s.points.map((p) => p[0]));
  const maxY = Math.max(1, ...series.flatMap((s) => s.points.map((p) => p[1] || 0)));
  const f = frame(box, maxY);
  if (!xs.length) { legend(box, [["no data yet", "#ccc"]]); return; }
  const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1);
  for (const s of series) {
    const pts = s.points.map(([x, y]) =>
      `${f.L + ((x - x0) / (x1 - x0)) * f.plotW},${f.H - f.B - ((y || 0) / maxY) * f.plotH}`);
    f.root.append(svg("polyline", { points: pts.join(" "), fill: "none", stroke: s.color, "stroke-width": 2 }));
  }
  legend(box, series.map((s) => [s.name, s.color]));
}

function stackedBars(box, batches) {
  const shown = batches.slice(-60);
  const totals = shown.map((b) => Object.values(b.steps).reduce((a, v) => a + v, 0));
  const maxY = Math.max(0.1, ...totals);
  const f = frame(box, maxY);
  const w = f.plotW / Math.max(shown.length, 1);
  shown.forEach((b, i) => {
    let y = f.H - f.B;
    for (const step of Object.keys(STEP_COLORS)) {
      const h = ((b.steps[step] || 0) / maxY) * f.plotH;
      y -= h;
      const r = svg("rect", { x: f.L + i * w + 1, y, width: Math.max(w - 2, 1), height: h, fill: STEP_COLORS[step] });
      const t = svg("title", {});
      t.textContent = `batch ${b.batch} ${step}: ${(b.steps[step] || 0).toFixed(2)} s`;
      r.append(t);
      f.root.append(r);
    }
  });
  legend(box, Object.entries(STEP_COLORS));
}

// Held shards listed per target, a page at a time; the rest are counted (4,096 held shards
// would otherwise travel on every refresh). The page's own URL may set the page size:
// /?held=N (the token stays in the fragment).
const HELD_PAGE = Math.max(1, Math.floor(Number(new URLSearchParams(location.search).get("held"))) || 100);
const heldOffset = {}; // target -> the first held shard listed (0 unless paged)
let heldFilter = ""; // a part of the shard name, from the filter box

function locksQuery(target) {
  const q = new URLSearchParams({ held: String(HELD_PAGE) });
  if (target) {
    q.set("offset", String(heldOffset[target]));
    q.set("target", target);
  }
  if (heldFilter) q.set("shard", heldFilter);
  return "/api/locks?" + q.toString();
}

// The first page of every target, and the page asked for of each target paged further on.
async function getLocks() {
  const locks = await getJSON(locksQuery(null));
  const paged = locks.targets.filter((t) => heldOffset[t.target] > 0);
  const pages = await Promise.all(paged.map((t) => getJSON(locksQuery(t.target))));
  for (const page of pages) {
    for (const t of page.targets) {
      const i = locks.targets.findIndex((x) => x.target === t.target);
      if (i >= 0) locks.targets[i] = t;
    }
  }
  return locks;
}

function pager(t) {
  const first = t.held_offset || 0;
  const matching = t.held_matching ?? t.held_count;
  if (first === 0 && matching <= t.held.length) return null;
  const of = heldFilter ? `${fmt(matching)} matching (${fmt(t.held_count)} held in all)` : fmt(matching);
  const text = t.held.length ? `held shards ${fmt(first + 1)}–${fmt(first + t.held.length)} of ${of}` : `no held shard from ${fmt(first + 1)} of ${of}`;
  const go = (to) => {
    heldOffset[t.target] = Math.max(0, to);
    refresh();
  };
  const prev = el("button", { type: "button", text: "previous", "data-pager": "previous" });
  prev.disabled = first === 0;
  prev.addEventListener("click", () => go(first - HELD_PAGE));
  const next = el("button", { type: "button", text: "next", "data-pager": "next" });
  next.disabled = first + t.held.length >= matching;
  next.addEventListener("click", () => go(first + HELD_PAGE));
  return el("p", { class: "more-held pager", "data-pager-of": t.target }, el("span", { class: "pager-text", text }), prev, next);
}

// --- sections ----------------------------------------------------------------------

function renderOverview(p, locks, dead) {
  const last = p.spark[p.spark.length - 1] || {};
  const lastBatch = p.batches[p.batches.length - 1];
  const lag = p.lag.reduce((a, r) => a + r.records, 0);
  // every held shard, counted by the API: the page lists only the first HELD_PAGE
  const held = locks.targets.reduce((a, t) => a + t.held_count, 0);
  const waitingRows = locks.waiting.reduce((a, w) => a + w.rows, 0)
    + locks.targets.reduce((a, t) => a + t.held_rows, 0);
  const deadTotal = Object.values(dead.by_reason).reduce((a, v) => a + v, 0);
  const tiles = [
    ["last batch", lastBatch ? `#${lastBatch.batch}` : (locks.batch ?? "–")],
    ["completed", lastBatch ? ago(lastBatch.ended_at) : "–"],
    ["query reported", last.timestamp ? ago(Date.parse(last.timestamp) / 1000) : "–"],
    ["input rows/s", fmt(last.input_rows_per_second, 1)],
    ["processed rows/s", fmt(last.processed_rows_per_second, 1)],
    ["Kafka lag (records)", fmt(lag)],
    ["topic-partitions read", p.read_cost ? fmt(p.read_cost.partitions) : "–"],
    ["rows written", fmt(p.totals.written || 0)],
    ["held shards", held],
    ["waiting (no lock)", locks.waiting.length],
    ["rows in the stash", fmt(waitingRows)],
    ["dead letters", fmt(deadTotal)],
  ];
  // Spark reports a trigger at least every 10 s when idle: a minute without one, the query
  // is stuck in a trigger (Kafka or storage unreachable, a very slow batch).
  const stalled = last.timestamp && Date.now() / 1000 - Date.parse(last.timestamp) / 1000 > 60;
  document.getElementById("tiles").replaceChildren(...tiles.map(([k, v]) =>
    el("div", { class: "tile" + (stalled && k === "query reported" ? " alarm" : ""), "data-tile": k },
      el("div", { class: "v", text: String(v) }), el("div", { class: "k", text: k }))));
  const t = (x) => Date.parse(x.timestamp) / 1000;
  lineChart(document.getElementById("chart-rate"), [
    { name: "input", color: "#4e79a7", points: p.spark.map((x) => [t(x), x.input_rows_per_second]) },
    { name: "processed", color: "#f28e2b", points: p.spark.map((x) => [t(x), x.processed_rows_per_second]) },
  ]);
  lineChart(document.getElementById("chart-lag"), [
    { name: "records behind latest", color: "#c0392b", points: p.spark.map((x) => [t(x), x.lag]) },
  ]);
  stackedBars(document.getElementById("chart-steps"), p.batches);
  const advice = (p.read_cost && p.read_cost.advice) || [];
  document.getElementById("read-advice").replaceChildren(
    ...advice.map((a) => el("p", { class: "alarm", text: "read cost: " + a })));
  const targets = document.querySelector("#lag-targets tbody");
  targets.replaceChildren(...Object.entries(p.lag_targets || {}).map(([name, n]) => el("tr", {},
    el("td", { text: name }), el("td", { class: "num", text: fmt(n) }))));
  const body = document.querySelector("#lag-table tbody");
  body.replaceChildren(...p.lag.map((r) => el("tr", {}, el("td", { text: r.topic }),
    el("td", { class: "num", text: r.partition }), el("td", { class: "num", text: fmt(r.records) }))));
}

function actionButton(target, shard, action, title) {
  const b = el("button", { type: "button", text: action, title, "data-action": action });
  if (action === "force-remove") b.className = "danger";
  b.addEventListener("click", () => confirmCommand(target, shard, action));
  return b;
}

function renderTarget(t) {
  const card = el("div", { class: "target " + t.stage, "data-target": t.target, "data-stage": t.stage });
  card.append(el("h3", {}, el("code", { text: t.target }),
    el("span", { class: "badge mode", text: t.mode }),
    el("span", { class: "badge " + t.stage, text: "stage " + t.stage }),
    el("span", { class: "hint", text: `${t.shards} shards` })));
  const r = t.rollout;
  const pct = r.total ? (100 * r.done) / r.total : 0;
  const bar = el("div", { class: "bar", "data-done": r.done, "data-total": r.total });
  const fill = el("div");
  fill.style.width = pct + "%";
  bar.append(fill);
  const label = (r.ddl ? r.ddl + ": " : "") + `${r.done} of ${r.total} shards ${r.of}`;
  card.append(el("div", { class: "rollout" }, el("div", { class: "label sql", text: label }), bar));
  if (t.conflict) card.append(el("div", { class: "conflict-text", text: "conflict: " + t.conflict }));
  card.append(renderPolicy(t));
  if (t.held.length) {
    const rows = t.held.map((h) => el("tr", { "data-shard": h.shard },
      el("td", {}, el("code", { text: h.shard })),
      el("td", {}, ...h.pending_ddl.map((s) => el("div", { class: "sql", text: s }))),
      el("td", { class: "num", text: fmt(h.held_rows) }),
      el("td", { text: h.since ? ago(h.since) : "–" }),
      el("td", { text: h.conflict || (h.ready ? "ran the lock's DDL" : "") }),
      el("td", {}, actionButton(t.target, h.shard, "skip", "the pending DDL never runs downstream; held rows replay"),
        actionButton(t.target, h.shard, "exec", "run the pending DDL downstream as written"),
        actionButton(t.target, h.shard, "replace", "run other statements instead"))));
    card.append(el("table", {}, el("thead", {}, el("tr", {}, ...["held shard", "pending DDL", "held rows", "since", "note", "actions"].map((x) => el("th", { text: x })))),
      el("tbody", {}, ...rows)));
  } else if (t.held_count && heldFilter) {
    card.append(el("p", { class: "empty", text: `no held shard's name contains "${heldFilter}" (${fmt(t.held_count)} held)` }));
  } else if (t.held_count) {
    card.append(el("p", { class: "empty", text: `no held shard on this page (${fmt(t.held_count)} held)` }));
  } else {
    card.append(el("p", { class: "empty", text: "no shard held" }));
  }
  const pages = t.held_count ? pager(t) : null;
  if (pages) card.append(pages);
  card.append(el("div", {}, actionButton(t.target, null, "retry", "run a refused downstream change again"),
    actionButton(t.target, null, "force-remove", "drop the lock: every held shard's pending DDL is skipped")));
  card.append(renderSchemas(t));
  return card;
}

// The target's schema-change policy (kinds whose word is not `forward`) and the latest DDLs
// it decided, with how many per kind and word since the checkpoint began.
function renderPolicy(t) {
  const words = Object.entries(t.policy || {});
  const box = el("div", { class: "policy", "data-policy": t.target });
  if (!words.length) {
    box.append(el("span", { class: "hint", text: "schema-change policy: forward for every kind" }));
    return box;
  }
  box.append(el("span", { text: "schema-change policy: " }),
    ...words.map(([kind, word]) => el("span", { class: "badge policy", "data-kind": kind, text: `${kind} ${word}` })));
  const counts = (t.policy_counts || []).map((c) => `${c.kind} ${c.policy}: ${c.count}`);
  if (counts.length) box.append(el("div", { class: "hint", text: "decided so far: " + counts.join(", ") }));
  const latest = (t.policy_decisions || []).slice(-5);
  if (latest.length) {
    box.append(el("ul", {}, ...latest.map((n) => el("li", { "data-policy-shard": n.shard },
      el("span", { text: `${n.kind} ${n.policy}: ` }), el("code", { text: n.shard }), el("span", { text: " " }),
      el("span", { class: "sql", text: n.sql })))));
  }
  return box;
}

const openSchemas = new Set(); // targets whose schema comparison is unfolded (kept across refreshes)

function renderSchemas(t) {
  const d = el("details", { "data-schemas": t.target }, el("summary", { text: `joined schema (${Object.keys(t.joined).length} columns) against each shard` }));
  d.open = openSchemas.has(t.target);
  d.addEventListener("toggle", () => { if (d.open) openSchemas.add(t.target); else openSchemas.delete(t.target); });
  d.append(el("table", { class: "compact" }, el("thead", {}, el("tr", {}, el("th", { text: "column" }), el("th", { text: "joined type" }))),
    el("tbody", {}, ...Object.entries(t.joined).map(([c, ty]) => el("tr", {}, el("td", {}, el("code", { text: c })), el("td", { class: "sql", text: ty }))))));
  const rows = t.shard_schemas.map((s) => {
    const diff = [];
    for (const c of s.missing) diff.push(el("div", { class: "missing", text: "lacks " + c }));
    for (const c of s.extra) diff.push(el("div", { class: "extra", text: "has " + c + " (not joined)" }));
    for (const c of s.retyped) diff.push(el("div", { class: "extra", text: `${c.column}: ${c.shard} (joined ${c.joined})` }));
    if (!diff.length) diff.push(el("span", { class: "same", text: "same as joined" }));
    return el("tr", { "data-schema-shard": s.shard }, el("td", {}, el("code", { text: s.shard })), el("td", { text: s.held ? "held" : "" }), el("td", {}, ...diff));
  });
  d.append(el("table", {}, el("thead", {}, el("tr", {}, el("th", { text: "shard" }), el("th", { text: "" }), el("th", { text: "difference from the joined schema" }))), el("tbody", {}, ...rows)));
  if (t.shard_schemas_count > t.shard_schemas.length) {
    d.append(el("p", { class: "more-held", text: `${fmt(t.shard_schemas_count - t.shard_schemas.length)} more shards not listed (those that differ come first)` }));
  }
  return d;
}

function renderLocks(locks) {
  const waiting = document.getElementById("commands-waiting");
  const items = locks.commands_waiting.map((w) => el("li", {}, el("code", { text: w })));
  waiting.replaceChildren(...(items.length ? [el("div", { class: "queued" }, "Commands waiting for the next micro-batch:", el("ul", {}, ...items))] : []));
  if (locks.stopped) waiting.append(el("p", { class: "conflict-text", text: `the job stopped in batch ${locks.stopped.batch}: ${locks.stopped.error}` }));
  const box = document.getElementById("targets");
  box.replaceChildren(...(locks.targets.length ? locks.targets.map(renderTarget) : [el("p", { class: "empty", text: "no target yet (no batch has run)" })]));
  const why = { before_create: "before its CREATE TABLE (not registered yet)", ahead_of_ddl: "ahead of a DDL not received", stashed: "in the stash, no lock" };
  const rows = locks.waiting.map((w) => el("tr", { "data-waiting": w.shard },
    el("td", {}, el("code", { text: w.target })), el("td", {}, el("code", { text: w.shard })),
    el("td", { title: w.reason, text: why[w.kind] || w.kind }), el("td", { class: "num", text: fmt(w.rows) }),
    el("td", { text: w.since ? ago(w.since) : "–" })));
  document.getElementById("waiting").replaceChildren(rows.length
    ? el("table", {}, el("thead", {}, el("tr", {}, ...["target", "shard", "why", "rows", "since"].map((x) => el("th", { text: x })))), el("tbody", {}, ...rows))
    : el("p", { class: "empty", text: "no shard waits without a lock" }));
}

function renderDead(dead) {
  const parts = Object.entries(dead.by_reason).map(([k, v]) => `${k}: ${v}`);
  document.getElementById("dead-summary").replaceChildren(
    el("p", { text: parts.length ? "by reason — " + parts.join(", ") : "no dead letter" }),
    ...(dead.error ? [el("p", { class: "conflict-text", text: "counting failed: " + dead.error })] : []));
  document.querySelector("#dead-table tbody").replaceChildren(...dead.latest.map((d) => el("tr", {},
    el("td", { text: d.seen_at || "" }), el("td", { text: d.topic }), el("td", { class: "num", text: d.partition }),
    el("td", { class: "num", text: d.offset }), el("td", { text: d.format }), el("td", { class: "sql", text: d.reason }))));
}

function renderGroup(group) {
  const summary = document.querySelector("#group-summary");
  const members = document.querySelector("#group-members tbody");
  const targets = document.querySelector("#group-targets tbody");
  if (group.group === null) {
    summary.replaceChildren(el("p", { class: "hint", text: "this job writes its targets alone (no coordination: in the settings)" }));
    members.replaceChildren();
    targets.replaceChildren();
    return;
  }
  const o = group.owner;
  summary.replaceChildren(el("p", { text: `group ${group.group}, lease ${group.lease_s} s, ${group.log} log records; owner: `
    + (o ? `${o.member} (term ${o.term})${o.live ? "" : " — DOWN, the next live member takes the term"}` : "no term yet") }));
  members.replaceChildren(...group.members.map((m) => el("tr", { "data-member": m.member },
    el("td", { text: m.member }), el("td", { class: "num", text: m.epoch ?? "—" }),
    el("td", {}, el("span", { class: "badge " + (m.live ? "member-live" : "member-down"), text: m.live ? "live" : "down" })),
    el("td", { class: "num", text: m.silent_s === null ? "—" : `${m.silent_s} s` }),
    el("td", { class: "num", text: m.ack ?? "—" }), el("td", { class: "num", text: m.batch ?? "—" }),
    el("td", { class: "sql", text: m.waiting || "—" }))));
  targets.replaceChildren(...group.targets.map((t) => el("tr", { "data-target": t.target },
    el("td", { text: t.target }), el("td", { class: "num", text: t.decided }),
    el("td", { class: "num" + (t.applied < t.decided ? " behind" : ""), text: t.applied }))));
}

function renderMoves(moves) {
  const rows = moves.moves.map((m) => el("tr", { "data-move": m.id },
    el("td", { text: m.id }), el("td", { text: m.from.join(", ") + (m.keys ? ` (keys: ${m.keys})` : "") }),
    el("td", { text: m.to }), el("td", {}, el("span", { class: "badge move-" + m.state, text: m.state })),
    el("td", { class: "sql", text: m.waits.join("\n") || "—" }),
    el("td", { class: "sql", text: [...m.queued.map((s) => "queued: " + s), ...m.deferred.map((s) => "deferred: " + s)].join("\n") || "—" })));
  document.querySelector("#moves-table tbody").replaceChildren(...(rows.length ? rows
    : [el("tr", {}, el("td", { colSpan: 6, class: "hint", text: "no move declared (moves: in the settings)" }))]));
}

// --- commands ----------------------------------------------------------------------

function confirmCommand(target, shard, action) {
  const dlg = document.getElementById("confirm");
  const sqlLabel = document.getElementById("confirm-sql-label");
  const boxes = document.getElementById("confirm-sql-boxes");
  // One statement per box, sent as it is: a statement pasted over several lines stays one.
  const addBox = () => boxes.append(el("textarea", { rows: "3", class: "confirm-sql" }));
  boxes.replaceChildren();
  addBox();
  document.getElementById("confirm-sql-add").onclick = addBox;
  document.getElementById("confirm-title").textContent = `${action} — ${target}`;
  const what = {
    skip: `Skip the pending DDL of ${shard}: it never runs downstream, and the shard's held rows replay without the columns the target lacks.`,
    exec: `Run the pending DDL of ${shard} downstream as written, then release the shard.`,
    replace: `Replace the pending DDL of ${shard} with the statements below (each an ALTER or TRUNCATE of its table).`,
    "force-remove": `Drop the lock of ${target}: every held shard's pending DDL is skipped.`,
    retry: `Run again the downstream change ${target} refused (after fixing the table by hand).`,
  }[action];
  document.getElementById("confirm-text").textContent = what + " The command is queued and applies at the next micro-batch.";
  sqlLabel.hidden = action !== "replace";
  dlg.onclose = async () => {
    if (dlg.returnValue !== "ok") return;
    const body = { target, action };
    if (shard) body.shard = shard;
    if (action === "replace") body.statements = [...boxes.querySelectorAll("textarea")].map((t) => t.value.trim()).filter(Boolean);
    const r = await fetch("/api/commands", { method: "POST", headers: headers({ "Content-Type": "application/json" }), body: JSON.stringify(body) });
    const answer = await r.json();
    setStatus(r.ok ? `queued: ${answer.words}` : `refused: ${answer.error}`, !r.ok);
    refresh();
  };
  dlg.returnValue = "";
  dlg.showModal();
}

function setStatus(text, bad) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.className = "status" + (bad ? " bad" : "");
}

async function refresh() {
  try {
    const [p, locks, dead, moves, group] = await Promise.all([getJSON("/api/progress"), getLocks(), getJSON("/api/dead-letters"), getJSON("/api/moves"), getJSON("/api/group")]);
    renderOverview(p, locks, dead);
    renderLocks(locks);
    renderMoves(moves);
    renderGroup(group);
    renderDead(dead);
    document.body.dataset.batch = locks.batch ?? "";
    if (!document.getElementById("status").textContent.startsWith("queued")) setStatus("updated " + new Date().toLocaleTimeString());
  } catch (e) {
    setStatus(String(e), true);
  }
}

// A browser may restore the box's text on reload: the page filters by what it shows.
heldFilter = document.getElementById("held-filter").value.trim();
document.getElementById("held-filter").addEventListener("input", (e) => {
  heldFilter = e.target.value.trim();
  for (const k of Object.keys(heldOffset)) delete heldOffset[k];
  refresh();
});

refresh();
setInterval(refresh, REFRESH_MS);
