// The GPU view: what the streams did between the kernels (HTA's launch
// statistics, queue length, idle intervals per stream), copy bandwidth
// over time and the GPU-side user annotations.
import { get } from './data.js';
import { el, exact, dur, rate, bytes, keyColor, durRound } from './fmt.js';
import { table } from './table.js';
import { seriesChart, histogram } from './chart.js';

const kv = (pairs) => el('table', { class: 'kv' }, pairs.filter(Boolean).map(([k, v, t]) => el('tr', { title: t || null }, el('th', {}, k), el('td', { class: 'num' }, v))));
const streamName = (x) => `GPU ${x.device} stream ${x.stream}`;

export async function gpuView(body, input, s) {
  const g = await get('trace/gpu', { input });
  const start = s.base_ns + s.start_ns, end = s.base_ns + s.end_ns;
  const node = el('div', { class: 'gpuview', 'data-testid': 'gpu-view', 'data-state': 'ready' });
  body.append(node);
  if (g.skipped_analyses && g.skipped_analyses.length) node.append(el('p', { class: 'muted' }, 'Left out (the trace was analysed in windows): ' + g.skipped_analyses.join('; ')));
  node.append(launchSection(g.launch));
  node.append(streamSections(g.streams || [], start, end));
  node.append(copySection(g.copy_bandwidth || [], start, end));
  node.append(annotationSection(g.gpu_annotations || []));
}

function launchSection(l) {
  const h = l.hta || {};
  const box = el('section', { 'data-testid': 'launch-stats' }, el('h3', {}, 'Kernel launches'));
  const bounds = l.delay_bucket_upper_ns || [];
  const hist = (l.delay_histogram || []).map((n, k) => ({ n, label: bounds[k] < 0 ? `> ${durRound(bounds[k - 1])}` : `≤ ${durRound(bounds[k])}` }));
  box.append(el('div', { class: 'twocol' },
    kv([['launches', exact(l.launches)], ['launch delay p50', dur(l.p50_delay_ns), 'GPU start minus the end of the launch call: large values mean a deep queue, not a slow launch'],
      ['launch delay p95 / max', `${dur(l.p95_delay_ns)} / ${dur(l.max_delay_ns)}`],
      ['delays over 100 us', exact(l.long_delays)], ['mean launch call', dur(l.mean_runtime_ns)],
      ['launch calls over 50 us', exact(l.long_launch_calls)],
      ['short kernels (HTA)', `${exact(h.short_kernels)} of ${exact(h.launches)}`, 'the kernel runs shorter than its launch call takes'],
      ['kernels under 10 us', `${exact(l.tiny_kernels)} of ${exact(l.kernels)}`],
      ['launch-bound steps', `${exact(l.launch_bound_steps)} of ${exact((l.steps || []).length)}`, 'steps whose launch calls take longer than their kernels']]),
    el('div', {}, el('h4', {}, 'Launch delay: launches by delay'), histogram({ testid: 'delay-histogram', cols: hist, unitLabel: 'launches' }))));
  if ((l.steps || []).length) {
    box.append(el('h4', {}, 'Per step'), table(l.steps.map((x) => ({ ...x, bound: x.launch_bound ? 'launch-bound' : '' })), [
      { key: 'step', label: 'step' }, { key: 'kernels', label: 'kernels', num: true, fmt: exact },
      { key: 'short_kernels', label: 'short kernels', num: true, fmt: exact },
      { key: 'launch_ns', label: 'launch calls', num: true, fmt: dur, bar: true }, { key: 'kernel_ns', label: 'kernel time', num: true, fmt: dur },
      { key: 'bound', label: '', plain: true, width: '8em' }], { sort: 'step', desc: false, testid: 'launch-steps' }));
  }
  return box;
}

