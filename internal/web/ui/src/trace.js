// Profiler views: overview (the answers, steps, breakdown, GPU memory,
// findings), operators, kernels, distributed, and the trace timeline
// (lanes per stream and thread, every nesting level, a time axis and step
// bands, a details panel for the clicked event).
import { get } from './data.js';
import { el, bytes, exact, dur, pct, link, swatch, keyColor, byteTicks, byteLabel, timeTicks, reservedColor, fill, at } from './fmt.js';
import { table } from './table.js';
import { findingsList } from './findings.js';
import { stackedBars } from './chart.js';
import { traceAnswers } from './answers.js';

const breakdownColors = { kernel: '#4e79a7', memcpy: '#f28e2b', memset: '#edc948', runtime: '#e15759', dataloader: '#b07aa1',
  cpu_exec: '#76b7b2', other: '#bab0ac', communication: '#59a14f' };
const bdColor = (k) => breakdownColors[k] || keyColor(k.length * 7 + k.charCodeAt(0));

export function traceOverview(r, input, s) {
  const node = el('div', { class: 'overview', 'data-testid': 'trace-overview', 'data-state': 'ready' });
  const scroll = (id) => document.querySelector(`[data-testid=${id}]`)?.scrollIntoView({ behavior: 'smooth', block: 'start' });
  node.append(traceAnswers(r, {
    steps: () => scroll('step-table'), breakdown: () => scroll('breakdown'), timeline: () => scroll('trace-timeline'),
    critical: () => { const q = new URLSearchParams(location.search); q.set('view', 'critical'); location.search = '?' + q; },
    finding: (f) => openFinding(f),
  }));
  const row = (k, v) => el('tr', {}, el('th', {}, k), el('td', { class: 'num' }, v));
  const kv = el('table', { class: 'kv' },
    row('average step', dur(r.average_step_ns)), row('median step', dur(r.median_step_ns)),
    row('GPU utilisation', pct(r.gpu_utilization_ratio)),
    row('SM efficiency (est.)', pct(r.sm_efficiency_ratio)),
    row('achieved occupancy (est.)', pct(r.achieved_occupancy_ratio)),
    row('tensor-core kernel time', pct(r.tensor_core_ratio)),
    row('dataloader share', pct(r.dataloader_ratio)),
    row('step time variation', pct(r.step_time_variation_ratio)));
  const b = r.average_breakdown || {};
  const parts = Object.entries(b).filter(([, v]) => typeof v === 'number' && v > 0).map(([k, v]) => [k.replace(/_ns$/, ''), v]).sort((x, y) => y[1] - x[1]);
  const tot = parts.reduce((a, [, v]) => a + v, 0) || 1;
  const bd = el('div', { 'data-testid': 'breakdown' }, el('h4', {}, `Average step time breakdown (${dur(tot)})`),
    el('div', { class: 'stackbar' }, parts.map(([k, v]) => el('span', { style: `width:${100 * v / tot}%;background:${bdColor(k)}`, title: `${k}: ${dur(v)} (${pct(v / tot)})` }, v / tot > 0.1 ? `${k} ${pct(v / tot)}` : ''))),
    el('div', { class: 'legend' }, parts.map(([k, v]) => swatch(bdColor(k), `${k} ${dur(v)} (${pct(v / tot)})`))));
  // per step, the same breakdown as bars on one duration scale with its
  // axis (the plugin's step time breakdown chart); at most 60 steps
  const steps = (r.steps || []).slice(0, 60);
  if (steps.length > 1) {
    const part = (x) => Object.entries(x.breakdown || {}).filter(([, v]) => typeof v === 'number' && v > 0).map(([k, v]) => ({ key: k.replace(/_ns$/, ''), value: v }));
    const keys = [...new Set(steps.flatMap((x) => part(x).map((p) => p.key)))].map((k) => ({ key: k, name: k, color: bdColor(k) }));
    bd.append(el('h4', {}, 'Per step'), stackedBars({ testid: 'step-bars', keys, rows: steps.map((x) => ({ label: x.name, title: x.name, parts: part(x) })) }));
  }
  node.append(el('h3', {}, `Rank ${r.rank}${r.world_size ? ' of ' + r.world_size : ''}: ${exact(r.events)} events, ${(r.steps || []).length} steps`),
    el('div', { class: 'twocol' }, kv, bd));
  if (r.steps && r.steps.length) {
    node.append(el('h4', {}, 'Steps'), table(r.steps.map((x) => ({ ...x, kernel_ns: (x.breakdown || {}).kernel_ns })), [
      { key: 'name', label: 'step' }, { key: 'duration_ns', label: 'duration', num: true, fmt: dur, bar: true },
      { key: 'host_duration_ns', label: 'host', num: true, fmt: dur }, { key: 'kernel_ns', label: 'kernels', num: true, fmt: dur },
      { key: 'gpu_utilization_ratio', label: 'GPU util', num: true, fmt: pct },
      { key: 'gpu_events', label: 'GPU events', num: true, fmt: exact }], { sort: 'name', desc: false, testid: 'step-table' }));
  }
  if (input != null) node.append(memoryCurve(input, s));
  node.append(findingsList(r.findings || [], openFinding));
  return node;
}

