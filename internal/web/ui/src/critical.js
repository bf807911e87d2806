// The critical path view (HTA's lightweight critical path): the chain of
// host work, kernels, launch delays, gaps between kernels and
// synchronisations that bounds each step. The longest step's chain is a
// row over the trace timeline (its events outlined in the lanes); the
// tables say what bounds the steps, what shortening each piece of work
// would save, and list the chain: a row zooms the timeline to its piece.
import { get } from './data.js';
import { el, exact, dur, pct, swatch, at } from './fmt.js';
import { table } from './table.js';
import { traceTimeline, overlayColors } from './trace.js';

const bounds = [
  ['gpu_compute_bound_ns', 'GPU compute', '#4e79a7'], ['gpu_communication_bound_ns', 'GPU communication', '#59a14f'],
  ['cpu_bound_ns', 'CPU', '#e15759'], ['data_loading_ns', 'data loading', '#b07aa1'],
  ['gpu_kernel_launch_overhead_ns', 'launch delay', '#f28e2b'], ['gpu_kernel_kernel_overhead_ns', 'gaps between kernels', '#bab0ac'],
];
const boundName = { gpu_compute_bound: 'GPU compute', gpu_communication_bound: 'GPU communication', cpu_bound: 'CPU', data_loading: 'data loading',
  gpu_kernel_launch_overhead: 'launch delay', gpu_kernel_kernel_overhead: 'gaps between kernels' };
const kindName = { cpu: 'host', kernel: 'GPU', launch_delay: 'launch delay', kernel_gap: 'kernel gap', sync: 'sync' };

function boundBar(b, total) {
  const parts = bounds.map(([k, name, color]) => ({ name, color, v: b[k] || 0 })).filter((p) => p.v > 0);
  return el('div', {}, el('div', { class: 'stackbar' }, parts.map((p) => el('span', { style: `width:${100 * p.v / Math.max(1, total)}%;background:${p.color}`, title: `${p.name}: ${dur(p.v)}` }, p.v / total > 0.12 ? `${p.name} ${pct(p.v / total)}` : ''))),
    el('div', { class: 'legend' }, parts.map((p) => swatch(p.color, `${p.name} ${dur(p.v)} (${pct(p.v / Math.max(1, total))})`))));
}

