// The fluxgo dashboard: hash-routed pages that call /ui/v1 (the /v1 API
// with the login cookie). Every value from the server is put in the
// page with textContent, never as HTML.
"use strict";

const main = document.getElementById("main");
const loginBox = document.getElementById("login");
let stopPage = () => {};

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(k == null ? "" : String(k)));
  return e;
}

async function api(path, opts) {
  const r = await fetch("/ui/v1" + path, Object.assign({ credentials: "same-origin", headers: { "X-Flux-UI": "1" } }, opts));
  if (r.status === 401) { showLogin(); throw new Error("not logged in"); }
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.Message || r.statusText);
  return body;
}

function showLogin() {
  stopPage();
  main.replaceChildren();
  loginBox.hidden = false;
}

document.getElementById("login-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const form = new URLSearchParams({ token: document.getElementById("token").value.trim() });
  const r = await fetch("/ui/login", { method: "POST", body: form, credentials: "same-origin" });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) { document.getElementById("login-error").textContent = body.Message || r.statusText; return; }
  document.getElementById("token").value = "";
  loginBox.hidden = true;
  if (location.hash === "" || location.hash === "#login") location.hash = "#jobs"; else route();
});

document.getElementById("logout").addEventListener("click", async () => {
  await fetch("/ui/logout", { method: "POST", credentials: "same-origin" });
  showLogin();
});

function fmtTime(t) { return t ? new Date(t * 1000).toLocaleString() : ""; }
function fmtDur(s) { s = Math.round(s || 0); return s < 60 ? s + "s" : s < 3600 ? Math.floor(s / 60) + "m" + (s % 60) + "s" : (s / 3600).toFixed(1) + "h"; }

// ---- jobs ----
// The jobs page lists the jobs once (GET /jobs with the table's
// attributes only) and then follows GET /jobs/events: each change is a
// job-list record that replaces the row's. Only one page of rows is in
// the DOM at a time.
const stateNames = { 1: "NEW", 2: "DEPEND", 4: "PRIORITY", 8: "SCHED", 16: "RUN", 32: "CLEANUP", 64: "INACTIVE" };
const resultNames = { 1: "COMPLETED", 2: "FAILED", 4: "CANCELED", 8: "TIMEOUT" };
const jobAttrs = "userid,name,queue,state,result,nnodes,urgency,priority,t_submit,t_depend,t_priority,t_sched,t_run,t_cleanup,t_inactive";
const tKeys = ["t_submit", "t_depend", "t_priority", "t_sched", "t_run", "t_cleanup", "t_inactive"];
const pageSize = 100;

function jState(j) { return stateNames[j.state] || String(j.state); }
function jResult(j) { return j.state === 64 ? resultNames[j.result] || "" : ""; }
function jRuntime(j) { return j.t_run ? Math.max((j.t_cleanup || Date.now() / 1000) - j.t_run, 0) : 0; }
// latest is when the record last changed state: a record from the
// stream replaces the row's unless it is older.
function latest(j) { let t = 0; for (const k of tKeys) if (j[k] > t) t = j[k]; return t; }
// Job IDs are 64-bit: they are kept as decimal strings (a JSON number
// past 2^53 would lose digits) and ordered by length, then text.
function quoteIDs(text) { return text.replace(/"id":(\d+)/g, '"id":"$1"'); }
function cmpID(a, b) { return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0); }

const jobCols = [
  ["id", "ID", (j) => j.id], ["user", "User", (j) => j.userid], ["name", "Name", (j) => j.name || ""],
  ["queue", "Queue", (j) => j.queue || "", "wide"], ["state", "State", jState], ["result", "Result", jResult, "wide"],
  ["nnodes", "Nodes", (j) => j.nnodes || "", "wide"], ["runtime", "Runtime", jRuntime], ["t_submit", "Submitted", (j) => j.t_submit, "wide"],
];
let jobSort = { key: "id", dir: -1 };

