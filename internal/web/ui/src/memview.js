// The memory timeline: allocated/reserved curves, every block at least a
// pixel in both directions drawn on its own at its stacking offsets (from
// the server), the rest as the band under the allocated curve; a peak
// marker and "go to peak"; a legend that follows the colouring; hover for
// a block's size and name; click for its stack (the nearest block within a
// few pixels, or what is there); zoom (wheel; shift+wheel for bytes), pan
// (drag), keys (p: peak, 0: whole trace, +/-: zoom, arrows: pan).
import { get, decodeView, colEntry, htmlMode, sentBytes } from './data.js';
import {
  bytes, exact, dur, el, link, mid, swatch, ticks, byteTicks, byteLabel, timeTicks,
  categoryColors, phaseColors, keyColor, bandColor, bandLight, reservedColor, peakColor, fill,
} from './fmt.js';

const AXIS_L = 66, AXIS_B = 36, PHASE_H = 8, TOP = 14, HEIGHT = 440;
const NEAR_PX = 6; // a click this close to a block selects it

export const COLORINGS = [['category', 'category'], ['group', 'keyword group'], ['source', 'source line'],
  ['module_group', 'module group'], ['module', 'module'], ['stack', 'stack']];

export class MemoryTimeline {
  constructor(root, ctx) {
    this.ctx = ctx; // {input, device, summary, onBlock(id, details), onNothing(text), highlight}
    this.color = 'category';
    this.axis = 'entries';
    this.names = {}; // colouring -> key -> name
    const s = ctx.summary;
    this.hasTime = s.start_ns > 0 && s.end_ns > s.start_ns;
    this.canvas = el('canvas', { class: 'plot', tabindex: 0 });
    this.tip = el('div', { class: 'tip', 'data-testid': 'timeline-tip', hidden: true });
    this.info = el('div', { class: 'plotinfo' });
    this.legend = el('div', { class: 'legend', 'data-testid': 'legend' });
    this.phaseLegend = el('div', { class: 'legend phases', 'data-testid': 'phase-legend' });
    this.colorSel = el('select', { 'data-testid': 'color-select', onchange: (e) => this.setColor(e.target.value) },
      COLORINGS.map(([v, l]) => el('option', { value: v }, 'colour by ' + l)));
    this.axisSel = el('select', { 'data-testid': 'x-axis', onchange: (e) => { this.axis = e.target.value; this.draw(); } },
      el('option', { value: 'entries' }, 'x: trace entries'), el('option', { value: 'time', disabled: !this.hasTime }, 'x: time'));
    const bar = el('div', { class: 'toolbar' },
      el('button', { class: 'primary', 'data-testid': 'go-to-peak', title: 'key p', onclick: () => this.goToPeak(), disabled: s.result.peak.event_index < 0 }, 'Go to peak (p)'),
      el('button', { title: 'key 0; double-click the plot', onclick: () => this.reset() }, 'Whole trace (0)'),
      this.colorSel, this.axisSel,
      el('span', { class: 'muted hint' }, 'wheel: zoom · shift+wheel: zoom bytes · drag: pan · click: a block\'s stack'));
    this.node = el('div', { class: 'timeline', 'data-testid': 'memory-timeline', 'data-state': 'loading' },
      bar, this.legend, el('div', { class: 'plotbox' }, this.canvas, this.tip), this.phaseLegend, this.info);
    root.append(this.node);
    this.vp = { x0: 0, x1: s.entries, y0: 0, y1: null };
    this.seq = 0;
    this.data = null;
    this.sel = null; // the selected block: {k, id, details}
    this.hover = null;
    this.installEvents();
    new ResizeObserver(() => {
      const w = this.width;
      this.measure();
      if (this.data && this.width !== w) this.refresh();
    }).observe(this.node);
  }

  // measure reads the plot's width from the page (a layout); size() and
  // the coordinate functions use the last measure, so that drawing
  // thousands of blocks asks the page for nothing
  measure() { this.width = Math.max(200, Math.floor(this.node.getBoundingClientRect().width) - 2); }

  size() {
    if (!this.width) this.measure();
    return { w: this.width, h: HEIGHT };
  }

