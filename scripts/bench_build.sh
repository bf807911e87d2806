#!/usr/bin/env bash
# Measures what a first build costs (docs/build.md): the packages
# `go build ./cmd/ptscope` compiles, and the empty-build-cache build of
# ptscope against that of a small net/http + encoding/json program, in turn,
# in the same run (the module cache stays warm: `go mod download` first).
# Prints wall and CPU (user+sys) seconds per build, the load average around
# each, and the ratio of the medians; the target is a ratio of at most 1.5.
#
#   scripts/bench_build.sh [ROUNDS]        # default 3
#   DEMO=1 scripts/bench_build.sh          # also: a fresh clone's first
#                                          # `go run ./cmd/ptscope demo`
#
# The machine should be otherwise idle: `uptime` is printed with each build.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
rounds=${1:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0

mkdir -p "$work/small"
cat > "$work/small/main.go" <<'EOF'
package main

import (
	"encoding/json"
	"log"
	"net/http"
)

func main() {
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"path": r.URL.Path})
	})
	log.Fatal(http.ListenAndServe("127.0.0.1:0", nil))
}
EOF
printf 'module small\n\ngo 1.26\n' > "$work/small/go.mod"

go mod download
echo "packages: $(go list -deps ./cmd/ptscope | wc -l) (go list -deps ./cmd/ptscope), $(cd "$work/small" && go list -deps . | wc -l) for the small program"

# build NAME DIR PKG: one empty-cache build; appends "wall cpu" to $work/times.NAME
build() {
  local cache="$work/cache"
  rm -rf "$cache"
  local load0
  load0=$(cut -d' ' -f1 /proc/loadavg)
  (cd "$2" && GOCACHE="$cache" /usr/bin/time -f "%e %U %S" -o "$work/t" go build -o /dev/null "$3")
  local e u s
  read -r e u s < "$work/t"
  local cpu
  cpu=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.1f", u + s }')
  echo "$e $cpu" >> "$work/times.$1"
  printf '%-8s wall %6.1f s  cpu %6.1f s  load %s -> %s\n' "$1" "$e" "$cpu" "$load0" "$(cut -d' ' -f1 /proc/loadavg)"
}
for r in $(seq "$rounds"); do
  build small "$work/small" .
  build ptscope "$repo" ./cmd/ptscope
done
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ws=$(cut -d' ' -f1 "$work/times.small" | median)
wp=$(cut -d' ' -f1 "$work/times.ptscope" | median)
cs=$(cut -d' ' -f2 "$work/times.small" | median)
cp=$(cut -d' ' -f2 "$work/times.ptscope" | median)
awk -v ws="$ws" -v wp="$wp" -v cs="$cs" -v cp="$cp" 'BEGIN {
	printf "median wall: ptscope %.1f s, small %.1f s, ratio %.2f; median cpu: %.1f s, %.1f s, ratio %.2f\n", wp, ws, wp / ws, cp, cs, cp / cs }'

if [ -n "${DEMO:-}" ]; then
	# a fresh clone (of the committed tree) and a fresh build cache
	git clone -q "$repo" "$work/clone"
	rm -rf "$work/cache"
	echo "fresh clone: go run ./cmd/ptscope demo (load $(cut -d' ' -f1 /proc/loadavg))"
	(cd "$work/clone" && GOCACHE="$work/cache" /usr/bin/time -f "first output after %e s wall, %U s user %S s sys" \
		go run ./cmd/ptscope demo > "$work/demo.txt")
	head -3 "$work/demo.txt"
fi
