package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/estimate"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/report/estreport"
	"github.com/ptscope/ptscope/internal/whatif"
)

// runFromBundle reads what one rank of a bundle measured for `estimate
// --from`: rank < 0 picks the lowest rank (a simulated run's one rank).
func runFromBundle(dir string, rank int) (*whatif.Run, error) {
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return nil, usagef("%s is a file; --from takes the folder of a ptscope run bundle (a snapshot is read by ptscope analyze)", dir)
	}
	b, err := bundle.ReadBundle(dir)
	if err != nil {
		return nil, err
	}
	if len(b.Ranks) == 0 {
		return nil, fmt.Errorf("%s: the bundle captured no rank", b.Dir)
	}
	r := &b.Ranks[0]
	if rank >= 0 {
		r = nil
		for i := range b.Ranks {
			if b.Ranks[i].Rank == rank {
				r = &b.Ranks[i]
			}
		}
		if r == nil {
			return nil, fmt.Errorf("%s: no rank %d in the bundle", b.Dir, rank)
		}
	}
	return whatif.FromBundle(b, r), nil
}

// fromFlags are the flags of `estimate --from`.
type fromFlags struct {
	dir          string
	rank         int
	runMB, runSq int
	expandable   bool
}

func (f *fromFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dir, "from", "", "predict from a ptscope run `BUNDLE`: its measured terms stand, the other flags name what changes")
	fs.IntVar(&f.rank, "rank", -1, "with --from: the bundle's rank to start from (default: the lowest)")
	fs.IntVar(&f.runMB, "run-micro-batch", 0, "with --from: the run's micro-batch, when its bundle does not record it")
	fs.IntVar(&f.runSq, "run-seq", 0, "with --from: the run's sequence length, when its bundle does not record it")
	fs.BoolVar(&f.expandable, "expandable-segments", false, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (reserved memory close to allocated)")
}

// modelFlagNames are the flags that describe the model.
var modelFlagNames = []string{"model", "config", "layers", "hidden", "heads", "kv-heads", "head-dim", "ffn", "vocab",
	"seq-max", "mlp", "norm", "tied-embeddings", "bias", "dropout", "experts", "top-k"}

// estimateFrom is `estimate --from RUN [flags]`: the run's job changed by
// the setup flags given (set), or a sweep of it.
func estimateFrom(from fromFlags, f modelFlags, set map[string]bool, s estimate.Setup, keep keepLogits,
	gpu, devMem string, specs []string, sweep bool) (report.Document, error) {
	run, err := runFromBundle(from.dir, from.rank)
	if err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			return nil, err
		}
		return nil, usagef("estimate: --from: %v", err)
	}
	g := whatif.Given{MicroBatch: from.runMB, Seq: from.runSq}
	for _, n := range modelFlagNames {
		if set[n] {
			m, err := estimateModel(f, set)
			if err != nil {
				return nil, err
			}
			g.Model = &m
			break
		}
	}
	m, base, notes, err := whatif.Job(run, g)
	if err != nil {
		return nil, usagef("estimate: --from %s: %v", from.dir, err)
	}
	dev := whatif.DeviceFor(run)
	if gpu != "" || devMem != "" {
		if dev, err = estimateDevice(gpu, devMem); err != nil {
			return nil, err
		}
	}
	p, err := whatif.NewPredictor(run, m, base, dev, notes)
	if err != nil {
		return nil, setupError(err)
	}
	_, base = p.Base()
	target := base
	applySetFlags(&target, s, set, keep)
	if sweep {
		axes := whatif.DefaultAxes(target)
		if len(specs) > 1 || len(specs) == 1 && specs[0] != "auto" {
			axes = nil
			for _, sp := range specs {
				if sp == "auto" {
					axes = append(axes, whatif.DefaultAxes(target)...)
					continue
				}
				ax, err := estimate.ParseSweepAxis(sp)
				if err != nil {
					return nil, usagef("estimate: --sweep: %v", err)
				}
				axes = append(axes, ax)
			}
		}
		res, err := p.Sweep(target, axes)
		if err != nil {
			return nil, usagef("estimate: --sweep: %v", err)
		}
		return estreport.Sweep{R: res}, nil
	}
	res, err := p.Predict(target)
	if err != nil {
		return nil, setupError(err)
	}
	if whatif.NeedsProposals(res) {
		res.Proposals = p.Propose(target, 3)
	}
	return estreport.WhatIf{R: res}, nil
}

// applySetFlags copies onto dst the setup fields whose flags were given.
func applySetFlags(dst *estimate.Setup, src estimate.Setup, set map[string]bool, keep keepLogits) {
	for name, copyField := range map[string]func(){
		"seq":                 func() { dst.Seq = src.Seq },
		"micro-batch":         func() { dst.MicroBatch = src.MicroBatch },
		"grad-accum":          func() { dst.GradAccum, dst.MicroBatches = src.GradAccum, 0 },
		"micro-batches":       func() { dst.MicroBatches = src.MicroBatches },
		"dtype":               func() { dst.DType = src.DType },
		"optimizer":           func() { dst.Optimizer = src.Optimizer },
		"recompute":           func() { dst.Recompute = src.Recompute },
		"attention":           func() { dst.Attention = src.Attention },
		"compile":             func() { dst.Compile = src.Compile },
		"forward-only":        func() { dst.ForwardOnly = src.ForwardOnly },
		"dp":                  func() { dst.DP = src.DP },
		"tp":                  func() { dst.TP = src.TP },
		"tp-plan":             func() { dst.TPPlan = src.TPPlan },
		"pp":                  func() { dst.PP = src.PP },
		"vpp":                 func() { dst.VPP = src.VPP },
		"cp":                  func() { dst.CP = src.CP },
		"ep":                  func() { dst.EP = src.EP },
		"sp":                  func() { dst.SP = src.SP },
		"zero":                func() { dst.Zero = src.Zero },
		"fsdp":                func() { dst.FSDP = src.FSDP },
		"param-dtype":         func() { dst.ParamDType = src.ParamDType },
		"reduce-dtype":        func() { dst.ReduceDType = src.ReduceDType },
		"offload":             func() { dst.Offload = src.Offload },
		"ddp":                 func() { dst.DDP = src.DDP },
		"ddp-bucket-view":     func() { dst.DDPBucketView = src.DDPBucketView },
		"gpus-per-node":       func() { dst.GPUsPerNode = src.GPUsPerNode },
		"grad-dtype":          func() { dst.GradDType = src.GradDType },
		"master-weights":      func() { dst.MasterWeights = src.MasterWeights },
		"expandable-segments": func() { dst.ExpandableSegments = src.ExpandableSegments },
		"keep-logits":         func() { dst.KeepLogits, dst.KeepLogitsStep = keep != "none", keep == "step" },
	} {
		if set[name] {
			copyField()
		}
	}
	// a precision change resets what the old one implied
	if set["dtype"] && !set["grad-dtype"] {
		dst.GradDType = estimate.DTypeDefault
	}
	if set["dtype"] && !set["master-weights"] {
		dst.MasterWeights = false
	}
	if (set["fsdp"] || set["dp"] || set["zero"]) && !dst.FSDP && !set["param-dtype"] {
		dst.ParamDType, dst.ReduceDType = estimate.DTypeDefault, estimate.DTypeDefault
	}
}
