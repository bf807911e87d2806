// The operator and kernel views: the plugin's tables and past them.
// Operators by name or by name + input shapes (record_shapes), the
// nn.Module view (with_modules / with_stack traces); kernels by name or by
// name + launching operator (the plugin's "Kernel Properties + Op Name"),
// and the frequent kernel sequences (fusion candidates).
import { el, exact, dur, pct, bytes } from './fmt.js';
import { table } from './table.js';

const yesNo = (v) => v ? 'yes' : 'no';

// toggle is a row of buttons choosing one of choices [[value, label,
// disabled title]]; onPick(value) redraws.
function toggle(testid, label, choices, cur, onPick) {
  const box = el('div', { class: 'tabs toggle', 'data-testid': testid }, el('span', { class: 'muted' }, label));
  const btns = choices.map(([v, l, off]) => el('button', { 'data-v': v, class: v === cur ? 'on' : null, disabled: !!off, title: off || null,
    onclick: () => { btns.forEach((b) => b.classList.toggle('on', b.dataset.v === v)); onPick(v); } }, l));
  box.append(...btns);
  return box;
}

function opColumns(byShape) {
  return [
    { key: 'name', label: 'operator' }, byShape ? { key: 'input_shapes', label: 'input shapes', width: '20%', keep: true } : null,
    { key: 'calls', label: 'calls', num: true, fmt: exact },
    { key: 'device_self_ns', label: 'device self', num: true, fmt: dur, bar: true }, { key: 'device_total_ns', label: 'device total', num: true, fmt: dur },
    { key: 'host_self_ns', label: 'host self', num: true, fmt: dur }, { key: 'host_total_ns', label: 'host total', num: true, fmt: dur },
    { key: 'tensor_core_eligible', label: 'TC eligible', fmt: yesNo, plain: true, keep: true, title: 'launches matrix products that can run on tensor cores' },
    { key: 'tensor_core_self_ns', label: 'TC time', num: true, fmt: dur, title: 'device self time of its kernels that ran on tensor cores' },
  ].filter(Boolean);
}

export function operatorView(r) {
  const byName = r.operators || [], byShape = r.operators_by_shape || [];
  const hasShapes = byShape.length > 0;
  const holder = el('div');
  const h = el('h3');
  const show = (mode) => {
    const shape = mode === 'shape';
    const rows = (shape ? byShape : byName).map((o) => ({ ...o, input_shapes: o.input_shapes || '' }));
    h.textContent = `Operators (${rows.length}${shape ? ' name + input shapes' : ''})`;
    holder.replaceChildren(table(rows, opColumns(shape), { sort: 'device_self_ns', testid: 'operator-table', filter: true, tall: true }));
  };
  const node = el('div', {}, el('div', { class: 'toolbar' }, h,
    toggle('group-by', 'group by', [['name', 'operator'], ['shape', 'operator + input shapes', hasShapes ? null : 'the trace was recorded without record_shapes=True']], 'name', show)), holder);
  show('name');
  const mods = r.modules || [];
  if (mods.length) {
    node.append(el('h3', {}, `Modules (${mods.length}, nn.Module calls)`), table(mods.map((m) => ({ ...m, module: m.path || m.name })), [
      { key: 'module', label: 'module (outermost first)', tail: 30 }, { key: 'depth', label: 'depth', num: true },
      { key: 'calls', label: 'calls', num: true, fmt: exact }, { key: 'operators', label: 'operators', num: true, fmt: exact },
      { key: 'device_ns', label: 'device total', num: true, fmt: dur, bar: true }, { key: 'device_self_ns', label: 'device self', num: true, fmt: dur },
      { key: 'host_ns', label: 'host total', num: true, fmt: dur }, { key: 'host_self_ns', label: 'host self', num: true, fmt: dur }],
    { sort: 'device_ns', testid: 'module-table', filter: true }));
  }
  return node;
}

const dim = (d) => Array.isArray(d) ? d.join('×') : '';

