// The trace's memory view (profile_memory=True traces): the GPU memory
// curve and, beside it, the memory events per operator (the plugin's
// memory statistics): allocations, bytes allocated, the size increase
// (allocated minus freed), self and with children, and the most memory
// allocated on the device while the operator allocated.
import { el, exact, bytes } from './fmt.js';
import { table } from './table.js';
import { memoryCurve } from './trace.js';

export function memoryOpsView(body, input, s) {
  const r = s.result;
  const rows = r.memory_by_operator || [];
  body.append(el('h3', {}, 'Memory'));
  if (!r.profiler.profile_memory && !rows.length) {
    body.append(el('p', { class: 'muted', 'data-testid': 'memory-ops-none' }, 'The trace holds no memory events: record with torch.profiler.profile(profile_memory=True) for the memory curve and the memory per operator.'));
    return;
  }
  const right = el('div');
  body.append(memoryCurve(input, s), right);
  const devs = new Set(rows.map((x) => x.device));
  right.append(el('h4', {}, `Memory events by operator (${rows.length})`), table(rows, [
    { key: 'operator', label: 'operator' }, devs.size > 1 ? { key: 'device', label: 'device', plain: true } : null,
    { key: 'calls', label: 'calls', num: true, fmt: exact },
    { key: 'allocations', label: 'allocs', num: true, fmt: exact, title: 'allocations by the operator and the operators it calls' },
    { key: 'allocated_bytes', label: 'allocated', num: true, fmt: bytes, bar: true, title: 'bytes allocated by the operator and the operators it calls' },
    { key: 'increase_bytes', label: 'increase', num: true, fmt: bytes, title: 'allocated minus freed bytes (the plugin\'s size increase)' },
    { key: 'self_allocated_bytes', label: 'self alloc', num: true, fmt: bytes, title: 'bytes allocated by the operator itself' },
    { key: 'self_increase_bytes', label: 'self incr', num: true, fmt: bytes },
    { key: 'peak_allocated_bytes', label: 'peak', num: true, fmt: bytes, title: 'the most memory allocated on the device at any of these events' }].filter(Boolean),
  { sort: 'allocated_bytes', testid: 'memory-ops', filter: true, tall: true }));
}
