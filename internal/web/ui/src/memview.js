// The memory timeline: allocated/reserved curves, every block at least a
// pixel in both directions drawn on its own at its stacking offsets (from
// the server), the rest as the band under the allocated curve; zoom (wheel;
// shift+wheel for bytes), pan (drag), click for a block's stack.
import { get, decodeView, colEntry, htmlMode, sentBytes } from './data.js';
import { bytes, exact, dur, el, categoryColors, phaseColors, keyColor } from './fmt.js';

const AXIS_L = 64, AXIS_B = 34, PHASE_H = 6;

export class MemoryTimeline {
  constructor(root, ctx) {
    this.ctx = ctx; // {input, device, summary, onBlock, highlight}
    this.color = 'category';
    this.canvas = el('canvas', { class: 'plot' });
    this.info = el('div', { class: 'plotinfo' });
    this.node = el('div', { class: 'timeline', 'data-testid': 'memory-timeline', 'data-state': 'loading' }, this.canvas, this.info);
    root.append(this.node);
    const n = ctx.summary.entries;
    this.vp = { x0: 0, x1: n, y0: 0, y1: null };
    this.seq = 0;
    this.data = null;
    this.requests = 0;
    this.lastBytes = 0;
    this.installEvents();
    new ResizeObserver(() => this.refresh()).observe(this.node);
  }

  size() {
    const r = this.node.getBoundingClientRect();
    return { w: Math.max(50, Math.floor(r.width)), h: 420 };
  }

  plotW() { return this.size().w - AXIS_L; }
  plotH() { return this.size().h - AXIS_B - PHASE_H; }

  setHighlight(hl) { this.ctx.highlight = hl; this.refresh(); }
  setColor(c) { this.color = c; this.refresh(); }

  zoomTo(x0, x1) {
    const n = this.ctx.summary.entries;
    x0 = Math.max(0, Math.floor(x0)); x1 = Math.min(n, Math.ceil(x1));
    if (x1 <= x0) x1 = Math.min(n, x0 + 1);
    if (x1 <= x0) x0 = x1 - 1;
    this.vp.x0 = x0; this.vp.x1 = x1;
    this.refresh();
  }

  async refresh() {
    const my = ++this.seq;
    const t0 = performance.now();
    const pw = Math.max(1, Math.floor(this.plotW()));
    const ph = Math.max(1, Math.floor(this.plotH()));
    const p = { input: this.ctx.input, device: this.ctx.device, x0: this.vp.x0, x1: this.vp.x1, w: pw, h: ph, color: this.color };
    if (this.vp.y1 != null) { p.y0 = Math.floor(this.vp.y0); p.y1 = Math.ceil(this.vp.y1); }
    if (this.ctx.highlight) p.hl = this.ctx.highlight;
    let buf;
    try {
      buf = await get('mem/view', p, true);
    } catch (e) {
      if (my === this.seq) this.fail(e);
      return;
    }
    if (my !== this.seq) return; // a newer request superseded this one
    this.data = decodeView(buf);
    this.requests++;
    this.lastBytes = this.data.bytes;
    this.lastSent = sentBytes('mem/view');
    this.lastFetchMS = performance.now() - t0;
    this.draw();
    this.lastDrawMS = performance.now() - t0 - this.lastFetchMS;
    this.node.dataset.state = 'ready';
    this.node.dataset.blocks = this.data.nblocks;
    window.__ptscope.timings.memoryTimeline ??= performance.now();
    window.__ptscope.lastView = { bytes: this.lastBytes, sent: this.lastSent, fetchMS: this.lastFetchMS, drawMS: this.lastDrawMS, blocks: this.data.nblocks, x0: this.vp.x0, x1: this.vp.x1 };
  }

  fail(e) {
    this.node.dataset.state = 'error';
    this.info.textContent = 'error: ' + e.message;
  }

  yRange() {
    const d = this.data;
    return this.vp.y1 != null ? [this.vp.y0, this.vp.y1] : [d.y0, d.y1];
  }

