package whatif

import (
	"fmt"
	"sort"

	"github.com/ptscope/ptscope/internal/estimate"
)

// Proposal is one change of the run's job that fits its device, with the
// predicted peak.
type Proposal struct {
	// Flags are the estimate flags that make the change ("--micro-batch 24
	// --grad-accum 2"); Env the environment it needs, if any.
	Flags   string   `json:"flags"`
	Env     string   `json:"env,omitempty"`
	Changes []string `json:"changes"`
	// Cost ranks the proposals: 0 costs nothing (an allocator setting),
	// 1 a smaller micro-batch with accumulation (same global batch, a
	// little slower), 2 lower precision where the run computed in fp32,
	// 3 activation recompute (about a third more compute), 4 bf16 weights
	// (numerics change).
	Cost               int              `json:"cost"`
	Why                string           `json:"why"`
	PeakAllocatedBytes int64            `json:"peak_allocated_bytes"`
	PeakReservedBytes  int64            `json:"peak_reserved_bytes"`
	DeviceTotalBytes   int64            `json:"device_total_bytes"`
	HeadroomBytes      int64            `json:"headroom_bytes"`
	Verdict            estimate.Verdict `json:"verdict"`
}

// roundBatches are the micro-batches proposals choose from.
var roundBatches = []int{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512}

// NeedsProposals says whether a prediction calls for proposals: the job
// does not fit, fits tightly, or the run ran out of memory.
func NeedsProposals(res *Result) bool {
	return res.Verdict == estimate.DoesNotFit || res.Verdict == estimate.Tight || res.Run != nil && res.Run.OOM != nil
}

// Propose lists up to n of the cheapest single changes of the setup s (the
// run's job, or a changed one) that fit the device, cheapest first, each
// with its predicted peak; when no single change fits, recompute together
// with the largest micro-batch that then fits.
func (p *Predictor) Propose(s estimate.Setup, n int) []Proposal {
	if p.dev.MemoryBytes <= 0 {
		return nil
	}
	var out []Proposal
	from := s
	if r, err := p.Predict(s); err == nil {
		from = r.Setup // as the estimate fills it in, to list only what the proposal changes
	}
	try := func(t estimate.Setup, cost int, why string) bool {
		res, err := p.Predict(t)
		if err != nil || !res.Verdict.Fit() {
			return false
		}
		pr := Proposal{Changes: Changes(from, res.Setup), Cost: cost, Why: why,
			PeakAllocatedBytes: res.PeakAllocatedBytes, PeakReservedBytes: res.PeakReservedBytes,
			DeviceTotalBytes: res.DeviceTotalBytes, HeadroomBytes: *res.HeadroomBytes, Verdict: res.Verdict}
		pr.Flags, pr.Env = flagsOf(from, res.Setup)
		out = append(out, pr)
		return true
	}
	if !s.ExpandableSegments {
		t := s
		t.ExpandableSegments = true
		try(t, 0, "the allocator maps one growing range instead of caching split blocks: the reserved memory stays within a few MiB of the allocated")
	}
	if !s.ForwardOnly {
		if mb, acc, ok := p.largestBatch(s); ok {
			t := s
			t.MicroBatch, t.GradAccum, t.MicroBatches = mb, acc, 0
			try(t, 1, fmt.Sprintf("the largest micro-batch that fits, %d steps of accumulation keep the batch of %d", acc, s.MicroBatch*max(s.GradAccum, 1)))
		}
	}
	if s.DType == estimate.FP32 {
		t := s
		t.DType = estimate.BF16Mixed
		try(t, 2, "bf16 autocast: 16-bit activations, the weights and optimizer stay fp32")
	}
	if !s.ForwardOnly && s.Recompute != estimate.RecomputeFull {
		t := s
		t.Recompute = estimate.RecomputeFull
		if !try(t, 3, "each layer keeps only its input and recomputes the rest in backward") {
			if mb, acc, ok := p.largestBatch(t); ok {
				t.MicroBatch, t.GradAccum, t.MicroBatches = mb, acc, 0
				try(t, 3, fmt.Sprintf("recompute, and the largest micro-batch that then fits (%d steps of accumulation)", acc))
			}
		}
	}
	if s.DType == estimate.BF16Mixed && !s.ForwardOnly {
		t := s
		t.DType = estimate.BF16True
		try(t, 4, "bf16 weights, gradients and optimizer state (check the numerics: no fp32 master copy)")
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Cost < out[j].Cost })
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// largestBatch is the largest round micro-batch below s's that fits, with
// the accumulation steps that keep at least s's batch per step.
func (p *Predictor) largestBatch(s estimate.Setup) (int, int, bool) {
	want := s.MicroBatch * max(s.GradAccum, 1)
	for i := len(roundBatches) - 1; i >= 0; i-- {
		mb := roundBatches[i]
		if mb >= s.MicroBatch {
			continue
		}
		t := s
		t.MicroBatch, t.GradAccum, t.MicroBatches = mb, (want+mb-1)/mb, 0
		if res, err := p.Predict(t); err == nil && res.Verdict.Fit() {
			return mb, t.GradAccum, true
		}
	}
	return 0, 0, false
}

