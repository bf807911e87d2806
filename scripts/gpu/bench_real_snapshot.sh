#!/usr/bin/env bash
# analyze's speed bar on a real 1,000,000-entry snapshot, on a CUDA machine, in one call:
# makes the snapshot (GPT-2 small training, snapshot_scenarios.py big, about 1 minute)
# unless SNAPSHOT names one (.xz is unpacked), then runs scripts/bench_snapshot.sh with
# every core and pinned to 2 cores (taskset, like the development VM), and ptscope alone
# at several GOMAXPROCS.
#   SNAPSHOT=... scripts/gpu/bench_real_snapshot.sh [PTSCOPE]   (default bin/ptscope-linux-amd64)
set -u -o pipefail
cd "$(dirname "$0")/../.."
bin=${1:-$PWD/bin/ptscope-linux-amd64}
snap=${SNAPSHOT:-}
OUT=${OUT:-/tmp/ptscope-bench}
mkdir -p "$OUT"
if [ -z "$snap" ]; then
  OUT=$OUT python3 scripts/gpu/snapshot_scenarios.py big 2>&1 | tail -2
  snap=/tmp/big_gpt2s_1m.pickle
elif [ "${snap%.xz}" != "$snap" ]; then
  python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$snap" /tmp/real_1m.pickle
  snap=/tmp/real_1m.pickle
fi
echo "== $(nproc) cores, $(python3 -c 'import torch; print(torch.cuda.get_device_name(0))' 2>/dev/null)"
echo "== every core"; RUNS=${RUNS:-5} scripts/bench_snapshot.sh "$snap" "$bin"
echo "== 2 cores (taskset -c 0,1)"; RUNS=${RUNS:-5} taskset -c 0,1 scripts/bench_snapshot.sh "$snap" "$bin"
for p in 1 2 4 8 16; do
  for i in 1 2 3; do GOMAXPROCS=$p python3 scripts/measure.py "ptscope GOMAXPROCS=$p" "$bin" analyze --json "$snap"; done
done
