// The distributed view: the ranks of the current trace's job side by side
// (the server groups the run's traces into jobs with perf.GroupJobs:
// traces of one process, or of unrelated runs, are separate runs with a
// warning, never ranks of one job). Per worker the plugin's bars
// (computation, overlap, communication, other per step), the straggler
// marked, each rank's collective time split into waiting for the others
// and transfer, the step skew, and the communication-op table.
import { get } from './data.js';
import { el, exact, dur, pct, bytes, rate } from './fmt.js';
import { table } from './table.js';
import { stackedBars } from './chart.js';
import { findingsList } from './findings.js';

const overlapKeys = [
  { key: 'compute_only_ns', name: 'computation', color: '#4e79a7' }, { key: 'overlap_ns', name: 'overlapping', color: '#76b7b2' },
  { key: 'communication_only_ns', name: 'communication', color: '#e15759' }, { key: 'other_ns', name: 'other', color: '#bab0ac' },
];
const waitKeys = [{ key: 'transfer', name: 'transfer', color: '#59a14f' }, { key: 'exposed', name: 'waiting, nothing else to run', color: '#e15759' },
  { key: 'hidden', name: 'waiting while compute runs', color: '#f1ce63' }];
const short = (p) => p.split('/').slice(-2).join('/');

export async function distributedView(body, cur) {
  const d = await get('trace/distributed', { input: cur.id });
  window.__ptscope.distributed = d;
  const node = el('div', { 'data-testid': 'distributed', 'data-state': 'loading' });
  body.append(node);
  const cr = d.cross_rank;
  const job = d.ranks.length > 1;
  // the warning is `ptscope trace`'s own line (lower case, as CLI warnings are): a sentence here
  if (d.warning) node.append(el('p', { class: 'warn', 'data-testid': 'rank-warning' }, d.warning[0].toUpperCase() + d.warning.slice(1) + '. This view compares the ranks of this trace\'s run only; the other runs are listed below.'));
  else if (!job) node.append(el('p', { class: 'muted' }, 'One trace in this run: serve one trace per rank of a job (a folder or a bundle) to compare ranks.'));
  const strag = cr ? cr.straggler_rank : -1;
  const summ = new Map((cr ? cr.ranks : []).map((x) => [x.rank, x]));
  const mark = (r) => r.rank === strag ? 'straggler' : '';
  node.append(el('h3', {}, job ? `Ranks (${d.ranks.length}) of one job` : 'This trace'));
  // the plugin's computation / communication overview, per step
  node.append(el('h4', {}, 'Per step (average): computation, overlap, communication'),
    stackedBars({ testid: 'overlap-bars', keys: overlapKeys, rows: d.ranks.map((r) => ({
      label: `rank ${r.rank}`, mark: mark(r), title: short(r.path),
      parts: overlapKeys.map((k) => ({ key: k.key, value: r.step_overlap[k.key] })),
    })) }));
  if (cr) {
    node.append(el('h4', {}, 'Collectives: waiting for the other ranks vs transfer'),
      el('p', { class: 'muted' }, 'Of each rank\'s collectives matched across ranks: transfer is the shortest time any rank spent in the collective, the rest is waiting for the rank that joined last.' +
        (strag < 0 ? ' No rank stands out as the one the others wait for.' : cr.straggler_wait_ratio > 0
          ? ` Rank ${strag} is the straggler: the others' waiting with nothing else to run is mostly for it (${pct(cr.straggler_wait_ratio)} of their steps' time).`
          : ` Rank ${strag} is the straggler: it joined ${exact((summ.get(strag) || {}).late_arrivals)} of the matched collectives last, late enough to count.`)),
      stackedBars({ testid: 'wait-bars', keys: waitKeys, rows: d.ranks.map((r) => {
        const x = summ.get(r.rank) || {};
        const exposed = x.exposed_wait_ns || 0;
        return { label: `rank ${r.rank}`, mark: mark(r), parts: [{ key: 'transfer', value: x.communication_transfer_ns || 0 },
          { key: 'exposed', value: exposed }, { key: 'hidden', value: Math.max(0, (x.communication_wait_ns || 0) - exposed) }] };
      }) }));
  }
  const rows = d.ranks.map((r) => {
    const x = summ.get(r.rank) || {};
    const wf = (x.waits_for || [])[0];
    return { rank: r.rank, path: short(r.path), step: r.average_step_ns, util: r.gpu_utilization_ratio,
      comm: r.communication.total_ns, overlap: r.communication.overlap_ratio, exposed: r.communication.exposed_ns,
      transfer: cr ? x.communication_transfer_ns : null, wait: cr ? x.communication_wait_ns : null,
      waitsfor: wf ? `rank ${wf.rank}` : '', data: r.dataloader_ratio, flag: mark(r) };
  });
  node.append(el('h4', {}, 'Ranks'), table(rows, [
    { key: 'rank', label: 'rank', num: true }, { key: 'path', label: 'trace' }, { key: 'step', label: 'avg step', num: true, fmt: dur, bar: true },
    { key: 'util', label: 'GPU util', num: true, fmt: pct }, { key: 'comm', label: 'comm', num: true, fmt: dur, title: 'communication kernels, summed' },
    { key: 'overlap', label: 'overlapped', num: true, fmt: pct }, { key: 'exposed', label: 'exposed', num: true, fmt: dur, title: 'communication no compute hides' },
    cr ? { key: 'transfer', label: 'transfer', num: true, fmt: dur } : null, cr ? { key: 'wait', label: 'waiting', num: true, fmt: dur } : null,
    cr ? { key: 'waitsfor', label: 'waits for', plain: true, width: '6em' } : null,
    { key: 'data', label: 'dataloader', num: true, fmt: pct }, { key: 'flag', label: '', plain: true, width: '6.5em' }].filter(Boolean),
  { sort: 'rank', desc: false, testid: 'rank-table' }));
  if (cr && cr.steps && cr.steps.length) {
    node.append(el('h4', {}, 'Step time across ranks'), table(cr.steps.map((x) => ({
      step: x.name, min: Math.min(...x.durations_ns.filter((v) => v > 0)), max: Math.max(...x.durations_ns), skew: x.skew_ns, slowest: x.slowest_rank,
      wait: x.wait_ns ? x.wait_ns.reduce((a, v) => a + Math.max(0, v), 0) : 0, ranks: x.durations_ns.filter((v) => v > 0).length,
    })), [
      { key: 'step', label: 'step' }, { key: 'ranks', label: 'ranks', num: true }, { key: 'min', label: 'fastest', num: true, fmt: dur },
      { key: 'max', label: 'slowest', num: true, fmt: dur }, { key: 'skew', label: 'skew', num: true, fmt: dur, bar: true },
      { key: 'slowest', label: 'slowest rank', num: true, wide: true }, { key: 'wait', label: 'waiting (all ranks)', num: true, fmt: dur }],
    { sort: 'skew', testid: 'skew-table' }));
  }
  commOps(node, d.ranks, !!cr);
  if (d.others.length) {
    node.append(el('h3', {}, `Other runs (${d.others.length} trace${d.others.length === 1 ? '' : 's'}), not compared`), table(d.others.map((r) => ({
      input: r.input, run: r.job + 1, rank: r.rank, path: short(r.path), step: r.average_step_ns, util: r.gpu_utilization_ratio, data: r.dataloader_ratio,
    })), [{ key: 'run', label: 'run', num: true }, { key: 'rank', label: 'rank', num: true }, { key: 'path', label: 'trace' },
      { key: 'step', label: 'avg step', num: true, fmt: dur }, { key: 'util', label: 'GPU util', num: true, fmt: pct }, { key: 'data', label: 'dataloader', num: true, fmt: pct }],
    { sort: 'run', desc: false, testid: 'other-runs', onRow: (r) => { if (r) location.search = `?input=${r.input}&view=distributed`; } }));
  }
  if (d.findings && d.findings.length) node.append(findingsList(d.findings, null));
  node.dataset.state = 'ready';
}

