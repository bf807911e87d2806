#!/usr/bin/env bash
# Screenshots of ptscope's page from the committed real inputs, in headless
# Chromium (apt-get install chromium-headless-shell):
#   scripts/screenshots.sh            the README's pictures: docs/img/memory.png (the GPT-2
#                                     training snapshot at its peak, a clicked block's stack),
#                                     docs/img/trace.png (the profiler overview) and
#                                     docs/img/critical.png (the critical path over the timeline)
#   scripts/screenshots.sh --all DIR  every view at 1280 and 1920 pixels wide into DIR, to look at
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/ptscope" ./cmd/ptscope
(cd browsertests && go build -o "$work/shoot" ./cmd/shoot)
snap=$root/testdata/snapshots/gpt2s_train_fp32_b4_ctx512.pickle.xz
trace=$root/testdata/traces/real/gpt2_6l_dataloader_bottleneck.pt.trace.json.gz
bundle=$root/testdata/bundles/lm_small_bf16
fsdp=$root/testdata/traces/fsdp # inputs 4 and 5: two ranks of one job
"$work/ptscope" serve --addr 127.0.0.1:0 "$snap" "$trace" "$bundle" "$fsdp" 2> "$work/serve.log" &
pid=$!
for _ in $(seq 100); do grep -q 'http://' "$work/serve.log" && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*' "$work/serve.log" | head -1)
url=${url%/}
until curl -s "$url/api/v1/inputs" | grep -q '"status":"ready"' && ! curl -s "$url/api/v1/inputs" | grep -q '"status":"\(queued\|loading\)"'; do sleep 0.2; done
shoot() { "$work/shoot" "$@"; }
peak='window.__ptscope.memory.goToPeak()'
# the README's: the memory view at the peak with a clicked block's stack, the trace overview
readme() { # DIR WIDTH
	shoot -url "$url/?input=0" -w "$2" -h 1000 -wait memory-timeline -do "$peak" -do @click-block \
		-do 'window.scrollTo(0, document.querySelector("[data-testid=answers]").getBoundingClientRect().bottom + window.scrollY - 4)' -out "$1/memory.png"
	shoot -url "$url/?input=1&view=trace" -w "$2" -h 900 -wait trace-overview -wait trace-memory -out "$1/trace.png"
	# the critical path: the chain over the timeline, a piece of it clicked
	shoot -url "$url/?input=1&view=critical" -w "$2" -h 900 -wait critical -wait trace-timeline \
		-do '[...document.querySelectorAll("[data-testid=critical-path] tbody tr")][16].click()' \
		-do 'window.scrollTo(0, document.querySelector("[data-testid=trace-timeline]").getBoundingClientRect().top + window.scrollY - 150)' \
		-out "$1/critical.png"
}
if [ "${1:-}" != --all ]; then
	mkdir -p docs/img
	readme docs/img 1280
	ls -l docs/img
	exit 0
fi
out=${2:?scripts/screenshots.sh --all DIR}
mkdir -p "$out"
for w in 1280 1920; do
	d=$out/$w
	mkdir -p "$d"
	readme "$d" "$w"
	shoot -url "$url/?input=0" -w "$w" -h 1200 -wait memory-timeline -wait answers -out "$d/memory_whole.png"
	shoot -url "$url/?input=0" -w "$w" -h 900 -wait memory-timeline -do "$peak" \
		-do 'document.querySelector("[data-testid=color-select]").value = "source"; document.querySelector("[data-testid=color-select]").dispatchEvent(new Event("change"))' \
		-out "$d/memory_by_source.png"
	shoot -url "$url/?input=0&view=state" -w "$w" -h 900 -wait allocator-state \
		-do '(() => { const L = window.__ptscope.state.layout, c = document.querySelector("[data-testid=segments]").getBoundingClientRect(); const g = L.segs[0], b = g.sorted[g.sorted.length - 1], p = L.starts[0] + (b.address - g.address) + b.size_bytes / 2, row = Math.floor(p / L.perRow); const x = c.left + 70 + (p - row * L.perRow) / L.perRow * L.w, y = c.top + 27 + row * 17; for (const t of ["mousemove", "click"]) document.querySelector("[data-testid=segments]").dispatchEvent(new MouseEvent(t, {clientX: x, clientY: y, bubbles: true})); })()' \
		-out "$d/state.png"
	shoot -url "$url/?input=1&view=trace" -w "$w" -h 1000 -wait trace-timeline \
		-do 'document.querySelector("[data-testid=trace-timeline]").scrollIntoView()' \
		-do '(async () => { const v = await fetch("/api/v1/trace/view?input=1&w=200").then((r) => r.json()); const s = v.slices.find((x) => v.names[x[4]].startsWith("aten::mm")) || v.slices[0]; window.__ptscope.traceTimeline.open(s[5]); })()' \
		-out "$d/trace_timeline.png"
	shoot -url "$url/?input=1&view=operators" -w "$w" -h 800 -wait operator-table -out "$d/operators.png"
	shoot -url "$url/?input=1&view=kernels" -w "$w" -h 800 -wait kernel-table -out "$d/kernels.png"
	shoot -url "$url/?input=1&view=operators" -w "$w" -h 800 -wait operator-table \
		-do 'document.querySelector("[data-testid=group-by] button[data-v=shape]").click()' -out "$d/operators_by_shape.png"
	shoot -url "$url/?input=1&view=kernels" -w "$w" -h 800 -wait kernel-table \
		-do 'document.querySelector("[data-testid=group-by] button[data-v=operator]").click()' -out "$d/kernels_by_operator.png"
	shoot -url "$url/?input=1&view=kernels" -w "$w" -h 800 -wait kernel-table -wait sequence-table \
		-do 'document.querySelector("[data-testid=sequence-table]").scrollIntoView()' -out "$d/kernel_sequences.png"
	shoot -url "$url/?input=1&view=opmemory" -w "$w" -h 900 -wait memory-ops -wait trace-memory -out "$d/trace_memory.png"
	shoot -url "$url/?input=1&view=gpu" -w "$w" -h 1400 -wait gpu-view -wait queue-length -wait copy-bandwidth -out "$d/gpu.png"
	shoot -url "$url/?input=1&view=critical" -w "$w" -h 1000 -wait critical -wait trace-timeline -out "$d/critical.png"
	shoot -url "$url/?input=1&view=critical" -w "$w" -h 1000 -wait critical -wait trace-timeline \
		-do '[...document.querySelectorAll("[data-testid=critical-path] tbody tr")][6].click()' -out "$d/critical_clicked.png"
	shoot -url "$url/?input=1&view=distributed" -w "$w" -h 600 -wait distributed -out "$d/distributed.png"
	shoot -url "$url/?input=4&view=distributed" -w "$w" -h 1300 -wait distributed -out "$d/distributed_job.png"
	shoot -url "$url/?input=2" -w "$w" -h 1200 -wait memory-timeline -wait phase-table -out "$d/bundle.png"
	shoot -url "$url/?view=diff&a=0&b=2" -w "$w" -h 1000 -wait diff-view -out "$d/compare.png"
done
ls -l "$out"/*
