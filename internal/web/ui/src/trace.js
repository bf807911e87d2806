// Profiler views: overview (steps, breakdown, GPU utilisation, findings),
// operators, kernels, and the trace timeline (lanes per thread and stream).
import { get } from './data.js';
import { el, bytes, exact, dur, pct, keyColor } from './fmt.js';
import { table } from './table.js';
import { findingsList } from './findings.js';

export function traceOverview(r, input, s) {
  const node = el('div', { class: 'overview', 'data-testid': 'trace-overview', 'data-state': 'ready' });
  const row = (k, v) => el('tr', {}, el('th', {}, k), el('td', {}, v));
  node.append(el('h3', {}, `Rank ${r.rank}${r.world_size ? ' of ' + r.world_size : ''}: ${exact(r.events)} events, ${(r.steps || []).length} steps`),
    el('table', { class: 'kv' },
      row('average step', dur(r.average_step_ns)),
      row('GPU utilisation', pct(r.gpu_utilization_ratio)),
      row('SM efficiency (est.)', pct(r.sm_efficiency_ratio)),
      row('achieved occupancy (est.)', pct(r.achieved_occupancy_ratio)),
      row('tensor-core kernel time', pct(r.tensor_core_ratio)),
      row('dataloader share', pct(r.dataloader_ratio)),
      row('step time variation', pct(r.step_time_variation_ratio))));
  const b = r.average_breakdown || {};
  const parts = Object.entries(b).filter(([, v]) => typeof v === 'number' && v > 0);
  const tot = parts.reduce((s, [, v]) => s + v, 0) || 1;
  node.append(el('h4', {}, 'Average step time breakdown'),
    el('div', { class: 'stackbar' }, parts.map(([k, v]) => el('span', { style: `width:${100 * v / tot}%;background:${keyColor(k.length * 7 + k.charCodeAt(0))}`, title: `${k}: ${dur(v)}` }, v / tot > 0.08 ? k.replace(/_ns$/, '') : ''))),
    el('table', { class: 'kv' }, parts.map(([k, v]) => row(k.replace(/_ns$/, ''), `${dur(v)} (${pct(v / tot)})`))));
  if (r.steps && r.steps.length) {
    node.append(el('h4', {}, 'Steps'), table(r.steps.map((s) => ({ ...s })), [
      { key: 'name', label: 'step' }, { key: 'duration_ns', label: 'duration', num: true, fmt: dur },
      { key: 'host_duration_ns', label: 'host', num: true, fmt: dur }, { key: 'gpu_utilization_ratio', label: 'GPU util', num: true, fmt: pct },
      { key: 'gpu_events', label: 'GPU events', num: true, fmt: exact }], { sort: 'name', desc: false, testid: 'step-table' }));
  }
  if (input != null) node.append(memoryCurve(input, s));
  node.append(findingsList(r.findings || [], (f) => {
    const v = f.at && f.at.view;
    const q = new URLSearchParams(location.search);
    if (v === 'operators' || v === 'kernels') { q.set('view', v); location.search = '?' + q; }
    else document.querySelector('[data-testid=trace-timeline]')?.scrollIntoView();
  }));
  return node;
}

// memoryCurve draws each GPU's allocated/reserved bytes from the profiler's
// memory events, min/max per pixel column from the server.
function memoryCurve(input, s) {
  const box = el('div', { class: 'memcurve', 'data-testid': 'trace-memory', 'data-state': 'loading' }, el('h4', {}, 'GPU memory (profiler memory events)'));
  get('trace/memory', { input, t0: s.start_ns, t1: s.end_ns, w: 900 }).then((m) => {
    if (!m.devices.length) box.append(el('p', { class: 'muted' }, 'no memory events (record with profile_memory=True)'));
    for (const d of m.devices) {
      const cv = el('canvas', { width: 900, height: 140 });
      const ymax = Math.max(1, ...d.columns.map((p) => p[3]));
      box.append(el('p', { class: 'muted' }, `GPU ${d.device}: up to ${bytes(Math.max(...d.columns.map((p) => p[1])))} allocated, ${bytes(ymax)} reserved`), cv);
      const c = cv.getContext('2d');
      const Y = (v) => 135 - v / ymax * 130;
      for (const [lo, hi, color] of [[2, 3, '#e8a39b'], [0, 1, '#2c7fb8']]) {
        c.fillStyle = color;
        d.columns.forEach((p, k) => { c.fillRect(k, Y(p[hi]), 1, Math.max(1, Y(p[lo]) - Y(p[hi]))); });
      }
    }
    box.dataset.state = 'ready';
  }).catch((e) => box.append(el('p', { class: 'error' }, e.message)));
  return box;
}

