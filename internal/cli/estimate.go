package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/ptscope/ptscope/internal/estimate"
	"github.com/ptscope/ptscope/internal/units"
)

const estimateUsage = `Usage: ptscope estimate [--model NAME | --config config.json | --layers N --hidden N ...] [setup flags]

Predicts the GPU memory of one rank for training (or, with --forward-only, inference) of a
decoder-only Transformer: parameters, gradients, optimizer state, master weights, activations
(per layer, attention/MLP split, logits and loss), temporaries, the peak over forward / backward /
optimizer step, the caching allocator's rounding and fragmentation, the CUDA context, cuBLAS
workspaces and NCCL buffers. peak_allocated is comparable to torch.cuda.max_memory_allocated().

Model presets: %s.
GPUs: %s.

Examples:
  ptscope estimate --model gpt2 --seq 512 --micro-batch 4 --gpu h100-80gb
  ptscope estimate --model lm-xl --seq 512 --micro-batch 4 --dtype bf16 --amp --explain
  ptscope estimate --model llama3-70b --tp 8 --pp 4 --dp 8 --zero 1 --seq 8192 --micro-batch 1 \
      --dtype bf16 --recompute selective --gpu h100-80gb
  ptscope estimate --config config.json --seq 2048 --fsdp --dp 8 --dtype bf16 --amp --json
  ptscope estimate --model lm-2.7B --gpu 4090 --sweep micro-batch=1..64 seq=512,1024
  ptscope estimate --model llama3-8b --fsdp --dp 8 --dtype bf16 --amp --seq 4096 --out runs
`

func estimateCommand() command {
	c := command{name: "estimate", summary: "predict per-GPU training memory of a configuration"}
	var gpus []string
	if gs, err := estimate.GPUs(); err == nil {
		for _, g := range gs {
			gpus = append(gpus, g.Name)
		}
	}
	c.usage = fmt.Sprintf(estimateUsage, strings.Join(estimate.PresetNames(), ", "), strings.Join(gpus, ", "))
	c.run = func(e *env, args []string) error { return runEstimate(e, c, args) }
	return c
}