function pageJobs() {
  const fState = el("select", { id: "f-state" }, el("option", { value: "" }, "any state"),
    ...["DEPEND", "PRIORITY", "SCHED", "RUN", "CLEANUP", "INACTIVE"].map((s) => el("option", { value: s }, s)));
  const fUser = el("input", { id: "f-user", placeholder: "user" });
  const fName = el("input", { id: "f-name", placeholder: "name" });
  const head = el("tr", {}, ...jobCols.map(([k, t, , c]) => el("th", { class: c || "", "data-key": k, onclick: () => {
    jobSort = { key: k, dir: jobSort.key === k ? -jobSort.dir : 1 }; page = 0; refilter(); render();
  } }, t)));
  const body = el("tbody", { id: "jobs-body" });
  const status = el("span", { id: "jobs-status" });
  const prev = el("button", { type: "button", id: "jobs-prev", onclick: () => { page--; render(); } }, "‹ newer");
  const next = el("button", { type: "button", id: "jobs-next", onclick: () => { page++; render(); } }, "older ›");
  main.replaceChildren(el("h1", {}, "Jobs"), el("div", { class: "filters" }, fState, fUser, fName),
    el("p", { class: "pager" }, prev, status, next),
    el("div", { class: "scroll" }, el("table", { id: "jobs" }, el("thead", {}, head), body)));

  const jobs = new Map(); // id -> record
  let shown = [];         // the filtered jobs, sorted
  let page = 0, loaded = false, buffered = [], stopped = false, pollTimer = 0;

  function filtered() {
    const st = fState.value, u = fUser.value.toLowerCase(), n = fName.value.toLowerCase();
    return !st && !u && !n ? null : (j) => (!st || jState(j) === st) && (!u || String(j.userid).includes(u)) &&
      (!n || String(j.name || "").toLowerCase().includes(n));
  }
  function cmp(a, b) {
    if (jobSort.key === "id") return cmpID(a.id, b.id) * jobSort.dir;
    const f = jobCols.find((c) => c[0] === jobSort.key)[2];
    const x = f(a), y = f(b);
    return ((x < y ? -1 : x > y ? 1 : 0) || cmpID(a.id, b.id)) * jobSort.dir;
  }
  function refilter() {
    const keep = filtered();
    shown = [];
    for (const j of jobs.values()) if (!keep || keep(j)) shown.push(j);
    shown.sort(cmp);
  }
  // rows are kept per job while on the page and only their changed
  // cells are written, so a row's elements stay the same as it updates
  let rows = new Map();
  function fill(tr, j) {
    jobCols.forEach(([k, , f, c], i) => {
      let v = f(j);
      if (k === "runtime") v = fmtDur(v);
      else if (k === "t_submit") { if (j._submitted === undefined) j._submitted = fmtTime(v); v = j._submitted; }
      v = v == null ? "" : String(v);
      const td = tr.children[i];
      const cls = (c || "") + (k === "name" ? " name" : "") + (k === "state" ? " state s-" + jState(j) : "");
      if (td.className !== cls) td.className = cls;
      if (k === "id") { if (!td.firstChild) td.append(el("a", { href: "#job/" + j.id }, v)); }
      else if (td.textContent !== v) td.textContent = v;
    });
  }
  function render() {
    const pages = Math.max(1, Math.ceil(shown.length / pageSize));
    page = Math.min(Math.max(page, 0), pages - 1);
    const frag = document.createDocumentFragment();
    const kept = new Map();
    for (const j of shown.slice(page * pageSize, (page + 1) * pageSize)) {
      let tr = rows.get(j.id);
      if (!tr) {
        tr = document.createElement("tr");
        tr.dataset.id = j.id;
        for (let i = 0; i < jobCols.length; i++) tr.append(document.createElement("td"));
      }
      fill(tr, j);
      kept.set(j.id, tr);
      frag.append(tr);
    }
    rows = kept;
    // rows in the same order as before: only their cells changed
    const now = body.children;
    let same = now.length === frag.children.length;
    for (let i = 0; same && i < now.length; i++) same = now[i] === frag.children[i];
    if (!same) body.replaceChildren(frag);
    const from = shown.length ? page * pageSize + 1 : 0, to = Math.min((page + 1) * pageSize, shown.length);
    status.textContent = " " + from + "–" + to + " of " + shown.length + " shown, " + jobs.size + " jobs ";
    prev.disabled = page === 0;
    next.disabled = page >= pages - 1;
  }
  [fState, fUser, fName].forEach((e) => e.addEventListener("input", () => { page = 0; refilter(); render(); }));

  // apply takes records from the stream; with the default order and no
  // filter a new job is put in its place without sorting the rest
  function apply(recs) {
    let full = false;
    const simple = jobSort.key === "id" && !filtered();
    for (const r of recs) {
      const have = jobs.get(r.id);
      if (have && latest(r) < latest(have)) continue;
      const j = have ? Object.assign(have, r) : r;
      if (!have) {
        jobs.set(j.id, j);
        if (simple) {
          let lo = 0, hi = shown.length;
          while (lo < hi) { const m = (lo + hi) >> 1; if (cmp(shown[m], j) < 0) lo = m + 1; else hi = m; }
          shown.splice(lo, 0, j);
        } else full = true;
      } else if (!simple) full = true;
    }
    if (full) needSort = true;
    changed = true;
  }
  async function load() {
    const t0 = performance.now();
    try {
      const r = await fetch("/ui/v1/jobs?attrs=" + jobAttrs, { credentials: "same-origin" });
      if (r.status === 401) { showLogin(); return; }
      const text = await r.text();
      if (!r.ok) throw new Error((JSON.parse(text) || {}).Message || r.statusText);
      const t1 = performance.now();
      const list = JSON.parse(quoteIDs(text)).jobs;
      const t2 = performance.now();
      jobs.clear();
      for (const j of list) jobs.set(j.id, j);
      loaded = true;
      const b = buffered; buffered = [];
      for (const recs of b) for (const r of recs) { const have = jobs.get(r.id); if (!have || latest(r) >= latest(have)) jobs.set(r.id, have ? Object.assign(have, r) : r); }
      refilter();
      render();
      const t3 = performance.now();
      if (document.body.dataset.jobsLoaded === undefined) {
        Object.assign(document.body.dataset, { jobsFetch: String(t1 - t0), jobsParse: String(t2 - t1), jobsRender: String(t3 - t2), jobsStart: String(t0) });
        document.body.dataset.jobsLoaded = String(t3);
      }
    } catch (e) { status.textContent = e.message; }
  }
  // runtimes of running jobs on the page move on
  // the table is redrawn at most once a second: with the changes the
  // stream brought, or the runtimes of running jobs on the page
  let changed = false, needSort = false;
  const tick = setInterval(() => {
    if (needSort) { refilter(); needSort = false; changed = true; }
    if (changed || shown.slice(page * pageSize, (page + 1) * pageSize).some((j) => j.state === 16 || j.state === 32)) render();
    changed = false;
  }, 1000);

  const es = new EventSource("/ui/v1/jobs/events");
  es.addEventListener("ready", () => { loaded = false; buffered = []; load(); });
  es.addEventListener("reset", () => { loaded = false; buffered = []; load(); });
  es.addEventListener("jobs", (ev) => {
    const recs = JSON.parse(quoteIDs(ev.data));
    if (loaded) apply(recs); else buffered.push(recs);
  });
  es.onerror = () => {
    // no stream (a server that is not the instance's owner): list every 5 s
    if (es.readyState === EventSource.CLOSED && !stopped && !pollTimer) {
      const poll = async () => { await load(); if (!stopped) pollTimer = setTimeout(poll, 5000); };
      poll();
    }
  };
  return () => { stopped = true; es.close(); clearInterval(tick); clearTimeout(pollTimer); };
}