  plotW() { return this.size().w - AXIS_L - 8; }
  // plotRect is the plot's box in page coordinates (for tests and tools)
  plotRect() { const r = this.canvas.getBoundingClientRect(); return { left: r.left + AXIS_L, top: r.top + TOP, width: this.plotW(), height: this.plotH() }; }
  plotH() { return HEIGHT - AXIS_B - PHASE_H - TOP; }

  setHighlight(hl) { this.ctx.highlight = hl; this.refresh(); }
  setColor(c) { this.color = c; this.colorSel.value = c; this.refresh(); }

  zoomTo(x0, x1, keepY = false) {
    const n = this.ctx.summary.entries;
    x0 = Math.max(0, Math.floor(x0)); x1 = Math.min(n, Math.ceil(x1));
    if (x1 <= x0) x1 = Math.min(n, x0 + 1);
    if (x1 <= x0) x0 = x1 - 1;
    this.vp.x0 = x0; this.vp.x1 = x1;
    if (!keepY) { this.vp.y0 = 0; this.vp.y1 = null; }
    return this.refresh();
  }

  reset() { return this.zoomTo(0, this.ctx.summary.entries); }

  // goToPeak zooms to the peak at about 8 pixels per entry, so that every
  // block alive there (a pixel tall or more) is drawn on its own and at
  // least 8 pixels wide.
  goToPeak() {
    const p = this.ctx.summary.result.peak.event_index;
    if (p < 0) return Promise.resolve();
    const k = Math.max(12, Math.ceil(this.plotW() / 16));
    return this.zoomTo(p - k, p + k + 1).then(() => { this.node.dataset.peak = 'shown'; });
  }

