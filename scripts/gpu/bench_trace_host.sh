#!/usr/bin/env bash
# trace's speed bar on a quiet host without Go (a GPU machine), in one call:
# scripts/bench_trace.sh with prebuilt binaries, on every core and pinned to 2
# cores (taskset, like the development VM).
#   GOOS=linux GOARCH=amd64 CGO_ENABLED=0 go build -o bin/ptscope-linux-amd64 ./cmd/ptscope
#   GOOS=linux GOARCH=amd64 CGO_ENABLED=0 go build -o bin/gentrace-linux-amd64 ./internal/kineto/gen/gentrace
#   scripts/gpu/bench_trace_host.sh        (SIZE=360MB, RUNS=3 by default)
set -u -o pipefail
cd "$(dirname "$0")/../.."
export PTSCOPE=${PTSCOPE:-$PWD/bin/ptscope-linux-amd64} GENTRACE=${GENTRACE:-$PWD/bin/gentrace-linux-amd64}
echo "== $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== every core"; scripts/bench_trace.sh
echo "== 2 cores (taskset -c 0,1)"; taskset -c 0,1 scripts/bench_trace.sh