  X(e) { return AXIS_L + (e - this.vp.x0) / (this.vp.x1 - this.vp.x0) * this.plotW(); }
  Y(b) { const [y0, y1] = this.yRange(); return this.plotH() - (b - y0) / (y1 - y0) * this.plotH(); }

  draw() {
    const d = this.data, c = this.canvas.getContext('2d');
    const { w, h } = this.size();
    if (this.canvas.width !== w * devicePixelRatio || this.canvas.height !== h * devicePixelRatio) {
      this.canvas.width = w * devicePixelRatio; this.canvas.height = h * devicePixelRatio;
      this.canvas.style.width = w + 'px'; this.canvas.style.height = h + 'px';
    }
    const W = w, H = this.plotH();
    c.setTransform(devicePixelRatio, 0, 0, devicePixelRatio, 0, 0);
    c.clearRect(0, 0, W, this.size().h);
    c.save();
    c.beginPath(); c.rect(AXIS_L, 0, W - AXIS_L, H); c.clip();
    // the band: allocated min/max per column
    for (let k = 0; k < d.cols; k++) {
      const xa = this.X(colEntry(d, k)), xb = Math.max(xa + 1, this.X(colEntry(d, k + 1)));
      if (xb < AXIS_L || xa > W) continue;
      c.fillStyle = '#c3c8d1';
      c.fillRect(xa, this.Y(d.allocMin[k]), xb - xa, H - this.Y(d.allocMin[k]));
      c.fillStyle = '#dde1e7';
      c.fillRect(xa, this.Y(d.allocMax[k]), xb - xa, this.Y(d.allocMin[k]) - this.Y(d.allocMax[k]));
    }
    // blocks
    const hl = !!this.ctx.highlight;
    const cats = this.ctx.summary.categories;
    for (const b of d.blocks) {
      const color = this.color === 'category' ? (categoryColors[cats[b.cat]] || '#999') : keyColor(b.key);
      c.fillStyle = color;
      c.globalAlpha = hl && !(b.flags & 1) ? 0.25 : 1;
      const bs = this.X(colEntry(d, b.c0)), be = this.X(colEntry(d, b.c1));
      for (let e = 0; e < b.cols.length; e++) {
        let xa = e === 0 ? bs : this.X(colEntry(d, b.cols[e]));
        let xb = e + 1 < b.cols.length ? this.X(colEntry(d, b.cols[e + 1])) : be;
        xa = Math.max(xa, bs); xb = Math.min(xb, be);
        if (xb < AXIS_L || xa > W) continue;
        const yt = this.Y(b.offs[e] + b.size), yb = this.Y(b.offs[e]);
        c.fillRect(xa, yt, Math.max(1, xb - xa), Math.max(1, yb - yt));
      }
    }
    c.globalAlpha = 1;
    // highlighted bytes per column (small blocks included)
    if (d.hl) {
      c.strokeStyle = '#111'; c.lineWidth = 1.5; c.beginPath();
      for (let k = 0; k < d.cols; k++) {
        const xa = this.X(colEntry(d, k)), xb = this.X(colEntry(d, k + 1));
        k === 0 ? c.moveTo(xa, this.Y(d.hl[k])) : c.lineTo(xa, this.Y(d.hl[k]));
        c.lineTo(xb, this.Y(d.hl[k]));
      }
      c.stroke();
    }
    // reserved
    c.strokeStyle = '#c0392b'; c.lineWidth = 1; c.beginPath();
    for (let k = 0; k < d.cols; k++) {
      const xa = this.X(colEntry(d, k)), xb = this.X(colEntry(d, k + 1));
      k === 0 ? c.moveTo(xa, this.Y(d.resMax[k])) : c.lineTo(xa, this.Y(d.resMax[k]));
      c.lineTo(xb, this.Y(d.resMax[k]));
    }
    c.stroke();
    // steps
    const steps = (this.ctx.summary.result.steps || []).filter((s) => s.end_index > this.vp.x0 && s.start_index < this.vp.x1);
    if (steps.length <= 64) {
      c.strokeStyle = 'rgba(0,0,0,.35)'; c.setLineDash([3, 3]); c.fillStyle = '#333'; c.font = '10px sans-serif';
      for (const s of steps) {
        const x = this.X(s.start_index);
        c.beginPath(); c.moveTo(x, 0); c.lineTo(x, H); c.stroke();
        if (steps.length <= 16) c.fillText(s.name, x + 3, 10);
      }
      c.setLineDash([]);
    }
    c.restore();
    // phase strip
    const phases = this.ctx.summary.phases;
    for (let k = 0; k < d.cols; k++) {
      const xa = this.X(colEntry(d, k)), xb = this.X(colEntry(d, k + 1));
      if (xb < AXIS_L || xa > W) continue;
      c.fillStyle = phaseColors[phases[d.phase[k]]] || '#ddd';
      c.fillRect(Math.max(AXIS_L, xa), H + 1, Math.max(1, xb - Math.max(AXIS_L, xa)), PHASE_H - 1);
    }
    this.axes(c, W, H);
    this.info.textContent = `entries ${exact(this.vp.x0)}–${exact(this.vp.x1)} · ${exact(d.nblocks)} blocks drawn, ${exact(d.summarized)} in the band (under ${bytes(d.minBytes)} or a pixel) · ${(d.bytes / 1024).toFixed(1)} KB` +
      (this.lastSent ? ` (${(this.lastSent / 1024).toFixed(1)} KB sent)` : '') +
      (htmlMode ? ' · offline file: detail stops at its deepest level; use ptscope serve for more' : '');
  }