// commOps is the plugin's communication-op table for one worker (a
// selector picks it).
function commOps(node, ranks, compared) {
  const ops = ranks.some((r) => r.communication_ops.length);
  const have = ranks.filter((r) => ops ? r.communication_ops.length : (r.communication.collectives || []).length);
  if (!have.length) return;
  const holder = el('div');
  const show = (r) => {
    // without communication ops (nccl:* / gloo:* host ops), the collectives' kernels
    if (!ops) return holder.replaceChildren(el('p', { class: 'muted' }, 'The trace has no communication operators (nccl:*, gloo:*): its collective kernels by name.'),
      table(r.communication.collectives.map((c) => ({ ...c, where: c.host ? 'host' : 'GPU' })), [
        { key: 'name', label: 'collective' }, { key: 'where', label: 'runs on', plain: true }, { key: 'calls', label: 'calls', num: true, fmt: exact },
        { key: 'bytes', label: 'total size', num: true, fmt: bytes }, { key: 'total_ns', label: 'total time', num: true, fmt: dur, bar: true }],
      { sort: 'total_ns', testid: 'comm-ops' }));
    holder.replaceChildren(table(r.communication_ops.map((o) => ({ ...o, transfer_ns: o.transfer_ns < 0 ? null : o.transfer_ns, mean_transfer_ns: o.transfer_ns < 0 ? null : o.mean_transfer_ns })), [
      { key: 'name', label: 'operation' }, { key: 'calls', label: 'calls', num: true, fmt: exact },
      { key: 'bytes', label: 'total size', num: true, fmt: bytes }, { key: 'mean_bytes', label: 'avg size', num: true, fmt: bytes },
      { key: 'latency_ns', label: 'total latency', num: true, fmt: dur, bar: true }, { key: 'mean_latency_ns', label: 'avg latency', num: true, fmt: dur },
      compared ? { key: 'transfer_ns', label: 'transfer', num: true, fmt: dur, title: 'the union of the calls\' transfer time (the shortest any rank spent)' } : null,
      compared ? { key: 'mean_transfer_ns', label: 'avg transfer', num: true, fmt: dur } : null,
      { key: 'bandwidth_bytes_per_s', label: 'bandwidth', num: true, fmt: rate, title: 'total size over total latency (algorithm bandwidth)' }].filter(Boolean),
    { sort: 'latency_ns', testid: 'comm-ops' }));
  };
  const sel = el('select', { 'data-testid': 'comm-worker', onchange: (e) => show(have[+e.target.value]) }, have.map((r, k) => el('option', { value: k }, `rank ${r.rank}`)));
  node.append(el('div', { class: 'toolbar' }, el('h4', {}, 'Communication operations'), have.length > 1 ? sel : null), holder);
  show(have[0]);
}
