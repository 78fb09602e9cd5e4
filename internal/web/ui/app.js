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
const jobCols = [
  ["id", "ID", (j) => j.id], ["user", "User", (j) => j.username || j.userid], ["name", "Name", (j) => j.name],
  ["queue", "Queue", (j) => j.queue || "", "wide"], ["state", "State", (j) => j.state], ["result", "Result", (j) => j.result, "wide"],
  ["nnodes", "Nodes", (j) => j.nnodes, "wide"], ["runtime", "Runtime", (j) => j.runtime], ["t_submit", "Submitted", (j) => j.t_submit, "wide"],
];
let jobSort = { key: "id", dir: -1 };

function pageJobs() {
  const fState = el("select", { id: "f-state" }, el("option", { value: "" }, "any state"),
    ...["DEPEND", "PRIORITY", "SCHED", "RUN", "CLEANUP", "INACTIVE"].map((s) => el("option", { value: s }, s)));
  const fUser = el("input", { id: "f-user", placeholder: "user" });
  const fName = el("input", { id: "f-name", placeholder: "name" });
  const head = el("tr", {}, ...jobCols.map(([k, t, , c]) => el("th", { class: c || "", "data-key": k, onclick: () => {
    jobSort = { key: k, dir: jobSort.key === k ? -jobSort.dir : 1 }; render();
  } }, t)));
  const body = el("tbody", { id: "jobs-body" });
  const status = el("p", { id: "jobs-status" });
  main.replaceChildren(el("h1", {}, "Jobs"), el("div", { class: "filters" }, fState, fUser, fName), status,
    el("div", { class: "scroll" }, el("table", { id: "jobs" }, el("thead", {}, head), body)));
  let jobs = [];
  const rows = new Map();
  function render() {
    const st = fState.value, u = fUser.value.toLowerCase(), n = fName.value.toLowerCase();
    const col = jobCols.find((c) => c[0] === jobSort.key);
    const shown = jobs.filter((j) => (!st || j.state === st) && (!u || String(j.username || j.userid).toLowerCase().includes(u)) &&
      (!n || String(j.name || "").toLowerCase().includes(n)));
    shown.sort((a, b) => { const x = col[2](a), y = col[2](b); return (x < y ? -1 : x > y ? 1 : 0) * jobSort.dir; });
    const frag = document.createDocumentFragment();
    for (const j of shown) {
      let tr = rows.get(j.id);
      if (!tr) { tr = el("tr", { "data-id": j.id }); rows.set(j.id, tr); }
      const cells = jobCols.map(([k, , f, c]) => {
        let v = f(j);
        if (k === "runtime") v = fmtDur(v); else if (k === "t_submit") v = fmtTime(v);
        const td = el("td", { class: (c || "") + (k === "name" ? " name" : "") + (k === "state" ? " state s-" + j.state : "") });
        if (k === "id") td.append(el("a", { href: "#job/" + j.id }, v)); else td.textContent = v == null ? "" : String(v);
        return td;
      });
      tr.replaceChildren(...cells);
      frag.append(tr);
    }
    body.replaceChildren(frag);
    status.textContent = shown.length + " of " + jobs.length + " jobs";
  }
  [fState, fUser, fName].forEach((e) => e.addEventListener("input", render));
  let timer = 0, stopped = false;
  async function load() {
    try {
      jobs = await api("/jobs?details=true&listing=true");
      render();
      document.body.dataset.jobsLoaded = String(performance.now());
    } catch (e) { status.textContent = e.message; }
    if (!stopped) timer = setTimeout(load, 1000);
  }
  load();
  return () => { stopped = true; clearTimeout(timer); };
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