export function operatorTable(r) {
  const rows = (r.operators || []).map((o) => ({ ...o, input_shapes: o.input_shapes || '' }));
  return el('div', {}, el('h3', {}, `Operators (${rows.length})`), table(rows, [
    { key: 'name', label: 'operator' }, { key: 'calls', label: 'calls', num: true, fmt: exact },
    { key: 'device_self_ns', label: 'device self', num: true, fmt: dur }, { key: 'device_total_ns', label: 'device total', num: true, fmt: dur },
    { key: 'host_self_ns', label: 'host self', num: true, fmt: dur }, { key: 'host_total_ns', label: 'host total', num: true, fmt: dur },
    { key: 'tensor_core_eligible', label: 'TC eligible', fmt: (v) => v ? 'yes' : '' },
    { key: 'tensor_core_self_ns', label: 'on tensor cores', num: true, fmt: dur },
    { key: 'input_shapes', label: 'shapes' }], { sort: 'device_self_ns', testid: 'operator-table' }));
}

export function kernelTable(r) {
  const rows = (r.kernels || []).map((k) => ({ ...k, top_operator: k.top_operator || '' }));
  return el('div', {}, el('h3', {}, `Kernels (${rows.length})`), table(rows, [
    { key: 'name', label: 'kernel' }, { key: 'calls', label: 'calls', num: true, fmt: exact },
    { key: 'total_ns', label: 'total', num: true, fmt: dur }, { key: 'mean_ns', label: 'mean', num: true, fmt: dur },
    { key: 'max_ns', label: 'max', num: true, fmt: dur },
    { key: 'mean_blocks_per_sm', label: 'blocks/SM', num: true, fmt: (v) => v ? v.toFixed(2) : '' },
    { key: 'mean_occupancy_ratio', label: 'occupancy', num: true, fmt: pct },
    { key: 'tensor_core', label: 'tensor cores', fmt: (v) => v ? 'yes' : '' },
    { key: 'top_operator', label: 'launched by' }], { sort: 'total_ns', testid: 'kernel-table' }));
}

