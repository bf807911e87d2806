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
  const r = await fetch(`/api/v1/${path}?${q}`);
  if (!r.ok) {
    let msg = `${r.status} ${r.statusText}`;
    try { msg = (await r.json()).error || msg; } catch (e) { /* not JSON */ }
    throw new ApiError(msg);
  }
  return binary ? r.arrayBuffer() : r.json();
}

// fromInline answers from the inlined data: memory views from the
// precomputed tiles (the smallest one holding the requested range), block
// details of every block those tiles draw, states and breakdowns at the
// entries the file holds.
function fromInline(path, p) {
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
      if (!best.buf) best.buf = b64(best.data);
      return best.buf;
    }
    case 'mem/block': {
      const m = need(mem);
      const b = m.blocks[p.id];
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

// decodeView reads the binary memory view (internal/web EncodeView).
export function decodeView(buf) {
  const dv = new DataView(buf);
  let o = 0;
  const u32 = () => { const v = dv.getUint32(o, true); o += 4; return v; };
  const i32 = () => { const v = dv.getInt32(o, true); o += 4; return v; };
  const f32 = () => { const v = dv.getFloat32(o, true); o += 4; return v; };
  const f64 = () => { const v = dv.getFloat64(o, true); o += 8; return v; };
  const version = u32();
  if (version !== 1) throw new ApiError(`view version ${version} not understood`);
  const v = { x0: u32(), x1: u32(), cols: u32(), nblocks: u32(), summarized: u32(), y0: f64(), y1: f64(), minBytes: f64() };
  const arr = () => { const a = new Float64Array(v.cols); for (let i = 0; i < v.cols; i++) a[i] = f32(); return a; };
  v.allocMin = arr(); v.allocMax = arr(); v.resMin = arr(); v.resMax = arr();
  v.phase = new Uint8Array(buf.slice(o, o + v.cols)); o += v.cols;
  const hasHL = dv.getUint8(o); o += 1;
  v.hl = hasHL ? arr() : null;
  v.blocks = new Array(v.nblocks);
  for (let k = 0; k < v.nblocks; k++) {
    const b = { id: i32(), start: i32(), end: i32(), size: f32() };
    b.cat = dv.getUint8(o); b.flags = dv.getUint8(o + 1); o += 2;
    const ne = dv.getUint16(o, true); o += 2;
    b.key = u32();
    b.cols = new Int32Array(ne); b.offs = new Float64Array(ne);
    for (let e = 0; e < ne; e++) { b.cols[e] = dv.getUint16(o, true); o += 2; b.offs[e] = f32(); }
    v.blocks[k] = b;
  }
  v.bytes = buf.byteLength;
  return v;
}

// colEntry is the first entry of column c of a view (as the server computes it).
export function colEntry(v, c) {
  return v.x0 + Math.floor(c * (v.x1 - v.x0) / v.cols);
}
