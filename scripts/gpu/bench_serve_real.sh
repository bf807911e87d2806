#!/usr/bin/env bash
# ptscope serve and --html on a REAL 1,000,000-entry snapshot (GPT-2 small training made by
# snapshot_scenarios.py big, about 1 minute on a GPU; or SNAPSHOT=file), pinned to 2 cores like
# the development VM: time to ready against analyze --json, the server's time and payload for a
# zoom sequence, the allocator state and click answers, the --html file's size. No browser is
# needed (the browser-side numbers come from scripts/bench_serve.sh where Chromium is
# installed); the --html file is left in $OUT to open there. Prints PASS/FAIL per goal. Views are
# asked for as a browser asks (Accept-Encoding: gzip); their sizes are what the wire carried.
#   OUT=dir SNAPSHOT=... scripts/gpu/bench_serve_real.sh [PTSCOPE]   (default bin/ptscope-linux-amd64)
set -u -o pipefail
cd "$(dirname "$0")/../.."
bin=${1:-$PWD/bin/ptscope-linux-amd64}
OUT=${OUT:-/tmp/ptscope-bench-serve}
mkdir -p "$OUT"
snap=${SNAPSHOT:-}
if [ -z "$snap" ]; then
	OUT=$OUT python3 scripts/gpu/snapshot_scenarios.py big 2>&1 | tail -2
	snap=/tmp/big_gpt2s_1m.pickle
fi
pin="taskset -c 0,1"
echo "== $(nproc) cores (measuring on 2: $pin), snapshot $(du -h "$snap" | cut -f1)"
best() { sort -n | head -1; }
calc() { python3 -c "print(round($1, 3))"; } # no bc on every host
a=$(for i in 1 2 3; do s=$(date +%s.%N); $pin "$bin" analyze --json "$snap" >/dev/null; e=$(date +%s.%N); calc "$e - $s"; done | best)
echo "analyze --json (best of 3): $a s"
port=18694
: >"$OUT/ready.txt"
for i in 1 2 3; do
	s=$(date +%s.%N)
	$pin "$bin" serve --addr 127.0.0.1:$port --rescan 0 "$snap" >/dev/null 2>&1 &
	pid=$!
	python3 - "$port" <<'EOF'
import json, sys, time, urllib.request
while True:
    try:
        d = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/api/v1/inputs"))
        if d["inputs"][0]["status"] in ("ready", "error"):
            break
    except OSError:
        pass
    time.sleep(0.01)
EOF
	e=$(date +%s.%N)
	calc "$e - $s" >>"$OUT/ready.txt"
	if [ "$i" != 3 ]; then
		kill $pid
		wait $pid 2>/dev/null
	fi
done
r=$(best <"$OUT/ready.txt")
echo "serve ready (best of 3): $r s"
python3 - "$port" "$a" "$r" <<'EOF'
import gzip, json, struct, sys, urllib.request
port, a, r = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
base = f"http://127.0.0.1:{port}/api/v1/"
sent = 0
def get(path):
    # as a browser asks: gzip accepted; sent is what the wire carried
    global sent
    resp = urllib.request.urlopen(urllib.request.Request(base + path, headers={"Accept-Encoding": "gzip"}))
    body = resp.read()
    sent = len(body)
    if resp.headers.get("Content-Encoding") == "gzip":
        body = gzip.decompress(body)
    t = float(resp.headers["Server-Timing"].split("dur=")[1])
    return body, t
ok = True
def check(name, good, text):
    global ok
    ok &= good
    print(("PASS" if good else "FAIL"), name, text)
check("ready <= 2x analyze --json", r <= 2 * a, f"{r:.2f} s vs {a:.2f} s ({r/a:.2f}x)")
summary = json.loads(get("mem/summary?input=0")[0])
n, peak = summary["entries"], summary["result"]["peak"]["event_index"]
x0, x1 = 0, n
times, sizes = [], []
for k in range(14):  # the whole trace, then halving around the peak, then a pan
    body, t = get(f"mem/view?input=0&x0={x0}&x1={x1}&w=1500&h=600")
    blocks = struct.unpack_from("<I", body, 16)[0]
    print(f"  view [{x0}, {x1}): {t:.1f} ms, {sent/1024:.1f} KB sent ({len(body)/1024:.1f} KB before gzip), {blocks} blocks")
    times.append(t); sizes.append(sent)
    span = max(1, (x1 - x0) // 2)
    x0 = max(0, min(n - span, peak - span // 2)); x1 = x0 + span
body, t = get(f"mem/view?input=0&x0={max(0, x0 - (x1-x0)//2)}&x1={max(1, x1 - (x1-x0)//2)}&w=1500&h=600")
times.append(t); sizes.append(sent)
for k in range(5):  # the whole trace again: the first paint of every page
    body, t = get(f"mem/view?input=0&w=1500&h=600")
    times.append(t); sizes.append(sent)
print(f"  view [0, {n}) five more times: {t:.1f} ms the last")
check("zoom/pan <= 30 ms server", max(times) <= 30, f"median {sorted(times)[len(times)//2]:.1f} ms, max {max(times):.1f} ms")
check("zoom/pan <= 64 KB", max(sizes) <= 64 << 10, f"max {max(sizes)/1024:.1f} KB sent (gzip)")
st = []
for e in (n // 7, n // 3, peak, n // 2, n - 2):
    body, t = get(f"mem/state?input=0&event={e}")
    st.append(t)
check("allocator state <= 100 ms server", max(st) <= 100, f"max {max(st):.1f} ms ({len(json.loads(body)['segments'])} segments at the end)")
alloc = summary["result"]["peak"]["allocated_bytes"]
body, t = get(f"mem/hit?input=0&event={peak}&y={alloc // 2}")
hit = json.loads(body)
check("click -> stack <= 100 ms server", t <= 100 and hit["id"] >= 0, f"{t:.1f} ms, block {hit['id']} with {len(hit.get('block', {}).get('frames', []))} frames")
sys.exit(0 if ok else 1)
EOF
rc=$?
kill $pid
wait $pid 2>/dev/null
s=$(date +%s.%N)
$pin "$bin" analyze --html "$OUT/real_1m.html" "$snap" >/dev/null 2>&1
e=$(date +%s.%N)
size=$(stat -c %s "$OUT/real_1m.html")
if [ "$size" -le 10000000 ]; then v=PASS; else v=FAIL; rc=1; fi
echo "$v --html <= 10 MB: $(calc "$size / 1e6") MB, analyze --html $(calc "$e - $s") s (open $OUT/real_1m.html in Chromium for the draw time)"
python3 - "$OUT/real_1m.html" <<'EOF'
import json, sys
s = open(sys.argv[1]).read()
j = s.index("=", s.index("window.__PTSCOPE_DATA__")) + 1
m = json.loads(s[j:s.index("</script>", j)].strip().rstrip(";"))["mem"]["0"]
print(f"  --html: {m['levels']} levels of detail in {len(m['tiles'])} tiles, details of {len(m['blocks']['cols']['id'])} blocks")
EOF
exit $rc
