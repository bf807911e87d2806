// The data source: the server's API, or the data an --html file carries
// (window.__PTSCOPE_DATA__), answered through the same calls.
const inline = typeof window !== 'undefined' ? window.__PTSCOPE_DATA__ : null;
export const htmlMode = !!inline;

export class ApiError extends Error {}

function b64(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out.buffer;
}

export async function get(path, params = {}, binary = false) {
  if (inline) return fromInline(path, params);
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

// inflate un-gzips bytes (the --html file's tiles) with the browser's own
// DecompressionStream.
async function inflate(bytes) {
  return new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'))).arrayBuffer();
}

// blockRow rebuilds a block's details from the --html file's columns (one
// row per block, in id order: internal/web htmlBlocks).
function blockRow(m, id) {
  const t = m.blocks, ids = t.cols.id;
  let lo = 0, hi = ids.length;
  while (lo < hi) { const h = (lo + hi) >> 1; if (ids[h] < id) lo = h + 1; else hi = h; }
  if (ids[lo] !== id) return null;
  const b = {};
  for (const [k, col] of Object.entries(t.cols)) b[k] = col[lo];
  for (const k of t.text_cols) b[k] = t.strings[b[k]];
  for (const k of t.time_cols) b[k] = b[k] < 0 ? 0 : m.summary.start_ns + b[k];
  const at = t.cols.alloc_time_ns[lo], ft = t.cols.free_time_ns[lo];
  if (at >= 0 && ft >= 0) b.lifetime_ns = ft - at;
  return b;
}

// fromInline answers from the inlined data: memory views from the
// precomputed tiles (the smallest one holding the requested range), block
// details of every block those tiles draw, states and breakdowns at the
// entries the file holds.
async function fromInline(path, p) {
  const D = inline;
  const mem = D.mem && D.mem[p.input ?? 0];
  const tr = D.trace && D.trace[p.input ?? 0];
  switch (path) {
    case 'inputs': return { inputs: D.inputs };
    case 'mem/summary': return need(mem).summary;
    case 'mem/view': {
      const m = need(mem);
      const x0 = +p.x0, x1 = +p.x1;
      let best = m.tiles[0];
      for (const t of m.tiles) {
        if (t.x0 <= x0 && t.x1 >= x1 && t.x1 - t.x0 < best.x1 - best.x0) best = t;
      }
      if (!best.buf) best.buf = await inflate(b64(best.data));
      return best.buf;
    }
    case 'mem/block': {
      const m = need(mem);
      const b = blockRow(m, +p.id);
      if (!b) throw new ApiError(`block ${p.id} is not in this file`);
      return { ...b, frames: m.stacks[b.stack_id] || [], free_frames: b.free_stack_id ? m.stacks[b.free_stack_id] : null };
    }
    case 'mem/hit': return { id: -1 };
    case 'mem/state': {
      const m = need(mem);
      const evs = Object.keys(m.states).map(Number);
      let e = evs[0];
      for (const v of evs) if (Math.abs(v - p.event) < Math.abs(e - p.event)) e = v;
      return m.states[e];
    }
    case 'mem/breakdown': {
      const b = need(mem).breakdowns[p.by];
      if (!b) throw new ApiError(`breakdown ${p.by} is not in this file`);
      return b;
    }
    case 'mem/event': throw new ApiError('entry details need ptscope serve');
    case 'trace/summary': return need(tr).summary;
    case 'trace/view': {
      const t = need(tr);
      let best = t.tiles[0];
      for (const v of t.tiles) if (v.t0_ns <= +p.t0 && v.t1_ns >= +p.t1 && v.t1_ns - v.t0_ns < best.t1_ns - best.t0_ns) best = v;
      return best;
    }
    case 'trace/memory': return need(tr).memory;
    case 'trace/event': throw new ApiError('event details need ptscope serve');
  }
  throw new ApiError(`${path} is not available in an --html file`);
}

function need(x) {
  if (!x) throw new ApiError('this input is not in the file');
  return x;
}

// decodeView reads the binary memory view (internal/web EncodeView, whose
// comment is the layout): positions come quantised to the view's columns
// and eighths of its pixel rows, and are turned back into entries (by
// column) and bytes here, so that drawing needs no other units.
export function decodeView(buf) {
  const dv = new DataView(buf), u8 = new Uint8Array(buf);
  let o = 0;
  const u32 = () => { const v = dv.getUint32(o, true); o += 4; return v; };
  const f64 = () => { const v = dv.getFloat64(o, true); o += 8; return v; };
  const uv = () => { let x = 0, m = 1, b; do { b = u8[o++]; x += (b & 127) * m; m *= 128; } while (b & 128); return x; };
  const sv = () => { const x = uv(); return x % 2 ? -(x + 1) / 2 : x / 2; };
  const version = u32();
  if (version !== 2) throw new ApiError(`view version ${version} not understood`);
  const v = { x0: u32(), x1: u32(), cols: u32(), nblocks: u32(), summarized: u32(), height: u32(), y0: f64(), y1: f64(), minBytes: f64() };
  const flags = u8[o++];
  v.hasIds = !!(flags & 2);
  const scale = v.height * 8 / Math.max(1, v.y1 - v.y0); // sub-rows per byte
  const pal = new Array(uv());
  for (let k = 0; k < pal.length; k++) { const cat = u8[o], fl = u8[o + 1]; o += 2; pal[k] = { cat, flags: fl, key: uv() }; }
  const curve = () => { const a = new Float64Array(v.cols); let r = 0; for (let i = 0; i < v.cols; i++) { r += sv(); a[i] = v.y0 + r / scale; } return a; };
  v.allocMin = curve(); v.allocMax = curve(); v.resMin = curve(); v.resMax = curve();
  v.hl = flags & 1 ? curve() : null;
  v.phase = u8.slice(o, o + v.cols); o += v.cols;
  v.blocks = new Array(v.nblocks);
  let c0 = 0, bot = 0, id = 0;
  for (let k = 0; k < v.nblocks; k++) {
    c0 += uv();
    const c1 = c0 + uv(), p = pal[uv()], size = uv() / scale, ne = uv();
    const b = { c0, c1, cat: p.cat, flags: p.flags, key: p.key, size, cols: new Int32Array(ne), offs: new Float64Array(ne), id: -1 };
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
