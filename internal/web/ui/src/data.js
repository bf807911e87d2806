// The page's one data path: get(view, params) asks the server's API
// (/api/v1/VIEW), or, in an --html file, finds the answer the file
// recorded for that query (the JSON of <script id="ptscope-data">, written
// by internal/web/view html.go from the same Go functions the server calls).
const inline = (() => {
  const e = typeof document !== 'undefined' && document.getElementById('ptscope-data');
  return e ? JSON.parse(e.textContent) : null;
})();
if (inline) window.__PTSCOPE_DATA__ = inline; // for tests and tools
export const parsedAt = typeof performance !== 'undefined' ? performance.now() : 0;
export const htmlMode = !!inline;

export class ApiError extends Error {}

export async function get(path, params = {}, binary = false) {
  if (inline) return recorded(path, params);
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v != null) q.set(k, v);
  const url = `/api/v1/${path}?${q}`;
  lastURL[path] = new URL(url, location.href).href;
  const r = await fetch(url);
  if (!r.ok) {
    let msg = `${r.status} ${r.statusText}`;
    try { msg = (await r.json()).error || msg; } catch (e) { /* not JSON */ }
    throw new ApiError(msg);
  }
  return binary ? r.arrayBuffer() : r.json();
}

// sentBytes is the body size the last request for path took on the wire
// (compressed), from the page's resource timing; 0 when unknown (an
// --html file, or the timing entry not recorded yet).
const lastURL = {};
export function sentBytes(path) {
  if (inline || !lastURL[path] || typeof performance === 'undefined') return 0;
  const es = performance.getEntriesByName(lastURL[path]);
  return es.length ? es[es.length - 1].encodedBodySize : 0;
}

// How a recorded answer matches a request. Every parameter must be equal
// (absent on both sides counts as equal) except: `loose` ones, which the
// recording does not key on (the page may send them); a `range` the answer
// must cover (the smallest covering answer wins: the --html file's tiles);
// and `nearest`, for which the closest recorded value wins (allocator
// states at the entries the file holds).
const MATCH = {
  'mem/view': { range: ['x0', 'x1'], loose: ['w', 'h', 'color', 'hl', 'y0', 'y1', 'ids', 'keys'] },
  'trace/view': { range: ['t0', 't1'], loose: ['w'] },
  'trace/memory': { loose: ['t0', 't1', 'w'] },
  'mem/state': { nearest: 'event', loose: ['time'] },
  'mem/names': { loose: ['keys'] },
};

function b64(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out.buffer;
}

// inflate un-gzips bytes with the browser's own DecompressionStream.
async function inflate(bytes) {
  return new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'))).arrayBuffer();
}

async function recorded(path, p) {
  const D = inline;
  if (path === 'inputs') return { inputs: D.inputs };
  if (path === 'mem/block') return blockRow(p);
  if (path === 'mem/hit') return { id: -1, offline: true }; // the page hit-tests the file's views by block id
  const rule = MATCH[path] || {};
  const skip = new Set([...(rule.loose || []), ...(rule.range || []), rule.nearest].filter(Boolean));
  const asked = {};
  for (const [k, v] of Object.entries(p)) if (v != null && v !== '') asked[k] = String(v);
  let best = null, bestCost = Infinity;
  for (const a of D.answers[path] || []) {
    const keys = new Set([...Object.keys(a.q), ...Object.keys(asked)]);
    let ok = true;
    for (const k of keys) if (!skip.has(k) && (a.q[k] ?? '') !== (asked[k] ?? '')) { ok = false; break; }
    if (!ok) continue;
    let cost = 0;
    if (rule.range) {
      const [lo, hi] = rule.range;
      if (asked[lo] != null && (+a.q[lo] > +asked[lo] || +a.q[hi] < +asked[hi])) continue;
      cost = +a.q[hi] - +a.q[lo];
    } else if (rule.nearest && asked[rule.nearest] != null) {
      cost = Math.abs(+a.q[rule.nearest] - +asked[rule.nearest]);
    } else if (rule.nearest && asked.time != null && a.body) {
      cost = Math.abs(a.body.time_ns - +asked.time);
    }
    if (cost < bestCost) { best = a; bestCost = cost; }
  }
  if (!best) throw new ApiError(`${path} for this query is not in this file (ptscope serve answers every query)`);
  if (best.gz != null) {
    if (!best.buf) best.buf = await inflate(b64(best.gz));
    return best.buf;
  }
  return best.body;
}