  axes(c, W, H) {
    c.fillStyle = '#333'; c.strokeStyle = '#999'; c.font = '11px sans-serif'; c.textAlign = 'right';
    const [y0, y1] = this.yRange();
    for (let k = 0; k <= 4; k++) {
      const v = y0 + (y1 - y0) * k / 4, y = this.Y(v);
      c.fillText(bytes(v), AXIS_L - 4, Math.max(10, y + 4));
      c.beginPath(); c.moveTo(AXIS_L - 2, y); c.lineTo(AXIS_L, y); c.stroke();
    }
    c.textAlign = 'center';
    const n = Math.max(2, Math.floor((W - AXIS_L) / 110));
    for (let k = 0; k <= n; k++) {
      const e = this.vp.x0 + (this.vp.x1 - this.vp.x0) * k / n, x = this.X(e);
      c.fillText(exact(Math.floor(e)), Math.min(W - 30, Math.max(AXIS_L + 20, x)), H + PHASE_H + 14);
    }
    c.textAlign = 'left';
    c.fillText('trace entry', AXIS_L, H + PHASE_H + 28);
  }

  // entry and bytes under a mouse position
  at(ev) {
    const r = this.canvas.getBoundingClientRect();
    const px = ev.clientX - r.left, py = ev.clientY - r.top;
    const e = this.vp.x0 + (px - AXIS_L) / this.plotW() * (this.vp.x1 - this.vp.x0);
    const [y0, y1] = this.data ? this.yRange() : [0, 1];
    const b = y0 + (this.plotH() - py) / this.plotH() * (y1 - y0);
    return { px, py, e, b };
  }

  installEvents() {
    const cv = this.canvas;
    cv.addEventListener('wheel', (ev) => {
      ev.preventDefault();
      if (!this.data) return;
      const { e, b } = this.at(ev);
      const f = Math.exp(Math.sign(ev.deltaY) * 0.25);
      if (ev.shiftKey) {
        const [y0, y1] = this.yRange();
        this.vp.y0 = Math.max(0, b - (b - y0) * f); this.vp.y1 = b + (y1 - b) * f;
        this.refresh();
        return;
      }
      this.zoomTo(e - (e - this.vp.x0) * f, e + (this.vp.x1 - e) * f);
    }, { passive: false });
    let drag = null;
    cv.addEventListener('mousedown', (ev) => { drag = { x: ev.clientX, y: ev.clientY, vp: { ...this.vp }, moved: false }; });
    window.addEventListener('mousemove', (ev) => {
      if (!drag) return;
      const dx = ev.clientX - drag.x;
      if (Math.abs(dx) > 3) drag.moved = true;
      if (!drag.moved) return;
      const span = drag.vp.x1 - drag.vp.x0;
      const shift = -dx / this.plotW() * span;
      const n = this.ctx.summary.entries;
      const x0 = Math.max(0, Math.min(n - span, drag.vp.x0 + shift));
      this.vp.x0 = Math.floor(x0); this.vp.x1 = Math.floor(x0 + span);
      this.refresh();
    });
    window.addEventListener('mouseup', (ev) => {
      if (drag && !drag.moved && ev.target === cv) this.click(ev);
      drag = null;
    });
    cv.addEventListener('dblclick', () => { this.vp = { x0: 0, x1: this.ctx.summary.entries, y0: 0, y1: null }; this.refresh(); });
  }

