// ptscope's page: one input at a time; views chosen by ?view= (memory,
// state, trace, operators, kernels, distributed), the input by ?input=, the
// device by ?device=; ?view=diff&a=&b= compares two inputs. Test hooks: data-testid and data-state="ready" on drawn views;
// window.__ptscope.timings.
import { get, htmlMode, parsedAt } from './data.js';
import { el, bytes, exact, dur, pct, fill } from './fmt.js';
import { MemoryTimeline, blockPanel } from './memview.js';
import { memoryAnswers } from './answers.js';
import { table } from './table.js';
import { stateView } from './state.js';
import { findingsList } from './findings.js';
import { traceOverview, traceTimeline } from './trace.js';
import { operatorView, kernelView } from './optables.js';
import { distributedView } from './distributed.js';
import { criticalView } from './critical.js';
import { gpuView } from './gpu.js';
import { memoryOpsView } from './opmemory.js';

window.__ptscope = { timings: { start: performance.now(), dataParsed: parsedAt }, errors: [] };

const params = new URLSearchParams(location.search);
const app = document.getElementById('app');

function setParams(p) {
  const q = new URLSearchParams(location.search);
  for (const [k, v] of Object.entries(p)) v == null ? q.delete(k) : q.set(k, v);
  history.replaceState(null, '', '?' + q);
}

async function main() {
  let inputs;
  try {
    inputs = (await get('inputs')).inputs;
  } catch (e) {
    app.append(el('p', { class: 'error' }, 'cannot list inputs: ' + e.message));
    return;
  }
  if (!inputs.length) {
    // a folder a capture has not written to yet: wait for its first file
    app.append(el('p', { class: 'muted', 'data-testid': 'waiting' }, 'No snapshot or trace yet: waiting for the folder to fill…'));
    const t = setInterval(async () => { if ((await get('inputs')).inputs.length) { clearInterval(t); location.reload(); } }, 1000);
    return;
  }
  const view = params.get('view') || '';
  if (view === 'diff' && !htmlMode) {
    renderNav(inputs, null, view);
    return showDiff(inputs);
  }
  const traceViews = TRACE_TABS.map(([v]) => v);
  let id = params.has('input') ? +params.get('input') : NaN;
  if (isNaN(id)) {
    const want = traceViews.includes(view) ? 'trace' : 'snapshot';
    const first = inputs.find((i) => i.kind === want) || inputs[0];
    id = first ? first.id : 0;
  }
  const it = inputs.find((i) => i.id === id);
  renderNav(inputs, it, view);
  if (!it) { app.append(el('p', { class: 'error' }, `no input ${id}`)); return; }
  const body = el('main');
  app.append(body);
  await waitReady(it, body);
  if (it.status === 'error') {
    body.append(el('p', { class: 'error', 'data-testid': 'input-error' }, it.error));
    return;
  }
  if (it.kind === 'trace') return showTrace(it, view || 'trace', body);
  return showMemory(it, view || 'memory', body);
}

// waitReady polls the input list until the input has loaded (or failed).
async function waitReady(it, body) {
  const note = el('p', { class: 'muted' });
  body.append(note);
  while (it.status === 'queued' || it.status === 'loading') {
    note.textContent = `${it.path} is ${it.status}…`;
    await new Promise((r) => setTimeout(r, 150));
    const list = (await get('inputs')).inputs;
    Object.assign(it, list.find((i) => i.id === it.id));
  }
  note.remove();
}

// the profiler views, by ?view=
const TRACE_TABS = [['trace', 'Overview & timeline'], ['operators', 'Operators'], ['kernels', 'Kernels'], ['opmemory', 'Memory'],
  ['gpu', 'GPU'], ['critical', 'Critical path'], ['distributed', 'Distributed']];

function renderNav(inputs, cur, view) {
  const sel = el('select', { 'data-testid': 'input-select', onchange: (e) => { location.search = '?input=' + e.target.value; } });
  const runs = new Map();
  for (const i of inputs) {
    const run = i.run || '';
    if (!runs.has(run)) runs.set(run, []);
    runs.get(run).push(i);
  }
  for (const [run, list] of runs) {
    const parent = run ? el('optgroup', { label: run }) : sel;
    for (const i of list) {
      const label = `${i.kind === 'trace' ? 'trace' : 'memory'}: ${i.path.split('/').slice(-2).join('/')}` + (i.status === 'error' ? ' (error)' : '');
      parent.append(el('option', { value: i.id, selected: cur && i.id === cur.id }, label));
    }
    if (run) sel.append(parent);
  }
  const tabs = cur && cur.kind === 'trace'
    ? TRACE_TABS
    : [['memory', 'Memory timeline'], ['state', 'Allocator state']];
  const nav = el('nav', {}, el('b', {}, 'ptscope'), sel,
    cur || view !== 'diff' ? tabs.map(([v, label]) => el('a', { href: `?input=${cur ? cur.id : 0}&view=${v}`, class: (view || tabs[0][0]) === v ? 'on' : null }, label)) : null,
    compareLink(inputs, cur, view));
  const errs = inputs.filter((i) => i.status === 'error');
  app.append(nav);
  if (errs.length) app.append(el('div', { class: 'errors' }, errs.map((i) => el('p', { class: 'error' }, i.error))));
  if (!htmlMode) pollNewInputs(inputs.length);
}

