#!/usr/bin/env bash
# Record every deterministic output of a ptscope binary over the real
# fixtures and the committed inputs, so that a structural change can be
# shown to change nothing:
#
#   scripts/outputs_check.sh BIN OUTDIR        # record
#   diff -r BEFORE AFTER && echo identical      # compare two records
#
# BIN is a built ptscope (go build -o BIN ./cmd/ptscope), OUTDIR a folder
# that must not exist. FIXTURES (default ../shared/fixtures, relative to the
# repository root) holds the real PyTorch artifacts. The inputs are staged
# once in STAGE (default $TMPDIR/ptscope-outputs-stage): the committed
# snapshots, traces and bundles, the trainer bundles unpacked, and a
# generated 12-rank fleet (scripts/genfleet, built from the tree that makes
# the stage). Every command runs inside STAGE with relative paths, so two
# records made with the same STAGE agree byte for byte when the outputs do.
#
# Each case writes OUTDIR/NAME.out (stdout), .err (stderr), .rc (exit
# status) and, where the command writes files, OUTDIR/NAME.files/. Run
# folders (--out) are renamed RUN (their YYYYMMDD_HHMMSS_ prefix is the
# only time in them); `latest` is recorded as the name it points at, with
# the same prefix removed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
out=$2
[ -e "$out" ] && { echo "outputs_check: $out exists" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
fixtures=${FIXTURES:-$root/../shared/fixtures}
fixtures=$(cd "$fixtures" && pwd)
stage=${STAGE:-${TMPDIR:-/tmp}/ptscope-outputs-stage}

if [ ! -e "$stage/.done" ]; then
	rm -rf "$stage"
	mkdir -p "$stage"/{fix,trainers,windows}
	cp "$fixtures"/*.pickle "$fixtures"/*.json "$fixtures"/*.json.gz "$stage/fix/"
	cp -r "$root/testdata/snapshots" "$root/testdata/traces" "$root/testdata/simulate" "$stage/"
	cp -r "$root/testdata/bundles/lm_small_bf16" "$stage/"
	for t in "$root"/testdata/bundles/trainers/*.tar.xz; do
		mkdir -p "$stage/trainers/$(basename "$t" .tar.xz)"
		tar -xJf "$t" -C "$stage/trainers/$(basename "$t" .tar.xz)"
	done
	for t in "$root"/testdata/bundles/windows/*.tar.xz; do
		mkdir -p "$stage/windows/$(basename "$t" .tar.xz)"
		tar -xJf "$t" -C "$stage/windows/$(basename "$t" .tar.xz)"
	done
	mkdir -p "$stage/more"
	cp "$root"/internal/load/testdata/*.pickle.xz "$root"/internal/memory/testdata/*.pickle.xz \
		"$root"/internal/estimate/testdata/*.pickle "$root"/internal/estimate/testdata/*_config.json "$stage/more/"
	(cd "$root" && go run ./scripts/genfleet -src testdata/snapshots/validate_gpt2tiny_fp32.pickle.xz \
		-ranks 12 -traces -o "$stage/fleet" -special 5=testdata/snapshots/leak_gpt2_2l.pickle.xz) 2>/dev/null
	touch "$stage/.done"
fi
cd "$stage"
export COLUMNS=100 TZ=UTC NO_COLOR=1

# run NAME ARGS...: record one invocation. Files the command writes must go
# under @F, which stands for the case's own folder (created empty, removed
# when left empty).
run() {
	local name=$1
	shift
	local files="$out/$name.files" args=() a
	mkdir -p "$files"
	for a in "$@"; do
		args+=("${a//@F/$files}")
	done
	local rc=0
	"$bin" "${args[@]}" >"$out/$name.out" 2>"$out/$name.err" </dev/null || rc=$?
	echo "$rc" >"$out/$name.rc"
	# The paths of written files are the case's own: make them relative.
	sed -i -E "s|$files|FILES|g; s|/[0-9]{8}_[0-9]{6}_|/RUN_|g" "$out/$name.out" "$out/$name.err"
	if [ -n "$(ls -A "$files")" ]; then
		normalize "$files"
	else
		rmdir "$files"
	fi
}

# normalize DIR: run folders lose their time prefix; latest becomes a file.
normalize() {
	local d
	for d in $(find "$1" -name latest -type l); do
		readlink "$d" | sed -E 's/^[0-9]{8}_[0-9]{6}_//' >"$d.target"
		rm "$d"
	done
	for d in $(find "$1" -mindepth 1 -type d -regextype posix-extended -regex '.*/[0-9]{8}_[0-9]{6}_[^/]*'); do
		mv "$d" "$(dirname "$d")/RUN_$(basename "$d" | sed -E 's/^[0-9]{8}_[0-9]{6}_//')"
	done
}

