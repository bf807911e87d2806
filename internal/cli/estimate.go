package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ptscope/ptscope/internal/estimate"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/report/estreport"
	"github.com/ptscope/ptscope/internal/units"
)

const estimateUsage = `Usage: ptscope estimate [--model NAME | --config config.json |
                        --layers N --hidden N ...] [setup flags]

Predicts the GPU memory of one rank for training (or, with --forward-only,
inference) of a decoder-only Transformer: parameters, gradients, optimizer
state, master weights, activations (per layer, attention/MLP split, logits
and loss), temporaries, the peak over forward / backward / optimizer step,
the caching allocator's rounding and fragmentation, the CUDA context, cuBLAS
workspaces, NCCL buffers and, with --offload, host memory. peak allocated is
comparable to torch.cuda.max_memory_allocated(). Defaults: bf16 autocast over
fp32 weights, AdamW, SDPA attention, no recompute, one GPU. Formulas and
validation: docs/estimate.md.

--dtype names the precision as people name it: bf16 (torch.autocast over fp32
weights: HF Trainer --bf16, Lightning bf16-mixed), bf16-true
(model.to(torch.bfloat16)), fp16, fp16-true, fp32.

%s
%s

Examples:
  ptscope estimate --model llama3-8b --seq 4096 --gpu h100
  ptscope estimate --config config.json --seq 2048 --micro-batch 4 \
      --recompute full --explain
  ptscope estimate --model llama3-8b --fsdp --dp 8 --param-dtype bf16 \
      --reduce-dtype fp32 --seq 4096
  ptscope estimate --config config.json --tp 4 --tp-plan hf --micro-batch 4 \
      --seq 2048 --gpu h100
  ptscope estimate --model llama3-70b --dtype bf16-true --master-weights \
      --grad-dtype fp32 --tp 8 --tp-plan megatron --sp --pp 4 --dp 8 \
      --zero 1 --seq 8192 --recompute selective --gpu h100
  ptscope estimate --model llama3-8b --zero 2 --dp 8 --offload optimizer \
      --gpu 4090
  ptscope estimate --gpu h100 --sweep model=gpt2-medium,gpt2-large,gpt2-xl \
      seq=256,512,1024 dtype=fp32,bf16
  ptscope estimate --gpu h100 --fsdp --dp 8 \
      --sweep model=llama2-7b,llama3-8b seq=2048,4096,8192 recompute=none,full
  ptscope estimate --model lm-2.7B --gpu 4090 --sweep micro-batch=1..64 \
      seq=512,1024 --json
  ptscope estimate --model lm-small --seq 512 --micro-batch 8 \
      --calibrate runs/latest
  ptscope estimate --config config.json --trainer hf --micro-batch 8

What-if from a run (ptscope run's bundle): the run's measured terms stand,
the estimate scales what the flags change; --sweep auto tabulates
micro-batch x recompute x precision for the same job:
  ptscope estimate --from ptscope-runs/latest --micro-batch 16
  ptscope estimate --from ptscope-runs/latest --dtype fp32 --recompute full
  ptscope estimate --from ptscope-runs/latest --sweep auto
`

func estimateCommand() command {
	c := command{name: "estimate", summary: "predict per-GPU training memory of a configuration"}
	var gpus []string
	if gs, err := estimate.GPUs(); err == nil {
		for _, g := range gs {
			gpus = append(gpus, g.Name)
		}
	}
	presets := report.Wrap("Model presets: "+strings.Join(estimate.PresetNames(), ", ")+".", 80, "", "  ")
	gl := report.Wrap("GPUs: "+strings.Join(gpus, ", ")+".", 80, "", "  ")
	c.usage = fmt.Sprintf(estimateUsage, strings.Join(presets, "\n"), strings.Join(gl, "\n"))
	c.run = func(e *env, args []string) error { return runEstimate(e, c, args) }
	return c
}

// modelFlags describe a model by hand or override a preset's or config's fields.
type modelFlags struct {
	model, config                                   string
	layers, hidden, heads, kvHeads, ffn, vocab, smx int
	headDim, experts, topK                          int
	mlp, norm                                       string
	tied, bias                                      bool
	dropout                                         float64
}

func (f *modelFlags) register(fs *flag.FlagSet) {
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
}

// keepLogits is --keep-logits: how long the caller holds the model output.
type keepLogits string

