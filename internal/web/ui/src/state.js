// Allocator state at one entry: segments laid end to end by address in
// rows of equal bytes (a byte scale above, the bytes at each row's start
// beside it), their active and pending-free blocks (the rest of a segment
// is free); hover or click any of it for what it is (a block's address,
// size, state, category, stack, alloc and free entries, a jump to the
// timeline); find a block by address; step through entries.
import { get, htmlMode } from './data.js';
import { el, bytes, exact, pct, link, swatch, byteTicks, byteLabel, categoryColors, fill } from './fmt.js';
import { stackList } from './memview.js';
import { table } from './table.js';

const GUTTER = 70, RULER = 20, ROW_H = 14, GAP = 3;
const FREE = '#e6e8eb', PENDING = '#e67e22', SEG_START = '#333';

export function stateView(body, ctx) {
  const n = ctx.summary.entries;
  const node = el('div', { class: 'state', 'data-testid': 'allocator-state', 'data-state': 'loading' });
  const num = el('input', { type: 'number', min: -1, max: n - 1, value: ctx.event ?? '' });
  const go = (e) => { e = Math.max(-1, Math.min(n - 1, e)); num.value = e; load(e); };
  const bar = el('div', { class: 'toolbar' }, 'after entry ', num,
    ...[[-1000, '−1000'], [-100, '−100'], [-1, '−1'], [1, '+1'], [100, '+100'], [1000, '+1000']].map(([d, l]) => el('button', { onclick: () => go(+num.value + d) }, l)),
    el('button', { class: 'primary', onclick: () => go(ctx.summary.result.peak.event_index) }, 'peak'),
    el('span', { class: 'muted' }, ` of ${exact(n)} entries` + (htmlMode ? ' (an --html file holds the peak, the end and each OOM; ptscope serve answers any entry)' : '')));
  num.addEventListener('change', () => go(+num.value));
  const addr = el('input', { type: 'search', placeholder: 'find address (0x7f…)', 'data-testid': 'find-address', class: 'filter' });
  const nums = el('div', { class: 'nums' });
  const canvas = el('canvas', { class: 'segments', 'data-testid': 'segments' });
  const tip = el('div', { class: 'tip', hidden: true });
  const legend = el('div', { class: 'legend', 'data-testid': 'state-legend' });
  const panel = el('div', { class: 'panel', 'data-testid': 'state-block', 'data-state': 'empty' }, el('p', { class: 'muted' }, 'Hover over the segments for what is there; click a block for its stack.'));
  const ev = el('div', { class: 'panel' });
  const cats = el('div');
  const left = el('div', {}, el('div', { class: 'toolbar' }, addr), legend, el('div', { class: 'plotbox' }, canvas, tip));
  const right = el('div', {}, panel, ev, cats);
  node.append(bar, nums, el('div', { class: 'stategrid' }, left, right));
  body.append(node);
  let seq = 0, layout = null, selected = null;

  async function load(e) {
    const my = ++seq;
    node.dataset.state = 'loading';
    const t0 = performance.now();
    let st;
    try {
      st = await get('mem/state', e == null ? { input: ctx.input, device: ctx.device, time: ctx.time } : { input: ctx.input, device: ctx.device, event: e });
    } catch (err) {
      node.dataset.state = 'error';
      fill(nums, el('p', { class: 'error' }, err.message));
      return;
    }
    if (my !== seq) return;
    ctx.setParams({ view: 'state', event: st.event_index });
    num.value = st.event_index;
    const row = (k, v) => el('tr', {}, el('th', {}, k), el('td', {}, v));
    fill(nums, el('table', { class: 'kv' },
      row('allocated', `${bytes(st.allocated_bytes)} (${exact(st.allocated_bytes)} B)`),
      row('active (incl. pending free)', bytes(st.active_bytes)),
      row('reserved', `${bytes(st.reserved_bytes)} in ${st.segments.length} segments`),
      row('inactive (free in segments)', `${bytes(st.inactive_bytes)} in ${exact(st.free_ranges)} ranges, largest ${bytes(st.largest_free_bytes)}`),
      row('efficiency (allocated / reserved)', pct(st.efficiency_ratio)),
      row('fragmentation (1 − largest free / free)', pct(st.fragmentation_ratio)),
      row('blocks', `${exact(st.active_blocks)} active, ${exact(st.pending_free_blocks)} pending free` + (st.unplaced_blocks && st.unplaced_blocks.length ? `, ${st.unplaced_blocks.length} outside known segments` : '')),
      row('answered from', `checkpoint after entry ${exact(st.checkpoint_event_index)} + ${exact(st.replayed_events)} entries replayed`)));
    layout = layOut(canvas, st);
    drawLegend(legend, st);
    draw();
    node.dataset.state = 'ready';
    node.dataset.event = st.event_index;
    window.__ptscope.timings.allocatorState = performance.now();
    window.__ptscope.lastState = { ms: performance.now() - t0, event: st.event_index };
    window.__ptscope.state = { layout, pick: (x, y) => pick(x, y) };
    get('mem/breakdown', { input: ctx.input, device: ctx.device, by: 'category', event: st.event_index }).then((b) => {
      if (my !== seq) return;
      fill(cats, el('h4', {}, 'Allocated after this entry, by category'), table(b.rows, [{ key: 'name', label: 'category' },
        { key: 'bytes', label: 'bytes', num: true, fmt: bytes, bar: true }, { key: 'count', label: 'blocks', num: true, fmt: exact }], { sort: 'bytes', testid: 'state-breakdown' }));
    }).catch(() => fill(cats));
    if (st.event_index >= 0) {
      get('mem/event', { input: ctx.input, device: ctx.device, event: st.event_index }).then((x) => {
        if (my !== seq) return;
        fill(ev, el('h4', {}, `Entry ${exact(x.index)}: ${x.action} ${bytes(x.size_bytes)} at 0x${x.address.toString(16)} (${x.phase}${x.step ? ', ' + x.step : ''})`), stackList(x.frames));
      }).catch(() => fill(ev));
    } else fill(ev);
  }

  function draw() { drawSegments(canvas, layout, selected); }

  // pick: what is at canvas position (x, y): a block, free space, or nothing
  function pick(x, y) {
    if (!layout) return null;
    const { rows, perRow, w, segs, starts } = layout;
    const row = Math.floor((y - RULER) / (ROW_H + GAP));
    if (row < 0 || row >= rows || (y - RULER) % (ROW_H + GAP) > ROW_H || x < GUTTER || x > GUTTER + w) return null;
    const pos = row * perRow + (x - GUTTER) / w * perRow;
    return at(pos, layout.px);
  }

  // at: what is at byte position pos of the laid-out segments (blocks
  // narrower than a pixel are found within tol bytes)
  function at(pos, tol = 0) {
    const { segs, starts } = layout;
    let lo = 0, hi = segs.length - 1;
    while (lo < hi) { const m = (lo + hi + 1) >> 1; if (starts[m] <= pos) lo = m; else hi = m - 1; }
    const g = segs[lo];
    if (!g || pos < starts[lo] || pos >= starts[lo] + g.size_bytes) return null;
    const off = pos - starts[lo];
    let best = null, bestD = Infinity;
    for (const b of g.sorted) {
      const a = b.address - g.address;
      const dist = off < a ? a - off : off >= a + b.size_bytes ? off - (a + b.size_bytes) + 1 : 0;
      if (dist <= tol && dist < bestD) { best = b; bestD = dist; }
      if (a > off + tol) break;
    }
    if (best) return { seg: g, block: best };
    // the free range around off
    let from = 0, to = g.size_bytes;
    for (const b of g.sorted) {
      const a = b.address - g.address;
      if (a + b.size_bytes <= off) from = Math.max(from, a + b.size_bytes);
      else if (a > off) { to = a; break; }
    }
    return { seg: g, free: { address: g.address + from, size_bytes: to - from } };
  }

  function describe(h) {
    if (h.block) {
      const b = h.block;
      return [el('b', {}, bytes(b.size_bytes)), ` ${b.state === 'active_pending_free' ? 'pending free (freed, in use by another stream)' : 'active'} ${b.category}`,
        el('div', { class: 'code' }, `0x${b.address.toString(16)}`)];
    }
    return [el('b', {}, bytes(h.free.size_bytes)), ' free', el('div', { class: 'code' }, `0x${h.free.address.toString(16)} in segment 0x${h.seg.address.toString(16)} (${bytes(h.seg.size_bytes)}, stream ${h.seg.stream})`)];
  }

  const pos = (e) => { const r = canvas.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; };
  canvas.addEventListener('mousemove', (e) => {
    const [x, y] = pos(e);
    const h = pick(x, y);
    if (!h) { tip.hidden = true; return; }
    fill(tip, ...describe(h));
    tip.hidden = false;
    tip.style.left = Math.min(x + 14, canvas.clientWidth - tip.offsetWidth - 4) + 'px';
    tip.style.top = (y + 14) + 'px';
  });
  canvas.addEventListener('mouseleave', () => { tip.hidden = true; });
  canvas.addEventListener('click', (e) => { const h = pick(...pos(e)); if (h) show(h); });
  addr.addEventListener('change', () => {
    const v = addr.value.trim();
    const a = v.startsWith('0x') || /[a-f]/i.test(v) ? parseInt(v.replace(/^0x/, ''), 16) : Number(v);
    if (!layout || !isFinite(a)) return;
    const k = layout.segs.findIndex((g) => a >= g.address && a < g.address + g.size_bytes);
    if (k < 0) {
      fill(panel, el('p', {}, `No segment holds 0x${a.toString(16)} after entry ${exact(num.value)}.`));
      panel.dataset.state = 'ready';
      return;
    }
    show(at(layout.starts[k] + (a - layout.segs[k].address)));
  });

  async function show(h) {
    const t0 = performance.now();
    panel.dataset.state = 'loading';
    selected = h.block || null;
    draw();
    if (!h.block) {
      fill(panel, el('h3', {}, `${bytes(h.free.size_bytes)} free`),
        el('p', {}, `at 0x${h.free.address.toString(16)}, in segment 0x${h.seg.address.toString(16)} of ${bytes(h.seg.size_bytes)} (stream ${h.seg.stream}${h.seg.expandable ? ', expandable' : ''}), which has ${bytes(h.seg.free_bytes)} free, largest range ${bytes(h.seg.largest_free_bytes)}.`));
      panel.dataset.state = 'ready';
      return;
    }
    const b = h.block;
    let d = null;
    try { d = await get('mem/block', { input: ctx.input, device: ctx.device, id: b.id }); } catch (e) { /* an --html file without this block's details */ }
    const row = (k, v) => el('tr', {}, el('th', {}, k), el('td', {}, v));
    const timeline = (e0, e1) => `?input=${ctx.input}&device=${ctx.device}&view=memory&x0=${Math.max(0, e0)}&x1=${Math.min(n, e1)}&block=${b.id}`;
    const entry = (i) => i < 0 ? 'before the recording' : link(`entry ${exact(i)}`, () => go(i), { title: 'the allocator state after this entry' });
    fill(panel,
      el('h3', {}, `${bytes(b.size_bytes)} ${b.category}`, el('span', { class: 'muted' }, ` block ${b.id}`)),
      el('table', { class: 'kv' },
        row('address', `0x${b.address.toString(16)} (segment 0x${h.seg.address.toString(16)}, +${bytes(b.address - h.seg.address)})`),
        row('size', `${bytes(b.size_bytes)} (${exact(b.size_bytes)} B; requested ${exact(b.requested_bytes)} B)`),
        row('state', b.state === 'active_pending_free' ? 'pending free: freed by the program, still used by another stream' : 'active (allocated)'),
        row('category', b.category),
        d ? row('source', el('span', { class: 'code' }, d.source)) : null,
        d && d.module ? row('module', el('span', { class: 'code' }, d.module)) : null,
        d ? row('allocated', entry(d.alloc_event_index)) : null,
        d ? row('freed', d.free_requested_event_index < 0 ? 'never (alive at the end)' : entry(d.free_requested_event_index)) : null),
      d && d.alloc_event_index >= 0 ? el('div', { class: 'actions' }, el('a', { class: 'button', 'data-testid': 'to-timeline',
        href: timeline(d.alloc_event_index - 40, (d.free_requested_event_index < 0 ? d.alloc_event_index : d.free_requested_event_index) + 40) }, 'show in the timeline')) : null,
      d ? [el('h4', {}, 'Allocated at (innermost first; your frame highlighted)'), stackList(d.frames)]
        : el('p', { class: 'muted' }, 'Its stack is not in this file (ptscope serve has every block).'));
    panel.dataset.state = 'ready';
    window.__ptscope.timings.stateBlock = performance.now() - t0;
  }

  load(ctx.time != null && ctx.event == null ? null : ctx.event);
}

