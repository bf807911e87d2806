#!/usr/bin/env bash
# Compares `ptscope analyze --json` with Python's bare pickle.load on the same
# snapshot, in one run: wall time, peak RSS, MB/s and the ratios.
#   scripts/bench_snapshot.sh [SNAPSHOT] [PTSCOPE]
# Without SNAPSHOT a realistic 1,000,000-entry snapshot is generated
# (internal/snapshot/snapgen). PTSCOPE defaults to a fresh build.
set -euo pipefail
cd "$(dirname "$0")/.."
snap=${1:-}
bin=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "$snap" ]; then
  snap=$tmp/snap_1m.pickle
  go run ./scripts/gensnapshot -entries 1000000 -o "$snap"
fi
if [ -z "$bin" ]; then
  bin=$tmp/ptscope
  CGO_ENABLED=0 go build -o "$bin" ./cmd/ptscope
fi
size=$(stat -c %s "$snap")
echo "input: $snap ($size bytes), $(nproc) cores"
runs=${RUNS:-3}
best() { sort -t$'\t' -k2,2n | head -1; }
py=$(for i in $(seq "$runs"); do python3 scripts/measure.py python python3 -c "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))" "$snap"; done | best)
go=$(for i in $(seq "$runs"); do python3 scripts/measure.py ptscope "$bin" analyze --json "$snap"; done | best)
python3 - "$size" "$py" "$go" <<'PY'
import sys
size = int(sys.argv[1])
py, go = sys.argv[2].split("\t"), sys.argv[3].split("\t")
pt, pr, gt, gr = float(py[1]), float(py[2]), float(go[1]), float(go[2])
print(f"python pickle.load     {pt:7.3f} s  {size/pt/1e6:7.1f} MB/s  peak RSS {pr:7.1f} MiB")
print(f"ptscope analyze --json {gt:7.3f} s  {size/gt/1e6:7.1f} MB/s  peak RSS {gr:7.1f} MiB")
print(f"time ratio python/ptscope: {pt/gt:.1f}x   RSS ratio ptscope/python: {gr/pr:.2f}")
PY