export async function criticalView(body, input, s) {
  const cp = await get('trace/critical', { input });
  window.__ptscope.critical = cp;
  const node = el('div', { 'data-testid': 'critical', 'data-state': 'loading' });
  body.append(node);
  const steps = cp.steps || [];
  if (!steps.length) {
    node.append(el('p', { class: 'muted' }, 'No critical path: the trace has no step with GPU work to build one from.'));
    node.dataset.state = 'ready';
    return;
  }
  const path = (cp.path || []).map((x, i) => ({ ...x, i, t0: x.timeline_ns, t1: x.timeline_ns + x.duration_ns, since: x.timeline_ns - s.start_ns }));
  const longest = steps.find((x) => x.step === cp.longest_step) || steps[0];
  const top = (cp.items || [])[0];
  node.append(el('section', { class: 'answers', 'data-testid': 'critical-answers' },
    el('div', { class: 'ans' }, el('span', { class: 'ans-k' }, 'Critical path'), el('span', { class: 'ans-v' },
      `${dur(cp.length_ns)} over ${steps.length} step${steps.length === 1 ? '' : 's'}; the longest, ${longest.step}: ${dur(longest.length_ns)} (${exact(path.length)} pieces, drawn over the timeline below)`)),
    top ? el('div', { class: 'ans' }, el('span', { class: 'ans-k' }, 'Most critical'), el('span', { class: 'ans-v' },
      el('span', { class: 'code' }, top.name), ` ${dur(top.critical_ns)} on the path (${boundName[top.bound_by] || top.bound_by})` + (top.saving_ns > 0 ? `; the steps would be ${dur(top.saving_ns)} shorter without it` : ''))) : null),
  el('h4', {}, 'What bounds the steps'), boundBar(cp.bound_by, cp.length_ns));
  if (!cp.sync_events) node.append(el('p', { class: 'muted' }, 'The trace has no cuda_sync events (torch.profiler with experimental_config=_ExperimentalConfig(enable_cuda_sync_events=True)): GPU-to-host waits are not edges, so the path may run through the end of a waiting host call instead.'));
  if (cp.windowed) node.append(el('p', { class: 'muted' }, 'The trace was analysed in windows of steps: a step at a window\'s edge may come out longer or shorter than in a whole-trace analysis.'));

  // the timeline with the chain over it, zoomed to the longest step
  const last = path.length ? path[path.length - 1] : null;
  const range = path.length ? [path[0].t0, last.t1] : null;
  const pathTable = { select: () => false };
  const tl = traceTimeline(node, input, s, {
    overlay: path, range, height: '46vh', overlayLabel: 'critical path',
    onOverlay: (sg) => pathTable.select((r) => r.i === sg.i),
  });
  const kinds = [...new Set(path.map((x) => x.kind))];
  tl.node.querySelector('.toolbar').append(el('span', { class: 'legend' }, kinds.map((k) => swatch(overlayColors[k] || '#999', kindName[k] || k))));
  const goTo = (row) => {
    if (!row) return;
    tl.mark(row);
    tl.zoomTo(row.t0, row.t1);
    if (row.event >= 0) tl.open(row.event);
    window.__ptscope.timings.criticalClick = performance.now();
  };

  const grid = el('div');
  node.append(grid);
  const items = (cp.items || []).map((x) => ({ ...x, bound: boundName[x.bound_by] || x.bound_by, share: x.critical_ns / Math.max(1, cp.length_ns) }));
  grid.append(el('div', {}, el('h4', {}, `On the path, by name (${items.length})`),
    el('p', { class: 'muted' }, 'Summed over the steps. Saving: how much shorter the steps would be if that work took no time (another chain may then bound them); measured for each step\'s largest items.'),
    table(items, [{ key: 'name', label: 'work', tail: 40 }, { key: 'bound', label: 'bound by', width: '11em', plain: true },
      { key: 'events', label: 'events', num: true, fmt: exact }, { key: 'critical_ns', label: 'on path', num: true, fmt: dur, bar: true },
      { key: 'share', label: 'share', num: true, fmt: pct }, { key: 'saving_ns', label: 'saving', num: true, fmt: dur }],
    { sort: 'critical_ns', testid: 'critical-items', filter: true, onRow: (r) => {
      if (!r) return;
      const first = path.filter((x) => x.name === r.name).sort((a, b) => b.duration_ns - a.duration_ns)[0];
      if (first) pathTable.select((x) => x.i === first.i);
    } })));
  const pt = table(path.map((x) => ({ ...x, kindName: kindName[x.kind] || x.kind, bound: boundName[x.bound_by] || x.bound_by || '' })), [
    { key: 'i', label: '#', num: true }, { key: 'since', label: 'start', num: true, fmt: at, title: 'since the trace start' },
    { key: 'kindName', label: 'kind', plain: true, width: '7.5em' }, { key: 'name', label: 'work (the longest event in it)', tail: 40 },
    { key: 'events', label: 'events', num: true, fmt: exact },
    { key: 'duration_ns', label: 'duration', num: true, fmt: dur, bar: true }],
  { sort: 'i', desc: false, testid: 'critical-path', filter: true, onRow: goTo });
  Object.assign(pathTable, { select: pt.select });
  grid.append(el('div', {}, el('h4', {}, `The chain of ${longest.step}, in time order (${exact(path.length)})`),
    el('p', { class: 'muted' }, 'A row zooms the timeline to its piece and opens its event.'), pt));
  if (steps.length > 1) {
    node.append(el('h4', {}, 'Per step'), table(steps.map((x) => ({ step: x.step, length: x.length_ns, ...Object.fromEntries(bounds.map(([k]) => [k, x.bound_by[k]])), failed: x.failed || '' })), [
      { key: 'step', label: 'step' }, { key: 'length', label: 'path', num: true, fmt: dur, bar: true },
      ...bounds.map(([k, name]) => ({ key: k, label: name, num: true, fmt: dur })), { key: 'failed', label: 'no path', width: '10em' }],
    { sort: 'step', desc: false, testid: 'critical-steps' }));
  }
  node.dataset.state = 'ready';
}