snaps=(fix/*.pickle snapshots/*.pickle.xz more/*.pickle.xz more/*.pickle snapshots/*.json.gz
	fix/gpt2tiny_memory_timeline.json fix/gpt2tiny_memory_timeline_raw.json.gz snapshots/facts.jsonl)
traces=(fix/*.pt.trace.json* traces/*.pt.trace.json.gz traces/fsdp/*.gz traces/real/*)
bundles=(lm_small_bf16 trainers/* windows/* simulate/sim2 simulate/sim4 simulate/real2 simulate/nogpu_none simulate/nogpu_bf16)
folders=(traces traces/fsdp snapshots fleet fix)
all=("${snaps[@]}" "${traces[@]}" "${bundles[@]}" "${folders[@]}")

key() { echo "$1" | tr '/.' '__'; }

for x in "${all[@]}"; do
	k=$(key "$x")
	for cmd in analyze trace; do
		run "$cmd.text.$k" "$cmd" "$x"
		run "$cmd.json.$k" "$cmd" --json "$x"
		run "$cmd.html.$k" "$cmd" --html "@F/page.html" "$x"
		run "$cmd.out.$k" "$cmd" --out @F "$x"
	done
	run "check.json.$k" check --json --max-peak 4GiB --max-reserved 5GiB --min-efficiency 90% --no-leak --no-oom \
		--min-gpu-util 50% --max-dataloader 10% "$x"
	run "check.text.$k" check --max-peak 4GiB --min-efficiency 0.9 --no-leak --no-oom --min-gpu-util 0.5 "$x"
done

# Views and flags of analyze and trace.
for x in fix/gpt2s_train_fp32_b4_ctx512.pickle snapshots/leak_gpt2_2l.pickle.xz lm_small_bf16 trainers/ddp windows/oom; do
	k=$(key "$x")
	run "analyze.full.$k" analyze --steps all --stacks full --top 30 "$x"
	run "analyze.dev.$k" analyze --device 0 --device-memory 80GiB "$x"
	run "analyze.rules.$k" analyze --rank 0 --json "$x"
done
run analyze.print-rules analyze --print-rules
for x in fix/gpt2_6l_dataloader_bottleneck.pt.trace.json.gz traces/fsdp lm_small_bf16 trainers/fsdp2 trainers/ddp traces/ddp1.pt.trace.json.gz; do
	k=$(key "$x")
	for v in overview operators kernels steps idle comm memory; do
		run "trace.view-$v.$k" trace --view "$v" --steps all --top 30 "$x"
	done
	run "trace.shape.$k" trace --view operators --group-by-shape --annotations "$x"
	run "trace.droplast.$k" trace --json --drop-last-step "$x"
done
for x in fleet; do
	run "analyze.fleet-rank.$x" analyze --rank 5 "$x"
	run "analyze.fleet-off.$x" analyze --fleet off --json "$x"
	run "trace.fleet-rank.$x" trace --rank 7 "$x"
	run "trace.fleet-on.$x" trace --fleet on traces/fsdp
	run "check.fleet.$x" check --json --max-peak 100MiB --no-leak "$x"
done

# diff: pairs of every kind, and a wrong pair.
pairs=(
	"fix/gpt2s_train_fp32_b4_ctx512.pickle fix/gpt2s_fwd_bf16_b4_ctx512.pickle"
	"snapshots/gpt2s_train_fp32_b4_ctx512.pickle.xz snapshots/leak_gpt2_2l.pickle.xz"
	"snapshots/oom_capacity.pickle.xz snapshots/oom_fragmentation.pickle.xz"
	"traces/dataloader.pt.trace.json.gz fix/gpt2_6l_dataloader_bottleneck.pt.trace.json.gz"
	"traces/fsdp/rank0.pt.trace.json.gz traces/fsdp/rank1.pt.trace.json.gz"
	"trainers/ddp trainers/fsdp2"
	"trainers/plain_accum_ckpt trainers/compiled"
	"lm_small_bf16 trainers/hf_trainer"
	"simulate/sim2 simulate/sim4"
	"simulate/real2 simulate/sim2"
	"windows/leak windows/oom"
	"traces/fsdp traces/fsdp"
	"fleet fleet"
	"fix/gpt2s_train_fp32_b4_ctx512.pickle traces/ddp1.pt.trace.json.gz"
)
i=0
for p in "${pairs[@]}"; do
	i=$((i + 1))
	# shellcheck disable=SC2086
	run "diff.text.$i" diff $p
	# shellcheck disable=SC2086
	run "diff.json.$i" diff --json --top 30 $p
	# shellcheck disable=SC2086
	run "diff.out.$i" diff --out @F --html "@F/diff.html" $p
	# shellcheck disable=SC2086
	run "check.baseline.$i" check --json --baseline $p --max-peak-increase 5% --max-step-time-increase 10%
done

# export: every format over snapshots, traces and bundles.
for x in "${snaps[@]}" lm_small_bf16 trainers/ddp windows/leak simulate/sim2; do
	k=$(key "$x")
	run "export.pprof.$k" export pprof -o "@F/mem.pb.gz" "$x"
	run "export.pprof-step.$k" export pprof --at step:2 --device 0 -o "@F/mem.pb.gz" "$x"
	run "export.folded.$k" export folded "$x"
	run "export.folded-end.$k" export folded --at end --device 0 "$x"
	run "export.perfetto.$k" export perfetto "$x"
	run "export.perfetto-pts.$k" export perfetto --max-points 500 "$x"
	run "export.memviz.$k" export memory-viz "$x"
	run "export.memviz-win.$k" export memory-viz --steps 1-2 --min-size 1MiB "$x"
	run "export.memviz-fromto.$k" export memory-viz --from start --to peak -o "@F/viz.pickle" "$x"
done
for x in "${traces[@]}" lm_small_bf16 trainers/fsdp2; do
	k=$(key "$x")
	run "export.perfetto.$k" export perfetto "$x"
	run "export.perfetto-trim.$k" export perfetto --steps 3-4 --min-duration 10us -o "@F/small.json" "$x"
	run "export.pprof.$k" export pprof "$x"
done
for x in lm_small_bf16 trainers traces snapshots fleet fix simulate; do
	run "export.parquet.$(key "$x")" export parquet -o "@F/pq" --top-stacks 7 "$x"
done
run export.bad export nosuch fix/gpt2s_fwd_bf16_b4_ctx512.pickle

# estimate: the examples of its help and docs/estimate.md.
est=(
	"--model llama3-8b --seq 4096 --gpu h100"
	"--config more/gpt2_config.json --seq 2048 --micro-batch 4 --recompute full --explain"
	"--model llama3-8b --fsdp --dp 8 --param-dtype bf16 --reduce-dtype fp32 --seq 4096"
	"--config more/llama3_8b_config.json --tp 4 --tp-plan hf --micro-batch 4 --seq 2048 --gpu h100"
	"--model llama3-70b --dtype bf16-true --master-weights --grad-dtype fp32 --tp 8 --tp-plan megatron --sp --pp 4 --dp 8 --zero 1 --seq 8192 --recompute selective --gpu h100"
	"--model llama3-8b --zero 2 --dp 8 --offload optimizer --gpu 4090"
	"--gpu h100 --sweep model=gpt2-medium,gpt2-large,gpt2-xl seq=256,512,1024 dtype=fp32,bf16"
	"--gpu h100 --fsdp --dp 8 --sweep model=llama2-7b,llama3-8b seq=2048,4096,8192 recompute=none,full"
	"--model lm-2.7B --gpu 4090 --sweep micro-batch=1..64 seq=512,1024"
	"--model lm-small --seq 512 --micro-batch 8 --calibrate lm_small_bf16"
	"--model lm-small --seq 512 --micro-batch 8 --dtype bf16 --calibrate lm_small_bf16"
	"--config more/tinyllama_config.json --seq 2048"
	"--config more/mixtral_config.json --seq 1024 --forward-only"
	"--model gpt2 --seq 1024 --micro-batch 4 --calibrate simulate/sim2"
)
i=0
for e in "${est[@]}"; do
	i=$((i + 1))
	# shellcheck disable=SC2086
	run "estimate.text.$i" estimate $e
	# shellcheck disable=SC2086
	run "estimate.json.$i" estimate --json $e
done

run demo demo
run demo.json demo --json
run help help
for c in analyze trace check diff export estimate run serve demo version; do
	run "help.$c" help "$c"
done
n=$(ls "$out" | grep -c '\.rc$')
echo "outputs_check: $n cases in $out"
