#!/usr/bin/env bash
# Measures ptscope serve and --html against the goals in docs/serve.md:
# a generated 1M-entry snapshot (GPT-2 small trained at batch 8 x 512, whose
# blocks of 12-785 MiB draw ~16,000 blocks in the first view, as a real
# recording does; SNAPGEN_MODEL=synthetic for the older random-size one) and
# a ~350 MB trace (or the files given),
# `analyze --json` beside the server's time to ready, then the browser
# numbers (browsertests TestMeasure in headless Chromium at 1280 x 800:
# apt-get install chromium-headless-shell).
# Usage: scripts/bench_serve.sh [SNAPSHOT [TRACE]]   (TRACE "-": the snapshot only)
set -euo pipefail
cd "$(dirname "$0")/.."
work=${TMPDIR:-/tmp}/ptscope-bench-serve
mkdir -p "$work"
model=${SNAPGEN_MODEL:-gpt2s}
snap=${1:-$work/${model}_1m.pickle}
trace=${2:-$work/trace350.json}
[ -f "$snap" ] || go run ./scripts/gensnapshot -model "$model" -o "$snap"
if [ "$trace" != - ] && [ ! -f "$trace" ] && [ -f ../shared/fixtures/gpt2tiny_with_stack.pt.trace.json ]; then
	go run ./internal/kineto/gen/gentrace -src ../shared/fixtures/gpt2tiny_with_stack.pt.trace.json -size 350MB -o "$trace"
fi
go build -o "$work/ptscope" ./cmd/ptscope
bin=$work/ptscope
echo "machine: $(nproc) cores, $(uname -m); load $(cut -d' ' -f1-3 /proc/loadavg)"
best() { sort -n | head -1; }
# wall time follows the machine's load (2 shared cores); CPU time (user +
# system) does not, so both are given
ta=$(for i in 1 2 3; do /usr/bin/time -f '%e %U %S' "$bin" analyze --json "$snap" 2>&1 >/dev/null | tail -1; done)
a=$(echo "$ta" | awk '{print $1}' | best)
ac=$(echo "$ta" | awk '{print $2 + $3}' | best)
echo "analyze --json (best of 3):            ${a} s wall, ${ac} s CPU"
port=18693
tr=$(for i in 1 2 3; do
	start=$(date +%s.%N)
	"$bin" serve --addr 127.0.0.1:$port --rescan 0 "$snap" 2>/dev/null &
	pid=$!
	until curl -s localhost:$port/api/v1/inputs 2>/dev/null | grep -q '"status":"ready"'; do sleep 0.01; done
	end=$(date +%s.%N)
	# utime and stime (fields 14, 15 of /proc/PID/stat) in clock ticks
	cpu=$(awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$pid/stat")
	kill $pid; wait $pid 2>/dev/null || true
	echo "$(echo "$end - $start" | bc) $cpu"
done)
r=$(echo "$tr" | awk '{print $1}' | best)
rc=$(echo "$tr" | awk '{print $2}' | best)
echo "serve: first input ready (best of 3):  ${r} s wall, ${rc} s CPU  ($(echo "scale=2; $r / $a" | bc)x analyze --json wall, $(echo "scale=2; $rc / $ac" | bc)x CPU; goal <= 2x)"
snap=$(realpath "$snap")
[ -f "$trace" ] && trace=$(realpath "$trace") || trace=
cd browsertests
PTSCOPE_MEASURE_SNAPSHOT=$snap PTSCOPE_MEASURE_TRACE=$trace \
	go test -count=1 -run TestMeasure -v -timeout 900s . | grep -v '^=== \|^--- \|^PASS\|^ok'
