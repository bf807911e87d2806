// Allocator state at one entry: segments with their active and pending-free
// blocks (the rest of a segment is free), fragmentation numbers, stepping.
import { get, htmlMode } from './data.js';
import { el, bytes, exact, pct, categoryColors } from './fmt.js';
import { stackList } from './memview.js';
import { table } from './table.js';

export function stateView(body, ctx) {
  const n = ctx.summary.entries;
  const node = el('div', { class: 'state', 'data-testid': 'allocator-state', 'data-state': 'loading' });
  const num = el('input', { type: 'number', min: -1, max: n - 1, value: ctx.event ?? '' });
  const go = (e) => { e = Math.max(-1, Math.min(n - 1, e)); num.value = e; load(e); };
  const bar = el('div', { class: 'stepper' }, 'after entry ', num,
    ...[[-1000, '−1000'], [-100, '−100'], [-1, '−1'], [1, '+1'], [100, '+100'], [1000, '+1000']].map(([d, l]) => el('button', { onclick: () => go(+num.value + d) }, l)),
    el('button', { onclick: () => go(ctx.summary.result.peak.event_index) }, 'peak'),
    el('span', { class: 'muted' }, ` of ${exact(n)} entries` + (htmlMode ? ' (an --html file holds a few entries; ptscope serve answers any)' : '')));
  num.addEventListener('change', () => go(+num.value));
  const nums = el('div', { class: 'nums' });
  const canvas = el('canvas', { class: 'segments' });
  const ev = el('div', { class: 'panel' });
  const cats = el('div');
  node.append(bar, nums, canvas, cats, ev);
  body.append(node);
  let seq = 0;
  async function load(e) {
    const my = ++seq;
    node.dataset.state = 'loading';
    const t0 = performance.now();
    let st;
    try {
      st = await get('mem/state', e == null ? { input: ctx.input, device: ctx.device, time: ctx.time } : { input: ctx.input, device: ctx.device, event: e });
    } catch (err) {
      node.dataset.state = 'error';
      nums.replaceChildren(el('p', { class: 'error' }, err.message));
      return;
    }
    if (my !== seq) return;
    ctx.setParams({ view: 'state', event: st.event_index });
    num.value = st.event_index;
    const row = (k, v) => el('tr', {}, el('th', {}, k), el('td', {}, v));
    nums.replaceChildren(el('table', { class: 'kv' },
      row('allocated', `${bytes(st.allocated_bytes)} (${exact(st.allocated_bytes)} B)`),
      row('active (incl. pending free)', bytes(st.active_bytes)),
      row('reserved', `${bytes(st.reserved_bytes)} in ${st.segments.length} segments`),
      row('inactive (free in segments)', `${bytes(st.inactive_bytes)} in ${exact(st.free_ranges)} ranges, largest ${bytes(st.largest_free_bytes)}`),
      row('efficiency (allocated / reserved)', pct(st.efficiency_ratio)),
      row('fragmentation (1 − largest free / free)', pct(st.fragmentation_ratio)),
      row('blocks', `${exact(st.active_blocks)} active, ${exact(st.pending_free_blocks)} pending free` + (st.unplaced_blocks && st.unplaced_blocks.length ? `, ${st.unplaced_blocks.length} outside known segments` : '')),
      row('answered from', `checkpoint after entry ${exact(st.checkpoint_event_index)} + ${exact(st.replayed_events)} entries replayed`)));
    drawSegments(canvas, st);
    node.dataset.state = 'ready';
    node.dataset.event = st.event_index;
    window.__ptscope.timings.allocatorState = performance.now();
    window.__ptscope.lastState = { ms: performance.now() - t0, event: st.event_index };
    if (!htmlMode) {
      get('mem/breakdown', { input: ctx.input, device: ctx.device, by: 'category', event: st.event_index }).then((b) => {
        if (my !== seq) return;
        cats.replaceChildren(el('h4', {}, 'Allocated after this entry, by category'), table(b.rows, [{ key: 'name', label: 'category' },
          { key: 'bytes', label: 'bytes', num: true, fmt: bytes }, { key: 'count', label: 'blocks', num: true, fmt: exact }], { sort: 'bytes', testid: 'state-breakdown' }));
      }).catch(() => {});
    }
    if (!htmlMode && st.event_index >= 0) {
      get('mem/event', { input: ctx.input, device: ctx.device, event: st.event_index }).then((x) => {
        if (my !== seq) return;
        ev.replaceChildren(el('h4', {}, `Entry ${exact(x.index)}: ${x.action} ${bytes(x.size_bytes)} at 0x${x.address.toString(16)} (${x.phase}${x.step ? ', ' + x.step : ''})`), stackList(x.frames));
      }).catch(() => {});
    }
  }
  load(ctx.time != null && ctx.event == null ? null : ctx.event);
}

// drawSegments lays the segments end to end, by address, in rows of equal
// bytes (so that every segment shows in proportion): active blocks in
// their category colour, pending-free ones orange, free space grey.
function drawSegments(canvas, st) {
  const segs = st.segments;
  const w = Math.max(300, canvas.parentElement.clientWidth - 4);
  const total = segs.reduce((s, g) => s + g.size_bytes, 0) || 1;
  const rows = Math.min(60, Math.max(8, segs.length));
  const rowH = 14, gap = 3;
  const perRow = total / rows;
  const h = rows * (rowH + gap) + 4;
  canvas.width = w * devicePixelRatio; canvas.height = h * devicePixelRatio;
  canvas.style.width = w + 'px'; canvas.style.height = h + 'px';
  const c = canvas.getContext('2d');
  c.setTransform(devicePixelRatio, 0, 0, devicePixelRatio, 0, 0);
  c.clearRect(0, 0, w, h);
  const span = (from, size, color) => {
    let p = from, end = from + size;
    while (p < end) {
      let row = Math.floor(p / perRow), rowEnd = (row + 1) * perRow;
      if (rowEnd <= p) { row++; rowEnd += perRow; } // rounding at a row's end
      const q = Math.min(end, rowEnd);
      if (row >= rows) break;
      c.fillStyle = color;
      c.fillRect((p - row * perRow) / perRow * w, 2 + row * (rowH + gap), Math.max(1, (q - p) / perRow * w), rowH);
      p = q;
    }
  };
  let at = 0;
  for (const g of segs) {
    span(at, g.size_bytes, '#dfe2e6');
    for (const b of g.blocks) {
      span(at + Number(b.address - g.address), b.size_bytes, b.state === 'active_pending_free' ? '#e67e22' : (categoryColors[b.category] || '#999'));
    }
    span(at, Math.min(g.size_bytes, perRow / w), '#333'); // segment start mark
    at += g.size_bytes;
  }
}