func (k *keepLogits) String() string { return string(*k) }
func (k *keepLogits) Set(v string) error {
	switch v {
	case "step", "backward", "none":
		*k = keepLogits(v)
		return nil
	}
	return fmt.Errorf("want step, backward or none")
}

func registerSetup(fs *flag.FlagSet, s *estimate.Setup, keep *keepLogits) {
	fs.IntVar(&s.Seq, "seq", 0, "sequence length (default: the model's max positions, at most 2048)")
	fs.IntVar(&s.MicroBatch, "micro-batch", s.MicroBatch, "micro-batch size per rank")
	fs.IntVar(&s.GradAccum, "grad-accum", s.GradAccum, "gradient accumulation steps")
	fs.IntVar(&s.MicroBatches, "micro-batches", 0, "micro-batches per step in a pipeline (default grad-accum, at least pp)")
	fs.TextVar(&s.DType, "dtype", s.DType, "`PRECISION`: bf16 (autocast over fp32 weights) | bf16-true (bf16 weights) | fp16 | fp16-true | fp32")
	fs.TextVar(&s.Optimizer, "optimizer", s.Optimizer, "`NAME`: adamw (foreach) | adamw-fused (fused=True, HF Trainer's default) | adam | sgd (momentum) | adafactor | adamw8bit")
	fs.TextVar(&s.Recompute, "recompute", s.Recompute, "`MODE`: none | selective | full (activation checkpointing per layer)")
	fs.TextVar(&s.Attention, "attention", s.Attention, "`IMPL`: sdpa (fused: flash or memory-efficient) | eager (keeps seq² scores)")
	fs.BoolVar(&s.Compile, "compile", false, "torch.compile (recomputes pointwise ops instead of saving them)")
	fs.BoolVar(&s.ForwardOnly, "forward-only", false, "inference under torch.no_grad (no gradients, no optimizer)")
	fs.IntVar(&s.DP, "dp", s.DP, "data-parallel degree")
	fs.IntVar(&s.TP, "tp", s.TP, "tensor-parallel degree")
	fs.TextVar(&s.TPPlan, "tp-plan", s.TPPlan, "`PLAN`: hf (parallelize_module on the layers; embeddings, lm_head and logits replicated) | megatron (vocab-parallel embeddings and logits)")
	fs.IntVar(&s.PP, "pp", s.PP, "pipeline-parallel degree")
	fs.IntVar(&s.VPP, "vpp", s.VPP, "virtual pipeline stages per rank (interleaved)")
	fs.IntVar(&s.CP, "cp", s.CP, "context-parallel degree")
	fs.IntVar(&s.EP, "ep", s.EP, "expert-parallel degree")
	fs.BoolVar(&s.SP, "sp", false, "sequence parallelism (with --tp)")
	fs.IntVar(&s.Zero, "zero", 0, "ZeRO stage 0..3 (shards over dp·cp)")
	fs.BoolVar(&s.FSDP, "fsdp", false, "PyTorch FSDP2 (fully_shard per layer: ZeRO-3 with per-layer gathers)")
	fs.TextVar(&s.ParamDType, "param-dtype", s.ParamDType, "FSDP MixedPrecisionPolicy param_dtype `DTYPE` (e.g. bf16)")
	fs.TextVar(&s.ReduceDType, "reduce-dtype", s.ReduceDType, "FSDP MixedPrecisionPolicy reduce_dtype `DTYPE` (e.g. fp32)")
	fs.TextVar(&s.Offload, "offload", s.Offload, "`WHAT`: none | optimizer | params (CPU offload; host memory is reported)")
	fs.BoolVar(&s.DDP, "ddp", false, "DistributedDataParallel also at --dp 1 (its gradient buckets; dp > 1 without --zero or --fsdp implies it)")
	fs.BoolVar(&s.DDPBucketView, "ddp-bucket-view", false, "DDP with gradient_as_bucket_view=True (the gradients are views into the buckets; implies --ddp)")
	fs.IntVar(&s.GPUsPerNode, "gpus-per-node", s.GPUsPerNode, "ranks per host, for host memory per node")
	fs.TextVar(&s.GradDType, "grad-dtype", s.GradDType, "gradient `DTYPE` (default: the weights'; Megatron bf16 uses fp32)")
	fs.BoolVar(&s.MasterWeights, "master-weights", false, "fp32 master weights for bf16-true/fp16-true weights (Megatron, DeepSpeed)")
	fs.Var(keep, "keep-logits", "how long the caller holds the model output (`WHEN`): step (through the optimizer step), backward, none")
}

