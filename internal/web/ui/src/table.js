// A sortable, filterable table that never hides its numbers: the table is
// as wide as its box (fixed layout), numeric columns have fixed widths and
// are right-aligned, text columns share the rest and cut long names in the
// middle (full text on hover). cols: [{key, label, fmt, num, bar, width,
// title}]: bar draws the cell's value as a bar (its share of the column's
// largest); onRow(row) is called when a row is selected (click again to
// clear).
import { el, mid, fill } from './fmt.js';

export function table(rows, cols, opts = {}) {
  // a text column no row fills is left out (input shapes of a trace
  // recorded without record_shapes)
  cols = cols.filter((c) => c.num || c.keep || rows.some((r) => r[c.key] != null && r[c.key] !== ''));
  let sortKey = opts.sort || cols[0].key, desc = opts.desc ?? true, filter = '', selected = null;
  const body = el('tbody');
  const input = el('input', { type: 'search', placeholder: 'filter (regular expression)', class: 'filter' });
  const count = el('span', { class: 'muted' });
  const ths = cols.map((c) => el('th', { class: c.num ? 'num' : null, title: c.title || null,
    onclick: () => { desc = sortKey === c.key ? !desc : !!c.num; sortKey = c.key; render(); } }, c.label));
  const head = el('tr', {}, ths);
  const colgroup = el('colgroup', {}, cols.map((c) => el('col', { style: c.num || c.width || c.plain ? `width:${c.width || numWidth(c, rows)}` : null })));
  const max = opts.max || 500;
  const barMax = {};
  for (const c of cols) if (c.bar) barMax[c.key] = Math.max(1e-300, ...rows.map((r) => Math.abs(r[c.key] || 0)));
  function cell(c, r) {
    const v = r[c.key];
    const text = c.fmt ? c.fmt(v, r) : String(v ?? '');
    if (!c.num) return el('td', {}, c.plain ? text : mid(text, c.tail));
    const td = el('td', { class: 'num' }, text);
    if (c.bar && v) td.style.background = `linear-gradient(to left, rgba(78,121,167,.22) ${(100 * Math.abs(v) / barMax[c.key]).toFixed(1)}%, transparent 0)`;
    return td;
  }
  function render() {
    let re = null;
    try { re = filter ? new RegExp(filter, 'i') : null; } catch (e) { re = null; }
    let rs = rows.filter((r) => !re || cols.some((c) => !c.num && re.test(String(c.fmt ? c.fmt(r[c.key], r) : r[c.key] ?? ''))));
    // a sort key may be a field that is no column (steps by index)
    const k = sortKey, col = cols.find((c) => c.key === k);
    const numeric = col ? col.num : rows.length > 0 && typeof rows[0][k] === 'number';
    rs = rs.slice().sort((a, b) => {
      const x = a[k], y = b[k];
      const d = numeric ? (x ?? -Infinity) - (y ?? -Infinity) : String(x ?? '').localeCompare(String(y ?? ''), undefined, { numeric: true });
      return desc ? -d : d;
    });
    ths.forEach((th, i) => th.dataset.sort = cols[i].key === sortKey ? (desc ? 'desc' : 'asc') : '');
    count.textContent = `${rs.length} of ${rows.length} rows` + (rs.length > max ? `, first ${max} shown` : '');
    fill(body, ...rs.slice(0, max).map((r) => el('tr', {
      class: r === selected ? 'selected' : null,
      onclick: opts.onRow ? () => { selected = selected === r ? null : r; opts.onRow(selected); render(); } : null,
    }, cols.map((c) => cell(c, r)))));
  }
  input.addEventListener('input', () => { filter = input.value; render(); });
  render();
  const t = el('div', { class: 'table' + (opts.tall ? ' tall' : ''), 'data-testid': opts.testid, 'data-state': 'ready', 'data-rows': rows.length },
    rows.length > 8 || opts.filter ? el('div', { class: 'tablebar' }, input, count) : null,
    el('div', { class: 'tablewrap' }, el('table', {}, colgroup, el('thead', {}, head), body)));
  // select a row from outside (a link in the answers): by predicate
  t.select = (pred) => {
    const r = rows.find(pred);
    if (!r) return false;
    selected = r;
    if (opts.onRow) opts.onRow(r);
    render();
    body.querySelector('tr.selected')?.scrollIntoView({ block: 'nearest' });
    return true;
  };
  return t;
}

// numWidth is a numeric (or short plain) column's width: room for its
// label (and the sort arrow) and its longest formatted value (digits are
// tabular, about 0.6em).
function numWidth(c, rows) {
  let n = 0;
  for (const r of rows) n = Math.max(n, String(c.fmt ? c.fmt(r[c.key], r) : r[c.key] ?? '').length);
  return Math.max(3, 0.66 * c.label.length + 2.2, 0.6 * n + 1.4, c.wide ? 7.5 : 0).toFixed(1) + 'em';
}
