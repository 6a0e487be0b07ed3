
"use strict";
const D = JSON.parse(document.getElementById("latte-data").textContent);
let T = [];
async function inflate(b64) {
  const bytes = Uint8Array.from(atob(b64), ch => ch.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate-raw"));
  return JSON.parse(await new Response(stream).text());
}
const app = document.getElementById("app");
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}
const SVGNS = "http://www.w3.org/2000/svg";
function sv(tag, attrs) { const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v); return e; }
const fmt = (v, d) => v === null || v === undefined ? "n/a" : (typeof v === "number" && d !== undefined ? v.toFixed(d) : String(v));
const COLORS = {pending:"#d0d7de", assigned:"#a5d6ff", in_progress:"#f2cc60", done:"#4ac26b", verified:"#1a7f37",
                closed:"#8c959f", failed:"#ff8182", blocked:"#ff8182"};
const BAD = /blocked|skipped|error|fail/;
let expandAll = false;
const LONG_ACTION = 600;  // characters of an action shown before "show all"
function outcomeText(e) {
  const skip = new Set(["type","seq","round","t","who","diff","failed_tests","added","removed","first"]);
  const parts = [];
  for (const [k, v] of Object.entries(e)) if (!skip.has(k) && !k.startsWith("@") && v !== null && v !== "" && !(Array.isArray(v) && !v.length))
    parts.push(k + "=" + (typeof v === "object" ? JSON.stringify(v) : v));
  return e.type + (parts.length ? ": " + parts.join(", ") : "");
}
function diffView(id) {
  const pre = el("pre", {class: "diff"});
  for (const line of T[id].split("\n")) {
    const cls = line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "";
    pre.append(el("span", {class: cls}, line + "\n"));
  }
  return pre;
}
function eventBlock(tr, e) {
  const d = el("div", {class: "outcome" + (BAD.test(e.type) || e.failed > 0 ? " fail" : ""), "data-seq": e.seq});
  if (e.type === "edit_file" && e.diff !== undefined) {
    const det = el("details", {class: "edit"}, el("summary", {}, `edit ${e.path}: +${e.added} −${e.removed}` + (e.first ? " (new file)" : "")));
    det.addEventListener("toggle", () => { if (det.open && det.children.length < 2) det.append(diffView(e.diff)); });
    d.append(det);
  } else if (e.type === "run_tests") {
    d.append(`run_tests: ${e.passed} passed, ${e.failed} failed` + (e.errors ? `, ${e.errors} errors` : ""));
  } else d.append(outcomeText(e));
  if (e.failed_tests) { const det = el("details", {class: "failures"}, el("summary", {}, "failed tests")); det.append(el("pre", {}, e.failed_tests)); d.append(det); }
  for (const [k, v] of Object.entries(e)) if (k.startsWith("@")) {
    const det = el("details", {}, el("summary", {}, k.slice(1))); det.append(el("pre", {}, T[v])); d.append(det); }
  return d;
}
function replyView(tr, c) {
  const text = c.reply === null ? "" : T[c.reply];
  const pre = el("pre", {class: "reply"});
  let pos = 0;
  for (const [s, e, tag, ev] of c.acts) {
    pre.append(text.slice(pos, s));
    const out = ev >= 0 ? tr.events[ev] : null;
    const body = text.slice(s, e);
    const span = el("span", {class: "act" + (out && BAD.test(out.type) ? " fail" : ""), title: out ? outcomeText(out) : "no outcome recorded"});
    if (body.length > LONG_ACTION) {  // a whole file in an edit: its first lines, the rest on demand
      const more = el("button", {class: "more"}, `… ${body.split("\n").length} lines, show all`);
      more.addEventListener("click", () => { span.replaceChildren(body); });
      span.append(body.slice(0, LONG_ACTION / 2), more);
    } else span.append(body);
    pre.append(span); pos = e;
  }
  pre.append(text.slice(pos));
  return pre;
}
function promptView(c) {
  const det = el("details", {class: "prompt"}, el("summary", {}, `prompt: ${c.msgs.length + 1} messages, ${c.msgs.filter(m => m[2]).length} new this round · ${c.in} tokens in`));
  det.addEventListener("toggle", () => {
    if (!det.open || det.dataset.filled) return; det.dataset.filled = "1";
    if (c.sys !== null) { const s = el("details", {class: "msg"}, el("summary", {}, "system prompt")); s.append(el("pre", {}, T[c.sys])); det.append(s); }
    for (const [role, id, isNew] of c.msgs) {
      if (isNew) det.append(el("div", {class: "msg new", title: "new in this call: the view this round's prompt was built from"}, el("b", {}, (role || "message") + " (new)"), el("pre", {}, T[id])));
      else { const h = el("details", {class: "msg"}, el("summary", {}, (role || "message") + " (earlier)")); h.addEventListener("toggle", () => { if (h.open && h.children.length < 2) h.append(el("pre", {}, T[id])); }); det.append(h); }
    }
  });
  return det;
}
function frameAt(g, r) { let best = g.frames[0]; for (const f of g.frames) if (f.round <= r) best = f; return best; }
const BUNDLE_MIN = 6;  // a node with more dependency edges than this gets them bundled into one arrow
const BUNDLE_GAP = 34;  // px left of the node where its bundled edges meet
const ZOOM_STEP = 1.25;
const LABEL_CHAR_PX = 6.2;  // at most one character of a node's 10 px label, in the page's sans-serif font
function graphView(tr, r, onNode, sel, redraw) {
  const g = tr.graph; if (!g) return el("div", {class: "muted"}, "no coordination graph (this team keeps none)");
  const f = frameAt(g, r), pad = 14, rad = g.node_px / 2, H = g.h + 2 * pad;
  // the browser draws the labels, wider than the layout measured them: the drawing reaches the longest one
  const right = Math.max(g.w, ...g.nodes.map(n => n.x + rad + 3 + LABEL_CHAR_PX * Math.min(n.title.length, 28)));
  const W = right + 2 * pad;
  tr.zoom = tr.zoom || 1;  // 1: the whole graph fits the panel's width (never larger than drawn)
  const svg = sv("svg", {viewBox: `${-pad} ${-pad} ${W} ${H}`, preserveAspectRatio: "xMinYMin meet", "data-w": W});
  svg.style.width = `calc(${tr.zoom} * min(100%, ${W}px))`;
  const state = new Map(f.nodes.map(n => [n[0], n]));
  const selIdx = g.nodes.findIndex(n => n.id === sel);
  const fanIn = new Map(); for (const [, b] of f.edges) fanIn.set(b, (fanIn.get(b) || 0) + 1);
  // dependency edges; a crowded fan-in meets at one point, right of its sources' labels, and enters as one arrow
  const junction = new Map();
  for (const [a, b] of f.edges) if (fanIn.get(b) > BUNDLE_MIN) {
    const A = g.nodes[a], B = g.nodes[b], right = Math.max(A.lx, A.x + rad) + BUNDLE_GAP / 2;
    junction.set(b, Math.min(B.x - rad - 8, Math.max(junction.get(b) || 0, right, B.x - rad - BUNDLE_GAP)));
  }
  for (const [a, b] of f.edges) {
    const A = g.nodes[a], B = g.nodes[b], sx = Math.max(A.lx, A.x + rad);
    const bundled = junction.has(b), ex = bundled ? junction.get(b) : B.x - rad, mid = (sx + ex) / 2;
    const d = bundled ? `M${sx},${A.y} C${mid},${A.y} ${mid},${B.y} ${ex},${B.y}` : `M${sx},${A.y} C${B.x - 30},${A.y} ${B.x - 30},${B.y} ${ex},${B.y}`;
    const cls = (bundled ? "bundled" : "") + (a === selIdx || b === selIdx ? " sel" : "");
    svg.append(sv("path", {d, fill: "none", stroke: "#8c959f", "stroke-width": bundled ? 0.7 : 1, class: cls.trim()}));
  }
  for (const [b, jx] of junction) {
    const B = g.nodes[b];
    svg.append(sv("path", {d: `M${jx},${B.y} L${B.x - rad},${B.y}`, stroke: b === selIdx ? "#0969da" : "#57606a", "stroke-width": 2.5, class: "bundle"}));
  }
  g.nodes.forEach((n, i) => {
    const s = state.get(i); if (!s) return;
    const grp = sv("g", {class: "node", "data-node": n.id});
    const circ = sv("circle", {cx: n.x, cy: n.y, r: rad, fill: COLORS[s[1]] || "#d0d7de", stroke: i === selIdx ? "#0969da" : n.verify ? "#8250df" : "#57606a", "stroke-width": i === selIdx ? 2.5 : 1});
    const tip = sv("title", {}); tip.textContent = `${n.id}: ${n.title}\n${s[1]}${s[2] ? " · " + s[2] : ""}`; circ.append(tip);
    const lab = sv("text", {x: n.x, y: n.y + 3, "text-anchor": "middle"}); lab.textContent = n.short;
    const t2 = sv("text", {x: n.x + rad + 3, y: n.y - 2}); t2.textContent = n.title.length > 28 ? n.title.slice(0, 27) + "…" : n.title;
    const t3 = sv("text", {x: n.x + rad + 3, y: n.y + 10, fill: "#57606a"});
    t3.textContent = s[1].replace("_", " ") + (s[2] ? " · " + s[2] : "");
    grp.append(circ, lab, t2, t3);
    if (junction.has(i)) {  // how many edges the one arrow stands for
      const t4 = sv("text", {x: n.x + rad + 3, y: n.y + 21, fill: "#57606a", class: "bundle-count"});
      t4.textContent = `${fanIn.get(i)} deps, bundled`; grp.append(t4);
    } grp.addEventListener("click", () => onNode(n.id)); svg.append(grp);
  });
  const zoomTo = z => { tr.zoom = Math.max(0.25, Math.min(8, z)); redraw(); };
  const zoom = el("span", {class: "zoom"},
    el("button", {class: "zoom-out", title: "zoom out", onclick: () => zoomTo(tr.zoom / ZOOM_STEP)}, "−"),
    el("button", {class: "zoom-fit", title: "fit the whole graph to the panel", onclick: () => zoomTo(1)}, "fit"),
    el("button", {class: "zoom-in", title: "zoom in (the panel scrolls)", onclick: () => zoomTo(tr.zoom * ZOOM_STEP)}, "+"));
  const title = el("div", {class: "muted head"}, zoom, `round ${r}: ${f.nodes.length} nodes, ${f.nodes.filter(n => n[1] === "done" || n[1] === "verified").length} done (graph as of round ${f.round})`);
  return el("div", {}, title, el("div", {class: "canvas"}, svg));
}
function spark(tr, r, go) {
  const w = 260, h = 36, n = tr.tokens.length, mx = Math.max(1, ...tr.tokens);
  const svg = sv("svg", {width: w, height: h, class: "spark"});
  const pts = tr.tokens.map((v, i) => `${(i / Math.max(1, n - 1) * (w - 4) + 2).toFixed(1)},${(h - 2 - v / mx * (h - 6)).toFixed(1)}`).join(" ");
  svg.append(sv("polyline", {points: pts, fill: "none", stroke: "#0969da", "stroke-width": 1.2}));
  const x = (r - tr.first) / Math.max(1, n - 1) * (w - 4) + 2;
  svg.append(sv("line", {x1: x, x2: x, y1: 0, y2: h, stroke: "#cf222e"}));
  const tip = sv("title", {}); tip.textContent = `tokens per round (max ${mx}); round ${r}: ${tr.tokens[r - tr.first] || 0}`; svg.append(tip);
  svg.addEventListener("click", ev => { const b = svg.getBoundingClientRect(); go(tr.first + Math.round((ev.clientX - b.left - 2) / (w - 4) * (n - 1))); });
  return svg;
}
function header(tr) {
  const o = tr.outcome, c = tr.config;
  const cfg = el("details", {}, el("summary", {}, "configuration"), el("pre", {}, Object.entries(c).map(([k, v]) => `${k}: ${JSON.stringify(v)}`).join("\n")));
  return el("header", {}, el("h1", {}, tr.id),
    el("div", {class: "kv"},
      el("span", {}, el("b", {}, "task "), c.task), el("span", {}, el("b", {}, "team "), c.team), el("span", {}, el("b", {}, "model "), c.model),
      el("span", {}, el("b", {}, "seed "), c.seed), el("span", {}, el("b", {}, "workers "), c.n_workers),
      el("span", {class: o.success ? "ok" : "bad"}, el("b", {}, "outcome "), (o.success ? "success" : "no success") + ` (${o.reason})` + (o.status !== "ok" ? ` · ${o.status}: ${o.error}` : "")),
      el("span", {}, el("b", {}, "accuracy "), o.accuracy === null ? "n/a" : (100 * o.accuracy).toFixed(0) + "%"),
      el("span", {}, el("b", {}, "rounds "), o.rounds),
      el("span", {}, el("b", {}, "tokens "), (o.input_tokens + o.output_tokens).toLocaleString("en") + ` (in ${o.input_tokens.toLocaleString("en")} / out ${o.output_tokens.toLocaleString("en")})`),
      el("span", {}, el("b", {}, "dollars "), o.dollars === null ? "n/a" : "$" + o.dollars.toFixed(4)),
      el("span", {}, el("b", {}, "wall clock "), `${fmt(o.virtual_seconds, 1)} s virtual · ${fmt(o.real_seconds, 1)} s real`)),
    cfg);
}
function roundFlags(tr, r) {
  const box = el("div", {class: "flags"});
  for (const e of tr.byRound.get(r) || []) {
    if (e.type === "lead_invoked") box.append(el("span", {class: "flag lead"}, "Lead triggered: " + (e.reasons || []).join(", ")));
    else if (e.type === "lead_skipped") box.append(el("span", {class: "flag lead muted"}, "Lead skipped: " + (e.reason || "")));
    else if (e.type === "heartbeat_alert") box.append(el("span", {class: "flag hb"}, `heartbeat: ${e.agent} on ${e.task} (${e.rounds_without_activity} rounds idle)`));
    else if (e.type === "fix_task_injected" || e.type === "run_end") box.append(el("span", {class: "flag"}, outcomeText(e)));
    else if (e.type === "fork_point") box.append(el("span", {class: "flag fork"}, `fork point: the rounds up to ${e.fork_round} are ${e.parent}'s; from here on: ` + (Object.keys(e.changes || {}).length ? JSON.stringify(e.changes) : "no change")));
  }
  return box;
}
function lanes(tr, r) {
  const box = el("div", {class: "lanes"});
  for (const a of tr.agents) {
    const calls = tr.calls.filter(c => c.agent === a && c.round === r);
    const evs = (tr.byRound.get(r) || []).filter(e => e.who === a && e.type !== "agent_reply");
    const lane = el("div", {class: "lane" + (calls.length || evs.length ? "" : " idle"), "data-agent": a}, el("h3", {}, a));
    if (!calls.length && !evs.length) lane.append(el("div", {class: "muted"}, "idle this round"));
    const paired = new Set();
    for (const c of calls) {
      lane.append(promptView(c));
      const tags = c.acts.map(a => a[2]);
      const rep = el("details", {class: "reply-box"}, el("summary", {}, `reply (${c.out} tokens): ` + (tags.length ? tags.join(", ") : "no actions")));
      if (expandAll) rep.open = true;
      rep.append(replyView(tr, c));
      const acts = el("div", {class: "actions"});
      for (const [s, e, tag, ev] of c.acts) {
        if (ev >= 0) { paired.add(ev); acts.append(el("div", {class: "action"}, el("b", {}, tag + " → "), eventBlock(tr, tr.events[ev]))); }
        else acts.append(el("div", {class: "action"}, el("b", {}, tag + " → "), el("span", {class: "muted"}, "no outcome recorded")));
      }
      rep.append(acts); lane.append(rep);
    }
    for (const e of evs) if (!paired.has(tr.events.indexOf(e))) lane.append(eventBlock(tr, e));
    box.append(lane);
  }
  return box;
}
function nodeEvents(tr, id, go) {
  const list = el("ol", {});
  tr.events.forEach(e => {
    if (e.task === id || e.verify_id === id || e.node === id)
      list.append(el("li", {onclick: () => go(e.round)}, `round ${e.round}: ` + outcomeText(e)));
  });
  return el("div", {class: "events", id: "node-events"}, el("h3", {}, `events of ${id}`), list);
}
function prep(tr) {
  tr.byRound = new Map();
  for (const e of tr.events) { if (e.round === null || e.round === undefined) continue;
    if (!tr.byRound.has(e.round)) tr.byRound.set(e.round, []); tr.byRound.get(e.round).push(e); }
}
function trialApp(trials) {
  trials.forEach(prep);
  const first = Math.min(...trials.map(t => t.first)), last = Math.max(...trials.map(t => t.last));
  let r = Math.min(last, first + 1), nodeSel = null;
  const slider = el("input", {type: "range", id: "round", min: first, max: last, value: r});
  const label = el("span", {id: "round-label"});
  const prev = el("button", {id: "prev", title: "previous round (←)"}, "◀"), next = el("button", {id: "next", title: "next round (→)"}, "▶");
  const flagged = new Set(); trials.forEach(t => t.events.forEach(e => { if (e.type === "heartbeat_alert") flagged.add(e.round); }));
  const expand = el("button", {id: "expand", title: "open every reply (e)"}, "expand replies");
  // the Lead's invocations (amber) and heartbeat alerts (red) as ticks under the slider
  const ticks = sv("svg", {class: "ticks", viewBox: `0 0 ${Math.max(1, last - first)} 10`, preserveAspectRatio: "none"});
  trials.forEach(t => t.events.forEach(e => {
    if (e.type === "fork_point") {  // a fork's branch point: a full-height mark
      ticks.append(sv("rect", {x: e.round - first - 0.3, y: 0, width: 0.6, height: 10, fill: "#8250df"}));
      return;
    }
    const color = e.type === "heartbeat_alert" ? "#cf222e" : e.type === "lead_invoked" ? "#bf8700" : null;
    if (!color || e.round === null || e.round === undefined) return;
    const y = color === "#cf222e" ? 0 : 5;
    ticks.append(sv("rect", {x: e.round - first - 0.2, y, width: 0.4, height: 5, fill: color}));
  }));
  const sliderBox = el("div", {class: "slider-box"}, slider, ticks);
  const bar = el("div", {class: "bar"}, prev, sliderBox, next, label, expand,
    el("span", {class: "muted", title: [...flagged].join(", ")}, "← → step · Home/End · e expands · heartbeats: " +
      (flagged.size ? `${flagged.size} (rounds ${[...flagged].slice(0, 6).join(", ")}${flagged.size > 6 ? ", …" : ""})` : "none")));
  const cols = el("div", {class: "cols"});
  const views = trials.map(tr => { const col = el("div", {class: "trial", "data-trial": tr.id}); cols.append(col); return col; });
  app.append(bar, cols);
  function go(x) { r = Math.max(first, Math.min(last, x | 0)); slider.value = r; render(); }
  function render() {
    label.textContent = `round ${r} of ${first}–${last}`;
    trials.forEach((tr, k) => {
      const col = views[k]; col.replaceChildren();
      const onNode = id => { nodeSel = id; render(); };
      col.append(header(tr), el("div", {class: "bar2 kv", style: "padding:4px 14px"}, el("span", {class: "muted"}, "tokens over rounds"), spark(tr, r, go), roundFlags(tr, r)),
        el("div", {class: "main"}, el("div", {class: "graph"}, graphView(tr, r, onNode, nodeSel, render),
          nodeSel && tr.graph && tr.graph.nodes.some(n => n.id === nodeSel) ? nodeEvents(tr, nodeSel, go) : null),
          trials.length === 1 ? lanes(tr, r) : null));
      if (trials.length > 1) col.append(el("div", {class: "main"}, lanes(tr, r)));
    });
  }
  const toggle = () => { expandAll = !expandAll; expand.textContent = expandAll ? "collapse replies" : "expand replies"; render(); };
  expand.addEventListener("click", toggle);
  window.addEventListener("hashchange", () => { const m = /round=(\d+)/.exec(location.hash); if (m) go(+m[1]); });
  slider.addEventListener("input", () => go(+slider.value));
  prev.addEventListener("click", () => go(r - 1)); next.addEventListener("click", () => go(r + 1));
  document.addEventListener("keydown", ev => {
    if (ev.target.tagName === "INPUT" && ev.target !== slider) return;
    if (ev.key === "ArrowRight" || ev.key === "j") { ev.preventDefault(); go(r + 1); }
    else if (ev.key === "ArrowLeft" || ev.key === "k") { ev.preventDefault(); go(r - 1); }
    else if (ev.key === "Home") go(first); else if (ev.key === "End") go(last); else if (ev.key === "e") toggle();
  });
  const hash = /round=(\d+)/.exec(location.hash); if (hash) r = +hash[1];
  render();
}
function sweepApp() {
  const filter = el("input", {id: "filter", placeholder: "filter rows (text in any column)", size: 40});
  const table = el("table", {id: "trials"}), thead = el("thead"), tbody = el("tbody");
  let key = -1, dir = 1;
  const tr = el("tr");
  D.columns.forEach((c, i) => tr.append(el("th", {onclick: () => { dir = key === i ? -dir : 1; key = i; draw(); }}, c)));
  thead.append(tr); table.append(thead, tbody);
  app.append(el("header", {}, el("h1", {}, `sweep ${D.dir}: ${D.rows.length} trials`), filter), table);
  function draw() {
    const q = filter.value.toLowerCase();
    const idx = D.rows.map((_, i) => i).filter(i => !q || D.rows[i].some(v => String(v).toLowerCase().includes(q)));
    if (key >= 0) idx.sort((a, b) => { const x = D.rows[a][key], y = D.rows[b][key];
      if (x === y) return 0; if (x === null) return 1; if (y === null) return -1;
      return (typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y))) * dir; });
    thead.querySelectorAll("th").forEach((th, i) => th.className = i === key ? (dir > 0 ? "asc" : "desc") : "");
    tbody.replaceChildren(...idx.map(i => el("tr", {}, ...D.rows[i].map((v, j) => el("td", {},
      j === 0 && D.links[i] ? el("a", {href: D.links[i]}, v) : (typeof v === "number" && !Number.isInteger(v) ? v.toFixed(3) : fmt(v)))))));
  }
  filter.addEventListener("input", draw); draw();
}
(async () => {
  if (D.Tz) T = await inflate(D.Tz);
  if (D.kind === "sweep") sweepApp(); else trialApp(D.trials);
  document.body.dataset.ready = "1";
})().catch(err => { app.replaceChildren(el("pre", {class: "bad"}, "the viewer could not start: " + err)); });
