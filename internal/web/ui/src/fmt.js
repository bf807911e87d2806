// Formatting helpers: sizes in binary units, durations, escaping.
export function bytes(n) {
  if (n == null || !isFinite(n)) return '';
  const a = Math.abs(n);
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0, v = a;
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  const s = i === 0 ? String(v) : v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
  return (n < 0 ? '-' : '') + s + ' ' + u[i];
}

export function exact(n) {
  return Math.round(n).toLocaleString('en-US');
}

export function dur(ns) {
  if (ns == null || !isFinite(ns)) return '';
  const a = Math.abs(ns);
  if (a >= 1e9) return (ns / 1e9).toFixed(2) + ' s';
  if (a >= 1e6) return (ns / 1e6).toFixed(a >= 1e8 ? 0 : 2) + ' ms';
  if (a >= 1e3) return (ns / 1e3).toFixed(a >= 1e5 ? 0 : 1) + ' us';
  return ns + ' ns';
}

export function pct(r) {
  if (r == null || !isFinite(r)) return '';
  return (100 * r).toFixed(1) + '%';
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

// colors for categories (by name), phases, and a hash colour for other keys
export const categoryColors = {
  parameter: '#4e79a7', optimizer_state: '#f28e2b', gradient: '#e15759', activation: '#76b7b2',
  temporary: '#edc948', input: '#b07aa1', allocated_before_recording: '#9c755f', unknown: '#bab0ac',
};
export const phaseColors = {
  unknown: '#ddd', forward: '#8cd17d', backward: '#ff9d9a', optimizer: '#f1ce63', zero_grad: '#a0cbe8', other: '#c9c9c9',
};
export function keyColor(k) {
  let h = (k * 2654435761) >>> 0;
  return `hsl(${h % 360},${55 + (h >> 9) % 25}%,${55 + (h >> 17) % 15}%)`;
}
