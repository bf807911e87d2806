// Reads ptscope's Parquet files with DuckDB, an independent reader, to check
// internal/parquet against it (docs/parquet.md). Not run by CI: it needs
// DuckDB's Node package, installed in the folder it is run from:
//
//   mkdir -p /tmp/duck && cd /tmp/duck && npm install @duckdb/node-api
//   node REPO/scripts/parquet_duckdb.mjs tables DIR [DIR2]
//       every table of an export folder: rows and DuckDB's types; with DIR2
//       (say, the same inputs exported by another build) whether each table
//       holds the same rows (map entries compared in key order)
//   node REPO/scripts/parquet_duckdb.mjs roundtrip DIR
//       DIR holds roundtrip.parquet and roundtrip.json, written by
//       go test ./internal/parquet -run RoundTrip -keep DIR: every row read
//       by DuckDB must equal the one written
import { createRequire } from 'module';
import { readFileSync } from 'fs';

const require = createRequire(process.cwd() + '/');
const { DuckDBInstance } = require('@duckdb/node-api');
const [mode, a, b] = process.argv.slice(2);
const db = await DuckDBInstance.create(':memory:');
const c = await db.connect();
const rows = async (sql) => (await c.runAndReadAll(sql)).getRowsJson();
const version = (await rows('SELECT version()'))[0][0];
let bad = 0;

if (mode === 'tables') {
  const tables = ['ranks', 'snapshots', 'memory_steps', 'peak_groups', 'peak_stacks', 'trace_steps', 'operators', 'kernels',
    'collectives', 'findings'];
  // map entries in key order; temporary folder names (Go's t.TempDir) made equal
  const norm = (v) => Array.isArray(v)
    ? (v.length && v[0] && typeof v[0] === 'object' && 'key' in v[0] ? [...v].sort((p, q) => (p.key < q.key ? -1 : 1)) : v.map(norm))
    : v;
  const read = async (dir, t) => {
    const r = await c.runAndReadAll(`SELECT * FROM '${dir}/${t}.parquet'`);
    return {
      n: r.currentRowCount,
      types: r.columnNames().map((name, i) => `${name} ${r.columnTypes()[i]}`).join(', '),
      text: JSON.stringify(norm(r.getRowsJson())).replace(/Test[A-Za-z]+\d+/g, 'T'),
    };
  };
  for (const t of tables) {
    const x = await read(a, t);
    let note = '';
    if (b) {
      const y = await read(b, t);
      const same = x.text === y.text && x.types === y.types;
      bad += same ? 0 : 1;
      note = same ? ', the same in both' : ', DIFFERENT';
    }
    console.log(`${t}: ${x.n} rows${note}\n  ${x.types}`);
  }
} else if (mode === 'roundtrip') {
  const text = readFileSync(`${a}/roundtrip.json`, 'utf8');
  const want = JSON.parse(text);
  // int64 values beyond 2^53 as written, not as JavaScript parses them
  const exact = (key) => [...text.matchAll(new RegExp(`"${key}":(-?\\d+|null)`, 'g'))].map((m) => (m[1] === 'null' ? null : m[1]));
  const i64s = exact('I64');
  const ols = exact('OL');
  const got = await rows(`SELECT i32, i64::VARCHAR, f, b, s, d, oi, ol::VARCHAR, of, ob, os, map_entries(m), map_entries(mi)
    FROM '${a}/roundtrip.parquet'`);
  const mapOf = (es) => JSON.stringify(Object.fromEntries((es || []).map((e) => [e.key, Number(e.value)])));
  const sorted = (m) => JSON.stringify(Object.fromEntries(Object.entries(m || {}).sort()));
  const keys = ['I32', 'I64', 'F', 'B', 'S', 'D', 'OI', 'OL', 'OF', 'OB', 'OS'];
  got.forEach((g, i) => {
    const w = want[i];
    const vals = keys.map((k) => w[k]);
    vals[1] = i64s[i];
    vals[7] = ols[i];
    const same = vals.every((v, k) => (v === null ? g[k] === null : String(v) === String(g[k])))
      && mapOf(g[11]) === sorted(w.M) && mapOf(g[12]) === sorted(w.MI);
    if (!same && bad++ < 3) {
      console.log(`row ${i}: ${JSON.stringify(g)}\n  want ${JSON.stringify(w)}`);
    }
  });
  const [groups, chunks] = (await rows(`SELECT count(DISTINCT row_group_id), count(*) FROM parquet_metadata('${a}/roundtrip.parquet')`))[0];
  console.log(`${got.length} rows read, ${want.length} written, ${bad} differ (${groups} row groups, ${chunks} column chunks)`);
  if (got.length !== want.length) bad++;
} else {
  console.error('usage: node parquet_duckdb.mjs tables DIR [DIR2] | roundtrip DIR');
  process.exit(2);
}
console.log(`DuckDB ${version}: ${bad ? `${bad} problems` : 'ok'}`);
process.exit(bad ? 1 : 0);