function openFinding(f) {
  const v = f.at && f.at.view;
  const q = new URLSearchParams(location.search);
  if (v === 'operators' || v === 'kernels') { q.set('view', v); location.search = '?' + q; } else document.querySelector('[data-testid=trace-timeline]')?.scrollIntoView();
}

// memoryCurve draws each GPU's allocated and reserved bytes over the trace
// from the profiler's memory events (min/max per pixel column, from the
// server), with a bytes axis and a time axis.
export function memoryCurve(input, s) {
  const box = el('div', { class: 'memcurve', 'data-testid': 'trace-memory', 'data-state': 'loading' }, el('h4', {}, 'GPU memory (profiler memory events)'));
  const L = 66, B = 30, T = 8, H = 170;
  const draw = (m) => {
    box.querySelectorAll('.curve').forEach((x) => x.remove());
    if (!m.devices.length) box.append(el('p', { class: 'muted curve' }, 'no memory events (record with profile_memory=True)'));
    for (const d of m.devices) {
      const w = Math.max(300, box.clientWidth - 4);
      const cv = el('canvas', { class: 'curve' });
      const dpr = devicePixelRatio || 1;
      cv.width = w * dpr; cv.height = H * dpr; cv.style.width = w + 'px'; cv.style.height = H + 'px';
      const amax = Math.max(0, ...d.columns.map((p) => p[1])), rmax = Math.max(0, ...d.columns.map((p) => p[3]));
      box.append(el('div', { class: 'legend curve' }, el('b', {}, `GPU ${d.device}`), swatch('#2c7fb8', `allocated (up to ${bytes(amax)})`), swatch(reservedColor, `reserved (up to ${bytes(rmax)})`, { class: 'sw line' })), cv);
      const c = cv.getContext('2d');
      c.setTransform(dpr, 0, 0, dpr, 0, 0);
      const pw = w - L - 8, ph = H - B - T, ymax = Math.max(1, rmax, amax) * 1.05;
      const X = (k) => L + k / d.columns.length * pw, Y = (v) => T + ph - v / ymax * ph;
      c.font = '11px system-ui, sans-serif'; c.strokeStyle = '#888'; c.fillStyle = '#333'; c.lineWidth = 1;
      c.textAlign = 'right';
      const yl = [], xl = [];
      for (const v of byteTicks(0, ymax, 4)) {
        const y = Math.round(Y(v)) + 0.5;
        c.strokeStyle = '#eef0f3'; c.beginPath(); c.moveTo(L, y); c.lineTo(L + pw, y); c.stroke();
        c.fillText(byteLabel(v, ymax), L - 6, y + 4);
        yl.push(byteLabel(v, ymax));
      }
      // allocated: the band between each column's min and max; reserved: its max
      c.fillStyle = '#2c7fb8';
      d.columns.forEach((p, k) => { if (p[4] || p[1]) c.fillRect(X(k), Y(p[1]), Math.max(1, X(k + 1) - X(k)), Math.max(1, Y(p[0]) - Y(p[1]))); });
      // reserved from the first column with memory events on
      const first = d.columns.findIndex((p) => p[4] > 0);
      c.strokeStyle = reservedColor; c.beginPath();
      d.columns.forEach((p, k) => { if (first < 0 || k < first) return; k === first ? c.moveTo(X(k), Y(p[3])) : c.lineTo(X(k), Y(p[3])); c.lineTo(X(k + 1), Y(p[3])); });
      c.stroke();
      c.strokeStyle = '#888'; c.beginPath(); c.moveTo(L + 0.5, T); c.lineTo(L + 0.5, T + ph); c.lineTo(L + pw, T + ph + 0.5); c.stroke();
      c.fillStyle = '#333'; c.textAlign = 'center';
      const span = m.t1_ns - m.t0_ns;
      for (const { v, label } of timeTicks(0, span, Math.floor(pw / 110))) {
        const x = L + v / span * pw;
        c.beginPath(); c.moveTo(x + 0.5, T + ph); c.lineTo(x + 0.5, T + ph + 4); c.stroke();
        c.fillText(label, Math.min(w - 24, x), T + ph + 16);
        xl.push(label);
      }
      box.dataset.xticks = JSON.stringify(xl);
      box.dataset.yticks = JSON.stringify(yl);
      c.textAlign = 'left'; c.fillStyle = '#666';
      c.fillText('time since the trace start', L, H - 2);
    }
    box.dataset.state = 'ready';
  };
  get('trace/memory', { input, t0: s.start_ns, t1: s.end_ns, w: 1200 }).then((m) => {
    draw(m);
    new ResizeObserver(() => draw(m)).observe(box);
  }).catch((e) => { box.append(el('p', { class: 'error' }, e.message)); box.dataset.state = 'error'; });
  return box;
}