func runEstimate(e *env, c command, args []string) error {
	fs := newFlagSet(e, c)
	var f modelFlags
	f.register(fs)
	s := estimate.DefaultSetup()
	keep := keepLogits("step")
	registerSetup(fs, &s, &keep)
	var out outputFlags
	out.register(fs)
	var gpu, devMem, calibrate string
	var explain bool
	var sweep stringList
	var from fromFlags
	from.register(fs)
	var trainer string
	fs.StringVar(&trainer, "trainer", "", "the training loop's `FRAMEWORK`: hf (Hugging Face Trainer: --optimizer adamw-fused --keep-logits none unless given)")
	fs.StringVar(&gpu, "gpu", "", "GPU for the verdict (h100, h200, a100-80gb, a100-40gb, l4, 4090, ...)")
	fs.StringVar(&devMem, "device-memory", "", "device memory for the verdict, e.g. 80GiB")
	fs.BoolVar(&explain, "explain", false, "print every term with its formula, what one layer saves and each phase's terms")
	fs.StringVar(&calibrate, "calibrate", "", "compare the estimate term by term with a ptscope run bundle (real, --simulate-world-size or --no-gpu)")
	fs.Var(&sweep, "sweep", "sweep axes: model=A,B dtype=fp32,bf16 seq=1024,2048 micro-batch=1..64 recompute=none,full (repeat --sweep, or give more axes as arguments)")
	set, specs, err := parseEstimate(fs, args, &sweep)
	if err != nil {
		return err
	}
	if err := applyTrainer(trainer, &s, &keep, set); err != nil {
		return err
	}
	s.KeepLogits, s.KeepLogitsStep = keep != "none", keep == "step"
	s.ExpandableSegments = from.expandable
	dev, err := estimateDevice(gpu, devMem)
	if err != nil {
		return err
	}
	t, err := out.text(e.stdout)
	if err != nil {
		return err
	}
	if from.dir != "" {
		if calibrate != "" {
			return usagef("estimate: give --from or --calibrate, not both")
		}
		doc, err := estimateFrom(from, f, set, s, keep, gpu, devMem, specs, len(sweep) > 0)
		if err != nil {
			return err
		}
		return e.emit(doc, &out, t)
	}
	if len(specs) > 0 {
		if calibrate != "" {
			return usagef("estimate: give --sweep or --calibrate, not both")
		}
		doc, err := estimateSweep(f, set, s, dev, specs)
		if err != nil {
			return err
		}
		return e.emit(doc, &out, t)
	}
	return e.estimateOne(f, set, s, dev, calibrate, explain, &out, t)
}

// parseEstimate parses estimate's args into fs: the names of the flags
// given, and the sweep's axes (--sweep, registered in fs as sweep, then
// the arguments that are axes when there is a --sweep). A bad flag value is one line on stderr (the
// error returned), not the flag package's message and the whole usage
// besides.
func parseEstimate(fs *flag.FlagSet, args []string, sweep *stringList) (set map[string]bool, specs []string, err error) {
	usage := fs.Usage
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		usage()
	}
	if err != nil {
		return nil, nil, err
	}
	set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	specs = append([]string{}, *sweep...)
	for _, p := range pos {
		if len(*sweep) > 0 && (strings.Contains(p, "=") || p == "auto") {
			specs = append(specs, p)
			continue
		}
		return nil, nil, usagef("estimate: unexpected argument %q (see ptscope estimate -h)", p)
	}
	return set, specs, nil
}

// applyTrainer sets the defaults of the training loop trainer (--trainer)
// in s and keep, where the flags (set) leave them.
func applyTrainer(trainer string, s *estimate.Setup, keep *keepLogits, set map[string]bool) error {
	switch trainer {
	case "":
	case "hf", "hf-trainer", "transformers":
		// the Trainer's defaults: optim="adamw_torch_fused", and compute_loss drops
		// the model output before backward
		if !set["optimizer"] {
			s.Optimizer, set["optimizer"] = estimate.AdamWFused, true
		}
		if !set["keep-logits"] {
			*keep, set["keep-logits"] = "none", true
		}
	default:
		return usagef("estimate: --trainer %q: want hf", trainer)
	}
	return nil
}