export function kernelView(r) {
  const byName = r.kernels || [], byOp = r.kernels_by_operator || [];
  const holder = el('div');
  const h = el('h3');
  const show = (mode) => {
    if (mode === 'operator') {
      h.textContent = `Kernels by launching operator (${byOp.length})`;
      holder.replaceChildren(table(byOp.map((k) => ({ ...k, operator: k.operator || '', gridS: dim(k.grid), blockS: dim(k.block) })), [
        { key: 'name', label: 'kernel', tail: 18 }, { key: 'operator', label: 'operator', tail: 12 },
        { key: 'gridS', label: 'grid', plain: true }, { key: 'blockS', label: 'block', plain: true },
        { key: 'registers_per_thread', label: 'regs', num: true, title: 'registers per thread' },
        { key: 'shared_memory_bytes', label: 'shared mem', num: true, fmt: bytes },
        { key: 'calls', label: 'calls', num: true, fmt: exact },
        { key: 'total_ns', label: 'total', num: true, fmt: dur, bar: true }, { key: 'mean_ns', label: 'mean', num: true, fmt: dur },
        { key: 'mean_occupancy_ratio', label: 'occupancy', num: true, fmt: pct },
        { key: 'tensor_core', label: 'TC', fmt: yesNo, plain: true, keep: true, title: 'runs on tensor cores' }],
      { sort: 'total_ns', testid: 'kernel-table', filter: true, tall: true }));
      return;
    }
    h.textContent = `Kernels (${byName.length})`;
    holder.replaceChildren(table(byName.map((k) => ({ ...k, top_operator: k.top_operator || '' })), [
      { key: 'name', label: 'kernel', tail: 28 }, { key: 'calls', label: 'calls', num: true, fmt: exact },
      { key: 'total_ns', label: 'total', num: true, fmt: dur, bar: true }, { key: 'mean_ns', label: 'mean', num: true, fmt: dur },
      { key: 'max_ns', label: 'max', num: true, fmt: dur },
      { key: 'mean_blocks_per_sm', label: 'blocks/SM', num: true, fmt: (v) => v ? v.toFixed(2) : '' },
      { key: 'mean_occupancy_ratio', label: 'occupancy', num: true, fmt: pct },
      { key: 'tensor_core', label: 'tensor cores', fmt: yesNo, plain: true, keep: true },
      { key: 'top_operator', label: 'launched by', width: '24%' }], { sort: 'total_ns', testid: 'kernel-table', filter: true, tall: true }));
  };
  const node = el('div', {}, el('div', { class: 'toolbar' }, h,
    toggle('group-by', 'group by', [['name', 'kernel'], ['operator', 'kernel + operator', byOp.length ? null : 'no kernel was linked to an operator']], 'name', show)), holder);
  show('name');
  const seqs = r.kernel_sequences || [];
  const seqBox = el('div', { class: 'panel seqbox', 'data-testid': 'sequence-details' });
  if (seqs.length) {
    node.append(el('h3', {}, `Frequent kernel sequences (${seqs.length}): fusion candidates`),
      el('p', { class: 'muted' }, 'The kernels an operator launches one after another, the same sequence each time (HTA\'s frequent patterns): a sequence that repeats with much GPU time is worth fusing (torch.compile, a fused kernel).'),
      table(seqs.map((q) => ({ ...q, seq: q.kernels.join(' → '), n: q.kernels.length })), [
        { key: 'operator', label: 'operator', width: '18%' }, { key: 'seq', label: 'kernels in order', tail: 40 },
        { key: 'n', label: 'kernels', num: true }, { key: 'count', label: 'times', num: true, fmt: exact },
        { key: 'gpu_ns', label: 'GPU time', num: true, fmt: dur, bar: true }, { key: 'cpu_ns', label: 'CPU time', num: true, fmt: dur }],
      { sort: 'gpu_ns', testid: 'sequence-table', filter: true, onRow: (q) => seqBox.replaceChildren(...(q ? [
        el('h4', {}, `${q.operator}: ${q.n} kernels, ${exact(q.count)} times, ${dur(q.gpu_ns)} on the GPU`),
        el('ol', { class: 'stack' }, q.kernels.map((k) => el('li', { title: k }, k)))] : [])) }), seqBox);
  }
  return node;
}
