#!/usr/bin/env bash
# Measure ptscope over a folder of many ranks: analyze, trace, check and
# export parquet, each with its wall time, CPU time, peak RSS and MB/s, and
# the fleet summary's lines and widest line (the bar: one screen, 100
# columns).
#
#   scripts/bench_fleet.sh [SNAPSHOT]
#
# It generates RANKS (default 1000) rank folders with scripts/genfleet from
# SNAPSHOT (default: testdata/snapshots/validate_gpt2tiny_fp32.pickle.xz; the
# issue's measurement used a real 2.9 MB, 31k-entry HF Trainer snapshot):
# each rank's snapshot is the real one with its sizes and times scaled per
# rank, rank 13 is a real leaking run and rank 666 a real out-of-memory run,
# and each rank has a synthetic FSDP trace. With DUCKDB_MODULES pointing at a
# node_modules folder holding @duckdb/node-api (npm install
# @duckdb/node-api), DuckDB reads the Parquet tables back and counts the
# ranks. The folder is generated under TMPDIR and removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

ranks=${RANKS:-1000}
src=${1:-testdata/snapshots/validate_gpt2tiny_fp32.pickle.xz}
. scripts/lib/bench.sh
bench_setup
CGO_ENABLED=0 go build -o "$work/genfleet" ./scripts/genfleet

fleet="$work/fleet"
special=()
[ "$ranks" -gt 13 ] && special+=(-special 13=testdata/snapshots/leak_gpt2_2l.pickle.xz)
[ "$ranks" -gt 666 ] && special+=(-special 666=testdata/snapshots/oom_capacity.pickle.xz)
"$work/genfleet" -src "$src" -ranks "$ranks" -traces -o "$fleet" "${special[@]}"
snap_mb=$(find "$fleet" -name snapshot.pickle -printf '%s\n' | awk '{ s += $1 } END { printf "%.1f", s / 1e6 }')
trace_mb=$(find "$fleet" -name '*.pt.trace.json.gz' -printf '%s\n' | awk '{ s += $1 } END { printf "%.1f", s / 1e6 }')
echo "fleet: $ranks ranks, snapshots $snap_mb MB, traces $trace_mb MB (gzip), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

# measure NAME MB CMD...: one line with wall, CPU, peak RSS, MB/s
measure() {
  local name=$1 mb=$2
  shift 2
  /usr/bin/time -v "$@" >"$work/out.txt" 2>"$work/time.txt" || true
  awk -F': ' -v name="$name" -v mb="$mb" '
    /Elapsed \(wall clock\)/ { n = split($2, p, ":"); w = 0; for (i = 1; i <= n; i++) w = w * 60 + p[i] }
    /User time/ { u = $2 } /System time/ { s = $2 } /Maximum resident set size/ { r = $2 }
    /Exit status/ { x = $2 }
    END { printf "%-34s %7.2f s wall %7.2f s CPU %8.1f MB peak RSS %8.1f MB/s exit %s\n", name, w, u + s, r / 1024, mb / w, x }' "$work/time.txt"
}

measure "analyze (snapshots)" "$snap_mb" "$bin" analyze "$fleet"
lines=$(wc -l <"$work/out.txt"); widest=$(wc -L <"$work/out.txt")
echo "  analyze text: $lines lines, widest $widest columns"
measure "analyze --json" "$snap_mb" "$bin" analyze --json "$fleet"
measure "trace (traces)" "$trace_mb" "$bin" trace "$fleet"
lines=$(wc -l <"$work/out.txt"); widest=$(wc -L <"$work/out.txt")
echo "  trace text: $lines lines, widest $widest columns"
measure "check --max-peak 70GiB --no-oom" "$snap_mb" "$bin" check --max-peak 70GiB --no-oom "$fleet"
total=$(awk -v a="$snap_mb" -v b="$trace_mb" 'BEGIN { print a + b }')
measure "export parquet" "$total" "$bin" export parquet -o "$work/tables" "$fleet"
du -sh "$work/tables" | awk '{ print "  parquet tables: " $1 }'

if [ -n "${DUCKDB_MODULES:-}" ] && command -v node >/dev/null; then
  cat >"$work/q.mjs" <<JS
import { DuckDBInstance } from '${DUCKDB_MODULES}/@duckdb/node-api/lib/index.js';
const con = await (await DuckDBInstance.create(':memory:')).connect();
const r = await con.runAndReadAll("SELECT count(DISTINCT rank) FROM read_parquet('$work/tables/*.parquet', union_by_name = true)");
const n = Number(r.getRows()[0][0]);
console.log(\`duckdb: \${n} distinct ranks in the tables: \${n === $ranks ? 'PASS' : 'FAIL'}\`);
JS
  node "$work/q.mjs"
fi