// compareLink opens the compare view with the current input as A and the
// next input of the same kind as B (a server with 2+ inputs only).
function compareLink(inputs, cur, view) {
  if (htmlMode || inputs.length < 2) return null;
  let href = location.search;
  if (view !== 'diff') {
    const a = cur || inputs[0];
    const same = inputs.filter((i) => i.id !== a.id && i.kind === a.kind);
    const b = same.find((i) => i.id > a.id) || same[0] || inputs.find((i) => i.id !== a.id);
    href = `?view=diff&a=${a.id}&b=${b.id}`;
  }
  return el('a', { href, class: view === 'diff' ? 'on' : null, 'data-testid': 'compare-link' }, 'Compare');
}

// showDiff is the compare view: `ptscope diff A B --html`'s sections,
// computed by the server (/api/v1/diff) from the inputs it holds.
async function showDiff(inputs) {
  const a = +params.get('a'), b = +params.get('b');
  const pick = (name, cur) => el('select', { 'data-testid': 'diff-' + name, onchange: (e) => { setParams({ [name]: e.target.value }); location.reload(); } },
    inputs.map((i) => el('option', { value: i.id, selected: i.id === cur }, `${i.id}: ${i.kind === 'trace' ? 'trace' : 'memory'}: ${i.path.split('/').slice(-2).join('/')}`)));
  const body = el('main');
  const view = el('div', { class: 'diff', 'data-testid': 'diff-view', 'data-state': 'loading' });
  body.append(el('div', { class: 'summary' }, 'A (baseline) ', pick('a', a), ' B ', pick('b', b), ' ',
    el('button', { onclick: () => { setParams({ a: b, b: a }); location.reload(); } }, 'swap')), view);
  app.append(body);
  const fail = (msg) => { fill(view, el('p', { class: 'error' }, msg)); view.dataset.state = 'error'; };
  const ia = inputs.find((i) => i.id === a), ib = inputs.find((i) => i.id === b);
  if (!ia || !ib) return fail(`no input ${!ia ? params.get('a') : params.get('b')}`);
  await waitReady(ia, view);
  await waitReady(ib, view);
  try {
    const d = await get('diff', { a, b });
    window.__ptscope.diff = d.report;
    view.innerHTML = d.html; // escaped, script-free: diffreport's HTML sections
    view.dataset.state = 'ready';
    window.__ptscope.timings.diff = performance.now();
  } catch (e) {
    fail(e.message);
  }
}

// pollNewInputs tells the user when a rescan found new files (a running capture).
function pollNewInputs(n) {
  setInterval(async () => {
    try {
      const list = (await get('inputs')).inputs;
      if (list.length > n) {
        const s = document.querySelector('select[data-testid=input-select]');
        const opt = el('option', { value: list[list.length - 1].id }, `+ ${list.length - n} new input(s): reload`);
        s.append(opt);
        n = list.length;
      }
    } catch (e) { /* server gone */ }
  }, 3000);
}

