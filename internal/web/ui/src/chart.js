// Small charts of the profiler views: series over the trace's time (min and
// max per bucket, from the analyses' decimated series) with a time axis and
// a value axis in units, and horizontal stacked bars on one scale with a
// duration axis. Both put their tick labels in data-xticks / data-yticks
// (the browser tests read them).
import { el, swatch, timeTicks, byteTicks, byteLabel, rateTicks, ticks, dur, pct } from './fmt.js';

// seriesChart: series [{name, color, points: [{time_ns, min, max}]}] over
// [t0, t1] (Unix ns; the axis counts from start, the trace's first event),
// y: 'rate' (bytes/s), 'bytes' or 'count' (yLabel names it).
export function seriesChart({ testid, title, series, t0, t1, start, y = 'count', yLabel = '', height = 150 }) {
  const box = el('div', { class: 'chart', 'data-testid': testid, 'data-state': 'loading' }, title ? el('h4', {}, title) : null);
  const legend = el('div', { class: 'legend' }, series.map((s) => swatch(s.color, s.name)));
  const cv = el('canvas');
  box.append(legend, cv);
  const L = 70, B = 30, T = 8;
  const draw = () => {
    const w = Math.max(300, box.clientWidth - 4), H = height;
    const dpr = devicePixelRatio || 1;
    cv.width = w * dpr; cv.height = H * dpr; cv.style.width = w + 'px'; cv.style.height = H + 'px';
    const c = cv.getContext('2d');
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.clearRect(0, 0, w, H);
    const pw = w - L - 10, ph = H - B - T;
    const ymaxRaw = Math.max(0, ...series.flatMap((s) => s.points.map((p) => p.max)));
    const ymax = Math.max(y === 'count' ? 1 : 1e-9, ymaxRaw) * 1.08;
    const span = Math.max(1, t1 - t0);
    const X = (t) => L + (t - t0) / span * pw, Y = (v) => T + ph - v / ymax * ph;
    c.font = '11px system-ui, sans-serif'; c.lineWidth = 1;
    const yl = [], xl = [];
    const yt = y === 'rate' ? rateTicks(ymax, 4) : y === 'bytes' ? byteTicks(0, ymax, 4).map((v) => ({ v, label: byteLabel(v, ymax) }))
      : ticks(0, ymax, 4).filter((v) => Number.isInteger(v)).map((v) => ({ v, label: String(v) }));
    c.textAlign = 'right';
    for (const { v, label } of yt) {
      const yy = Math.round(Y(v)) + 0.5;
      c.strokeStyle = '#eef0f3'; c.beginPath(); c.moveTo(L, yy); c.lineTo(L + pw, yy); c.stroke();
      c.fillStyle = '#333'; c.fillText(label, L - 6, yy + 4);
      yl.push(label);
    }
    for (const s of series) {
      // a step function: each bucket's min..max band, and its max as a line
      c.fillStyle = s.color + '55';
      const pts = s.points;
      pts.forEach((p, k) => {
        const xa = X(p.time_ns), xb = k + 1 < pts.length ? X(pts[k + 1].time_ns) : X(t1);
        c.fillRect(xa, Y(p.max), Math.max(1, xb - xa), Math.max(1, Y(p.min) - Y(p.max)));
      });
      c.strokeStyle = s.color; c.beginPath();
      pts.forEach((p, k) => {
        const xa = X(p.time_ns), xb = k + 1 < pts.length ? X(pts[k + 1].time_ns) : X(t1);
        k ? c.lineTo(xa, Y(p.max)) : c.moveTo(xa, Y(p.max));
        c.lineTo(xb, Y(p.max));
      });
      c.stroke();
    }
    c.strokeStyle = '#888'; c.beginPath(); c.moveTo(L + 0.5, T); c.lineTo(L + 0.5, T + ph); c.lineTo(L + pw, T + ph + 0.5); c.stroke();
    c.fillStyle = '#333'; c.textAlign = 'center';
    for (const { v, label } of timeTicks(t0 - start, t1 - start, Math.floor(pw / 110))) {
      const x = X(v + start);
      c.beginPath(); c.moveTo(x + 0.5, T + ph); c.lineTo(x + 0.5, T + ph + 4); c.stroke();
      c.fillText(label, Math.min(w - 24, Math.max(L + 14, x)), T + ph + 16);
      xl.push(label);
    }
    c.textAlign = 'left'; c.fillStyle = '#666';
    c.fillText('time since the trace start', L, H - 2);
    if (yLabel) { c.save(); c.translate(11, T + ph / 2); c.rotate(-Math.PI / 2); c.textAlign = 'center'; c.fillText(yLabel, 0, 0); c.restore(); }
    box.dataset.xticks = JSON.stringify(xl);
    box.dataset.yticks = JSON.stringify(yl);
    box.dataset.state = 'ready';
  };
  requestAnimationFrame(() => { draw(); new ResizeObserver(draw).observe(box); });
  return box;
}