  async refresh() {
    const my = ++this.seq;
    const t0 = performance.now();
    const pw = Math.max(1, Math.floor(this.plotW()));
    const ph = Math.max(1, Math.floor(this.plotH()));
    const p = { input: this.ctx.input, device: this.ctx.device, x0: this.vp.x0, x1: this.vp.x1, w: pw, h: ph, color: this.color };
    if (this.vp.y1 != null) { p.y0 = Math.floor(this.vp.y0); p.y1 = Math.ceil(this.vp.y1); }
    if (this.ctx.highlight && !htmlMode) p.hl = this.ctx.highlight;
    this.node.dataset.state = 'loading';
    let d;
    try {
      const buf = await get('mem/view', p, true);
      window.__ptscope.timings.memViewFetched ??= performance.now();
      d = decodeView(buf, this.color);
      window.__ptscope.timings.memViewDecoded ??= performance.now();
    } catch (e) {
      if (my === this.seq) this.fail(e);
      return;
    }
    if (my !== this.seq) return; // a newer request superseded this one
    d.query = p;
    if (htmlMode && this.ctx.highlight) {
      // the file's views carry every block's keys: highlight by key here
      const [by, key] = this.ctx.highlight.split(':');
      const j = ['category', 'stack', 'source', 'module', 'module_group', 'group'].indexOf(by);
      for (const b of d.blocks) if (b.keys && b.keys[j] === +key) b.flags |= 1;
    }
    this.data = d;
    this.yr = null;
    this.hover = null;
    this.lastSent = sentBytes('mem/view');
    this.lastFetchMS = performance.now() - t0;
    this.draw();
    this.lastDrawMS = performance.now() - t0 - this.lastFetchMS;
    this.node.dataset.state = 'ready';
    this.node.dataset.blocks = d.nblocks;
    window.__ptscope.timings.memoryTimeline ??= performance.now();
    window.__ptscope.lastView = { bytes: d.bytes, sent: this.lastSent, fetchMS: this.lastFetchMS, drawMS: this.lastDrawMS, blocks: d.nblocks, x0: this.vp.x0, x1: this.vp.x1 };
    this.updateLegend(my);
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
  // Y uses the byte range of the last draw (yr), as what is on screen
  Y(b) { const [y0, y1] = this.yr || this.yRange(); return TOP + this.plotH() - (b - y0) / (y1 - y0) * this.plotH(); }
  entryAt(px) { return this.vp.x0 + (px - AXIS_L) / this.plotW() * (this.vp.x1 - this.vp.x0); }
  bytesAt(py) { const [y0, y1] = this.yRange(); return y0 + (TOP + this.plotH() - py) / this.plotH() * (y1 - y0); }

  colorOf(b) {
    return this.color === 'category' ? (categoryColors[this.ctx.summary.categories[b.cat]] || '#999') : keyColor(b.key);
  }

  // pieces calls f(xa, xb, yt, yb, e) for each drawn piece of block b
  // (between two moves of its lower edge).
  pieces(b, f) {
    const d = this.data;
    const bs = this.X(colEntry(d, b.c0)), be = this.X(colEntry(d, b.c1));
    for (let e = 0; e < b.cols.length; e++) {
      let xa = e === 0 ? bs : this.X(colEntry(d, b.cols[e]));
      let xb = e + 1 < b.cols.length ? this.X(colEntry(d, b.cols[e + 1])) : be;
      xa = Math.max(xa, bs); xb = Math.min(xb, be);
      const yt = this.Y(b.offs[e] + b.size), yb = this.Y(b.offs[e]);
      if (f(xa, Math.max(xa + 1, xb), yt, Math.max(yt + 1, yb), e) === false) return;
    }
  }

  draw() {
    const d = this.data;
    if (!d) return;
    this.yr = this.yRange();
    const c = this.canvas.getContext('2d');
    const { w, h } = this.size();
    this.drawnW = w;
    const dpr = devicePixelRatio || 1;
    if (this.canvas.width !== w * dpr || this.canvas.height !== h * dpr) {
      this.canvas.width = w * dpr; this.canvas.height = h * dpr;
      this.canvas.style.width = w + 'px'; this.canvas.style.height = h + 'px';
    }
    const H = TOP + this.plotH(), R = AXIS_L + this.plotW();
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.clearRect(0, 0, w, h);
    c.save();
    c.beginPath(); c.rect(AXIS_L, 0, this.plotW(), H); c.clip();
    this.grid(c);
    // the band: allocated min/max per column
    for (let k = 0; k < d.cols; k++) {
      const xa = this.X(colEntry(d, k)), xb = Math.max(xa + 1, this.X(colEntry(d, k + 1)));
      c.fillStyle = bandColor;
      c.fillRect(xa, this.Y(d.allocMin[k]), xb - xa, H - this.Y(d.allocMin[k]));
      c.fillStyle = bandLight;
      c.fillRect(xa, this.Y(d.allocMax[k]), xb - xa, this.Y(d.allocMin[k]) - this.Y(d.allocMax[k]));
    }
    // blocks: one path per colour (and highlight), filled once (blocks
    // do not overlap; a fillRect per piece costs several times more)
    const hl = !!this.ctx.highlight;
    const paths = new Map();
    for (const b of d.blocks) {
      const k = this.colorOf(b) + (hl && !(b.flags & 1) ? '/dim' : '');
      let p = paths.get(k);
      if (!p) paths.set(k, p = new Path2D());
      this.pieces(b, (xa, xb, yt, yb) => { if (xb >= AXIS_L && xa <= R) p.rect(xa, yt, xb - xa, yb - yt); });
    }
    for (const [k, p] of paths) {
      c.fillStyle = k.replace('/dim', '');
      c.globalAlpha = k.endsWith('/dim') ? 0.22 : 1;
      c.fill(p);
    }
    c.globalAlpha = 1;
    // highlighted bytes per column (small blocks included)
    if (d.hl) this.stepLine(c, d.hl, '#111', 1.5);
    this.stepLine(c, d.resMax, reservedColor, 1);
    this.markers(c, H);
    // the selected and the hovered block
    const sel = this.selectedIndex();
    if (sel >= 0) this.mark(c, d.blocks[sel]);
    if (this.hover && this.hover.k >= 0 && this.hover.k !== sel) this.outline(c, d.blocks[this.hover.k], '#333', 1);
    c.restore();
    this.phaseStrip(c, H);
    this.axes(c, w, H);
    this.info.textContent = `entries ${exact(this.vp.x0)}–${exact(this.vp.x1)} of ${exact(this.ctx.summary.entries)} · ${exact(d.nblocks)} blocks drawn, ${exact(d.summarized)} in the grey band (under ${bytes(d.minBytes)} or a pixel wide) · ${(d.bytes / 1024).toFixed(1)} KB` +
      (this.lastSent ? ` (${(this.lastSent / 1024).toFixed(1)} KB sent)` : '') +
      (htmlMode ? ' · offline file: detail stops at its deepest level (ptscope serve answers any zoom)' : '');
  }

  stepLine(c, ys, color, width) {
    const d = this.data;
    c.strokeStyle = color; c.lineWidth = width; c.beginPath();
    for (let k = 0; k < d.cols; k++) {
      const xa = this.X(colEntry(d, k)), xb = this.X(colEntry(d, k + 1));
      k === 0 ? c.moveTo(xa, this.Y(ys[k])) : c.lineTo(xa, this.Y(ys[k]));
      c.lineTo(xb, this.Y(ys[k]));
    }
    c.stroke();
  }

  grid(c) {
    const [y0, y1] = this.yRange();
    c.strokeStyle = '#eef0f3'; c.lineWidth = 1;
    for (const v of byteTicks(y0, y1, 5)) {
      const y = Math.round(this.Y(v)) + 0.5;
      c.beginPath(); c.moveTo(AXIS_L, y); c.lineTo(AXIS_L + this.plotW(), y); c.stroke();
    }
  }

  // mark shows the selected block: filled in magenta (a colour no
  // category has), outlined when it is tall enough
  mark(c, b) {
    c.fillStyle = 'rgba(214, 0, 147, .75)';
    this.pieces(b, (xa, xb, yt, yb) => { c.fillRect(xa, yt, xb - xa, yb - yt); });
    this.outline(c, b, '#8b005f', 1.5);
  }

  outline(c, b, color, width) {
    c.strokeStyle = color; c.lineWidth = width;
    this.pieces(b, (xa, xb, yt, yb) => { c.strokeRect(xa + 0.5, yt + 0.5, Math.max(1, xb - xa - 1), Math.max(1, yb - yt - 1)); });
  }

  // markers: steps (dashed), the peak and each OOM (a line and a label)
  markers(c, H) {
    const s = this.ctx.summary, r = s.result;
    const steps = (r.steps || []).filter((x) => x.start_index >= 0 && x.end_index > this.vp.x0 && x.start_index < this.vp.x1);
    c.font = '10px system-ui, sans-serif'; c.textAlign = 'left';
    if (steps.length <= 64) {
      c.strokeStyle = 'rgba(0,0,0,.35)'; c.setLineDash([3, 3]); c.fillStyle = '#444'; c.lineWidth = 1;
      for (const st of steps) {
        const x = Math.round(this.X(st.start_index)) + 0.5;
        c.beginPath(); c.moveTo(x, TOP); c.lineTo(x, H); c.stroke();
        if (steps.length <= 16) c.fillText(st.name, Math.max(AXIS_L, x) + 3, TOP + 10);
      }
      c.setLineDash([]);
    }
    // a marker's line runs from the top down to the bytes it marks (the
    // blocks under it stay clear to click)
    const mark = (e, label, color, at) => {
      if (e < this.vp.x0 || e >= this.vp.x1) return;
      const x = Math.round(this.X(e + 0.5)) + 0.5;
      c.strokeStyle = color; c.fillStyle = color; c.lineWidth = 1.5;
      c.setLineDash([4, 3]);
      c.beginPath(); c.moveTo(x, TOP); c.lineTo(x, Math.max(TOP, Math.min(H, this.Y(at)))); c.stroke();
      c.setLineDash([]);
      c.beginPath(); c.moveTo(x - 5, 0); c.lineTo(x + 5, 0); c.lineTo(x, 8); c.fill();
      c.font = 'bold 11px system-ui, sans-serif';
      const tw = c.measureText(label).width;
      const lx = x + 8 + tw > AXIS_L + this.plotW() ? x - 8 - tw : x + 8;
      c.fillStyle = 'rgba(255,255,255,.85)'; c.fillRect(lx - 2, 1, tw + 4, 13);
      c.fillStyle = color; c.fillText(label, lx, 11);
    };
    if (r.peak.event_index >= 0) mark(r.peak.event_index, `peak ${bytes(r.peak.allocated_bytes)}`, peakColor, r.peak.allocated_bytes);
    for (const o of r.ooms || []) if (o.event_index >= 0) mark(o.event_index, `OOM: asked ${bytes(o.requested_bytes)}`, '#6a1b9a', o.allocated_bytes);
  }

  phaseStrip(c, H) {
    const d = this.data, phases = this.ctx.summary.phases;
    for (let k = 0; k < d.cols; k++) {
      const xa = this.X(colEntry(d, k)), xb = this.X(colEntry(d, k + 1));
      c.fillStyle = phaseColors[phases[d.phase[k]]] || '#ddd';
      c.fillRect(Math.max(AXIS_L, xa), H + 1, Math.max(1, xb - Math.max(AXIS_L, xa)), PHASE_H - 1);
    }
  }

  axes(c, W, H) {
    const d = this.data;
    c.fillStyle = '#333'; c.strokeStyle = '#888'; c.lineWidth = 1; c.font = '11px system-ui, sans-serif';
    // y: bytes
    const [y0, y1] = this.yRange();
    const ylabels = [], xlabels = [];
    c.textAlign = 'right';
    for (const v of byteTicks(y0, y1, 5)) {
      const y = this.Y(v);
      if (y < TOP - 1 || y > H + 1) continue;
      ylabels.push(byteLabel(v, y1));
      c.fillText(byteLabel(v, y1), AXIS_L - 6, Math.max(TOP + 4, y + 4));
      c.beginPath(); c.moveTo(AXIS_L - 4, y + 0.5); c.lineTo(AXIS_L, y + 0.5); c.stroke();
    }
    c.beginPath(); c.moveTo(AXIS_L + 0.5, TOP); c.lineTo(AXIS_L + 0.5, H); c.stroke();
    // x: entries, or time since the first entry
    const yl = H + PHASE_H + 13;
    c.textAlign = 'center';
    const n = Math.max(2, Math.floor(this.plotW() / 110));
    const tick = (x, label) => {
      if (x < AXIS_L - 1 || x > AXIS_L + this.plotW() + 1) return;
      xlabels.push(label);
      c.beginPath(); c.moveTo(x + 0.5, H + PHASE_H); c.lineTo(x + 0.5, H + PHASE_H + 3); c.stroke();
      c.fillText(label, Math.min(W - 30, Math.max(AXIS_L + 14, x)), yl);
    };
    let title = 'trace entry';
    if (this.axis === 'time' && this.hasTime) {
      // times are those of each column's first entry: a tick goes where its
      // time is first reached (entries are not evenly spaced in time)
      const t = d.timeUS, last = d.cols - 1;
      for (const { v, label } of timeTicks(t[0] * 1000, t[last] * 1000, n)) {
        let lo = 0, hi = last;
        while (lo < hi) { const m = (lo + hi) >> 1; if (t[m] * 1000 < v) lo = m + 1; else hi = m; }
        tick(this.X(colEntry(d, lo)), label);
      }
      title = 'time since the first entry (ticks where each time is reached)';
    } else {
      for (const v of ticks(this.vp.x0, this.vp.x1, n).filter(Number.isInteger)) tick(this.X(v), exact(v));
    }
    c.textAlign = 'left'; c.fillStyle = '#666';
    c.fillText(title, AXIS_L, H + PHASE_H + 29);
    this.node.dataset.xticks = JSON.stringify(xlabels);
    this.node.dataset.yticks = JSON.stringify(ylabels);
    c.save(); c.translate(11, TOP + this.plotH() / 2); c.rotate(-Math.PI / 2); c.textAlign = 'center'; c.fillText('allocated bytes', 0, 0); c.restore();
  }

  // legend: what the colours mean in this view (the colouring's keys with
  // the most drawn area, named), the band, the reserved line, the peak, and
  // the phases of the strip
  async updateLegend(my) {
    const d = this.data, color = this.color;
    const area = new Map();
    for (const b of d.blocks) area.set(b.key, (area.get(b.key) || 0) + b.size * (b.c1 - b.c0));
    let keys = [...area.entries()].sort((a, b) => b[1] - a[1]).map(([k]) => k);
    const more = Math.max(0, keys.length - 12);
    keys = keys.slice(0, 12);
    let items;
    if (color === 'category') {
      items = keys.map((k) => { const n = this.ctx.summary.categories[k]; return { k, name: n, color: categoryColors[n] || '#999' }; });
    } else {
      const names = this.names[color] || (this.names[color] = {});
      const missing = keys.filter((k) => names[k] == null);
      if (missing.length) {
        try {
          const r = await get('mem/names', { input: this.ctx.input, device: this.ctx.device, by: color, keys: missing.join(',') });
          Object.assign(names, r.names);
        } catch (e) { for (const k of missing) names[k] = `key ${k}`; }
        if (my !== this.seq || color !== this.color) return;
      }
      items = keys.map((k) => ({ k, name: names[k] ?? `key ${k}`, color: keyColor(k) }));
    }
    const hl = this.ctx.highlight;
    fill(this.legend, ...[
      el('span', { class: 'muted' }, COLORINGS.find(([v]) => v === color)[1] + ':'),
      ...items.map((it) => swatch(it.color, it.name, { class: 'sw key' + (hl === `${color}:${it.k}` ? ' on' : ''), title: `${it.name} (click to highlight)`,
        onclick: () => this.setHighlight(hl === `${color}:${it.k}` ? null : `${color}:${it.k}`) })),
      more ? el('span', { class: 'muted' }, `+${more} more`) : null,
      swatch(bandColor, `small blocks (< ${bytes(d.minBytes)})`), swatch(reservedColor, 'reserved', { class: 'sw line' }),
      swatch(peakColor, 'peak', { class: 'sw line' })].filter(Boolean));
    this.legend.dataset.color = color;
    const ph = new Set(d.phase);
    fill(this.phaseLegend, el('span', { class: 'muted' }, 'phase strip:'),
      ...[...ph].sort().map((p) => swatch(phaseColors[this.ctx.summary.phases[p]] || '#ddd', this.ctx.summary.phases[p])));
  }

  // nearest finds the drawn block nearest to a page position within tol
  // pixels: {k, dist}, or null.
  nearest(px, py, tol) {
    const d = this.data;
    if (!d) return null;
    let best = null;
    d.blocks.forEach((b, k) => {
      const bs = this.X(colEntry(d, b.c0)), be = Math.max(bs + 1, this.X(colEntry(d, b.c1)));
      if (px < bs - tol || px > be + tol) return;
      this.pieces(b, (xa, xb, yt, yb) => {
        const dx = px < xa ? xa - px : px > xb ? px - xb : 0;
        const dy = py < yt ? yt - py : py > yb ? py - yb : 0;
        const dist = Math.hypot(dx, dy);
        if (dist <= tol && (!best || dist < best.dist)) best = { k, dist };
      });
    });
    return best;
  }

  // details fetches the details of drawn block k (views carry block ids)
  details(k) {
    return get('mem/block', { input: this.ctx.input, device: this.ctx.device, id: this.data.blocks[k].id });
  }

  selectedIndex() {
    if (!this.sel || !this.data) return -1;
    return this.data.blocks.findIndex((b) => b.id === this.sel.id);
  }

  select(details) {
    this.sel = { id: details.id, details };
    this.draw();
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
      this.zoomTo(e - (e - this.vp.x0) * f, e + (this.vp.x1 - e) * f, true);
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
      this.vp.x0 = Math.floor(x0); this.vp.x1 = Math.floor(x0) + span;
      this.refresh();
    });
    window.addEventListener('mouseup', (ev) => {
      if (drag && !drag.moved && ev.target === cv) this.click(ev);
      drag = null;
    });
    cv.addEventListener('mousemove', (ev) => { if (!drag) this.hoverAt(ev); });
    cv.addEventListener('mouseleave', () => { this.tip.hidden = true; if (this.hover) { this.hover = null; this.draw(); } });
    cv.addEventListener('dblclick', () => this.reset());
    window.addEventListener('keydown', (ev) => {
      if (ev.target.closest && ev.target.closest('input, select, textarea') || ev.ctrlKey || ev.metaKey || ev.altKey || !this.data) return;
      const span = this.vp.x1 - this.vp.x0, mid = (this.vp.x0 + this.vp.x1) / 2;
      const keys = {
        p: () => this.goToPeak(), 0: () => this.reset(), Home: () => this.reset(),
        '+': () => this.zoomTo(mid - span / 4, mid + span / 4, true), '=': () => this.zoomTo(mid - span / 4, mid + span / 4, true),
        '-': () => this.zoomTo(mid - span, mid + span, true),
        ArrowLeft: () => this.zoomTo(this.vp.x0 - span / 4, this.vp.x1 - span / 4, true),
        ArrowRight: () => this.zoomTo(this.vp.x0 + span / 4, this.vp.x1 + span / 4, true),
      };
      if (keys[ev.key]) { ev.preventDefault(); keys[ev.key](); }
    });
  }

  // entry and bytes under a mouse position
  at(ev) {
    const r = this.canvas.getBoundingClientRect();
    const px = ev.clientX - r.left, py = ev.clientY - r.top;
    return { px, py, e: this.entryAt(px), b: this.data ? this.bytesAt(py) : 0 };
  }

  inPlot(px, py) { return px >= AXIS_L && px <= AXIS_L + this.plotW() && py >= TOP && py <= TOP + this.plotH(); }

  // what is at a point with no block drawn there: the column's curves
  describe(px, py) {
    const d = this.data;
    const e = Math.max(d.x0, Math.min(d.x1 - 1, Math.floor(this.entryAt(px))));
    const col = Math.min(d.cols - 1, Math.max(0, Math.floor((e - d.x0) * d.cols / (d.x1 - d.x0))));
    const by = this.bytesAt(py);
    const t = this.hasTime ? ` (${dur(d.timeUS[col] * 1000)} in)` : '';
    const where = by > d.allocMax[col] ? (by > d.resMax[col] ? 'above the reserved memory' : 'reserved but not allocated (cached free blocks)')
      : `in the grey band: blocks under ${bytes(d.minBytes)} or a pixel wide (zoom in to draw them on their own)`;
    return { e, text: `Entry ${exact(e)}${t}: ${where}; allocated ${bytes(d.allocMin[col])}–${bytes(d.allocMax[col])}, reserved ${bytes(d.resMax[col])}.` };
  }

  async hoverAt(ev) {
    if (!this.data) return;
    const { px, py } = this.at(ev);
    if (!this.inPlot(px, py)) { this.tip.hidden = true; return; }
    const n = this.nearest(px, py, 3);
    const k = n ? n.k : -1;
    if (!this.hover || this.hover.k !== k) { this.hover = { k }; this.draw(); }
    const place = () => {
      this.tip.hidden = false;
      const left = Math.min(px + 14, this.size().w - this.tip.offsetWidth - 4);
      this.tip.style.left = Math.max(0, left) + 'px'; this.tip.style.top = (py + 14) + 'px';
    };
    if (k < 0) {
      this.tip.textContent = this.describe(px, py).text;
      place();
      return;
    }
    const b = this.data.blocks[k];
    const cat = this.ctx.summary.categories[b.cat];
    const name = this.color === 'category' ? '' : (this.names[this.color] || {})[b.key] || '';
    fill(this.tip, el('b', {}, `≈ ${bytes(b.size)}`), ` ${cat}`, name ? el('div', { class: 'code' }, name) : null);
    place();
    const my = this.hover;
    clearTimeout(this.hoverTimer);
    this.hoverTimer = setTimeout(async () => {
      try {
        const det = await this.details(k);
        if (this.hover !== my || !det) return;
        fill(this.tip, el('b', {}, bytes(det.size_bytes)), ` ${det.category} · ${det.step || ''} ${det.phase}`,
          el('div', { class: 'code' }, det.source), det.module ? el('div', { class: 'code muted' }, det.module) : null);
        place();
      } catch (e) { /* keep the drawn size */ }
    }, 120);
  }

  async click(ev) {
    if (!this.data) return;
    const { px, py, e, b } = this.at(ev);
    if (!this.inPlot(px, py)) return;
    const t0 = performance.now();
    const n = this.nearest(px, py, NEAR_PX);
    try {
      if (n) {
        const det = await this.details(n.k);
        this.select(det);
        this.ctx.onBlock(det, t0);
        return;
      }
      if (!htmlMode && b >= 0) {
        // a block too small to be drawn on its own: the server's hit test
        const r = await get('mem/hit', { input: this.ctx.input, device: this.ctx.device, event: Math.floor(e), y: Math.floor(b) });
        if (r.id >= 0) { this.select(r.block); this.ctx.onBlock(r.block, t0); return; }
      }
      this.sel = null; this.draw();
      this.ctx.onNothing(this.describe(px, py));
    } catch (err) {
      this.info.textContent = 'error: ' + err.message;
    }
  }
}