// traceTimeline draws lanes (GPU streams first) with every event a pixel
// wide on its own and the rest as merged busy runs; wheel zooms, drag pans.
export function traceTimeline(body, input, s) {
  const ROW = 12, LABEL = 170;
  const lanes = s.lanes || [];
  const depthCap = 12;
  const offs = [];
  let y = 0;
  for (const l of lanes) { offs.push(y); y += Math.min(depthCap, Math.max(1, l.depth)) * ROW + 6; }
  const H = Math.min(2400, y + 20);
  const canvas = el('canvas', { class: 'plot' });
  const info = el('div', { class: 'plotinfo' });
  const node = el('div', { class: 'tracetl', 'data-testid': 'trace-timeline', 'data-state': 'loading' }, el('h4', {}, 'Trace timeline (wheel: zoom, drag: pan, click: event)'), canvas, info);
  body.append(node);
  const vp = { t0: s.start_ns, t1: Math.max(s.end_ns, s.start_ns + 1) };
  let data = null, seq = 0;
  const W = () => Math.max(200, node.clientWidth - 4);
  async function refresh() {
    const my = ++seq;
    const w = W() - LABEL;
    let v;
    try { v = await get('trace/view', { input, t0: Math.floor(vp.t0), t1: Math.ceil(vp.t1), w }); } catch (e) { info.textContent = 'error: ' + e.message; node.dataset.state = 'error'; return; }
    if (my !== seq) return;
    data = v; draw();
    node.dataset.state = 'ready';
  }
  const X = (t) => LABEL + (t - vp.t0) / (vp.t1 - vp.t0) * (W() - LABEL);
  function draw() {
    const w = W();
    canvas.width = w * devicePixelRatio; canvas.height = H * devicePixelRatio;
    canvas.style.width = w + 'px'; canvas.style.height = H + 'px';
    const c = canvas.getContext('2d');
    c.setTransform(devicePixelRatio, 0, 0, devicePixelRatio, 0, 0);
    c.clearRect(0, 0, w, H);
    c.font = '10px sans-serif';
    lanes.forEach((l, k) => { c.fillStyle = '#333'; c.fillText(l.name.slice(0, 28), 2, offs[k] + 10); c.fillStyle = '#f4f5f7'; c.fillRect(LABEL, offs[k], w - LABEL, Math.min(depthCap, Math.max(1, l.depth)) * ROW); });
    c.save(); c.beginPath(); c.rect(LABEL, 0, w - LABEL, H); c.clip();
    const dw = (data.t1_ns - data.t0_ns) / data.width;
    c.fillStyle = '#9aa3ad';
    for (const [lane, depth, c0, c1] of data.merged) {
      if (depth >= depthCap) continue;
      const xa = X(data.t0_ns + c0 * dw), xb = X(data.t0_ns + (c1 + 1) * dw);
      c.fillRect(xa, offs[lane] + depth * ROW, Math.max(1, xb - xa), ROW - 1);
    }
    for (const [lane, depth, ts, d, name] of data.slices) {
      if (depth >= depthCap) continue;
      const xa = X(ts), xb = X(ts + d);
      c.fillStyle = keyColor(name);
      c.fillRect(xa, offs[lane] + depth * ROW, Math.max(1, xb - xa), ROW - 1);
      if (xb - xa > 40) { c.fillStyle = '#000'; c.fillText(String(data.names[name]).slice(0, Math.floor((xb - xa) / 6)), Math.max(LABEL, xa) + 2, offs[lane] + depth * ROW + 9); }
    }
    c.restore();
    info.textContent = `${dur(vp.t1 - vp.t0)} shown · ${exact(data.slices.length)} events drawn, ${exact(data.merged.length)} merged runs`;
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
  window.addEventListener('mouseup', async (ev) => {
    const d = drag; drag = null;
    if (!d || d.moved || ev.target !== canvas || !data) return;
    const r = canvas.getBoundingClientRect();
    const px = ev.clientX - r.left, py = ev.clientY - r.top;
    const t = vp.t0 + (px - LABEL) / (W() - LABEL) * (vp.t1 - vp.t0);
    for (const [lane, depth, ts, du, name, idx] of data.slices) {
      const y0 = offs[lane] + depth * ROW;
      if (py >= y0 && py < y0 + ROW && t >= ts && t <= ts + du) {
        let text = `${data.names[name]} · ${dur(du)}`;
        try { const e = await get('trace/event', { input, event: idx }); text += ` · ${e.kind}` + (e.input_shapes ? ' · shapes ' + e.input_shapes : '') + (e.grid ? ` · grid ${e.grid} block ${e.block}` : ''); } catch (err) { /* offline file */ }
        info.textContent = text;
        return;
      }
    }
  });
  refresh();
}

// distributedView puts the ranks (every trace input) side by side: step
// time and its spread, the slowest rank, GPU utilisation, communication
// and how much of it compute hides, and per step the spread across ranks.
export async function distributedView(body, list, cur) {
  // the ranks of the current input's run (bundle), or every trace outside runs
  const traces = list.inputs.filter((i) => i.kind === 'trace' && i.status === 'ready' && (i.run || '') === (cur.run || ''));
  const ranks = [];
  for (const i of traces) {
    const s = await get('trace/summary', { input: i.id });
    ranks.push({ input: i.id, path: i.path, ...s.result });
  }
  const node = el('div', { 'data-testid': 'distributed', 'data-state': 'ready' });
  if (ranks.length < 2) node.append(el('p', { class: 'muted' }, `${ranks.length} trace loaded: give one trace per rank (a folder or a bundle) to compare ranks.`));
  const steps = ranks.map((r) => r.average_step_ns || 0);
  const med = steps.slice().sort((a, b) => a - b)[Math.floor(steps.length / 2)] || 1;
  const rows = ranks.map((r) => ({
    rank: r.rank, path: r.path.split('/').slice(-2).join('/'), step: r.average_step_ns, vs: (r.average_step_ns || 0) / med - 1,
    util: r.gpu_utilization_ratio, comm: r.communication ? r.communication.total_ns : 0,
    overlap: r.communication ? r.communication.overlap_ratio : 0, exposed: r.communication ? r.communication.exposed_ns : 0,
    data: r.dataloader_ratio, straggler: (r.average_step_ns || 0) > med * 1.05 ? 'straggler' : '',
  }));
  node.append(el('h3', {}, `Ranks (${ranks.length})`), table(rows, [
    { key: 'rank', label: 'rank', num: true }, { key: 'path', label: 'trace' }, { key: 'step', label: 'avg step', num: true, fmt: dur },
    { key: 'vs', label: 'vs median', num: true, fmt: pct }, { key: 'util', label: 'GPU util', num: true, fmt: pct },
    { key: 'comm', label: 'communication', num: true, fmt: dur }, { key: 'overlap', label: 'overlapped', num: true, fmt: pct },
    { key: 'exposed', label: 'exposed comm', num: true, fmt: dur }, { key: 'data', label: 'dataloader', num: true, fmt: pct },
    { key: 'straggler', label: '' }], { sort: 'rank', desc: false, testid: 'rank-table' }));
  // per step number: the spread across ranks
  const byStep = new Map();
  for (const r of ranks) for (const s of r.steps || []) {
    if (!byStep.has(s.number)) byStep.set(s.number, []);
    byStep.get(s.number).push({ rank: r.rank, d: s.duration_ns });
  }
  const skew = [...byStep.entries()].filter(([, v]) => v.length > 1).map(([n, v]) => {
    const ds = v.map((x) => x.d), mx = Math.max(...ds), mn = Math.min(...ds);
    return { step: n, ranks: v.length, min: mn, max: mx, skew: mx - mn, slowest: v.find((x) => x.d === mx).rank };
  });
  if (skew.length) {
    node.append(el('h3', {}, 'Step time across ranks'), table(skew, [
      { key: 'step', label: 'step', num: true }, { key: 'ranks', label: 'ranks', num: true }, { key: 'min', label: 'fastest', num: true, fmt: dur },
      { key: 'max', label: 'slowest', num: true, fmt: dur }, { key: 'skew', label: 'skew', num: true, fmt: dur }, { key: 'slowest', label: 'slowest rank', num: true }],
    { sort: 'skew', testid: 'skew-table' }));
  }
  body.append(node);
}