// ---- one job ----
function pageJob(id) {
  const info = el("dl", { id: "job-info" });
  const events = el("pre", { id: "job-eventlog" });
  const output = el("pre", { id: "job-output" });
  const msg = el("p", { id: "job-msg", class: "error" });
  const cancel = el("button", { id: "cancel", type: "button", onclick: async () => {
    try { const r = await api("/jobs/" + encodeURIComponent(id) + "/cancel", { method: "POST" }); msg.textContent = r.Message; } catch (e) { msg.textContent = e.message; }
  } }, "Cancel job");
  main.replaceChildren(el("h1", {}, "Job ", id), cancel, msg, info, el("h2", {}, "Eventlog"), events, el("h2", {}, "Output"), output);
  async function refresh() {
    try {
      const j = await api("/jobs/" + encodeURIComponent(id));
      info.replaceChildren(...["name", "username", "state", "result", "queue", "nodelist", "runtime"].flatMap((k) =>
        [el("dt", {}, k), el("dd", { "data-key": k }, k === "runtime" ? fmtDur(j[k]) : j[k])]));
      cancel.disabled = j.state === "INACTIVE";
      const o = await api("/jobs/" + encodeURIComponent(id) + "/output");
      output.textContent = (o.Output || []).join("");
    } catch (e) { msg.textContent = e.message; }
  }
  refresh();
  const es = new EventSource("/ui/v1/jobs/" + encodeURIComponent(id) + "/events");
  es.addEventListener("event", (ev) => {
    try {
      const e = JSON.parse(ev.data);
      events.append(fmtTime(e.timestamp) + " " + e.name + (e.context ? " " + JSON.stringify(e.context) : "") + "\n");
    } catch (err) { events.append(ev.data + "\n"); }
    refresh();
  });
  es.addEventListener("end", () => { es.close(); events.dataset.complete = "1"; refresh(); });
  es.onerror = () => { if (es.readyState === EventSource.CLOSED) msg.textContent = "the event stream ended"; };
  return () => es.close();
}