  // hitLocal finds a drawn block under (entry, bytes) in a view that
  // carries block ids (--html files; the server hit-tests clicks itself).
  hitLocal(e, by) {
    const d = this.data;
    if (!d.hasIds) return -1;
    for (const b of d.blocks) {
      if (e < colEntry(d, b.c0) || e >= colEntry(d, b.c1)) continue;
      let k = 0;
      for (let j = 0; j < b.cols.length; j++) if (colEntry(d, b.cols[j]) <= e) k = j;
      if (by >= b.offs[k] && by < b.offs[k] + b.size) return b.id;
    }
    return -1;
  }

  async click(ev) {
    if (!this.data) return;
    const { e, b } = this.at(ev);
    if (e < 0 || e >= this.ctx.summary.entries) return;
    const id = this.hitLocal(e, b);
    try {
      if (id >= 0) { this.ctx.onBlock(id); return; }
      const r = await get('mem/hit', { input: this.ctx.input, device: this.ctx.device, event: Math.floor(e), y: Math.floor(b) });
      if (r.id >= 0) this.ctx.onBlock(r.id, r.block);
    } catch (err) {
      this.info.textContent = 'error: ' + err.message;
    }
  }
}

// blockPanel fills the click panel with a block's details.
export function blockPanel(node, b, actions) {
  node.replaceChildren();
  node.dataset.state = 'ready';
  const row = (k, v) => el('tr', {}, el('th', {}, k), el('td', {}, v));
  const when = (i, t) => i < 0 ? 'before the recording' : `entry ${exact(i)}` + (t ? ` (${dur(t - actions.startNS)} in)` : '');
  node.append(
    el('h3', {}, `Block ${b.id}: ${bytes(b.size_bytes)} ${b.category}`),
    el('table', { class: 'kv' },
      row('size', `${bytes(b.size_bytes)} (${exact(b.size_bytes)} B; requested ${exact(b.requested_bytes)} B)`),
      row('category', b.category), row('source', b.source), b.module ? row('module', b.module) : null,
      row('step / phase', `${b.step || '-'} / ${b.phase}`), row('stream', String(b.stream)),
      row('address', '0x' + b.address.toString(16)),
      row('allocated', when(b.alloc_event_index, b.alloc_time_ns)),
      row('freed', b.free_requested_event_index < 0 ? 'never (alive at the end)' : when(b.free_requested_event_index, b.free_time_ns)),
      b.lifetime_ns ? row('lifetime', dur(b.lifetime_ns)) : null,
      row('allocated after', bytes(b.allocated_after_alloc_bytes)),
      row('origin', b.origin)),
    el('div', { class: 'actions' },
      el('button', { onclick: () => actions.zoom(b) }, 'zoom to block'),
      b.alloc_event_index >= 0 ? el('button', { onclick: () => actions.state(b.alloc_event_index) }, 'allocator state at its allocation') : null),
    el('h4', {}, 'Stack (innermost first; your frame highlighted)'),
    stackList(b.frames));
  if (b.free_frames && b.free_frames.length) node.append(el('h4', {}, 'Freed at'), stackList(b.free_frames));
}

export function stackList(frames) {
  if (!frames || !frames.length) return el('p', { class: 'muted' }, 'no frames recorded');
  return el('ol', { class: 'stack' }, frames.map((f) => el('li', { class: f.user ? 'user' : null }, `${f.filename}:${f.line} `, el('b', {}, f.name))));
}
