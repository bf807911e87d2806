// Formatting helpers: sizes in binary units, durations, axis ticks,
// element building.
const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

export function bytes(n) {
  if (n == null || !isFinite(n)) return '';
  const a = Math.abs(n);
  let i = 0, v = a;
  while (v >= 1024 && i < UNITS.length - 1) { v /= 1024; i++; }
  const s = i === 0 ? String(Math.round(v)) : v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
  return (n < 0 ? '-' : '') + s + ' ' + UNITS[i];
}

export function exact(n) {
  return n == null || !isFinite(n) ? '' : Math.round(n).toLocaleString('en-US');
}

export function dur(ns) {
  if (ns == null || !isFinite(ns)) return '';
  const a = Math.abs(ns);
  if (a >= 1e9) return (ns / 1e9).toFixed(2) + ' s';
  if (a >= 1e6) return (ns / 1e6).toFixed(a >= 1e8 ? 0 : 2) + ' ms';
  if (a >= 1e3) return (ns / 1e3).toFixed(a >= 1e5 ? 0 : 1) + ' us';
  return Math.round(ns) + ' ns';
}

export function pct(r) {
  if (r == null || !isFinite(r)) return '';
  return (100 * r).toFixed(1) + '%';
}

// niceStep is a 1, 2 or 5 times a power of base step that cuts span into
// about n parts.
function niceStep(span, n, base = 10) {
  const raw = span / Math.max(1, n);
  const p = Math.pow(base, Math.floor(Math.log(raw) / Math.log(base)));
  for (const m of [1, 2, 5, 10]) if (p * m >= raw) return p * m;
  return p * 10;
}

// ticks returns about n round values in [lo, hi].
export function ticks(lo, hi, n, step = null) {
  if (!(hi > lo)) return [lo];
  const s = step || niceStep(hi - lo, n);
  const out = [];
  for (let v = Math.ceil(lo / s) * s; v <= hi + s * 1e-9; v += s) out.push(v);
  return out;
}

// byteTicks are round sizes in the unit of the largest (0, 1 GiB, 2 GiB, ...).
export function byteTicks(lo, hi, n) {
  let u = 1;
  while (hi / u >= 1024 && u < 1024 ** 4) u *= 1024;
  return ticks(lo / u, hi / u, n).map((v) => v * u);
}

// byteLabel formats a tick of byteTicks: the same unit for every tick.
export function byteLabel(v, hi) {
  let i = 0, u = 1;
  while (hi / u >= 1024 && i < UNITS.length - 1) { u *= 1024; i++; }
  const x = v / u;
  return (Number.isInteger(Math.round(x * 100) / 100) ? String(Math.round(x)) : String(+x.toFixed(2))) + ' ' + UNITS[i];
}

// timeTicks are round durations in ns (1, 2, 5 x 10^k) within [lo, hi],
// labelled in one unit: that of the largest value, with as many decimals as
// the step needs (zoomed in at 146 ms: 146.1 ms, 146.2 ms, not 146100 us).
export function timeTicks(lo, hi, n) {
  const vs = ticks(lo, hi, n);
  const m = Math.max(Math.abs(lo), Math.abs(hi));
  const [d, u] = m >= 1e9 ? [1e9, 's'] : m >= 1e6 ? [1e6, 'ms'] : m >= 1e3 ? [1e3, 'us'] : [1, 'ns'];
  const step = vs.length > 1 ? vs[1] - vs[0] : Math.max(1, hi - lo);
  const dec = Math.max(0, Math.min(6, Math.ceil(-Math.log10(step / d) - 1e-9)));
  return vs.map((v) => ({ v, label: (v / d).toFixed(dec) + ' ' + u }));
}

export function esc(s) {
  return String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
}