// flagsOf writes a change as estimate flags and the environment it needs.
func flagsOf(a, b estimate.Setup) (string, string) {
	var f string
	add := func(s string) {
		if f != "" {
			f += " "
		}
		f += s
	}
	if a.MicroBatch != b.MicroBatch {
		add(fmt.Sprintf("--micro-batch %d", b.MicroBatch))
	}
	if a.GradAccum != b.GradAccum {
		add(fmt.Sprintf("--grad-accum %d", b.GradAccum))
	}
	if a.DType != b.DType {
		add("--dtype " + b.DType.String())
	}
	if a.Recompute != b.Recompute {
		add("--recompute " + b.Recompute.String())
	}
	env := ""
	if b.ExpandableSegments && !a.ExpandableSegments {
		add("--expandable-segments")
		env = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
	}
	return f, env
}

// Advice is what analyze says of a run that ran out of memory or came near
// its device's limit: the peak its job needs (the prediction of the run's own
// job) and the cheapest changes that fit.
type Advice struct {
	Source string `json:"source"`
	// Why: "oom" (the run ran out of memory) or "near-limit" (its reserved
	// peak came within 10% of what it could use).
	Why                string           `json:"why"`
	PeakAllocatedBytes int64            `json:"peak_allocated_bytes"`
	DeviceTotalBytes   int64            `json:"device_total_bytes"`
	DeviceMemoryBytes  int64            `json:"device_memory_bytes"`
	Verdict            estimate.Verdict `json:"verdict"`
	Proposals          []Proposal       `json:"proposals"`
	// Error says why no prediction could be made (the bundle does not
	// record its model, say); the rest is then empty.
	Error string   `json:"error,omitempty"`
	Notes []string `json:"notes,omitempty"`
}

// WantsAdvice says whether analyze should advise on a run: it ran out of
// memory, or its reserved peak came within 10% of the memory it could use.
func WantsAdvice(r *Run) (string, bool) {
	switch {
	case r.OOM != nil:
		return "oom", true
	case r.DeviceMemoryBytes > 0 && r.MaxReservedBytes*10 >= r.DeviceMemoryBytes*9:
		return "near-limit", true
	}
	return "", false
}

// Advise predicts the run's own job and lists up to three changes that fit.
func Advise(r *Run, g Given) *Advice {
	why, _ := WantsAdvice(r)
	a := &Advice{Source: r.Source, Why: why, DeviceMemoryBytes: r.DeviceMemoryBytes, Proposals: []Proposal{}}
	m, s, notes, err := Job(r, g)
	if err != nil {
		a.Error = err.Error()
		return a
	}
	p, err := NewPredictor(r, m, s, DeviceFor(r), notes)
	if err != nil {
		a.Error = err.Error()
		return a
	}
	res, err := p.Predict(s)
	if err != nil {
		a.Error = err.Error()
		return a
	}
	a.PeakAllocatedBytes, a.DeviceTotalBytes, a.Verdict, a.Notes = res.PeakAllocatedBytes, res.DeviceTotalBytes, res.Verdict, res.Notes
	a.Proposals = p.Propose(s, 3)
	return a
}