function streamSections(streams, start, end) {
  const box = el('section', { 'data-testid': 'streams' }, el('h3', {}, `Streams (${streams.length})`));
  if (!streams.length) { box.append(el('p', { class: 'muted' }, 'no GPU stream in the trace')); return box; }
  const series = streams.filter((x) => x.queue && x.queue.series && x.queue.series.length)
    .map((x, k) => ({ name: streamName(x), color: keyColor(k * 5 + 3), points: x.queue.series }));
  if (series.length) {
    box.append(seriesChart({ testid: 'queue-length', title: 'Queue length: kernels and copies launched and not finished, per stream', series, t0: start, t1: end, start, y: 'count', yLabel: 'queued' }));
  }
  const rows = streams.map((x) => ({
    name: streamName(x), events: x.events, busy: x.busy_ns, qmean: x.queue.time_mean, qmax: x.queue.max, full: x.queue.full_ns,
    h_sum: x.host_wait.sum_ns, h_count: x.host_wait.count, h_p50: x.host_wait.p50_ns,
    k_sum: x.kernel_wait.sum_ns, k_count: x.kernel_wait.count, k_p50: x.kernel_wait.p50_ns,
    o_sum: x.other_wait.sum_ns, o_count: x.other_wait.count,
  }));
  box.append(el('h4', {}, 'Queue and idle time per stream'),
    el('p', { class: 'muted' }, 'Gaps between consecutive GPU events of a stream, as HTA splits them: host wait (the next launch came after the stream ran dry: the host is the bottleneck), kernel wait (a gap under 30 us between queued kernels), other. Full: time with 1024 launches queued, when a launch blocks the host.'),
    table(rows, [{ key: 'name', label: 'stream' }, { key: 'events', label: 'events', num: true, fmt: exact },
      { key: 'busy', label: 'busy', num: true, fmt: dur }, { key: 'qmean', label: 'queue mean', num: true, fmt: (v) => v == null ? '' : v.toFixed(1) },
      { key: 'qmax', label: 'queue max', num: true, fmt: exact }, { key: 'full', label: 'full', num: true, fmt: dur },
      { key: 'h_sum', label: 'host wait', num: true, fmt: dur, bar: true }, { key: 'h_count', label: 'host gaps', num: true, fmt: exact },
      { key: 'h_p50', label: 'median', num: true, fmt: dur, title: 'the median host-wait gap' },
      { key: 'k_sum', label: 'kernel wait', num: true, fmt: dur }, { key: 'k_count', label: 'kernel gaps', num: true, fmt: exact },
      { key: 'o_sum', label: 'other', num: true, fmt: dur }, { key: 'o_count', label: 'other gaps', num: true, fmt: exact }],
    { sort: 'busy', testid: 'stream-idle' }));
  return box;
}

function copySection(copies, start, end) {
  const box = el('section', { 'data-testid': 'copies' }, el('h3', {}, 'Memory copies and bandwidth'));
  if (!copies.length) { box.append(el('p', { class: 'muted' }, 'no memory copy or memset on the GPU')); return box; }
  const series = copies.filter((x) => x.series_bytes_per_s && x.series_bytes_per_s.length)
    .map((x, k) => ({ name: x.kind, color: keyColor(k * 11 + 1), points: x.series_bytes_per_s }));
  if (series.length) box.append(seriesChart({ testid: 'copy-bandwidth', title: 'Bandwidth over time, by kind', series, t0: start, t1: end, start, y: 'rate', yLabel: 'bandwidth' }));
  box.append(table(copies.map((x) => ({ ...x, p50: x.samples_bytes_per_s.p50, peak: x.samples_bytes_per_s.max })), [
    { key: 'kind', label: 'kind' }, { key: 'copies', label: 'copies', num: true, fmt: exact },
    { key: 'bytes', label: 'bytes', num: true, fmt: bytes, bar: true }, { key: 'busy_ns', label: 'busy', num: true, fmt: dur },
    { key: 'bandwidth_bytes_per_s', label: 'bandwidth', num: true, fmt: rate, title: 'bytes over the time copies of the kind ran' },
    { key: 'p50', label: 'median', num: true, fmt: rate }, { key: 'peak', label: 'peak', num: true, fmt: rate }],
  { sort: 'bytes', testid: 'copy-table' }));
  return box;
}

function annotationSection(anns) {
  const box = el('section', { 'data-testid': 'gpu-annotations' }, el('h3', {}, `GPU annotations (${anns.length})`));
  if (!anns.length) { box.append(el('p', { class: 'muted' }, 'no gpu_user_annotation events (record_function ranges appear on the GPU timeline with CUDA activity)')); return box; }
  box.append(table(anns.map((a) => ({ name: a.name, count: a.durations.count, total: a.durations.sum_ns, mean: a.durations.mean_ns, max: a.durations.max_ns, ev: a.gpu_events, evns: a.gpu_event_ns })), [
    { key: 'name', label: 'annotation' }, { key: 'count', label: 'times', num: true, fmt: exact },
    { key: 'total', label: 'total', num: true, fmt: dur, bar: true }, { key: 'mean', label: 'mean', num: true, fmt: dur }, { key: 'max', label: 'max', num: true, fmt: dur },
    { key: 'ev', label: 'GPU events', num: true, fmt: exact }, { key: 'evns', label: 'their GPU time', num: true, fmt: dur }],
  { sort: 'total', testid: 'annotation-table', filter: true }));
  return box;
}