// traceTimeline draws lanes (GPU streams first) with every nesting level,
// every event a pixel wide on its own and the rest as merged busy runs, a
// time axis and step bands; wheel zooms, drag pans, a click opens the
// event's details.
//
// opts: overlay, a row under the axis of segments [{t0, t1, kind, event}]
// (timeline ns) coloured by overlayColors[kind] (the critical path), whose
// events are outlined where the lanes draw them; range, the first
// viewport [t0, t1]; height, the scroll box's CSS max-height. It returns
// {zoomTo(t0, t1), open(event), mark(segment), node}.
export const overlayColors = { cpu: '#e15759', kernel: '#4e79a7', launch_delay: '#f28e2b', kernel_gap: '#bab0ac', sync: '#7a4b94' };
export function traceTimeline(body, input, s, opts = {}) {
  const ROW = 12, LABEL = 180, AXIS = 34, OVER = opts.overlay ? 18 : 0;
  const lanes = s.lanes || [];
  const offs = [];
  const path = opts.overlay || [];
  const onPath = new Set(path.filter((x) => x.event >= 0).map((x) => x.event));
  let marked = null;
  let y = AXIS + 4 + OVER;
  for (const l of lanes) { offs.push(y); y += Math.max(1, l.depth) * ROW + 8; }
  const H = y + 4;
  const canvas = el('canvas', { class: 'plot' });
  const info = el('div', { class: 'plotinfo' });
  const panel = el('div', { class: 'panel', 'data-testid': 'trace-event', 'data-state': 'empty' }, el('p', { class: 'muted' }, 'Click an event for its details.'));
  const reset = el('button', { onclick: () => { vp.t0 = s.start_ns; vp.t1 = Math.max(s.end_ns, s.start_ns + 1); refresh(); } }, 'whole trace');
  const node = el('div', { class: 'tracetl', 'data-testid': 'trace-timeline', 'data-state': 'loading' },
    el('div', { class: 'toolbar' }, el('h4', {}, 'Trace timeline'), reset, el('span', { class: 'muted hint' }, 'wheel: zoom · drag: pan · click: an event\'s details · shaded: the steps as measured (GPU time)')),
    el('div', { class: 'tlscroll', style: opts.height ? `max-height:${opts.height}` : null }, canvas), info, panel);
  body.append(node);
  const vp = { t0: s.start_ns, t1: Math.max(s.end_ns, s.start_ns + 1) };
  if (opts.range) { vp.t0 = Math.max(s.start_ns, opts.range[0]); vp.t1 = Math.min(s.end_ns, Math.max(vp.t0 + 100, opts.range[1])); }
  const steps = (s.result.steps || []).map((x, k) => ({ name: x.name, t0: s.step_bands[k][0], t1: s.step_bands[k][1] }));
  let data = null, seq = 0, sel = null;
  // the width is measured once per draw (X runs for every event drawn)
  let width = 0;
  const measure = () => { width = Math.max(400, node.querySelector('.tlscroll').clientWidth); };
  const W = () => width || (measure(), width);
  async function refresh() {
    const my = ++seq;
    measure();
    const w = W() - LABEL;
    let v;
    try { v = await get('trace/view', { input, t0: Math.floor(vp.t0), t1: Math.ceil(vp.t1), w }); } catch (e) { info.textContent = 'error: ' + e.message; node.dataset.state = 'error'; return; }
    if (my !== seq) return;
    data = v; draw();
    node.dataset.state = 'ready';
  }
  const X = (t) => LABEL + (t - vp.t0) / (vp.t1 - vp.t0) * (W() - LABEL);
  function draw() {
    measure();
    const w = W();
    const dpr = devicePixelRatio || 1;
    canvas.width = w * dpr; canvas.height = H * dpr;
    canvas.style.width = w + 'px'; canvas.style.height = H + 'px';
    const c = canvas.getContext('2d');
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.clearRect(0, 0, w, H);
    c.font = '10px system-ui, sans-serif';
    // step bands behind the lanes, alternating, labelled on the axis
    c.save(); c.beginPath(); c.rect(LABEL, 0, w - LABEL, H); c.clip();
    steps.forEach((st, k) => {
      const xa = X(st.t0), xb = X(st.t1);
      if (xb < LABEL || xa > w) return;
      c.fillStyle = k % 2 ? 'rgba(78,121,167,.07)' : 'rgba(242,142,43,.08)';
      c.fillRect(xa, AXIS, xb - xa, H - AXIS);
      c.strokeStyle = 'rgba(0,0,0,.25)'; c.beginPath(); c.moveTo(Math.round(xa) + 0.5, AXIS); c.lineTo(Math.round(xa) + 0.5, H); c.stroke();
    });
    c.restore();
    lanes.forEach((l, k) => {
      c.fillStyle = '#333'; c.textAlign = 'left';
      c.fillText(l.name.length > 30 ? l.name.slice(0, 29) + '…' : l.name, 2, offs[k] + 10);
      c.fillStyle = '#888'; c.fillText(`${l.depth} level${l.depth === 1 ? '' : 's'}`, 2, offs[k] + 21);
      c.fillStyle = 'rgba(0,0,0,.035)'; c.fillRect(LABEL, offs[k], w - LABEL, Math.max(1, l.depth) * ROW);
    });
    c.save(); c.beginPath(); c.rect(LABEL, AXIS, w - LABEL, H); c.clip();
    const dw = (data.t1_ns - data.t0_ns) / data.width;
    c.fillStyle = '#9aa3ad';
    for (const [lane, depth, c0, c1] of data.merged) {
      const xa = X(data.t0_ns + c0 * dw), xb = X(data.t0_ns + (c1 + 1) * dw);
      c.fillRect(xa, offs[lane] + depth * ROW, Math.max(1, xb - xa), ROW - 1);
    }
    for (const [lane, depth, ts, d, name, idx] of data.slices) {
      const xa = X(ts), xb = X(ts + d);
      c.fillStyle = keyColor(name);
      c.fillRect(xa, offs[lane] + depth * ROW, Math.max(1, xb - xa), ROW - 1);
      if (onPath.has(idx)) { c.strokeStyle = overlayColors.cpu; c.lineWidth = 1.5; c.strokeRect(xa, offs[lane] + depth * ROW + 0.5, Math.max(1, xb - xa), ROW - 2); }
      if (sel === idx) { c.strokeStyle = '#000'; c.lineWidth = 2; c.strokeRect(xa, offs[lane] + depth * ROW, Math.max(1, xb - xa), ROW - 1); }
      // the name in the box's visible part (cut at about 6.5 px a character, so it stays in the box)
      const vis = xb - Math.max(LABEL, xa);
      if (vis > 40) { c.fillStyle = '#000'; c.fillText(String(data.names[name]).slice(0, Math.floor((vis - 4) / 6.5)), Math.max(LABEL, xa) + 2, offs[lane] + depth * ROW + 9); }
    }
    c.restore();
    if (OVER) drawOverlay(c, w);
    // the time axis: since the trace start
    c.fillStyle = '#fff'; c.fillRect(LABEL, 0, w - LABEL, AXIS);
    c.strokeStyle = '#888'; c.fillStyle = '#333'; c.textAlign = 'center'; c.lineWidth = 1;
    c.beginPath(); c.moveTo(LABEL, AXIS - 0.5); c.lineTo(w, AXIS - 0.5); c.stroke();
    const xl = [];
    for (const { v, label } of timeTicks(vp.t0 - s.start_ns, vp.t1 - s.start_ns, Math.floor((w - LABEL) / 110))) {
      const x = X(v + s.start_ns);
      xl.push(label);
      c.beginPath(); c.moveTo(x + 0.5, AXIS - 5); c.lineTo(x + 0.5, AXIS); c.stroke();
      c.fillText(label, Math.min(w - 26, Math.max(LABEL + 20, x)), AXIS - 8);
    }
    node.dataset.xticks = JSON.stringify(xl);
    c.textAlign = 'left'; c.fillStyle = '#666'; c.fillText('time since the trace start', 2, AXIS - 8);
    c.save(); c.beginPath(); c.rect(LABEL, 0, w - LABEL, AXIS); c.clip();
    steps.forEach((st, k) => {
      const xa = X(st.t0), xb = X(st.t1);
      if (xb < LABEL || xa > w) return;
      c.fillStyle = k % 2 ? 'rgba(78,121,167,.18)' : 'rgba(242,142,43,.2)';
      c.fillRect(xa, 0, xb - xa, 13);
      if (xb - Math.max(LABEL, xa) > 60) { c.fillStyle = '#333'; c.fillText(st.name, Math.max(LABEL, xa) + 3, 10); }
    });
    c.restore();
    info.textContent = `${dur(vp.t1 - vp.t0)} shown · ${exact(data.slices.length)} events drawn on their own, ${exact(data.merged.length)} merged runs`;
  }
  // the overlay row: each segment at least a pixel wide, the marked one
  // outlined; a sync (no duration) is a tick
  function drawOverlay(c, w) {
    const y0 = AXIS + 3;
    c.fillStyle = '#333'; c.textAlign = 'left'; c.fillText(opts.overlayLabel || 'critical path', 2, y0 + 10);
    c.save(); c.beginPath(); c.rect(LABEL, y0, w - LABEL, OVER); c.clip();
    c.fillStyle = '#f4f5f7'; c.fillRect(LABEL, y0, w - LABEL, OVER - 4);
    for (const sg of path) {
      const xa = X(sg.t0), xb = X(sg.t1);
      if (xb < LABEL || xa > w) continue;
      c.fillStyle = overlayColors[sg.kind] || '#999';
      c.fillRect(xa, y0, Math.max(1, xb - xa), OVER - 4);
    }
    if (marked) {
      const xa = X(marked.t0), xb = X(marked.t1);
      c.strokeStyle = '#000'; c.lineWidth = 2; c.strokeRect(xa - 1, y0, Math.max(2, xb - xa + 2), OVER - 4);
    }
    c.restore();
  }
  canvas.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    const r = canvas.getBoundingClientRect();
    const t = vp.t0 + (ev.clientX - r.left - LABEL) / (W() - LABEL) * (vp.t1 - vp.t0);
    const f = Math.exp(Math.sign(ev.deltaY) * 0.25);
    vp.t0 = Math.max(s.start_ns, t - (t - vp.t0) * f); vp.t1 = Math.min(s.end_ns, t + (vp.t1 - t) * f);
    if (vp.t1 - vp.t0 < 100) vp.t1 = vp.t0 + 100;
    refresh();
  }, { passive: false });
  let drag = null;
  canvas.addEventListener('mousedown', (ev) => { drag = { x: ev.clientX, t0: vp.t0, t1: vp.t1, moved: false }; });
  window.addEventListener('mousemove', (ev) => {
    if (!drag) return;
    const dx = ev.clientX - drag.x;
    if (Math.abs(dx) > 3) drag.moved = true;
    if (!drag.moved) return;
    const sh = -dx / (W() - LABEL) * (drag.t1 - drag.t0);
    vp.t0 = drag.t0 + sh; vp.t1 = drag.t1 + sh; refresh();
  });
  window.addEventListener('mouseup', (ev) => {
    const d = drag; drag = null;
    if (!d || d.moved || ev.target !== canvas || !data) return;
    const r = canvas.getBoundingClientRect();
    const px = ev.clientX - r.left, py = ev.clientY - r.top;
    const t = vp.t0 + (px - LABEL) / (W() - LABEL) * (vp.t1 - vp.t0);
    const slack = 3 / (W() - LABEL) * (vp.t1 - vp.t0);
    if (OVER && py >= AXIS + 3 && py < AXIS + OVER) {
      let best = null;
      for (const sg of path) if (t >= sg.t0 - slack && t <= sg.t1 + slack && (!best || Math.abs((sg.t0 + sg.t1) / 2 - t) < Math.abs((best.t0 + best.t1) / 2 - t))) best = sg;
      if (best) { mark(best); if (opts.onOverlay) opts.onOverlay(best); if (best.event >= 0) open(best.event); return; }
    }
    for (const [lane, depth, ts, du, , idx] of data.slices) {
      const y0 = offs[lane] + depth * ROW;
      if (py >= y0 && py < y0 + ROW && t >= ts - slack && t <= ts + du + slack) { open(idx); return; }
    }
    fill(panel, el('p', { class: 'muted' }, `Nothing drawn on its own here (${dur(t - s.start_ns)} in): zoom in to separate merged events.`));
  });
  // open shows an event's details: name, duration, arguments, the events
  // it runs in, and the GPU work it launched (or that launched it)
  async function open(idx) {
    sel = idx; draw();
    panel.dataset.state = 'loading';
    let e;
    try { e = await get('trace/event', { input, event: idx }); } catch (err) {
      fill(panel, el('p', { class: 'error' }, err.message)); panel.dataset.state = 'error'; return;
    }
    const row = (k, v) => v == null || v === '' ? null : el('tr', {}, el('th', {}, k), el('td', {}, v));
    const ref = (x) => el('li', {}, link(x.name, () => { focus(x); open(x.index); }, { class: 'code' }), el('span', { class: 'muted' }, ` ${x.kind} · ${dur(x.duration_ns)} at ${dur(x.start_ns - s.start_ns)}`));
    fill(panel,
      el('h3', {}, e.name),
      el('table', { class: 'kv' },
        row('kind', `${e.kind} (${e.category})`), row('duration', dur(e.duration_ns)), row('start', `${at(e.start_ns - s.start_ns)} since the trace start`),
        row('thread / stream', e.thread), row('input shapes', e.input_shapes), row('input types', e.input_types),
        row('grid, block', e.grid ? `${e.grid}, ${e.block}` : null), row('registers / thread', e.registers_per_thread), row('shared memory', e.shared_memory_bytes ? bytes(e.shared_memory_bytes) : null),
        row('occupancy (est.)', e.occupancy_percent ? e.occupancy_percent + '%' : null), row('blocks per SM', e.blocks_per_sm ? String(+e.blocks_per_sm.toPrecision(3)) : null),
        row('bytes', e.bytes ? bytes(e.bytes) : null), row('correlation / external id', [e.correlation, e.external_id].filter((x) => x).join(' / '))),
      el('h4', {}, `Runs in (${e.stack.length}, outermost first)`),
      e.stack.length ? el('ol', { class: 'stack' }, e.stack.map(ref)) : el('p', { class: 'muted' }, 'a top-level event'),
      el('h4', {}, e.kind === 'kernel' || e.kind.startsWith('gpu_') ? 'Launched by' : `GPU work launched (${e.linked_total})`),
      e.linked.length ? el('ul', { class: 'stack' }, e.linked.map(ref)) : el('p', { class: 'muted' }, 'none'),
      e.linked_total > e.linked.length ? el('p', { class: 'muted' }, `first ${e.linked.length} of ${e.linked_total}`) : null);
    panel.dataset.state = 'ready';
  }
  // focus zooms so that event x is in view (kept if it already is)
  function focus(x) {
    if (x.start_ns >= vp.t0 && x.start_ns + x.duration_ns <= vp.t1) return;
    const pad = Math.max(x.duration_ns, 1000) * 2;
    vp.t0 = Math.max(s.start_ns, x.start_ns - pad); vp.t1 = Math.min(s.end_ns, x.start_ns + x.duration_ns + pad);
    refresh();
  }
  // zoomTo shows [t0, t1] (timeline ns) with a margin, and the timeline
  function zoomTo(t0, t1) {
    const pad = Math.max((t1 - t0) * 0.5, 2000);
    vp.t0 = Math.max(s.start_ns, t0 - pad); vp.t1 = Math.min(s.end_ns, Math.max(vp.t0 + 100, t1 + pad));
    node.scrollIntoView({ block: 'nearest' });
    return refresh();
  }
  function mark(sg) { marked = sg; if (data) draw(); }
  const api = { open, vp, offs, ROW, LABEL, AXIS, OVER, zoomTo, mark, node };
  window.__ptscope.traceTimeline = api;
  refresh();
  return api;
}
