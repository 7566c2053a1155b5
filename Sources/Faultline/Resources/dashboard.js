"use strict";
// Faultline dashboard. Live against location.origin, or a static report when the page embeds
// #faultline-data. Journal data is attacker-controlled: the DOM is built with createElement and
// textContent only, never from markup strings.
(() => {
  const API = "/__faultline/";
  const SVGNS = "http://www.w3.org/2000/svg";
  const LANE_H = 38, AXIS_H = 42, LABEL_W = 250, MIN_BAR = 4, ROW_H = 27;

  // ---------------------------------------------------------------- DOM helpers
  function h(tag, props, ...kids) {
    const el = document.createElement(tag);
    if (props) setProps(el, props);
    for (const k of kids.flat()) if (k != null && k !== false) el.append(k instanceof Node ? k : String(k));
    return el;
  }
  function s(tag, props, ...kids) {
    const el = document.createElementNS(SVGNS, tag);
    if (props) setProps(el, props);
    for (const k of kids.flat()) if (k != null && k !== false) el.append(k instanceof Node ? k : String(k));
    return el;
  }
  function setProps(el, props) {
    for (const [k, v] of Object.entries(props)) {
      if (v == null || v === false) continue;
      if (k === "class") el.setAttribute("class", v);
      else if (k === "text") el.textContent = v;
      else if (k === "data") for (const [dk, dv] of Object.entries(v)) { if (dv != null) el.dataset[dk] = dv; }
      else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? "" : v);
    }
  }
  const clear = (el) => { while (el.firstChild) el.firstChild.remove(); return el; };
  const $ = (sel, root = document) => root.querySelector(sel);

  // ---------------------------------------------------------------- state
  const dataEl = document.getElementById("faultline-data");
  const S = {
    mode: dataEl ? "static" : "live",
    entries: new Map(), list: [], version: 0,
    health: null, report: null, state: null, scenarios: null, network: null, resources: null,
    generatedAt: null, server: dataEl ? "" : location.origin,
    status: dataEl ? "static" : "connecting", instance: null, cursor: null,
    originMs: null, wallOffset: null,
    highlight: new Set(), activeVerdict: null, grouping: "logical",
    view: null, autoFit: true, selectedSeq: null, rawJSON: false,
    filters: { route: "", status: "", outcome: "", protocol: "", text: "" },
  };

  // ---------------------------------------------------------------- entry helpers
  const isReq = (e) => e.kind === "request";
  const start = (e) => e.receivedAtMonotonicMs;
  function nowMono() {
    if (S.wallOffset == null) return S.list.length ? end(S.list[S.list.length - 1]) : 0;
    const wall = S.mode === "static" && S.generatedAt ? Date.parse(S.generatedAt) : Date.now();
    return wall - S.wallOffset;
  }
  function isPending(e) { return e.response && e.response.outcome === "pending"; }
  function dur(e) {
    const r = e.response || {};
    if (isPending(e) || r.durationMs == null) return Math.max(0, nowMono() - start(e));
    if (e.websocket) {
      // a session lasts past its upgrade: to its end, or its last frame
      const ws = e.websocket, frames = ws.frames || [];
      return Math.max(r.durationMs, ws.end && ws.end.atMs != null ? ws.end.atMs : 0, frames.length ? frames[frames.length - 1].atMs : 0);
    }
    return r.durationMs;
  }
  const end = (e) => start(e) + dur(e);
  const SLOW = /delay|drip|slow|stall|hang|trickle|latency/;
  function isSlow(e) { const f = (e.response && e.response.fault) || ""; return SLOW.test(f) || dur(e) >= 200; }
  // outcome → [class, glyph, word]
  function outcomeOf(e) {
    const r = e.response || {};
    const o = r.outcome || "completed";
    if (e.kind === "network") return ["other", "≋", "network"];
    if (o === "pending") return ["pending", "…", "pending"];
    if (o === "reset-sent" || o === "stream-reset") return ["reset", "✕", o === "reset-sent" ? "reset" : "stream reset"];
    if (o === "not-processed") return ["closed", "↺", "refused stream"];
    if (o === "client-closed") return ["closed", "⊘", "client closed"];
    if (o === "connection-closing") return ["closed", "⇥", "connection closing"];
    if (o === "cancelled" || o === "rejected" || o === "hang-released") return ["closed", "⊘", o];
    if (r.fault || o === "closed-by-fault" || o === "half-closed") return ["fault", "⚡", "fault"];
    if (r.status >= 400) return ["http-error", "!", String(r.status)];
    if (e.malformed) return ["fault", "!", "malformed"];
    return ["ok", "✓", "completed"];
  }
  const RANK = { ok: 0, other: 0, pending: 1, closed: 2, "http-error": 3, fault: 4, reset: 5 };
  function outcomeKey(e) { return (e.response && e.response.outcome) || "completed"; }
  const rel = (ms) => ms - (S.originMs || 0);
  function fmtRel(ms, decimals = 3) { const v = rel(ms) / 1000; return (v < 0 ? "−" : "+") + Math.abs(v).toFixed(decimals) + " s"; }
  function fmtAbs(ms) { return S.wallOffset == null ? "" : new Date(ms + S.wallOffset).toISOString(); }
  function fmtMs(ms) { if (ms == null) return "—"; if (ms >= 10000) return (ms / 1000).toFixed(1) + " s"; if (ms >= 1000) return (ms / 1000).toFixed(2) + " s"; return (ms < 10 ? ms.toFixed(1) : Math.round(ms)) + " ms"; }
  function connLabel(e) { return e.connection ? "conn " + e.connection.id + (e.stream != null ? " stream " + e.stream : "") : ""; }
  function summary(e) {
    if (e.kind === "network") return "#" + e.sequence + " " + e.requestLine;
    const r = e.response || {};
    const parts = ["#" + e.sequence + " " + (e.method ? e.method + " " + (e.target || "") : e.requestLine)];
    let head = parts[0] + (r.status != null ? " → " + r.status : "");
    const bits = [];
    if (r.fault) bits.push("fault " + r.fault);
    const oc = outcomeKey(e);
    if (oc !== "completed" || !r.fault) bits.push(oc);
    bits.push(isPending(e) ? "pending " + fmtMs(dur(e)) : fmtMs(r.durationMs));
    if (e.connection) bits.push(connLabel(e));
    if (e.kind === "connection" && e.error) bits.push(e.error);
    return head + " · " + bits.join(" · ");
  }
  function headerValue(e, name) {
    const n = name.toLowerCase();
    for (const [k, v] of e.headers || []) if (k.toLowerCase() === n) return v;
    return null;
  }

  // ---------------------------------------------------------------- data
  function setEntries(list) {
    S.entries = new Map();
    for (const e of list) S.entries.set(e.sequence, e);
    rebuildList();
  }
  function mergeEntries(list) {
    for (const e of list) S.entries.set(e.sequence, e);
    rebuildList();
    // the entry open in the detail changed (a pending one settled): show its new state
    if (ui.detail && ui.detail.open && list.some((e) => e.sequence === S.selectedSeq)) openDetail(S.selectedSeq, true);
  }
  function rebuildList() {
    S.list = [...S.entries.values()].sort((a, b) => a.sequence - b.sequence);
    S.version++;
    if (S.list.length && S.wallOffset == null) {
      const e = S.list[0];
      const wall = Date.parse(e.receivedAt);
      if (!Number.isNaN(wall)) S.wallOffset = wall - start(e);
    }
    computeOrigin();
  }
  function computeOrigin() {
    if (S.health && S.health.startedAtMonotonicMs != null) { S.originMs = S.health.startedAtMonotonicMs; return; }
    let min = null;
    for (const e of S.list) if (min == null || start(e) < min) min = start(e);
    S.originMs = min == null ? 0 : min;
  }

  async function api(path, opts = {}) {
    const res = await fetch(API + path, { headers: { Accept: "application/json" }, cache: "no-store", ...opts });
    if (!res.ok) { const err = new Error(path + ": HTTP " + res.status); err.status = res.status; throw err; }
    return res.json();
  }
  async function fullReload() {
    const [health, requests, report, state, scenarios, network, resources] = await Promise.all([
      api("health"), api("requests"), api("report"), api("state"), api("scenarios"), api("network"),
      api("resources").catch(() => null)]);
    Object.assign(S, { health, report, state, scenarios, network, resources });
    S.skipped = 0;
    if (health.instance) S.instance = health.instance;
    S.wallOffset = null;
    setEntries(requests.requests || []);
    render();
  }
  let refreshTimer = null, refreshState = false, lastRefresh = 0, refreshCost = 0;
  function scheduleRefresh(withState) {
    refreshState = refreshState || withState;
    if (refreshTimer) return;
    // at most ~3 a second, and less when the server takes long to judge a big journal
    const gap = Math.min(3000, Math.max(340, refreshCost * 2));
    const wait = Math.max(0, gap - (performance.now() - lastRefresh));
    refreshTimer = setTimeout(async () => {
      refreshTimer = null; lastRefresh = performance.now();
      const all = refreshState; refreshState = false;
      try {
        const jobs = [api("report"), api("state"), api("health")];
        if (all) jobs.push(api("scenarios"), api("network"), api("resources").catch(() => null));
        const [report, state, health, scenarios, network, resources] = await Promise.all(jobs);
        refreshCost = performance.now() - lastRefresh;
        Object.assign(S, { report, state, health });
        if (all) Object.assign(S, { scenarios, network, resources });
        computeOrigin();
        render();
      } catch (err) { /* the live loop reports connection trouble */ }
    }, wait);
  }

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  async function liveLoop() {
    let backoff = 500, events = null;
    for (;;) {
      if (events == null) {
        // The JSON index names every endpoint: ask it whether /events exists rather than meet a 404.
        try { const idx = await api(""); events = (idx.endpoints || []).some((x) => x.path === API + "events"); }
        catch (err) { setStatus("reconnecting"); await sleep(backoff); backoff = Math.min(backoff * 2, 5000); continue; }
      }
      try {
        if (!events) { await pollOnce(); backoff = 500; await sleep(1000); continue; }
        const q = S.cursor == null ? "events" : "events?cursor=" + encodeURIComponent(S.cursor) + "&timeoutMs=25000";
        let ans;
        try { ans = await api(q); }
        catch (err) { if (err.status === 404 || err.status === 405) { events = false; if (!S.health) await fullReload(); setStatus("live"); continue; } throw err; }
        const changedInstance = S.instance != null && ans.instance !== S.instance;
        if (ans.reset || changedInstance || S.cursor == null || !S.health) {
          await fullReload();
          S.instance = ans.instance;
        } else {
          // Under a load faster than the page, an answer carries the newest entries and counts the rest.
          if (ans.skipped) { S.skipped = (S.skipped || 0) + ans.skipped; renderHeader(); }
          if (ans.entries && ans.entries.length) { mergeEntries(ans.entries); render(); }
          if ((ans.entries && ans.entries.length) || ans.state) scheduleRefresh(!!ans.state);
        }
        S.cursor = ans.cursor;
        setStatus("live"); backoff = 500;
      } catch (err) {
        setStatus("reconnecting");
        S.cursor = null; events = null;
        await sleep(backoff); backoff = Math.min(backoff * 2, 5000);
      }
    }
  }
  // Without /events: re-read the journal since the last settled entry every second.
  let pollTick = 0;
  async function pollOnce() {
    const health = await api("health");
    const journal = health.journal || {};
    const restarted = S.health && (health.uptimeMs < S.health.uptimeMs || (health.instance && health.instance !== S.health.instance));
    const cleared = S.health && journal.retained < S.list.length && journal.evicted === (S.health.journal || {}).evicted;
    if (!S.health || restarted || cleared) { await fullReload(); setStatus("live"); return; }
    const prevRecorded = S.health.journal ? S.health.journal.totalRecorded : -1;
    S.health = health;
    let since = S.list.length ? S.list[S.list.length - 1].sequence : 0;
    for (const e of S.list) if (isPending(e)) { since = Math.min(since, e.sequence - 1); break; }
    let changed = journal.totalRecorded !== prevRecorded || S.list.some(isPending);
    if (changed) {
      const ans = await api("requests?since=" + since);
      if (ans.requests.length) { mergeEntries(ans.requests); render(); scheduleRefresh(false); }
    }
    if (++pollTick % 3 === 0) scheduleRefresh(true);
    setStatus("live");
  }
  function setStatus(st) { if (S.status !== st) { S.status = st; renderHeader(); } }

  // ---------------------------------------------------------------- layout
  const ui = {};
  function buildShell() {
    const app = clear(document.getElementById("app"));
    ui.status = h("span", { class: "status", role: "status", "aria-live": "polite" });
    ui.skipped = h("button", { type: "button", class: "skipped hidden", title: "Fetch the whole journal again",
      onclick: () => { fullReload().catch(() => {}); } });
    ui.counters = h("ul", { class: "counters", "aria-label": "Journal counters" });
    ui.summary = h("span", { class: "summary" });
    ui.version = h("span", { class: "muted" });
    ui.server = h("span", { class: "mono" });
    ui.theme = h("button", { type: "button", "aria-label": "Colour theme", onclick: cycleTheme });
    app.append(h("header", { class: "top" },
      h("h1", null, "Faultline"), ui.server, ui.version, ui.status, ui.skipped, ui.counters, ui.summary,
      h("span", { class: "spacer" }), ui.theme));
    const main = h("main");
    app.append(main);

    // verdicts
    ui.verdicts = h("ol", { class: "verdicts", "aria-label": "Verdicts, failing first" });
    ui.clearHl = h("button", { type: "button", class: "hidden", onclick: () => setHighlight(null) }, "Clear highlight");
    ui.hlInfo = h("span", { class: "muted" });
    main.append(h("section", { class: "panel", id: "verdicts", "aria-labelledby": "h-verdicts" },
      h("h2", { id: "h-verdicts" }, "Verdicts", h("span", { class: "tools" }, ui.hlInfo, ui.clearHl)), ui.verdicts));

    // timeline
    ui.groupLogical = h("button", { type: "button", "aria-pressed": "true", onclick: () => setGrouping("logical") }, "By logical request");
    ui.groupConn = h("button", { type: "button", "aria-pressed": "false", onclick: () => setGrouping("connection") }, "By connection");
    const zoomOut = h("button", { type: "button", "aria-label": "Zoom out", title: "Zoom out (−)", onclick: () => zoom(1.6) }, "−");
    const zoomIn = h("button", { type: "button", "aria-label": "Zoom in", title: "Zoom in (+)", onclick: () => zoom(1 / 1.6) }, "+");
    const fit = h("button", { type: "button", title: "Fit everything (0)", onclick: () => { S.autoFit = true; fitView(); renderTimeline(); } }, "Fit");
    ui.range = h("span", { class: "muted mono" });
    ui.axis = s("svg", { class: "axis", height: AXIS_H, "aria-hidden": "true" });
    ui.lanesSvg = s("svg", { class: "lanes grab", role: "img", "aria-label": "Exchanges over time" });
    ui.lanesSpacer = h("div");
    ui.lanesScroll = h("div", { class: "lanes-scroll" }, ui.lanesSvg, ui.lanesSpacer);
    ui.timelineEmpty = h("div", { class: "timeline-empty hidden" }, "No exchanges yet.");
    ui.tlStatus = h("div", { class: "tl-status", "aria-live": "polite" }, "Hover a bar for its summary, click it for the detail. Keys: + − zoom, ← → pan, 0 fit, [ ] step through entries, Enter opens. Ctrl+wheel zooms, drag pans.");
    ui.timeline = h("div", { class: "timeline", tabindex: "0", role: "group",
      "aria-label": "Timeline. Plus and minus zoom, arrow keys pan, 0 fits, [ and ] step through entries, Enter opens the selected one." },
    ui.axis, ui.lanesScroll, ui.timelineEmpty);
    ui.tooltip = h("div", { class: "tooltip hidden", role: "tooltip" });
    main.append(h("section", { class: "panel", id: "timeline", "aria-labelledby": "h-timeline" },
      h("h2", { id: "h-timeline" }, "Timeline",
        h("span", { class: "tools", role: "group", "aria-label": "Grouping" }, ui.groupLogical, ui.groupConn),
        h("span", { class: "tools", role: "group", "aria-label": "Zoom" }, zoomOut, zoomIn, fit, ui.range)),
      legend(), ui.timeline, ui.tlStatus));
    document.body.append(ui.tooltip);
    wireTimeline();

    // journal
    ui.fRoute = h("select", { "aria-label": "Route filter", onchange: (ev) => setFilter("route", ev.target.value) });
    ui.fStatus = h("input", { class: "status", type: "text", placeholder: "5xx", "aria-label": "Status filter (e.g. 503 or 5xx)", oninput: (ev) => setFilter("status", ev.target.value.trim()) });
    ui.fOutcome = h("select", { "aria-label": "Outcome filter", onchange: (ev) => setFilter("outcome", ev.target.value) });
    ui.fProto = h("select", { "aria-label": "Protocol filter", onchange: (ev) => setFilter("protocol", ev.target.value) });
    ui.fText = h("input", { type: "search", placeholder: "request line, headers, notes", "aria-label": "Search", oninput: (ev) => setFilter("text", ev.target.value) });
    ui.tableCount = h("span", { class: "muted" });
    ui.tbody = h("tbody");
    const cols = [["#", "5%"], ["time", "8%"], ["request", "29%"], ["status", "6%"], ["outcome", "13%"], ["fault", "10%"], ["protocol", "7%"], ["conn", "9%"], ["duration", "7%"], ["route", "6%"]];
    ui.table = h("table", { class: "journal", role: "grid", "aria-readonly": "true", "aria-label": "Journal, newest first" },
      h("colgroup", null, cols.map(([, w]) => { const c = h("col"); c.style.width = w; return c; })),
      h("thead", null, h("tr", null, cols.map(([n]) => h("th", { scope: "col" }, n)))), ui.tbody);
    ui.tableWrap = h("div", { class: "table-wrap", tabindex: "0", "aria-label": "Journal table: arrow keys move, Enter opens" }, ui.table);
    main.append(h("section", { class: "panel", id: "journal", "aria-labelledby": "h-journal" },
      h("h2", { id: "h-journal" }, "Journal", ui.tableCount),
      h("div", { class: "filters" },
        h("label", null, "Route ", ui.fRoute), h("label", null, "Status ", ui.fStatus),
        h("label", null, "Outcome ", ui.fOutcome), h("label", null, "Protocol ", ui.fProto),
        h("label", null, "Search ", ui.fText)),
      ui.tableWrap));
    wireTable();

    // state
    ui.stateBody = h("div", { class: "state-grid" });
    ui.actions = h("div", { class: "actions" });
    main.append(h("section", { class: "panel", id: "state", "aria-labelledby": "h-state" },
      h("h2", { id: "h-state" }, "State"), ui.actions, ui.stateBody));
    if (S.mode === "live") buildActions(); else ui.actions.classList.add("hidden");

    // detail + confirm dialogs
    ui.detailTitle = h("h2", { id: "detail-title" });
    ui.detailBody = h("div", { class: "detail-body" });
    ui.rawToggle = h("button", { type: "button", "aria-pressed": "false", onclick: () => { S.rawJSON = !S.rawJSON; openDetail(S.selectedSeq); } }, "Raw JSON");
    ui.detail = h("dialog", { class: "detail", "aria-labelledby": "detail-title" },
      h("div", { class: "detail-head" }, ui.detailTitle, ui.rawToggle,
        h("button", { type: "button", "aria-label": "Close detail", onclick: () => ui.detail.close() }, "Close ✕")),
      ui.detailBody);
    ui.detail.addEventListener("close", () => { if (ui.returnFocus && ui.returnFocus.isConnected) ui.returnFocus.focus(); });
    ui.confirmText = h("p");
    ui.confirmOk = h("button", { type: "button", value: "ok" }, "Confirm");
    ui.confirm = h("dialog", { class: "confirm", "aria-labelledby": "confirm-title" },
      h("h2", { id: "confirm-title" }, "Are you sure?"), ui.confirmText,
      h("div", { class: "buttons" }, h("button", { type: "button", onclick: () => ui.confirm.close("cancel") }, "Cancel"), ui.confirmOk));
    ui.confirmOk.addEventListener("click", () => ui.confirm.close("ok"));
    document.body.append(ui.detail, ui.confirm);
    applyTheme();
  }

  function legend() {
    const items = [["ok", "✓ completed"], ["http-error", "! 4xx/5xx"], ["fault", "⚡ fault"], ["reset", "✕ reset"],
      ["closed", "⊘ closed / refused"], ["pending", "… pending"]];
    const el = h("div", { class: "legend", "aria-label": "Legend" });
    for (const [cls, word] of items) {
      const sw = s("svg", { width: 16, height: 10, "aria-hidden": "true" }, s("g", { class: "bar " + cls }, s("rect", { class: "body", width: 16, height: 10, rx: 2 })));
      el.append(h("span", null, sw, word));
    }
    el.append(h("span", null, legendSwatch("hatch"), "hatched: slow (≥ 200 ms) or delay/drip fault"));
    el.append(h("span", null, legendSwatch("window"), "Retry-After window (a retry inside it is early)"));
    el.append(h("span", null, legendSwatch("band"), "network change"));
    el.append(h("span", null, "◆ connection event"));
    return el;
  }
  function legendSwatch(kind) {
    const svg = s("svg", { width: 16, height: 10, "aria-hidden": "true" });
    if (kind === "hatch") svg.append(hatchDefs("fl-hatch-legend"), s("g", { class: "bar ok" }, s("rect", { class: "body", width: 16, height: 10, rx: 2 })), s("rect", { width: 16, height: 10, fill: "url(#fl-hatch-legend)" }));
    if (kind === "window") svg.append(s("rect", { class: "retry-after-window legend-only", width: 16, height: 10 }));
    if (kind === "band") svg.append(s("rect", { class: "net-band", width: 16, height: 10 }));
    return svg;
  }
  function hatchDefs(id) {
    return s("defs", null, s("pattern", { id, width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" },
      s("rect", { width: 2.5, height: 6, fill: "rgba(255,255,255,0.55)" })));
  }

  // ---------------------------------------------------------------- theme
  // data-theme is always light or dark: the toggle's choice, or else the system's (prefers-color-scheme).
  const darkQuery = matchMedia("(prefers-color-scheme: dark)");
  let themeChoice = "auto";
  function applyTheme() {
    try { themeChoice = localStorage.getItem("faultline-theme") || "auto"; } catch (e) { /* file:// may forbid it */ }
    showTheme();
    darkQuery.addEventListener("change", showTheme);
  }
  function showTheme() {
    const t = themeChoice === "light" || themeChoice === "dark" ? themeChoice : darkQuery.matches ? "dark" : "light";
    document.documentElement.dataset.theme = t;
    ui.theme.textContent = "Theme: " + themeChoice;
    ui.theme.setAttribute("aria-label", "Colour theme: " + themeChoice + (themeChoice === "auto" ? " (" + t + ")" : "") + ". Click to change.");
  }
  function cycleTheme() {
    themeChoice = themeChoice === "auto" ? "light" : themeChoice === "light" ? "dark" : "auto";
    try { if (themeChoice === "auto") localStorage.removeItem("faultline-theme"); else localStorage.setItem("faultline-theme", themeChoice); } catch (e) { /* ignore */ }
    showTheme();
  }

  // ---------------------------------------------------------------- render
  let renderQueued = false;
  function render() {
    if (renderQueued) return;
    renderQueued = true;
    requestAnimationFrame(() => {
      renderQueued = false;
      renderHeader(); renderVerdicts(); invalidateLanes(); if (S.autoFit) fitView(); renderTimeline();
      renderTable(true); renderState();
    });
  }

  function renderHeader() {
    if (!ui.status) return;
    ui.server.textContent = S.server || "";
    ui.version.textContent = S.health ? "v" + S.health.version : "";
    ui.status.className = "status " + S.status;
    ui.status.textContent = S.status === "live" ? "● live" : S.status === "reconnecting" ? "◌ reconnecting…" :
      S.status === "static" ? "report generated at " + (S.generatedAt || "?").replace("T", " ").replace(/\.\d+Z$/, "Z") : "connecting…";
    ui.skipped.classList.toggle("hidden", !S.skipped);
    ui.skipped.textContent = S.skipped ? S.skipped + " not shown live (too fast) · load all" : "";
    let faults = 0, unmatched = 0, malformed = 0, reqs = 0;
    for (const e of S.list) {
      if (!isReq(e)) continue;
      reqs++;
      if (e.response && (e.response.fault || ["reset-sent", "closed-by-fault", "half-closed", "stream-reset"].includes(e.response.outcome))) faults++;
      if (!e.matched) unmatched++;
      if (e.malformed) malformed++;
    }
    clear(ui.counters).append(...[["requests", reqs], ["faults", faults], ["unmatched", unmatched], ["malformed", malformed]]
      .map(([k, v]) => h("li", { data: { counter: k } }, h("b", null, String(v)), " " + k)));
    const r = S.report;
    if (r) {
      const vs = r.verdicts || [];
      const n = (o) => vs.filter((v) => v.outcome === o).length;
      ui.summary.textContent = (r.outcome === "fail" ? "✕ FAIL" : r.outcome === "pass" ? "✓ PASS" : "? " + (r.outcome || "").toUpperCase()) +
        " — " + n("fail") + " failing, " + n("inconclusive") + " inconclusive, " + n("pass") + " passing";
      ui.summary.className = "summary " + (r.outcome || "");
    }
  }

  const ORDER = { fail: 0, inconclusive: 1, pass: 2 };
  function sortedVerdicts() {
    const vs = ((S.report && S.report.verdicts) || []).slice();
    return vs.map((v, i) => [v, i]).sort((a, b) => (ORDER[a[0].outcome] ?? 3) - (ORDER[b[0].outcome] ?? 3) || a[1] - b[1]).map((x) => x[0]);
  }
  function renderVerdicts() {
    const list = clear(ui.verdicts);
    const vs = sortedVerdicts();
    if (!vs.length) { list.append(h("li", { class: "muted" }, "No expectations judged yet.")); return; }
    const failing = vs.filter((v) => v.outcome === "fail").length;
    const limit = S.showAllVerdicts ? vs.length : Math.max(failing + 2, 4);
    for (const v of vs.slice(0, limit)) {
      const icon = v.outcome === "fail" ? "✕" : v.outcome === "pass" ? "✓" : "?";
      const key = v.scenario + "/" + v.rule;
      const ev = h("span", { class: "evidence", "aria-label": "Evidence" });
      const evAll = v.evidence || [];
      for (const seq of evAll.slice(0, 12)) {
        ev.append(h("a", { href: "#entry-" + seq, data: { seq }, "aria-label": "Highlight entry " + seq,
          onclick: (e) => { e.preventDefault(); e.stopPropagation(); setHighlight([seq], key + "#" + seq); } }, "#" + seq));
      }
      if (evAll.length > 12) ev.append(h("span", { class: "muted" }, "+" + (evAll.length - 12) + " more"));
      const li = h("li", { class: v.outcome, tabindex: "0", role: "button", data: { verdict: key, outcome: v.outcome },
        "aria-label": v.outcome + ": " + key + ". " + v.explanation + ". Press Enter to highlight its evidence.",
        onclick: () => setHighlight(v.evidence || [], key),
        onkeydown: (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); setHighlight(v.evidence || [], key); } } },
      h("span", { class: "outcome-word" }, icon + " " + v.outcome),
      h("span", { class: "mono" }, v.scenario + " / " + v.rule),
      h("span", null, v.explanation),
      ev);
      if (S.activeVerdict && (S.activeVerdict === key || S.activeVerdict.startsWith(key + "#"))) li.classList.add("active");
      list.append(li);
    }
    if (vs.length > limit || S.showAllVerdicts) {
      const rest = vs.slice(limit);
      const n = (o) => rest.filter((v) => v.outcome === o).length;
      list.append(h("li", { class: "verdict-more" }, h("button", { type: "button", "aria-expanded": String(!!S.showAllVerdicts),
        onclick: () => { S.showAllVerdicts = !S.showAllVerdicts; renderVerdicts(); } },
      S.showAllVerdicts ? "Show fewer" : "Show " + rest.length + " more (" + n("inconclusive") + " inconclusive, " + n("pass") + " passing)")));
    }
  }

  function setHighlight(seqs, key) {
    S.highlight = new Set(seqs || []);
    S.activeVerdict = seqs ? key : null;
    ui.clearHl.classList.toggle("hidden", !seqs);
    ui.hlInfo.textContent = seqs ? "highlighting " + (seqs.length ? seqs.map((x) => "#" + x).join(" ") : "nothing (no evidence)") : "";
    renderVerdicts();
    if (seqs && seqs.length) focusOnEntries(seqs);
    renderTimeline(); renderTable(false);
  }

  // Zoom and scroll the timeline so that `seqs` (and their Retry-After windows) are in view.
  function focusOnEntries(seqs) {
    const es = seqs.map((q) => S.entries.get(q)).filter(Boolean);
    if (!es.length) return;
    const e0 = Math.min(...es.map(start)), e1 = Math.max(...es.map(end));
    let t0 = e0, t1 = e1;
    for (const w of retryWindows()) if (seqs.includes(w.advertised) || seqs.includes(w.retry)) { t0 = Math.min(t0, w.start); t1 = Math.max(t1, w.end); }
    S.autoFit = false;
    const espan = Math.max(e1 - e0, 2);
    if (t1 - t0 > espan * 12) {
      // the windows dwarf the entries (an early retry): zoom on the entries, the window runs on to the right
      S.view = { t0: e0 - espan * 0.35, t1: e1 + espan * 1.6 };
    } else {
      const span = Math.max(t1 - t0, 20);
      S.view = { t0: t0 - span * 0.08, t1: t1 + span * 0.12 };
    }
    const lanes = getLanes();
    const idx = lanes.findIndex((l) => l.items.some((e) => seqs.includes(e.sequence)));
    if (idx >= 0) {
      const top = idx * LANE_H, sc = ui.lanesScroll;
      if (top < sc.scrollTop || top + LANE_H > sc.scrollTop + sc.clientHeight) sc.scrollTop = Math.max(0, top - LANE_H);
    }
    if (ui.timeline.getBoundingClientRect().top < 0 || ui.timeline.getBoundingClientRect().top > innerHeight) ui.timeline.scrollIntoView({ block: "nearest" });
  }

  // ---------------------------------------------------------------- lanes
  let lanesCache = null, lanesKey = "";
  function invalidateLanes() { lanesCache = null; }
  function logicalChains() {
    if (S.report && Array.isArray(S.report.logicalRequests)) return S.report.logicalRequests;
    // Fallback: chains from the Retry-After observations (advertised → retry).
    const parent = new Map();
    const find = (x) => { while (parent.has(x) && parent.get(x) !== x) x = parent.get(x); return x; };
    const obs = (S.state && S.state.retryAfter && S.state.retryAfter.observations) || [];
    for (const o of obs) {
      if (o.retrySequence == null) continue;
      if (!parent.has(o.advertisedSequence)) parent.set(o.advertisedSequence, o.advertisedSequence);
      if (!parent.has(o.retrySequence)) parent.set(o.retrySequence, o.retrySequence);
      parent.set(find(o.retrySequence), find(o.advertisedSequence));
    }
    const groups = new Map();
    for (const q of parent.keys()) { const r = find(q); if (!groups.has(r)) groups.set(r, []); groups.get(r).push(q); }
    const chains = [];
    for (const attempts of groups.values()) {
      attempts.sort((a, b) => a - b);
      const first = S.entries.get(attempts[0]);
      chains.push({ scenario: first ? first.scenario : null, label: first ? first.method + " " + first.target : "#" + attempts[0], attempts });
    }
    return chains;
  }
  function getLanes() {
    const key = S.version + "/" + S.grouping + "/" + (S.report ? S.report.requests : "") + "/" + (S.state ? 1 : 0);
    if (lanesCache && lanesKey === key) return lanesCache;
    lanesKey = key;
    const lanes = [];
    const byKey = new Map();
    const lane = (k, label, kind, sort) => {
      let l = byKey.get(k);
      if (!l) { l = { key: k, label, kind, items: [], marks: [], frames: [], sort }; byKey.set(k, l); lanes.push(l); }
      return l;
    };
    if (S.grouping === "logical") {
      const taken = new Set();
      // One row per logical request (scenario and label), holding every chain of it: a first attempt and its
      // retries each, so a journal of thousands of requests to a few endpoints stays a few rows.
      for (const c of logicalChains()) {
        const items = (c.attempts || []).map((q) => S.entries.get(q)).filter(Boolean);
        if (!items.length) continue;
        const l = lane("logical:" + (c.scenario || "") + "\u0000" + c.label, c.label, "logical");
        l.base = c.label;
        l.items.push(...items);
        l.requests = (l.requests || 0) + 1;
        l.retries = (l.retries || 0) + items.length - 1;
        for (const q of c.attempts) taken.add(q);
      }
      for (const l of lanes) {
        if (l.base === undefined) continue;
        const parts = [];
        if (l.requests > 1) parts.push(l.requests + " requests");
        if (l.retries > 0) parts.push(l.requests > 1 ? l.retries + (l.retries > 1 ? " retries" : " retry") : (l.retries + 1) + " attempts");
        l.label = l.base + (parts.length ? "  · " + parts.join(", ") : "");
      }
      for (const e of S.list) {
        if (taken.has(e.sequence) || e.kind === "network") continue;
        if (e.kind === "connection" || !e.method) lane("conn-events", "connection events", "connection").marks.push(e);
        else lane("mp:" + e.method + " " + e.path, e.method + " " + e.path, "logical").items.push(e);
      }
    } else {
      for (const e of S.list) {
        if (e.kind === "network") continue;
        const id = e.connection ? e.connection.id : 0;
        if (e.kind === "connection") { lane("c:" + id, "conn " + id, "connection").marks.push(e); continue; }
        if (e.protocol === "websocket" || e.websocket) {
          const l = lane("ws:" + id + ":" + e.sequence, "conn " + id + " · websocket", "websocket");
          l.items.push(e); continue;
        }
        if (e.stream != null) lane("s:" + id + ":" + e.stream, "conn " + id + " · stream " + e.stream, "stream").items.push(e);
        else lane("c:" + id, "conn " + id, "connection").items.push(e);
      }
    }
    for (const l of lanes) {
      l.items.sort((a, b) => start(a) - start(b));
      l.first = Math.min(...l.items.map(start), ...l.marks.map(start));
      l.maxDur = l.items.reduce((m, e) => Math.max(m, dur(e)), 0);
    }
    lanes.sort((a, b) => a.first - b.first);
    lanes.forEach((l, i) => { l.index = i; });
    const bySeq = new Map();
    for (const l of lanes) for (const e of l.items) bySeq.set(e.sequence, l);
    lanesCache = lanes; lanes.bySeq = bySeq;
    return lanes;
  }
  function retryWindows() {
    const ra = S.state && S.state.retryAfter;
    if (!ra) return [];
    const out = [];
    const add = (o, pending) => {
      const adv = S.entries.get(o.advertisedSequence);
      if (o.windowStartMs == null && !adv) return;
      const st = o.windowStartMs != null ? o.windowStartMs : end(adv);
      const wait = o.advertisedWaitMs != null ? o.advertisedWaitMs : 0;
      const en = o.windowEndMs != null ? o.windowEndMs : st + wait;
      out.push({ advertised: o.advertisedSequence, retry: pending ? null : o.retrySequence, start: st, end: en, wait,
        early: !pending && o.honoured === false, earlyBy: o.earlyByMs, pending });
    };
    for (const o of ra.observations || []) add(o, false);
    for (const o of ra.pending || []) add(o, true);
    return out;
  }
  function networkBands() {
    const nets = S.list.filter((e) => e.kind === "network");
    const bands = [];
    let open = null;
    for (const e of nets) {
      const n = e.network || {};
      if (open) { open.end = start(e); bands.push(open); open = null; }
      const parts = [];
      if (n.listener && n.listener !== "up") parts.push("listener " + n.listener);
      if (n.conditions) parts.push(typeof n.conditions === "string" ? n.conditions : (n.conditions.preset || n.conditions.name || "conditions"));
      if (n.connections && n.connections !== "thaw") parts.push(typeof n.connections === "string" ? "connections " + n.connections : "freeze");
      if (n.freezeMs) parts.push("freeze " + n.freezeMs + " ms");
      const label = (n.outage ? "outage: " : "") + (parts.join(", ") || "network restored");
      if (parts.length) open = { seq: e.sequence, start: start(e), end: null, label, outage: !!n.outage };
      else bands.push({ seq: e.sequence, start: start(e), end: start(e), label, restore: true });
    }
    if (open) { open.end = nowMono(); open.open = true; bands.push(open); }
    return bands;
  }

  // ---------------------------------------------------------------- timeline view
  function dataExtent() {
    let t0 = Infinity, t1 = -Infinity;
    for (const e of S.list) { t0 = Math.min(t0, start(e)); t1 = Math.max(t1, end(e)); }
    for (const w of retryWindows()) { t0 = Math.min(t0, w.start); t1 = Math.max(t1, w.end); }
    if (!Number.isFinite(t0)) return null;
    return { t0, t1 };
  }
  function fitView() {
    const x = dataExtent();
    if (!x) { S.view = null; return; }
    const span = Math.max(x.t1 - x.t0, 50);
    S.view = { t0: x.t0 - span * 0.03, t1: x.t0 + span * 1.06 };
  }
  function plotWidth() { return Math.max(200, (ui.lanesScroll.clientWidth || ui.timeline.clientWidth) - LABEL_W - 2); }
  function zoom(factor, anchorX) {
    if (!S.view) return;
    S.autoFit = false;
    const { t0, t1 } = S.view;
    const span = t1 - t0;
    const frac = anchorX == null ? 0.5 : Math.min(1, Math.max(0, (anchorX - LABEL_W) / plotWidth()));
    const at = t0 + span * frac;
    const ns = Math.min(Math.max(span * factor, 0.05), 1e9);
    S.view = { t0: at - ns * frac, t1: at - ns * frac + ns };
    renderTimeline();
  }
  function pan(fraction) {
    if (!S.view) return;
    S.autoFit = false;
    const d = (S.view.t1 - S.view.t0) * fraction;
    S.view = { t0: S.view.t0 + d, t1: S.view.t1 + d };
    renderTimeline();
  }
  function setGrouping(g) {
    S.grouping = g;
    ui.groupLogical.setAttribute("aria-pressed", String(g === "logical"));
    ui.groupConn.setAttribute("aria-pressed", String(g === "connection"));
    invalidateLanes(); ui.lanesScroll.scrollTop = 0; renderTimeline();
  }
  function niceStep(span, px) {
    const target = span / Math.max(1, px / 110);
    const p = Math.pow(10, Math.floor(Math.log10(target)));
    for (const m of [1, 2, 5, 10]) if (p * m >= target) return p * m;
    return p * 10;
  }

  let tlQueued = false;
  function renderTimeline() {
    if (tlQueued) return;
    tlQueued = true;
    requestAnimationFrame(() => { tlQueued = false; drawTimeline(); });
  }
  function drawTimeline() {
    const lanes = getLanes();
    const W = ui.lanesScroll.clientWidth || ui.timeline.clientWidth || 1000;
    const pw = plotWidth();
    const empty = !S.view || (!lanes.length && !S.list.length);
    ui.timelineEmpty.classList.toggle("hidden", !empty);
    clear(ui.axis); clear(ui.lanesSvg);
    ui.axis.setAttribute("width", W); ui.lanesSvg.setAttribute("width", W);
    if (empty) { ui.lanesSvg.setAttribute("height", 0); ui.range.textContent = ""; return; }
    const { t0, t1 } = S.view;
    const k = pw / (t1 - t0);
    const X = (t) => LABEL_W + (t - t0) * k;
    ui.range.textContent = fmtRel(t0, 2) + " … " + fmtRel(t1, 2);

    // vertical virtualisation
    const total = lanes.length * LANE_H;
    const viewH = Math.min(total, 460);
    ui.lanesSvg.setAttribute("height", Math.max(viewH, 1));
    ui.lanesSpacer.style.height = Math.max(0, total - viewH) + "px";
    const scrollTop = Math.min(ui.lanesScroll.scrollTop, Math.max(0, total - viewH));
    const firstLane = Math.floor(scrollTop / LANE_H), lastLane = Math.min(lanes.length - 1, Math.ceil((scrollTop + viewH) / LANE_H));

    // axis: ticks, network labels
    const ax = ui.axis;
    ax.append(s("rect", { class: "axis-bg", x: 0, y: 0, width: W, height: AXIS_H }));
    const step = niceStep(t1 - t0, pw);
    const dec = Math.max(0, Math.min(6, -Math.floor(Math.log10(step / 1000) + 1e-9)));
    const o = S.originMs || 0;
    const gridLines = [];
    for (let t = Math.ceil((t0 - o) / step) * step + o; t <= t1; t += step) {
      const x = X(t);
      ax.append(s("line", { class: "tick", x1: x, x2: x, y1: AXIS_H - 12, y2: AXIS_H }),
        s("text", { class: "tick-label", x: x + 3, y: AXIS_H - 3 }, fmtRel(t, dec)));
      gridLines.push(x);
    }
    ax.append(s("text", { class: "lane-kind", x: 6, y: AXIS_H - 4 }, S.grouping === "logical" ? "logical request" : "connection / stream"),
      s("line", { class: "axis-line", x1: 0, x2: W, y1: AXIS_H - 0.5, y2: AXIS_H - 0.5 }));

    const svg = ui.lanesSvg;
    svg.append(hatchDefs("fl-hatch"));
    const clipId = "fl-plot";
    svg.append(s("clipPath", { id: clipId }, s("rect", { x: LABEL_W, y: 0, width: pw, height: viewH })));
    const plot = s("g", { "clip-path": "url(#" + clipId + ")" });

    // lanes
    const rows = s("g");
    const windows = S.grouping === "logical" ? retryWindows() : [];
    for (let i = firstLane; i <= lastLane; i++) {
      const l = lanes[i];
      const y = i * LANE_H - scrollTop;
      const g = s("g", { class: "lane" + (i % 2 ? " alt" : ""), data: { lane: l.label, laneKind: l.kind } });
      g.append(s("rect", { class: "lane-bg", x: 0, y, width: W, height: LANE_H }));
      rows.append(g);
      const pg = s("g", { class: "lane-plot", data: { lane: l.label, laneKind: l.kind } });
      // retry windows in this lane
      const mine = windows.filter((w) => lanes.bySeq.get(w.advertised) === l).sort((a, b) => a.start - b.start);
      let labelEnd = -Infinity;
      for (let wi = 0; wi < mine.length; wi++) {
        const w = mine[wi];
        if (w.end < t0 || w.start > t1) continue;
        let level = 0;
        for (let wj = 0; wj < wi; wj++) if (mine[wj].end > w.start) level++;
        level = Math.min(level, 3);
        const x0 = X(w.start), x1 = X(w.end);
        const wr = s("rect", { class: "retry-after-window" + (w.pending ? " pending-window" : "") + (level ? " overlapped" : ""), x: x0, y: y + 2 + level * 3, width: Math.max(1, x1 - x0), height: LANE_H - 4 - level * 6,
          data: { advertised: w.advertised, retry: w.retry, startMs: w.start.toFixed(3), endMs: w.end.toFixed(3) } },
        s("title", null, "Retry-After " + fmtWait(w.wait) + " from #" + w.advertised + ": a retry before " + fmtRel(w.end) + " is early"));
        pg.append(wr);
        const lx = Math.max(x0, LABEL_W) + 4;
        if (lx < labelEnd) continue;
        const room0 = (ww, k) => Math.min(X(ww.end), k + 1 < mine.length ? X(mine[k + 1].start) : Infinity) - lx;
        let label = "Retry-After " + fmtWait(w.wait) + (w.pending ? " · waiting" : w.early ? " · retry #" + w.retry + " early" : w.retry != null ? " · retry #" + w.retry + " waited ✓" : "");
        if (room0(w, wi) < label.length * 6) label = "Retry-After " + fmtWait(w.wait);
        const room = Math.min(x1, wi + 1 < mine.length ? X(mine[wi + 1].start) : Infinity) - lx;
        if (room < label.length * 6) label = "R-A " + fmtWait(w.wait);
        if (room < label.length * 6) continue;
        pg.append(s("text", { class: "window-label", x: lx, y: y + 12 + level * 2 }, label));
        labelEnd = lx + label.length * 6 + 6;
      }
      drawLaneItems(pg, l, y, X, t0, t1, windows, lanes);
      plot.append(pg);
    }
    svg.append(rows);
    // grid
    for (const x of gridLines) svg.append(s("line", { class: "tick", x1: x, x2: x, y1: 0, y2: viewH, opacity: 0.5 }));
    // network bands over all lanes
    let netLabelEnd = -Infinity;
    const bands = networkBands();
    for (let bi = 0; bi < bands.length; bi++) {
      const b = bands[bi];
      if (b.end < t0 || b.start > t1) continue;
      const x0 = X(b.start), x1 = Math.max(X(b.end), x0 + 2);
      plot.append(s("rect", { class: "net-band" + (b.restore ? " restore" : ""), x: x0, y: 0, width: x1 - x0, height: viewH, data: { seq: b.seq } }, s("title", null, "#" + b.seq + " " + b.label)));
      const ax0 = Math.max(x0, LABEL_W), ax1 = Math.min(x1, W);
      if (!b.restore) ax.append(s("rect", { class: "net-band", x: ax0, y: 2, width: Math.max(2, ax1 - ax0), height: 16 }));
      // a label where it fits: before the next band starts, after the previous label ends
      const next = bands[bi + 1] ? X(bands[bi + 1].start) : W;
      const lx = Math.max(ax0 + 3, netLabelEnd + 4);
      let text = "≋ " + b.label;
      const room = (b.restore ? next : Math.max(ax1, Math.min(next, W))) - lx;
      if (room < text.length * 6.2) text = b.restore ? "≋" : "≋ " + b.label.slice(0, Math.max(0, Math.floor(room / 6.2) - 3)) + "…";
      if (room < 12 || lx > W - 10) continue;
      ax.append(s("text", { class: "net-label", x: lx, y: 14 }, text, s("title", null, b.label)));
      netLabelEnd = lx + text.length * 6.2;
    }
    // now line for live pending
    if (S.mode === "live") { const nx = X(nowMono()); if (nx > LABEL_W && nx < W) plot.append(s("line", { class: "now-line", x1: nx, x2: nx, y1: 0, y2: viewH })); }
    svg.append(plot);
    // label column on top
    const labels = s("g", { class: "labels" });
    labels.append(s("rect", { class: "lane-label-bg", x: 0, y: 0, width: LABEL_W, height: viewH }),
      s("line", { class: "label-sep", x1: LABEL_W - 0.5, x2: LABEL_W - 0.5, y1: 0, y2: viewH }));
    for (let i = firstLane; i <= lastLane; i++) {
      const l = lanes[i];
      const y = i * LANE_H - scrollTop;
      const max = Math.floor((LABEL_W - 14) / 6.6);
      const text = l.label.length > max ? l.label.slice(0, max - 1) + "…" : l.label;
      labels.append(s("text", { class: "lane-label", x: 8, y: y + LANE_H / 2 + 4 }, text, s("title", null, l.label)));
    }
    svg.append(labels);
  }
  function fmtWait(ms) { return ms >= 1000 && ms % 1000 === 0 ? ms / 1000 + " s" : ms >= 1000 ? (ms / 1000).toFixed(1) + " s" : ms + " ms"; }

  function lowerBound(items, t) {
    let lo = 0, hi = items.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (start(items[m]) < t) lo = m + 1; else hi = m; }
    return lo;
  }
  function drawLaneItems(g, l, y, X, t0, t1, windows, lanes) {
    const items = l.items;
    const bt = y + 16, bh = 16;
    let i = lowerBound(items, t0 - l.maxDur - 1);
    const vis = [];
    for (; i < items.length; i++) {
      const e = items[i];
      if (start(e) > t1) break;
      if (end(e) < t0) continue;
      vis.push(e);
    }
    // coalesce sub-pixel bars that would overlap their predecessor (never a highlighted or an early one)
    const earlySeqs = new Set();
    for (const w of windows) if (w.early && w.retry != null) earlySeqs.add(w.retry);
    const drawn = [];
    for (const e of vis) {
      const x0 = X(start(e)), x1 = X(end(e));
      const prev = drawn[drawn.length - 1];
      const keep = S.highlight.has(e.sequence) || earlySeqs.has(e.sequence) || (prev && !prev.cluster && (S.highlight.has(prev.e.sequence) || earlySeqs.has(prev.e.sequence)));
      if (prev && !keep && x1 - x0 < 1 && x0 < prev.dx1 + 3 && (prev.cluster || prev.x1 - prev.x0 < 1)) {
        prev.cluster = prev.cluster || [prev.e];
        prev.cluster.push(e); prev.x1 = Math.max(prev.x1, x1); prev.dx1 = Math.max(prev.dx1, x0 + MIN_BAR, x1);
        continue;
      }
      drawn.push({ e, x0, x1, dx1: Math.max(x1, x0 + MIN_BAR) });
    }
    const earlyBy = new Map();
    for (const w of windows) if (w.early && w.retry != null) earlyBy.set(w.retry, w.earlyBy);
    for (let j = 0; j < drawn.length; j++) {
      const d = drawn[j];
      const room = (j + 1 < drawn.length ? drawn[j + 1].x0 : X(t1) + 2000) - d.dx1 - 4;
      if (d.cluster) {
        const hl = d.cluster.some((e) => S.highlight.has(e.sequence));
        let worst = "ok";
        for (const e of d.cluster) { const c = outcomeOf(e)[0]; if (RANK[c] > RANK[worst]) worst = c; }
        const cg = s("g", { class: "cluster bar " + worst + (hl ? " highlighted" : ""), data: { seqs: d.cluster[0].sequence + "-" + d.cluster[d.cluster.length - 1].sequence, seq: d.cluster[0].sequence, highlighted: hl ? "true" : null } },
          s("rect", { class: "body", x: d.x0, y: bt, width: d.dx1 - d.x0, height: bh }), s("title", null, d.cluster.length + " exchanges (the worst: " + worst + ") #" + d.cluster[0].sequence + "–#" + d.cluster[d.cluster.length - 1].sequence + " (zoom in)"));
        if (room > 22) cg.append(s("text", { x: d.dx1 + 3, y: bt + 12 }, "×" + d.cluster.length));
        g.append(cg);
        continue;
      }
      const e = d.e;
      const [cls, glyph, word] = outcomeOf(e);
      const hl = S.highlight.has(e.sequence);
      const early = earlyBy.has(e.sequence);
      const bg = s("g", { class: "bar " + cls + (hl ? " highlighted" : "") + (early ? " early" : "") + (S.selectedSeq === e.sequence ? " selected" : ""),
        data: { seq: e.sequence, highlighted: hl ? "true" : null, startMs: start(e).toFixed(3), outcome: outcomeKey(e) } });
      const w = d.dx1 - d.x0;
      if (hl) bg.append(s("rect", { class: "halo", x: d.x0 - 3, y: bt - 3, width: w + 6, height: bh + 6, rx: 3 }));
      bg.append(s("rect", { class: "body", x: d.x0, y: bt, width: w, height: bh, rx: 2 }));
      if (isSlow(e) && w > 6) bg.append(s("rect", { class: "hatch", x: d.x0, y: bt, width: w, height: bh }));
      const r = e.response || {};
      let label = r.fault ? r.fault : r.status != null ? String(r.status) : word;
      if (cls === "reset" || cls === "closed") label = (r.status != null ? r.status + " " : "") + word;
      if (r.fault && r.status != null) label = r.status + " " + r.fault;
      const text = glyph + " " + label + (early ? "  ⚠ early by " + Math.round(earlyBy.get(e.sequence)) + " ms" : "");
      const tw = text.length * 6.3 + 6;
      if (w > tw) bg.append(s("text", { class: "bar-label", x: d.x0 + 4, y: bt + 12 }, text));
      else if (room > tw) {
        bg.append(s("text", { class: "bar-label" + (early ? " early-label" : ""), x: d.dx1 + (hl ? 7 : 3), y: bt + 12 }, text));
      } else if (room > 12) bg.append(s("text", { class: "glyph", x: d.dx1 + (hl ? 6 : 2), y: bt + 12 }, glyph));
      if (e.websocket && e.websocket.frames && w > 20) {
        for (const f of e.websocket.frames.slice(0, 400)) {
          const fx = X(start(e) + f.atMs);
          bg.append(s("line", { class: "ws-tick", x1: fx, x2: fx, y1: f.direction === "in" ? bt - 4 : bt + bh, y2: f.direction === "in" ? bt : bt + bh + 4 }));
        }
      }
      g.append(bg);
    }
    // connection events as diamonds
    for (const e of l.marks) {
      const t = start(e);
      if (t < t0 || t > t1) continue;
      const x = X(t), cy = bt + bh / 2;
      const hl = S.highlight.has(e.sequence);
      g.append(s("g", { class: "mark bar" + (e.error ? "" : " ok") + (hl ? " highlighted" : ""), data: { seq: e.sequence, highlighted: hl ? "true" : null } },
        s("path", { d: `M${x} ${cy - 7} L${x + 7} ${cy} L${x} ${cy + 7} L${x - 7} ${cy} Z` }),
        s("text", { class: "bar-label", x: x + 10, y: cy + 4 }, "◆ " + (e.error || e.requestLine || "connection"))));
    }
  }

  function wireTimeline() {
    const tl = ui.timeline;
    let drag = null;
    ui.lanesScroll.addEventListener("scroll", () => renderTimeline(), { passive: true });
    tl.addEventListener("wheel", (ev) => {
      if (ev.ctrlKey || ev.metaKey) { ev.preventDefault(); zoom(ev.deltaY > 0 ? 1.25 : 0.8, ev.clientX - tl.getBoundingClientRect().left); }
      else if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) { ev.preventDefault(); pan((ev.deltaX || ev.deltaY) / plotWidth()); }
    }, { passive: false });
    tl.addEventListener("pointerdown", (ev) => {
      if (ev.button !== 0 || ev.target.closest(".bar")) return;
      drag = { x: ev.clientX, view: S.view, moved: false };
      tl.classList.add("dragging");
    });
    window.addEventListener("pointermove", (ev) => {
      if (drag && S.view) {
        const dx = ev.clientX - drag.x;
        if (Math.abs(dx) > 2) drag.moved = true;
        const dt = -dx * (drag.view.t1 - drag.view.t0) / plotWidth();
        S.autoFit = false;
        S.view = { t0: drag.view.t0 + dt, t1: drag.view.t1 + dt };
        renderTimeline();
        return;
      }
      const bar = ev.target.closest && ev.target.closest(".timeline .bar[data-seq]");
      if (bar && !bar.classList.contains("cluster")) {
        const e = S.entries.get(Number(bar.dataset.seq));
        if (e) {
          ui.tooltip.textContent = summary(e) + "\n" + fmtRel(start(e)) + "  ·  " + fmtAbs(start(e));
          ui.tooltip.classList.remove("hidden");
          ui.tooltip.style.left = Math.min(ev.clientX + 14, innerWidth - 420) + "px";
          ui.tooltip.style.top = (ev.clientY + 16) + "px";
          return;
        }
      }
      ui.tooltip.classList.add("hidden");
    });
    window.addEventListener("pointerup", () => { if (drag) { drag = null; tl.classList.remove("dragging"); } });
    tl.addEventListener("click", (ev) => {
      const bar = ev.target.closest(".bar[data-seq], .cluster[data-seq]");
      if (!bar) return;
      const seq = Number(bar.dataset.seq);
      if (bar.classList.contains("cluster")) { const e = S.entries.get(seq); if (e) { focusOnEntries(bar.dataset.seqs.split("-").map(Number)); renderTimeline(); } return; }
      ui.returnFocus = tl;
      S.selectedSeq = seq; openDetail(seq);
    });
    tl.addEventListener("keydown", (ev) => {
      const k = ev.key;
      if (k === "+" || k === "=") zoom(1 / 1.6);
      else if (k === "-" || k === "_") zoom(1.6);
      else if (k === "0") { S.autoFit = true; fitView(); renderTimeline(); }
      else if (k === "ArrowLeft") pan(-0.15);
      else if (k === "ArrowRight") pan(0.15);
      else if (k === "ArrowUp") ui.lanesScroll.scrollTop -= LANE_H;
      else if (k === "ArrowDown") ui.lanesScroll.scrollTop += LANE_H;
      else if (k === "Enter" && S.selectedSeq != null) { ui.returnFocus = tl; openDetail(S.selectedSeq); }
      else if (k === "]" || k === "[") stepEntry(k === "]" ? 1 : -1);
      else return;
      ev.preventDefault();
    });
    window.addEventListener("resize", () => renderTimeline());
  }

  // [ and ] walk the entries in time order from the timeline; the status line reads each one out.
  function stepEntry(d) {
    const list = S.list.filter((e) => e.kind !== "network").sort((a, b) => start(a) - start(b));
    if (!list.length) return;
    let i = list.findIndex((e) => e.sequence === S.selectedSeq);
    i = i < 0 ? (d > 0 ? 0 : list.length - 1) : Math.min(list.length - 1, Math.max(0, i + d));
    const e = list[i];
    S.selectedSeq = e.sequence;
    if (S.view && (start(e) < S.view.t0 || start(e) > S.view.t1)) {
      const span = S.view.t1 - S.view.t0;
      S.autoFit = false; S.view = { t0: start(e) - span * 0.3, t1: start(e) + span * 0.7 };
    }
    const lane = getLanes().findIndex((l) => l.items.includes(e) || l.marks.includes(e));
    if (lane >= 0) { const top = lane * LANE_H, sc = ui.lanesScroll; if (top < sc.scrollTop || top + LANE_H > sc.scrollTop + sc.clientHeight) sc.scrollTop = top; }
    ui.tlStatus.textContent = summary(e);
    renderTimeline(); renderTable(false);
  }

  // ---------------------------------------------------------------- journal table
  let filtered = [], tableVersion = -1, tableFilterKey = "";
  function setFilter(k, v) { S.filters[k] = v; renderTable(true); }
  function entryMatches(e, f) {
    if (f.route && (e.route || "") !== f.route) return false;
    if (f.outcome && outcomeKey(e) !== f.outcome && !(f.outcome === "fault" && e.response && e.response.fault)) return false;
    if (f.protocol && (e.protocol || e.kind) !== f.protocol) return false;
    if (f.status) {
      const st = e.response && e.response.status;
      const m = /^([1-5])xx$/i.exec(f.status);
      if (m) { if (st == null || Math.floor(st / 100) !== Number(m[1])) return false; }
      else if (f.status === "none") { if (st != null) return false; }
      else if (String(st) !== f.status) return false;
    }
    if (f.text) {
      const q = f.text.toLowerCase();
      let hay = (e.requestLine || "") + "\n" + (e.notes || []).join("\n") + "\n" + (e.error || "");
      for (const [k, v] of e.headers || []) hay += "\n" + k + ": " + v;
      if (!hay.toLowerCase().includes(q)) return false;
    }
    return true;
  }
  function refreshFilterOptions() {
    const routes = new Set(), outcomes = new Set(), protos = new Set();
    for (const e of S.list) { if (e.route) routes.add(e.route); outcomes.add(outcomeKey(e)); if (e.response && e.response.fault) outcomes.add("fault"); protos.add(e.protocol || e.kind); }
    const fill = (sel, values, cur) => {
      const want = ["", ...[...values].sort()];
      const have = [...sel.options].map((o) => o.value);
      if (want.join("\u0001") === have.join("\u0001")) return;
      clear(sel).append(...want.map((v) => h("option", { value: v }, v || "all")));
      sel.value = cur;
    };
    fill(ui.fRoute, routes, S.filters.route); fill(ui.fOutcome, outcomes, S.filters.outcome); fill(ui.fProto, protos, S.filters.protocol);
  }
  function renderTable(refilter) {
    const fk = JSON.stringify(S.filters);
    if (refilter || tableVersion !== S.version || tableFilterKey !== fk) {
      tableVersion = S.version; tableFilterKey = fk;
      refreshFilterOptions();
      filtered = [];
      for (let i = S.list.length - 1; i >= 0; i--) if (entryMatches(S.list[i], S.filters)) filtered.push(S.list[i]);
      ui.tableCount.textContent = "showing " + filtered.length + " of " + S.list.length + " entries";
      ui.table.setAttribute("aria-rowcount", String(filtered.length + 1));
    }
    const wrap = ui.tableWrap;
    const headH = ui.table.tHead ? ui.table.tHead.offsetHeight : 28;
    const viewH = wrap.clientHeight || 400;
    const firstRow = Math.max(0, Math.floor((wrap.scrollTop - headH) / ROW_H) - 20);
    const lastRow = Math.min(filtered.length, firstRow + Math.ceil(viewH / ROW_H) + 40);
    const tb = clear(ui.tbody);
    const spacer = (n) => { const td = h("td", { colspan: "10" }); td.style.height = n * ROW_H + "px"; return h("tr", { class: "spacer", "aria-hidden": "true" }, td); };
    if (firstRow > 0) tb.append(spacer(firstRow));
    for (let i = firstRow; i < lastRow; i++) { const tr = rowFor(filtered[i]); tr.setAttribute("aria-rowindex", String(i + 2)); tb.append(tr); }
    if (lastRow < filtered.length) tb.append(spacer(filtered.length - lastRow));
    if (!filtered.length) tb.append(h("tr", null, h("td", { colspan: "10", class: "muted" }, S.list.length ? "No entry matches the filters." : "No requests yet.")));
  }
  function rowFor(e) {
    const r = e.response || {};
    const [cls, glyph] = outcomeOf(e);
    const hl = S.highlight.has(e.sequence);
    const tr = h("tr", { class: "row" + (hl ? " highlighted" : "") + (S.selectedSeq === e.sequence ? " selected" : ""), id: "entry-" + e.sequence,
      data: { seq: e.sequence, highlighted: hl ? "true" : null }, "aria-selected": S.selectedSeq === e.sequence ? "true" : "false" },
    h("td", { class: "num mono" }, "#" + e.sequence),
    h("td", { class: "num mono", title: fmtAbs(start(e)) }, fmtRel(start(e))),
    h("td", { class: "mono", title: e.requestLine }, e.method ? e.method + " " + (e.target || "") : e.requestLine),
    h("td", { class: "num" }, r.status != null ? String(r.status) : "—"),
    h("td", null, h("span", { class: "oc " + cls }, glyph + " " + outcomeKey(e))),
    h("td", { title: r.fault || "" }, r.fault || ""),
    h("td", null, e.protocol || e.kind),
    h("td", { class: "mono" }, e.kind === "network" ? "" : "c" + (e.connection ? e.connection.id : "?") + (e.stream != null ? " s" + e.stream : "")),
    h("td", { class: "num" }, isPending(e) ? "…" : fmtMs(r.durationMs)),
    h("td", { title: e.route || "" }, e.route || (e.matched === false && isReq(e) ? "unmatched" : "")));
    return tr;
  }
  function wireTable() {
    ui.tableWrap.addEventListener("scroll", () => { if (!tableScrollQueued) { tableScrollQueued = true; requestAnimationFrame(() => { tableScrollQueued = false; renderTable(false); }); } }, { passive: true });
    ui.tbody.addEventListener("click", (ev) => {
      const tr = ev.target.closest("tr.row");
      if (!tr) return;
      selectSeq(Number(tr.dataset.seq)); ui.returnFocus = ui.tableWrap; openDetail(S.selectedSeq);
    });
    ui.tableWrap.addEventListener("keydown", (ev) => {
      if (!filtered.length) return;
      let i = filtered.findIndex((e) => e.sequence === S.selectedSeq);
      if (ev.key === "ArrowDown") i = Math.min(filtered.length - 1, i + 1);
      else if (ev.key === "ArrowUp") i = Math.max(0, i < 0 ? 0 : i - 1);
      else if (ev.key === "Home") i = 0;
      else if (ev.key === "End") i = filtered.length - 1;
      else if (ev.key === "PageDown") i = Math.min(filtered.length - 1, i + 10);
      else if (ev.key === "PageUp") i = Math.max(0, i - 10);
      else if (ev.key === "Enter" && S.selectedSeq != null) { ev.preventDefault(); ui.returnFocus = ui.tableWrap; openDetail(S.selectedSeq); return; }
      else return;
      ev.preventDefault();
      selectSeq(filtered[i].sequence);
      const top = i * ROW_H, wrap = ui.tableWrap, headH = ui.table.tHead.offsetHeight;
      if (top < wrap.scrollTop) wrap.scrollTop = top;
      else if (top + ROW_H + headH > wrap.scrollTop + wrap.clientHeight) wrap.scrollTop = top + ROW_H + headH - wrap.clientHeight;
      renderTable(false);
    });
  }
  let tableScrollQueued = false;
  function selectSeq(seq) { S.selectedSeq = seq; renderTable(false); renderTimeline(); }

  // ---------------------------------------------------------------- detail
  function kv(pairs) {
    const dl = h("dl", { class: "kv" });
    for (const [k, v] of pairs) if (v !== undefined && v !== null && v !== "") dl.append(h("dt", null, k), h("dd", null, v instanceof Node ? v : String(v)));
    return dl;
  }
  function hexDump(b64) {
    let bin;
    try { bin = atob(b64); } catch (e) { return "(not base64)"; }
    const lines = [];
    const n = Math.min(bin.length, 4096);
    for (let i = 0; i < n; i += 16) {
      let hex = "", asc = "";
      for (let j = i; j < i + 16; j++) {
        if (j < n) { const c = bin.charCodeAt(j); hex += c.toString(16).padStart(2, "0") + " "; asc += c >= 32 && c < 127 ? bin[j] : "."; }
        else hex += "   ";
        if (j === i + 7) hex += " ";
      }
      lines.push(i.toString(16).padStart(6, "0") + "  " + hex + " " + asc);
    }
    if (bin.length > n) lines.push("… " + (bin.length - n) + " more bytes");
    return lines.join("\n");
  }
  function bodyView(e) {
    if (!e.bodySize) return h("p", { class: "muted" }, "(no body)");
    const note = h("p", { class: "muted" }, e.bodySize + " bytes" + (e.bodyTruncated ? ", truncated in the journal to " + (e.bodyEncoding === "base64" ? atobLen(e.body) : e.body.length) + "" : "") + " · " + e.bodyEncoding);
    if (e.bodyEncoding === "base64") return h("div", null, note, h("pre", { class: "hex" }, hexDump(e.body)));
    let text = e.body;
    const ct = (headerValue(e, "content-type") || "").toLowerCase();
    if (ct.includes("json") || /^\s*[[{]/.test(text)) { try { text = JSON.stringify(JSON.parse(text), null, 2); } catch (err) { /* not JSON after all */ } }
    return h("div", null, note, h("pre", null, text));
  }
  function atobLen(b64) { try { return atob(b64).length; } catch (e) { return "?"; } }
  function recordView(obj) {
    if (obj == null) return null;
    if (typeof obj !== "object") return String(obj);
    const pairs = [];
    for (const [k, v] of Object.entries(obj)) pairs.push([k, v !== null && typeof v === "object" ? h("pre", null, JSON.stringify(v, null, 2)) : v === null ? "null" : String(v)]);
    return kv(pairs);
  }
  // The step that answered an entry, as written in its scenario (`/scenarios` routes' `script`): the journal keeps
  // the request, not the response's headers. Only for the scenario version that answered it.
  function scriptedStep(e) {
    if (!e.route || e.step == null || !S.scenarios) return null;
    const sc = (S.scenarios.scenarios || []).find((x) => x.name === e.scenario);
    if (!sc || (e.scenarioVersion != null && sc.version !== e.scenarioVersion)) return null;
    const route = (sc.routes || []).find((x) => x.id === e.route);
    return route && route.script ? route.script[e.step] || null : null;
  }
  function openDetail(seq, refresh) {
    const e = S.entries.get(seq);
    if (!e) return;
    S.selectedSeq = seq;
    ui.detailTitle.textContent = summary(e);
    ui.rawToggle.setAttribute("aria-pressed", String(S.rawJSON));
    const b = clear(ui.detailBody);
    if (S.rawJSON) b.append(h("pre", { class: "raw-json" }, JSON.stringify(e, null, 2)));
    else {
      const r = e.response || {};
      const [cls, glyph, word] = outcomeOf(e);
      b.append(h("h3", null, "Request"), kv([["request line", h("code", null, e.requestLine)], ["kind", e.kind], ["protocol", e.protocol], ["scenario", e.scenario],
        ["route", e.route ? e.route + (e.step != null ? " · step " + e.step : "") : e.matched === false && isReq(e) ? "unmatched" : null],
        ["answered by", e.answeredBy], ["malformed", e.malformed ? "yes: " + (e.error || "") : null], ["error", !e.malformed ? e.error : null],
        ["nearest route", e.nearest ? (e.nearest.route || "none") + " — " + e.nearest.reason : null]]));
      b.append(h("h3", null, "Response"), kv([["status", r.status != null ? String(r.status) : "none sent"], ["outcome", h("span", { class: "oc " + cls }, glyph + " " + outcomeKey(e) + (word !== outcomeKey(e) && word !== String(r.status) ? " (" + word + ")" : ""))],
        ["fault", r.fault ? r.fault + " — " + faultWhat(r.fault) : null], ["chaos", r.chaos ? "yes (chosen by the chaos seed)" : "no"], ["bytes written", r.bytesWritten],
        ["duration", isPending(e) ? "pending for " + fmtMs(dur(e)) : fmtMs(r.durationMs)], ["connection closed after", r.connectionClosedAfter]]));
      const step = scriptedStep(e);
      if (step) {
        b.append(h("h3", null, "Scripted step"), kv([["route", e.route + " · step " + e.step + (step.times > 1 ? " (answers " + step.times + " requests)" : "")],
          ["kind", step.kind !== "plain" ? step.kind : null], ["status", String(step.status)], ["fault", step.fault],
          ["delay", step.delay], ["drip", step.drip], ["closes the connection", step.closeConnection ? "yes" : null]]));
        if ((step.headers || []).length) {
          b.append(h("table", { class: "headers", "aria-label": "Scripted response headers (templates as written)" },
            h("tbody", null, step.headers.map(([n, v]) => h("tr", null, h("td", { class: "mono" }, n), h("td", { class: "mono" }, v))))));
        }
      }
      if ((e.notes || []).length) b.append(h("h3", null, "Notes"), h("ul", { class: "notes" }, e.notes.map((n) => h("li", null, n))));
      if (e.websocket) {
        const ws = e.websocket;
        const { frames, ...rest } = ws;
        b.append(h("h3", null, "WebSocket session"), recordView(rest));
        const ol = h("ol", { class: "ws-frames", "aria-label": "WebSocket frames" });
        for (const f of frames || []) {
          ol.append(h("li", { class: "ws-frame", data: { direction: f.direction } },
            h("span", { class: "mono" }, "+" + (f.atMs != null ? f.atMs.toFixed(1) : "?") + " ms"),
            h("span", { class: "dir-" + f.direction }, f.direction === "in" ? "→ in" : "← out"),
            h("span", null, f.opcode + (f.fin === false ? " (more)" : "")),
            h("span", { class: "mono" }, f.text != null ? f.text : f.size + " bytes")));
        }
        if (!(frames || []).length) ol.append(h("li", { class: "muted" }, "no frames"));
        b.append(h("h4", null, "Frames (" + (frames || []).length + ", times from the upgrade request)"), ol);
      }
      b.append(h("h3", null, "Timing"), kv([["received (relative)", fmtRel(start(e))], ["received (absolute)", e.receivedAt], ["monotonic", start(e).toFixed(3) + " ms"],
        ["ended (relative)", isPending(e) ? "pending" : fmtRel(end(e))]]));
      if ((e.headers || []).length) {
        b.append(h("h3", null, "Request headers"), h("table", { class: "headers" }, h("tbody", null, e.headers.map(([k, v]) => h("tr", null, h("td", { class: "mono" }, k), h("td", { class: "mono" }, v))))));
      }
      if (isReq(e)) b.append(h("h3", null, "Request body"), bodyView(e));
      const c = e.connection || {};
      b.append(h("h3", null, "Connection"), kv([["id", c.id], ["request index", c.requestIndex], ["reused", c.reused ? "yes" : "no"], ["client", c.client], ["stream", e.stream], ["HTTP version", e.httpVersion]]));
      for (const [name, rec] of [["TLS", e.tls], ["HTTP/2", e.http2], ["Client GOAWAY", e.clientGoaway], ["Client reset", e.clientReset], ["Resource", e.resource], ["Proxy", e.proxy], ["Network", e.network]]) {
        if (rec != null) b.append(h("h3", null, name), recordView(rec));
      }
    }
    if (refresh) return;
    if (!ui.detail.open) { if (!ui.returnFocus) ui.returnFocus = document.activeElement; ui.detail.showModal(); }
    ui.detail.querySelector(".detail-head button[aria-label='Close detail']").focus();
    renderTable(false); renderTimeline();
  }
  const FAULTS = {
    "reset": "sent a TCP RST instead of an answer", "empty-reply": "closed the connection without a byte",
    "half-close": "shut down its writing side mid-response", "close-after-headers": "closed after the headers",
    "truncate-body": "closed before the whole body", "overlong-body": "sent more body than Content-Length",
    "malformed-chunk": "sent broken chunked framing", "stall-after-headers": "sent the headers, then nothing",
    "hang": "never answered", "corrupt-json": "sent a JSON body with corrupted bytes", "truncated-json": "sent JSON cut short",
    "wrong-content-type": "labelled the body with the wrong media type", "html-error-page": "answered with an HTML error page",
    "bad-gzip": "sent a gzip body that does not decode", "commit-then-reset": "sent part of the answer, then RST",
    "commit-then-hang": "sent part of the answer, then nothing", "no-close-notify": "closed TLS without close_notify",
    "rst-stream": "reset the HTTP/2 stream", "raw-frames": "sent scripted raw HTTP/2 frames", "drop": "dropped the connection",
  };
  const faultWhat = (f) => FAULTS[f] || "see the scenario";

  // ---------------------------------------------------------------- state panel
  function table(headers, rows) {
    return h("table", null, h("thead", null, h("tr", null, headers.map((x) => h("th", null, x)))),
      h("tbody", null, rows.map((r) => h("tr", null, r.map((c) => h("td", null, c == null ? "—" : String(c)))))));
  }
  function box(title, ...content) { return h("div", null, h("h3", null, title), ...content); }
  function renderState() {
    const g = clear(ui.stateBody);
    const sc = (S.scenarios && S.scenarios.scenarios) || [];
    if (sc.length) {
      const rows = [];
      for (const scn of sc) for (const r of scn.routes || []) {
        const cur = (r.cursors || []).map((c) => (c.partition != null ? c.partition + ": " : "") + (c.nextStep == null || c.exhausted ? "script done, " + (r.afterLast || "afterLast") + (c.nextStep != null ? " (step " + c.nextStep + ")" : "") : "next step " + c.nextStep) + " · served " + c.served).join("; ");
        rows.push([scn.name, r.id, (r.methods || []).join(",") + " " + r.path + (r.prefix ? "*" : ""), r.steps, cur || (r.cursors ? "not yet served" : "—")]);
      }
      g.append(box("Scenarios and route cursors", table(["scenario", "route", "match", "steps", "cursor"], rows)));
    }
    const st = S.state || {};
    if (st.auth) {
      const a = st.auth;
      g.append(box("Tokens", kv([["current token", a.currentToken + (a.currentTokenExpired ? " (expired)" : "")], ["expires in", a.currentTokenExpiresInMs != null ? fmtMs(a.currentTokenExpiresInMs) : null],
        ["uses", a.currentTokenUses], ["refresh token", a.currentRefreshToken], ["refresh calls", a.refreshCalls], ["max refreshes in flight", a.maxRefreshesInFlight],
        ["stale-token requests", a.staleTokenRequests], ["missing-token requests", a.missingTokenRequests], ["invalid grants", a.invalidGrants]])));
    }
    if (st.rateLimits && st.rateLimits.length) {
      const rows = [];
      for (const rl of st.rateLimits) {
        if (!(rl.buckets || []).length) rows.push([rl.id, rl.algorithm + " " + rl.limit + "/" + rl.windowMs + " ms", rl.key, "no buckets yet"]);
        for (const bk of rl.buckets || []) rows.push([rl.id, rl.algorithm + " " + rl.limit + "/" + rl.windowMs + " ms", bk.key, JSON.stringify(Object.fromEntries(Object.entries(bk).filter(([k]) => k !== "key")))]);
      }
      g.append(box("Rate-limit buckets", table(["limit", "rule", "key", "bucket"], rows)));
    }
    if (st.retryAfter) {
      const ra = st.retryAfter;
      const rows = (ra.observations || []).map((o) => ["#" + o.advertisedSequence + " → #" + o.retrySequence, o.key, fmtMs(o.advertisedWaitMs), fmtMs(o.actualWaitMs), o.honoured ? "✓ honoured" : "✕ early by " + Math.round(o.earlyByMs) + " ms"]);
      for (const p of ra.pending || []) rows.push(["#" + p.advertisedSequence + " → …", p.key, fmtMs(p.advertisedWaitMs), "waiting", "… pending"]);
      g.append(box("Retry-After (" + (ra.retries || 0) + " retries, " + (ra.honoured || 0) + " honoured, " + (ra.early || 0) + " early)", rows.length ? table(["attempts", "key", "asked", "waited", "judgement"], rows) : h("p", { class: "muted" }, "no Retry-After answered yet")));
    }
    if (st.idempotency) {
      const rows = [];
      for (const [route, rec] of Object.entries(st.idempotency)) {
        for (const r of rec.records || []) rows.push([route, r.key, r.status != null ? r.status : r.state, JSON.stringify(r)]);
        if (!(rec.records || []).length) rows.push([route, "—", "", "no keys; side effects " + ((rec.sideEffects || {}).total || 0)]);
      }
      g.append(box("Idempotency keys", rows.length ? table(["route", "key", "status", "record"], rows) : h("p", { class: "muted" }, "no idempotent routes")));
    }
    const res = (S.resources && S.resources.resources) || [];
    if (res.length) {
      const rows = [];
      for (const r of res) for (const i of r.instances || []) rows.push([r.id, i.path, i.exists ? "v" + i.version : "deleted", i.etag, i.size]);
      g.append(box("Resource versions", table(["resource", "path", "version", "ETag", "size"], rows)));
    }
    if (S.network) {
      const n = S.network;
      g.append(box("Network", kv([["listener", n.listener], ["outage", n.outage ? "yes" : "no"], ["conditions", n.conditions == null ? "none" : JSON.stringify(n.conditions)],
        ["frozen for", n.frozenForMs != null ? fmtMs(n.frozenForMs) : null], ["timeline", n.timeline ? JSON.stringify(n.timeline) : "none"]])));
    }
    if (S.health) g.append(box("Server", kv([["version", S.health.version], ["port", S.health.port], ["uptime", fmtMs(S.health.uptimeMs)], ["open connections", S.health.connections],
      ["journal", (S.health.journal || {}).retained + " retained of " + (S.health.journal || {}).capacity + ", " + (S.health.journal || {}).evicted + " evicted"], ["instance", S.health.instance]])));
  }
  function askConfirm(text, okLabel) {
    return new Promise((resolve) => {
      ui.confirmText.textContent = text; ui.confirmOk.textContent = okLabel;
      ui.confirm.returnValue = "";
      const done = () => { ui.confirm.removeEventListener("close", done); resolve(ui.confirm.returnValue === "ok"); };
      ui.confirm.addEventListener("close", done);
      ui.confirm.showModal();
      ui.confirmOk.focus();
    });
  }
  function buildActions() {
    ui.outageMs = h("input", { type: "number", min: "100", max: "600000", step: "100", value: "3000", "aria-label": "Outage length in milliseconds" });
    ui.actionMsg = h("span", { class: "toast muted", role: "status" });
    const act = (label, text, fn) => h("button", { type: "button", onclick: async (ev) => {
      const btn = ev.currentTarget;
      if (!(await askConfirm(text(), label))) { btn.focus(); return; }
      try { await fn(); ui.actionMsg.textContent = label + ": done"; } catch (err) { ui.actionMsg.textContent = label + " failed: " + err.message; }
      btn.focus();
      scheduleRefresh(true);
    } }, label);
    const post = (path, body) => api(path, { method: "POST", headers: { Accept: "application/json", "Content-Type": "application/json" }, body: body ? JSON.stringify(body) : undefined });
    ui.actions.append(
      act("Reset scenarios", () => "Rewind every scenario's script to its first step?", () => post("scenarios/reset")),
      act("Clear journal", () => "Forget every journal entry? Sequence numbers go on.", () => api("requests", { method: "DELETE" })),
      act("Expire token", () => "Expire the current access token now?", () => post("auth/expire")),
      h("label", null, "Outage ", ui.outageMs, " ms"),
      act("Start outage", () => "Refuse new connections and drop open ones for " + Number(ui.outageMs.value) + " ms?", () => post("network", { listener: "refuse", connections: "drop", forMs: Math.max(1, Number(ui.outageMs.value) || 1000) })),
      act("Restore network", () => "Put the network back: listener up, no conditions?", () => post("network", { listener: "up", conditions: "none", connections: "thaw" })),
      ui.actionMsg);
  }

  // ---------------------------------------------------------------- start
  function loadStatic() {
    let d = {};
    try { d = JSON.parse(dataEl.textContent); } catch (e) { d = {}; }
    Object.assign(S, { health: d.health || null, report: d.report || null, state: d.state || null, scenarios: d.scenarios || null, network: d.network || null, resources: d.resources || null,
      generatedAt: d.generatedAt || null, server: d.server || "" });
    setEntries((d.requests && d.requests.requests) || []);
    const firstFail = sortedVerdicts().find((v) => v.outcome === "fail" && (v.evidence || []).length);
    renderHeader(); renderVerdicts(); renderState();
    requestAnimationFrame(() => {
      fitView();
      if (firstFail) { S.highlight = new Set(firstFail.evidence); S.activeVerdict = firstFail.scenario + "/" + firstFail.rule; ui.clearHl.classList.remove("hidden");
        ui.hlInfo.textContent = "highlighting " + firstFail.evidence.map((x) => "#" + x).join(" "); focusOnEntries(firstFail.evidence); renderVerdicts(); }
      drawTimeline(); renderTable(true);
      document.body.dataset.ready = "true";
    });
  }
  buildShell();
  if (S.mode === "static") loadStatic();
  else {
    renderHeader();
    liveLoop();
    // pending bars grow, live ones tick: redraw twice a second while anything is pending
    setInterval(() => { if (S.list.some(isPending) || S.state && S.state.retryAfter && (S.state.retryAfter.pending || []).length) { invalidateLanes(); renderTimeline(); } }, 500);
    const ready = setInterval(() => { if (S.health) { document.body.dataset.ready = "true"; clearInterval(ready); } }, 50);
  }
})();