// blockPanel fills the click panel with a block's details.
export function blockPanel(node, b, actions) {
  fill(node);
  node.dataset.state = 'ready';
  const row = (k, v) => el('tr', {}, el('th', {}, k), el('td', {}, v));
  const when = (i, t) => i < 0 ? 'before the recording' : [link(`entry ${exact(i)}`, () => actions.state(i), { title: 'the allocator state after this entry' }),
    t && actions.startNS ? ` (${dur(t - actions.startNS)} in)` : ''];
  node.append(
    el('h3', {}, `${bytes(b.size_bytes)} ${b.category}`, el('span', { class: 'muted' }, ` block ${b.id}`)),
    el('table', { class: 'kv' },
      row('size', `${bytes(b.size_bytes)} (${exact(b.size_bytes)} B; requested ${exact(b.requested_bytes)} B)`),
      row('source', el('span', { class: 'code' }, b.source)), b.module ? row('module', el('span', { class: 'code' }, b.module)) : null,
      row('step / phase', `${b.step || '-'} / ${b.phase}`),
      row('allocated', when(b.alloc_event_index, b.alloc_time_ns)),
      row('freed', b.free_requested_event_index < 0 ? 'never (alive at the end)' : when(b.free_requested_event_index, b.free_time_ns)),
      b.lifetime_ns ? row('lifetime', dur(b.lifetime_ns)) : null,
      row('allocated after it', bytes(b.allocated_after_alloc_bytes)),
      row('address, stream', `0x${b.address.toString(16)}, stream ${b.stream}`),
      b.origin !== 'trace' ? row('origin', b.origin) : null),
    el('div', { class: 'actions' },
      el('button', { onclick: () => actions.zoom(b) }, 'zoom to block'),
      b.alloc_event_index >= 0 ? el('button', { onclick: () => actions.state(b.alloc_event_index) }, 'allocator state at its allocation') : null),
    el('h4', {}, 'Allocated at (innermost first; your frame highlighted)'),
    stackList(b.frames));
  if (b.free_frames && b.free_frames.length) node.append(el('h4', {}, 'Freed at'), stackList(b.free_frames));
}