// layOut places the segments end to end, by address, in rows of equal
// bytes (so that every segment shows in proportion).
function layOut(canvas, st) {
  const segs = st.segments.slice().sort((a, b) => a.address - b.address);
  for (const g of segs) g.sorted = g.blocks.slice().sort((a, b) => a.address - b.address);
  const w = Math.max(300, canvas.parentElement.clientWidth - GUTTER - 8);
  const total = segs.reduce((s, g) => s + g.size_bytes, 0) || 1;
  const rows = Math.min(60, Math.max(8, segs.length));
  const starts = [];
  let at = 0;
  for (const g of segs) { starts.push(at); at += g.size_bytes; }
  const perRow = total / rows;
  return { segs, starts, rows, perRow, w, total, px: perRow / w * 3 };
}

function drawSegments(canvas, L, selected) {
  if (!L) return;
  const { segs, starts, rows, perRow, w } = L;
  const W = GUTTER + w + 8, h = RULER + rows * (ROW_H + GAP) + 4;
  const dpr = devicePixelRatio || 1;
  canvas.width = W * dpr; canvas.height = h * dpr;
  canvas.style.width = W + 'px'; canvas.style.height = h + 'px';
  const c = canvas.getContext('2d');
  c.setTransform(dpr, 0, 0, dpr, 0, 0);
  c.clearRect(0, 0, W, h);
  const y = (row) => RULER + row * (ROW_H + GAP);
  const span = (from, size, color, f = 'fillRect') => {
    let p = from;
    const end = from + size;
    while (p < end) {
      let row = Math.floor(p / perRow), rowEnd = (row + 1) * perRow;
      if (rowEnd <= p) { row++; rowEnd += perRow; } // rounding at a row's end
      const q = Math.min(end, rowEnd);
      if (row >= rows) break;
      c.fillStyle = color; c.strokeStyle = color;
      c[f](GUTTER + (p - row * perRow) / perRow * w, y(row), Math.max(1, (q - p) / perRow * w), ROW_H);
      p = q;
    }
  };
  // the byte scale: a ruler over one row, and each row's first byte
  c.font = '10px system-ui, sans-serif'; c.fillStyle = '#555'; c.strokeStyle = '#999'; c.lineWidth = 1;
  c.textAlign = 'center';
  for (const v of byteTicks(0, perRow, 6)) {
    const x = GUTTER + v / perRow * w;
    c.beginPath(); c.moveTo(x + 0.5, RULER - 5); c.lineTo(x + 0.5, RULER - 1); c.stroke();
    c.fillText(byteLabel(v, perRow), Math.min(GUTTER + w - 20, Math.max(GUTTER + 12, x)), RULER - 7);
  }
  c.textAlign = 'right';
  const every = Math.max(1, Math.ceil(rows / 12));
  for (let r = 0; r < rows; r += every) c.fillText(byteLabel(r * perRow, L.total), GUTTER - 6, y(r) + 11);
  for (let k = 0; k < segs.length; k++) {
    const g = segs[k], at = starts[k];
    span(at, g.size_bytes, FREE);
    for (const b of g.blocks) span(at + (b.address - g.address), b.size_bytes, b.state === 'active_pending_free' ? PENDING : (categoryColors[b.category] || '#999'));
    span(at, Math.min(g.size_bytes, perRow / w), SEG_START); // segment start mark
  }
  if (selected) {
    for (let k = 0; k < segs.length; k++) {
      const g = segs[k];
      if (selected.address >= g.address && selected.address < g.address + g.size_bytes) {
        c.lineWidth = 2;
        span(starts[k] + (selected.address - g.address), selected.size_bytes, '#000', 'strokeRect');
      }
    }
  }
}

function drawLegend(node, st) {
  const present = new Set();
  let pending = false;
  for (const g of st.segments) for (const b of g.blocks) { if (b.state === 'active_pending_free') pending = true; else present.add(b.category); }
  fill(node, ...[
    ...Object.entries(categoryColors).filter(([k]) => present.has(k)).map(([k, c]) => swatch(c, k)),
    pending ? swatch(PENDING, 'pending free') : null, swatch(FREE, 'free (in a segment)'), swatch(SEG_START, 'segment start', { class: 'sw line' })].filter(Boolean));
}