// stackedBars: rows [{label, parts: [{key, value}], mark, title}], keys
// [{key, name, color}], values in ns, on one scale with a duration axis.
export function stackedBars({ testid, rows, keys, unit = dur }) {
  const color = Object.fromEntries(keys.map((k) => [k.key, k.color]));
  const name = Object.fromEntries(keys.map((k) => [k.key, k.name]));
  const longest = Math.max(1, ...rows.map((r) => r.parts.reduce((a, p) => a + Math.max(0, p.value), 0)));
  const tks = unit === dur ? timeTicks(0, longest, 4) : ticks(0, longest, 4).map((v) => ({ v, label: unit(v) }));
  const box = el('div', { class: 'hbars', 'data-testid': testid, 'data-state': 'ready', 'data-xticks': JSON.stringify(tks.map((t) => t.label)) },
    el('div', { class: 'legend' }, keys.map((k) => swatch(k.color, k.name))),
    rows.map((r) => {
      const tot = r.parts.reduce((a, p) => a + Math.max(0, p.value), 0);
      return el('div', { class: 'hbar' + (r.mark ? ' marked' : ''), title: r.title || null },
        el('span', { class: 'name' }, r.label),
        el('span', { class: 'bar' }, el('span', { class: 'stackbar', style: `width:${(100 * tot / longest).toFixed(2)}%` },
          r.parts.filter((p) => p.value > 0).map((p) => el('span', {
            style: `width:${(100 * p.value / Math.max(1, tot)).toFixed(2)}%;background:${color[p.key]}`,
            title: `${name[p.key]}: ${unit(p.value)} (${pct(p.value / Math.max(1, tot))})`,
          }, p.value / longest > 0.12 ? unit(p.value) : '')))),
        el('span', { class: 'num' }, unit(tot)),
        el('span', { class: 'mark' }, r.mark || ''));
    }),
    el('div', { class: 'hbar axis' }, el('span'), el('span', { class: 'bar ticks' },
      tks.map((t) => el('span', { style: `left:${(100 * t.v / longest).toFixed(2)}%` }, t.label))), el('span'), el('span')));
  return box;
}

// histogram: columns [{label, n}] as bars on one count scale, each with its
// count over it and its label under it.
export function histogram({ testid, cols, unitLabel = '' }) {
  const most = Math.max(1, ...cols.map((c) => c.n));
  return el('div', { class: 'histo', 'data-testid': testid, 'data-state': 'ready', 'data-xticks': JSON.stringify(cols.map((c) => c.label)) },
    el('div', { class: 'histo-cols' }, cols.map((c) => el('div', { class: 'histo-col', title: `${c.label}: ${c.n} ${unitLabel}` },
      el('span', { class: 'histo-n' }, c.n ? String(c.n) : ''),
      el('span', { class: 'histo-bar', style: `height:${(100 * c.n / most).toFixed(1)}%` })))),
    el('div', { class: 'histo-labels' }, cols.map((c) => el('span', {}, c.label))));
}