// el builds an element: el('div', {class: 'x', 'data-testid': 'y'}, child...)
export function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'html') e.innerHTML = v;
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids.flat()) {
    if (k == null || k === false) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

// mid shows text cut in the middle when it does not fit its box: the
// start shrinks behind an ellipsis, the end (up to tail characters: a
// file:line, a function, a step's number) stays; the full text is the
// hover title.
export function mid(text, tail = 20) {
  const s = String(text ?? '');
  const k = Math.min(tail, Math.max(0, s.length - 2));
  return el('span', { class: 'mid', title: s }, el('span', { class: 'mid-a' }, s.slice(0, s.length - k)), el('span', { class: 'mid-b' }, el('span', {}, s.slice(s.length - k))));
}

// link is an <a> that runs f instead of navigating.
export function link(text, f, attrs = {}) {
  return el('a', { href: '#', ...attrs, onclick: (e) => { e.preventDefault(); f(e); } }, text);
}

// colors for categories (by name), phases, and a hash colour for other keys
export const categoryColors = {
  parameter: '#4e79a7', optimizer_state: '#f28e2b', gradient: '#e15759', activation: '#76b7b2',
  temporary: '#edc948', input: '#b07aa1', allocated_before_recording: '#9c755f', unknown: '#bab0ac',
};
export const phaseColors = {
  unknown: '#e4e4e4', forward: '#8cd17d', backward: '#ff9d9a', optimizer: '#f1ce63', zero_grad: '#a0cbe8', other: '#c9c9c9',
};
export const bandColor = '#c3c8d1', bandLight = '#dde1e7', reservedColor = '#c0392b', peakColor = '#b00020';
export function keyColor(k) {
  const h = (k * 2654435761) >>> 0;
  return `hsl(${h % 360},${55 + (h >> 9) % 25}%,${52 + (h >> 17) % 16}%)`;
}

// swatch is a legend entry.
export function swatch(color, label, attrs = {}) {
  const text = String(label);
  return el('span', { class: 'sw', title: text, ...attrs }, el('i', { style: `background:${color}` }), text.length > 36 ? mid(text, 22) : text);
}

// fill replaces node's children with kids (nested arrays flattened, null
// and false left out, strings as text).
export function fill(node, ...kids) {
  node.replaceChildren(...kids.flat(Infinity).filter((k) => k != null && k !== false).map((k) => k instanceof Node ? k : document.createTextNode(String(k))));
  return node;
}

// rate formats bytes per second in decimal units (GB/s, as HTA and
// nvidia-smi give bandwidth).
export function rate(bps) {
  if (bps == null || !isFinite(bps)) return '';
  const a = Math.abs(bps);
  const [d, u] = a >= 1e9 ? [1e9, 'GB/s'] : a >= 1e6 ? [1e6, 'MB/s'] : a >= 1e3 ? [1e3, 'KB/s'] : [1, 'B/s'];
  const v = bps / d;
  return (Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2)) + ' ' + u;
}

// rateTicks are round rates within [0, hi], labelled in the unit of hi.
export function rateTicks(hi, n) {
  const [d, u] = hi >= 1e9 ? [1e9, 'GB/s'] : hi >= 1e6 ? [1e6, 'MB/s'] : hi >= 1e3 ? [1e3, 'KB/s'] : [1, 'B/s'];
  return ticks(0, hi / d, n).map((v) => ({ v: v * d, label: +v.toFixed(6) + ' ' + u }));
}

// at formats an instant (ns since the trace start) to the microsecond.
export function at(ns) {
  if (ns == null || !isFinite(ns)) return '';
  const a = Math.abs(ns);
  if (a >= 1e9) return (ns / 1e9).toFixed(6) + ' s';
  if (a >= 1e6) return (ns / 1e6).toFixed(3) + ' ms';
  if (a >= 1e3) return (ns / 1e3).toFixed(1) + ' us';
  return Math.round(ns) + ' ns';
}

// durRound formats a round duration without trailing zeros (1 us, 500 us, 10 ms).
export function durRound(ns) {
  const a = Math.abs(ns);
  const [d, u] = a >= 1e9 ? [1e9, 's'] : a >= 1e6 ? [1e6, 'ms'] : a >= 1e3 ? [1e3, 'us'] : [1, 'ns'];
  return +(ns / d).toFixed(3) + ' ' + u;
}