// ---- nodes ----
function pageNodes() {
  const grid = el("div", { class: "grid", id: "nodes" });
  const sum = el("p", { id: "nodes-summary" });
  main.replaceChildren(el("h1", {}, "Nodes"), sum, grid);
  let timer = 0;
  async function load() {
    try {
      const r = await api("/resources");
      grid.replaceChildren(...(r.nodes || []).map((n) => el("div", { class: "node " + n.state, "data-rank": n.rank },
        el("strong", {}, n.hostname), el("div", {}, "rank " + n.rank + " · " + n.state),
        el("div", {}, n.cores_allocated + "/" + n.cores + " cores" + (n.gpus ? " · " + n.gpus + " GPUs" : "")),
        el("div", {}, ...(n.jobs || []).map((j) => el("a", { href: "#job/" + j }, j + " "))))));
      const s = r.summary || {};
      sum.textContent = Object.entries(s).map(([k, v]) => k + ": " + v).join(" · ");
    } catch (e) { sum.textContent = e.message; }
    timer = setTimeout(load, 3000);
  }
  load();
  return () => clearTimeout(timer);
}

// ---- queues and reservations ----
function pageQueues() {
  const qt = el("tbody", { id: "queues" });
  const rt = el("tbody", { id: "reservations" });
  const msg = el("p", { class: "error" });
  main.replaceChildren(el("h1", {}, "Queues"), msg,
    el("div", { class: "scroll" }, el("table", {}, el("thead", {}, el("tr", {}, ...["Queue", "Enabled", "Started", "Pending", "Running"].map((t) => el("th", {}, t)))), qt)),
    el("h1", {}, "Reservations"),
    el("div", { class: "scroll" }, el("table", {}, el("thead", {}, el("tr", {}, ...["Reservation", "Details"].map((t) => el("th", {}, t)))), rt)));
  (async () => {
    try {
      const q = await api("/queues");
      qt.replaceChildren(...(q.queues || []).map((x) => el("tr", {}, el("td", {}, x.name + (x.default ? " (default)" : "")),
        el("td", {}, x.enabled ? "yes" : "no"), el("td", {}, x.started ? "yes" : "no"), el("td", {}, x.pending), el("td", {}, x.running))));
      const r = await api("/reservations");
      rt.replaceChildren(...(r.reservations || []).map((x) => el("tr", {}, el("td", {}, x.name || x.id || ""), el("td", {}, JSON.stringify(x)))));
      if (!(r.reservations || []).length) rt.append(el("tr", {}, el("td", { colspan: "2" }, "no reservations")));
    } catch (e) { msg.textContent = e.message; }
  })();
  return () => {};
}