type estimateFlags struct {
	model, config                                   string
	layers, hidden, heads, kvHeads, ffn, vocab, smx int
	headDim, experts, topK                          int
	mlp, norm                                       string
	tied, bias                                      bool
	dropout                                         float64

	gpu, devMem string
	out         string
	explain     bool
	jsonOut     bool
	sweep       stringList
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func runEstimate(e *env, c command, args []string) error {
	fs := newFlagSet(e, c)
	var f estimateFlags
	s := estimate.DefaultSetup()
	fs.StringVar(&f.model, "model", "", "model preset (see the list above)")
	fs.StringVar(&f.config, "config", "", "Hugging Face config.json")
	fs.IntVar(&f.layers, "layers", 0, "layers")
	fs.IntVar(&f.hidden, "hidden", 0, "hidden size")
	fs.IntVar(&f.heads, "heads", 0, "attention heads")
	fs.IntVar(&f.kvHeads, "kv-heads", 0, "key/value heads (GQA; default heads)")
	fs.IntVar(&f.headDim, "head-dim", 0, "head dimension (default hidden/heads)")
	fs.IntVar(&f.ffn, "ffn", 0, "MLP hidden size (default 4·hidden)")
	fs.IntVar(&f.vocab, "vocab", 0, "vocabulary size")
	fs.IntVar(&f.smx, "seq-max", 0, "learned positions (max sequence length)")
	fs.StringVar(&f.mlp, "mlp", "", "gelu | swiglu")
	fs.StringVar(&f.norm, "norm", "", "layernorm | rmsnorm")
	fs.BoolVar(&f.tied, "tied-embeddings", false, "input and output embeddings share weights")
	fs.BoolVar(&f.bias, "bias", false, "linear layers have biases")
	fs.Float64Var(&f.dropout, "dropout", 0, "dropout probability (adds 1-byte masks)")
	fs.IntVar(&f.experts, "experts", 0, "MoE experts per layer")
	fs.IntVar(&f.topK, "top-k", 0, "experts per token")

	fs.IntVar(&s.Seq, "seq", 0, "sequence length (default: the model's seq-max, at most 2048)")
	fs.IntVar(&s.MicroBatch, "micro-batch", 1, "micro-batch size per rank")
	fs.StringVar(&s.DType, "dtype", "fp32", "fp32 | bf16 | fp16")
	fs.BoolVar(&s.AMP, "amp", false, "torch.autocast over fp32 weights (the dtype is the autocast dtype)")
	fs.StringVar(&s.Optimizer, "optimizer", "adamw", "adamw | adam | sgd (momentum) | adafactor | adamw8bit")
	fs.IntVar(&s.GradAccum, "grad-accum", 1, "gradient accumulation steps")
	fs.IntVar(&s.MicroBatches, "micro-batches", 0, "micro-batches per step in a pipeline (default grad-accum)")
	fs.StringVar(&s.Recompute, "recompute", "none", "none | selective | full (activation checkpointing per layer)")
	fs.BoolVar(&s.FlashAttention, "flash-attention", true, "fused attention (SDPA flash/memory-efficient): no seq² scores stored; --flash-attention=false for eager")
	fs.BoolVar(&s.ForwardOnly, "forward-only", false, "inference under torch.no_grad (no gradients, no optimizer)")
	fs.IntVar(&s.DP, "dp", 1, "data-parallel degree")
	fs.IntVar(&s.TP, "tp", 1, "tensor-parallel degree")
	fs.IntVar(&s.PP, "pp", 1, "pipeline-parallel degree")
	fs.IntVar(&s.VPP, "vpp", 1, "virtual pipeline stages per rank (interleaved)")
	fs.IntVar(&s.CP, "cp", 1, "context-parallel degree")
	fs.IntVar(&s.EP, "ep", 1, "expert-parallel degree")
	fs.BoolVar(&s.SP, "sp", false, "sequence parallelism (with --tp)")
	fs.IntVar(&s.Zero, "zero", 0, "ZeRO stage 0..3 (shards over dp·cp)")
	fs.BoolVar(&s.FSDP, "fsdp", false, "PyTorch FSDP full shard (ZeRO-3 with per-layer gathers)")
	fs.StringVar(&s.Offload, "offload", "", "optimizer | params (CPU offload)")
	fs.StringVar(&s.GradDType, "grad-dtype", "", "gradient dtype (default: parameter dtype; Megatron bf16 uses fp32)")
	fs.BoolVar(&s.MasterWeights, "master-weights", true, "fp32 master weights for 16-bit parameters")
	fs.BoolVar(&s.KeepLogits, "keep-logits", true, "the caller holds the logits until the step ends")

	fs.StringVar(&f.gpu, "gpu", "", "GPU for the verdict (h100-80gb, h200, a100-80gb, a100-40gb, l4, 4090, ...)")
	fs.StringVar(&f.devMem, "device-memory", "", "device memory for the verdict, e.g. 80GiB")
	fs.BoolVar(&f.explain, "explain", false, "print every term with its formula and numbers")
	fs.StringVar(&f.out, "out", "", "also write a run folder OUT/YYYYMMDD_HHMMSS_estimate_<model>/ (estimate.txt, estimate.json, phases.svg/png)")
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON document (docs/json.md)")
	calibrate := fs.String("calibrate", "", "compare the estimate term by term with a ptscope run bundle (real, --simulate-world-size or --no-gpu)")
	fs.Var(&f.sweep, "sweep", "sweep axes: micro-batch=1..64 seq=512,1024 (repeat --sweep, or give more axes as arguments)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	axesSpecs := append([]string{}, f.sweep...)
	for _, p := range pos {
		if len(f.sweep) > 0 && strings.Contains(p, "=") {
			axesSpecs = append(axesSpecs, p)
			continue
		}
		return usagef("estimate: unexpected argument %q (see ptscope estimate -h)", p)
	}
	m, err := estimateModel(f, set)
	if err != nil {
		return err
	}
	if s.Seq == 0 {
		s.Seq = min(m.SeqMax, 2048)
		if s.Seq == 0 {
			s.Seq = 2048
		}
	}
	dev := estimate.DefaultDevice()
	if f.gpu != "" {
		if dev, err = estimate.GPU(f.gpu); err != nil {
			return usagef("estimate: %v", err)
		}
	}
	if f.devMem != "" {
		n, err := units.ParseBytes(f.devMem)
		if err != nil || n <= 0 {
			return usagef("estimate: --device-memory: invalid size %q", f.devMem)
		}
		dev.MemoryBytes = n
		if f.gpu == "" {
			dev.Name = "device of " + units.Bytes(n)
		}
	}
	if len(axesSpecs) > 0 {
		return runSweep(e, m, s, dev, axesSpecs, f.jsonOut)
	}
	r, err := estimate.Estimate(m, s, dev)
	if err != nil {
		return usagef("estimate: %v", err)
	}
	if *calibrate != "" {
		return runCalibrate(e, r, *calibrate, f.jsonOut)
	}
	if f.out != "" {
		if err := writeEstimateOut(e, f.out, r); err != nil {
			return fmt.Errorf("estimate: --out %s: %w", f.out, err)
		}
	}
	if f.jsonOut {
		return writeEstimateJSON(e.stdout, r)
	}
	writeEstimateText(e.stdout, r, f.explain)
	return nil
}

// estimateModel builds the model from a preset, a config.json, or flags (flags override).
func estimateModel(f estimateFlags, set map[string]bool) (estimate.Model, error) {
	var m estimate.Model
	var err error
	switch {
	case f.model != "" && f.config != "":
		return m, usagef("estimate: give --model or --config, not both")
	case f.model != "":
		if m, err = estimate.Preset(f.model); err != nil {
			return m, usagef("estimate: %v", err)
		}
	case f.config != "":
		fh, err := os.Open(f.config)
		if err != nil {
			return m, usagef("estimate: %v", err)
		}
		defer fh.Close()
		if m, err = estimate.ReadHFConfig(io.LimitReader(fh, 16<<20), f.config); err != nil {
			return m, usagef("estimate: %v", err)
		}
	default:
		if !set["layers"] || !set["hidden"] || !set["heads"] || !set["vocab"] {
			return m, usagef("estimate: give --model NAME, --config FILE, or at least --layers --hidden --heads --vocab")
		}
		m = estimate.Model{Name: "custom", MLP: "gelu", Norm: "layernorm", SeqMax: 2048}
	}
	ov := func(name string, dst *int, v int) {
		if set[name] {
			*dst = v
		}
	}
	ov("layers", &m.Layers, f.layers)
	ov("hidden", &m.Hidden, f.hidden)
	ov("heads", &m.Heads, f.heads)
	ov("kv-heads", &m.KVHeads, f.kvHeads)
	ov("head-dim", &m.HeadDim, f.headDim)
	ov("ffn", &m.FFN, f.ffn)
	ov("vocab", &m.Vocab, f.vocab)
	ov("seq-max", &m.SeqMax, f.smx)
	ov("experts", &m.Experts, f.experts)
	ov("top-k", &m.TopK, f.topK)
	if set["mlp"] {
		m.MLP = f.mlp
		if f.mlp == "swiglu" && m.Activation == "gelu" {
			m.Activation = ""
		}
	}
	if set["norm"] {
		m.Norm = f.norm
	}
	if set["tied-embeddings"] {
		m.TiedEmbeddings = f.tied
	}
	if set["bias"] {
		m.Bias = f.bias
	}
	if set["dropout"] {
		m.Dropout = f.dropout
	}
	if m.FFN == 0 && m.Hidden > 0 {
		m.FFN = 4 * m.Hidden
	}
	return m, nil
}

func writeEstimateText(w io.Writer, r *estimate.Result, explain bool) {
	m, s, top := r.Model, r.Setup, r.TopRank()
	prec := s.DType
	if s.AMP {
		prec = "fp32 weights + " + s.DType + " autocast"
	}
	mode := "training with " + s.Optimizer
	if s.ForwardOnly {
		mode = "inference (no_grad)"
	}
	fmt.Fprintf(w, "ptscope estimate: %s, %.1fM params, seq %d, micro-batch %d, %s, %s\n", m.Name, float64(r.Params)/1e6, s.Seq, s.MicroBatch, prec, mode)
	fmt.Fprintf(w, "layout: dp %d, tp %d, pp %d, cp %d, ep %d%s, zero %d%s, recompute %s, attention %s\n\n",
		s.DP, s.TP, s.PP, s.CP, s.EP, ifs(s.SP, " +sp", ""), s.Zero, ifs(s.FSDP, " (fsdp)", ""), s.Recompute, ifs(s.FlashAttention, "fused (flash/SDPA)", "eager"))
	if len(r.Ranks) > 1 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "rank\tparams\tpeak allocated\tpeak reserved\tdevice total\tpeak phase\t")
		for i, rk := range r.Ranks {
			mark := ""
			if i == r.Top {
				mark = " <- most loaded"
			}
			fmt.Fprintf(tw, "%s\t%.1fM\t%s\t%s\t%s\t%s%s\t\n", rk.Name, float64(rk.Params)/1e6, units.Bytes(rk.PeakAllocatedBytes), units.Bytes(rk.PeakReservedBytes), units.Bytes(rk.DeviceTotalBytes), rk.PeakPhase, mark)
		}
		tw.Flush()
		fmt.Fprintf(w, "\nmost loaded rank: %s\n", top.Name)
	}
	ms := top.ModelStates
	fmt.Fprintf(w, "model states on this rank: parameters %s, gradients %s, optimizer state %s, master weights %s",
		units.Bytes(ms["parameters"]), units.Bytes(ms["gradients"]), units.Bytes(ms["optimizer_state"]), units.Bytes(ms["master_weights"]))
	if ms["fp32_grad_copy"] > 0 {
		fmt.Fprintf(w, ", fp32 gradient copy %s", units.Bytes(ms["fp32_grad_copy"]))
	}
	fmt.Fprintf(w, " (allocator rounding included: %s)\n\n", units.Bytes(top.AllocatorRounding))
	fmt.Fprintf(w, "at the peak (%s):\n", top.PeakPhase)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if explain {
		fmt.Fprintln(tw, "  term\tsize\tbytes\twhere\tformula")
	} else {
		fmt.Fprintln(tw, "  term\tsize\tbytes\twhere")
	}
	for _, t := range top.Terms {
		if t.Bytes == 0 && !explain {
			continue
		}
		if explain {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\n", t.Name, units.Bytes(t.Bytes), t.Bytes, t.Where, t.Formula)
		} else {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", t.Name, units.Bytes(t.Bytes), t.Bytes, t.Where)
		}
	}
	tw.Flush()
	a := top.Activations
	switch {
	case s.ForwardOnly:
		fmt.Fprintf(w, "\nactivations: none kept for backward (inference); one layer's transients are under temporaries\n")
	case a.RecomputedLayer > 0:
		fmt.Fprintf(w, "\nactivations: %s per layer kept (full recompute: the layer input) x %d layers x %.2f micro-batches = %s; backward rebuilds one layer at a time: %s (attention %s, MLP %s, norms/residual %s)\n",
			units.Bytes(a.PerLayerBytes), a.Layers, a.InFlight, units.Bytes(a.LayersTotalBytes), units.Bytes(a.RecomputedLayer), units.Bytes(a.AttentionBytes), units.Bytes(a.MLPBytes), units.Bytes(a.NormBytes))
	default:
		fmt.Fprintf(w, "\nactivations: %s per layer (attention %s, MLP %s, norms/residual %s) x %d layers x %.2f micro-batches = %s\n",
			units.Bytes(a.PerLayerBytes), units.Bytes(a.AttentionBytes), units.Bytes(a.MLPBytes), units.Bytes(a.NormBytes), a.Layers, a.InFlight, units.Bytes(a.LayersTotalBytes))
	}
	if a.LogitsBytes > 0 && !s.ForwardOnly {
		fmt.Fprintf(w, "logits %s, saved by the loss %s\n", units.Bytes(a.LogitsBytes), units.Bytes(a.LossBytes))
	}
	if explain {
		fmt.Fprintf(w, "\none residual-stream tensor: %s = %s\n", units.Bytes(a.ResidualTensor), a.ResidualTensorHow)
		if len(a.PerLayer) > 0 {
			fmt.Fprintln(w, "saved per layer (per micro-batch):")
		}
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, it := range a.PerLayer {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", it.Name, it.Group, units.Bytes(it.Bytes), it.Formula)
		}
		for _, it := range append(append([]estimate.ActItem{}, a.Embedding...), a.Head...) {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", it.Name, it.Group, units.Bytes(it.Bytes), it.Formula)
		}
		tw.Flush()
	}
	fmt.Fprintln(w, "\nphases (allocated at each phase's peak; the peak is the largest, not the sum):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, p := range top.Phases {
		mark := ""
		if p.Name == top.PeakPhase {
			mark = "<- peak"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", p.Name, units.Bytes(p.Bytes), mark)
		if explain {
			for _, t := range p.Terms {
				if t.Bytes != 0 {
					fmt.Fprintf(tw, "    %s\t%s\t%s\n", t.Name, units.Bytes(t.Bytes), t.Formula)
				}
			}
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\npeak allocated  %s (%d B)  ~ torch.cuda.max_memory_allocated()\n", units.Bytes(top.PeakAllocatedBytes), top.PeakAllocatedBytes)
	fmt.Fprintf(w, "peak reserved   %s (%d B)  ~ torch.cuda.max_memory_reserved()\n", units.Bytes(top.PeakReservedBytes), top.PeakReservedBytes)
	fmt.Fprintf(w, "device total    %s (%d B)  reserved + CUDA context + NCCL (what nvidia-smi shows)\n", units.Bytes(top.DeviceTotalBytes), top.DeviceTotalBytes)
	if fits, known := r.Fits(); known {
		head := r.Device.MemoryBytes - top.DeviceTotalBytes
		verdict := "FITS"
		if !fits {
			verdict = "DOES NOT FIT"
		}
		var frag int64
		for _, t := range top.Terms {
			if t.Name == "fragmentation_allowance" {
				frag = t.Bytes
			}
		}
		if head >= 0 && head < frag {
			// measured fragmentation ranged from about 0 to 3x the allowance (docs/validation.md)
			verdict = "FITS, but tightly (headroom below the fragmentation allowance, which varies run to run)"
		}
		fmt.Fprintf(w, "verdict: %s on %s (%s): headroom %s (%s)\n", verdict, r.Device.Name, units.Bytes(r.Device.MemoryBytes), units.Bytes(head), units.Percent(float64(head)/float64(r.Device.MemoryBytes)))
		if !fits {
			for _, h := range estimateHints(r) {
				fmt.Fprintf(w, "hint: %s\n", h)
			}
		}
	} else {
		fmt.Fprintln(w, "verdict: give --gpu or --device-memory for a fit verdict")
	}
}

// estimateHints suggests the usual levers for the most loaded rank, largest saving first.
func estimateHints(r *estimate.Result) []string {
	s, top := r.Setup, r.TopRank()
	a := top.Activations
	var hs []string
	if s.TP > 1 && !s.SP {
		hs = append(hs, fmt.Sprintf("--sp shards the %s of LayerNorm inputs/outputs per layer that tensor parallelism replicates", units.Bytes(a.NormBytes)))
	}
	if s.Recompute != "full" && !s.ForwardOnly {
		hs = append(hs, fmt.Sprintf("--recompute full keeps only each layer's input (activations now %s)", units.Bytes(a.LayersTotalBytes)))
	}
	if !s.ForwardOnly && s.Zero < 3 && s.DP*s.CP > 1 {
		hs = append(hs, fmt.Sprintf("--zero %d shards more model state over the %d data-parallel ranks", s.Zero+1, s.DP*s.CP))
	}
	if s.MicroBatch > 1 {
		hs = append(hs, "a smaller --micro-batch with more --grad-accum keeps the same global batch")
	}
	return hs
}

func ifs(b bool, t, f string) string {
	if b {
		return t
	}
	return f
}

type jsonPhase struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

type jsonRank struct {
	Name               string               `json:"name"`
	Stage              int                  `json:"stage"`
	Params             int64                `json:"params"`
	PeakAllocatedBytes int64                `json:"peak_allocated_bytes"`
	PeakReservedBytes  int64                `json:"peak_reserved_bytes"`
	DeviceTotalBytes   int64                `json:"device_total_bytes"`
	Fits               *bool                `json:"fits,omitempty"`
	PeakPhase          string               `json:"peak_phase"`
	Breakdown          map[string]int64     `json:"breakdown"`
	Phases             []jsonPhase          `json:"phases"`
	Activations        estimate.Activations `json:"activations"`
	ModelStates        map[string]int64     `json:"model_states"`
	AllocatorRounding  int64                `json:"allocator_rounding_bytes"`
	Terms              []estimate.Term      `json:"terms"`
}

type jsonEstimate struct {
	SchemaVersion     int            `json:"schema_version"`
	Model             estimate.Model `json:"model"`
	Setup             estimate.Setup `json:"setup"`
	Device            string         `json:"device"`
	DeviceMemoryBytes int64          `json:"device_memory_bytes,omitempty"`
	HeadroomBytes     *int64         `json:"headroom_bytes,omitempty"`
	Params            int64          `json:"params"`
	jsonRank
	Ranks []jsonRank `json:"ranks,omitempty"`
}

func rankJSON(r *estimate.Result, rk estimate.Rank) jsonRank {
	j := jsonRank{Name: rk.Name, Stage: rk.Stage, Params: rk.Params, PeakAllocatedBytes: rk.PeakAllocatedBytes,
		PeakReservedBytes: rk.PeakReservedBytes, DeviceTotalBytes: rk.DeviceTotalBytes, PeakPhase: rk.PeakPhase,
		Breakdown: map[string]int64{}, Activations: rk.Activations, Terms: rk.Terms,
		ModelStates: rk.ModelStates, AllocatorRounding: rk.AllocatorRounding}
	for _, t := range rk.Terms {
		j.Breakdown[t.Name] += t.Bytes
	}
	for _, p := range rk.Phases {
		j.Phases = append(j.Phases, jsonPhase{p.Name, p.Bytes})
	}
	if r.Device.MemoryBytes > 0 {
		f := rk.DeviceTotalBytes <= r.Device.MemoryBytes
		j.Fits = &f
	}
	return j
}

func writeEstimateJSON(w io.Writer, r *estimate.Result) error {
	doc := jsonEstimate{SchemaVersion: 1, Model: r.Model, Setup: r.Setup, Device: r.Device.Name,
		DeviceMemoryBytes: r.Device.MemoryBytes, Params: r.Params, jsonRank: rankJSON(r, *r.TopRank())}
	if r.Device.MemoryBytes > 0 {
		h := r.Device.MemoryBytes - r.TopRank().DeviceTotalBytes
		doc.HeadroomBytes = &h
	}
	if len(r.Ranks) > 1 {
		for _, rk := range r.Ranks {
			doc.Ranks = append(doc.Ranks, rankJSON(r, rk))
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

func runSweep(e *env, m estimate.Model, s estimate.Setup, dev estimate.Device, specs []string, asJSON bool) error {
	if dev.MemoryBytes <= 0 {
		return usagef("estimate: --sweep needs --gpu or --device-memory to decide what fits")
	}
	var axes []estimate.SweepAxis
	for _, sp := range specs {
		ax, err := estimate.ParseSweepAxis(sp)
		if err != nil {
			return usagef("estimate: %v", err)
		}
		axes = append(axes, ax)
	}
	rows, best, err := estimate.Sweep(m, s, dev, axes)
	if err != nil {
		return usagef("estimate: %v", err)
	}
	if asJSON {
		doc := map[string]any{"schema_version": 1, "model": m.Name, "device": dev.Name, "device_memory_bytes": dev.MemoryBytes,
			"axes": axes, "rows": rows, "best": nil}
		if best >= 0 {
			doc["best"] = rows[best]
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	fmt.Fprintf(e.stdout, "ptscope estimate sweep: %s on %s (%s)\n\n", m.Name, dev.Name, units.Bytes(dev.MemoryBytes))
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	var hdr []string
	for _, a := range axes {
		hdr = append(hdr, a.Name)
	}
	fmt.Fprintf(tw, "%s\tpeak allocated\tpeak reserved\tdevice total\tfits\t\n", strings.Join(hdr, "\t"))
	for i, r := range rows {
		var vs []string
		for _, v := range r.Values {
			vs = append(vs, fmt.Sprint(v))
		}
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t%s\t\n", strings.Join(vs, "\t"), r.Error)
			continue
		}
		mark := ifs(r.Fits, "yes", "no")
		if i == best {
			mark += " <- largest"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", strings.Join(vs, "\t"), units.Bytes(r.PeakAllocatedBytes), units.Bytes(r.PeakReservedBytes), units.Bytes(r.DeviceTotalBytes), mark)
	}
	tw.Flush()
	if best < 0 {
		fmt.Fprintln(e.stdout, "\nnothing in the sweep fits")
		return nil
	}
	var kv []string
	keys := make([]string, 0, len(rows[best].ValueMap))
	for k := range rows[best].ValueMap {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		kv = append(kv, fmt.Sprintf("%s=%d", k, rows[best].ValueMap[k]))
	}
	fmt.Fprintf(e.stdout, "\nlargest setting that fits: %s (device total %s)\n", strings.Join(kv, " "), units.Bytes(rows[best].DeviceTotalBytes))
	return nil
}
