// A sortable, filterable table. cols: [{key, label, fmt, num}]; onRow(row)
// is called when a row is selected (click again to clear).
import { el } from './fmt.js';

export function table(rows, cols, opts = {}) {
  let sortKey = opts.sort || cols[0].key, desc = opts.desc ?? true, filter = '', selected = null;
  const body = el('tbody');
  const input = el('input', { type: 'search', placeholder: 'filter (regular expression)', class: 'filter' });
  const count = el('span', { class: 'muted' });
  const head = el('tr', {}, cols.map((c) => el('th', { class: c.num ? 'num' : null, onclick: () => { desc = sortKey === c.key ? !desc : !!c.num; sortKey = c.key; render(); } }, c.label)));
  const max = opts.max || 500;
  function render() {
    let re = null;
    try { re = filter ? new RegExp(filter, 'i') : null; } catch (e) { re = null; }
    let rs = rows.filter((r) => !re || cols.some((c) => !c.num && re.test(String(r[c.key] ?? ''))));
    const k = sortKey, col = cols.find((c) => c.key === k);
    rs = rs.slice().sort((a, b) => {
      const x = a[k], y = b[k];
      const d = col && col.num ? (x ?? -Infinity) - (y ?? -Infinity) : String(x ?? '').localeCompare(String(y ?? ''));
      return desc ? -d : d;
    });
    count.textContent = `${rs.length} of ${rows.length} rows` + (rs.length > max ? `, first ${max} shown` : '');
    body.replaceChildren(...rs.slice(0, max).map((r) => el('tr', {
      class: r === selected ? 'selected' : null,
      onclick: opts.onRow ? () => { selected = selected === r ? null : r; opts.onRow(selected); render(); } : null,
    }, cols.map((c) => el('td', { class: c.num ? 'num' : null, title: c.num ? null : String(r[c.key] ?? '') }, c.fmt ? c.fmt(r[c.key], r) : String(r[c.key] ?? ''))))));
  }
  input.addEventListener('input', () => { filter = input.value; render(); });
  render();
  const t = el('div', { class: 'table', 'data-testid': opts.testid, 'data-state': 'ready', 'data-rows': rows.length },
    el('div', { class: 'tablebar' }, input, count),
    el('div', { class: 'tablewrap' }, el('table', {}, el('thead', {}, head), body)));
  return t;
}
