// The answers a user came for, first on each page, each a link into the
// view that shows it. Everything here is read from the analysis results
// (the summary views); nothing is computed but shares and picks.
import { el, bytes, exact, dur, pct, link, categoryColors } from './fmt.js';

function row(label, ...content) {
  return el('div', { class: 'ans' }, el('span', { class: 'ans-k' }, label), el('span', { class: 'ans-v' }, ...content));
}

function sev(f) {
  return el('span', { class: 'sev ' + f.severity }, f.severity);
}

// memoryAnswers: go is {peak(), highlight(by, key, name), zoom(x0, x1),
// steps(), finding(f)}; sources are the mem/breakdown rows by source at
// the peak (their keys highlight the timeline).
export function memoryAnswers(summary, sources, go) {
  const r = summary.result, p = r.peak;
  const box = el('section', { class: 'answers', 'data-testid': 'answers', 'data-state': 'ready' });
  if (!r.has_history) {
    box.append(row('Memory', `${bytes(r.end.allocated_bytes)} allocated, ${bytes(r.end.reserved_bytes)} reserved at dump time (no allocation history recorded)`));
  } else {
    const step = p.step >= 0 && r.steps[p.step] ? r.steps[p.step].name : 'outside the steps';
    box.append(row('Peak', link(`${bytes(p.allocated_bytes)} allocated`, go.peak, { 'data-testid': 'answer-peak' }),
      ` (${exact(p.allocated_bytes)} B; ${bytes(p.reserved_at_peak_bytes || p.reserved_bytes)} reserved) in ${step}, ${p.phase}, at entry ${exact(p.event_index)}`));
  }
  const total = p.allocated_bytes || r.end.allocated_bytes || 1;
  const cats = (r.categories_at_peak || []).slice(0, 3);
  if (cats.length) {
    box.append(row('Filled by', ...cats.flatMap((c, i) => [i ? ' · ' : '',
      el('i', { class: 'dot', style: `background:${categoryColors[c.category] || '#999'}` }),
      link(`${c.category} ${bytes(c.bytes)} (${pct(c.bytes / total)})`, () => go.highlight('category', summary.categories.indexOf(c.category), c.category))])));
  }
  const mine = (sources || []).filter((s) => !s.name.startsWith('<')).slice(0, 3);
  if (mine.length) {
    box.append(row('Your lines', ...mine.flatMap((s, i) => [i ? ' · ' : '',
      link(`${s.name} ${bytes(s.bytes)}`, () => go.highlight('source', s.key, s.name), { class: 'code' })])));
  }
  if (r.has_history) {
    let pat = r.pattern;
    const parts = [];
    if (r.pattern === 'leak' && r.leak) {
      parts.push(link(`leak: +${bytes(r.leak.per_step_bytes)} per step`, go.steps), ` (${bytes(r.leak.growth_bytes)} over ${r.leak.steps} steps)`);
      const s = r.leak.stacks && r.leak.stacks[0];
      if (s) parts.push(', largest source ', el('span', { class: 'code' }, s.source));
    } else if (r.pattern === 'spike') {
      const top = (r.steps || []).filter((s) => !s.partial).sort((a, b) => b.peak_allocated_bytes - a.peak_allocated_bytes)[0];
      parts.push(link(`spike${top ? ' in ' + top.name : ''}`, () => top && top.start_index >= 0 ? go.zoom(top.start_index, top.end_index) : go.steps()),
        top ? ` (${bytes(top.peak_allocated_bytes)})` : '');
    } else {
      parts.push(link(pat || 'unknown', go.steps), ` over ${(r.steps || []).length} steps`);
    }
    box.append(row('Pattern', ...parts));
  }
  const ooms = r.ooms || [];
  if (ooms.length) {
    const x = ooms[0];
    const verdict = x.verdict === 'capacity' ? 'does not fit' : 'fragmentation';
    box.append(row('Out of memory', link(`${ooms.length > 1 ? ooms.length + ' OOMs, first: ' : ''}${verdict}`, () => x.event_index >= 0 && go.zoom(x.event_index - 50, x.event_index + 50), { class: 'bad', 'data-testid': 'answer-oom' }),
      ` asking ${bytes(x.requested_bytes)} with ${bytes(x.allocated_bytes)} allocated, ${bytes(x.device_free_bytes)} free on the device`));
  } else if (r.ooms_outside_view) {
    box.append(row('Out of memory', el('span', { class: 'bad' }, `${r.ooms_outside_view} outside this view`), ' (see the findings)'));
  } else {
    box.append(row('Out of memory', 'none recorded'));
  }
  const f = (r.findings || []).find((x) => x.severity !== 'info') || (r.findings || [])[0];
  box.append(row('Top finding', f ? [sev(f), ' ', link(f.message, () => go.finding(f))] : 'none'));
  return box;
}

// traceAnswers: go is {steps(), breakdown(), timeline(), critical(), finding(f)}.
export function traceAnswers(r, go) {
  const box = el('section', { class: 'answers', 'data-testid': 'answers', 'data-state': 'ready' });
  const steps = r.steps || [];
  box.append(row('Step time', link(`${dur(r.average_step_ns)} average`, go.steps, { 'data-testid': 'answer-step' }),
    ` over ${steps.length} step${steps.length === 1 ? '' : 's'}` + (r.step_time_variation_ratio > 0.05 ? ` (varies ${pct(r.step_time_variation_ratio)})` : '')));
  const b = r.average_breakdown || {};
  const parts = Object.entries(b).filter(([, v]) => typeof v === 'number' && v > 0).sort((x, y) => y[1] - x[1]);
  const tot = parts.reduce((s, [, v]) => s + v, 0) || 1;
  if (parts.length) box.append(row('Where it goes', ...parts.slice(0, 4).flatMap(([k, v], i) => [i ? ' · ' : '', link(`${k.replace(/_ns$/, '')} ${pct(v / tot)}`, go.breakdown)])));
  box.append(row('GPU utilisation', link(pct(r.gpu_utilization_ratio), go.timeline),
    r.tensor_core_ratio != null ? ` · tensor cores ${pct(r.tensor_core_ratio)} of kernel time` : ''));
  const cp = r.critical_path;
  if (cp && cp.length_ns > 0 && go.critical) {
    const names = { gpu_compute_bound_ns: 'GPU compute', gpu_communication_bound_ns: 'GPU communication', cpu_bound_ns: 'CPU',
      data_loading_ns: 'data loading', gpu_kernel_launch_overhead_ns: 'launch delays', gpu_kernel_kernel_overhead_ns: 'gaps between kernels' };
    const parts = Object.entries(cp.bound_by || {}).filter(([, v]) => v > 0).sort((x, y) => y[1] - x[1]).slice(0, 2);
    const top = (cp.items || [])[0];
    box.append(row('Critical path', link(parts.map(([k, v]) => `${names[k] || k} ${pct(v / cp.length_ns)}`).join(' · ') || dur(cp.length_ns), go.critical, { 'data-testid': 'answer-critical' }),
      top ? [' · most critical: ', el('span', { class: 'code' }, top.name.length > 60 ? top.name.slice(0, 57) + '…' : top.name), ` ${dur(top.critical_ns)}`] : ''));
  }
  const f = (r.findings || []).find((x) => x.severity !== 'info') || (r.findings || [])[0];
  box.append(row('Top finding', f ? [sev(f), ' ', link(f.message, () => go.finding(f))] : 'none'));
  return box;
}