// ---- usage ----
const usageColors = { allocated: "#1f6fd1", reserved: "#d68910", down: "#c0392b", idle: "#cfd6df" };
function pageUsage() {
  const bin = el("select", { id: "u-bin" }, el("option", { value: "hour" }, "per hour"), el("option", { value: "day" }, "per day"));
  const plot = el("div", { id: "usage-plot" });
  const tables = el("div", { id: "usage-tables" });
  const msg = el("p", { class: "error" });
  main.replaceChildren(el("h1", {}, "Usage"), el("div", { class: "filters" }, bin), msg, plot,
    el("div", { class: "legend" }, ...Object.entries(usageColors).map(([k, c]) => el("span", {}, el("i", { style: "background:" + c }), k))), tables);
  async function load() {
    try {
      const now = Math.floor(Date.now() / 1000);
      const since = now - (bin.value === "day" ? 14 * 86400 : 48 * 3600);
      const u = await api("/usage?bin=" + bin.value + "&since=" + since + "&until=" + now);
      plot.replaceChildren(stacked(u.bins || []));
      tables.replaceChildren(...[["by_user", "user"], ["by_bank", "bank"], ["by_project", "project"]].map(([k, f]) =>
        el("div", {}, el("h2", {}, "Node-hours by " + f), el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, f), el("th", {}, "node-hours"), el("th", {}, "jobs"))),
          el("tbody", {}, ...(u[k] || []).map((x) => el("tr", {}, el("td", {}, x[f]), el("td", {}, (x.node_hours || 0).toFixed(2)), el("td", {}, x.jobs))))))));
    } catch (e) { msg.textContent = e.message; }
  }
  bin.addEventListener("change", load);
  load();
  return () => {};
}

// stacked draws the bins' shares as stacked SVG bars (percent of node time).
function stacked(bins) {
  const ns = "http://www.w3.org/2000/svg", W = 800, H = 240, pad = 30;
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  svg.setAttribute("width", "100%");
  svg.setAttribute("id", "usage-svg");
  const bw = bins.length ? (W - pad) / bins.length : 0;
  bins.forEach((b, i) => {
    const total = (b.allocated + b.reserved + b.down + b.idle) || 1;
    let y = H - pad;
    for (const k of ["allocated", "reserved", "down", "idle"]) {
      const h = (b[k] / total) * (H - 2 * pad);
      const r = document.createElementNS(ns, "rect");
      r.setAttribute("x", pad + i * bw); r.setAttribute("y", y - h); r.setAttribute("width", Math.max(bw - 1, 1)); r.setAttribute("height", h);
      r.setAttribute("fill", usageColors[k]);
      const t = document.createElementNS(ns, "title");
      t.textContent = new Date(b.start * 1000).toLocaleString() + " " + k + " " + (100 * b[k] / total).toFixed(1) + "%";
      r.append(t); svg.append(r); y -= h;
    }
  });
  for (const p of [0, 50, 100]) {
    const t = document.createElementNS(ns, "text");
    t.setAttribute("x", 0); t.setAttribute("y", H - pad - (p / 100) * (H - 2 * pad) + 4); t.setAttribute("font-size", "11");
    t.textContent = p + "%"; svg.append(t);
  }
  return svg;
}

// ---- routing ----
function route() {
  stopPage();
  loginBox.hidden = true;
  const h = location.hash.replace(/^#/, "");
  if (h.startsWith("job/")) stopPage = pageJob(decodeURIComponent(h.slice(4)));
  else if (h === "nodes") stopPage = pageNodes();
  else if (h === "queues") stopPage = pageQueues();
  else if (h === "usage") stopPage = pageUsage();
  else stopPage = pageJobs();
}
window.addEventListener("hashchange", route);
route();