// trimPath drops what comes before a package's own path (site-packages/,
// dist-packages/, lib/pythonX.Y/), as the text report does.
export function trimPath(p) {
  const m = /.*(?:site-packages|dist-packages)\/|.*\/lib\/python\d+\.\d+\//.exec(p);
  return m ? p.slice(m[0].length) : p;
}

// stackList lists a stack innermost first, the user's frame highlighted;
// plumbing frames (module __call__ machinery, the same in every stack) are
// folded behind a toggle.
export function stackList(frames) {
  if (!frames || !frames.length) return el('p', { class: 'muted' }, 'no frames recorded (allocated before the recording, or on a thread without Python frames)');
  const plumbing = frames.filter((f) => f.kind === 'plumbing').length;
  const list = el('ol', { class: 'stack' + (plumbing ? ' folded' : '') }, frames.map((f) => el('li', { class: [f.user ? 'user' : '', f.kind === 'plumbing' ? 'plumbing' : ''].join(' ').trim() || null, title: `${f.name} ${f.filename}:${f.line}` },
    el('span', { class: 'fn' }, f.name), el('span', { class: 'file' }, mid(`${trimPath(f.filename)}:${f.line}`, 24)))));
  if (!plumbing) return list;
  const toggle = link(`show the ${plumbing} module-call frames`, () => {
    const folded = list.classList.toggle('folded');
    toggle.textContent = folded ? `show the ${plumbing} module-call frames` : 'fold the module-call frames';
  }, { class: 'fold' });
  return el('div', {}, list, toggle);
}
