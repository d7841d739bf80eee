/* kcompat console: plain JavaScript, no libraries. Reads the node's JSON API (/api/v1/...) every
   REFRESH_MS (?refresh=MS in the page's address, 500 at least) and draws the views; charts are
   inline SVG drawn here. Every value from the broker is escaped before it reaches the page. */
(function () {
  "use strict";

  const params = new URLSearchParams(window.location.search);
  const REFRESH_MS = Math.max(500, parseInt(params.get("refresh") || "2000", 10) || 2000);
  const SERIES = ["var(--series-1)", "var(--series-2)", "var(--series-3)", "var(--series-4)"];

  const state = {
    route: null,
    paused: false,
    timer: null,
    inflight: false,
    again: false,
    cluster: null,
    data: null,
    skew: 0,            // server clock - browser clock (ms)
    refreshes: 0,
    prefs: { topicFilter: "", showInternal: false, groupFilter: "" },
  };

  // -- formatting -------------------------------------------------------------------------------

  const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  function esc(v) { return String(v === null || v === undefined ? "" : v).replace(/[&<>"']/g, (c) => ESC[c]); }
  const intFormat = new Intl.NumberFormat("en-US");
  function fmtNum(v) { return v === null || v === undefined ? "\u2014" : intFormat.format(v); }
  function fmtBytes(v) {
    if (v === null || v === undefined) return "\u2014";
    const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let x = v, i = 0;
    while (Math.abs(x) >= 1024 && i < units.length - 1) { x /= 1024; i += 1; }
    const digits = i === 0 ? 0 : (x < 10 ? 2 : x < 100 ? 1 : 0);
    return x.toFixed(digits) + " " + units[i];
  }
  function fmtCompact(v) {
    if (v === null || v === undefined) return "\u2014";
    const a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(a >= 1e10 ? 0 : 1) + "G";
    if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 0 : 1) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(a >= 1e5 ? 0 : 1) + "k";
    if (a >= 100 || Number.isInteger(v)) return intFormat.format(Math.round(v));
    return v.toFixed(a >= 10 ? 1 : 2);
  }
  const fmtByteRate = (v) => (v === null || v === undefined ? "\u2014" : fmtBytes(v) + "/s");
  const fmtCountRate = (v) => (v === null || v === undefined ? "\u2014" : fmtCompact(v) + "/s");
  function fmtClock(ms) {
    const d = new Date(ms);
    const p = (n) => String(n).padStart(2, "0");
    return p(d.getHours()) + ":" + p(d.getMinutes()) + ":" + p(d.getSeconds());
  }
  function fmtAgo(ms) {
    if (ms === null || ms === undefined || ms <= 0) return "\u2014";
    const s = Math.max(0, (Date.now() + state.skew - ms) / 1000);
    if (s < 2) return "just now";
    if (s < 60) return Math.round(s) + " s ago";
    if (s < 3600) return Math.round(s / 60) + " min ago";
    if (s < 86400) return (s / 3600).toFixed(1) + " h ago";
    return new Date(ms).toISOString().slice(0, 16).replace("T", " ");
  }
  function fmtDuration(ms) {
    if (ms === null || ms === undefined || ms < 0) return "\u2014";
    if (ms < 1000) return ms + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(ms % 1000 ? 1 : 0) + " s";
    return (ms / 60000).toFixed(ms % 60000 ? 1 : 0) + " min";
  }
  function lastKnown(values) {
    for (let i = (values || []).length - 1; i >= 0; i -= 1) if (values[i] !== null && values[i] !== undefined) return values[i];
    return null;
  }
  function badge(text, kind, title) {
    return '<span class="badge ' + (kind || "") + '"' + (title ? ' title="' + esc(title) + '"' : "") + ">" + esc(text) + "</span>";
  }
  function stat(label, value, hint, kind, field) {
    return '<div class="stat ' + (kind || "") + '"' + (field ? ' data-stat="' + esc(field) + '"' : "") + '><div class="label">' +
      esc(label) + '</div><div class="value">' + value + "</div>" + (hint ? '<div class="hint">' + hint + "</div>" : "") + "</div>";
  }
  function card(title, id, aside) {
    return '<section class="card"><h2>' + esc(title) + (aside ? '<span class="aside">' + aside + "</span>" : "") +
      '</h2><div id="' + id + '"></div></section>';
  }
  function table(head, rows, empty) {
    if (!rows.length) return '<div class="empty">' + esc(empty || "Nothing to show.") + "</div>";
    const th = head.map((h) => {
      const [label, cls] = Array.isArray(h) ? h : [h, ""];
      return '<th class="' + cls + '">' + esc(label) + "</th>";
    }).join("");
    return '<div class="table-wrap"><table><thead><tr>' + th + "</tr></thead><tbody>" + rows.join("") + "</tbody></table></div>";
  }
  function numCell(v, field, fmt) {
    const shown = (fmt || fmtNum)(v);
    const raw = v === null || v === undefined ? "" : String(v);
    return '<td class="num"' + (field ? ' data-field="' + field + '" data-value="' + esc(raw) + '"' : "") + ">" + shown + "</td>";
  }
  function setHTML(id, html) {
    const el = document.getElementById(id);
    if (el) el.innerHTML = html;
    return el;
  }
  const hrefTopic = (name) => "#topic/" + encodeURIComponent(name);
  const hrefGroup = (id) => "#group/" + encodeURIComponent(id);

  function stateKind(s) {
    switch (s) {
      case "Stable": case "CompleteCommit": case "online": return "ok";
      case "Ongoing": return "info";
      case "PreparingRebalance": case "CompletingRebalance": case "Assigning": case "Reconciling":
      case "PrepareCommit": case "PrepareAbort": case "PrepareEpochFence": case "CompleteAbort":
      case "shutting_down": return "warn";
      case "Dead": case "fenced": return "bad";
      default: return "";
    }
  }
  /* badges of a topic's counts of problem partitions, or of one partition's flags (true/false) */
  function healthBadges(x) {
    const n = (v) => (v === true ? "" : " " + v);
    const out = [];
    if (x.offline) out.push(badge("offline" + n(x.offline), "bad", "no leader"));
    if (x.under_min_isr) out.push(badge("under min ISR" + n(x.under_min_isr), "bad", "ISR smaller than min.insync.replicas"));
    if (x.under_replicated) out.push(badge("under-replicated" + n(x.under_replicated), "warn", "ISR smaller than the replica set"));
    return out.length ? out.join(" ") : badge("healthy", "ok");
  }

  // -- charts (inline SVG) --------------------------------------------------------------------------

  /* a round step >= x: 1, 2, 2.5 or 5 times a power of ten (of 1024, then ten, with binary) */
  function niceStep(x, binary) {
    if (!(x > 0)) return 1;
    let scale = 1;
    if (binary) while (x / scale >= 1024) scale *= 1024;
    const y = x / scale;
    const e = Math.pow(10, Math.floor(Math.log10(y)));
    const f = y / e;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * e * scale;
  }
  function segments(t, values, sx, sy) {
    const segs = [];
    let cur = null;
    for (let i = 0; i < t.length; i += 1) {
      const v = values[i];
      if (v === null || v === undefined) { cur = null; continue; }
      if (!cur) { cur = []; segs.push(cur); }
      cur.push([sx(t[i]), sy(v)]);
    }
    return segs;
  }
  const pt = (p) => p[0].toFixed(1) + "," + p[1].toFixed(1);

  /* chart(el, t, series, fmt): a line chart of series [{name, values}] over times t (epoch ms)
     into the element el, with a legend, axes and a hover read-out. */
  function chart(el, t, series, fmt, opts) {
    if (!el) return;
    opts = opts || {};
    const W = Math.max(280, (el.clientWidth || 600) - 20), H = opts.height || 190;
    const m = { l: 64, r: 12, t: 10, b: 24 };
    const iw = W - m.l - m.r, ih = H - m.t - m.b;
    let max = 0;
    series.forEach((s) => s.values.forEach((v) => { if (v > max) max = v; }));
    const step = niceStep(max / 4, opts.binary);
    const ymax = step * 4;
    const t0 = t.length ? t[0] : Date.now() - 600000, t1 = t.length > 1 ? t[t.length - 1] : t0 + 1;
    const sx = (x) => m.l + ((x - t0) / (t1 - t0 || 1)) * iw;
    const sy = (y) => m.t + ih - (y / ymax) * ih;
    let svg = '<svg width="' + W + '" height="' + H + '" viewBox="0 0 ' + W + " " + H + '" role="img" aria-label="' + esc(opts.label || "chart") + '">';
    svg += '<g class="axis">';
    for (let i = 0; i <= 4; i += 1) {
      const y = sy(step * i);
      svg += '<line class="grid-line" x1="' + m.l + '" x2="' + (W - m.r) + '" y1="' + y.toFixed(1) + '" y2="' + y.toFixed(1) + '"/>';
      svg += '<text x="' + (m.l - 8) + '" y="' + (y + 4).toFixed(1) + '" text-anchor="end">' + esc(fmt(step * i)) + "</text>";
    }
    if (t.length > 1) {
      const n = Math.max(2, Math.min(6, Math.floor(iw / 110)));
      for (let i = 0; i <= n; i += 1) {
        const x = t0 + ((t1 - t0) * i) / n;
        const anchor = i === 0 ? "start" : i === n ? "end" : "middle";
        svg += '<text x="' + sx(x).toFixed(1) + '" y="' + (H - 6) + '" text-anchor="' + anchor + '">' + fmtClock(x) + "</text>";
      }
    }
    svg += "</g>";
    let drawn = 0;
    series.forEach((s, k) => {
      const color = s.color || SERIES[k % SERIES.length];
      segments(t, s.values, sx, sy).forEach((seg) => {
        if (seg.length === 1) {
          svg += '<circle cx="' + seg[0][0].toFixed(1) + '" cy="' + seg[0][1].toFixed(1) + '" r="2.5" style="fill:' + color + '"/>';
        } else {
          const base = (m.t + ih).toFixed(1);
          svg += '<path d="M' + seg[0][0].toFixed(1) + "," + base + " L" + seg.map(pt).join(" L") + " L" + seg[seg.length - 1][0].toFixed(1) + "," + base +
            ' Z" style="fill:' + color + ';fill-opacity:.09;stroke:none"/>';
          svg += '<path d="M' + seg.map(pt).join(" L") + '" style="fill:none;stroke:' + color + ';stroke-width:2;stroke-linejoin:round;stroke-linecap:round"/>';
        }
        drawn += seg.length;
      });
    });
    if (!drawn) {
      svg += '<text class="nodata" x="' + (m.l + iw / 2) + '" y="' + (m.t + ih / 2) + '" text-anchor="middle">' +
        esc(opts.empty || "Collecting samples\u2026") + "</text>";
    }
    svg += '<line class="cursor" x1="0" x2="0" y1="' + m.t + '" y2="' + (m.t + ih) + '" visibility="hidden"/>';
    svg += "</svg>";
    const legend = series.map((s, k) => {
      const color = s.color || SERIES[k % SERIES.length];
      return '<span class="key"><span class="swatch" style="background:' + color + '"></span>' + esc(s.name) +
        ' <span class="current">' + esc(fmt(lastKnown(s.values))) + "</span></span>";
    }).join("");
    el.innerHTML = (opts.legend === false ? "" : '<div class="legend">' + legend + "</div>") + '<div class="chart">' + svg + "</div>";
    el._chart = { t: t, series: series, fmt: fmt, sx: sx, m: m, W: W };
    if (!el._hooked) {
      el._hooked = true;
      el.addEventListener("mousemove", (ev) => hover(el, ev));
      el.addEventListener("mouseleave", () => { el._hover = null; hideTooltip(); setCursor(el, null); });
    }
    if (el._hover) hover(el, el._hover);
  }
  function setCursor(el, x) {
    const c = el.querySelector("line.cursor");
    if (!c) return;
    if (x === null) { c.setAttribute("visibility", "hidden"); return; }
    c.setAttribute("x1", x); c.setAttribute("x2", x); c.setAttribute("visibility", "visible");
  }
  function hover(el, ev) {
    const c = el._chart, svg = el.querySelector("svg");
    if (!c || !svg || !c.t.length) return;
    el._hover = { clientX: ev.clientX, clientY: ev.clientY };
    const rect = svg.getBoundingClientRect();
    const x = ev.clientX - rect.left;
    let best = 0, bestD = Infinity;
    c.t.forEach((tt, i) => { const d = Math.abs(c.sx(tt) - x); if (d < bestD) { bestD = d; best = i; } });
    setCursor(el, c.sx(c.t[best]).toFixed(1));
    const rows = c.series.map((s, k) => '<div class="row"><span class="swatch" style="background:' + (s.color || SERIES[k % SERIES.length]) +
      '"></span>' + esc(s.name) + ": <b>" + esc(c.fmt(s.values[best])) + "</b></div>").join("");
    showTooltip('<div class="t">' + fmtClock(c.t[best]) + "</div>" + rows, ev.clientX, ev.clientY);
  }
  function showTooltip(html, x, y) {
    const tip = document.getElementById("tooltip");
    tip.innerHTML = html;
    tip.hidden = false;
    const w = tip.offsetWidth;
    tip.style.left = Math.min(window.innerWidth - w - 8, x + 14) + "px";
    tip.style.top = (y + 14) + "px";
  }
  function hideTooltip() { document.getElementById("tooltip").hidden = true; }

  /* sparkline(values): a small SVG line of the known values (no axes). */
  function sparkline(values, color) {
    const w = 120, h = 28;
    let vs = values || [];
    const first = vs.findIndex((v) => v !== null && v !== undefined);
    vs = first < 0 ? [] : vs.slice(first);
    const known = vs.filter((v) => v !== null && v !== undefined);
    if (known.length < 2) return '<svg class="spark" width="' + w + '" height="' + h + '" aria-hidden="true"></svg>';
    const max = Math.max(1, ...known);
    const sx = (i) => 1 + (i / (vs.length - 1)) * (w - 2);
    const sy = (v) => h - 2 - (v / max) * (h - 4);
    const t = vs.map((_, i) => i);
    const segs = segments(t, vs, sx, sy);
    color = color || SERIES[0];
    let out = '<svg class="spark" width="' + w + '" height="' + h + '" viewBox="0 0 ' + w + " " + h + '" aria-hidden="true">';
    segs.forEach((seg) => {
      if (seg.length < 2) return;
      out += '<path d="M' + seg[0][0].toFixed(1) + "," + h + " L" + seg.map(pt).join(" L") + " L" + seg[seg.length - 1][0].toFixed(1) + "," + h +
        ' Z" style="fill:' + color + ';fill-opacity:.12;stroke:none"/>';
      out += '<path d="M' + seg.map(pt).join(" L") + '" style="fill:none;stroke:' + color + ';stroke-width:1.6"/>';
    });
    return out + "</svg>";
  }

  // -- data --------------------------------------------------------------------------------------------

  async function api(path) {
    const r = await fetch(path, { cache: "no-store", headers: { Accept: "application/json" } });
    let body = null;
    try { body = await r.json(); } catch (e) { body = null; }
    if (!r.ok) {
      const err = new Error((body && body.error) || "HTTP " + r.status);
      err.status = r.status;
      throw err;
    }
    return body;
  }

  // -- header ------------------------------------------------------------------------------------------

  function renderHeader(c) {
    state.cluster = c;
    state.skew = c.now_ms - Date.now();
    const ctl = c.controller_id === null ? "no active controller" :
      "controller: node " + c.controller_id + (c.this_node_is_controller ? " (this node)" : "");
    document.getElementById("cluster-line").textContent =
      "cluster " + c.cluster_id + "  \u00b7  node " + c.node_id + "  \u00b7  " + ctl;
    const pill = document.getElementById("health-pill");
    const h = c.health;
    pill.dataset.status = h.status;
    pill.textContent = h.status === "ok" ? "Healthy" : h.status === "warning" ? "Degraded" : "Critical";
    pill.title = (h.active_controller ? "" : "no active controller; ") + h.offline + " offline, " + h.under_min_isr + " under min ISR, " + h.under_replicated +
      " under-replicated partitions; " + h.fenced_brokers + " fenced brokers";
    document.getElementById("count-topics").textContent = c.topics;
    document.getElementById("count-groups").textContent = c.groups;
    document.getElementById("count-transactions").textContent = c.transactions;
    document.getElementById("footer-version").textContent = "kcompat " + c.version + " \u00b7 node " + c.node_id +
      " \u00b7 metadata offset " + c.metadata_offset;
    document.title = (h.status === "ok" ? "" : "\u26a0 ") + "kcompat console \u00b7 " + c.cluster_id;
  }

  function setBanner(text) {
    const b = document.getElementById("banner");
    if (!text) { b.hidden = true; b.textContent = ""; return; }
    b.textContent = text;
    b.hidden = false;
  }

  function markRefreshed() {
    state.refreshes += 1;
    const el = document.getElementById("last-refresh");
    el.dataset.ts = String(Date.now());
    el.dataset.count = String(state.refreshes);
    el.textContent = (state.paused ? "paused \u00b7 " : "") + "updated " + fmtClock(Date.now());
  }

  // -- views ---------------------------------------------------------------------------------------------

  const views = {};

  views.overview = {
    mount() {
      return '<div class="page-head"><h1>Cluster overview</h1><span class="sub" id="ov-sub"></span></div>' +
        '<div class="stats" id="ov-stats"></div>' +
        '<div class="grid two">' + card("Throughput", "ov-bytes", "bytes per second, all topics") +
        card("Records and requests", "ov-records", "per second") + "</div>" +
        card("Partition health", "ov-health") +
        '<div class="grid two">' + card("Busiest topics", "ov-topics", "last interval") +
        card("Consumer groups by lag", "ov-groups", "records behind") + "</div>";
    },
    load() {
      return Promise.all([api("/api/v1/rates"), api("/api/v1/topics"), api("/api/v1/groups")])
        .then(([rates, topics, groups]) => ({ rates, topics: topics.topics, groups: groups.groups }));
    },
    render(d, _arg, c) {
      const h = c.health;
      const user = d.topics.filter((t) => !t.internal).length;
      const lagSum = d.groups.reduce((a, g) => a + (g.lag || 0), 0);
      setHTML("ov-sub", "as node " + esc(c.node_id) + " sees it \u00b7 " + esc(c.partitions) + " partitions in " + esc(c.topics) + " topics");
      setHTML("ov-stats", [
        stat("Brokers online", fmtNum(c.brokers.online) + ' <span class="muted">/ ' + fmtNum(c.brokers.total) + "</span>",
          c.brokers.fenced ? c.brokers.fenced + " fenced" : "none fenced", c.brokers.fenced ? "warn" : "ok", "brokers"),
        stat("Active controller", c.controller_id === null ? "\u2014" : "node " + esc(c.controller_id),
          c.quorum ? "epoch " + esc(c.quorum.epoch) + " \u00b7 " + esc(c.quorum.voters.length) + " voter(s)" : "", c.controller_id === null ? "bad" : "", "controller"),
        stat("Topics", fmtNum(user), (d.topics.length - user) + " internal", "", "topics"),
        stat("Partitions", fmtNum(c.partitions), "", "", "partitions"),
        stat("Under-replicated", fmtNum(h.under_replicated), "ISR < replicas", h.under_replicated ? "warn" : "ok", "under_replicated"),
        stat("Under min ISR", fmtNum(h.under_min_isr), "acks=all writes fail", h.under_min_isr ? "bad" : "ok", "under_min_isr"),
        stat("Offline", fmtNum(h.offline), "no leader", h.offline ? "bad" : "ok", "offline"),
        stat("Consumer groups", fmtNum(c.groups), "total lag " + fmtNum(lagSum), "", "groups"),
        stat("Transactional ids", fmtNum(c.transactions), "", "", "transactions"),
      ].join(""));
      const r = d.rates;
      chart(document.getElementById("ov-bytes"), r.t, [{ name: "in", values: r.bytes_in }, { name: "out", values: r.bytes_out }],
        fmtByteRate, { label: "bytes in and out per second", binary: true });
      chart(document.getElementById("ov-records"), r.t, [{ name: "records in", values: r.messages_in },
        { name: "produce requests", values: r.produce_requests }, { name: "fetch requests", values: r.fetch_requests }],
        fmtCountRate, { label: "records and requests per second" });
      if (!h.problems.length) {
        setHTML("ov-health", '<div class="empty">' + badge("healthy", "ok") + " &nbsp;All " + fmtNum(c.partitions) +
          " partitions have a leader and their full ISR.</div>");
      } else {
        setHTML("ov-health", table(["Topic", ["Partition", "num"], ["Leader", "num"], "Replicas / ISR", "Problem"], h.problems.map((p) =>
          '<tr class="link" data-href="' + esc(hrefTopic(p.topic)) + '"><td class="name"><a href="' + esc(hrefTopic(p.topic)) + '">' + esc(p.topic) +
          '</a></td><td class="num">' + p.partition + '</td><td class="num">' + (p.leader < 0 ? badge("none", "bad") : esc(p.leader)) +
          "</td><td>" + replicaChips(p.replicas, p.isr, p.leader) + "</td><td>" + healthBadges(p) + "</td></tr>")));
      }
      const busy = d.topics.slice().sort((a, b) => (b.rates.bytes_in + b.rates.bytes_out) - (a.rates.bytes_in + a.rates.bytes_out) ||
        (b.size_bytes || 0) - (a.size_bytes || 0)).filter((t) => !t.internal).slice(0, 8);
      setHTML("ov-topics", table(["Topic", ["In", "num"], ["Out", "num"], ["Records in", "num"], ["Size", "num"]], busy.map((t) =>
        '<tr class="link" data-href="' + esc(hrefTopic(t.name)) + '"><td class="name"><a href="' + esc(hrefTopic(t.name)) + '">' + esc(t.name) + "</a></td>" +
        numCell(t.rates.bytes_in, null, fmtByteRate) + numCell(t.rates.bytes_out, null, fmtByteRate) +
        numCell(t.rates.messages_in, null, fmtCountRate) + numCell(t.size_bytes, null, fmtBytes) + "</tr>"), "No topics yet."));
      const lagging = d.groups.slice().sort((a, b) => (b.lag || 0) - (a.lag || 0)).slice(0, 8);
      setHTML("ov-groups", table(["Group", "State", ["Lag", "num"], "Trend"], lagging.map((g) =>
        '<tr class="link" data-group="' + esc(g.group_id) + '" data-href="' + esc(hrefGroup(g.group_id)) + '"><td class="name"><a href="' +
        esc(hrefGroup(g.group_id)) + '">' + esc(g.group_id) + "</a></td><td>" + badge(g.state, stateKind(g.state)) + "</td>" +
        numCell(g.lag, "lag") + "<td>" + sparkline(g.lag_trend, SERIES[1]) + "</td></tr>"), "No consumer groups on this node's coordinator."));
    },
  };

  function replicaChips(replicas, isr, leader) {
    const inIsr = new Set(isr);
    return '<span class="chips">' + replicas.map((r) => {
      const cls = (inIsr.has(r) ? "in-sync" : "out-of-sync") + (r === leader ? " leader" : "");
      const title = "node " + r + (r === leader ? " (leader)" : "") + (inIsr.has(r) ? ", in sync" : ", not in the ISR");
      return '<span class="chip ' + cls + '" title="' + esc(title) + '">' + esc(r) + "</span>";
    }).join("") + "</span>";
  }

  views.brokers = {
    mount() {
      return '<div class="page-head"><h1>Brokers</h1><span class="sub">registered in the cluster metadata</span></div>' +
        '<div class="stats" id="br-stats"></div>' + card("Brokers", "br-table") +
        '<div class="grid two">' + card("Log directories of this node", "br-dirs") + card("Metadata quorum (KRaft)", "br-quorum") + "</div>";
    },
    load() { return api("/api/v1/brokers"); },
    render(d, _arg, c) {
      const bs = d.brokers;
      setHTML("br-stats", [
        stat("Online", fmtNum(bs.filter((b) => b.status === "online").length), "", "ok"),
        stat("Fenced", fmtNum(bs.filter((b) => b.fenced).length), "", bs.some((b) => b.fenced) ? "bad" : "ok"),
        stat("Racks", fmtNum(new Set(bs.map((b) => b.rack).filter((r) => r)).size) || "0", "", ""),
        stat("Leaders", fmtNum(bs.reduce((a, b) => a + b.leaders, 0)), "partitions with a leader", ""),
      ].join(""));
      setHTML("br-table", table(["Node", "Status", "Role", "Rack", "Endpoints", ["Leaders", "num"], ["Replicas", "num"], ["Epoch", "num"]],
        bs.map((b) => '<tr data-broker="' + b.id + '"><td class="name">' + esc(b.id) + "</td><td>" + badge(b.status.replace("_", " "), stateKind(b.status)) +
          "</td><td>" + (b.controller ? badge("active controller", "info") + " " : "") + (b.this_node ? badge("this node") : "") +
          "</td><td>" + (b.rack ? esc(b.rack) : '<span class="muted">\u2014</span>') + '</td><td class="mono">' +
          b.endpoints.map((e) => esc(e.listener + "://" + e.host + ":" + e.port)).join("<br>") + "</td>" +
          numCell(b.leaders) + numCell(b.replicas) + numCell(b.epoch) + "</tr>"), "No broker registered yet."));
      const me = bs.find((b) => b.this_node);
      const dirs = (me && me.log_dirs) || [];
      setHTML("br-dirs", table(["Directory", ["Partitions", "num"], ["Data", "num"], "Disk used", ["Free", "num"]], dirs.map((x) => {
        const used = x.disk_total_bytes ? 1 - x.disk_free_bytes / x.disk_total_bytes : null;
        const kind = used === null ? "" : used > 0.95 ? "bad" : used > 0.85 ? "warn" : "";
        return '<tr><td class="mono">' + esc(x.path) + "</td>" + numCell(x.partitions) + numCell(x.size_bytes, null, fmtBytes) +
          "<td>" + (used === null ? "\u2014" : '<div class="bar ' + kind + '" title="' + (used * 100).toFixed(1) + '% of ' +
            esc(fmtBytes(x.disk_total_bytes)) + '"><span style="width:' + (used * 100).toFixed(1) + '%"></span></div>') + "</td>" +
          numCell(x.disk_free_bytes, null, fmtBytes) + "</tr>";
      }), "This node holds no log directories (a controller only)."));
      const q = c.quorum;
      setHTML("br-quorum", q ? '<div class="body"><dl class="kv">' +
        "<dt>Leader</dt><dd>" + (q.leader_id === null ? badge("none", "bad") : "node " + esc(q.leader_id)) + "</dd>" +
        "<dt>Epoch</dt><dd>" + esc(q.epoch) + "</dd>" +
        "<dt>Voters</dt><dd>" + q.voters.map((v) => badge("node " + v, v === q.leader_id ? "info" : "")).join(" ") + "</dd>" +
        "<dt>High watermark</dt><dd>" + fmtNum(q.high_watermark) + "</dd>" +
        "<dt>Log end offset</dt><dd>" + fmtNum(q.log_end_offset) + "</dd>" +
        "<dt>Applied by this node</dt><dd>" + fmtNum(c.metadata_offset) + "</dd></dl></div>" : '<div class="empty">No quorum.</div>');
    },
  };

  views.topics = {
    mount() {
      return '<div class="page-head"><h1>Topics</h1><span class="sub">sizes and offsets of the replicas on this node</span></div>' +
        '<div class="toolbar"><input type="search" id="topic-filter" placeholder="Filter topics\u2026" value="' + esc(state.prefs.topicFilter) +
        '"><label><input type="checkbox" id="topic-internal"' + (state.prefs.showInternal ? " checked" : "") + "> show internal topics</label></div>" +
        '<section class="card" id="topics-table"></section>';
    },
    bind() {
      const f = document.getElementById("topic-filter");
      f.addEventListener("input", () => { state.prefs.topicFilter = f.value; rerender(); });
      const i = document.getElementById("topic-internal");
      i.addEventListener("change", () => { state.prefs.showInternal = i.checked; rerender(); });
    },
    load() { return api("/api/v1/topics"); },
    render(d) {
      const q = state.prefs.topicFilter.trim().toLowerCase();
      const rows = d.topics.filter((t) => (state.prefs.showInternal || !t.internal) && (!q || t.name.toLowerCase().includes(q)));
      setHTML("topics-table", table(["Topic", ["Partitions", "num"], ["Replication", "num"], ["Size", "num"], ["In", "num"], ["Out", "num"],
        ["Records in", "num"], "Status"], rows.map((t) =>
        '<tr class="link" data-topic="' + esc(t.name) + '" data-href="' + esc(hrefTopic(t.name)) + '"><td class="name"><a href="' + esc(hrefTopic(t.name)) + '">' +
        esc(t.name) + "</a>" + (t.internal ? " " + badge("internal") : "") + "</td>" + numCell(t.partition_count, "partitions") +
        numCell(t.replication_factor, "replication_factor") + numCell(t.size_bytes, "size_bytes", fmtBytes) +
        numCell(t.rates.bytes_in, "bytes_in", fmtByteRate) + numCell(t.rates.bytes_out, "bytes_out", fmtByteRate) +
        numCell(t.rates.messages_in, "messages_in", fmtCountRate) + "<td>" + healthBadges(t) + "</td></tr>"),
        q ? "No topic matches \u201c" + state.prefs.topicFilter + "\u201d." : "No topics yet."));
    },
  };

  views.topic = {
    mount(name) {
      return '<div class="crumb"><a href="#topics">Topics</a> /</div><div class="page-head"><h1><span id="td-name">' + esc(name) +
        '</span><span id="td-badges"></span></h1><span class="sub mono" id="td-id"></span></div>' +
        '<div class="stats" id="td-stats"></div>' + card("Throughput", "td-chart", "this topic, per second") +
        card("Partitions", "td-parts", "replicas: green in sync, red out of sync, bold the leader") + card("Configuration overrides", "td-configs");
    },
    load(name) { return api("/api/v1/topics/" + encodeURIComponent(name)); },
    notFound(name) {
      setHTML("view", '<div class="crumb"><a href="#topics">Topics</a> /</div><section class="card"><div class="empty">Topic \u201c' + esc(name) +
        "\u201d does not exist (any more).</div></section>");
    },
    render(t) {
      setHTML("td-badges", (t.internal ? badge("internal") : "") + " " + healthBadges(t));
      setHTML("td-id", "id " + esc(t.id));
      setHTML("td-stats", [
        stat("Partitions", fmtNum(t.partition_count)), stat("Replication factor", fmtNum(t.replication_factor)),
        stat("Min in-sync replicas", fmtNum(t.min_insync_replicas), "min.insync.replicas"),
        stat("Size on this node", fmtBytes(t.size_bytes), t.local_partitions + " of " + t.partition_count + " partitions here"),
        stat("Bytes in", fmtByteRate(t.rates.bytes_in)), stat("Bytes out", fmtByteRate(t.rates.bytes_out)),
        stat("Records in", fmtCountRate(t.rates.messages_in)),
      ].join(""));
      const h = t.history;
      chart(document.getElementById("td-chart"), h.t, [{ name: "bytes in", values: h.bytes_in }, { name: "bytes out", values: h.bytes_out }],
        fmtByteRate, { label: "topic throughput", height: 170, binary: true });
      setHTML("td-parts", table([["Partition", "num"], ["Leader", "num"], "Replicas", ["Log start", "num"], ["Log end", "num"],
        ["High watermark", "num"], ["Size", "num"], ["Segments", "num"], "Status"], t.partitions.map((p) => {
        const l = p.local || {};
        return '<tr data-partition="' + p.partition + '">' + numCell(p.partition) + '<td class="num">' + (p.leader < 0 ? badge("none", "bad") : esc(p.leader)) +
          "</td><td>" + replicaChips(p.replicas, p.isr, p.leader) + "</td>" +
          (p.local ? numCell(l.log_start_offset, "log_start_offset") + numCell(l.log_end_offset, "log_end_offset") +
            numCell(l.high_watermark, "high_watermark") + numCell(l.size_bytes, "size_bytes", fmtBytes) + numCell(l.segments) :
            '<td class="muted" colspan="5">no replica on this node</td>') +
          "<td>" + healthBadges(p) + (p.local ? " " + badge(l.role, l.role === "leader" ? "info" : "") : "") + "</td></tr>";
      })));
      const cfg = Object.keys(t.configs).sort();
      setHTML("td-configs", table(["Config", "Value"], cfg.map((k) => '<tr><td class="mono">' + esc(k) + '</td><td class="mono">' + esc(t.configs[k]) + "</td></tr>"),
        "No overrides: the broker defaults apply."));
    },
  };

  views.groups = {
    mount() {
      return '<div class="page-head"><h1>Consumer groups</h1><span class="sub">groups coordinated by this node; lag = log end (high watermark) \u2212 committed offset</span></div>' +
        '<div class="toolbar"><input type="search" id="group-filter" placeholder="Filter groups\u2026" value="' + esc(state.prefs.groupFilter) + '"></div>' +
        '<section class="card" id="groups-table"></section>';
    },
    bind() {
      const f = document.getElementById("group-filter");
      f.addEventListener("input", () => { state.prefs.groupFilter = f.value; rerender(); });
    },
    load() { return api("/api/v1/groups"); },
    render(d) {
      const q = state.prefs.groupFilter.trim().toLowerCase();
      const rows = d.groups.filter((g) => !q || g.group_id.toLowerCase().includes(q));
      setHTML("groups-table", table(["Group", "Protocol", "State", ["Members", "num"], "Topics", ["Lag", "num"], "Lag, last 3 min"], rows.map((g) =>
        '<tr class="link" data-group="' + esc(g.group_id) + '" data-href="' + esc(hrefGroup(g.group_id)) + '"><td class="name"><a href="' +
        esc(hrefGroup(g.group_id)) + '">' + esc(g.group_id) + "</a></td><td>" + badge(g.protocol, g.protocol === "consumer" ? "info" : "") +
        '</td><td data-field="state">' + badge(g.state, stateKind(g.state)) + "</td>" + numCell(g.members, "members") +
        "<td>" + (g.topics.length ? g.topics.map((t) => '<a href="' + esc(hrefTopic(t)) + '">' + esc(t) + "</a>").join(", ") : '<span class="muted">\u2014</span>') +
        "</td>" + numCell(g.lag, "lag") + "<td>" + sparkline(g.lag_trend, SERIES[1]) + "</td></tr>"),
        q ? "No group matches \u201c" + state.prefs.groupFilter + "\u201d." : "No consumer groups on this node's coordinator."));
    },
  };

  views.group = {
    mount(id) {
      return '<div class="crumb"><a href="#groups">Consumer groups</a> /</div><div class="page-head"><h1><span id="gd-name">' + esc(id) +
        '</span><span id="gd-badges"></span></h1><span class="sub" id="gd-sub"></span></div>' +
        '<div class="stats" id="gd-stats"></div>' + card("Total lag", "gd-chart", "records behind the log end, all partitions") +
        card("Lag by partition", "gd-offsets") + card("Members", "gd-members");
    },
    load(id) { return api("/api/v1/groups/" + encodeURIComponent(id)); },
    notFound(id) {
      setHTML("view", '<div class="crumb"><a href="#groups">Consumer groups</a> /</div><section class="card"><div class="empty">Group \u201c' + esc(id) +
        "\u201d is not known to this node's coordinator (deleted, or coordinated by another node).</div></section>");
    },
    render(g) {
      setHTML("gd-badges", badge(g.protocol, g.protocol === "consumer" ? "info" : "") + " " + badge(g.state, stateKind(g.state)));
      setHTML("gd-sub", "coordinator partition " + esc(g.coordinator_partition) + " of __consumer_offsets");
      setHTML("gd-stats", [
        '<div class="stat" data-stat="lag"><div class="label">Total lag</div><div class="value" id="gd-lag" data-value="' + esc(g.lag === null ? "" : g.lag) + '">' +
          fmtNum(g.lag) + "</div></div>",
        stat("Members", fmtNum(g.members.length), "", "", "members"),
        stat(g.protocol === "consumer" ? "Group epoch" : "Generation", fmtNum(g.generation)),
        stat("Assignor", g.assignor ? esc(g.assignor) : "\u2014", g.protocol_type ? "protocol type " + esc(g.protocol_type) : ""),
        stat("Partitions", fmtNum(g.offsets.length), "with a committed offset"),
      ].join(""));
      chart(document.getElementById("gd-chart"), g.history.t, [{ name: "lag", values: g.history.lag, color: SERIES[1] }], fmtCompact,
        { label: "total lag over time", height: 170 });
      setHTML("gd-offsets", table(["Topic", ["Partition", "num"], ["Committed", "num"], ["Log end", "num"], ["Lag", "num"], "Lag over time", "Last commit"],
        g.offsets.map((o) => '<tr data-topic="' + esc(o.topic) + '" data-partition="' + o.partition + '"><td class="name"><a href="' + esc(hrefTopic(o.topic)) + '">' +
          esc(o.topic) + "</a></td>" + numCell(o.partition) + numCell(o.committed, "committed") + numCell(o.high_watermark, "high_watermark") +
          numCell(o.lag, "lag") + "<td>" + sparkline(o.lag_history, SERIES[1]) + '</td><td class="nowrap">' + fmtAgo(o.commit_timestamp) + "</td></tr>"),
        "No committed offsets."));
      setHTML("gd-members", table(["Member", "Client", "Host", "Instance id", "Assigned partitions"], g.members.map((m) => {
        const a = Object.keys(m.assignment).map((t) => esc(t) + " [" + m.assignment[t].join(", ") + "]").join("<br>");
        return '<tr><td class="mono">' + esc(m.member_id) + (m.member_id === g.leader ? " " + badge("leader", "info") : "") + "</td><td>" +
          esc(m.client_id) + '</td><td class="mono">' + esc(m.client_host) + "</td><td>" + (m.instance_id ? esc(m.instance_id) : '<span class="muted">\u2014</span>') +
          '</td><td class="mono">' + (a || '<span class="muted">none</span>') + "</td></tr>";
      }), "No members: nobody consumes with this group right now."));
    },
  };

  views.transactions = {
    mount() {
      return '<div class="page-head"><h1>Transactions and producers</h1><span class="sub">transactional ids coordinated by this node</span></div>' +
        '<div class="stats" id="tx-stats"></div>' + card("Transactional ids", "tx-table") +
        card("Active producers", "tx-producers", "producer state of the partitions this node leads");
    },
    load() { return api("/api/v1/transactions"); },
    render(d) {
      const order = ["Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Empty", "PrepareEpochFence", "Dead"];
      const states = Object.keys(d.states).sort((a, b) => order.indexOf(a) - order.indexOf(b));
      setHTML("tx-stats", [stat("Transactional ids", fmtNum(d.transactions.length)), stat("Producers", fmtNum(new Set(d.producers.map((p) => p.producer_id)).size),
        "on partitions led here")].concat(states.map((s) => stat(s, fmtNum(d.states[s]), "", stateKind(s) === "bad" ? "bad" : "", "state-" + s))).join(""));
      setHTML("tx-table", table(["Transactional id", "State", ["Producer id", "num"], ["Epoch", "num"], "Partitions", ["Timeout", "num"], "Started", "Last update"],
        d.transactions.map((x) => '<tr data-txn="' + esc(x.transactional_id) + '"><td class="name">' + esc(x.transactional_id) + '</td><td data-field="state">' +
          badge(x.state, stateKind(x.state)) + "</td>" + numCell(x.producer_id) + numCell(x.producer_epoch) + '<td class="mono">' +
          (x.partitions.length ? x.partitions.map((p) => esc(p.topic + "-" + p.partition)).join(", ") : '<span class="muted">\u2014</span>') + "</td>" +
          numCell(x.timeout_ms, null, fmtDuration) + '<td class="nowrap">' + (x.txn_start_ms > 0 ? fmtAgo(x.txn_start_ms) : "\u2014") +
          '</td><td class="nowrap">' + fmtAgo(x.last_update_ms) + "</td></tr>"), "No transactional producer has used this node's coordinator."));
      setHTML("tx-producers", table(["Partition", ["Producer id", "num"], ["Epoch", "num"], ["Last sequence", "num"], "Last write", "Open transaction"],
        d.producers.map((p) => '<tr><td class="mono"><a href="' + esc(hrefTopic(p.topic)) + '">' + esc(p.topic) + "</a>-" + p.partition + "</td>" +
          numCell(p.producer_id) + numCell(p.producer_epoch) + numCell(p.last_sequence) + '<td class="nowrap">' + fmtAgo(p.last_timestamp) + "</td><td>" +
          (p.current_txn_start_offset >= 0 ? badge("from offset " + p.current_txn_start_offset, "info") : '<span class="muted">none</span>') + "</td></tr>"),
        "No idempotent or transactional producer has written to partitions led here."));
    },
  };

  // -- routing and refresh -----------------------------------------------------------------------------

  function parseRoute() {
    const h = window.location.hash.replace(/^#/, "");
    const slash = h.indexOf("/");
    let kind = slash < 0 ? h : h.slice(0, slash);
    let arg = null;
    if (slash >= 0) {
      try { arg = decodeURIComponent(h.slice(slash + 1)); } catch (e) { arg = h.slice(slash + 1); }
    }
    if (!views[kind] || ((kind === "topic" || kind === "group") && !arg)) { kind = "overview"; arg = null; }
    return { kind: kind, arg: arg };
  }

  function mount() {
    state.route = parseRoute();
    state.data = null;
    const v = views[state.route.kind];
    document.querySelectorAll("#tabs a").forEach((a) => {
      const tab = a.dataset.tab;
      a.classList.toggle("active", tab === ({ topic: "topics", group: "groups" }[state.route.kind] || state.route.kind));
    });
    document.getElementById("view").innerHTML = v.mount(state.route.arg);
    if (v.bind) v.bind();
    hideTooltip();
  }

  function rerender() {
    if (state.data && state.cluster) views[state.route.kind].render(state.data, state.route.arg, state.cluster);
  }

  function schedule() {
    clearTimeout(state.timer);
    state.timer = null;
    if (!state.paused) state.timer = setTimeout(refresh, REFRESH_MS);
  }

  async function refresh() {
    if (state.inflight) { state.again = true; return; }
    state.inflight = true;
    const route = state.route;
    const view = views[route.kind];
    try {
      const [cluster, data] = await Promise.all([api("/api/v1/cluster"), view.load(route.arg)]);
      if (route === state.route) {
        renderHeader(cluster);
        state.data = data;
        view.render(data, route.arg, cluster);
        setBanner(null);
        markRefreshed();
      }
    } catch (e) {
      if (route === state.route) {
        if (e.status === 404 && view.notFound) {
          view.notFound(route.arg);
          setBanner(null);
        } else {
          setBanner("Cannot read the broker's state (" + (e.message || e) + "); retrying every " + (REFRESH_MS / 1000) + " s.");
        }
      }
    } finally {
      state.inflight = false;
      if (state.again) { state.again = false; clearTimeout(state.timer); state.timer = setTimeout(refresh, 0); } else { schedule(); }
    }
  }

  function navigate() {
    mount();
    clearTimeout(state.timer);
    refresh();
  }

  document.addEventListener("click", (ev) => {
    if (ev.target.closest("a")) return;
    const row = ev.target.closest("tr[data-href]");
    if (row) window.location.hash = row.dataset.href;
  });
  document.getElementById("pause-btn").addEventListener("click", (ev) => {
    state.paused = !state.paused;
    ev.currentTarget.setAttribute("aria-pressed", String(state.paused));
    ev.currentTarget.textContent = state.paused ? "Resume" : "Pause";
    if (state.paused) { clearTimeout(state.timer); state.timer = null; } else { refresh(); }
  });
  let resizeTimer = null;
  window.addEventListener("resize", () => { clearTimeout(resizeTimer); resizeTimer = setTimeout(rerender, 150); });
  window.addEventListener("hashchange", navigate);
  navigate();
})();
