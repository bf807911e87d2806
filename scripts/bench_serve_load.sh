#!/usr/bin/env bash
# Load test of ptscope serve (docs/security.md, "serve under load"): serves
# the generated 1M-entry snapshot and the ~350 MB trace of bench_serve.sh
# (or the files given), waits until both are loaded, then 50 clients ask
# for worst-case views for 15 s with cross-site requests mixed in
# (scripts/serveload) while a probe asks for the input list; prints the
# answers, the server's peak RSS, and how long SIGINT takes to end it.
# Usage: scripts/bench_serve_load.sh [SNAPSHOT [TRACE]]
# Environment: CLIENTS (50), DURATION (15s), SERVE_FLAGS (e.g. --max-memory 2GiB).
set -euo pipefail
cd "$(dirname "$0")/.."
work=${TMPDIR:-/tmp}/ptscope-bench-serve
mkdir -p "$work"
snap=${1:-$work/gpt2s_1m.pickle}
trace=${2:-$work/trace350.json}
[ -f "$snap" ] || go run ./scripts/gensnapshot -model gpt2s -o "$snap"
if [ ! -f "$trace" ] && [ -f ../shared/fixtures/gpt2tiny_with_stack.pt.trace.json ]; then
	go run ./internal/kineto/gen/gentrace -src ../shared/fixtures/gpt2tiny_with_stack.pt.trace.json -size 350MB -o "$trace"
fi
go build -o "$work/ptscope" ./cmd/ptscope
go build -o "$work/serveload" ./scripts/serveload
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; load $(cut -d' ' -f1-3 /proc/loadavg)"
port=18694
# shellcheck disable=SC2086
"$work/ptscope" serve --addr 127.0.0.1:$port --rescan 0 ${SERVE_FLAGS:-} "$snap" "$trace" 2>"$work/serve.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
start=$(date +%s.%N)
until curl -s localhost:$port/api/v1/inputs 2>/dev/null | grep -q '"status":"ready".*"status":"ready"'; do
	kill -0 $pid 2>/dev/null || { cat "$work/serve.log"; exit 1; }
	sleep 0.1
done
echo "both inputs ready after $(echo "$(date +%s.%N) - $start" | bc) s; RSS $(awk '/VmRSS/ {print int($2/1024)}' /proc/$pid/status) MiB"
rc=0
"$work/serveload" -url http://127.0.0.1:$port -pid $pid -clients "${CLIENTS:-50}" -duration "${DURATION:-15s}" || rc=$?
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
t0=$(date +%s.%N)
kill -INT $pid
code=0
wait $pid || code=$?
trap - EXIT
echo "SIGINT: exit $code after $(echo "$(date +%s.%N) - $t0" | bc) s"
exit $rc