// blockRow rebuilds a mem/block answer from the --html file's columns (one
// row per block, in id order: internal/web/view htmlBlocks).
function blockRow(p) {
  const t = inline.blocks && inline.blocks[p.input ?? 0];
  if (!t) throw new ApiError('this input has no block details in this file');
  const ids = t.cols.id, id = +p.id;
  let lo = 0, hi = ids.length;
  while (lo < hi) { const h = (lo + hi) >> 1; if (ids[h] < id) lo = h + 1; else hi = h; }
  if (ids[lo] !== id) throw new ApiError(`block ${id} is not in this file (ptscope serve has every block)`);
  const start = (inline.answers['mem/summary'].find((a) => a.q.input === String(p.input ?? 0)) || {}).body.start_ns;
  const b = {};
  for (const [k, col] of Object.entries(t.cols)) b[k] = col[lo];
  for (const k of t.text_cols) b[k] = t.strings[b[k]];
  for (const k of t.time_cols) b[k] = b[k] < 0 ? 0 : start + b[k];
  const at = t.cols.alloc_time_ns[lo], ft = t.cols.free_time_ns[lo];
  if (at >= 0 && ft >= 0) b.lifetime_ns = ft - at;
  b.frames = t.stacks[b.stack_id] || [];
  b.free_frames = b.free_stack_id ? t.stacks[b.free_stack_id] : null;
  return b;
}

// KEY_ORDER is the order of the keys of a view's palette entry when it
// carries every colouring's key (internal/web/view keyOrder), after category.
export const KEY_ORDER = ['category', 'stack', 'source', 'module', 'module_group', 'group'];

// decodeView reads the binary memory view (internal/web/view EncodeView, whose
// comment is the layout): positions come quantised to the view's columns
// and eighths of its pixel rows, and are turned back into entries (by
// column) and bytes here, so that drawing needs no other units. color
// picks each block's key when the view carries every colouring's.
export function decodeView(buf, color = 'category') {
  const dv = new DataView(buf), u8 = new Uint8Array(buf);
  let o = 0;
  const u32 = () => { const v = dv.getUint32(o, true); o += 4; return v; };
  const f64 = () => { const v = dv.getFloat64(o, true); o += 8; return v; };
  const uv = () => { let x = 0, m = 1, b; do { b = u8[o++]; x += (b & 127) * m; m *= 128; } while (b & 128); return x; };
  const sv = () => { const x = uv(); return x % 2 ? -(x + 1) / 2 : x / 2; };
  const version = u32();
  if (version !== 3) throw new ApiError(`view version ${version} not understood`);
  const v = { x0: u32(), x1: u32(), cols: u32(), nblocks: u32(), summarized: u32(), height: u32(), y0: f64(), y1: f64(), minBytes: f64() };
  const flags = u8[o++];
  v.hasIds = !!(flags & 2);
  v.allKeys = !!(flags & 4);
  const scale = v.height * 8 / Math.max(1, v.y1 - v.y0); // sub-rows per byte
  const pal = new Array(uv());
  const ki = KEY_ORDER.indexOf(color);
  for (let k = 0; k < pal.length; k++) {
    const cat = u8[o], fl = u8[o + 1]; o += 2;
    if (!v.allKeys) { pal[k] = { cat, flags: fl, key: uv() }; continue; }
    const keys = [cat];
    for (let j = 1; j < KEY_ORDER.length; j++) keys.push(uv());
    pal[k] = { cat, flags: fl, keys, key: keys[Math.max(0, ki)] };
  }
  const curve = () => { const a = new Float64Array(v.cols); let r = 0; for (let i = 0; i < v.cols; i++) { r += sv(); a[i] = v.y0 + r / scale; } return a; };
  v.allocMin = curve(); v.allocMax = curve(); v.resMin = curve(); v.resMax = curve();
  v.hl = flags & 1 ? curve() : null;
  v.phase = u8.slice(o, o + v.cols); o += v.cols;
  v.timeUS = new Float64Array(v.cols);
  for (let i = 0, t = 0; i < v.cols; i++) { t += sv(); v.timeUS[i] = t; }
  v.blocks = new Array(v.nblocks);
  let c0 = 0, bot = 0, id = 0;
  for (let k = 0; k < v.nblocks; k++) {
    c0 += uv();
    const c1 = c0 + uv(), p = pal[uv()], size = uv() / scale, ne = uv();
    const b = { c0, c1, cat: p.cat, flags: p.flags, key: p.key, keys: p.keys, size, cols: new Int32Array(ne), offs: new Float64Array(ne), id: -1 };
    bot += sv();
    let col = c0, r = bot;
    b.cols[0] = col; b.offs[0] = v.y0 + r / scale;
    for (let e = 1; e < ne; e++) { col += uv(); r -= uv(); b.cols[e] = col; b.offs[e] = v.y0 + r / scale; }
    if (v.hasIds) { id += uv(); b.id = id; }
    v.blocks[k] = b;
  }
  if (o !== buf.byteLength) throw new ApiError(`view: ${buf.byteLength - o} bytes left over`);
  v.bytes = buf.byteLength;
  return v;
}

// colEntry is the first entry of column c of a view (as the server computes it).
export function colEntry(v, c) {
  return v.x0 + Math.floor(c * (v.x1 - v.x0) / v.cols);
}