async function showMemory(it, view, body) {
  const device = params.has('device') ? +params.get('device') : it.devices[0].device;
  const summary = await get('mem/summary', { input: it.id, device });
  window.__ptscope.timings.memSummary = performance.now();
  const res = summary.result;
  if (it.devices.length > 1) {
    body.append(el('div', { class: 'toolbar' }, 'device ', el('select', { onchange: (e) => { setParams({ device: e.target.value }); location.reload(); } },
      it.devices.map((d) => el('option', { value: d.device, selected: d.device === device }, `cuda:${d.device}`)))));
  }
  const stateURL = (ev) => `?input=${it.id}&device=${device}&view=state&event=${ev}`;
  if (view === 'state') {
    body.append(el('p', { class: 'summary' }, `peak ${bytes(res.peak.allocated_bytes)} allocated at entry ${exact(res.peak.event_index)} (${res.peak.phase}) · ${exact(summary.entries)} entries`));
    const time = params.has('time') ? params.get('time') : null;
    const ev = params.has('event') ? +params.get('event') : time != null ? null : res.peak.event_index;
    return stateView(body, { input: it.id, device, summary, event: ev, time, setParams });
  }
  const sourcesAsked = get('mem/breakdown', { input: it.id, device, by: 'source' }).then((r) => r.rows, () => []);
  const answersBox = el('div');
  body.append(answersBox);
  const grid = el('div', { class: 'memgrid' });
  const left = el('div', { class: 'memleft' });
  const right = el('div', { class: 'memright' });
  grid.append(left, right);
  body.append(grid);
  const panel = el('div', { class: 'panel', 'data-testid': 'block-details', 'data-state': 'empty' }, el('p', { class: 'muted' }, 'Click a block to see its stack (Go to peak first to see the peak\'s blocks).'));
  const ctx = {
    input: it.id, device, summary, highlight: null,
    onBlock: (b, t0) => {
      window.__ptscope.block = b;
      blockPanel(panel, b, {
        startNS: summary.start_ns,
        zoom: (blk) => { const s = Math.max(0, blk.alloc_event_index), e = blk.free_requested_event_index < 0 ? summary.entries : blk.free_requested_event_index + 1; const pad = Math.max(2, (e - s) / 4); tl.zoomTo(s - pad, e + pad); },
        state: (ev) => { location.search = stateURL(ev); },
      });
      window.__ptscope.timings.blockDetails = performance.now();
      if (t0 != null) window.__ptscope.lastClickMS = performance.now() - t0;
    },
    onNothing: (what) => {
      panel.dataset.state = 'nothing';
      fill(panel, el('p', { 'data-testid': 'nothing-here' }, what.text));
    },
  };
  const tl = new MemoryTimeline(left, ctx);
  window.__ptscope.memory = tl;
  const x0 = params.get('x0'), x1 = params.get('x1');
  const drawn = x0 != null && x1 != null ? tl.zoomTo(+x0, +x1) : tl.refresh();
  left.append(panel);
  // the answers first (they need only the summary and the source lines),
  // then the timeline's first draw, then the tables
  let bd = null, stepsTable = null;
  const showFinding = (f) => {
    const at = f.at || {};
    const ev = at.event_index ?? f.event_index;
    if (at.view === 'state') { location.search = stateURL(ev ?? res.peak.event_index); return; }
    if (at.view === 'steps' && at.name && bd) { bd.highlightName('source', at.name); return; }
    if (at.view === 'steps' && stepsTable) { stepsTable.scrollIntoView({ behavior: 'smooth' }); return; }
    if (ev != null && ev === res.peak.event_index) { tl.goToPeak(); tl.node.scrollIntoView({ behavior: 'smooth' }); return; }
    if (ev != null) tl.zoomTo(ev - Math.max(20, summary.entries / 200), ev + Math.max(20, summary.entries / 200));
    tl.node.scrollIntoView({ behavior: 'smooth' });
  };
  answersBox.append(memoryAnswers(summary, await sourcesAsked, {
    peak: () => { tl.goToPeak(); tl.node.scrollIntoView({ behavior: 'smooth' }); },
    highlight: (by, key, name) => bd ? bd.highlight(by, key, name) : tl.setHighlight(`${by}:${key}`),
    zoom: (x0, x1) => tl.zoomTo(x0, x1),
    steps: () => (stepsTable || tl.node).scrollIntoView({ behavior: 'smooth' }),
    finding: showFinding,
  }));
  await drawn;
  bd = await breakdowns(it.id, device, (hl) => tl.setHighlight(hl));
  right.append(bd);
  stepsTable = stepTable(res, tl);
  if (stepsTable) right.append(stepsTable);
  if (summary.phase_rows && summary.phase_rows.length) {
    // one rank's phases (the usual bundle) need no rank column
    const ranks = new Set(summary.phase_rows.map((p) => p.rank));
    left.append(el('h3', {}, 'Phases (ptscope run)'), table(summary.phase_rows.map((p) => ({ ...p, peak_bytes: p.peak_bytes < 0 ? null : p.peak_bytes })), [
      { key: 'step', label: 'step', num: true }, { key: 'phase', label: 'phase', plain: true },
      ranks.size > 1 ? { key: 'rank', label: 'rank', num: true } : null,
      { key: 'allocated_before_bytes', label: 'before', num: true, fmt: bytes }, { key: 'allocated_after_bytes', label: 'after', num: true, fmt: bytes },
      { key: 'delta_bytes', label: 'delta', num: true, fmt: bytes, bar: true }, { key: 'peak_bytes', label: 'peak', num: true, fmt: bytes }].filter(Boolean),
    { sort: 'step', desc: false, testid: 'phase-table' }));
  }
  body.append(findingsList(res.findings || [], showFinding));
  if (params.has('block')) {
    try {
      const b = await get('mem/block', { input: it.id, device, id: +params.get('block') });
      tl.select(b);
      ctx.onBlock(b);
    } catch (e) { ctx.onNothing({ text: e.message }); }
  }
}

