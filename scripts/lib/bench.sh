# Shared set-up of the bench_*.sh scripts that measure with GNU time:
# source it from the repository root, then call bench_setup. It installs
# GNU time where it is missing, makes a work folder ($work, removed on
# exit) and builds ptscope into it ($bin).
bench_setup() {
  if [ ! -x /usr/bin/time ]; then
    echo "installing GNU time (apt-get install time)" >&2
    apt-get install -y time >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y time >/dev/null; }
  fi
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  bin="$work/ptscope"
  CGO_ENABLED=0 go build -o "$bin" ./cmd/ptscope
}