// estimateOne estimates model f (set: the flags given) in setup s on dev
// and writes it, or, with calibrate, its comparison with that bundle.
func (e *env) estimateOne(f modelFlags, set map[string]bool, s estimate.Setup, dev estimate.Device, calibrate string, explain bool,
	out *outputFlags, t report.TextOptions) error {
	m, err := estimateModel(f, set)
	if err != nil {
		return err
	}
	if s.Seq == 0 {
		s.Seq = defaultSeq(m)
	}
	r, err := estimate.Estimate(m, s, dev)
	if err != nil {
		return setupError(err)
	}
	if calibrate != "" {
		meas, err := measurementFromBundle(calibrate)
		if err != nil {
			return usagef("estimate: --calibrate: %v", err)
		}
		c := estimate.Calibrate(r, meas)
		return e.emit(estreport.Calibration{C: &c}, out, t)
	}
	return e.emit(estreport.Estimate{R: r, Explain: explain}, out, t)
}

// defaultSeq is the model's max positions, at most 2048.
func defaultSeq(m estimate.Model) int {
	if m.SeqMax > 0 {
		return min(m.SeqMax, 2048)
	}
	return 2048
}

// setupError names the flag of an invalid setup value.
func setupError(err error) error {
	var se *estimate.SetupError
	if errors.As(err, &se) {
		return usagef("estimate: --%s %s", se.Field, se.Msg)
	}
	return usagef("estimate: %v", err)
}

func estimateDevice(gpu, devMem string) (estimate.Device, error) {
	dev := estimate.DefaultDevice()
	if gpu != "" {
		var err error
		if dev, err = estimate.GPU(gpu); err != nil {
			return dev, usagef("estimate: --gpu: %v", err)
		}
	}
	if devMem != "" {
		n, err := units.ParseBytes(devMem)
		if err != nil || n <= 0 {
			return dev, usagef("estimate: --device-memory: invalid size %q", devMem)
		}
		dev.MemoryBytes = n
		if gpu == "" {
			dev.Name = "device of " + units.Bytes(n)
		}
	}
	return dev, nil
}

// estimateSweep resolves the sweep's models and runs it.
func estimateSweep(f modelFlags, set map[string]bool, s estimate.Setup, dev estimate.Device, specs []string) (report.Document, error) {
	var axes []estimate.SweepAxis
	var models []estimate.Model
	for _, sp := range specs {
		ax, err := estimate.ParseSweepAxis(sp)
		if err != nil {
			return nil, usagef("estimate: --sweep: %v", err)
		}
		if ax.Name == "model" {
			if f.model != "" || f.config != "" {
				return nil, usagef("estimate: give the models in --sweep model=... or with --model/--config, not both")
			}
			for _, v := range ax.Values {
				g := f
				if strings.HasSuffix(strings.ToLower(v), ".json") {
					g.config = v
				} else {
					g.model = v
				}
				m, err := estimateModel(g, set)
				if err != nil {
					return nil, err
				}
				models = append(models, m)
			}
		}
		axes = append(axes, ax)
	}
	if len(models) == 0 {
		m, err := estimateModel(f, set)
		if err != nil {
			return nil, err
		}
		models = append(models, m)
	}
	if s.Seq == 0 {
		s.Seq = defaultSeq(models[0])
		for _, m := range models[1:] {
			s.Seq = min(s.Seq, defaultSeq(m))
		}
	}
	res, err := estimate.Sweep(models, s, dev, axes)
	if err != nil {
		return nil, usagef("estimate: --sweep: %v", err)
	}
	return estreport.Sweep{R: res}, nil
}

// estimateModel builds the model from a preset, a config.json, or flags (flags override).
func estimateModel(f modelFlags, set map[string]bool) (estimate.Model, error) {
	var m estimate.Model
	var err error
	switch {
	case f.model != "" && f.config != "":
		return m, usagef("estimate: give --model or --config, not both")
	case f.model != "":
		if m, err = estimate.Preset(f.model); err != nil {
			return m, usagef("estimate: --model: %v", err)
		}
	case f.config != "":
		fh, err := os.Open(f.config)
		if err != nil {
			return m, usagef("estimate: --config: %v", err)
		}
		defer fh.Close()
		if m, err = estimate.ReadHFConfig(io.LimitReader(fh, 16<<20), f.config); err != nil {
			return m, usagef("estimate: --config %v", err)
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

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