// stepTable lists the steps: a run recorded in stack windows lists every
// step, but only those in the view's trace (start_index >= 0) can be
// zoomed to, and a step's peak known only as a running maximum is a lower
// bound.
function stepTable(res, tl) {
  if (!res.steps || !res.steps.length) return null;
  const stepFlag = (s) => [s.outlier && 'outlier', s.partial && 'partial', s.peak_lower_bound && 'peak at least',
    s.start_index < 0 && 'no trace here'].filter(Boolean).join(', ');
  return el('div', {}, el('h3', {}, `Steps (${res.steps.length})`), table(res.steps.map((s) => ({ ...s, flag: stepFlag(s) })), [
    { key: 'name', label: 'step' }, { key: 'peak_allocated_bytes', label: 'peak', num: true, fmt: bytes, bar: true },
    { key: 'end_allocated_bytes', label: 'at end', num: true, fmt: bytes }, { key: 'duration_ns', label: 'duration', num: true, fmt: dur },
    { key: 'flag', label: '', plain: true, width: '7em' }], { sort: 'index', desc: false, testid: 'step-table', onRow: (r) => r && r.start_index >= 0 && tl.zoomTo(r.start_index, r.end_index) }));
}

// breakdowns are the tables of what was alive at the peak, by category,
// keyword group, source, module and stack; a row highlights its blocks.
// The returned node's highlight(by, key) opens that table at that row.
async function breakdowns(input, device, highlight) {
  const box = el('div', { class: 'breakdowns', 'data-testid': 'breakdowns' });
  const tabs = el('div', { class: 'tabs' });
  const holder = el('div');
  const kinds = [['category', 'Categories'], ['group', 'Groups'], ['source', 'Sources'], ['module_group', 'Modules (grouped)'], ['module', 'Modules'], ['stack', 'Stacks']];
  let current = null, tbl = null;
  async function show(by) {
    tabs.querySelectorAll('button').forEach((b) => b.classList.toggle('on', b.dataset.by === by));
    current = by;
    try {
      const r = await get('mem/breakdown', { input, device, by });
      const total = r.rows.reduce((s, x) => s + x.bytes, 0) || 1;
      const rows = r.rows.map((x) => ({ ...x, share: x.bytes / total }));
      tbl = table(rows, [{ key: 'name', label: kinds.find(([k]) => k === by)[1].toLowerCase(), tail: by === 'category' ? 0 : 24 },
        { key: 'bytes', label: 'bytes', num: true, fmt: bytes, bar: true }, { key: 'share', label: 'share', num: true, fmt: pct },
        { key: 'count', label: 'blocks', num: true, fmt: exact }],
      { sort: 'bytes', testid: 'breakdown-table', filter: true, onRow: (row) => highlight(row ? `${by}:${row.key}` : null) });
      fill(holder, el('p', { class: 'muted' }, `alive at entry ${exact(r.event_index)} (the peak); select a row to highlight its blocks`), tbl);
    } catch (e) {
      fill(holder, el('p', { class: 'error' }, e.message));
    }
  }
  for (const [by, label] of kinds) tabs.append(el('button', { 'data-by': by, onclick: () => show(by) }, label));
  box.append(el('h3', {}, 'At the peak'), tabs, holder);
  await show('category');
  box.highlight = async (by, key) => {
    if (current !== by) await show(by);
    if (!tbl || !tbl.select((r) => r.key === key)) highlight(`${by}:${key}`);
    box.scrollIntoView({ behavior: 'smooth', block: 'nearest' });
  };
  box.highlightName = async (by, name) => {
    if (current !== by) await show(by);
    tbl && tbl.select((r) => r.name === name);
  };
  return box;
}

async function showTrace(it, view, body) {
  const s = await get('trace/summary', { input: it.id });
  window.__ptscope.trace = s;
  if (view === 'distributed') return distributedView(body, it);
  if (view === 'operators') return body.append(operatorView(s.result));
  if (view === 'kernels') return body.append(kernelView(s.result));
  if (view === 'opmemory') return memoryOpsView(body, it.id, s);
  if (view === 'gpu') return gpuView(body, it.id, s);
  if (view === 'critical') return criticalView(body, it.id, s);
  body.append(traceOverview(s.result, it.id, s));
  traceTimeline(body, it.id, s);
}

main().catch((e) => {
  window.__ptscope.errors.push(String(e));
  app.append(el('p', { class: 'error' }, String(e.message || e)));
});
